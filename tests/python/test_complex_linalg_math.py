"""test_complex_linalg_math.py — complex tensors' matmul family, transcendental functions, comparisons
and in-place arithmetic (issue 52; src/ops/complex_math.c, complex_linalg.c, complex_inplace.c)
on cpu and sim:0 against NumPy in float64 / complex128, and against PyTorch (values and
gradients) where it is installed (the tests that need it skip without it)."""
import numpy as np
import pytest

import tessera

DEVICES = ["cpu", "sim:0"]
DTYPES = [tessera.complex64, tessera.complex128]


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def cvals(shape, seed, lo=-2.5, hi=2.5):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, shape) + 1j * rng.uniform(-1.7, 1.7, shape)


def ctensor(v, dtype, device, requires_grad=False):
    return tessera.tensor(np.asarray(v).tolist(), dtype=dtype, device=device,
                          requires_grad=requires_grad)


def tols(dtype, k=1):
    """a composition of ~a dozen rounded real ops (k: the length of a product's sums)"""
    u = 2.0 ** -24 if dtype == tessera.complex64 else 2.0 ** -53
    return 32 * k * u, 32 * k * u


# ------------------------------------------------------------------ matmul family
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_family(device, dtype):
    a, b = cvals((2, 3, 4), 1), cvals((2, 4, 5), 2)
    x, y = ctensor(a, dtype, device), ctensor(b, dtype, device)
    a, b = arr(x), arr(y)  # the values the dtype holds
    rtol, atol = tols(dtype, 8)
    for got, want in [(x @ y, a @ b), (tessera.bmm(x, y), a @ b), (x @ y[0], a @ b[0]),
                      (tessera.mm(x[0], y[1]), a[0] @ b[1]), (x[0].mm(y[1]), a[0] @ b[1]),
                      (tessera.matmul(x[1], y[0, :, 0]), a[1] @ b[0, :, 0]),
                      (tessera.mv(x[1], y[0, :, 0]), a[1] @ b[0, :, 0]),
                      (x[0, 0].dot(y[0, :, 1]), np.dot(a[0, 0], b[0, :, 1])),
                      (tessera.vdot(x[0, 0], y[0, :, 1]), np.vdot(a[0, 0], b[0, :, 1])),
                      (x[0, 0] @ y[0, :, 1], a[0, 0] @ b[0, :, 1]),
                      (x[0].t() @ x[1], a[0].T @ a[1])]:
        assert got.dtype == dtype
        np.testing.assert_allclose(arr(got), want, rtol=rtol, atol=atol)
    # the conjugate transposes and vecdot (conj of the first operand)
    np.testing.assert_array_equal(arr(x[0].H), a[0].conj().T)
    np.testing.assert_array_equal(arr(x.mH), a.conj().transpose(0, 2, 1))
    np.testing.assert_allclose(arr(tessera.linalg.vecdot(x, x[0])),
                               np.sum(a.conj() * a[0], -1), rtol=rtol, atol=atol)
    # PyTorch's refusals: a real operand beside a complex one, two complex dtypes
    with pytest.raises(tessera.DtypeError, match="same dtype"):
        x @ x.real.transpose(1, 2)
    with pytest.raises(tessera.DtypeError, match="same dtype"):
        tessera.dot(x[0, 0], x[0, 0].to(tessera.complex64 if dtype == tessera.complex128
                                        else tessera.complex128))


# ------------------------------------------------------------------ functions
def np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


FUNCS = [
    ("exp", np.exp), ("log", np.log), ("log2", np.log2), ("log10", np.log10),
    ("sqrt", np.sqrt), ("rsqrt", lambda z: 1 / np.sqrt(z)), ("reciprocal", lambda z: 1 / z),
    ("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("sinh", np.sinh), ("cosh", np.cosh),
    ("tanh", np.tanh), ("sigmoid", np_sigmoid), ("sgn", lambda z: z / np.abs(z)),
    ("square", np.square),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_functions(device, dtype):
    x = ctensor(cvals((3, 5), 3), dtype, device)
    a = arr(x)
    rtol, atol = tols(dtype)
    for name, ref in FUNCS:
        want = ref(a)
        for got in (getattr(tessera, name)(x), getattr(x, name)()):
            assert got.dtype == dtype, name
            # |got - want| <= atol + rtol |want| with the condition |z f'| / |f| of tan and
            # friends near their poles folded into atol
            np.testing.assert_allclose(arr(got), want, rtol=rtol, atol=atol * (1 + np.abs(want)).max(),
                                       err_msg=name)
        if name in ("exp", "log", "sqrt", "sigmoid", "tanh"):
            continue  # their in-place forms: test_inplace
        y = x.clone()
        assert getattr(y, name + "_")() is y and y.dtype == dtype  # the in-place form
        np.testing.assert_allclose(arr(y), want, rtol=rtol, atol=atol * (1 + np.abs(want)).max(),
                                   err_msg=name + "_")
    for name, args in [("bernoulli_", ()), ("random_", ())]:  # draws: refused, as PyTorch's
        with pytest.raises(NotImplementedError, match="not implemented for 'Complex"):
            getattr(x.clone(), name)(*args)
    w = ctensor(cvals((3, 5), 4) * 0.5, dtype, device)
    bw = arr(w)
    r = 4 * rtol
    for got, want in [(x ** 2.5, a ** 2.5), (x ** -1.3, a ** -1.3), (x ** w, a ** bw),
                      (tessera.pow(x, w.real), a ** bw.real), (1.7 ** x, 1.7 ** a),
                      (x ** 1j, a ** 1j), (x ** 2, a * a), (x ** 0.5, np.sqrt(a)),
                      (x.pow(0), np.ones_like(a))]:
        np.testing.assert_allclose(arr(got), want, rtol=r, atol=r)


@pytest.mark.parametrize("device", DEVICES)
def test_branch_cuts(device):
    z = tessera.tensor([complex(-4, -0.0), complex(-4, 0.0), complex(-1, -0.0), 0j],
                       dtype=tessera.complex128, device=device)
    got = arr(z.sqrt())
    assert got.tolist() == [-2j, 2j, -1j, 0j]
    assert np.signbit(got.imag).tolist() == [True, False, True, False]
    np.testing.assert_allclose(arr(z.log())[:3], [np.log(4) - np.pi * 1j, np.log(4) + np.pi * 1j,
                                                  -np.pi * 1j], rtol=1e-15)
    assert arr(z.log())[3].real == -np.inf
    assert np.isinf(arr(z.reciprocal())[3].real) and np.isnan(arr(z.reciprocal())[3].imag)
    assert arr(tessera.tensor([complex(float("inf"), 0)], device=device).exp()).tolist() == \
        [complex(float("inf"), 0)]
    far = tessera.tensor([complex(400, 1), complex(-400, 0.5)], dtype=tessera.complex128,
                         device=device)
    np.testing.assert_allclose(arr(far.tanh()), np.tanh([400 + 1j, -400 + 0.5j]), rtol=1e-15)
    np.testing.assert_allclose(arr(far.sigmoid()), np_sigmoid(np.array([400 + 1j, -400 + 0.5j])),
                               rtol=1e-14)


# ------------------------------------------------------------------ comparisons
@pytest.mark.parametrize("device", DEVICES)
def test_compare(device):
    nan, inf = float("nan"), float("inf")
    av = np.array([1 + 2j, 1 + 2j, complex(nan, 0), 3, complex(inf, 1), complex(0, -inf)])
    bv = np.array([1 + 2j, 1 - 2j, complex(nan, 0), 3, complex(inf, 1), 1j])
    x = tessera.tensor(av.tolist(), device=device)
    y = tessera.tensor(bv.tolist(), dtype=tessera.complex128, device=device)
    assert arr(x == y).tolist() == (av == bv).tolist()
    assert arr(x != y).tolist() == (av != bv).tolist()
    assert arr(x == 3).tolist() == (av == 3).tolist()
    assert arr(x.eq(1 + 2j)).tolist() == (av == 1 + 2j).tolist()
    assert arr(x.ne(y)).tolist() == (av != bv).tolist()
    for name in ("isnan", "isinf", "isfinite", "isreal"):
        assert arr(getattr(x, name)()).tolist() == getattr(np, name)(av).tolist(), name
    c = np.array([1 + 1j, 1 + 1j, complex(nan, 1), 100])
    e = np.array([1 + 1.0005j, 1.002 + 1j, complex(nan, 1), 100 + 0.5j])
    ct = tessera.tensor(c.tolist(), dtype=tessera.complex128, device=device)
    et = tessera.tensor(e.tolist(), dtype=tessera.complex128, device=device)
    for rtol, atol, en in [(0, 1e-3, False), (0, 1e-3, True), (1e-2, 1e-3, False)]:
        assert arr(tessera.isclose(ct, et, rtol=rtol, atol=atol, equal_nan=en)).tolist() == \
            np.isclose(c, e, rtol=rtol, atol=atol, equal_nan=en).tolist()
    assert tessera.allclose(ct, ct, equal_nan=True) and not tessera.allclose(ct, et)
    for f in (lambda: x < y, lambda: x.sign(), lambda: tessera.isposinf(x), lambda: x.asin()):
        with pytest.raises(tessera.DtypeError):
            f()


# ------------------------------------------------------------------ in place
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace(device, dtype):
    a, b = cvals((3, 4), 5), cvals((3, 4), 6)
    x, y = ctensor(a, dtype, device), ctensor(b, dtype, device)
    a, b = arr(x), arr(y)
    keep, flat = x, x.view(-1)  # a view: the writes land in x's storage
    x += y
    x -= 0.5
    x *= 1j
    x /= y
    x *= y.real[0]
    x += 2 + 1j
    want = ((a + b - 0.5) * 1j / b) * b.real[0] + (2 + 1j)
    assert x is keep and x.dtype == dtype
    rtol, atol = tols(dtype)
    np.testing.assert_allclose(arr(x), want, rtol=4 * rtol, atol=4 * atol)
    np.testing.assert_array_equal(arr(flat), arr(x).reshape(-1))
    x.add_(y)
    x.sub_(y).mul_(y).div_(y)
    np.testing.assert_allclose(arr(x), want, rtol=8 * rtol, atol=8 * atol)
    x.exp_()
    np.testing.assert_allclose(arr(x), np.exp(want), rtol=64 * rtol, atol=64 * atol)
    # a view writes its base
    z = ctensor(a, dtype, device)
    z[1] += z[0]
    want = a.copy()
    want[1] += a[0]
    np.testing.assert_allclose(arr(z), want, rtol=rtol, atol=atol)
    # PyTorch's refusals
    r = tessera.ones(3, 4, device=device)
    with pytest.raises(tessera.DtypeError, match="can't be cast"):
        r += y
    leaf = ctensor(a, dtype, device, requires_grad=True)
    with pytest.raises(Exception, match="leaf Variable"):
        leaf *= 2
    with pytest.raises(tessera.DtypeError, match="In-place abs"):
        x.abs_()


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_grad(device):
    """in place on a non-leaf: the gradient of the out-of-place chain"""
    a, b = cvals((4,), 7), cvals((4,), 8)

    def run(inplace):
        z = ctensor(a, tessera.complex128, device, requires_grad=True)
        w = ctensor(b, tessera.complex128, device, requires_grad=True)
        if inplace:
            y = z * 1.0
            y *= w
            y += z
            y /= 2.0
            y.sqrt_()
        else:
            y = ((z * 1.0 * w + z) / 2.0).sqrt()
        (y * tessera.tensor([1 + 2j, -1, 0.5j, 2], dtype=tessera.complex128,
                            device=device)).real.sum().backward()
        return arr(y), arr(z.grad), arr(w.grad)

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------ against PyTorch
TORCH_CASES = [n for n, _ in FUNCS] + ["pow25", "powc", "rpow", "matmul", "vdot", "mv"]


def apply(mod, name, z, w):
    if name == "pow25":
        return z ** 2.5
    if name == "powc":
        return z ** (w * 0.3)
    if name == "rpow":
        return 1.7 ** z
    if name == "matmul":
        return z.reshape(2, 3) @ w.reshape(3, 2)
    if name == "vdot":
        return mod.vdot(z, w)
    if name == "mv":
        return mod.mv(z.reshape(2, 3), w[:3])
    return getattr(mod, name)(z)


@pytest.mark.parametrize("device", DEVICES)
def test_against_torch(device):
    torch = pytest.importorskip("torch")
    zv, wv = cvals((6,), 9), cvals((6,), 10)
    zv[0] = complex(-4, 0.0)  # on the cut: PyTorch's one-sided values and gradients
    zv[1] = complex(-4, -0.0)
    gv = cvals((6,), 11)
    for name in TORCH_CASES:
        outs = []
        for mod in (torch, tessera):
            kw = {"device": device} if mod is tessera else {}
            z = mod.tensor(zv.tolist(), dtype=mod.complex128, requires_grad=True, **kw)
            w = mod.tensor(wv.tolist(), dtype=mod.complex128, requires_grad=True, **kw)
            y = apply(mod, name, z, w)
            g = mod.tensor(gv[:y.numel()].reshape(tuple(y.shape)).tolist(),
                           dtype=mod.complex128, **kw)
            (y * g).real.sum().backward()
            outs.append([np.array(y.detach().cpu().tolist() if mod is torch else arr(y)),
                         np.array(z.grad.tolist() if mod is torch else arr(z.grad)),
                         None if w.grad is None else
                         np.array(w.grad.tolist() if mod is torch else arr(w.grad))])
        for k, (want, got) in enumerate(zip(*outs)):
            if want is None:
                assert got is None or not np.any(got), name
                continue
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name} {'value grad_z grad_w'.split()[k]}")
