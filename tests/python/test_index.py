"""test_index.py — t[key] and t[key] = value (basic and advanced indexing) on cpu and sim:0,
checked against NumPy indexing the same data. `device` (conftest.py): "cpu" and "sim:0"."""
import gc

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402


SHAPE = (2, 3, 4, 5)


def base():
    return np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)


def make(a, device):
    return tessera.tensor(a.tolist(), dtype=tessera.float32, device=device)


def values(t):
    return np.array(t.tolist(), dtype=np.float64).reshape(tuple(t.shape))


def check_same(t, expected):
    assert tuple(t.shape) == expected.shape
    np.testing.assert_array_equal(values(t), expected)


# keys made only of ints, slices, None and Ellipsis: views
BASIC = [
    1, -1, (0, 2), (1, -3, 3, -5), (slice(None), 1), slice(1, None), slice(None, None, 2),
    (Ellipsis, 1), (Ellipsis, slice(1, 4, 2)), None, (0, None, slice(1, 3)), (Ellipsis, None),
    (slice(-3, -1), Ellipsis, slice(None, None, 3)), slice(10, 20),
    (1, slice(None), -2, slice(1, 4, 2)),
    (), Ellipsis, (slice(None), slice(None)), (None, 1, None, Ellipsis, None), (slice(2, 0),),
    (slice(-100, 100, 3),), (True,), (False,), (1, True, 2),
]

# keys with integer lists / arrays and bool masks: copies
ADVANCED = [
    [0, 1], [[0, 1], [1, 0]], [-1, 0, -2], (slice(None), [2, 0, 2]), ([0, 1], [1, 2]),
    ([0, 1], slice(None), [1, 2]), (slice(None), [0, 2], [1, 3]), (slice(None), [[0], [2]], [1, 3]),
    (Ellipsis, [4, 0]), ([1], Ellipsis, [2]), (None, [0, 1]), ([0, 1], None, [1, 1]),
    (1, [2, 0], slice(1, 3)), (slice(None), slice(None), [3, 3, 0]), [], (slice(None), [[]]),
    (0, [1, 2], [3, 0]), (0, (1, 2), (3, 0)),
    # a first index of lower rank than a later one: it broadcasts over the leading dims
    ([0, 1], [[1], [2]]), ([1, 0, 1], slice(None), [[0], [3]]),
]


def mask_keys(a):
    return [
        np.array([True, False]),
        a[..., 0, 0] > 5,
        a > 50,
        (slice(None), a[0, :, :, 0] % 3 == 0),
        (Ellipsis, a[0, 0, 0] > 1),
        a < 0,  # selects nothing
        (a[:, 0, 0, 0] > 0, [1, 2]),  # a mask (one true) with an index array
    ]


def as_index(k, kind, device, nested=False):
    """k with its arrays as lists or as Tensors (on the cpu or on the device); a tuple inside the
    key is a sequence of ints, kept as a tuple for kind "list"."""
    if isinstance(k, tuple) and not nested:
        return tuple(as_index(e, kind, device, True) for e in k)
    if isinstance(k, (np.ndarray, list, tuple)):
        arr = np.asarray(k)
        if kind == "list":
            return k if isinstance(k, tuple) else arr.tolist()
        dt = tessera.bool if arr.dtype == np.bool_ else tessera.int64
        where = device if kind == "tensor@dev" else "cpu"
        return tessera.tensor(arr.tolist(), dtype=dt, device=where)
    return k


def np_key(k, nested=False):
    if isinstance(k, tuple) and not nested:
        return tuple(np_key(e, True) for e in k)
    return np.asarray(k, dtype=np.int64) if isinstance(k, (list, tuple)) else k


@pytest.mark.parametrize("key", BASIC, ids=repr)
def test_basic_read_is_a_view(device, key):
    a = base()
    t = make(a, device)
    r = t[key]
    check_same(r, a[key])
    # a view: a write through it shows in the base tensor
    if r.numel() > 0:
        r.fill_(-7.0)
        a[key] = -7.0
        check_same(t, a)


@pytest.mark.parametrize("kind", ["list", "tensor@cpu", "tensor@dev"])
@pytest.mark.parametrize("key", ADVANCED, ids=repr)
def test_advanced_read(device, key, kind):
    a = base()
    t = make(a, device)
    r = t[as_index(key, kind, device)]
    check_same(r, a[np_key(key)])
    assert r.device == t.device
    if r.numel() > 0:  # a copy: writing it leaves t alone
        r.fill_(-1.0)
        check_same(t, a)


@pytest.mark.parametrize("kind", ["list", "tensor@cpu", "tensor@dev"])
@pytest.mark.parametrize("i", range(7))
def test_mask_read(device, i, kind):
    a = base()
    key = mask_keys(a)[i]
    t = make(a, device)
    check_same(t[as_index(key, kind, device)], a[np_key(key)])


def test_int_with_separated_index_follows_pytorch(device):
    # PyTorch applies the int first (a view), so the one index array stays in place; NumPy would
    # move it to the front
    a = base()
    t = make(a, device)
    check_same(t[0, :, [1, 2]], a[0][:, [1, 2]])
    check_same(t[:, 1, :, [0]], a[:, 1][:, :, [0]])


def test_zero_dim_and_scalar_index_tensors(device):
    a = base()
    t = make(a, device)
    check_same(t[tessera.tensor(1)], a[1])
    check_same(t[tessera.tensor(True)], a[None])
    check_same(t[tessera.tensor(False)], a[None][:0])
    check_same(t[np.int64(1), np.int32(-1)], a[1, -1])
    check_same(t[tessera.tensor([1, 0], dtype=tessera.int32)], a[[1, 0]])
    check_same(t[tessera.tensor([1, 0], dtype=tessera.uint8)], a[np.array([True, False])])


def test_numpy_arrays_as_keys(device):
    a = base()
    t = make(a, device)
    for key in [np.array([1, 0]), (slice(None), np.array([[2], [0]])), a > 60, np.array(1),
                (np.int64(0), np.array([True, False, True]))]:
        check_same(t[key], a[key])
    t[a > 100] = 0.0
    a[a > 100] = 0.0
    check_same(t, a)


def test_indexing_int_and_bool_tensors(device):
    a = np.arange(10, dtype=np.int64)
    t = tessera.tensor(a.tolist(), device=device)
    check_same(t[[3, 1]], a[[3, 1]])
    check_same(t[t > 6], a[a > 6])
    b = tessera.tensor([True, False, True], device=device)
    assert b[[2, 0]].tolist() == [True, True]


@pytest.mark.parametrize("key", BASIC + ADVANCED, ids=repr)
def test_write_scalar(device, key):
    a = base()
    t = make(a, device)
    t[as_index(key, "tensor@cpu", device)] = -3.5
    a[np_key(key)] = -3.5
    check_same(t, a)


@pytest.mark.parametrize("key", BASIC + ADVANCED, ids=repr)
def test_write_tensor_of_the_result_shape(device, key):
    a = base()
    t = make(a, device)
    shape = a[np_key(key)].shape
    v = -np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 1
    if v.size == 0:
        pytest.skip("nothing to write")
    if len(set(np.ravel_multi_index(np.indices(SHAPE), SHAPE)[np_key(key)].ravel())) != v.size:
        pytest.skip("a key naming an element twice writes it in no defined order")
    t[as_index(key, "list", device)] = make(v, device)
    a[np_key(key)] = v
    check_same(t, a)


@pytest.mark.parametrize("i", range(7))
def test_mask_write(device, i):
    a = base()
    key = mask_keys(a)[i]
    t = make(a, device)
    t[as_index(key, "tensor@dev", device)] = 0.25
    a[np_key(key)] = 0.25
    check_same(t, a)
    shape = a[np_key(key)].shape
    v = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1000
    t[as_index(key, "tensor@cpu", device)] = make(v, device)
    a[np_key(key)] = v
    check_same(t, a)


@pytest.mark.parametrize(
    "key, vshape",
    [((0,), (5,)), ((slice(None), 1), (4, 1)), ((0,), (1, 3, 4, 5)), (([0, 1], 1), (1, 4, 5)),
     ((slice(None), [0, 2]), (4, 5)), ((Ellipsis, [1, 3]), (2,)),
     ((Ellipsis, [1, 3]), (1, 1, 1, 1, 2))],
)
def test_write_broadcasts(device, key, vshape):
    a = base()
    t = make(a, device)
    v = -np.arange(np.prod(vshape), dtype=np.float32).reshape(vshape)
    t[as_index(key, "list", device)] = make(v, device)
    nd = a[np_key(key)].ndim
    a[np_key(key)] = v.reshape(v.shape[-nd:]) if v.ndim > nd else v  # leading 1s dropped
    check_same(t, a)


def test_write_values_of_other_kinds(device):
    a = base()
    t = make(a, device)
    t[0, 0, 0] = [1, 2, 3, 4, 5]  # a list
    a[0, 0, 0] = [1, 2, 3, 4, 5]
    t[1, 2, [0, 3]] = np.float32(9.5)  # a NumPy scalar
    a[1, 2, [0, 3]] = 9.5
    t[0, 1, 1] = np.arange(5, dtype=np.float64)  # an array (cast to float32)
    a[0, 1, 1] = np.arange(5)
    t[1, 1] = tessera.tensor(2.0)  # a 0-dim cpu tensor goes to any device, as in PyTorch
    a[1, 1] = 2.0
    t[0, 2, 3] = True
    a[0, 2, 3] = 1
    t[0, 2, 2] = tessera.tensor([7, 8, 9, 10, 11], device=device)  # int64 -> float32
    a[0, 2, 2] = [7, 8, 9, 10, 11]
    check_same(t, a)


def test_augmented_assignment(device):
    # t[key] += v reads t[key], adds, and writes back: duplicates add once, as in NumPy
    a = np.arange(6, dtype=np.float32)
    t = tessera.tensor(a.tolist(), device=device)
    t[[0, 2, 2]] += 1
    t[3:] *= 2
    t[t > 7] -= 100
    a[[0, 2, 2]] += 1
    a[3:] *= 2
    a[a > 7] -= 100
    check_same(t, a)


def test_duplicate_indices_last_write_wins(device):
    t = tessera.tensor([0.0, 1, 2, 3, 4], device=device)
    t[[1, 1, 3]] = tessera.tensor([7.0, 8, 9], device=device)
    assert t.tolist() == [0, 8, 2, 9, 4]


def test_write_through_a_view_shows_in_the_base(device):
    a = base()
    t = make(a, device)
    v = t[1, :, 2]
    v[0] = 100.0
    v[[1, 2]] = -1.0
    v[:, ::2] = tessera.tensor([5.0, 6.0, 7.0], device=device)[:, None]
    w = a[1, :, 2]
    w[0] = 100.0
    w[[1, 2]] = -1.0
    w[:, ::2] = np.array([5.0, 6.0, 7.0])[:, None]
    check_same(t, a)


def test_int_dtypes_written(device):
    t = tessera.zeros(4, dtype=tessera.int64, device=device)
    t[[0, 2]] = 2**40 + 1
    t[1:2] = 3.9  # cast like copy_: truncates
    assert t.tolist() == [2**40 + 1, 3, 2**40 + 1, 0]


def grad_of(key, device, kind="list"):
    """d/dx sum(x[key] * w) with w = 1, 2, 3, ...: each picked element gets its weights."""
    a = base().astype(np.float64)
    x = tessera.tensor(a.tolist(), dtype=tessera.float64, device=device, requires_grad=True)
    y = x[as_index(key, kind, device)]
    w = np.arange(1, y.numel() + 1, dtype=np.float64).reshape(tuple(y.shape))
    weights = tessera.tensor(w.tolist(), dtype=tessera.float64, device=device) if w.size else 0.0
    (y * weights).sum().backward()
    expected = np.zeros_like(a)
    np.add.at(expected, np_key(key), w)
    return values(x.grad), expected


@pytest.mark.parametrize("key", BASIC[:20] + ADVANCED + [([1, 1, 0], [2, 2, 2])], ids=repr)
def test_gradients_flow_through_reads(device, key):
    got, expected = grad_of(key, device)
    np.testing.assert_array_equal(got, expected)  # sums of small integers: exact


def test_gradients_flow_through_masks(device):
    a = base()
    got, expected = grad_of(a > 60, device, "tensor@dev")
    np.testing.assert_array_equal(got, expected)


def test_gradient_flows_into_the_written_value(device):
    x = tessera.zeros(3, 4, dtype=tessera.float64, device=device)
    v = tessera.tensor([1.0, 2.0, 3.0], dtype=tessera.float64, device=device, requires_grad=True)
    y = x * 1.0
    y[:, [0, 2]] = v[:, None]
    (y * 2.0).sum().backward()
    assert v.grad.tolist() == [4.0, 4.0, 4.0]  # each value written twice, weight 2


def test_writes_through_views_stay_differentiable(device):
    # y = 3x, then parts of y overwritten by keys that make views of y (ints, slices): the
    # gradient reaches v where it was written and x where y was not overwritten
    w = np.arange(12, dtype=np.float64).reshape(3, 4)
    x = tessera.ones(3, 4, dtype=tessera.float64, device=device, requires_grad=True)
    v = tessera.tensor([1.0, 2.0], dtype=tessera.float64, device=device, requires_grad=True)
    y = x * 3.0
    y[0, [0, 2]] = v
    y[1] = v.sum()
    y[2, 1:3] = 5.0
    (y * tessera.tensor(w.tolist(), dtype=tessera.float64, device=device)).sum().backward()
    np.testing.assert_array_equal(values(y), [[1, 3, 2, 3], [3, 3, 3, 3], [3, 5, 5, 3]])
    kept = np.array([[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 1]])
    np.testing.assert_array_equal(values(x.grad), 3 * w * kept)
    assert v.grad.tolist() == [w[0, 0] + w[1].sum(), w[0, 2] + w[1].sum()]


def test_write_into_a_leaf_that_requires_grad_raises(device):
    x = tessera.ones(3, device=device, requires_grad=True)
    with pytest.raises(tessera.TesseraError, match="leaf"):
        x[0] = 2.0
    with tessera.no_grad():
        x[0] = 2.0  # the way an initialiser writes parameters
    assert x.tolist() == [2.0, 1.0, 1.0]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "key, message",
    [(5, "index 5 is out of bounds for dimension 0 with size 2"),
     (-3, "index -3 is out of bounds for dimension 0 with size 2"),
     ((slice(None), 7), "index 7 is out of bounds for dimension 1 with size 3"),
     ((Ellipsis, 5), "index 5 is out of bounds for dimension 3 with size 5"),
     ([0, 2], "index 2 is out of bounds for dimension 0 with size 2"),
     ((0, 0, [1, -5]), "index -5 is out of bounds for dimension 2 with size 4"),
     ((0, 0, 0, 0, 0), "too many indices for tensor of dimension 4"),
     ((Ellipsis, 0, Ellipsis), "an index can only have a single ellipsis"),
     (([0, 1], [0, 1, 2]), "shape mismatch: indexing tensors could not be broadcast together "
                           "with shapes [2], [3]"),
     (np.array([True, False, True]), "The shape of the mask [3] at index 0 does not match the "
                                     "shape of the indexed tensor [2, 3, 4, 5] at index 0")],
    ids=repr,
)
@pytest.mark.parametrize("kind", ["list", "tensor@cpu", "tensor@dev"])
def test_index_errors(device, key, message, kind):
    t = make(base(), device)
    k = as_index(key, kind, device)
    with pytest.raises(IndexError) as e:
        t[k]
    assert message in str(e.value)
    with pytest.raises(IndexError) as e:
        t[k] = 1.0
    assert message in str(e.value)
    check_same(t, base())


def test_ragged_list_index(device):
    t = make(base(), device)
    with pytest.raises(IndexError, match="ragged"):
        t[[[0, 1], [0]]]


@pytest.mark.parametrize("key", ["a", 1.5, {1: 2}, (0, "x"), [0.5], object()], ids=repr)
def test_wrong_key_types(device, key):
    t = make(base(), device)
    with pytest.raises((TypeError, IndexError)) as e:
        t[key]
    if not isinstance(key, list):
        assert e.type is TypeError and "indices must be" in str(e.value)


def test_other_errors(device):
    t = make(base(), device)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(ValueError):
        t[::0]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        t[tessera.tensor([1.0])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        t[0, tessera.tensor([1.0])]  # inside a tuple key too
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[3\] cannot be "
                                           r"broadcast to indexing result of shape \[2, 3, 2, 5\]"):
        t[:, :, [0, 1]] = tessera.tensor([1.0, 2.0, 3.0], device=device)
    with pytest.raises(TypeError, match="can't assign a str"):
        t[0] = "x"
    with pytest.raises(TypeError, match="item deletion"):
        del t[0]
    with pytest.raises(IndexError):
        t[10**30]
    check_same(t, base())  # nothing written by the failed assignments


def test_values_from_another_device(device):
    if device == "cpu":
        pytest.skip("needs a second device")
    a = base()
    t = make(a, device)
    t[0, 0, 0] = tessera.ones(5)  # a view's copy_ crosses devices, as PyTorch's does
    a[0, 0, 0] = 1
    check_same(t, a)
    with pytest.raises(tessera.DeviceError):  # an advanced write does not
        t[0, 0, [0, 1]] = tessera.ones(5)
    check_same(t, a)


def test_no_leak_over_many_index_ops(device):
    t = make(base(), device)
    idx = tessera.tensor([1, 0])
    for _ in range(20):
        t[1, :, [0, 2]] = t[0, :, [3, 1]]
    gc.collect()
    stats = tessera.memory_stats(device)
    before = stats["live_tensors"]
    for _ in range(300):
        t[idx, 1:, 0] = t[idx][:, :2, 1] * 1.0
        t[t > 100] = 1.0
        t[None, ..., 2]
    gc.collect()
    assert tessera.memory_stats(device)["live_tensors"] == before
