"""test_complex_inplace.py — the in-place forms of complex tensors beyond add_ / sub_ / mul_ /
div_ (issue 52; src/ops/complex_inplace.c, python/tessera/_inplace_methods.py): each writes the
tensor's own storage (views of it, view_as_real and view_as_complex included), bumps its version
once, returns it, refuses a leaf that requires grad and makes a backward that saved the old value
raise, as PyTorch's do; values against NumPy's complex128, gradients against closed forms in
PyTorch's convention (dL/dx + i dL/dy). neg_ with no graph and conj_physical_ write the parts in
place; square / pow(z, 2) is the native product z * z and reciprocal the native quotient 1 / z;
fill_ takes a complex value."""
import numpy as np
import pytest

import tessera

DEVICES = ["cpu", "sim:0"]
DTYPES = [tessera.complex64, tessera.complex128]
U = {tessera.complex64: 2.0 ** -24, tessera.complex128: 2.0 ** -53}

# name, args, NumPy's value of the same function (a is the input); k: its error in units of
# the dtype's rounding (a few real ops, the parts' libm calls and one division)
FORMS = [
    ("neg_", (), lambda a: -a, 0),
    ("conj_physical_", (), np.conj, 0),
    ("exp_", (), np.exp, 16),
    ("log_", (), np.log, 16),
    ("sqrt_", (), np.sqrt, 16),
    ("sin_", (), np.sin, 16),
    ("cos_", (), np.cos, 16),
    ("tanh_", (), np.tanh, 32),
    ("sigmoid_", (), lambda a: 1 / (1 + np.exp(-a)), 32),
    ("reciprocal_", (), lambda a: 1 / a, 8),
    ("rsqrt_", (), lambda a: 1 / np.sqrt(a), 32),
    ("square_", (), lambda a: a * a, 4),
    ("sgn_", (), lambda a: a / np.abs(a), 8),
    ("pow_", (2,), lambda a: a * a, 4),
    ("pow_", (0.5,), np.sqrt, 16),
    ("pow_", (1.5,), lambda a: a ** 1.5, 64),
    ("mul_", (2.5,), lambda a: a * 2.5, 2),
    ("mul_", (2j,), lambda a: a * 2j, 2),
    ("div_", (1 - 2j,), lambda a: a / (1 - 2j), 8),
]


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def cvals(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, n) + 1j * rng.uniform(-1.5, 1.5, n)


def ctensor(v, dtype, device, requires_grad=False):
    return tessera.tensor(np.asarray(v).tolist(), dtype=dtype, device=device,
                          requires_grad=requires_grad)


def close(got, want, dtype, k):
    tol = max(k, 1) * 4 * U[dtype]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f[0] + str(f[1]))
def test_writes_its_storage(form, dtype, device):
    name, args, ref, k = form
    x = ctensor(cvals(6, 1), dtype, device)
    a = arr(x)
    parts, v0 = tessera.view_as_real(x), x._version
    y = getattr(x, name)(*args)
    assert y is x and x.dtype == dtype
    assert x._version == v0 + 1  # one write, as PyTorch's
    close(arr(x), ref(a), dtype, k)
    np.testing.assert_array_equal(arr(parts), np.stack([arr(x).real, arr(x).imag], -1))
    # a strided view writes through to its base; the other elements stay
    base = ctensor(np.concatenate([a, a]), dtype, device)
    getattr(base[::2], name)(*args)
    want = np.concatenate([a, a])
    want[::2] = ref(want[::2])
    close(arr(base), want, dtype, k)
    np.testing.assert_array_equal(arr(base)[1::2], np.concatenate([a, a])[1::2])
    # a complex view of a real tensor writes the real tensor
    pdt = tessera.float32 if dtype == tessera.complex64 else tessera.float64
    r = tessera.tensor(np.stack([a.real, a.imag], -1).tolist(), dtype=pdt, device=device)
    getattr(tessera.view_as_complex(r), name)(*args)
    got = arr(r)
    close(got[:, 0] + 1j * got[:, 1], ref(a), dtype, k)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f[0] + str(f[1]))
def test_autograd_refusals(form):
    name, args = form[0], form[1]
    leaf = ctensor(cvals(4, 2), tessera.complex128, "cpu", requires_grad=True)
    with pytest.raises(Exception, match="leaf Variable"):
        getattr(leaf, name)(*args)
    # an earlier op saved y: writing y makes that backward raise (the version counter)
    z = ctensor(cvals(4, 2), tessera.complex128, "cpu", requires_grad=True)
    y = z * 1.0
    u = y * y
    getattr(y, name)(*args)
    with pytest.raises(Exception, match="modified by an inplace operation"):
        u.real.sum().backward()


# the gradient of L = sum(1.3 Re f(z) + 0.7 Im f(z)) in PyTorch's convention: (1.3 + 0.7i) times
# the conjugate of f'(z) for a holomorphic f; conj: L = sum(1.3 x - 0.7 y), so 1.3 - 0.7i
GRADS = [
    ("neg_", (), lambda z: -np.ones_like(z)),
    ("exp_", (), np.exp),
    ("sqrt_", (), lambda z: 0.5 / np.sqrt(z)),
    ("square_", (), lambda z: 2 * z),
    ("pow_", (2,), lambda z: 2 * z),
    ("sin_", (), np.cos),
    ("reciprocal_", (), lambda z: -1 / (z * z)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", GRADS, ids=lambda f: f[0] + str(f[1]))
def test_gradient(form, device):
    name, args, deriv = form
    a = cvals(5, 3)
    z = ctensor(a, tessera.complex128, device, requires_grad=True)
    y = z * 1.0
    getattr(y, name)(*args)
    (1.3 * y.real + 0.7 * y.imag).sum().backward()
    np.testing.assert_allclose(arr(z.grad), (1.3 + 0.7j) * np.conj(deriv(a)), rtol=1e-13,
                               atol=1e-13)


@pytest.mark.parametrize("device", DEVICES)
def test_conj_physical_(device):
    a = cvals(5, 4)
    z = ctensor(a, tessera.complex128, device, requires_grad=True)
    y = z * 1.0
    assert y.conj_physical_() is y
    np.testing.assert_array_equal(arr(y), np.conj(a))
    (1.3 * y.real + 0.7 * y.imag).sum().backward()
    np.testing.assert_array_equal(arr(z.grad), np.full(5, 1.3 - 0.7j))
    # the function form; a real tensor is left as it is (one write, as PyTorch's)
    x = ctensor(a, tessera.complex64, device)
    assert tessera.conj_physical_(x) is x
    np.testing.assert_array_equal(arr(x), np.conj(arr(ctensor(a, tessera.complex64, device))))
    r = tessera.tensor([1.0, -2.0], device=device)
    v0 = r._version
    assert r.conj_physical_() is r and arr(r).tolist() == [1.0, -2.0] and r._version == v0 + 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_native_forms(dtype, device):
    """square and pow(z, 2) are z * z's native product, reciprocal 1 / z's native quotient, bit for
    bit (PyTorch's pow(z, 2) and reciprocal); 1 / 0 is inf + NaN i"""
    z = ctensor(cvals(37, 5) * 1e3, dtype, device)
    zz = arr(z * z)
    for got in (z.square(), z ** 2, z.pow(2), z.clone().pow_(2), z.clone().square_()):
        np.testing.assert_array_equal(arr(got), zz)
    q = arr(1.0 / z)
    for got in (z.reciprocal(), z ** -1, z.clone().reciprocal_()):
        np.testing.assert_array_equal(arr(got), q)
    np.testing.assert_array_equal(arr(z.sqrt().reciprocal()), arr(z.rsqrt()))
    r = arr(ctensor([0j, 1 + 0j], dtype, device).reciprocal())
    assert np.isinf(r[0].real) and np.isnan(r[0].imag) and r[1] == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_complex(dtype, device):
    x = ctensor(cvals(4, 6), dtype, device)
    v0 = x._version
    assert x.fill_(1 + 2j) is x and x._version > v0
    assert arr(x).tolist() == [1 + 2j] * 4
    x.fill_(tessera.tensor(-0.5 + 3j))
    assert arr(x).tolist() == [-0.5 + 3j] * 4
    x.fill_(2.5)
    assert arr(x).tolist() == [2.5 + 0j] * 4
    base = ctensor(np.zeros(4), dtype, device)
    base[1:3].fill_(1j)
    assert arr(base).tolist() == [0, 1j, 1j, 0]
    with pytest.raises(Exception, match="0-dimension"):
        x.fill_(tessera.tensor([1j, 2j]))
    r = tessera.zeros(3, device=device)
    with pytest.raises(Exception):
        r.fill_(1 + 2j)  # a real tensor cannot hold a complex value
    assert arr(r).tolist() == [0.0, 0.0, 0.0]
