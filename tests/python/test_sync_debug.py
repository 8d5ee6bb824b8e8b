"""tessera.cuda.set_sync_debug_mode on sim:0 (a device like cuda for this purpose): warnings at the
user's line for each synchronizing operation, errors in "error" mode, quiet for work that never
waits and for cpu tensors; and tessera.cuda.memory's snapshots."""
import inspect
import json
import sys
import warnings

import pytest

import tessera as T
import tessera.cuda as C


@pytest.fixture(autouse=True)
def _reset_mode():
    yield
    C.set_sync_debug_mode("default")


def _line():
    return inspect.currentframe().f_back.f_lineno


SYNC_OPS = {
    "tolist": lambda t: t.tolist(),
    "item": lambda t: t.sum().item(),
    "bool": lambda t: bool(t[2]),
    "cpu": lambda t: t.cpu(),
    "to": lambda t: t.to("cpu"),
    "nonzero": lambda t: T.nonzero(t),
    "masked_select": lambda t: T.masked_select(t, t > 0),
    "unique": lambda t: T.unique(t),
    # a function of tessera's Python layer: the warning skips its frames to the user's line
    "unravel_index": lambda t: T.unravel_index(T.tensor([1, 4], device="sim:0"), (2, 3)),
}


def test_modes_round_trip():
    assert C.get_sync_debug_mode() == 0
    for name, value in (("warn", 1), ("error", 2), ("default", 0), (1, 1), (0, 0)):
        C.set_sync_debug_mode(name)
        assert C.get_sync_debug_mode() == value
    with pytest.raises(RuntimeError):
        C.set_sync_debug_mode("loud")
    with pytest.raises(RuntimeError):
        C.set_sync_debug_mode(3)


@pytest.mark.parametrize("name", sorted(SYNC_OPS))
def test_warn_at_user_line(name):
    t = T.tensor([1.0, 0.0, 2.0], device="sim:0")
    C.set_sync_debug_mode("warn")
    fn = SYNC_OPS[name]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        fn(t)
    assert w, name
    for x in w:  # at the user's line: the lambda's, not a line inside tessera
        assert "called a synchronizing operation" in str(x.message)
        assert "sim:0" in str(x.message)
        assert (x.filename, x.lineno) == (__file__, fn.__code__.co_firstlineno)


def test_warn_names_op_and_dedups_per_line():
    t = T.tensor([1.0, 0.0, 2.0], device="sim:0")
    C.set_sync_debug_mode("warn")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")  # Python's registry: once per line
        for _ in range(5):
            t.sum().item()
        line = _line() - 1
    items = [x for x in w if "item on sim:0" in str(x.message)]
    assert len(items) == 1 and items[0].lineno == line and items[0].filename == __file__


def test_error_mode_raises_naming_op():
    t = T.tensor([1.0, 0.0, 2.0], device="sim:0")
    C.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="item: called a synchronizing operation on sim:0"):
        t.sum().item()
    with pytest.raises(RuntimeError, match="nonzero: called a synchronizing operation"):
        T.nonzero(t)
    C.set_sync_debug_mode("default")
    assert t.tolist() == [1.0, 0.0, 2.0]


def test_quiet_without_syncs_and_on_cpu():
    x = T.ones(4, 4, device="sim:0")
    h = T.ones(4, 4)
    C.set_sync_debug_mode("error")  # a synchronisation would raise
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(10):
            x = T.relu(x @ x + h.to("sim:0")) / 100.0
            x.sum()
        assert h.tolist()[0][0] == 1.0 and bool(h[0, 0]) and h.sum().item() == 16.0
        T.nonzero(h), T.unique(h)
    assert not w
    C.set_sync_debug_mode("default")
    assert x.cpu().shape == (4, 4)


def test_memory_snapshot(tmp_path):
    C.memory._record_memory_history("all")
    try:
        keep = [T.empty(256 * k, device="sim:1") for k in range(1, 4)]
    finally:
        C.memory._record_memory_history(None)
    snap = C.memory._snapshot()
    segs = [s for s in snap["segments"] if s["device_name"] == "sim:1"]
    active = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
    stats = C.memory_stats("sim:1")
    assert sum(b["size"] for b in active) == stats["allocated_bytes.all.current"]
    assert sum(s["total_size"] for s in segs) == stats["reserved_bytes.all.current"]
    assert sum(1 for b in active if b.get("frames")) >= len(keep)
    path = tmp_path / "snap.json"
    C.memory._dump_snapshot(str(path))
    assert "segments" in json.loads(path.read_text())
    del keep


def _allocate_here(n):
    return T.empty(n, device="sim:1")  # the line the snapshot must name


def test_memory_snapshot_python_frames():
    """Each allocation's frames end with the Python stack of the call that made it (innermost
    first, file and line), after its C frames; calls made before recording have none."""
    before = T.empty(1111, device="sim:1")
    C.memory._record_memory_history("all")
    try:
        here = _allocate_here(2222)
        line_call = sys._getframe().f_lineno - 1
        x = T.ones(3333, device="sim:1")
        line_ones = sys._getframe().f_lineno - 1
        y = x * 2  # an operator's result (tp_as_number), not a factory
        line_mul = sys._getframe().f_lineno - 1
    finally:
        C.memory._record_memory_history(None)
    snap = C.memory._snapshot()
    blocks = {b["address"]: b for s in snap["segments"] for b in s["blocks"]}

    def frames(t):
        return blocks[t.data_ptr()].get("frames", [])

    me = test_memory_snapshot_python_frames.__name__
    fr = frames(here)
    py = [f for f in fr if f["filename"] == __file__]
    assert [f["name"] for f in py[:2]] == ["_allocate_here", me]
    assert py[1]["line"] == line_call
    assert py[0]["line"] == _allocate_here.__code__.co_firstlineno + 1
    # the Python frames come last, innermost first, after at least one C frame
    first_py = fr.index(py[0])
    assert first_py > 0 and all(f["filename"] == "" for f in fr[:first_py])
    assert [f["name"] for f in frames(x) if f["filename"] == __file__][0] == me
    assert [f["line"] for f in frames(x) if f["filename"] == __file__][0] == line_ones
    assert [f["line"] for f in frames(y) if f["filename"] == __file__][0] == line_mul
    assert not [f for f in frames(before) if f["filename"] == __file__]
    # recording off: a new allocation has no frames
    z = T.empty(4444, device="sim:1")
    snap2 = C.memory._snapshot()
    zb = [b for s in snap2["segments"] for b in s["blocks"] if b["address"] == z.data_ptr()]
    assert zb and not zb[0].get("frames")
    del before, here, x, y, z
