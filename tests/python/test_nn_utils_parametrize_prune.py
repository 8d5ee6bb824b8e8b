"""torch.nn.utils.parametrize / parametrizations (weight_norm, spectral_norm, orthogonal) and
torch.nn.utils.prune, plus nn.init.sparse_ / dirac_ and Tensor.retains_grad, against float64
definitions computed here with numpy (no PyTorch needed): the parametrized or masked weight, the
module's output through it, state_dict keys, and gradients to original / weight_orig by central
finite differences."""

import numpy as np
import pytest

import tessera as torch
from tessera import nn
from tessera.nn.utils import parametrizations as PZ
from tessera.nn.utils import parametrize as P
from tessera.nn.utils import prune

F = nn.functional
RNG = np.random.default_rng(1234)


def T(a, device="cpu"):
    return torch.tensor(np.asarray(a, dtype=np.float64), device=device)


def N(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


def set_(p, a):
    with torch.no_grad():
        p.copy_(T(a, p.device))


def linear(o, i, device="cpu", bias=True):
    m = nn.Linear(i, o, bias=bias).double().to(device)
    set_(m.weight, RNG.standard_normal((o, i)))
    return m


def fd_grad(loss, t, h=1e-6):
    """central differences of loss() with respect to every entry of t (changed in place)"""
    base = N(t)
    g = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        for sgn in (1, -1):
            a = base.copy()
            a[idx] += sgn * h
            set_(t, a)
            g[idx] += sgn * loss().item() / (2 * h)
    set_(t, base)
    return g


class Sym(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    def forward(self, X):
        return 3 * X

    def right_inverse(self, A):
        return A / 3


# ------------------------------------------------------------------------------ parametrize

def test_register_parametrization_structure_and_forward(device):
    m = linear(3, 3, device)
    w0 = N(m.weight)
    p = m.weight
    P.register_parametrization(m, "weight", Sym())
    assert type(m).__name__ == "ParametrizedLinear"
    assert isinstance(m, nn.Linear)
    assert P.type_before_parametrizations(m) is nn.Linear
    assert type(nn.Linear(2, 2)).__name__ == "Linear"  # other instances untouched
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert m.parametrizations.weight.original is p  # the same Parameter object
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert "weight" not in dict(m.named_parameters())
    # right_inverse set original = triu(W); weight = its symmetric completion
    np.testing.assert_allclose(N(m.parametrizations.weight.original), np.triu(w0), atol=0)
    sym = np.triu(w0) + np.triu(w0, 1).T
    np.testing.assert_allclose(N(m.weight), sym, atol=0)
    x = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(N(m(T(x, device))), x @ sym.T + N(m.bias), rtol=1e-12,
                               atol=1e-12)


def test_parametrization_gradient_reaches_original():
    m = linear(3, 3)
    P.register_parametrization(m, "weight", Sym())
    x = T(RNG.standard_normal((4, 3)))
    orig = m.parametrizations.weight.original

    def loss():
        return (m(x) ** 2).sum()
    loss().backward()
    g = N(orig.grad)
    np.testing.assert_allclose(g, fd_grad(loss, orig), rtol=1e-6, atol=1e-6)
    assert np.abs(g).sum() > 0


def test_chained_parametrizations_assignment_and_remove():
    m = linear(3, 3)
    w0 = N(m.weight)
    P.register_parametrization(m, "weight", Sym())
    P.register_parametrization(m, "weight", Scale())
    assert len(m.parametrizations.weight) == 2
    # chain: original = triu(W) (the second's right_inverse is not applied at registration)
    np.testing.assert_allclose(N(m.weight), 3 * (np.triu(w0) + np.triu(w0, 1).T), atol=1e-12)
    a = np.arange(9.0).reshape(3, 3)
    m.weight = T(a)  # right inverses in reverse order: triu(a / 3)
    np.testing.assert_allclose(N(m.parametrizations.weight.original), np.triu(a / 3),
                               atol=1e-15)
    with P.cached():
        w1 = m.weight
        assert m.weight is w1
    assert m.weight is not m.weight
    P.remove_parametrizations(m, "weight", leave_parametrized=True)
    assert type(m) is nn.Linear and not P.is_parametrized(m)
    assert isinstance(m.weight, nn.Parameter)
    expect = 3 * (np.triu(a / 3) + np.triu(a / 3, 1).T)
    np.testing.assert_allclose(N(m.weight), expect, atol=1e-12)
    assert list(m.state_dict()) == ["bias", "weight"]


def test_remove_leave_unparametrized_and_errors():
    m = linear(3, 3)
    P.register_parametrization(m, "weight", Sym())
    orig = N(m.parametrizations.weight.original)
    P.remove_parametrizations(m, "weight", leave_parametrized=False)
    np.testing.assert_allclose(N(m.weight), orig, atol=0)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(m, "weight")
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "weight", nn.Flatten(0))
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(m, "nothing", Sym())


def test_parametrized_conv2d_forward(device):
    c = nn.Conv2d(2, 3, 3, padding=1).double().to(device)
    w = RNG.standard_normal((3, 2, 3, 3))
    set_(c.weight, w)
    P.register_parametrization(c, "weight", Scale())
    assert type(c).__name__ == "ParametrizedConv2d"
    x = T(RNG.standard_normal((1, 2, 5, 5)), device)
    ref = F.conv2d(x, T(w, device), c.bias, padding=1)  # right_inverse / 3, then * 3
    np.testing.assert_allclose(N(c(x)), N(ref), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ weight_norm

@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_values_and_gradients(dim):
    m = linear(3, 4)
    w0 = N(m.weight)
    PZ.weight_norm(m, dim=dim)
    keys = list(m.state_dict())
    assert keys == ["bias", "parametrizations.weight.original0",
                    "parametrizations.weight.original1"]
    g = m.parametrizations.weight.original0
    v = m.parametrizations.weight.original1
    axes = None if dim is None else tuple(d for d in range(2) if d != dim)
    gref = np.sqrt((w0 ** 2).sum(axis=axes, keepdims=dim is not None))
    np.testing.assert_allclose(N(g), gref, rtol=1e-14)
    np.testing.assert_allclose(N(m.weight), w0, rtol=1e-13, atol=1e-14)
    # w = g * v / ||v|| for other g and v
    g2 = N(g) * RNG.uniform(0.5, 2.0, N(g).shape)
    v2 = RNG.standard_normal(w0.shape)
    set_(g, g2)
    set_(v, v2)
    wref = g2 * v2 / np.sqrt((v2 ** 2).sum(axis=axes, keepdims=dim is not None))
    np.testing.assert_allclose(N(m.weight), wref, rtol=1e-13, atol=1e-14)
    x = T(RNG.standard_normal((2, 4)))

    def loss():
        return (m(x) ** 2).sum()
    loss().backward()
    np.testing.assert_allclose(N(g.grad), fd_grad(loss, g), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(N(v.grad), fd_grad(loss, v), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------- spectral_norm

def test_spectral_norm_sigma_one_and_eval(device):
    m = linear(5, 4, device)
    w0 = N(m.weight)
    PZ.spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original",
                                    "parametrizations.weight.0._u",
                                    "parametrizations.weight.0._v"]
    for _ in range(50):
        w = m.weight
    s = np.linalg.svd(N(w), compute_uv=False)
    assert abs(s[0] - 1) < 1e-10, s
    np.testing.assert_allclose(N(w) * np.linalg.svd(w0, compute_uv=False)[0], w0, rtol=1e-9)
    m.eval()
    u = N(m.parametrizations.weight[0]._u)
    _ = m.weight
    np.testing.assert_array_equal(N(m.parametrizations.weight[0]._u), u)  # no iteration in eval


def test_spectral_norm_conv_and_gradient():
    c = nn.Conv2d(2, 3, 2).double()
    w0 = RNG.standard_normal((3, 2, 2, 2))
    set_(c.weight, w0)
    PZ.spectral_norm(c, n_power_iterations=30)
    w = N(c.weight)
    assert abs(np.linalg.svd(w.reshape(3, -1), compute_uv=False)[0] - 1) < 1e-10
    c.eval()  # u, v fixed: the weight a function of original alone
    orig = c.parametrizations.weight.original
    x = T(RNG.standard_normal((1, 2, 3, 3)))

    def loss():
        return (c(x) ** 2).sum()
    loss().backward()
    np.testing.assert_allclose(N(orig.grad), fd_grad(loss, orig), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------- orthogonal

def _qr_positive(a):
    q, r = np.linalg.qr(a)
    return q * np.sign(np.diag(r))


def _expm(a):
    """exp of a (small) matrix: scaling and squaring over a Taylor series, float64"""
    k = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(axis=1).max(), 1e-300)))) + 1)
    x = a / 2 ** k
    e, term = np.eye(len(a)), np.eye(len(a))
    for i in range(1, 30):
        term = term @ x / i
        e = e + term
    for _ in range(k):
        e = e @ e
    return e


def _orth_ref(omap, x, base):
    """PyTorch's _Orthogonal.forward in float64: the map of original's lower triangle (n >= k
    after transposing a wide matrix), times base"""
    wide = x.shape[0] < x.shape[1]
    if wide:
        x = x.T
    n, k = x.shape
    if omap == "householder":
        q = np.eye(n)
        for i in range(k):
            v = np.zeros(n)
            v[i] = 1
            v[i + 1:] = x[i + 1:, i]
            q = q @ (np.eye(n) - 2.0 / (v @ v) * np.outer(v, v))
        q = q[:, :k] * np.trunc(np.diag(x))
    else:
        low = np.zeros((n, n))
        low[:, :k] = np.tril(x)
        a = low - low.T
        q = _expm(a) if omap == "matrix_exp" else \
            np.linalg.solve(np.eye(n) - a / 2, np.eye(n) + a / 2)
        q = q[:, :k]
    q = base @ q
    return q.T if wide else q


@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal(omap, shape):
    m = linear(shape[0], shape[1])
    w0 = N(m.weight)
    PZ.orthogonal(m, orthogonal_map=omap)
    assert type(m).__name__ == "ParametrizedLinear"
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original",
                                    "parametrizations.weight.0.base"]
    w = N(m.weight)
    if shape[0] >= shape[1]:  # the first k columns of the orthogonalised weight
        np.testing.assert_allclose(w, _qr_positive(w0), atol=1e-12)
    else:
        np.testing.assert_allclose(w, _qr_positive(w0.T).T, atol=1e-12)
    orig = m.parametrizations.weight.original
    d = 0.3 * RNG.standard_normal(shape)
    if omap == "householder":
        # the reflectors' signs are int(diag(original)) (PyTorch's truncation, so -1 + 1e-6 is
        # 0): the diagonal is kept at -1.5, away from the jumps, for the finite differences
        d[np.arange(min(shape)), np.arange(min(shape))] = -0.5
    with torch.no_grad():
        orig.add_(T(d))
    w = N(m.weight)
    np.testing.assert_allclose(w, _orth_ref(omap, N(orig), N(m.parametrizations.weight[0].base)),
                               atol=1e-12)
    small = min(shape)
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    x = T(RNG.standard_normal((2, shape[1])))

    def loss():
        return (m(x) ** 2 * T(np.arange(1.0, shape[0] + 1))).sum()
    loss().backward()
    np.testing.assert_allclose(N(orig.grad), fd_grad(loss, orig), rtol=1e-5, atol=1e-6)


def test_orthogonal_default_map_and_errors():
    m = linear(4, 4)
    PZ.orthogonal(m)
    assert m.parametrizations.weight[0].orthogonal_map.name == "matrix_exp"
    m = linear(5, 3)
    PZ.orthogonal(m)
    assert m.parametrizations.weight[0].orthogonal_map.name == "householder"
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        PZ.orthogonal(linear(3, 3), orthogonal_map="qr")
    with pytest.raises(NotImplementedError, match="use_trivialization"):
        PZ.orthogonal(linear(3, 3), orthogonal_map="householder", use_trivialization=False)
    with pytest.raises(ValueError, match="Expected a matrix"):
        PZ.orthogonal(m, "bias")


def test_orthogonal_no_trivialization_matrix_exp():
    m = linear(3, 3)
    PZ.orthogonal(m, orthogonal_map="matrix_exp", use_trivialization=False)
    assert "parametrizations.weight.0.base" not in m.state_dict()
    a = N(m.parametrizations.weight.original)
    x = np.tril(a) - np.tril(a).T
    # exp of a skew matrix by its Taylor series in float64
    e, term = np.eye(3), np.eye(3)
    for k in range(1, 40):
        term = term @ x / k
        e = e + term
    np.testing.assert_allclose(N(m.weight), e, atol=1e-12)
    with pytest.raises(NotImplementedError, match="not possible to assign"):
        m.weight = T(np.eye(3))


# ------------------------------------------------------------------------------------ prune

def _l1_mask(w, k, mask=None):
    """k entries of smallest |w| among those mask keeps zeroed (ties: lowest flat index first)"""
    mask = np.ones_like(w) if mask is None else mask.copy()
    flat, kept = mask.reshape(-1), np.flatnonzero(mask.reshape(-1) == 1)
    order = kept[np.argsort(np.abs(w.reshape(-1)[kept]), kind="stable")]
    flat[order[:k]] = 0
    return flat.reshape(w.shape)


@pytest.mark.parametrize("amount,k", [(0.3, 4), (5, 5), (0, 0), (1.0, 12)])
def test_l1_unstructured(amount, k, device):
    m = linear(3, 4, device)
    w = N(m.weight)
    p = m.weight
    prune.l1_unstructured(m, "weight", amount=amount)  # 0.3 * 12 = 3.6 rounds to 4
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert m.weight_orig is p and "weight" not in m._parameters
    mask = N(m.weight_mask)
    np.testing.assert_array_equal(mask, _l1_mask(w, k))
    assert (mask == 0).sum() == k
    np.testing.assert_array_equal(N(m.weight), w * mask)
    x = RNG.standard_normal((2, 4))
    np.testing.assert_allclose(N(m(T(x, device))), x @ (w * mask).T + N(m.bias), rtol=1e-12,
                               atol=1e-12)
    assert prune.is_pruned(m)


def test_l1_ties_lowest_index_first():
    m = linear(2, 3)
    set_(m.weight, [[1.0, -0.5, 0.5], [2.0, 0.5, -1.0]])
    prune.l1_unstructured(m, "weight", amount=2)
    np.testing.assert_array_equal(N(m.weight_mask), [[1, 0, 0], [1, 1, 1]])


def test_prune_gradient_and_forward_hook():
    m = linear(3, 4)
    prune.l1_unstructured(m, "weight", amount=5)
    mask = N(m.weight_mask)
    x = T(RNG.standard_normal((2, 4)))
    orig = m.weight_orig

    def loss():
        return (m(x) ** 2).sum()
    loss().backward()
    g = N(orig.grad)
    np.testing.assert_allclose(g, fd_grad(loss, orig), rtol=1e-6, atol=1e-6)
    assert np.all(g[mask == 0] == 0) and np.abs(g[mask == 1]).min() > 0
    # the pre-hook recomputes weight from weight_orig before each forward
    set_(orig, np.ones((3, 4)))
    np.testing.assert_allclose(N(m(T(np.ones((1, 4)))))[0], mask.sum(1) + N(m.bias), atol=1e-12)


def test_repeated_pruning_composes_and_remove():
    c = nn.Conv2d(3, 4, 2).double()
    w = RNG.standard_normal((4, 3, 2, 2))
    set_(c.weight, w)
    prune.l1_unstructured(c, "weight", amount=0.25)  # 12 of 48
    m1 = _l1_mask(w, 12)
    np.testing.assert_array_equal(N(c.weight_mask), m1)
    prune.ln_structured(c, "weight", amount=1, n=2, dim=0)
    hooks = [h for h in c._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer)
    assert len(hooks[0]) == 2
    # importance: module.weight, the weight masked so far (PyTorch's)
    norms = np.sqrt(((w * m1) ** 2).sum(axis=(1, 2, 3)))
    m2 = m1.copy()
    m2[np.argmin(norms)] = 0
    np.testing.assert_array_equal(N(c.weight_mask), m2)
    prune.l1_unstructured(c, "weight", amount=3)  # 3 more among the kept entries
    m3 = _l1_mask(w, 3, m2)
    np.testing.assert_array_equal(N(c.weight_mask), m3)
    prune.ln_structured(c, "weight", amount=0.34, n=1, dim=1)  # 1 of the 3 input channels
    kept = np.flatnonzero(m3.sum(axis=(0, 2, 3)) != 0)
    l1 = np.abs(w * m3).sum(axis=(0, 2, 3))[kept]
    m4 = m3.copy()
    m4[:, kept[np.argmin(l1)]] = 0
    np.testing.assert_array_equal(N(c.weight_mask), m4)
    # a structured method chooses among the channels still kept: the next smallest goes
    prune.ln_structured(c, "weight", amount=1, n=2, dim=0)
    kept = np.flatnonzero(m4.sum(axis=(1, 2, 3)) != 0)
    m5 = m4.copy()
    m5[kept[np.argmin(np.sqrt(((w * m4) ** 2).sum(axis=(1, 2, 3)))[kept])]] = 0
    np.testing.assert_array_equal(N(c.weight_mask), m5)
    m4 = m5
    assert list(c.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    orig = c.weight_orig
    prune.remove(c, "weight")
    assert list(c.state_dict()) == ["bias", "weight"]
    assert c.weight is orig and isinstance(c.weight, nn.Parameter)
    np.testing.assert_array_equal(N(c.weight), w * m4)
    assert not prune.is_pruned(c)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(c, "weight")


def test_random_pruning_counts():
    c = nn.Conv2d(4, 6, 3).double()
    prune.random_unstructured(c, "weight", amount=0.2)  # round(0.2 * 216) = 43
    assert (N(c.weight_mask) == 0).sum() == 43
    mask0 = N(c.weight_mask)
    prune.random_structured(c, "weight", amount=2, dim=0)
    mask = N(c.weight_mask)
    dead = [o for o in range(6) if mask[o].sum() == 0]
    assert len(dead) == 2
    # the earlier zeros kept; whole output channels added
    assert (mask == 0).sum() >= 2 * 36
    assert np.all(mask[mask0 == 0] == 0)
    prune.random_structured(c, "weight", amount=1, dim=0)  # a third, among the kept channels
    mask2 = N(c.weight_mask)
    assert sum(mask2[o].sum() == 0 for o in range(6)) == 3
    assert np.all(mask2[mask == 0] == 0)
    prune.random_unstructured(c, "bias", amount=3)
    assert (N(c.bias_mask) == 0).sum() == 3
    assert sorted(c.state_dict()) == ["bias_mask", "bias_orig", "weight_mask", "weight_orig"]


def test_global_unstructured_custom_identity():
    a, b = linear(3, 4), linear(2, 3)
    wa, wb, bb = N(a.weight), N(b.weight), N(b.bias)
    prune.global_unstructured([(a, "weight"), (b, "weight"), (b, "bias")],
                              pruning_method=prune.L1Unstructured, amount=0.4)  # 8 of 20
    allw = np.concatenate([wa.ravel(), wb.ravel(), bb.ravel()])
    mask = _l1_mask(allw, 8)
    np.testing.assert_array_equal(N(a.weight_mask).ravel(), mask[:12])
    np.testing.assert_array_equal(N(b.weight_mask).ravel(), mask[12:18])
    np.testing.assert_array_equal(N(b.bias_mask), mask[18:])
    m = linear(2, 2)
    prune.identity(m, "bias")
    np.testing.assert_array_equal(N(m.bias_mask), [1, 1])
    prune.custom_from_mask(m, "weight", mask=T([[1, 0], [0, 1]]))
    prune.custom_from_mask(m, "weight", mask=T([[0, 1], [1, 1]]))
    np.testing.assert_array_equal(N(m.weight_mask), [[0, 0], [0, 1]])


def test_prune_amount_errors():
    m = linear(2, 2)
    with pytest.raises(ValueError, match="should either be a float"):
        prune.l1_unstructured(m, "weight", amount=1.5)
    with pytest.raises(TypeError, match="Invalid type for amount"):
        prune.l1_unstructured(m, "weight", amount="a")
    with pytest.raises(ValueError, match="should be smaller"):
        prune.l1_unstructured(m, "weight", amount=5)
    assert sorted(m.state_dict()) == ["bias", "weight"]  # a failed prune leaves the module as is
    with pytest.raises(ValueError, match="multidimensional"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=0)


# ---------------------------------------------------------------------------- init, retains_grad

def test_init_dirac():
    for shape, groups in [((6, 4, 3, 3), 2), ((5, 3, 4), 1), ((4, 6, 2, 3, 3), 2)]:
        w = torch.empty(*shape, dtype=torch.float64)
        nn.init.dirac_(w, groups)
        ref = np.zeros(shape)
        per = shape[0] // groups
        centre = tuple(s // 2 for s in shape[2:])
        for g in range(groups):
            for d in range(min(per, shape[1])):
                ref[(g * per + d, d) + centre] = 1
        np.testing.assert_array_equal(N(w), ref)
    x = T(RNG.standard_normal((1, 4, 5, 5)))
    w = nn.init.dirac_(torch.empty(4, 4, 3, 3, dtype=torch.float64))
    np.testing.assert_array_equal(N(F.conv2d(x, w, padding=1)), N(x))
    with pytest.raises(ValueError, match="3, 4, or 5"):
        nn.init.dirac_(torch.empty(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.init.dirac_(torch.empty(5, 3, 3), groups=2)


def test_init_sparse():
    torch.manual_seed(0)
    w = torch.empty(40, 30, dtype=torch.float64)
    nn.init.sparse_(w, sparsity=0.33, std=0.5)
    a = N(w)
    zeros_per_col = (a == 0).sum(axis=0)
    assert np.all(zeros_per_col == 14)  # ceil(0.33 * 40)
    nz = a[a != 0]
    assert abs(nz.std() - 0.5) < 0.1  # 840 draws: the standard error of std is about 0.012
    with pytest.raises(ValueError, match="2 dimensions"):
        nn.init.sparse_(torch.empty(3), 0.1)


def test_retains_grad():
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    assert x.retains_grad is False and y.retains_grad is False
    y.retain_grad()
    assert y.retains_grad is True
    x.retain_grad()
    assert x.retains_grad is False  # a leaf: PyTorch's answer too
    (y * y).sum().backward()
    np.testing.assert_allclose(N(y.grad), 2 * N(y), rtol=1e-6)
