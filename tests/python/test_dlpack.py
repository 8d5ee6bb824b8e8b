"""test_dlpack.py — memory shared without a copy: Tensor.numpy(), tessera.from_numpy, the DLPack
protocol both ways with NumPy (and PyTorch when importable), capsules consumed once and freed when
not consumed."""
import gc
import sys
import weakref

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402

ptr = tessera._C._data_ptr


def array_ptr(a):
    return a.__array_interface__["data"][0]


DTYPES = [
    (tessera.float32, np.float32), (tessera.float64, np.float64), (tessera.float16, np.float16),
    (tessera.int64, np.int64), (tessera.int32, np.int32), (tessera.uint8, np.uint8),
    (tessera.bool, np.bool_), (tessera.int8, np.int8), (tessera.int16, np.int16),
    (tessera.uint16, np.uint16), (tessera.uint32, np.uint32), (tessera.uint64, np.uint64),
]


def sample(npdt):
    return (np.arange(24).reshape(2, 3, 4) % 7 > 2 if npdt is np.bool_
            else (np.arange(24).reshape(2, 3, 4) * 3 % 11).astype(npdt))


# ------------------------------------------------------------------ numpy()
@pytest.mark.parametrize("tdt, npdt", DTYPES, ids=lambda x: str(x))
def test_numpy_shares_memory(tdt, npdt):
    ref = sample(npdt)
    t = tessera.tensor(ref.tolist(), dtype=tdt)
    a = t.numpy()
    assert a.dtype == npdt and a.shape == ref.shape and a.flags.writeable
    np.testing.assert_array_equal(a, ref)
    assert array_ptr(a) == ptr(t)
    a[1, 2, 3] = 1  # writes show both ways
    assert t[1, 2, 3].item() == 1
    t[0, 0, 0] = 1
    assert a[0, 0, 0] == 1


def test_numpy_of_views_keeps_strides():
    ref = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = tessera.tensor(ref.tolist())
    keys = [(1,), (slice(None), 2), (slice(None), slice(1, None, 2), slice(None, None, 3)),
            (Ellipsis, 4)]
    for key in keys:
        v = t[key]
        a = v.numpy()
        np.testing.assert_array_equal(a, ref[key])
        assert array_ptr(a) == ptr(v)
        a[...] = -1  # the view's elements, and only those
        r = ref.copy()
        r[key] = -1
        np.testing.assert_array_equal(t.numpy(), r)
        t[...] = tessera.tensor(ref.tolist())


def test_numpy_zero_dim_and_empty():
    a = tessera.tensor(2.5).numpy()
    assert a.shape == () and a == 2.5
    e = tessera.zeros(0, 3).numpy()
    assert e.shape == (0, 3) and e.dtype == np.float32


def test_numpy_keeps_the_memory_after_the_tensor_goes():
    t = tessera.tensor([1.0, 2.0, 3.0])
    a = t.numpy()
    del t
    gc.collect()
    junk = [tessera.full((3,), 9.0) for _ in range(10)]  # would reuse freed memory
    assert a.tolist() == [1.0, 2.0, 3.0]
    del junk


def test_numpy_refusals(device):
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad. "
                                           r"Use tensor.detach\(\).numpy\(\) instead."):
        tessera.ones(2, requires_grad=True).numpy()
    assert tessera.ones(2, requires_grad=True).detach().numpy().tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="Got unsupported ScalarType bfloat16"):
        tessera.ones(2, dtype=tessera.bfloat16).numpy()
    if device != "cpu":
        with pytest.raises(TypeError, match="can't convert sim:0 device type tensor to numpy. "
                                            r"Use Tensor.cpu\(\) to copy"):
            tessera.ones(2, device=device).numpy()
        assert tessera.ones(2, device=device).cpu().numpy().tolist() == [1.0, 1.0]


# ------------------------------------------------------------------ from_numpy
@pytest.mark.parametrize("tdt, npdt", DTYPES, ids=lambda x: str(x))
def test_from_numpy_shares_memory(tdt, npdt):
    a = sample(npdt)
    t = tessera.from_numpy(a)
    assert t.dtype == tdt and tuple(t.shape) == a.shape and t.device == tessera.device("cpu")
    assert t.tolist() == a.tolist()
    assert ptr(t) == array_ptr(a)
    t[1, 1, 1] = 1  # writes show both ways
    assert a[1, 1, 1] == 1
    a[0, 2, 3] = 0
    assert t[0, 2, 3].item() == 0


def test_from_numpy_strided_and_views():
    base = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
    for a in [base[1], base[:, 2], base[::2, 1:, ::3], base.transpose(2, 0, 1), base[..., 0]]:
        t = tessera.from_numpy(a)
        assert t.tolist() == a.tolist()
        assert ptr(t) == array_ptr(a)
    t = tessera.from_numpy(base[::2, 1:, ::3])
    t[...] = -1.0
    assert (base[::2, 1:, ::3] == -1).all() and (base == -1).sum() == 2 * 4 * 2


def test_from_numpy_keeps_the_array_alive():
    a = np.arange(6, dtype=np.float32)
    alive = weakref.ref(a)
    refs = sys.getrefcount(a)
    t = tessera.from_numpy(a)
    assert sys.getrefcount(a) == refs + 1  # the tensor holds the array
    del a
    gc.collect()
    assert alive() is not None
    assert t.tolist() == [0, 1, 2, 3, 4, 5]
    v = t[2:]  # a view holds the memory too
    del t
    gc.collect()
    assert alive() is not None and v.tolist() == [2, 3, 4, 5]
    del v
    gc.collect()
    assert alive() is None


def test_from_numpy_refusals():
    with pytest.raises(TypeError, match=r"expected np.ndarray \(got list\)"):
        tessera.from_numpy([1, 2])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.float128"):
        tessera.from_numpy(np.zeros(3, np.longdouble))
    # complex arrays share their memory as complex64 / complex128 tensors
    c = np.array([1 + 2j, -3j], np.complex64)
    t = tessera.from_numpy(c)
    assert t.dtype == tessera.complex64 and t.tolist() == [1 + 2j, -3j]
    c[0] = 5
    assert t.tolist()[0] == 5
    with pytest.raises(ValueError, match="negative"):
        tessera.from_numpy(np.zeros(3)[::-1])
    with pytest.raises(TypeError):
        tessera.from_numpy(np.zeros(3, dtype=">f4"))  # not the machine's byte order


def test_from_numpy_read_only_array_warns():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = tessera.from_numpy(a)
    assert ptr(t) == array_ptr(a)


def test_from_numpy_round_trip_refcounts():
    a = np.ones((4, 4), np.float32)
    refs = sys.getrefcount(a)
    for _ in range(1000):
        b = tessera.from_numpy(a).numpy()
        assert array_ptr(b) == array_ptr(a)
    del b
    gc.collect()
    assert sys.getrefcount(a) == refs


# ------------------------------------------------------------------ DLPack with NumPy
def test_dlpack_device(device):
    t = tessera.ones(2, device=device)
    # sim devices are Tessera's own: DLPack's kDLExtDev (12)
    assert t.__dlpack_device__() == ((1, 0) if device == "cpu" else (12, 0))


def test_numpy_from_dlpack_shares_memory():
    t = tessera.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.from_dlpack(t)
    assert a.tolist() == [[1, 2], [3, 4]] and array_ptr(a) == ptr(t)
    v = t[:, 1]
    a = np.from_dlpack(v)
    assert a.tolist() == [2, 4] and array_ptr(a) == ptr(v) and a.strides == (8,)


def test_from_dlpack_of_numpy_shares_memory():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1:]
    t = tessera.from_dlpack(a)
    assert t.dtype == tessera.int32 and t.tolist() == a.tolist() and ptr(t) == array_ptr(a)
    t[0, 0] = 100
    assert a[0, 0] == 100


def test_capsule_round_trip_and_single_use():
    t = tessera.tensor([True, False, True])
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule" and "dltensor" in repr(cap)
    u = tessera.from_dlpack(cap)
    assert u.dtype == tessera.bool and u.tolist() == [True, False, True] and ptr(u) == ptr(t)
    assert "used_dltensor" in repr(cap)
    with pytest.raises(RuntimeError, match="consumed only once"):
        tessera.from_dlpack(cap)


def test_unconsumed_capsule_frees_the_tensor():
    n = 16 << 20  # 64 MiB: far above what other threads of the process may free meanwhile

    def allocated():
        gc.collect()
        return tessera.memory_stats("cpu")["allocated_bytes.all.current"]

    before = allocated()
    t = tessera.zeros(n)
    cap = t.__dlpack__()
    del t
    held = allocated()
    assert held - before > 2 * n  # the capsule holds the memory
    del cap
    assert held - allocated() > 2 * n


def test_unconsumed_capsule_releases_an_imported_array():
    a = np.arange(5.0)
    alive = weakref.ref(a)
    cap = tessera.from_numpy(a).__dlpack__()  # the tensor dies here; the capsule holds a
    del a
    gc.collect()
    assert alive() is not None
    del cap
    gc.collect()
    assert alive() is None


def test_dlpack_keywords(device):
    t = tessera.arange(4.0, device=device)
    if device == "cpu":
        cap = t.__dlpack__(stream=None, max_version=(1, 0), copy=False)
        assert ptr(tessera.from_dlpack(cap)) == ptr(t)
        c = tessera.from_dlpack(t.__dlpack__(copy=True))
        assert ptr(c) != ptr(t) and c.tolist() == [0, 1, 2, 3]
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=(2, 0))
    else:
        with pytest.raises(BufferError, match="no DLPack device type"):
            t.__dlpack__()
        with pytest.raises(BufferError, match="copy is False"):
            t.__dlpack__(dl_device=(1, 0), copy=False)
        c = tessera.from_dlpack(t.__dlpack__(dl_device=(1, 0)))  # a copy on the cpu
        assert c.device == tessera.device("cpu") and c.tolist() == [0, 1, 2, 3]
    with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
        tessera.ones(2, device=device, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError):
        t.__dlpack__(stream="x")
    with pytest.raises(TypeError):
        t.__dlpack__(dl_device="cpu")


def test_from_dlpack_of_a_tessera_tensor_aliases(device):
    t = tessera.arange(3.0, device=device)
    u = tessera.from_dlpack(t)
    u[0] = 7.0
    assert t.tolist() == [7, 1, 2] and u.device == t.device


def test_from_dlpack_refusals():
    with pytest.raises(TypeError, match="must have __dlpack__"):
        tessera.from_dlpack([1, 2])
    with pytest.raises((BufferError, tessera.DtypeError)):  # NumPy or Tessera refuses it
        tessera.from_dlpack(np.zeros(3, np.longdouble))
    z = tessera.from_dlpack(np.array([1 - 1j], np.complex128))  # kDLComplex 128
    assert z.dtype == tessera.complex128 and z.tolist() == [1 - 1j]


def test_narrow_integer_dtypes():
    for dt, name, signed in [(tessera.int8, "int8", True), (tessera.int16, "int16", True),
                             (tessera.uint16, "uint16", False), (tessera.uint32, "uint32", False),
                             (tessera.uint64, "uint64", False)]:
        assert str(dt).endswith(name) and dt.is_signed == signed and not dt.is_floating_point
    assert tessera.short is tessera.int16
    a = np.array([2**64 - 1, 5], np.uint64)
    t = tessera.from_numpy(a)
    assert t.dtype == tessera.uint64 and t.tolist() == [2**64 - 1, 5]
    b = np.array([-128, 127], np.int8)
    t8 = tessera.from_dlpack(b)
    assert t8.dtype == tessera.int8 and (t8 + t8).tolist() == [0, -2]
    assert t8.type() == "tessera.CharTensor" and t8.short().dtype == tessera.int16
    u8 = tessera.tensor([200, 1], dtype=tessera.uint8)
    assert (t8 + u8).dtype == tessera.int16  # torch.result_type(int8, uint8)
    with pytest.raises(tessera.DtypeError, match="Promotion for uint16"):
        tessera.tensor([1], dtype=tessera.uint16) + tessera.tensor([1], dtype=tessera.int32)


# ------------------------------------------------------------------ as_tensor
def test_as_tensor(device):
    a = np.arange(4, dtype=np.float32)
    t = tessera.as_tensor(a)
    assert ptr(t) == array_ptr(a)  # no copy
    assert tessera.as_tensor(t) is t
    assert tessera.as_tensor(a, dtype=tessera.float64).dtype == tessera.float64
    d = tessera.as_tensor(a, device=device)
    assert d.device == tessera.device(device) and d.tolist() == [0, 1, 2, 3]
    assert tessera.as_tensor([1, 2], dtype=tessera.float32).tolist() == [1.0, 2.0]


# ------------------------------------------------------------------ PyTorch, when present
def test_torch_round_trips():
    torch = pytest.importorskip("torch")
    t = tessera.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    p = torch.from_dlpack(t)
    assert p.data_ptr() == ptr(t) and p.tolist() == t.tolist()
    p[0, 0] = 10.0
    assert t[0, 0].item() == 10.0
    back = tessera.from_dlpack(p[:, 1:])
    assert ptr(back) == p[:, 1:].data_ptr() and back.tolist() == [[2, 3], [5, 6]]
    b = tessera.from_dlpack(torch.tensor([True, False]))
    assert b.dtype == tessera.bool and b.tolist() == [True, False]


def test_from_dlpack_refuses_a_malformed_device_answer():
    """a producer whose __dlpack_device__ is not an (int, int) pair: TypeError, nothing taken"""
    class Liar:
        def __dlpack_device__(self):
            return "cpu"

        def __dlpack__(self, stream=None):
            raise AssertionError("never asked for its capsule")
    with pytest.raises(TypeError, match="__dlpack_device__"):
        tessera.from_dlpack(Liar())

    class ShortLiar(Liar):
        def __dlpack_device__(self):
            return (1,)
    with pytest.raises(TypeError):
        tessera.from_dlpack(ShortLiar())


def test_numpy_array_protocol():
    """np.array / np.asarray of a tensor (Tensor.__array__, as PyTorch's): the values, a cast when
    a dtype is asked for, a copy from np.array and shared memory from np.asarray on the cpu"""
    t = tessera.arange(6, dtype=tessera.float32).reshape(2, 3)
    a = np.array(t)
    assert a.dtype == np.float32 and a.shape == (2, 3) and a.tolist() == t.tolist()
    a[0, 0] = 7
    assert t[0, 0].item() == 0
    s = np.asarray(t)
    s[0, 1] = 5
    assert t[0, 1].item() == 5
    d = np.asarray(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == t.tolist()
    with pytest.raises(Exception):
        np.asarray(t.requires_grad_())
