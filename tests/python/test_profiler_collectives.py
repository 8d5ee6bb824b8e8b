"""test_profiler_collectives.py — tessera.distributed's calls in tessera.profiler: each is one
"collective" event (events(), collectives()) with its exact bytes, shape, rank and group size,
and key_averages() gives a row per name with its count and bytes summed; as a world of one and,
with mpirun, two ranks (each its own file). Sizes differ per call, so a wrong byte count, a
dropped event or a wrong rank shows."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import tessera
import tessera.distributed as dist

SCRIPT = r"""
import json, sys
import tessera, tessera.distributed as dist
from tessera.profiler import profile
dist.init_process_group()
r, w = dist.get_rank(), dist.get_world_size()
dist.all_reduce(tessera.ones(4))  # before the profile: not recorded
with profile() as prof:
    dist.all_reduce(tessera.ones(5))
    dist.all_reduce(tessera.ones(6, dtype=tessera.float64))
    dist.broadcast(tessera.ones(3, device="sim:0"), 0)
    out = tessera.zeros(4 * w, dtype=tessera.int32)
    dist.all_gather_into_tensor(out, tessera.ones(4, dtype=tessera.int32))
    dist.reduce_scatter_tensor(tessera.zeros(2), tessera.ones(2 * w))
    dist.barrier()
    if w > 1:
        m = tessera.ones(9)
        if r == 0:
            dist.send(m, 1)
        elif r == 1:
            dist.recv(m, 0)
dist.all_reduce(tessera.ones(4))  # after: not recorded
coll = [[e["name"], e["bytes"], e["shape"], e["device"], e["rank"], e["world_size"],
         e["t0_ns"] <= e["t1_ns"]] for e in prof.collectives()]
assert [e for e in prof.events() if e["kind"] == "collective"] == \
    [{k: v for k, v in c.items() if k != "seconds"} for c in prof.collectives()]
rows = {a.key: [a.count, a.bytes] for a in prof.key_averages() if a.kind == "collective"}
with open(sys.argv[1] % r, "w") as f:
    json.dump({"rank": r, "world": w, "coll": coll, "rows": rows}, f)
dist.destroy_process_group()
"""


def _expected(r, w):
    coll = [["all_reduce", 20, "[5] float32", "cpu"],
            ["all_reduce", 48, "[6] float64", "cpu"],
            ["broadcast", 12, "[3] float32", "sim:0"],
            ["all_gather", 16 * w, "[%d] int32" % (4 * w), "cpu"],
            ["reduce_scatter", 8 * w, "[%d] float32" % (2 * w), "cpu"],
            ["barrier", 0, "", "cpu"]]
    if w > 1 and r < 2:
        coll.append(["send" if r == 0 else "recv", 36, "[9] float32", "cpu"])
    coll = [c + [r, w, True] for c in coll]
    rows = {}
    for c in coll:
        n, b = rows.get(c[0], [0, 0])
        rows[c[0]] = [n + 1, b + c[1]]
    return coll, rows


def _run(cmd, tmp_path, ranks):
    script = tmp_path / "p.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TS_SIM_DEVICES="2", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(tessera.__file__)),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    pattern = str(tmp_path / "rank%d.json")
    out = subprocess.run(cmd + [sys.executable, str(script), pattern], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    for r in range(ranks):
        with open(pattern % r) as f:
            got = json.load(f)
        assert (got["rank"], got["world"]) == (r, ranks)
        coll, rows = _expected(r, ranks)
        assert got["coll"] == coll
        assert got["rows"] == rows


def test_world_of_one(tmp_path):
    _run([], tmp_path, 1)


def test_two_ranks(tmp_path):
    mpirun = shutil.which("mpirun")
    if not mpirun or not dist.is_available():
        pytest.skip("no mpirun / library built without MPI")
    _run([mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"],
         tmp_path, 2)
