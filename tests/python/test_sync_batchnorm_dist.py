"""test_sync_batchnorm_dist.py — nn.SyncBatchNorm training over two ranks (mpirun -np 2, as
test_profiler_collectives.py) and in a world of one: each rank's output, the running statistics
(and num_batches_tracked) and the gradients of its input, weight and bias equal BatchNorm over the
concatenated batch computed here in float64 with numpy (the weight's and bias's gradients: the
rank's rows' share, as PyTorch's SyncBatchNorm leaves them for DDP to average). Shards of uneven
sizes (a rank with one row of a 5-D input), (N, C), (N, C, L) and (N, C, D, H, W) inputs,
momentum=None, affine=False; the tolerances are float32's roundoff over the sums of a channel."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import tessera
import tessera.distributed as dist

np = pytest.importorskip("numpy")

# (name, shape after the batch dim, rows of each rank (for 2 ranks; a world of one takes all),
#  momentum, affine)
CASES = [("ncl", (3, 4), (2, 5), 0.1, True),
         ("nc", (5,), (4, 3), None, True),
         ("ncdhw", (2, 2, 3, 2), (1, 3), 0.3, True),
         ("ncl_plain", (3, 4), (3, 2), 0.1, False)]

SCRIPT = r"""
import json, sys
import tessera as ts, tessera.distributed as dist
from tessera import nn
dist.init_process_group()
r, w = dist.get_rank(), dist.get_world_size()
with open(sys.argv[1]) as f:
    data = json.load(f)
out = {}
for case in data:
    rows = case["rows"] if w > 1 else [sum(case["rows"])]
    start = sum(rows[:r])
    n = rows[r]
    c = len(case["w"])
    tail = tuple(case["tail"])
    X = ts.tensor(case["x"], dtype=ts.float32).reshape((sum(rows), *tail))
    G = ts.tensor(case["g"], dtype=ts.float32).reshape((sum(rows), *tail))
    x = X[start:start + n].clone().requires_grad_(True)
    bn = nn.SyncBatchNorm(c, eps=case["eps"], momentum=case["momentum"], affine=case["affine"])
    if case["affine"]:
        with ts.no_grad():
            bn.weight.copy_(ts.tensor(case["w"]))
            bn.bias.copy_(ts.tensor(case["b"]))
    with ts.no_grad():
        bn.running_mean.copy_(ts.tensor(case["rm"]))
        bn.running_var.copy_(ts.tensor(case["rv"]))
    y = bn(x)
    (y * G[start:start + n]).sum().backward()
    res = {"y": y.detach().flatten().tolist(), "dx": x.grad.flatten().tolist(),
           "rm": bn.running_mean.tolist(), "rv": bn.running_var.tolist(),
           "nbt": int(bn.num_batches_tracked.item()), "grad_fn": y.grad_fn.name()}
    if case["affine"]:
        res["dw"] = bn.weight.grad.tolist()
        res["db"] = bn.bias.grad.tolist()
    bn.eval()  # eval: the running statistics, no collective
    res["eval"] = bn(x.detach()).flatten().tolist()
    out[case["name"]] = res
with open(sys.argv[2] % r, "w") as f:
    json.dump(out, f)
dist.destroy_process_group()
"""


def _data():
    rng = np.random.default_rng(7)
    data = []
    for name, tail, rows, momentum, affine in CASES:
        n = sum(rows)
        c = tail[0]
        # each row drifts, so the two shards' means differ (local statistics would show)
        x = rng.standard_normal((n, *tail)) * 2 + 3 + 0.5 * np.arange(n).reshape(
            (n,) + (1,) * len(tail))
        data.append({"name": name, "tail": list(tail), "rows": list(rows), "momentum": momentum,
                     "affine": affine, "eps": 1e-5,
                     "x": x.astype(np.float32).ravel().tolist(),
                     "g": rng.standard_normal((n, *tail)).astype(np.float32).ravel().tolist(),
                     "w": (1 + 0.5 * rng.standard_normal(c)).astype(np.float32).tolist(),
                     "b": rng.standard_normal(c).astype(np.float32).tolist(),
                     "rm": rng.standard_normal(c).astype(np.float32).tolist(),
                     "rv": (1 + rng.random(c)).astype(np.float32).tolist()})
    return data


def _reference(case, rows, rank):
    """BatchNorm's training step over the whole batch in float64; rank's rows' share"""
    tail = tuple(case["tail"])
    n = sum(rows)
    x = np.array(case["x"], dtype=np.float64).reshape((n, *tail))
    g = np.array(case["g"], dtype=np.float64).reshape((n, *tail))
    c = tail[0]
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, c) + (1,) * (x.ndim - 2)
    w = np.array(case["w"]) if case["affine"] else np.ones(c)
    b = np.array(case["b"]) if case["affine"] else np.zeros(c)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    inv = 1 / np.sqrt(var + case["eps"])
    xh = (x - mean.reshape(shape)) * inv.reshape(shape)
    y = xh * w.reshape(shape) + b.reshape(shape)
    dx = (w * inv).reshape(shape) * (g - g.mean(axis=axes).reshape(shape)
                                     - xh * (g * xh).mean(axis=axes).reshape(shape))
    m = x.size // c
    mom = 1.0 if case["momentum"] is None else case["momentum"]  # None, first step: 1 / 1
    rm = (1 - mom) * np.array(case["rm"]) + mom * mean
    rv = (1 - mom) * np.array(case["rv"]) + mom * var * m / (m - 1)
    sl = slice(sum(rows[:rank]), sum(rows[:rank + 1]))
    ev = ((x[sl] - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + case["eps"])
          * w.reshape(shape) + b.reshape(shape))
    # float32 arithmetic: the sums of a channel take m terms (m + 16 roundings of the largest
    # magnitude an intermediate reaches: |x| inv |w| |g|)
    scale = (1 + np.abs(x).max() * inv.max()) * max(1, np.abs(w).max()) * max(1, np.abs(g).max())
    tol = (m + 16) * 2.0 ** -24 * scale
    return {"y": y[sl].ravel(), "dx": dx[sl].ravel(), "rm": rm, "rv": rv,
            "dw": (g * xh)[sl].sum(axis=axes), "db": g[sl].sum(axis=axes), "eval": ev.ravel(),
            "tol": tol}


def _run(cmd, tmp_path, ranks):
    data = _data()
    inp = tmp_path / "data.json"
    inp.write_text(json.dumps(data))
    script = tmp_path / "sbn.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TS_SIM_DEVICES="2", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(tessera.__file__)),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    pattern = str(tmp_path / "rank%d.json")
    out = subprocess.run(cmd + [sys.executable, str(script), str(inp), pattern], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    for r in range(ranks):
        with open(pattern % r) as f:
            got = json.load(f)
        for case in data:
            rows = case["rows"] if ranks > 1 else [sum(case["rows"])]
            ref = _reference(case, rows, r)
            res = got[case["name"]]
            assert res["nbt"] == 1
            assert res["grad_fn"] == ("SyncBatchNormBackward" if ranks > 1 else
                                      "NativeBatchNormBackward0")
            keys = ["y", "dx", "rm", "rv", "eval"] + (["dw", "db"] if case["affine"] else [])
            for k in keys:
                err = np.abs(np.array(res[k]) - ref[k]).max()
                assert err <= ref["tol"], (r, case["name"], k, err, ref["tol"])


def test_world_of_one(tmp_path):
    _run([], tmp_path, 1)


def test_two_ranks(tmp_path):
    mpirun = shutil.which("mpirun")
    if not mpirun or not dist.is_available():
        pytest.skip("no mpirun / library built without MPI")
    _run([mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"],
         tmp_path, 2)
