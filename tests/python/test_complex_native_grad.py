"""test_complex_native_grad.py — complex add / sub / mul / div under autograd (issue 52/53): the
native kernels run with a graph too (src/ops/complex_native_grad.c), so values are the same with
and without one; PyTorch's grad_fn names; gradients against complex128 references of PyTorch's
formulas; the in-place forms through the kernels; double backward; linalg.eig's grad_fn and
set_'s version bump. On cpu and sim:0, against NumPy (float64 / complex128), and against PyTorch
where it is installed (those tests skip without it)."""
import numpy as np
import pytest

import tessera

DEVICES = ["cpu", "sim:0"]
DTYPES = [tessera.complex64, tessera.complex128]
NAMES = {"add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0",
         "div": "DivBackward0"}
OPS = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
       "div": lambda x, y: x / y}


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def cvals(shape, seed, lo=-2.5, hi=2.5):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, shape) + 1j * rng.uniform(-1.7, 1.7, shape)


def ctensor(v, dtype, device, requires_grad=False):
    return tessera.tensor(np.asarray(v).tolist(), dtype=dtype, device=device,
                          requires_grad=requires_grad)


def eps(dtype):
    return 2.0 ** -24 if dtype == tessera.complex64 else 2.0 ** -53


def same(x, y):
    """the same numbers, nan where the other is nan"""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and np.array_equal(x, y, equal_nan=True)


def grad_ref(name, w, a, b):
    """PyTorch's gradients of a op b for the seed w (its convention: w times conj(d/dz))"""
    if name == "add":
        return w, w
    if name == "sub":
        return w, -w
    if name == "mul":
        return w * np.conj(b), w * np.conj(a)
    return w / np.conj(b), -w * np.conj(a / b / b)


# ------------------------------------------------------------------ values with a graph
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_graph_same_values(device, dtype):
    inf, nan = float("inf"), float("nan")
    av = np.concatenate([[complex(inf, 0), 1 + 1j, 0, complex(nan, 0), complex(inf, 1),
                          1e30 + 1e30j, 1 - 2j, 3], cvals((16,), 1)])
    bv = np.concatenate([[2, 0, -0.0, 1 + 1j, complex(0, inf), 1e30 + 1e30j,
                          complex(inf, 0), 0.5j], cvals((16,), 2)])
    for name, f in OPS.items():
        a, b = ctensor(av, dtype, device), ctensor(bv, dtype, device)
        ag = ctensor(av, dtype, device, requires_grad=True)
        bg = ctensor(bv, dtype, device, requires_grad=True)
        y = f(ag, bg)
        assert y.grad_fn.name() == NAMES[name]
        assert same(arr(y), arr(f(a, b))), name
        # a number: PyTorch wraps it as a tensor, so inf * 2 is inf + nan i, with a graph too
        assert same(arr(f(ag, 2.0)), arr(f(a, 2.0))), name
        assert f(ag, 2.0).grad_fn.name() == NAMES[name]
    z = ctensor([complex(inf, 0)], dtype, device, requires_grad=True)
    m = z * 2.0
    assert np.isinf(arr(m)[0].real) and np.isnan(arr(m)[0].imag)
    assert (2 - z).grad_fn.name() == "RsubBackward1"


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(OPS))
def test_grads(device, dtype, name):
    """a [4, 5] op b [5] (broadcast), a op r and r5 op a (real operands: the real part, summed
    over the broadcast rows); each element is at most three rounded complex operations on terms
    of size t = |w| max(1, |a|, |b|)^2 / min(1, |b|)^2"""
    f = OPS[name]
    real = tessera.float32 if dtype == tessera.complex64 else tessera.float64
    av, bv, wv = cvals((4, 5), 3), cvals((5,), 4) + 0.5, cvals((4, 5), 5)
    rv = np.random.default_rng(6).uniform(0.5, 2.5, (4, 5))
    for case in ("complex", "real", "real left"):
        a = ctensor(av, dtype, device, requires_grad=True)
        if case == "complex":
            o = ctensor(bv, dtype, device, requires_grad=True)
        else:
            o = tessera.tensor((rv if case == "real" else rv[0]).tolist(), dtype=real,
                               device=device, requires_grad=True)
        y = f(o, a) if case == "real left" else f(a, o)
        y.backward(ctensor(wv, dtype, device))
        an, on = arr(a).astype(complex), arr(o).astype(complex)
        w = arr(ctensor(wv, dtype, device))
        lhs, rhs = (on, an) if case == "real left" else (an, on)
        g_l, g_r = grad_ref(name, w, lhs, rhs)
        ga, go = (g_r, g_l) if case == "real left" else (g_l, g_r)
        ga, go = np.broadcast_to(ga, (4, 5)), np.broadcast_to(go, (4, 5))
        big = np.maximum(1, np.maximum(np.abs(np.broadcast_to(an, (4, 5))),
                                       np.abs(np.broadcast_to(on, (4, 5)))))
        small = np.minimum(1, np.abs(np.broadcast_to(rhs, (4, 5))))
        t = np.abs(w) * big ** 2 / small ** 2
        e = eps(dtype)
        assert a.grad.dtype == dtype
        assert np.all(np.abs(arr(a.grad) - ga) <= 16 * e * t), (case, name)
        if case != "complex":
            go = go.real  # PyTorch's handle_r_to_c
            assert o.grad.dtype == real
        if case == "real":
            want, bound = go, 16 * e * t
        else:
            want, bound = go.sum(0), (16 * e * t + 4 * e * np.abs(go)).sum(0)
        assert np.all(np.abs(arr(o.grad) - want) <= bound), (case, name)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dim_cpu_operand(device):
    """a 0-dim cpu operand joins a sim op; its gradient comes back on the cpu"""
    a = ctensor(cvals((3,), 7), tessera.complex128, device, requires_grad=True)
    s = tessera.tensor(1.5 - 0.5j, dtype=tessera.complex128, requires_grad=True)
    y = a * s
    y.backward(tessera.ones(3, dtype=tessera.complex128, device=device))
    assert s.grad.device.type == "cpu" and s.grad.shape == ()
    np.testing.assert_allclose(arr(s.grad), np.conj(arr(a)).sum(), rtol=1e-14)
    np.testing.assert_allclose(arr(a.grad), np.full(3, np.conj(1.5 - 0.5j)), rtol=1e-15)


# ------------------------------------------------------------------ in place
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace_native(device, dtype):
    av, bv = cvals((24,), 8), cvals((24,), 9)
    av[3] = complex(float("inf"), 0)
    for name, f in OPS.items():
        a, b = ctensor(av, dtype, device), ctensor(bv, dtype, device)
        want = arr(f(a, b))
        for graph in (False, True):
            t = ctensor(av, dtype, device, requires_grad=graph).clone()  # inf * 1.0: inf + nan i
            bb = ctensor(bv, dtype, device, requires_grad=graph)
            v = t._version
            r = getattr(t, name + "_")(bb)
            assert r is t and t._version == v + 1 and t.dtype == dtype
            assert same(arr(t), want), (name, graph)
            if graph:
                assert t.grad_fn.name() == NAMES[name]
        # the operators and a number
        t = a.clone()
        if name == "add":
            t += 2.5
        elif name == "sub":
            t -= 2.5
        elif name == "mul":
            t *= 2.5
        else:
            t /= 2.5
        assert same(arr(t), arr(f(a, 2.5))), name


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_grad_is_out_of_place(device):
    av, bv, wv = cvals((6,), 10), cvals((6,), 11), cvals((6,), 12)

    def run(inplace):
        a = ctensor(av, tessera.complex128, device, requires_grad=True)
        b = ctensor(bv, tessera.complex128, device, requires_grad=True)
        if inplace:
            y = a * 1.0
            y *= b
            y /= b + 4
            y -= a
            y += 0.5
        else:
            y = (a * 1.0 * b) / (b + 4) - a + 0.5
        y.backward(ctensor(wv, tessera.complex128, device))
        return arr(y), arr(a.grad), arr(b.grad)

    for got, want in zip(run(True), run(False)):
        assert same(got, want)


def test_inplace_self_operand_fails_backward():
    """a.mul_(a): the saved operand is overwritten, so backward refuses (as PyTorch's)"""
    z = ctensor([1 + 2j, 3 - 1j], tessera.complex128, "cpu", requires_grad=True)
    a = z * 1.0
    a.mul_(a)
    with pytest.raises(Exception, match="modified by an inplace operation"):
        a.backward(tessera.ones(2, dtype=tessera.complex128))


# ------------------------------------------------------------------ double backward
@pytest.mark.parametrize("device", DEVICES)
def test_double_backward(device):
    """d/dw of |d/dz sum|z w|| through real leaves viewed as complex, against central
    differences of the first gradient in float64"""
    zv = np.array([[1.0, 2], [3, -1]])
    wv = np.array([[0.5, -1], [2, 0.25]])

    def first(wnp, create):
        zr = tessera.tensor(zv.tolist(), dtype=tessera.float64, device=device,
                            requires_grad=True)
        wr = tessera.tensor(wnp.tolist(), dtype=tessera.float64, device=device,
                            requires_grad=True)
        z, w = tessera.view_as_complex(zr), tessera.view_as_complex(wr)
        y = (z * w) / (w + 3) - z * 0.5
        g, = tessera.autograd.grad(y.abs().sum(), zr, create_graph=create)
        return g, wr

    g, wr = first(wv, True)
    h, = tessera.autograd.grad(g.abs().sum(), wr)
    num = np.zeros_like(wv)
    for idx in np.ndindex(wv.shape):
        d = np.zeros_like(wv)
        d[idx] = 1e-6
        num[idx] = (np.abs(arr(first(wv + d, False)[0])).sum()
                    - np.abs(arr(first(wv - d, False)[0])).sum()) / 2e-6
    np.testing.assert_allclose(arr(h), num, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ linalg.eig, set_
def test_eig_grad_fn():
    a = tessera.tensor([[2.0, 1], [-1, 3]], dtype=tessera.float64, requires_grad=True)
    lam, vec = tessera.linalg.eig(a)
    assert lam.grad_fn.name() == "LinalgEigBackward0"
    assert vec.grad_fn.name() == "LinalgEigBackward0"
    assert tessera.linalg.eigvals(a).grad_fn.name() == "LinalgEigBackward0"
    lam.real.sum().backward()  # the trace: gradient identity
    np.testing.assert_allclose(arr(a.grad), np.eye(2), atol=1e-12)


def test_set_self_bumps_version():
    t = tessera.zeros(3)
    v = t._version
    t.set_(t)
    assert t._version == v + 1


# ------------------------------------------------------------------ against PyTorch
@pytest.mark.parametrize("device", DEVICES)
def test_against_torch(device):
    """values and gradients as PyTorch's (whose own vector loops and tails round differently
    on a division: a few ulps), grad_fn names; sizes of whole 16-lane vectors"""
    torch = pytest.importorskip("torch")
    av, bv, wv = cvals((4, 16), 13), cvals((16,), 14) + 0.5, cvals((4, 16), 15)
    for name, f in OPS.items():
        for mod_dt in ((torch.complex64, tessera.complex64),
                       (torch.complex128, tessera.complex128)):
            outs, names = [], []
            for mod, dt in zip((torch, tessera), mod_dt):
                kw = {"device": device} if mod is tessera else {}
                a = mod.tensor(av.tolist(), dtype=dt, requires_grad=True, **kw)
                b = mod.tensor(bv.tolist(), dtype=dt, requires_grad=True, **kw)
                y = f(a, b)
                names.append(y.grad_fn.name())
                y.backward(mod.tensor(wv.tolist(), dtype=dt, **kw))
                outs.append([np.array(x.detach().cpu().tolist()) if mod is torch else arr(x)
                             for x in (y, a.grad, b.grad)])
            assert names[0] == names[1]
            tol = 4e-6 if mod_dt[1] == tessera.complex64 else 1e-14
            if name != "div":  # the product's formula is PyTorch's: the same bits
                assert same(outs[1][0], outs[0][0]), name
            for want, got in zip(*outs):
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)
