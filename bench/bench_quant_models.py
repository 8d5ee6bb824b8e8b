"""bench_quant_models.py — int8 inference of whole models: Tessera's ONNX importer against ONNX
Runtime on the same QDQ file, and PyTorch's x86 quantized backend (issue 78). Not in ctest.

  /opt/torch2/bin/torch-python bench/bench_quant_models.py      # 3 models, batch 1 and 32, 224
  /opt/torch2/bin/torch-python bench/bench_quant_models.py resnet18 --batch 1 --size 112 --iters 5
  /opt/torch2/bin/torch-python bench/bench_quant_models.py page                    # re-render the page from the JSON

Files (cache dir --cache, default /tmp/tessera-quant-models): $TORCH_PYTHON (default
/opt/torch2/bin/torch-python) builds torchvision's model (weights=None, seed 0, BatchNorm
statistics perturbed as tools/onnx_real_models.py does), exports it (opset 17, TorchScript exporter,
BN folded, dynamic batch) and saves the state dict and 4 calibration batches of 8 random images;
it (it has onnxruntime 1.32) quantizes the file with onnxruntime.quantization.quantize_static (QDQ, per-channel
int8 weights, uint8 activations, MinMax calibration) -> NAME_qdq.onnx.

Timing: per model and batch the three sides alternate (ORT, Tessera, PyTorch, ... --rounds times),
each a fresh process of this file's `worker` (ORT and PyTorch: $TORCH_PYTHON; Tessera:
/usr/bin/python3 with PYTHONPATH=build/python), 1 intra-op thread each (--threads), two warm-up
runs then --iters timed ones; each side keeps its best median. PyTorch runs
torchvision.models.quantization.NAME(quantize=False) with the same weights: fuse_model, prepare
with get_default_qconfig('x86'), calibrate on the same batches, convert (engine 'x86').
Side "eager" (Tessera's eager quantized modules, tessera.ao / tessera.vision.models.quantization,
/usr/bin/python3): the same builder, fuse / prepare / calibrate / convert as PyTorch's side, then
PyTorch's converted state dict loaded (the torch side saves it; run it first), so both compute
with the same integers and qparams.
Check: Tessera's output and ORT's on the same input are both multiples of the last
DequantizeLinear's scale; the page gives the largest difference in those quanta (0: bit for bit);
eager against PyTorch likewise, in the converted model's last output scale.
Peak: this host's AVX512-VNNI int8 peak per core is measured by bench/bench_peak_vnni.c (a tight
vpdpbusd loop; build/bench/bench_peak_vnni, else compiled into the cache; --peak-gops overrides). Results merge into bench/results/quantization-speed.json;
the page is bench/results/quantization-speed.md.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(ROOT, "bench", "results", "quantization-speed.json")
PAGE = os.path.join(ROOT, "bench", "results", "quantization-speed.md")
MODELS = ["resnet18", "resnet50", "mobilenet_v2"]
TORCH_PY = os.environ.get("TORCH_PYTHON", "/opt/torch2/bin/torch-python")
# multiply-accumulates of one 224x224 image (torchvision's figures), for the fraction of peak
GMACS_224 = {"resnet18": 1.814, "resnet50": 4.089, "mobilenet_v2": 0.301}


# ------------------------------------------------------------------ the files
def prep(name, cache, size):
    """(torch-python) float ONNX, state dict, calibration batches and the test inputs."""
    import numpy as np
    import torch
    import torchvision

    os.makedirs(cache, exist_ok=True)
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.running_mean.normal_(0, 0.1, generator=g)
                mod.running_var.uniform_(0.5, 1.5, generator=g)
                mod.weight.uniform_(0.5, 1.5, generator=g)
                mod.bias.normal_(0, 0.1, generator=g)
    torch.save(model.state_dict(), os.path.join(cache, f"{name}_state.pt"))
    x = torch.randn(1, 3, size, size, generator=g)
    torch.onnx.export(model, (x,), os.path.join(cache, f"{name}_s{size}.onnx"), opset_version=17,
                      dynamo=False, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    calib = torch.randn(4, 8, 3, size, size, generator=g).numpy()
    np.save(os.path.join(cache, f"calib_s{size}.npy"), calib)


def quantize(name, cache, size):
    """(torch-python: onnxruntime) the QDQ file."""
    import numpy as np
    from onnxruntime import quantization as q

    calib = np.load(os.path.join(cache, f"calib_s{size}.npy"))

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": b} for b in calib])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(os.path.join(cache, f"{name}_s{size}.onnx"),
                      os.path.join(cache, f"{name}_s{size}_qdq.onnx"), Reader(),
                      quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)


def ensure_files(name, cache, size):
    qdq = os.path.join(cache, f"{name}_s{size}_qdq.onnx")
    if os.path.exists(qdq):
        return qdq
    me = os.path.abspath(__file__)
    for py, step in ((TORCH_PY, "prep"), (TORCH_PY, "quantize")):
        subprocess.run([py, me, step, name, "--cache", cache, "--size", str(size)], check=True)
    return qdq


# ------------------------------------------------------------------ one side, one process
def worker(side, name, cache, size, batch, iters, threads, save):
    import numpy as np

    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    qdq = os.path.join(cache, f"{name}_s{size}_qdq.onnx")
    if side == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
        fn = lambda: sess.run(None, {"input": x})[0]  # noqa: E731
    elif side == "tessera":
        import tessera

        tessera.set_num_threads(threads)
        m = tessera.onnx.load(qdq)
        m.eval()
        xt = tessera.from_numpy(x)

        def fn():
            with tessera.no_grad():
                return m(xt).numpy()
    elif side == "eager":
        import tessera
        import tessera.ao.quantization as tq
        import tessera.vision.models.quantization as tvq

        tessera.set_num_threads(threads)
        model = getattr(tvq, name)(quantize=False)
        model.load_state_dict(tessera.load(os.path.join(cache, f"{name}_state.pt")))
        model.eval()
        model.fuse_model()
        model.qconfig = tq.get_default_qconfig("x86")
        tq.prepare(model, inplace=True)
        with tessera.no_grad():
            for b in np.load(os.path.join(cache, f"calib_s{size}.npy")):
                model(tessera.from_numpy(b))
        tq.convert(model, inplace=True)
        model.load_state_dict(tessera.load(os.path.join(cache, f"{name}_s{size}_x86q.pt")))
        xt = tessera.from_numpy(x)

        def fn():
            with tessera.no_grad():
                return model(xt).numpy()
    else:
        import torch
        import torchvision.models.quantization as tq

        torch.set_num_threads(threads)
        torch.backends.quantized.engine = "x86"
        model = getattr(tq, name)(weights=None, quantize=False)
        model.load_state_dict(torch.load(os.path.join(cache, f"{name}_state.pt")))
        model.eval()
        model.fuse_model()
        model.qconfig = torch.ao.quantization.get_default_qconfig("x86")
        torch.ao.quantization.prepare(model, inplace=True)
        with torch.no_grad():
            for b in np.load(os.path.join(cache, f"calib_s{size}.npy")):
                model(torch.from_numpy(b))
        torch.ao.quantization.convert(model, inplace=True)
        torch.save(model.state_dict(), os.path.join(cache, f"{name}_s{size}_x86q.pt"))
        xt = torch.from_numpy(x)

        def fn():
            with torch.no_grad():
                return model(xt).numpy()

    out = fn()
    fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    if save:
        np.save(save, out)
    print(json.dumps({"ms": 1e3 * ts[len(ts) // 2], "best_ms": 1e3 * ts[0], "iters": iters}))


def run_side(side, name, a, batch, save):
    tess = side in ("tessera", "eager")
    cmd = ["/usr/bin/python3" if tess else TORCH_PY, os.path.abspath(__file__),
           "worker", side, name, "--cache", a["cache"], "--size", str(a["size"]), "--batch",
           str(batch), "--iters", str(a["iters"]), "--threads", str(a["threads"]), "--save", save]
    env = dict(os.environ, OMP_NUM_THREADS=str(a["threads"]))
    if tess:
        env["PYTHONPATH"] = os.path.join(ROOT, "build", "python")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a["timeout"])
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {a['timeout']} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": ((p.stderr.strip().splitlines() or ["no output"])[-1])[:200]}
    return json.loads(lines[-1])


def out_scale(qdq):
    """the scale of the DequantizeLinear that makes the graph's output"""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = onnx.load(qdq)
    inits = {i.name: i for i in m.graph.initializer}
    outs = {o.name for o in m.graph.output}
    for nd in m.graph.node:
        if nd.op_type == "DequantizeLinear" and nd.output[0] in outs:
            return float(np.asarray(numpy_helper.to_array(inits[nd.input[1]])).ravel()[0])
    return None


def last_scale(state_dict_file):
    """(torch-python) the converted model's last output scale: its state dict's last *.scale"""
    import torch

    sd = torch.load(state_dict_file)
    return float([v for k, v in sd.items() if k.endswith(".scale")][-1])


def compare(qdq, a_npy, b_npy, s=None):
    import numpy as np

    s = s or out_scale(qdq)
    a, b = np.load(a_npy), np.load(b_npy)
    if a.shape != b.shape:
        return f"shapes {a.shape} {b.shape}"
    return int(np.max(np.rint(np.abs(a.astype(np.float64) - b) / s))) if s else None


# ------------------------------------------------------------------ the page
def host():
    model, flags = "?", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    isa = [f for f in ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")
           if f in flags]
    return model, " ".join(isa)


def peak_gops(a):
    if a.get("peak"):
        return a["peak"]
    exe = os.path.join(ROOT, "build", "bench", "bench_peak_vnni")
    if not os.path.exists(exe):  # standalone (no library): compile it into the cache
        exe = os.path.join(a["cache"], "bench_peak_vnni")
        subprocess.run(["cc", "-O2", os.path.join(ROOT, "bench", "bench_peak_vnni.c"), "-o", exe])
    try:
        p = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        return json.loads(p.stdout.strip().splitlines()[-1])["gops"]
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def render(data):
    m = data.get("meta", {})
    peak = m.get("peak_gops")
    rows = []
    for key in sorted(data["runs"]):
        r = data["runs"][key]
        o, t, p = (r.get(s, {}) for s in ("ort", "tessera", "torch"))
        if any("error" in x for x in (o, t, p)):
            rows.append(f"| {key} | | | | | | | {o.get('error') or t.get('error') or p.get('error')} |")
            continue
        gops = 2e-9 * GMACS_224[r["model"]] * 1e9 * (r["size"] / 224) ** 2 * r["batch"]
        frac = lambda ms: f"{100 * gops / (ms * 1e-3) / peak:.1f}%" if peak else "?"  # noqa: E731
        rows.append(f"| {r['model']} | {r['batch']} | {r['size']} | {o['ms']:.1f} ({frac(o['ms'])}) | "
                    f"{p['ms']:.1f} ({frac(p['ms'])}) | {t['ms']:.1f} ({frac(t['ms'])}) | "
                    f"**{o['ms'] / t['ms']:.2f}** / **{p['ms'] / t['ms']:.2f}** | {r.get('quanta')} |")
    out = ["# int8 inference of whole models: Tessera, ONNX Runtime, PyTorch x86", "",
           "Made by `/opt/torch2/bin/torch-python bench/bench_quant_models.py --iters 3 --rounds 2` "
           "(its docstring says how each side is timed and checked).",
           f"Host: {m.get('cpu')}; ISA {m.get('isa')}; {m.get('threads', 1)} thread each side; "
           f"onnxruntime {m.get('ort', '?')}; load average at the start {m.get('load', '?')} (the "
           "machine is shared with other jobs: read the ratios, not the times).",
           f"Int8 peak of one core: {peak} GOPS (2 ops per multiply-add; `bench/bench_peak_vnni.c`"
           ": a loop of independent `vpdpbusd zmm` on registers, 64 multiply-adds each).", "",
           "Ratios: ORT ms / Tessera ms and PyTorch ms / Tessera ms (above 1: Tessera faster); in "
           "brackets each time as a fraction of the peak (torchvision's multiply-adds at that size). "
           "Quanta: the largest difference between Tessera's and ORT's outputs, in units of the "
           "output's scale (0: equal).", "",
           "| model | batch | size | ORT ms | PyTorch ms | Tessera ms | ratios vs ORT / PyTorch | quanta |",
           "|---|---|---|---|---|---|---|---|"] + rows
    eager = []
    for key in sorted(data["runs"]):
        r = data["runs"][key]
        p, e = r.get("torch", {}), r.get("eager", {})
        if "ms" in p and "ms" in e:
            eager.append(f"| {r['model']} | {r['batch']} | {r['size']} | {p['ms']:.1f} | "
                         f"{e['ms']:.1f} | **{p['ms'] / e['ms']:.2f}** | {r.get('eager_quanta')} |")
    if eager:
        out += ["", "## Eager quantized modules against PyTorch's", "",
                "Tessera's tessera.ao quantized modules (side `eager`) with PyTorch's converted "
                "state dict, and PyTorch's x86 modules, in the same run. Ratio: PyTorch ms / "
                "Tessera ms. Quanta: the largest difference of the outputs in the last output "
                "scale. Each op computes PyTorch's x86 integers (docs/QUANTIZATION.md) except at "
                "about 3-4 near ties a million, where PyTorch's oneDNN conv rounds otherwise; in "
                "these random-weight networks a flipped integer grows layer by layer (ResNet-50, "
                "each layer fed PyTorch's own input: 14 of 4.2M conv outputs differ, by 1; chained: "
                "25-40% of layer3's outputs, up to 15), so the column measures the network's "
                "sensitivity more than an op's error (the ONNX rows, whose arithmetic is ORT's "
                "everywhere, are 0).", "",
                "| model | batch | size | PyTorch ms | Tessera eager ms | ratio | quanta |",
                "|---|---|---|---|---|---|---|"] + eager
    if data.get("notes"):
        out += [""] + data["notes"]
    open(PAGE, "w").write("\n".join(out) + "\n")
    print("\n".join(out[-len(rows) - 2:]))


def main(argv):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="*")
    ap.add_argument("--cache", default="/tmp/tessera-quant-models")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, action="append")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--save", default="")
    ap.add_argument("--sides", default="ort,tessera,torch,eager")  # torch before eager
    ap.add_argument("--peak-gops", type=float, default=0)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    w = a.what
    if w and w[0] == "prep":
        return prep(w[1], a.cache, a.size)
    if w and w[0] == "quantize":
        return quantize(w[1], a.cache, a.size)
    if w and w[0] == "worker":
        return worker(w[1], w[2], a.cache, a.size, (a.batch or [1])[0], a.iters, a.threads, a.save)
    data = json.load(open(JSON)) if os.path.exists(JSON) else {"runs": {}}
    if w and w[0] == "page":
        return render(data)
    opts = {"cache": a.cache, "size": a.size, "iters": a.iters, "threads": a.threads,
            "timeout": a.timeout, "peak": a.peak_gops}
    import onnxruntime

    cpu, isa = host()
    data["meta"] = {"cpu": cpu, "isa": isa, "threads": a.threads, "ort": onnxruntime.__version__,
                    "load": " ".join(open("/proc/loadavg").read().split()[:3]),
                    "peak_gops": peak_gops(opts)}
    sides = a.sides.split(",")
    for name in w or MODELS:
        qdq = ensure_files(name, a.cache, a.size)
        for batch in a.batch or [1, 32]:
            best = {}
            for _ in range(a.rounds):
                for side in sides:
                    r = run_side(side, name, opts, batch, os.path.join(a.cache, f"out_{side}.npy"))
                    print(f"  {name} b{batch} {side}: {r}", flush=True)
                    b = best.get(side)
                    if b is None or ("error" not in r and ("error" in b or r["ms"] < b["ms"])):
                        best[side] = r
            rec = dict(best, model=name, batch=batch, size=a.size)
            if "ms" in best.get("ort", {}) and "ms" in best.get("tessera", {}):
                rec["quanta"] = compare(qdq, os.path.join(a.cache, "out_ort.npy"),
                                        os.path.join(a.cache, "out_tessera.npy"))
            if "ms" in best.get("torch", {}) and "ms" in best.get("eager", {}):
                rec["eager_quanta"] = compare(
                    qdq, os.path.join(a.cache, "out_torch.npy"),
                    os.path.join(a.cache, "out_eager.npy"),
                    last_scale(os.path.join(a.cache, f"{name}_s{a.size}_x86q.pt")))
            key = f"{name}_b{batch}_s{a.size}_t{a.threads}"
            old = data["runs"].get(key, {})
            data["runs"][key] = dict(old, **rec)
            print(f"{key}: " + ", ".join(f"{s} {best[s].get('ms', best[s].get('error'))}" for s in best)
                  + f"; quanta {rec.get('quanta')}, eager {rec.get('eager_quanta')}", flush=True)
    if not a.no_write:
        os.makedirs(os.path.dirname(JSON), exist_ok=True)
        json.dump(data, open(JSON, "w"), indent=1, sort_keys=True)
        render(data)


if __name__ == "__main__":
    main(sys.argv[1:])
