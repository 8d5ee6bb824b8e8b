"""gen_text_corpus.py — not from pytorch/examples: writes a small generated corpus in word_language_model's
data layout (./data/text/{train,valid,test}.txt, one sentence a line) from a fixed-seed Markov chain over
a 60-word vocabulary, so that a language model has something learnable."""
import os
import random

rng = random.Random(0)
words = ["w%d" % i for i in range(60)]
# each word is followed by one of 3 likely successors most of the time
succ = {w: rng.sample(words, 3) for w in words}


def sentence():
    w, out = rng.choice(words), []
    for _ in range(rng.randint(5, 15)):
        out.append(w)
        w = rng.choice(succ[w]) if rng.random() < 0.9 else rng.choice(words)
    return " ".join(out)


os.makedirs(os.path.join("data", "text"), exist_ok=True)
for name, n in (("train", 1500), ("valid", 150), ("test", 150)):
    with open(os.path.join("data", "text", name + ".txt"), "w") as f:
        f.write("\n".join(sentence() for _ in range(n)) + "\n")
