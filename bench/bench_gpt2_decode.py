#!/usr/bin/env python3
"""GPT-2 124M greedy decoding: Tessera (`tessera generate --hf`, a key/value cache, float32 /
weight-only int8 / int4 group 32, and the same with int8 dynamic activations, --act-quant int8:
rows "int8 a8" / "int4 a8 g32") against llama.cpp (`llama-bench -p 0 -n 128`, f32 / q8_0 /
q4_0 GGUF made by llama.cpp's convert_hf_to_gguf.py and llama-quantize from the same weights).

Tokens/s of decoding 128 tokens (Tessera: the 128 one-token steps after a 4-id prompt; llama-bench:
its tg128, 128 one-token steps from an empty cache), on each thread count, the two sides
alternating run by run, best of --repeats. Also the weight bytes each token reads and that rate
as a fraction of this host's read bandwidth (bench_weight_only stream: a stream-like sum over
256 MiB on 1 and 2 threads). Not in ctest: it needs the 124M model, llama.cpp and minutes.

  python3 bench/bench_gpt2_decode.py --hf /work/llama/gpt2-random --gguf-dir /work/llama \\
      --llama-bin /work/llama/build/bin [--threads 1,2] [--repeats 3] [--tokens 128]
      [--rows "int8 a8,int4 a8 g32"]
The GGUF files are DIR/gpt2-f32.gguf, gpt2-q8_0.gguf, gpt2-q4_0.gguf (bench/results/gpt2-decode.md
says how they were made).
"""
import argparse, json, os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "464,2068,7586,21831"
# (row name, --quantize, llama.cpp's GGUF type, --act-quant)
PAIRS = [("float32", None, "f32", None), ("int8", "int8", "q8_0", None),
         ("int4 g32", "int4", "q4_0", None), ("int8 a8", "int8", "q8_0", "int8"),
         ("int4 a8 g32", "int4", "q4_0", "int8")]


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def tessera_run(a, quant, threads, act=None):
    cmd = [a.tessera, "generate", "--hf", a.hf, "--greedy", "--tokens", str(a.tokens + 1),
           "--prompt-ids", PROMPT, "--threads", str(threads)]
    if quant:
        cmd += ["--quantize", quant]
    if act:
        cmd += ["--act-quant", act]
    out = sh(cmd)
    m = re.search(r"decode: (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)", out)
    return float(m.group(3))


def llama_run(a, kind, threads, n=None):
    env = dict(os.environ, LD_LIBRARY_PATH=a.llama_bin)
    out = sh([os.path.join(a.llama_bin, "llama-bench"), "-m",
              os.path.join(a.gguf_dir, "gpt2-%s.gguf" % kind), "-p", "0", "-n", str(n or a.tokens),
              "-t", str(threads), "-r", "1", "-o", "json"], env)
    return json.loads(out)[0]


def tessera_bytes(cfg, quant, act=None):
    """bytes a token reads: the four linears of each block and the tied head (float32, or the
    integers plus a float32 scale and an int32 zero point a row / a group of 32; int4 with int8
    activations: a float16 scale a group of 32 and no zero point, decision 0051), the biases and
    the layer norms (float32); one row of each embedding is left out"""
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    F = cfg.get("n_inner") or 4 * C
    shapes = [(3 * C, C), (C, C), (F, C), (C, F)] * L + [(V, C)]
    tot = 4 * (L * (3 * C + C + F + C + 4 * C) + 2 * C)
    for n, k in shapes:
        tot += {None: 4 * n * k, "int8": n * k + 8 * n,
                "int4": n * k // 2 + (2 if act else 8) * n * k // 32}[quant]
    return tot


def llama_size(a, kind, cfg):
    """llama-bench's model_size (every tensor) less position_embd (float32, one row read a token):
    the bytes a token reads (token_embd is the tied head); and its model_type"""
    j = llama_run(a, kind, 1, n=1)
    return j["model_size"] - 4 * cfg["n_positions"] * cfg["n_embd"], j["model_type"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hf", default="/work/llama/gpt2-random")
    p.add_argument("--gguf-dir", default="/work/llama")
    p.add_argument("--llama-bin", default="/work/llama/build/bin")
    p.add_argument("--tessera", default=os.path.join(ROOT, "build", "tessera"))
    p.add_argument("--stream", default=os.path.join(ROOT, "build", "bench", "bench_weight_only"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--parse", help="no runs: the table from the run lines of an earlier output")
    p.add_argument("--rows", help="the rows to run, comma separated (default all: %s)" %
                   ", ".join(r[0] for r in PAIRS))
    a = p.parse_args()
    pairs = [r for r in PAIRS if not a.rows or r[0] in a.rows.split(",")]
    cfg = json.load(open(os.path.join(a.hf, "config.json")))
    s = sh([a.stream, "stream"])
    m = re.search(r"([0-9.]+) GB/s on 1 thread, ([0-9.]+) GB/s on 2", s)
    bw = {1: float(m.group(1)), 2: float(m.group(2))}
    cpu = re.search(r"Model name:\s*(.*)", sh(["lscpu"])).group(1).strip()
    flags = open("/proc/cpuinfo").read()
    isa = [f for f in ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")
           if re.search(r"\b%s\b" % f, flags)]
    print("host: %s, %d cpus, %s; stream read %.1f GB/s (1 thread), %.1f GB/s (2); load %s" %
          (cpu, os.cpu_count(), " ".join(isa), bw[1], bw[2], loadavg()))
    sizes = {kind: llama_size(a, kind, cfg) for _, _, kind, _ in pairs}
    best = {}
    if a.parse:
        pat = re.compile(r"threads (\d+) run \d+: tessera (.+?)\s+([0-9.]+) tok/s \| llama.cpp "
                         r"(\S+)\s+([0-9.]+) tok/s")
        for line in open(a.parse):
            m = pat.search(line)
            if m:
                t, name, kind = int(m.group(1)), m.group(2).strip(), m.group(4)
                best[("tessera", name, t)] = max(best.get(("tessera", name, t), 0),
                                                 float(m.group(3)))
                best[("llama", kind, t)] = max(best.get(("llama", kind, t), 0), float(m.group(5)))
    for t in [] if a.parse else [int(x) for x in a.threads.split(",")]:
        for r in range(a.repeats):
            for name, quant, kind, act in pairs:  # alternate: Tessera, llama.cpp, pair by pair
                v = tessera_run(a, quant, t, act)
                best[("tessera", name, t)] = max(best.get(("tessera", name, t), 0), v)
                j = llama_run(a, kind, t)
                best[("llama", kind, t)] = max(best.get(("llama", kind, t), 0), j["avg_ts"])
                print("  threads %d run %d: tessera %-8s %7.2f tok/s | llama.cpp %-5s %7.2f tok/s"
                      " (load %s)" % (t, r + 1, name, v, kind, j["avg_ts"], loadavg()),
                      flush=True)
    print("\n| threads | Tessera | tok/s | weight MB/token | GB/s | of read | llama.cpp | tok/s |"
          " weight MB/token | GB/s | of read | Tessera / llama.cpp |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in sorted({k[2] for k in best}):
        for name, quant, kind, act in pairs:
            if ("tessera", name, t) not in best:
                continue
            tb = tessera_bytes(cfg, quant, act)
            lb, ltype = sizes[kind]
            tv, lv = best[("tessera", name, t)], best[("llama", kind, t)]
            print("| %d | %s | %.1f | %.1f | %.1f | %.0f%% | %s | %.1f | %.1f | %.1f | %.0f%%"
                  " | %.2fx |" %
                  (t, name, tv, tb / 1e6, tv * tb / 1e9, 100 * tv * tb / 1e9 / bw[t], ltype, lv,
                   lb / 1e6, lv * lb / 1e9, 100 * lv * lb / 1e9 / bw[t], tv / lv))
    print("\nload at the end: %s" % loadavg())


if __name__ == "__main__":
    main()
