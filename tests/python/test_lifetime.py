"""Reference counting and threads: a million small ops leave the live-tensor count and RSS flat
(results, graphs, errors, views, in-place ops), a tensor lives as long as Python or the graph
holds it, and Python threads compute and train at once with right results."""
import gc
import math
import sys
import threading

import pytest

import tessera

live = tessera._C._live_tensors


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def settle():
    gc.collect()
    return live("cpu"), live("sim:0"), rss_bytes()


def test_million_adds_leave_nothing_behind():
    a, b = tessera.ones(1), tessera.ones(1)
    for _ in range(20000):  # warm up caches and allocator pools first
        c = a + b
    del c
    n0, s0, r0 = settle()
    for _ in range(1_000_000):
        c = a + b
    del c
    n1, s1, r1 = settle()
    assert (n1, s1) == (n0, s0)
    # a leak of one tensor per op would be >= 10^6 * 100 bytes; allow allocator noise
    assert r1 - r0 < 8 << 20, "RSS grew by %d bytes" % (r1 - r0)


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_mixed_ops_leave_nothing_behind(device):
    x = tessera.ones(4, device=device, requires_grad=True)
    y = tessera.ones(4, device=device)
    cpu = tessera.ones(4)

    def step(i):
        y.add_(0)  # in place
        z = (x * y + 1).sum()  # a graph, freed with z
        v = y.view(2, 2).t()  # views
        m = y.max(0)  # a values/indices pair
        if i % 10 == 0:
            z.backward()
            x.grad = None
            try:
                cpu + y if device != "cpu" else y.view(3)  # an error path
            except tessera.TesseraError:
                pass
            repr(v)
            v.tolist()
        return m

    for i in range(200):
        step(i)
    n0, s0, r0 = settle()
    for i in range(30_000):
        step(i)
    n1, s1, r1 = settle()
    assert (n1, s1) == (n0, s0)
    assert r1 - r0 < 8 << 20


def test_tensor_lives_while_python_or_graph_holds_it():
    gc.collect()
    before = live("cpu")
    x = tessera.ones(3, requires_grad=True)
    y = x * 2
    assert live("cpu") == before + 2
    del x  # the graph of y still holds x: backward reaches it
    y.sum().backward()
    del y
    gc.collect()
    assert live("cpu") == before
    t = tessera.ones(2)
    t.add_(1).mul_(2).zero_().fill_(3)
    t += 1
    t.clamp_(0, 1).copy_(tessera.zeros(2))
    del t
    assert live("cpu") == before  # in-place ops hold no reference of their own
    t = tessera.ones(2)
    assert sys.getrefcount(t) == 2  # the name and the call's argument
    u = t.to("cpu")  # the same tensor: one more reference, no copy
    assert u is t and sys.getrefcount(t) == 3


def test_cycles_through_attributes_are_collected():
    before = live("cpu")
    t = tessera.ones(2)
    t.me = t  # a cycle through the instance dict
    del t
    gc.collect()
    assert live("cpu") == before


def _linear_regression(device, w_true, b_true, steps, out, key):
    """y = w x + b fitted by gradient descent; the fit must find w_true, b_true."""
    xs = tessera.linspace(-1, 1, 64, device=device).view(64, 1)
    ys = xs * w_true + b_true
    w = tessera.zeros(1, 1, device=device, requires_grad=True)
    b = tessera.zeros(1, device=device, requires_grad=True)
    for _ in range(steps):
        loss = ((xs @ w + b - ys) ** 2).mean()
        loss.backward()
        with tessera.no_grad():
            w -= 0.5 * w.grad
            b -= 0.5 * b.grad
        w.grad = None
        b.grad = None
    out[key] = (w.item(), b.item(), loss.item())


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_threads_train_separate_models(device):
    out, threads = {}, []
    for k in range(4):
        t = threading.Thread(target=_linear_regression, args=(device, k + 1.0, -k / 2, 200, out, k))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == [0, 1, 2, 3]
    for k, (w, b, loss) in out.items():
        assert w == pytest.approx(k + 1.0, abs=1e-3) and b == pytest.approx(-k / 2, abs=1e-3)


def test_threads_compute_with_right_results():
    errors = []

    def work(seed):
        try:
            m = tessera.full((16, 16), float(seed))
            for i in range(300):
                r = (m @ m).sum().item()
                assert r == 16 * 16 * 16 * seed * seed, r
                s = (m + i).mean().item()
                assert math.isclose(s, seed + i, rel_tol=1e-6), s
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k + 1,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_errors_stay_in_their_thread():
    """The C error state is per thread: one thread's failing ops never leak into another's."""
    failures, oks = [], []

    def bad():
        for _ in range(2000):
            try:
                tessera.ones(2) + tessera.ones(3)
            except tessera.ShapeError:
                failures.append(1)

    def good():
        for _ in range(2000):
            oks.append((tessera.ones(2) + 1).sum().item())

    ts = [threading.Thread(target=f) for f in (bad, good, bad, good)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(failures) == 4000 and oks == [4.0] * 4000


@pytest.mark.parametrize("op", ["matmul", "sum", "backward"])
def test_gil_is_released_during_ops(op):
    """With a huge switch interval the worker thread is never preempted: the main thread can run
    while the worker is inside the op only if the op released the GIL. The ops last tens of
    milliseconds (a 700 x 700 product took ~2 ms, which a loaded 2-core host could finish before
    scheduling the main thread at all: a stop of session 52 failed so)."""
    big = tessera.rand(1500, 1500, requires_grad=(op == "backward"))
    loss = (big @ big).sum() if op == "backward" else None
    run = {"matmul": lambda: big @ big, "sum": lambda: tessera.rand(4000, 4000).sum(),
           "backward": lambda: loss.backward()}[op]
    started, state = threading.Event(), {"done": False}

    def worker():
        started.set()
        run()
        state["done"] = True

    old = sys.getswitchinterval()
    sys.setswitchinterval(100)
    try:
        t = threading.Thread(target=worker)
        t.start()
        started.wait()
        seen_running = not state["done"]
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert seen_running


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_tensors_outlive_a_c_scope(device):
    """Python code called back from C runs inside a C scope, which owns what ops return there:
    Tensors made inside keep their values after the scope ends, and nothing is freed twice or
    leaked."""
    gc.collect()
    before = live("cpu"), live("sim:0")
    x = tessera.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    tessera._C._scope_begin()
    try:
        kept = [
            x * 2, x.to("cpu"), x.to(device), x.double(), x.to(tessera.float64, copy=True),
            x.detach(), x.view(3, 1).t(), tessera.tensor([4.0, 5.0]), tessera.zeros_like(x),
            x.sum(keepdim=True), x.max(0)[1], x.chunk(3)[2], tessera.ones(2).new_tensor([7.0]),
            x.to(None, tessera.float64),
        ]
        y = tessera.ones(3, device=device)
        y.add_(1).clamp_(0, 5)
        y.data = tessera.full((3,), 4.0, device=device)
        z = (x * x).sum()
        z.backward()
        g = x.grad
        x.tolist(), repr(x), x.sum().item()
    finally:
        tessera._C._scope_end()
    gc.collect()
    assert kept[0].tolist() == [2, 4, 6] and kept[1].device == tessera.device("cpu")
    assert kept[4].dtype == tessera.float64 and kept[9].tolist() == [6.0]
    assert kept[12].tolist() == [7.0] and y.tolist() == [4, 4, 4] and g.tolist() == [2, 4, 6]
    del kept, y, z, g, x
    gc.collect()
    assert (live("cpu"), live("sim:0")) == before
