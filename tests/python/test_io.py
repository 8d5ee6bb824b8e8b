"""test_io.py — tessera.save / load of .safetensors paths, device_scope, memory statistics, threads,
tessera.sim, tessera.cuda's queries and tessera.distributed (a world of one here; two ranks under
mpirun in a subprocess)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import threading

import pytest

import tessera

DEVICES = ["cpu", "sim:0"]


@pytest.fixture(autouse=True)
def _sim():
    if tessera.sim.device_count() < 2:
        tessera.sim.configure(2)


# ------------------------------------------------------------------ save / load

def _state(device):
    return {
        "w": tessera.tensor([[1.5, -2.0, 3.25], [0.0, 1e-3, -7.0]], device=device),
        "idx": tessera.tensor([3, -1, 2**40], dtype=tessera.int64, device=device),
        "h": tessera.tensor([0.5, 2.0], dtype=tessera.float16, device=device),
    }


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("target", DEVICES)
def test_save_load_round_trip(tmp_path, device, target):
    path = tmp_path / "model.safetensors"
    sd = _state(device)
    tessera.save(sd, path)
    back = tessera.load(path, map_location=target)
    assert sorted(back) == sorted(sd)
    for k, v in sd.items():
        assert back[k].dtype == v.dtype
        assert back[k].shape == v.shape
        assert str(back[k].device) == target
        assert back[k].tolist() == v.tolist()


def test_load_defaults_to_cpu(tmp_path):
    tessera.save({"a": tessera.ones(2, device="sim:0")}, str(tmp_path / "a.safetensors"))
    assert str(tessera.load(str(tmp_path / "a.safetensors"))["a"].device) == "cpu"


def test_file_is_safetensors(tmp_path):
    """Read back with nothing but the format's definition: u64 header length, JSON, raw bytes."""
    path = tmp_path / "t.safetensors"
    w = tessera.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    tessera.save({"w": w.t()}, path)  # a non-contiguous view is written in logical order
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header["w"]["dtype"] == "F32"
    assert header["w"]["shape"] == [3, 2]
    begin, end = header["w"]["data_offsets"]
    values = struct.unpack("<6f", raw[8 + n + begin:8 + n + end])
    assert values == (1.0, 4.0, 2.0, 5.0, 3.0, 6.0)


@pytest.mark.parametrize("device", DEVICES)
def test_save_one_tensor(tmp_path, device):
    t = tessera.tensor([1.0, 2.0], device=device)
    tessera.save(t, tmp_path / "one.safetensors")
    back = tessera.load(tmp_path / "one.safetensors", map_location=device)
    assert isinstance(back, tessera.Tensor)
    assert back.tolist() == [1.0, 2.0]


def test_save_errors(tmp_path):
    """a .safetensors path holds tensors only (other paths: PyTorch's format, test_save_load_pt)"""
    x = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="save\\(\\): argument 'obj'"):
        tessera.save(3, x)
    with pytest.raises(TypeError, match="obj\\['a'\\] must be Tensor, not int"):
        tessera.save({"a": 1}, x)
    with pytest.raises(TypeError, match="keys of 'obj' must be str"):
        tessera.save({1: tessera.ones(1)}, x)
    with pytest.raises(TypeError):
        tessera.save({"a": tessera.ones(1)}, 12.5)
    assert not x.exists()


def test_load_errors(tmp_path):
    with pytest.raises(tessera.FileError) as e:
        tessera.load(tmp_path / "absent.safetensors")
    assert isinstance(e.value, OSError) and isinstance(e.value, RuntimeError)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(tessera.FormatError):
        tessera.load(bad)
    tessera.save({"a": tessera.ones(1)}, tmp_path / "ok.safetensors")
    with pytest.raises((ValueError, tessera.TesseraError)):
        tessera.load(tmp_path / "ok.safetensors", map_location="gpu")
    with pytest.raises(TypeError):
        tessera.load(tmp_path / "ok.safetensors", map_location=[1])


# ------------------------------------------------------------------ device scopes

@pytest.mark.parametrize("device", DEVICES)
def test_device_scope_places_factories(device):
    with tessera.device_scope(device):
        a = tessera.zeros(2, 3)
        b = tessera.tensor([1.0, 2.0])
        with tessera.device_scope("sim:1"):
            c = tessera.ones(1)
        d = tessera.randn(2)
        assert str(tessera.get_default_device()) == device
    assert [str(x.device) for x in (a, b, c, d)] == [device, device, "sim:1", device]
    assert str(tessera.zeros(1).device) == "cpu"


def test_device_scope_exits_on_exception_and_decorates():
    with pytest.raises(ZeroDivisionError):
        with tessera.device_scope("sim:0"):
            1 / 0
    assert str(tessera.zeros(1).device) == "cpu"

    @tessera.device_scope("sim:1")
    def make():
        return tessera.ones(1)

    assert str(make().device) == "sim:1"
    assert str(tessera.zeros(1).device) == "cpu"


def test_device_scope_is_per_thread():
    seen = []
    with tessera.device_scope("sim:0"):
        t = threading.Thread(target=lambda: seen.append(str(tessera.zeros(1).device)))
        t.start()
        t.join()
    assert seen == ["cpu"]


def test_device_scope_errors():
    with pytest.raises(TypeError):
        with tessera.device_scope(1.5):
            pass
    with pytest.raises((ValueError, tessera.TesseraError)):
        with tessera.device_scope("gpu:0"):
            pass
    with pytest.raises(tessera.TesseraError, match="not available"):
        with tessera.device_scope("sim:7"):
            pass
    assert str(tessera.zeros(1).device) == "cpu"


# ------------------------------------------------------------------ memory statistics

@pytest.mark.parametrize("device", DEVICES)
def test_memory_statistics(device):
    tessera.cuda.empty_cache(device)
    before = tessera.cuda.memory_allocated(device)
    t = tessera.randn(1000, 1000, device=device)
    assert t.element_size() * t.nelement() == 4_000_000
    during = tessera.cuda.memory_allocated(device)
    assert during - before >= 4_000_000
    assert tessera.cuda.max_memory_allocated(device) >= during
    assert tessera.cuda.memory_reserved(device) >= during
    stats = tessera.memory_stats(device)
    assert stats["allocated_bytes.all.current"] == during
    assert stats["live_tensors"] >= 1
    del t
    after = tessera.cuda.memory_allocated(device)
    assert during - after >= 4_000_000
    tessera.cuda.reset_peak_memory_stats(device)
    assert tessera.cuda.max_memory_allocated(device) == after
    tessera.cuda.empty_cache(device)
    assert tessera.cuda.memory_reserved(device) <= tessera.cuda.max_memory_reserved(device)


def test_memory_queries_without_cuda():
    if tessera.cuda.is_available():
        pytest.skip("CUDA present")
    assert tessera.cuda.device_count() == 0
    assert tessera.cuda.memory_allocated() == 0
    assert tessera.cuda.memory_stats() == {}
    free, total = tessera.cuda.mem_get_info("sim:0")
    assert 0 <= free <= total
    with pytest.raises(TypeError):
        tessera.memory_stats(device=[])


def test_threads_and_sim():
    n = tessera.get_num_threads()
    tessera.set_num_threads(1)
    assert tessera.get_num_threads() == 1
    tessera.set_num_threads(n)
    assert tessera.get_num_threads() == n
    with pytest.raises(ValueError):
        tessera.set_num_threads(0)
    assert tessera.sim.device_count() >= 2 and tessera.sim.is_available()


# ------------------------------------------------------------------ distributed

def test_distributed_world_of_one():
    import tessera.distributed as dist
    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("carrier-pigeon")
    with pytest.raises(TypeError):
        dist.all_reduce([1.0])
    with pytest.raises(NotImplementedError):
        dist.all_reduce(tessera.ones(1), group=object())


DIST_SCRIPT = r"""
import tessera, tessera.nn, tessera.distributed as dist
dist.init_process_group("mpi")
tessera.manual_seed(100 + dist.get_rank())
r, w = dist.get_rank(), dist.get_world_size()
dev = "%s"
x = tessera.full((3,), float(r + 1), device=dev)
dist.all_reduce(x)
a = tessera.full((2,), float(r + 1), device=dev)
dist.all_reduce(a, op=dist.ReduceOp.AVG)
b = tessera.full((2,), float(10 * r), device=dev)
dist.broadcast(b, src=1)
g = tessera.zeros(2 * w, device=dev)
dist.all_gather_into_tensor(g, tessera.full((2,), float(r), device=dev))
dist.barrier()
c = tessera.full((2,), float(r + 1), device=dev)
dist.reduce(c, dst=0)  # rank 0: 1 + 2 (what other ranks hold after it is unspecified)
rs = tessera.zeros(2, device=dev)
dist.reduce_scatter_tensor(rs, tessera.arange(2 * w, dtype=tessera.float32, device=dev) * (r + 1))
p2p = tessera.full((2,), float(7 + r), device=dev)
if r == 0:
    dist.send(p2p, dst=1)
else:
    dist.recv(p2p, src=0)
net = tessera.nn.Linear(3, 2).to(dev)  # rank-dependent initial weights: DDP broadcasts rank 0's
tessera.manual_seed(0)
ddp = dist.DistributedDataParallel(net)
ddp(tessera.full((4, 3), float(r + 1), device=dev)).sum().backward()
weights = net.weight.tolist()
grads = (net.weight.grad.tolist(), net.bias.grad.tolist())
with open(r"%s/rank%%d.txt" %% r, "w") as f:  # one file per rank: no interleaved lines
    f.write("RANK %%d %%d %%s %%s %%s %%s\n"
            %% (r, w, x.tolist(), a.tolist(), b.tolist(), g.tolist()))
    f.write("%%s\n%%s\n" %% (weights, grads))
    f.write("EXTRA %%s %%s %%s\n" %% (c.tolist() if r == 0 else None, rs.tolist(), p2p.tolist()))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("device", DEVICES)
def test_distributed_two_ranks(tmp_path, device):
    import tessera.distributed as dist
    mpirun = shutil.which("mpirun")
    if not mpirun or not dist.is_available():
        pytest.skip("no mpirun / library built without MPI")
    script = tmp_path / "d.py"
    script.write_text(DIST_SCRIPT % (device, tmp_path))
    env = dict(os.environ, TS_SIM_DEVICES="2", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(tessera.__file__)),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = subprocess.run([mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root",
                          "--bind-to", "none", sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    ranks = [(tmp_path / ("rank%d.txt" % r)).read_text().splitlines() for r in range(2)]
    for r, lines in enumerate(ranks):
        assert lines[0] == ("RANK %d 2 [3.0, 3.0, 3.0] [1.5, 1.5] [10.0, 10.0] "
                            "[0.0, 0.0, 1.0, 1.0]" % r)
        # d(sum(W x + b))/dW = the batch's sum of x: 4 * 1 on rank 0, 4 * 2 on rank 1; averaged
        assert lines[2] == str(([[6.0] * 3] * 2, [4.0, 4.0]))
    assert ranks[0][1] == ranks[1][1]  # rank 0's weights everywhere
    # reduce to rank 0; reduce_scatter of arange(4) * (r + 1) summed = arange(4) * 3, rank r
    # keeping elements 2r, 2r + 1; rank 0's [7, 7] sent to rank 1
    assert ranks[0][3] == "EXTRA [3.0, 3.0] [0.0, 3.0] [7.0, 7.0]"
    assert ranks[1][3] == "EXTRA None [6.0, 9.0] [7.0, 7.0]"


# ------------------------------------------------------------------ ONNX

def _mlp():
    import tessera.nn as nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(tessera.relu(self.fc1(x)))

    return MLP()


@pytest.mark.parametrize("device", DEVICES)
def test_onnx_export_and_load(tmp_path, device):
    import tessera.onnx
    np = pytest.importorskip("numpy")
    tessera.manual_seed(3)
    model = _mlp()
    x = tessera.randn(2, 4)
    path = tmp_path / "mlp.onnx"
    tessera.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    assert model.training  # the export's eval mode is undone
    m = tessera.onnx.load(path, device=device)
    assert m.input_names == ["x"] and m.output_names == ["y"]
    assert sorted(m.state_dict()) == sorted(model.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in model.named_parameters()]
    xb = tessera.randn(5, 4)  # another batch size: dim 0 is symbolic
    got = m(xb.to(device))
    assert str(got.device) == device and got.shape == (5, 3)
    # the reference in float64 NumPy from the exported weights
    w1, b1, w2, b2 = (model.state_dict()[k].detach().numpy().astype(np.float64)
                      for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"))
    ref = np.maximum(xb.numpy().astype(np.float64) @ w1.T + b1, 0) @ w2.T + b2
    assert np.abs(got.detach().cpu().numpy() - ref).max() < 1e-5  # float32 sums of 4 and 8 terms
    got.sum().backward()  # the loaded model trains: its initializers are parameters
    assert all(p.grad is not None for p in m.parameters())


def test_onnx_export_of_a_forward_that_indexes(tmp_path):
    # the Python forward runs inside the trace's C scope (suspended for it): indexing and
    # arithmetic release their intermediates themselves, which inside the scope freed them twice
    # and crashed later in the same process
    np = pytest.importorskip("numpy")
    import tessera.onnx

    class Pick(tessera.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tessera.nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            return y[:, [0, 2]] * 2 + y[:, 0:2]

    tessera.manual_seed(5)
    model = Pick()
    x = tessera.randn(2, 4)
    want = model(x).detach().numpy().astype(np.float64)
    for round_ in range(3):  # repeated in one process: a freed tensor would show by now
        path = tmp_path / ("pick%d.onnx" % round_)
        tessera.onnx.export(model, (x,), path)
        got = tessera.onnx.load(path)(x).detach().numpy()
        # each side: y within 5u (|x| |W|^T + |b|) (4 products and the bias), then 2 more
        # roundings; the two sides may order the sums differently
        u = 2.0 ** -24
        sd = model.state_dict()
        w, b = (sd[k].detach().numpy().astype(np.float64) for k in ("fc.weight", "fc.bias"))
        ya = np.abs(x.numpy().astype(np.float64)) @ np.abs(w).T + np.abs(b)
        bound = 2 * (5 * u * (2 * ya[:, [0, 2]] + ya[:, 0:2]) + 2 * u * np.abs(want))
        assert (np.abs(got - want) <= bound).all()
        assert np.abs(model(x).detach().numpy() - want).max() == 0


def test_onnx_errors(tmp_path):
    import tessera.onnx
    with pytest.raises(tessera.FileError):
        tessera.onnx.load(tmp_path / "absent.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"not a protobuf at all")
    with pytest.raises(tessera.FormatError):
        tessera.onnx.load(tmp_path / "bad.onnx")
    model = _mlp()
    model.forward = lambda x: (x, x)
    with pytest.raises(TypeError, match="must return one Tensor"):
        tessera.onnx.export(model, tessera.ones(1, 4), tmp_path / "o.onnx")

    def broken(x):
        raise KeyError("inside forward")
    model.forward = broken
    with pytest.raises(KeyError, match="inside forward"):
        tessera.onnx.export(model, tessera.ones(1, 4), tmp_path / "o.onnx")
    assert not (tmp_path / "o.onnx").exists()
    with pytest.raises(NotImplementedError):
        tessera.onnx.export(_mlp(), (tessera.ones(1, 4), tessera.ones(1, 4)), tmp_path / "o")
