"""tessera.multiprocessing and shared-memory tensors (Tensor.share_memory_, Module.share_memory):
a child process (spawn, forkserver, fork) updates a shared parameter and the parent sees it; a
tensor that is not shared arrives as a copy; Queue carries shared tensors both ways; Parameters
arrive as Parameters; modules pickle with their shared tensors; torch.multiprocessing.spawn's
errors; a fork child after OpenMP; the refusals."""
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest

import tessera as ts
import tessera.multiprocessing as mp
import tessera.nn as nn

JOIN_S = 120  # a child that has not ended by then is stuck: the test fails instead of hanging


def _run(ctx, target, *args):
    p = ctx.Process(target=target, args=args)
    p.start()
    p.join(JOIN_S)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0


def _child_step(model, q):
    w = model.weight
    q.put((type(w).__name__, w.requires_grad, w.is_shared(), model.bias.is_shared()))
    with ts.no_grad():
        w.add_(1.0)  # the Hogwild update: in place on the shared memory
        model.bias.fill_(-3.0)


def _child_fill(t, q):
    q.put(float(t.sum()))
    t.fill_(5.0)
    q.put(float(t.sum()))


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_child_updates_shared_parameter(method):
    ts.manual_seed(0)
    model = nn.Linear(3, 2)
    before = model.weight.detach().clone()
    assert model.share_memory() is model
    assert model.weight.is_shared() and model.bias.is_shared()
    assert model.weight.grad is None  # grads are made lazily, not shared here
    ctx = mp.get_context(method)
    q = ctx.Queue()
    _run(ctx, _child_step, model, q)
    assert q.get(timeout=JOIN_S) == ("Parameter", True, True, True)
    assert ts.equal(model.weight.detach(), before + 1.0)
    assert model.bias.tolist() == [-3.0, -3.0]


def test_not_shared_arrives_as_copy():
    t = ts.arange(4.0)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    _run(ctx, _child_fill, t, q)
    assert q.get(timeout=JOIN_S) == 6.0  # the child received the values
    assert q.get(timeout=JOIN_S) == 20.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0] and not t.is_shared()  # the parent's stays


def _child_queue(q_in, q_out, go, done):
    t = q_in.get(timeout=JOIN_S)  # the parent's shared tensor
    t[1] = 7.0
    own = ts.full((3,), 3.0).share_memory_()
    q_out.put(own)
    go.wait(JOIN_S)  # the parent has received it
    own.fill_(4.0)
    done.set()


def test_queue_both_ways():
    ctx = mp.get_context("spawn")
    q_in, q_out, go, done = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    t = ts.zeros(3).share_memory_()
    p = ctx.Process(target=_child_queue, args=(q_in, q_out, go, done))
    p.start()
    q_in.put(t)
    theirs = q_out.get(timeout=JOIN_S)
    assert theirs.is_shared() and theirs.tolist() == [3.0, 3.0, 3.0]
    go.set()
    assert done.wait(JOIN_S)
    assert theirs.tolist() == [4.0, 4.0, 4.0]  # the child's later write reached the parent
    p.join(JOIN_S)
    assert p.exitcode == 0
    assert t.tolist() == [0.0, 7.0, 0.0]


def test_pickle_roundtrip_shares_views_and_parameters():
    base = ts.arange(12.0).share_memory_()
    view = base[2:10].view(2, 4)[:, 1:3]  # strided, offset
    back = pickle.loads(ForkingPickler.dumps(view))
    assert back.shape == view.shape and back.stride() == view.stride()
    assert back.tolist() == view.tolist() and back.is_shared()
    back.fill_(-1.0)
    assert base.tolist() == [0, 1, 2, -1, -1, 5, 6, -1, -1, 9, 10, 11]
    p = nn.Parameter(ts.ones(2).share_memory_())
    q = pickle.loads(ForkingPickler.dumps(p))
    assert isinstance(q, nn.Parameter) and q.requires_grad and q.is_shared()
    frozen = nn.Parameter(ts.ones(2), requires_grad=False).share_memory_()
    f = pickle.loads(ForkingPickler.dumps(frozen))
    assert isinstance(f, nn.Parameter) and not f.requires_grad
    plain = ts.ones(2)  # not shared: by value
    c = pickle.loads(ForkingPickler.dumps(plain))
    c.fill_(3.0)
    assert plain.tolist() == [1.0, 1.0] and not c.is_shared()


def test_module_share_memory_and_pickle():
    m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    m(ts.randn(4, 2)).sum().backward()  # grads exist: shared too (PyTorch's _apply)
    m.share_memory()
    tensors = list(m.parameters()) + list(m.buffers())
    assert all(t.is_shared() for t in tensors)
    assert all(p.grad.is_shared() for p in m.parameters())
    m2 = pickle.loads(ForkingPickler.dumps(m))
    with ts.no_grad():
        for p in m2.parameters():
            p.zero_()
    assert all(float(p.abs().sum()) == 0 for p in m.parameters())
    assert m2[1].running_var.is_shared()
    c = nn.MultiheadAttention(4, 2).share_memory()  # a C module: its own handles take the pages
    c2 = pickle.loads(ForkingPickler.dumps(c))
    with ts.no_grad():
        for p in c2.parameters():
            p.zero_()
    assert all(float(p.abs().sum()) == 0 for p in c.parameters())
    x = ts.randn(3, 1, 4)
    assert float(c(x, x, x)[0].abs().sum()) == 0.0  # the C forward reads the shared memory


def test_storage_share_memory():
    t = ts.arange(3.0)
    s = t.untyped_storage()
    assert not s.is_shared()
    assert s.share_memory_() is s and s.is_shared() and t.is_shared()
    assert t.tolist() == [0.0, 1.0, 2.0]


def _child_raise(i):
    if i == 1:
        raise ValueError("child one failed")


def _child_ok(i, t):
    t[i] = float(i + 1)


def test_spawn():
    t = ts.zeros(2).share_memory_()
    assert mp.spawn(_child_ok, args=(t,), nprocs=2) is None
    assert t.tolist() == [1.0, 2.0]
    with pytest.raises(mp.ProcessRaisedException, match="child one failed"):
        mp.spawn(_child_raise, nprocs=2)


def _child_threads(t, q):
    q.put((ts.get_num_threads(), float((t @ t).sum())))


def test_fork_after_threads_does_not_hang():
    a = ts.randn(256, 256)
    ref = float((a @ a).sum())  # the parent's OpenMP pool is up
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    _run(ctx, _child_threads, a, q)
    threads, got = q.get(timeout=JOIN_S)
    assert threads == 1  # libgomp's pool does not survive fork: the child runs on one thread
    assert got == pytest.approx(ref, rel=1e-4, abs=1e-2)


def test_errors():
    x = ts.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing"):
        ForkingPickler.dumps(x)
    with pytest.raises(ts.DeviceError, match="sim:0"):
        ts.zeros(2, device="sim:0").share_memory_()
    assert not ts.zeros(2, device="sim:0").is_shared()
    with pytest.raises(ValueError, match="file_system"):
        mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_descriptor"
    t = ts.zeros(4).share_memory_()
    fd, nbytes, _ = t._shared_fd()
    with pytest.raises(ts.TesseraError, match="holds 16 bytes; 20 were claimed"):
        ts._C._from_shared_fd(fd, nbytes + 4, ts.float32, (5,), (1,), 0)
    with pytest.raises(ts.TesseraError, match="needs 20 bytes"):
        ts._C._from_shared_fd(fd, nbytes, ts.float32, (4,), (1,), 1)
    with pytest.raises(ts.TesseraError, match="not shared yet|not in shared memory"):
        ts.zeros(2)._shared_fd()
    assert mp.Process is __import__("multiprocessing").Process  # Python's API, re-exported
    np = pytest.importorskip("numpy")
    e = ts.ones(2)
    a = np.asarray(e.numpy())  # NumPy holds the address: the memory must not move
    with pytest.raises(ts.TesseraError, match="another framework"):
        e.share_memory_()
    assert a.tolist() == [1.0, 1.0] and not e.is_shared()
