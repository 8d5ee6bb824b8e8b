"""Every Tessera error is a Python exception: the class per status, .status, the C library's
message (seed 000's device mix names the op and both devices), TypeErrors naming the function and
the argument, and Ctrl-C raising KeyboardInterrupt at the next op."""
import os
import signal
import threading

import pytest

import tessera

STATUS_CLASSES = {
    "TS_ERR_DEVICE": tessera.DeviceError,
    "TS_ERR_SHAPE": tessera.ShapeError,
    "TS_ERR_DTYPE": tessera.DtypeError,
    "TS_ERR_ARG": tessera.ArgumentError,
    "TS_ERR_OOM": tessera.OutOfMemoryError,
    "TS_ERR_IO": tessera.FileError,
    "TS_ERR_FORMAT": tessera.FormatError,
    "TS_ERR_CUDA": tessera.CudaError,
    "TS_ERR_UNSUPPORTED": tessera.UnsupportedError,
    "TS_ERR_STATE": tessera.StateError,
    "TS_ERR_DIST": tessera.DistributedError,
}


def test_hierarchy():
    assert issubclass(tessera.TesseraError, RuntimeError)
    for cls in STATUS_CLASSES.values():
        assert issubclass(cls, tessera.TesseraError)
    assert issubclass(tessera.OutOfMemoryError, MemoryError)
    assert issubclass(tessera.ArgumentError, ValueError)
    assert issubclass(tessera.FileError, OSError)


def test_device_mix_seed_000():
    cpu_tensor = tessera.tensor([1.0, 2.0, 3.0])
    sim_tensor = tessera.tensor([4.0, 5.0, 6.0], device="sim:0")
    with pytest.raises(tessera.DeviceError) as info:
        cpu_tensor + sim_tensor
    e = info.value
    assert e.status == "TS_ERR_DEVICE"
    msg = str(e)
    assert "add" in msg and "cpu" in msg and "sim:0" in msg
    # the error was cleared: the next op works
    assert (cpu_tensor + cpu_tensor).tolist() == [2, 4, 6]
    try:
        sim_tensor * cpu_tensor
    except RuntimeError as caught:  # catchable as torch code catches it
        assert "mul" in str(caught)
    else:
        pytest.fail("no error")


def test_each_status_seen_from_ops(device):
    x = tessera.ones(2, 3, device=device)
    cases = [
        (lambda: x + tessera.ones(5, device=device), tessera.ShapeError, "TS_ERR_SHAPE"),
        (lambda: x.sum(9), tessera.ArgumentError, "TS_ERR_ARG"),
        (lambda: tessera.ones(2, device="sim:7"), tessera.DeviceError, "TS_ERR_DEVICE"),
    ]
    for f, cls, status in cases:
        with pytest.raises(cls) as info:
            f()
        assert info.value.status == status


def test_out_of_memory_is_memory_error():
    with pytest.raises(MemoryError) as info:
        tessera.empty(1 << 62, dtype=tessera.float32)
    assert isinstance(info.value, tessera.TesseraError)


TYPE_ERRORS = [
    (lambda: tessera.zeros(2, "3"), "size"),
    (lambda: tessera.zeros(2, dtype=3), "dtype"),
    (lambda: tessera.ones(2, device=3.5), "device"),
    (lambda: tessera.ones(2).to(device=[1]), "device"),
    (lambda: tessera.ones(2).sum(keepdim="x"), "keepdim"),
    (lambda: tessera.ones(2).copy_(5), "src"),
    (lambda: tessera.mm(tessera.ones(2, 2), 3), "mat2"),
    (lambda: tessera.cat([tessera.ones(2), "x"]), "tensors"),
    (lambda: tessera.ones(2).view(2, None), "size"),
    (lambda: tessera.ones(2).transpose(0, "1"), "dim1"),
    (lambda: tessera.randint(0, 5, "x"), "size"),
    (lambda: tessera.ones(2).sum(foo=1), "foo"),
    (lambda: tessera.ones(2).clamp(min="a"), "min"),
]


@pytest.mark.parametrize("case", range(len(TYPE_ERRORS)))
def test_type_errors_name_the_argument(case):
    f, arg = TYPE_ERRORS[case]
    with pytest.raises(TypeError) as info:
        f()
    assert arg in str(info.value)


def test_arity_errors():
    with pytest.raises(TypeError, match="tensor"):
        tessera.tensor()
    with pytest.raises(TypeError, match="at most"):
        tessera.ones(2).sum(0, True, None, 4)
    with pytest.raises(TypeError, match="multiple values"):
        tessera.ones(2).sum(0, dim=0)


def test_ctrl_c_raises_at_next_op():
    """map() calls the op from C, never returning to the interpreter's loop: only the op's own
    entry check (tsp_enter) can stop it before the iterator is exhausted."""
    import collections
    import itertools

    x = tessera.ones(1)
    ops = itertools.repeat(x, 10**7)
    timer = threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            collections.deque(map(tessera.exp, ops), maxlen=0)
    finally:
        timer.cancel()
    assert ops.__length_hint__() > 0  # stopped at an op, not after all of them
