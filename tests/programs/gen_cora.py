"""gen_cora.py — not from pytorch/examples: writes a small generated citation graph in Cora's format
(./cora/cora.content: id, 64 binary features, class; ./cora/cora.cites: cited id, citing id) for the gat
example: 1800 papers in 7 classes whose features and citations mostly follow their class (fixed seed)."""
import os
import random

rng = random.Random(0)
n, nf, classes = 1800, 64, ["c%d" % i for i in range(7)]
ids = rng.sample(range(10000, 99999), n)
label = [rng.randrange(7) for _ in range(n)]
os.makedirs("cora", exist_ok=True)
with open(os.path.join("cora", "cora.content"), "w") as f:
    for i in range(n):
        # each class favours its own 9 features
        feats = [1 if rng.random() < (0.35 if j // 9 == label[i] else 0.04) else 0 for j in range(nf)]
        f.write("%d\t%s\t%s\n" % (ids[i], "\t".join(map(str, feats)), classes[label[i]]))
by_class = [[i for i in range(n) if label[i] == c] for c in range(7)]
with open(os.path.join("cora", "cora.cites"), "w") as f:
    for i in range(n):
        for _ in range(3):
            j = rng.choice(by_class[label[i]]) if rng.random() < 0.8 else rng.randrange(n)
            if j != i:
                f.write("%d\t%d\n" % (ids[j], ids[i]))
