"""test_constructor_forms.py — the tensor constructors real PyTorch programs call (issue 53):
tessera.tensor of NumPy arrays and scalars (their dtype kept) and of lists holding 0-dim tensors,
new_* with varargs, the factories' size forms and keywords, randint's overloads, randint_like, the
legacy FloatTensor / LongTensor... and autograd.Variable, set_default_dtype. Expected values are
PyTorch 2's (checked side by side with torch when this was written) or NumPy's."""
import pytest

import tessera

np = pytest.importorskip("numpy")

NP_DTYPES = [(np.float64, tessera.float64), (np.float32, tessera.float32),
             (np.float16, tessera.float16), (np.int64, tessera.int64), (np.int32, tessera.int32),
             (np.int16, tessera.int16), (np.int8, tessera.int8), (np.uint8, tessera.uint8),
             (np.uint16, tessera.uint16), (np.uint32, tessera.uint32),
             (np.uint64, tessera.uint64), (np.bool_, tessera.bool)]


@pytest.fixture(autouse=True)
def default_dtype_back():
    yield
    tessera.set_default_dtype(tessera.float32)


# ------------------------------------------------------------------ tensor(numpy)
@pytest.mark.parametrize("npdt,dt", NP_DTYPES)
def test_tensor_of_array_keeps_dtype_and_values(npdt, dt):
    a = (np.arange(12).reshape(3, 4) % 5 > 1) if npdt is np.bool_ else \
        (np.arange(12).reshape(3, 4) * 7 % 11).astype(npdt)
    t = tessera.tensor(a)
    assert t.dtype == dt and tuple(t.shape) == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)
    assert not a.flat[0]
    a.flat[0] = 1  # a copy: the array's later writes do not show
    assert not t.numpy().flat[0]


def test_tensor_of_array_is_a_copy_and_as_tensor_shares():
    a = np.arange(4.0)
    t, s, f = tessera.tensor(a), tessera.as_tensor(a), tessera.from_numpy(a)
    a[0] = 9
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert s.tolist()[0] == 9 and f.tolist()[0] == 9


def test_tensor_of_strided_arrays():
    a = np.arange(24.0).reshape(4, 6)
    for v in (a[:, ::2], a.T, a[::-1], a[1:3, 4:1:-1]):
        np.testing.assert_array_equal(tessera.tensor(v).numpy(), v)


def test_tensor_of_array_options():
    a = np.array([1.7, -1.7, 2.5])
    t = tessera.tensor(a, dtype=tessera.int32)
    assert t.dtype == tessera.int32 and t.tolist() == [1, -1, 2]  # truncated, as torch
    g = tessera.tensor(a, requires_grad=True)
    assert g.requires_grad and g.is_leaf and g.dtype == tessera.float64
    (g * g).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), 2 * a, rtol=1e-15)
    s = tessera.tensor(a, device="sim:0")
    assert s.device == tessera.device("sim:0") and s.cpu().tolist() == a.tolist()


def test_tensor_of_numpy_scalars_and_0d():
    assert tessera.tensor(np.float64(2.5)).dtype == tessera.float64
    assert tessera.tensor(np.float32(2.5)).dtype == tessera.float32
    assert tessera.tensor(np.int32(3)).dtype == tessera.int32
    assert tessera.tensor(np.bool_(True)).dtype == tessera.bool
    z = tessera.tensor(np.array(3.5))
    assert z.ndim == 0 and z.item() == 3.5 and z.dtype == tessera.float64


def test_tensor_of_lists_with_numpy_leaves_promotes_as_torch():
    # torch: a Python float is the default dtype, a NumPy scalar its own; the leaves promote
    assert tessera.tensor([np.float64(1.0), 2.0]).dtype == tessera.float64
    assert tessera.tensor([np.float32(1.0), 2.0]).dtype == tessera.float32
    assert tessera.tensor([np.int32(1), 2]).dtype == tessera.int64
    assert tessera.tensor([np.int32(1), np.int32(2)]).dtype == tessera.int32
    assert tessera.tensor([np.float32(1), np.float64(2)]).dtype == tessera.float64
    t = tessera.tensor([np.array([1.0, 2.0]), np.array([3.0, 4.5])])
    assert t.dtype == tessera.float64 and t.tolist() == [[1.0, 2.0], [3.0, 4.5]]
    assert tessera.tensor([np.array([1, 2]), np.array([3, 4])]).dtype == tessera.int64


def test_tensor_of_unsupported_arrays_raises():
    assert tessera.tensor(np.array([1 + 2j])).dtype == tessera.complex128  # the dtype kept
    with pytest.raises(TypeError, match="float64"):
        tessera.tensor(np.array([1], dtype=np.float128))
    with pytest.raises(TypeError):
        tessera.tensor(np.array(["a"]))


# ------------------------------------------------------------------ tensor(lists of tensors)
def test_tensor_of_lists_with_0dim_tensors():
    t = tessera.tensor([tessera.tensor(1.5), 2])
    assert t.dtype == tessera.float32 and t.tolist() == [1.5, 2.0]
    assert tessera.tensor([tessera.tensor(1.5, dtype=tessera.float64), 2]).dtype == \
        tessera.float64
    assert tessera.tensor([tessera.tensor(1), 2.5]).dtype == tessera.float32
    assert tessera.tensor([tessera.tensor(1, dtype=tessera.int32), 2]).dtype == tessera.int64
    i32 = tessera.tensor([tessera.tensor(1, dtype=tessera.int32)] * 2)
    assert i32.dtype == tessera.int32 and i32.tolist() == [1, 1]
    m = tessera.tensor([[tessera.tensor(1.0), 2.0], [3, tessera.tensor(4)]])
    assert m.tolist() == [[1.0, 2.0], [3.0, 4.0]] and m.dtype == tessera.float32
    assert tessera.tensor([tessera.tensor(True), False]).dtype == tessera.bool
    assert tessera.tensor([tessera.tensor(True), 1]).dtype == tessera.int64
    losses = [tessera.tensor(0.25), tessera.tensor(0.5)]  # the typical use: a list of losses
    assert tessera.tensor(losses).mean().item() == 0.375
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        tessera.tensor([tessera.tensor([1, 2]), tessera.tensor([3, 4])])


def test_tensor_inference_basics():
    assert tessera.tensor([1, 2.5, True]).dtype == tessera.float32
    assert tessera.tensor([]).dtype == tessera.float32
    assert tessera.tensor(3).dtype == tessera.int64 and tessera.tensor(True).dtype == tessera.bool


# ------------------------------------------------------------------ new_*
def test_new_methods_take_varargs_and_tuples():
    x = tessera.zeros(2, 3, dtype=tessera.float64, device="sim:0")
    for t in (x.new_ones(5, 3), x.new_ones((5, 3)), x.new_ones([5, 3]), x.new_ones(size=(5, 3))):
        assert tuple(t.shape) == (5, 3) and t.dtype == tessera.float64
        assert t.device == x.device and t.cpu().tolist() == [[1.0] * 3] * 5
    assert tuple(x.new_ones(5).shape) == (5,)
    assert x.new_zeros(2, 3, dtype=tessera.int64).dtype == tessera.int64
    assert x.new_zeros(2, 3).cpu().tolist() == [[0.0] * 3] * 2
    assert tuple(x.new_empty(4, 1).shape) == (4, 1)
    assert tuple(x.new_zeros(()).shape) == ()
    r = x.new_ones(2, 2, requires_grad=True)
    assert r.requires_grad and r.is_leaf
    f = x.new_full((2,), 3)
    assert f.dtype == tessera.float64 and f.cpu().tolist() == [3.0, 3.0]
    assert x.new_full(size=(2,), fill_value=1.5).cpu().tolist() == [1.5, 1.5]
    assert x.new_tensor([1, 2]).dtype == tessera.float64
    assert tessera.zeros(1, dtype=tessera.int64).new_tensor([1.5, 2]).tolist() == [1, 2]


def test_new_methods_errors():
    x = tessera.zeros(2)
    with pytest.raises(TypeError):
        x.new_ones()
    with pytest.raises(TypeError):
        x.new_ones(5, 3.0)
    with pytest.raises(TypeError):
        x.new_ones(5, size=(3,))


# ------------------------------------------------------------------ factory forms
@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_factory_size_forms(fn):
    f = getattr(tessera, fn)
    for t in (f(2, 3), f((2, 3)), f([2, 3]), f(size=(2, 3)), f(tessera.Size([2, 3]))):
        assert tuple(t.shape) == (2, 3) and t.dtype == tessera.float32
    assert tuple(f(()).shape) == () and tuple(f([]).shape) == ()
    t = f(2, dtype=tessera.float64, device="sim:0", requires_grad=True)
    assert t.dtype == tessera.float64 and t.device == tessera.device("sim:0") and t.requires_grad
    with pytest.raises(TypeError):
        f(2, size=(3,))
    with pytest.raises(TypeError):
        f(2.0)
    with pytest.raises(TypeError):
        f(2, fill_value=1)


def test_full_forms():
    assert tessera.full((2,), 3).dtype == tessera.int64
    assert tessera.full((2,), 3.5).tolist() == [3.5, 3.5]
    assert tessera.full((2,), True).dtype == tessera.bool
    assert tessera.full(size=(2,), fill_value=3).tolist() == [3, 3]
    assert tessera.full((2,), fill_value=1.5, dtype=tessera.float64).dtype == tessera.float64
    assert tessera.full([2, 2], 7, dtype=tessera.float32).tolist() == [[7.0, 7.0]] * 2
    assert tessera.full((2,), 3, dtype=tessera.float32, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="fill_value"):
        tessera.full((2,))
    with pytest.raises(TypeError):
        tessera.full((2,), 1, 2)


def test_factory_out():
    o = tessera.empty(2, 3)
    r = tessera.zeros(2, 3, out=o)
    assert r is o and o.tolist() == [[0.0] * 3] * 2
    tessera.ones((2, 3), out=o)
    assert o.tolist() == [[1.0] * 3] * 2
    tessera.full((2, 3), 7, out=o)  # out's dtype, not the int fill's
    assert o.dtype == tessera.float32 and o.tolist() == [[7.0] * 3] * 2
    i = tessera.zeros(4, dtype=tessera.int64)
    assert tessera.arange(4, out=i) is i and i.tolist() == [0, 1, 2, 3]
    f = tessera.zeros(3, dtype=tessera.float64)
    tessera.arange(0, 1.5, 0.5, out=f)
    assert f.tolist() == [0.0, 0.5, 1.0]
    s = tessera.zeros(2, device="sim:0")
    tessera.ones(2, out=s)
    assert s.device == tessera.device("sim:0") and s.cpu().tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="resize"):
        tessera.zeros(3, out=o)
    assert o.tolist() == [[7.0] * 3] * 2
    with pytest.raises(TypeError, match="out"):
        tessera.zeros(2, out=[0.0, 0.0])


def test_randint_overloads():
    tessera.manual_seed(0)
    for t in (tessera.randint(10, (300,)), tessera.randint(10, size=(300,)),
              tessera.randint(high=10, size=(300,))):
        v = t.tolist()
        assert t.dtype == tessera.int64 and len(v) == 300 and min(v) >= 0 and max(v) <= 9
        assert len(set(v)) == 10  # 300 draws of 10 values: every one shows
    for t in (tessera.randint(3, 10, (300,)), tessera.randint(low=3, high=10, size=(300,)),
              tessera.randint(3, high=10, size=(300,))):
        v = t.tolist()
        assert min(v) == 3 and max(v) == 9
    assert tessera.randint(0, 1, (4,)).tolist() == [0, 0, 0, 0]
    assert tessera.randint(10, (3,), dtype=tessera.float32).dtype == tessera.float32
    with pytest.raises(TypeError, match="size"):
        tessera.randint(10)
    with pytest.raises(TypeError, match="high"):
        tessera.randint(size=(2,))


def test_randint_like():
    x = tessera.zeros(200, 2)
    r = tessera.randint_like(x, 5)
    assert r.dtype == tessera.float32 and tuple(r.shape) == (200, 2)
    v = r.flatten().tolist()
    assert min(v) == 0 and max(v) == 4 and all(a == int(a) for a in v)
    assert tessera.randint_like(x, 1, 2).flatten().tolist() == [1.0] * 400
    assert tessera.randint_like(x, low=1, high=2).flatten().tolist() == [1.0] * 400
    assert tessera.randint_like(tessera.zeros(2, dtype=tessera.int32), 5).dtype == tessera.int32
    assert tessera.randint_like(x, 5, dtype=tessera.int64).dtype == tessera.int64
    assert tessera.randint_like(x.to("sim:0"), 5).device == tessera.device("sim:0")


# ------------------------------------------------------------------ legacy constructors
def test_legacy_typed_constructors():
    cases = [(tessera.FloatTensor, tessera.float32), (tessera.DoubleTensor, tessera.float64),
             (tessera.LongTensor, tessera.int64), (tessera.IntTensor, tessera.int32),
             (tessera.BoolTensor, tessera.bool), (tessera.ByteTensor, tessera.uint8),
             (tessera.HalfTensor, tessera.float16), (tessera.ShortTensor, tessera.int16),
             (tessera.CharTensor, tessera.int8)]
    for cls, dt in cases:
        assert cls.dtype == dt
        assert cls(2, 3).dtype == dt and tuple(cls(2, 3).shape) == (2, 3)
        assert tuple(cls().shape) == (0,) and cls().dtype == dt
        assert tuple(cls(tessera.Size([4])).shape) == (4,)
        assert cls([1, 0]).dtype == dt
        assert isinstance(cls([1]), cls)
    assert tessera.FloatTensor([1, 2]).tolist() == [1.0, 2.0]
    assert tessera.FloatTensor((2, 3)).tolist() == [2.0, 3.0]  # a tuple is data, as torch
    assert tessera.IntTensor([1.7, -1.7]).tolist() == [1, -1]
    assert tessera.BoolTensor([1, 0]).tolist() == [True, False]
    assert tessera.FloatTensor(np.arange(3.0)).dtype == tessera.float32
    assert tuple(tessera.FloatTensor(np.int64(3)).shape) == (3,)
    assert tuple(tessera.FloatTensor(2, 3, device="cpu").shape) == (2, 3)


def test_legacy_constructor_of_a_tensor_shares_or_refuses():
    x = tessera.tensor([1.5, 2.5])
    y = tessera.FloatTensor(x)
    y[0] = 7
    assert x.tolist() == [7.0, 2.5]
    with pytest.raises(TypeError, match="dtype"):
        tessera.LongTensor(x)
    with pytest.raises(TypeError):
        tessera.FloatTensor("abc")
    with pytest.raises(TypeError):
        tessera.FloatTensor(2.5)
    with pytest.raises(RuntimeError, match="device type"):
        tessera.FloatTensor(2, device="sim:0")


def test_legacy_isinstance_and_type():
    assert isinstance(tessera.zeros(2), tessera.FloatTensor)
    assert not isinstance(tessera.zeros(2, dtype=tessera.int64), tessera.FloatTensor)
    assert isinstance(tessera.zeros(2, dtype=tessera.int64), tessera.LongTensor)
    assert not isinstance(tessera.zeros(2), tessera.cuda.FloatTensor)
    assert not isinstance(tessera.zeros(2, device="sim:0"), tessera.FloatTensor)
    assert not isinstance(3, tessera.FloatTensor)
    assert tessera.zeros(2).type(tessera.LongTensor).dtype == tessera.int64
    assert tessera.zeros(2).type("torch.LongTensor").dtype == tessera.int64
    assert tessera.zeros(2).type(tessera.DoubleTensor).type() == "tessera.DoubleTensor"


def test_variable():
    from tessera.autograd import Variable
    x = tessera.ones(2)
    v = Variable(x, requires_grad=True)
    assert v is not x and v.requires_grad and v.is_leaf and not x.requires_grad
    (v * 3).sum().backward()
    assert v.grad.tolist() == [3.0, 3.0]
    assert not Variable(x).requires_grad
    y = tessera.ones(2, requires_grad=True) * 2
    d = Variable(y)
    assert not d.requires_grad and d.grad_fn is None  # detached, as torch's
    assert isinstance(x, Variable) and isinstance(v, tessera.Tensor)
    v.data[0] = 5  # shares memory with x
    assert x.tolist() == [5.0, 1.0]
    with pytest.raises(TypeError, match="tensor"):
        Variable([1, 2])


# ------------------------------------------------------------------ set_default_dtype
def test_set_default_dtype_float64():
    tessera.set_default_dtype(tessera.float64)
    assert tessera.get_default_dtype() == tessera.float64
    f64 = tessera.float64
    for t in (tessera.tensor([1.5]), tessera.zeros(2), tessera.ones(2), tessera.empty(2),
              tessera.rand(2), tessera.randn(2), tessera.full((2,), 1.5), tessera.tensor([]),
              tessera.linspace(0, 1, 3), tessera.logspace(0, 1, 3), tessera.eye(2),
              tessera.arange(0, 1, 0.5), tessera.Tensor([1]), tessera.Tensor(2),
              tessera.tensor(2.5), tessera.tensor([1]) + 0.5, 0.5 * tessera.tensor([1])):
        assert t.dtype == f64
    for t, dt in ((tessera.full((2,), 1), tessera.int64), (tessera.arange(3), tessera.int64),
                  (tessera.randint(3, (2,)), tessera.int64),
                  (tessera.tensor(np.float32(2.5)), tessera.float32),
                  (tessera.tensor([np.float32(2.5)]), tessera.float32),
                  (tessera.FloatTensor([1]), tessera.float32),
                  (tessera.zeros_like(tessera.zeros(2, dtype=tessera.float32)), tessera.float32),
                  (tessera.tensor([1, 2]).float(), tessera.float32)):
        assert t.dtype == dt
    # exact in float64: 0.1 is not rounded through float32
    assert tessera.tensor([0.1]).item() == 0.1 and tessera.full((1,), 0.1).item() == 0.1
    assert tessera.nn.Linear(2, 3).weight.dtype == f64
    assert tessera.nn.BatchNorm1d(2).running_mean.dtype == f64
    # repr names float32 now, and not float64, as torch's
    assert "dtype" not in repr(tessera.ones(2))
    assert repr(tessera.tensor([1.5], dtype=tessera.float32)) == \
        "tensor([1.5000], dtype=tessera.float32)"
    assert repr(tessera.ones(2, dtype=tessera.float32, requires_grad=True)) == \
        "tensor([1., 1.], dtype=tessera.float32, requires_grad=True)"
    tessera.set_default_dtype(tessera.float32)
    assert tessera.zeros(1).dtype == tessera.float32 and "dtype" not in repr(tessera.ones(1))


def test_set_default_dtype_half_types_and_errors():
    for dt in (tessera.float16, tessera.bfloat16):
        tessera.set_default_dtype(dt)
        assert tessera.tensor([1.5]).dtype == dt and tessera.zeros(2).dtype == dt
    tessera.set_default_dtype(tessera.float32)
    with pytest.raises(TypeError, match="floating-point"):
        tessera.set_default_dtype(tessera.int64)
    with pytest.raises(TypeError):
        tessera.set_default_dtype("float64")
    assert tessera.get_default_dtype() == tessera.float32
