"""PyTorch's in-place Tensor methods built from the out-of-place ops (python/tessera/_inplace_methods.py,
python/src/tensor_inplace.c): values against float64 NumPy references, the result is self, the
version counter, views writing through, and PyTorch's autograd rules."""
import math

import numpy as np
import pytest

import tessera
from tessera._inplace_methods import INPLACE, _ALIAS_INPLACE

F64 = tessera.float64
U = np.array([[-0.7, -0.2, 0.1], [0.3, 0.55, 0.9]])  # inside (-1, 1)
P = np.array([[1.2, 1.5, 2.0], [2.5, 3.0, 4.5]])  # above 1
P2 = np.array([[0.8, 2.5, 1.1], [3.5, 0.6, 2.0]])
G = np.array([[-2.5, -1.25, -0.3], [0.4, 1.7, 3.1]])  # anything
O = np.array([[0.7, -1.3, 2.2], [-0.4, 1.1, -2.9]])
Z = np.array([[0.0, -1.3, 2.2], [0.4, 0.0, -2.9]])  # with zeros
CMP = np.array([[-2.5, 0.0, -0.3], [1.0, 1.7, 2.0]])  # equal to G at some places
I1 = np.array([[12, -18, 7], [0, 45, -9]])
I2 = np.array([[8, 12, -21], [5, 0, 6]])
E = np.array([[1, 2, -1], [0, 3, -2]])
ODD = np.array([[np.nan, np.inf, -np.inf], [1.5, -2.0, np.nan]])


def t(a):
    a = np.asarray(a)
    return tessera.tensor(a, dtype=F64) if a.dtype.kind == "f" else tessera.tensor(a)


def vec(f):
    return lambda x, *a: np.vectorize(f, otypes=[np.float64])(x, *a)


def lgamma(x):
    return vec(math.lgamma)(x)


def renorm_ref(x, p, dim, maxnorm):
    x = np.moveaxis(x, dim, 0).copy()
    for i in range(x.shape[0]):
        n = np.sum(np.abs(x[i]) ** p) ** (1.0 / p)
        if n > maxnorm:
            x[i] *= maxnorm / (n + 1e-7)
    return np.moveaxis(x, 0, dim)


def same_op(name):
    """no simple float64 reference here: the out-of-place op, which has its own tests"""
    return None


# name: (input, args (NumPy arrays become tensors), kwargs, reference of (input, *args, **kwargs))
CASES = {
    "acos_": (U, (), {}, np.arccos), "arccos_": (U, (), {}, np.arccos),
    "acosh_": (P, (), {}, np.arccosh), "arccosh_": (P, (), {}, np.arccosh),
    "asin_": (U, (), {}, np.arcsin), "arcsin_": (U, (), {}, np.arcsin),
    "asinh_": (G, (), {}, np.arcsinh), "arcsinh_": (G, (), {}, np.arcsinh),
    "atan_": (G, (), {}, np.arctan), "arctan_": (G, (), {}, np.arctan),
    "atanh_": (U, (), {}, np.arctanh), "arctanh_": (U, (), {}, np.arctanh),
    "atan2_": (G, (O,), {}, np.arctan2), "arctan2_": (G, (O,), {}, np.arctan2),
    "addcdiv_": (G, (O, P), {"value": 0.5}, lambda x, a, b, value: x + value * a / b),
    "addcmul_": (G, (O, P), {"value": 2}, lambda x, a, b, value: x + value * a * b),
    "bitwise_not_": (I1, (), {}, np.invert),
    "ceil_": (G, (), {}, np.ceil), "floor_": (G, (), {}, np.floor),
    "trunc_": (G, (), {}, np.trunc), "fix_": (G, (), {}, np.trunc),
    "frac_": (G, (), {}, lambda x: x - np.trunc(x)),
    "round_": (G * 1.37, (), {"decimals": 1}, lambda x, decimals: np.round(x, decimals)),
    "clamp_max_": (G, (0.5,), {}, np.minimum), "clamp_min_": (G, (-0.5,), {}, np.maximum),
    "copysign_": (G, (O,), {}, np.copysign), "conj_physical_": (G, (), {}, np.conj),
    "cos_": (G, (), {}, np.cos), "cosh_": (G, (), {}, np.cosh), "sin_": (G, (), {}, np.sin),
    "sinh_": (G, (), {}, np.sinh), "tan_": (G, (), {}, np.tan),
    "exp2_": (G, (), {}, np.exp2), "expm1_": (G, (), {}, np.expm1),
    "erf_": (G, (), {}, vec(math.erf)), "erfc_": (G, (), {}, vec(math.erfc)),
    "erfinv_": (U, (), {}, same_op), "digamma_": (P, (), {}, same_op),
    "igamma_": (P, (P2,), {}, same_op), "igammac_": (P, (P2,), {}, same_op),
    "polygamma_": (P, (1,), {}, same_op),
    "lgamma_": (P, (), {}, lgamma),
    "mvlgamma_": (P, (2,), {}, lambda x, p: lgamma(x) + lgamma(x - 0.5) + 0.5 * math.log(math.pi)),
    "cumprod_": (G, (1,), {}, lambda x, d: np.cumprod(x, axis=d)),
    "cumsum_": (G, (0,), {}, lambda x, d: np.cumsum(x, axis=d)),
    "deg2rad_": (G, (), {}, np.deg2rad), "rad2deg_": (G, (), {}, np.rad2deg),
    "eq_": (G, (CMP,), {}, np.equal), "ne_": (G, (CMP,), {}, np.not_equal),
    "not_equal_": (G, (CMP,), {}, np.not_equal),
    "ge_": (G, (CMP,), {}, np.greater_equal), "greater_equal_": (G, (CMP,), {}, np.greater_equal),
    "gt_": (G, (CMP,), {}, np.greater), "greater_": (G, (CMP,), {}, np.greater),
    "le_": (G, (CMP,), {}, np.less_equal), "less_equal_": (G, (CMP,), {}, np.less_equal),
    "lt_": (G, (CMP,), {}, np.less), "less_": (G, (CMP,), {}, np.less),
    "float_power_": (P, (1.5,), {}, np.power),
    "floor_divide_": (G, (O,), {}, np.floor_divide), "fmod_": (G, (O,), {}, np.fmod),
    "remainder_": (G, (O,), {}, np.remainder),
    "gcd_": (I1, (I2,), {}, np.gcd), "lcm_": (I1, (I2,), {}, np.lcm),
    "heaviside_": (Z, (O,), {}, np.heaviside), "hypot_": (G, (O,), {}, np.hypot),
    "i0_": (G, (), {}, np.i0),
    "ldexp_": (G, (E,), {}, lambda x, e: x * 2.0 ** e),
    "lerp_": (G, (O, 0.3), {}, lambda x, e, w: x + w * (e - x)),
    "log10_": (P, (), {}, np.log10), "log1p_": (P, (), {}, np.log1p), "log2_": (P, (), {}, np.log2),
    "logical_and_": (Z, (CMP,), {}, np.logical_and), "logical_or_": (Z, (CMP,), {}, np.logical_or),
    "logical_xor_": (Z, (CMP,), {}, np.logical_xor), "logical_not_": (Z, (), {}, np.logical_not),
    "logit_": (U * 0.5 + 0.5, (), {"eps": 0.3},
               lambda x, eps: np.log(np.clip(x, eps, 1 - eps) / (1 - np.clip(x, eps, 1 - eps)))),
    "nan_to_num_": (ODD, (), {"nan": 0.5, "posinf": 9.0, "neginf": -9.0},
                    lambda x, nan, posinf, neginf: np.nan_to_num(x, nan=nan, posinf=posinf,
                                                                 neginf=neginf)),
    "nextafter_": (G, (O,), {}, np.nextafter),
    "reciprocal_": (P, (), {}, np.reciprocal), "rsqrt_": (P, (), {}, lambda x: 1 / np.sqrt(x)),
    "renorm_": (G, (2, 0, 2.0), {}, renorm_ref),
    "sgn_": (Z, (), {}, np.sign), "sign_": (Z, (), {}, np.sign),
    "sinc_": (G, (), {}, np.sinc), "square_": (G, (), {}, np.square),
    "xlogy_": (Z, (P2,), {}, lambda x, y: np.where(x == 0, 0.0, x * np.log(y))),
    # aliases of the C core's in-place ops
    "absolute_": (G, (), {}, np.abs), "negative_": (G, (), {}, np.negative),
    "multiply_": (G, (O,), {}, np.multiply),
    "subtract_": (G, (O,), {"alpha": 2}, lambda x, o, alpha: x - alpha * o),
    "divide_": (G, (P,), {"rounding_mode": "floor"}, lambda x, o, rounding_mode: np.floor(x / o)),
    "true_divide_": (G, (P,), {}, np.true_divide),
    "clip_": (G, (-0.5, 0.5), {}, np.clip),
    "fill_diagonal_": (G, (9.0,), {}, lambda x, v: np.where(np.eye(2, 3) > 0, v, x)),
}
ALL = sorted((set(INPLACE) | set(_ALIAS_INPLACE)) - {"bernoulli_", "random_"})


def test_table_covers_every_name():
    assert sorted(CASES) == ALL
    for name in set(INPLACE) | set(_ALIAS_INPLACE):
        assert hasattr(tessera.Tensor, name), name


def _args(args, kw):
    return (tuple(t(a) if isinstance(a, np.ndarray) else a for a in args),
            {k: t(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})


@pytest.mark.parametrize("name", ALL)
def test_values_self_version_view(name):
    x0, args, kw, ref = CASES[name]
    targs, tkw = _args(args, kw)
    x = t(x0)
    v0 = x._version
    r = getattr(x, name)(*targs, **tkw)
    assert r is x and x._version == v0 + 1
    if ref is same_op:
        want = getattr(t(x0), name[:-1])(*targs, **tkw).numpy()
    else:
        want = ref(x0, *args, **kw)
    got = x.numpy()
    assert got.dtype == x0.dtype
    np.testing.assert_allclose(got, np.asarray(want).astype(x0.dtype), rtol=1e-13, atol=1e-15)
    # on a view: the write goes through to the tensor it views, the rest stays
    base = t(np.stack([x0, x0 + 1]))
    view = base[0]
    getattr(view, name)(*targs, **tkw)
    np.testing.assert_array_equal(base.numpy()[0], got)
    np.testing.assert_array_equal(base.numpy()[1], x0 + 1)


DIFF = ["acos_", "asinh_", "atan2_", "addcdiv_", "addcmul_", "clamp_min_", "copysign_", "cos_",
        "cumprod_", "cumsum_", "erf_", "expm1_", "float_power_", "fmod_", "hypot_", "lerp_",
        "lgamma_", "log1p_", "logit_", "reciprocal_", "remainder_", "renorm_", "rsqrt_", "sin_",
        "sinc_", "square_", "xlogy_", "eq_", "floor_", "subtract_", "multiply_"]


@pytest.mark.parametrize("name", DIFF)
def test_gradient_through_nonleaf(name):
    """y = a * 1; y.NAME_(b...): d/da and d/db of sum(y * g), as out of place (float64)"""
    x0, args, kw, _ = CASES[name]
    g = t(np.linspace(-1.0, 1.5, x0.size).reshape(x0.shape))

    def run(inplace):
        a = t(x0).requires_grad_()
        targs, tkw = _args(args, kw)
        others = [o for o in targs if isinstance(o, tessera.Tensor) and o.is_floating_point()]
        for o in others:
            o.requires_grad_()
        y = a * 1
        y = getattr(y, name)(*targs, **tkw) if inplace else getattr(y, name[:-1])(*targs, **tkw)
        if not y.requires_grad:  # eq: no gradient out of place; in place zeros to a's history
            return [None] * (1 + len(others))
        (y * g).sum().backward()
        return [None if v.grad is None else v.grad.numpy() for v in [a] + others]

    for got, want in zip(run(True), run(False)):
        if want is None:
            assert got is None or not got.any()
        else:
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_operand_requires_grad_only():
    x = t(G)
    w = t(O).requires_grad_()
    x.mul_(w)
    assert x.requires_grad and not x.is_leaf
    x.hypot_(w)  # both: hypot(G w, w) = |w| sqrt(G^2 + 1)
    x.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.sign(O) * np.sqrt(G ** 2 + 1), rtol=1e-13)


def test_autograd_errors():
    a = t(G).requires_grad_()
    with pytest.raises(tessera.StateError, match="sin_: a leaf Variable that requires grad"):
        a.sin_()
    with tessera.no_grad():
        a.sin_()  # allowed without grad mode
    np.testing.assert_allclose(a.detach().numpy(), np.sin(G), rtol=1e-15)
    # a tensor saved for backward, changed in place: that backward raises
    b = t(G).requires_grad_()
    y = b * 1
    z = y.cos()  # saves y
    y.lerp_(t(O), 0.5)
    with pytest.raises(tessera.StateError, match="modified by an inplace operation"):
        z.sum().backward()
    # a view of a tensor that requires grad writes through to its base's history (CopySlices),
    # a view written with an operand that requires grad brings its base into the graph, and a view
    # of a leaf that requires grad is refused (tests/python/test_inplace_view_autograd.py)
    a0 = t(G).requires_grad_()
    c = a0 * 1
    c[0].exp2_()
    assert c.grad_fn.name() == "CopySlices"
    c.sum().backward()
    want = np.ones_like(G)
    want[0] = np.exp2(G[0]) * np.log(2)
    np.testing.assert_allclose(a0.grad.numpy(), want, rtol=1e-13)
    base = t(G)
    w = t(O[0]).requires_grad_()
    base[0].hypot_(w)
    base.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), O[0] / np.hypot(G[0], O[0]), rtol=1e-13)
    with pytest.raises(tessera.StateError, match="exp2_: a view of a leaf Variable"):
        a0[0].exp2_()
    # dtypes and shapes as PyTorch
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        tessera.tensor([1, 2]).sin_()
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast "
                                           r"shape \[2, 3\]"):
        t(G[0]).atan2_(t(O))
    with pytest.raises(RuntimeError, match="float_power_ has dtype Float but the operation's "
                                           "result requires dtype Double"):
        tessera.ones(2).float_power_(2)
    q = tessera.tensor([1.0, 2.0])
    q.eq_(tessera.tensor([1.0, 3.0]))  # bool result cast back to float
    assert q.tolist() == [1.0, 0.0]


def test_clamp_tensor_bound_nonleaf():
    a = t(G).requires_grad_()
    y = a * 1
    y.clamp_(min=t(np.float64(0.0)))
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), (G > 0).astype(np.float64))


def test_bernoulli_and_module_functions():
    x = tessera.zeros(2, 3)
    assert x.bernoulli_(1.0) is x and x.tolist() == [[1.0] * 3] * 2
    x.bernoulli_(0.0)
    assert not x.numpy().any()
    x.bernoulli_(tessera.tensor([1.0, 0.0, 1.0]))
    assert x.tolist() == [[1.0, 0.0, 1.0]] * 2
    i = tessera.zeros(4, dtype=tessera.int64)
    assert i.bernoulli_(1.0).tolist() == [1, 1, 1, 1]
    # the module-level forms now go through the methods, so they keep the gradient
    a = t(G).requires_grad_()
    y = a * 1
    assert tessera.arccos_(tessera.sin_(y)) is y
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), -np.cos(G) / np.sqrt(1 - np.sin(G) ** 2),
                               rtol=1e-12)
    assert tessera.Tensor.arccos is not None and t(U).arccos().allclose(t(np.arccos(U)))
    assert t(G).greater(t(CMP)).tolist() == (G > CMP).tolist()


def fill_diagonal_ref(shape, v, wrap):
    """NumPy's fill_diagonal: the same rule as PyTorch's (a tall matrix wraps N + 1 rows down)"""
    a = np.zeros(shape)
    np.fill_diagonal(a, v, wrap=wrap)
    return a


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((3, 5), True), ((4, 3), True), ((3, 3, 3), False)])
def test_fill_diagonal(shape, wrap):
    x = tessera.zeros(*shape, dtype=F64)
    assert x.fill_diagonal_(2.5, wrap=wrap) is x
    np.testing.assert_array_equal(x.numpy(), fill_diagonal_ref(shape, 2.5, wrap))
    with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
        tessera.zeros(3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="all dimensions of input must be of equal length"):
        tessera.zeros(2, 3, 3).fill_diagonal_(1)


def test_random():
    tessera.manual_seed(0)
    x = tessera.zeros(2000, dtype=F64)
    assert x.random_(3, 7) is x
    v = x.numpy()
    assert set(np.unique(v)) == {3.0, 4.0, 5.0, 6.0}  # every value of [from, to) drawn, no other
    x.random_(5)
    assert set(np.unique(x.numpy())) == {0.0, 1.0, 2.0, 3.0, 4.0}
    i8 = tessera.zeros(2000, dtype=tessera.int8).random_()
    assert i8.numpy().min() >= 0 and i8.numpy().max() > 100
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        x.random_(5, 5)


def test_python_callables():
    i = tessera.tensor([1, 2, -3])
    assert i.apply_(lambda v: v * 2.7) is i and i.tolist() == [2, 5, -8]  # cast back: truncated
    x = tessera.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)
    x.map_(tessera.tensor([10.0, 20.0], dtype=F64), lambda a, b: a * b + 1)  # broadcast
    assert x.tolist() == [[11.0, 41.0], [31.0, 81.0]]
    x.map2_(t([1.0, 2.0]), t([[0.5], [2.0]]), lambda a, b, c: a - b * c)
    assert x.tolist() == [[10.5, 40.0], [29.0, 77.0]]
    g = t([1.0]).requires_grad_()
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad"):
        g.apply_(abs)
