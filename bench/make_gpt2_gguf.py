#!/usr/bin/env python3
"""The GGUF files of bench/bench_gpt2_decode.py: a Hugging Face GPT-2 folder converted by llama.cpp's
own convert_hf_to_gguf.py (f32), then llama-quantize (q8_0, q4_0).

The converter needs tokenizer files, and the folder (GPT2LMHeadModel(GPT2Config()) saved by
transformers, no network here) has none: this trains a byte-level BPE of exactly vocab_size
(50257) tokens with the `tokenizers` library on local text (/usr/share/games/fortunes,
/usr/share/doc, /usr/share/common-licenses, /usr/share/dict) and saves it, with config.json plus
"n_ctx" (= n_positions: the converter's GPT-2 reads that older key), in a copy of the folder
(model.safetensors linked, not copied). The converter refuses the unknown pre-tokenizer hash of
that vocabulary: a copy of its `conversion/` package gets one line more in get_vocab_base_pre()
mapping this hash to "gpt-2" (the diff is written to OUT/convert.patch). The tokens only name the
ids: decoding speed does not depend on them.

Run with /opt/torch2/bin/torch-python (torch, transformers, tokenizers):
  make_gpt2_gguf.py --hf /work/llama/gpt2-random --llama /work/llama/llama_cpp_python-0.3.36/vendor/llama.cpp \\
      --bin /work/llama/build/bin --out /work/llama
"""
import argparse, difflib, glob, gzip, json, os, re, shutil, subprocess, sys


def texts():
    for pat in ("/usr/share/games/fortunes/*", "/usr/share/doc/**/*", "/usr/share/common-licenses/*",
                "/usr/share/dict/*"):
        for f in glob.glob(pat, recursive=True):
            if (os.path.isfile(f) and not os.path.islink(f) and os.path.getsize(f) < 5_000_000
                    and not f.endswith(".dat")):
                try:
                    data = gzip.open(f, "rb").read() if f.endswith(".gz") else open(f, "rb").read()
                    yield data.decode("utf-8", "ignore")
                except Exception:
                    pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hf", required=True)
    p.add_argument("--llama", required=True, help="llama.cpp's source folder")
    p.add_argument("--bin", required=True, help="the folder of llama-quantize")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    cfg = json.load(open(os.path.join(a.hf, "config.json")))
    tokdir = os.path.join(a.out, "gpt2-hf-with-tokenizer")
    os.makedirs(tokdir, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts(), vocab_size=cfg["vocab_size"], min_frequency=1,
                            special_tokens=["<|endoftext|>"])
    if bpe.get_vocab_size() != cfg["vocab_size"]:
        sys.exit("the local text gave %d tokens, not %d" % (bpe.get_vocab_size(), cfg["vocab_size"]))
    bpe.save_model(tokdir)
    PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                            bos_token="<|endoftext|>", unk_token="<|endoftext|>").save_pretrained(tokdir)
    cfg["n_ctx"] = cfg["n_positions"]
    json.dump(cfg, open(os.path.join(tokdir, "config.json"), "w"), indent=2)
    link = os.path.join(tokdir, "model.safetensors")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(os.path.join(a.hf, "model.safetensors")), link)

    # the converter, with this vocabulary's pre-tokenizer hash named "gpt-2"
    conv = os.path.join(a.out, "convert-copy")
    shutil.rmtree(conv, ignore_errors=True)
    shutil.copytree(os.path.join(a.llama, "conversion"), os.path.join(conv, "conversion"))
    shutil.copy(os.path.join(a.llama, "convert_hf_to_gguf.py"), conv)
    env = dict(os.environ, PYTHONPATH=os.path.join(a.llama, "gguf-py"))
    out_f32 = os.path.join(a.out, "gpt2-f32.gguf")
    cmd = [sys.executable, os.path.join(conv, "convert_hf_to_gguf.py"), tokdir, "--outtype", "f32",
           "--outfile", out_f32]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        m = re.search(r"chkhsh:\s+([0-9a-f]{64})", r.stdout + r.stderr)
        if not m:
            sys.exit(r.stdout[-3000:] + r.stderr[-3000:])
        base = os.path.join(conv, "conversion", "base.py")
        src = open(base).read()
        anchor = '        if chkhsh == "3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454":'
        assert src.count(anchor) == 1, "llama.cpp's get_vocab_base_pre() changed"
        new = src.replace(anchor, '        if chkhsh == "%s":\n            # a byte-level BPE trained '
                          'locally (Tessera\'s bench/make_gpt2_gguf.py): GPT-2\'s pre-tokenizer\n'
                          '            res = "gpt-2"\n' % m.group(1) + anchor)
        open(base, "w").write(new)
        with open(os.path.join(a.out, "convert.patch"), "w") as f:
            f.writelines(difflib.unified_diff(src.splitlines(True), new.splitlines(True),
                                              "conversion/base.py", "conversion/base.py"))
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode:
            sys.exit(r.stdout[-3000:] + r.stderr[-3000:])
    for q in ("q8_0", "q4_0"):
        subprocess.run([os.path.join(a.bin, "llama-quantize"), out_f32,
                        os.path.join(a.out, "gpt2-%s.gguf" % q), q], check=True,
                       capture_output=True, env=dict(os.environ, LD_LIBRARY_PATH=a.bin))
    print("wrote", ", ".join(os.path.join(a.out, "gpt2-%s.gguf" % k) for k in ("f32", "q8_0", "q4_0")))


if __name__ == "__main__":
    main()
