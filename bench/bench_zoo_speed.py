"""bench_zoo_speed.py — timm models' training step and batch-1 inference on Tessera against
PyTorch 2.x eager, side by side in one run (issue 75, part 7).

  python3 bench/bench_zoo_speed.py                      # the default model list below
  python3 bench/bench_zoo_speed.py resnet18 vit_tiny_patch16_224 --threads 1 --iters 5
  python3 bench/bench_zoo_speed.py page                 # re-render the page from the JSON

Per model, the two sides alternate (PyTorch, Tessera, PyTorch, Tessera: --rounds 2), each a fresh
process of bench/zoo_speed_worker.py (PyTorch: $TORCH_PYTHON, default /opt/torch2/bin/torch-python;
Tessera: /usr/bin/python3 -m tessera.compat with PYTHONPATH=build/python plus $MODEL_LIBS, default
/opt/torch-libs, for timm), and each side keeps its best median over the rounds. The training step
is zero_grad, forward, cross-entropy, backward and SGD with momentum at batch 8 (--batch) at the
model's own input size; inference is one image under no_grad in eval mode. Both sides run on
--threads threads. Ratio = PyTorch's time / Tessera's (above 1: Tessera faster). Results merge into
bench/results/timm-speed.json by model; the page bench/results/timm-speed.md is rendered from it
with the geometric means, the five slowest ratios and the host (CPU model, ISA flags, load).
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(ROOT, "bench", "results", "timm-speed.json")
PAGE = os.path.join(ROOT, "bench", "results", "timm-speed.md")
MODELS = [
    "resnet18", "resnet50", "regnetx_002", "regnety_002", "mixer_b16_224", "densenet121",
    "convnext_atto", "efficientnet_b0", "swin_tiny_patch4_window7_224", "vit_tiny_patch16_224",
    "mobilenetv3_small_100", "mobilenetv2_100", "deit_tiny_patch16_224", "resnet10t",
    "resnet26d", "ghostnet_100", "levit_128s", "mixer_s32_224", "dla34", "hrnet_w18_small",
    "rexnet_100", "xception41", "dpn68", "efficientvit_b0", "mobilevit_xxs", "fastvit_t8",
]


def host():
    model, flags = "?", set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                       "amx_bf16", "amx_tile") if f in flags]
    return model, " ".join(isa), os.cpu_count()


def run_side(side, name, a):
    worker = os.path.join(ROOT, "bench", "zoo_speed_worker.py")
    args = [worker, name, "--threads", str(a["threads"]), "--batch", str(a["batch"]),
            "--iters", str(a["iters"])]
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(a["threads"])
    if side == "torch":
        cmd = [os.environ.get("TORCH_PYTHON", "/opt/torch2/bin/torch-python")] + args
    else:
        libs = os.environ.get("MODEL_LIBS", "/opt/torch-libs")
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "build", "python"), libs])
        cmd = ["/usr/bin/python3", "-m", "tessera.compat"] + args
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a["timeout"])
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {a['timeout']} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail[:200]}
    return json.loads(lines[-1])


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def render(data):
    model, isa, ncpu = host()
    rows, tr, inf = [], [], []
    for name in sorted(data["models"]):
        r = data["models"][name]
        t, s = r.get("torch", {}), r.get("tessera", {})
        if "error" in t or "error" in s:
            rows.append(f"| {name} | | | | | | | {t.get('error') or s.get('error')} |")
            continue
        rt = t["train_ms"] / s["train_ms"]
        ri = t["infer_ms"] / s["infer_ms"]
        tr.append((rt, name))
        inf.append((ri, name))
        rows.append(f"| {name} | {'x'.join(map(str, s['input'][1:]))} | {t['train_ms']:.1f} | "
                    f"{s['train_ms']:.1f} | **{rt:.2f}** | {t['infer_ms']:.2f} | {s['infer_ms']:.2f} | "
                    f"**{ri:.2f}** |")
    m = data.get("meta", {})
    out = ["# timm models: Tessera against PyTorch eager, side by side", "",
           "Made by `python3 bench/bench_zoo_speed.py` (its docstring says how each side is timed).",
           f"Host: {m.get('cpu', model)}; ISA {m.get('isa', isa)}; {m.get('threads', '?')} thread(s) "
           f"each side, training batch {m.get('batch', 8)}; PyTorch {m.get('torch', '?')}; load "
           f"average at the start {m.get('load', '?')} (this machine is shared: ratios are what to "
           "read, not times).", "",
           f"**Geometric mean of the ratios (PyTorch ms / Tessera ms; above 1: Tessera faster) over "
           f"{len(tr)} models: training step {geomean([r for r, _ in tr]):.2f}x, batch-1 inference "
           f"{geomean([r for r, _ in inf]):.2f}x.**", ""]
    if tr:
        out.append("Slowest five, training: " + ", ".join(
            f"{n} {r:.2f}x" for r, n in sorted(tr)[:5]) + ". Inference: " + ", ".join(
            f"{n} {r:.2f}x" for r, n in sorted(inf)[:5]) + ".")
        out.append("")
    out += ["| model | input | PyTorch train ms | Tessera train ms | ratio | PyTorch infer ms | "
            "Tessera infer ms | ratio |", "|---|---|---|---|---|---|---|---|"] + rows
    open(PAGE, "w").write("\n".join(out) + "\n")
    print(f"train geomean {geomean([r for r, _ in tr]):.2f}x  infer geomean "
          f"{geomean([r for r, _ in inf]):.2f}x  ({len(tr)} models) -> {PAGE}")


def main(argv):
    a = {"threads": 1, "batch": 8, "iters": 5, "rounds": 2, "timeout": 900}
    names = []
    it = iter(argv)
    for x in it:
        if x.startswith("--"):
            a[x[2:].replace("-", "_")] = int(next(it))
        else:
            names.append(x)
    data = json.load(open(JSON)) if os.path.exists(JSON) else {"models": {}}
    if names == ["page"]:
        render(data)
        return
    names = names or MODELS
    model, isa, _ = host()
    data["meta"] = {"cpu": model, "isa": isa, "threads": a["threads"], "batch": a["batch"],
                    "load": " ".join(open("/proc/loadavg").read().split()[:3])}
    for name in names:
        best = {}
        for _ in range(a["rounds"]):
            for side in ("torch", "tessera"):
                r = run_side(side, name, a)
                if "error" in r:
                    best[side] = r
                    continue
                if side == "torch":
                    data["meta"]["torch"] = r.get("torch", "?")
                b = best.get(side)
                if b is None or "error" in b:
                    best[side] = r
                else:
                    for k in ("train_ms", "infer_ms"):
                        b[k] = min(b[k], r[k])
        data["models"][name] = best
        t, s = best.get("torch", {}), best.get("tessera", {})
        if "error" in t or "error" in s:
            print(f"{name}: {t.get('error') or s.get('error')}", flush=True)
        else:
            print(f"{name}: train {t['train_ms']:.1f} / {s['train_ms']:.1f} ms = "
                  f"{t['train_ms'] / s['train_ms']:.2f}x, infer {t['infer_ms']:.2f} / "
                  f"{s['infer_ms']:.2f} ms = {t['infer_ms'] / s['infer_ms']:.2f}x", flush=True)
        json.dump(data, open(JSON, "w"), indent=1, sort_keys=True)
    render(data)


if __name__ == "__main__":
    main(sys.argv[1:])
