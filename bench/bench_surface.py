"""bench_surface.py — issue 52's speed check: the most used operators of the new PyTorch-named
surface (special functions, reductions, sorting, indexing, 1-d/3-d and transposed convolution,
pools, group/instance norm, embedding_bag, linalg, einsum) and the LSTM/GRU training steps,
Tessera beside PyTorch eager on the same NumPy inputs in ONE process; results and the reason for
each slower op: bench/results/SURFACE.md.

Run under PyTorch's interpreter with tessera on the path:
    PYTHONPATH=build-nocuda/python /opt/torch2/bin/torch-python bench/bench_surface.py [--quick]
        [--sizes 1e3,1e5,1e7] [--repeats 5] [--ops name,name] [--markdown] [--threads 1,2]

Per case: each library at 1 and at 2 threads; measurements interleaved (Tessera, PyTorch, Tessera,
PyTorch, ...) so that load from other processes on a shared host hits both alike; each measurement
runs the call enough times to last ~`--target-ms`; the median of `--repeats` measurements is kept,
and each side's better thread count. Ratio = PyTorch time / Tessera time (> 1: Tessera faster).
The first (smallest) size of each op is also checked for agreement with PyTorch (loose: this is a
guard that both sides compute the same thing, not a correctness test; tools/opinfo_check.py is).
"""
import os

# as bench/bench_env.sh: a short OpenMP spin for both libraries (set before either loads libgomp),
# so that a loaded host does not turn 2-thread runs into spinning contests
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import argparse  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tessera as ts  # noqa: E402

LIBS = (("tessera", ts), ("torch", torch))


def rng():
    return np.random.default_rng(0)


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def conv(lib, a):
    return lib.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a


# ---------------------------------------------------------------- cases
# Each case: name, list of sizes (None = fixed typical size), make(n) -> dict of NumPy arrays,
# call(lib, t) -> callable running the op once on converted inputs t (dict name -> tensor).


def ew(fn, lo=-3.0, hi=3.0):
    """unary elementwise case on n uniform numbers in [lo, hi]"""
    def make(n):
        return {"x": f32(rng().uniform(lo, hi, n))}
    return make, lambda lib, t: (lambda: fn(lib, t["x"]))


def ew2(fn, lo=-3.0, hi=3.0, lo2=-3.0, hi2=3.0):
    def make(n):
        r = rng()
        return {"x": f32(r.uniform(lo, hi, n)), "y": f32(r.uniform(lo2, hi2, n))}
    return make, lambda lib, t: (lambda: fn(lib, t["x"], t["y"]))


def rows(fn, lo=-3.0, hi=3.0, width=1000):
    """op along the last dim of an (n/width, width) matrix"""
    def make(n):
        return {"x": f32(rng().uniform(lo, hi, (max(1, n // width), width)))}
    return make, lambda lib, t: (lambda: fn(lib, t["x"]))


def idx_case(kind):
    def make(n):
        r = rng()
        m = max(1, n // 1000)
        d = {"x": f32(r.standard_normal((m, 1000)))}
        if kind in ("gather", "scatter_add"):
            d["i"] = r.integers(0, 1000, (m, 1000)).astype(np.int64)
        if kind == "index_select":
            d["i"] = r.integers(0, m, max(1, m // 2)).astype(np.int64)
        if kind in ("masked_fill", "masked_select", "where"):
            d["m"] = r.random((m, 1000)) < 0.5
        return d

    def call(lib, t):
        x = t["x"]
        if kind == "gather":
            return lambda: lib.gather(x, 1, t["i"])
        if kind == "scatter_add":
            return lambda: x.scatter_add(1, t["i"], x)
        if kind == "index_select":
            return lambda: lib.index_select(x, 0, t["i"])
        if kind == "masked_fill":
            return lambda: x.masked_fill(t["m"], 0.5)
        if kind == "masked_select":
            return lambda: lib.masked_select(x, t["m"])
        if kind == "where":
            return lambda: lib.where(t["m"], x, 0.0)
        raise ValueError(kind)
    return make, call


def fixed(make_arrays, fn):
    return (lambda n: make_arrays()), (lambda lib, t: (lambda: fn(lib, t)))


def nnf(lib):
    return lib.nn.functional


def spd(n, b=None):
    r = rng()
    shape = (b, n, n) if b else (n, n)
    a = r.standard_normal(shape)
    return f32(a @ np.swapaxes(a, -1, -2) / n + np.eye(n))


SIZES = [1000, 100000, 10000000]

CASES = [
    # elementwise special functions and pointwise forms
    ("lgamma", SIZES) + ew(lambda L, x: L.lgamma(x), 0.1, 10),
    ("digamma", SIZES) + ew(lambda L, x: L.digamma(x), 0.1, 10),
    ("erfinv", SIZES) + ew(lambda L, x: L.erfinv(x), -0.99, 0.99),
    ("i0", SIZES) + ew(lambda L, x: L.i0(x)),
    ("logit", SIZES) + ew(lambda L, x: L.logit(x), 0.01, 0.99),
    ("nan_to_num", SIZES) + ew(lambda L, x: L.nan_to_num(x)),
    ("xlogy", SIZES) + ew2(lambda L, x, y: L.xlogy(x, y), lo2=0.1, hi2=5),
    ("hypot", SIZES) + ew2(lambda L, x, y: L.hypot(x, y)),
    ("lerp", SIZES) + ew2(lambda L, x, y: L.lerp(x, y, 0.3)),
    ("addcmul", SIZES) + ew2(lambda L, x, y: L.addcmul(x, x, y, value=0.5)),
    ("clamp", SIZES) + ew(lambda L, x: L.clamp(x, -1.0, 1.0)),
    # reductions and scans
    ("var", SIZES) + ew(lambda L, x: L.var(x)),
    ("std_dim", SIZES) + rows(lambda L, x: L.std(x, dim=1, correction=0)),
    ("norm", SIZES) + ew(lambda L, x: L.linalg.vector_norm(x)),
    ("logsumexp", SIZES) + rows(lambda L, x: L.logsumexp(x, 1)),
    ("cumsum", SIZES) + rows(lambda L, x: L.cumsum(x, 1)),
    ("sort", SIZES) + rows(lambda L, x: L.sort(x, 1)),
    ("argsort", SIZES) + rows(lambda L, x: L.argsort(x, 1)),
    ("topk", SIZES) + rows(lambda L, x: L.topk(x, 10, 1)),
    ("median", SIZES) + rows(lambda L, x: L.median(x, 1)),
    ("amax", SIZES) + rows(lambda L, x: L.amax(x, 1)),
    # indexing
    ("gather", SIZES) + idx_case("gather"),
    ("scatter_add", SIZES) + idx_case("scatter_add"),
    ("index_select", SIZES) + idx_case("index_select"),
    ("masked_fill", SIZES) + idx_case("masked_fill"),
    ("masked_select", SIZES) + idx_case("masked_select"),
    ("where_scalar", SIZES) + idx_case("where"),
    # nn.functional at typical sizes
    ("conv1d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 1024))),
                                        "w": f32(rng().standard_normal((64, 64, 3)) * 0.1)},
                               lambda L, t: nnf(L).conv1d(t["x"], t["w"], padding=1)),
    ("conv3d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((2, 16, 16, 16, 16))),
                                        "w": f32(rng().standard_normal((32, 16, 3, 3, 3)) * 0.1)},
                               lambda L, t: nnf(L).conv3d(t["x"], t["w"], padding=1)),
    ("conv_transpose2d", [None]) + fixed(
        lambda: {"x": f32(rng().standard_normal((8, 64, 16, 16))),
                 "w": f32(rng().standard_normal((64, 32, 4, 4)) * 0.1)},
        lambda L, t: nnf(L).conv_transpose2d(t["x"], t["w"], stride=2, padding=1)),
    ("max_pool1d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 4096)))},
                                   lambda L, t: nnf(L).max_pool1d(t["x"], 2)),
    ("avg_pool1d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 4096)))},
                                   lambda L, t: nnf(L).avg_pool1d(t["x"], 2)),
    ("max_pool3d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((2, 16, 32, 32, 32)))},
                                   lambda L, t: nnf(L).max_pool3d(t["x"], 2)),
    ("avg_pool3d", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((2, 16, 32, 32, 32)))},
                                   lambda L, t: nnf(L).avg_pool3d(t["x"], 2)),
    ("adaptive_avg_pool1d", [None]) + fixed(
        lambda: {"x": f32(rng().standard_normal((8, 64, 1000)))},
        lambda L, t: nnf(L).adaptive_avg_pool1d(t["x"], 7)),
    ("group_norm", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 32, 32)))},
                                   lambda L, t: nnf(L).group_norm(t["x"], 8)),
    ("instance_norm", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 32, 32)))},
                                      lambda L, t: nnf(L).instance_norm(t["x"])),
    ("embedding_bag", [None]) + fixed(
        lambda: {"w": f32(rng().standard_normal((10000, 128))),
                 "i": rng().integers(0, 10000, (512, 20)).astype(np.int64)},
        lambda L, t: nnf(L).embedding_bag(t["i"], t["w"], mode="mean")),
    ("pad_reflect", [None]) + fixed(lambda: {"x": f32(rng().standard_normal((8, 64, 32, 32)))},
                                    lambda L, t: nnf(L).pad(t["x"], (2, 2, 2, 2), mode="reflect")),
    ("interpolate_bilinear", [None]) + fixed(
        lambda: {"x": f32(rng().standard_normal((8, 32, 32, 32)))},
        lambda L, t: nnf(L).interpolate(t["x"], scale_factor=2, mode="bilinear",
                                        align_corners=False)),
    ("one_hot", [None]) + fixed(lambda: {"i": rng().integers(0, 100, 100000).astype(np.int64)},
                                lambda L, t: nnf(L).one_hot(t["i"], 100)),
    # linalg and products
    ("linalg.solve", [None]) + fixed(
        lambda: {"a": spd(256), "b": f32(rng().standard_normal((256, 64)))},
        lambda L, t: L.linalg.solve(t["a"], t["b"])),
    ("linalg.solve_batched", [None]) + fixed(
        lambda: {"a": spd(16, 256), "b": f32(rng().standard_normal((256, 16, 4)))},
        lambda L, t: L.linalg.solve(t["a"], t["b"])),
    ("linalg.inv", [None]) + fixed(lambda: {"a": spd(256)}, lambda L, t: L.linalg.inv(t["a"])),
    ("linalg.cholesky", [None]) + fixed(lambda: {"a": spd(256)},
                                        lambda L, t: L.linalg.cholesky(t["a"])),
    ("linalg.svd", [None]) + fixed(lambda: {"a": f32(rng().standard_normal((128, 128)))},
                                   lambda L, t: L.linalg.svd(t["a"], full_matrices=False)),
    ("linalg.det", [None]) + fixed(lambda: {"a": spd(8, 1024)}, lambda L, t: L.linalg.det(t["a"])),
    ("einsum_bmm", [None]) + fixed(
        lambda: {"a": f32(rng().standard_normal((32, 64, 64))),
                 "b": f32(rng().standard_normal((32, 64, 64)))},
        lambda L, t: L.einsum("bij,bjk->bik", t["a"], t["b"])),
    ("einsum_attn", [None]) + fixed(
        lambda: {"q": f32(rng().standard_normal((4, 8, 128, 64))),
                 "k": f32(rng().standard_normal((4, 8, 128, 64)))},
        lambda L, t: L.einsum("bhqd,bhkd->bhqk", t["q"], t["k"])),
    ("einsum_outer_sum", [None]) + fixed(
        lambda: {"a": f32(rng().standard_normal((256, 512))),
                 "b": f32(rng().standard_normal((512,)))},
        lambda L, t: L.einsum("ij,j->i", t["a"], t["b"])),
    ("cdist", [None]) + fixed(lambda: {"a": f32(rng().standard_normal((512, 64))),
                                       "b": f32(rng().standard_normal((512, 64)))},
                              lambda L, t: L.cdist(t["a"], t["b"])),
]


# complex tensors and torch.fft (issue 52's last part): rows of 1024 points, a 256 x 256 image
def c64(shape):
    r = rng()
    return np.ascontiguousarray(r.standard_normal(shape) + 1j * r.standard_normal(shape),
                                dtype=np.complex64)


def crows(fn, width=1024):
    def make(n):
        return {"x": c64((max(1, n // width), width))}
    return make, lambda lib, t: (lambda: fn(lib, t["x"]))


CASES += [
    ("fft.rfft", SIZES) + rows(lambda L, x: L.fft.rfft(x), width=1024),
    ("fft.fft", SIZES) + crows(lambda L, x: L.fft.fft(x)),
    ("fft.irfft", [None]) + fixed(lambda: {"x": c64((256, 513))},
                                  lambda L, t: L.fft.irfft(t["x"], 1024)),
    ("fft.fft2", [None]) + fixed(lambda: {"x": c64((8, 256, 256))},
                                 lambda L, t: L.fft.fft2(t["x"])),
    ("fft.fft_prime", [None]) + fixed(lambda: {"x": c64((256, 1031))},
                                      lambda L, t: L.fft.fft(t["x"])),
    ("complex_mul", SIZES) + (lambda n: {"x": c64(n), "y": c64(n)},
                              lambda L, t: (lambda: t["x"] * t["y"])),
    ("complex_abs", SIZES) + (lambda n: {"x": c64(n)}, lambda L, t: (lambda: t["x"].abs())),
]

# recurrent training steps (seq 64, batch 32, input 256, hidden 256, 2 layers), forward + backward
T_, B_, I_, H_, LAYERS_ = 64, 32, 256, 256, 2


def rnn_case(cls_name):
    def make(n):
        return {"x": f32(rng().standard_normal((T_, B_, I_)))}

    def call(lib, t):
        lib.manual_seed(0)
        m = getattr(lib.nn, cls_name)(I_, H_, num_layers=LAYERS_)
        x = t["x"]

        def step():
            m.zero_grad()
            y, _ = m(x)
            (y * y).mean().backward()
            return y
        return step
    return make, call


CASES += [
    ("LSTM_train_step", [None]) + rnn_case("LSTM"),
    ("GRU_train_step", [None]) + rnn_case("GRU"),
]


# RMSNorm at LLaMA's shapes (rows x hidden): the op (the fused kernels where the library has them),
# and the composition it replaced (x * rsqrt(mean(x^2) + eps) * w: decision 0028's "before"),
# forward alone and forward + backward (the output gradient given, x and w requiring grad).
RMS_SHAPES = {"4096x4096": (4096, 4096), "8192x768": (8192, 768)}


def rms_case(shape, composed, train):
    rows_, cols_ = RMS_SHAPES[shape]

    def make(n):
        r = rng()
        return {"x": f32(r.standard_normal((rows_, cols_))),
                "w": f32(r.uniform(0.5, 1.5, cols_)),
                "g": f32(r.standard_normal((rows_, cols_)))}

    def call(lib, t):
        x, w, g = t["x"], t["w"], t["g"]
        if train:
            x.requires_grad_(True)
            w.requires_grad_(True)
        eps = float(np.finfo(np.float32).eps)

        def fwd():
            if composed:
                return x * lib.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w
            return nnf(lib).rms_norm(x, (cols_,), w)

        def step():
            x.grad = None
            w.grad = None
            y = fwd()
            y.backward(g)
            return y
        return step if train else fwd
    return make, call


for _shape in RMS_SHAPES:
    for _composed in (False, True):
        for _train in (False, True):
            CASES.append(("rms_norm%s%s_%s" % ("_composed" if _composed else "",
                                               "_train" if _train else "", _shape), [None])
                         + rms_case(_shape, _composed, _train))


# ---------------------------------------------------------------- timing
def first(out):
    while isinstance(out, (tuple, list)) or (hasattr(out, "_fields")):
        out = out[0]
    return out


def to_np(out):
    out = first(out)
    if isinstance(out, torch.Tensor):
        return out.detach().numpy()
    return out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)


def calibrate(fn, target_s):
    """calls per measurement so that one lasts about target_s"""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return max(1, min(100000, int(target_s / max(dt, 1e-7))))


def measure(fn, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def run_case(name, n, make, call, repeats, target_s, check):
    arrays = make(n)
    fns = {}
    for lname, lib in LIBS:
        t = {k: conv(lib, v) for k, v in arrays.items()}
        fns[lname] = call(lib, t)
    agree = ""
    if check:
        try:
            a, b = to_np(fns["tessera"]()), to_np(fns["torch"]())
            if a.shape != b.shape:
                agree = "SHAPE %s vs %s" % (a.shape, b.shape)
            elif a.dtype.kind in "fc" or b.dtype.kind in "fc":
                if name in ("LSTM_train_step", "GRU_train_step"):
                    agree = ""  # different random weights
                elif not np.allclose(a.astype(np.complex128), b.astype(np.complex128),
                                     rtol=1e-3, atol=1e-3, equal_nan=True):
                    agree = "DIFFER (max %.2e)" % np.nanmax(np.abs(a.astype(np.complex128) - b))
            elif not np.array_equal(a, b):
                agree = "DIFFER"
        except Exception as e:  # noqa: BLE001 - reported in the table
            agree = "check failed: %s" % e
    best = {}
    for threads in THREADS:
        ts.set_num_threads(threads)
        torch.set_num_threads(threads)
        numbers = {}
        for lname, fn in fns.items():
            fn()  # warm up
            numbers[lname] = calibrate(fn, target_s)
        samples = {lname: [] for lname in fns}
        for _ in range(repeats):  # interleaved A B A B
            for lname, fn in fns.items():
                samples[lname].append(measure(fn, numbers[lname]))
        for lname in fns:
            med = statistics.median(samples[lname])
            best[lname] = min(best.get(lname, math.inf), med)
    return best["tessera"], best["torch"], agree


THREADS = (1, 2)  # --threads: the thread counts tried (each side keeps its best)


def fmt_time(s):
    if s >= 1:
        return "%.2f s" % s
    if s >= 1e-3:
        return "%.2f ms" % (s * 1e3)
    return "%.1f us" % (s * 1e6)


def cpu_line():
    model, flags = "?", ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("Flags:"):
                flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return "%s, %d cores, ISA flags: %s" % (model, len(os.sched_getaffinity(0)),
                                             " ".join(isa) or "generic")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e3,1e5,1e7")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--target-ms", type=float, default=20.0)
    ap.add_argument("--ops", default="")
    ap.add_argument("--quick", action="store_true", help="sizes 1e3,1e5; 3 repeats; 5 ms")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--threads", default="1,2", help="thread counts to try; each side's best kept")
    args = ap.parse_args()
    global THREADS
    THREADS = tuple(int(t) for t in args.threads.split(","))
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    repeats, target = args.repeats, args.target_ms / 1e3
    if args.quick:
        sizes, repeats, target = [1000, 100000], 3, 0.005
    only = set(args.ops.split(",")) if args.ops else None
    print("# %s; Python %s; torch %s; load average at start %s" % (
        cpu_line(), platform.python_version(), torch.__version__,
        " ".join("%.2f" % v for v in os.getloadavg())))
    sep = "|" if args.markdown else " "
    head = ("op", "size", "tessera", "torch", "torch/tessera", "note")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    else:
        print("%-22s %9s %11s %11s %13s  %s" % head)
    ratios = []
    for name, case_sizes, make, call in CASES:
        if only and name not in only:
            continue
        for i, n in enumerate(s for s in case_sizes if s is None or s in sizes):
            try:
                tt, tp, agree = run_case(name, n, make, call, repeats, target, i == 0)
            except Exception as e:  # noqa: BLE001 - a missing op is a row, not a crash
                print(sep.join(["", name, str(n), "ERROR %s" % str(e)[:120], ""]) if args.markdown
                      else "%-22s %9s ERROR %s" % (name, n, str(e)[:120]), flush=True)
                continue
            r = tp / tt
            ratios.append(r)
            size = "typical" if n is None else "%.0e" % n
            note = ("SLOW" if r < 1 / 1.5 else "") + (" " + agree if agree else "")
            if args.markdown:
                print("| %s | %s | %s | %s | %.2f | %s |" % (name, size, fmt_time(tt), fmt_time(tp),
                                                          r, note.strip()), flush=True)
            else:
                print("%-22s %9s %11s %11s %13.2f  %s" % (name, size, fmt_time(tt), fmt_time(tp), r,
                                                        note.strip()), flush=True)
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("# %d cases: geometric mean torch/tessera %.2f, min %.2f, max %.2f; slower than "
              "PyTorch by >1.5x: %d" % (len(ratios), gm, min(ratios), max(ratios),
                                        sum(r < 1 / 1.5 for r in ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
