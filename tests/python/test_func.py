"""tessera.func (torch.func): functional_call, stack_module_state, grad, grad_and_value, vjp,
jvp, jacrev, jacfwd, hessian, vmap. References: analytic derivatives, central finite differences
and explicit loops, all in float64 (no PyTorch needed)."""
import copy
import math
import warnings

import pytest

import tessera as torch
from tessera import func as F

D = torch.float64


def T(v):
    return torch.tensor(v, dtype=D)


def close(a, b, tol=1e-10):
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    err = (a - b).abs().max().item() if a.numel() else 0.0
    assert err <= tol, err


X = T([[0.1, -0.3, 0.7], [1.2, 0.5, -0.8]])
Y = T([0.3, -1.1])
A = T([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0], [0.7, 0.1, 3.0]])
V3 = T([0.2, -0.4, 1.5])
W = T([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]])
B = T([0.05, -0.1])


def f1(w, b, x):
    return (torch.tanh(x @ w.t() + b) ** 2).sum()


def f1_grads(w, b, x):
    """analytic d/dw, d/db of sum(tanh(x w^T + b)^2)"""
    t = torch.tanh(x @ w.t() + b)
    g = 2 * t * (1 - t * t)  # d/dz
    return g.t() @ x, g.sum(0)


def fd_jac(f, x, eps=1e-6):
    """central finite-difference Jacobian of a tensor function of one tensor"""
    flat = x.reshape(-1)
    cols = []
    for i in range(flat.numel()):
        e = torch.zeros_like(flat)
        e[i] = eps
        cols.append(((f((flat + e).reshape(x.shape)) - f((flat - e).reshape(x.shape))) /
                     (2 * eps)).reshape(-1))
    out = f(x)
    return torch.stack(cols, 1).reshape(tuple(out.shape) + tuple(x.shape))


# ---------------------------------------------------------------- grad / grad_and_value
def test_grad_matches_analytic():
    gw, gb = f1_grads(W, B, X)
    close(F.grad(f1)(W, B, X), gw)
    g = F.grad(f1, argnums=(0, 1))(W, B, X)
    assert isinstance(g, tuple) and len(g) == 2
    close(g[0], gw)
    close(g[1], gb)
    close(F.grad(f1, argnums=-2)(W, B, X), gb)
    assert not F.grad(f1)(W, B, X).requires_grad


def test_grad_pytree_aux_and_value():
    g = F.grad(lambda p: f1(p["w"], p["b"], X))({"w": W, "b": B})
    gw, gb = f1_grads(W, B, X)
    assert set(g) == {"w", "b"}
    close(g["w"], gw)
    close(g["b"], gb)
    g, aux = F.grad(lambda w: (f1(w, B, X), w.sum() * 3), has_aux=True)(W)
    close(g, gw)
    close(aux, W.sum() * 3)
    g, v = F.grad_and_value(f1, argnums=1)(W, B, X)
    close(g, gb)
    close(v, f1(W, B, X))
    g, (v, aux) = F.grad_and_value(lambda b: (f1(W, b, X), "aux"), has_aux=True)(B)
    close(g, gb)
    assert aux == "aux"


def test_grad_unused_input_is_zero():
    g = F.grad(lambda a, c: (a * 2).sum(), argnums=1)(V3, Y)
    close(g, torch.zeros_like(Y))


def test_grad_of_grad_nested():
    t0 = T(0.7)
    # f = sin(t) t^3: f'' = -sin t t^3 + 6 cos t t^2 + 6 sin t t
    f2 = F.grad(F.grad(lambda t: torch.sin(t) * t ** 3))(t0)
    t = 0.7
    ref = -math.sin(t) * t ** 3 + 6 * math.cos(t) * t ** 2 + 6 * math.sin(t) * t
    assert abs(f2.item() - ref) < 1e-12
    # f = exp(2t) t: f''' = 8 exp(2t) t + 12 exp(2t)
    f3 = F.grad(F.grad(F.grad(lambda s: torch.exp(2 * s) * s)))(T(0.3))
    assert abs(f3.item() - (8 * math.exp(0.6) * 0.3 + 12 * math.exp(0.6))) < 1e-11
    # no perturbation confusion: d/dx [d/dy (x*y)]_{y=x} = 1
    g = F.grad(lambda x: F.grad(lambda y: (x * y).sum())(x).sum())(V3)
    close(g, torch.ones_like(V3))
    # the inner transform's input is a constant, the outer's variable only captured by it:
    # d/dx sum([d/dy sum(x y^2)]_{y=c}) = d/dx sum(2 x c) = 2 c
    c = T([0.5, -1.0, 2.0])
    g = F.grad(lambda x: F.grad(lambda y: (x * y * y).sum())(c).sum())(V3)
    close(g, 2 * c)


def test_grad_flows_to_outer_autograd():
    w = W.clone().requires_grad_()
    g = F.grad(f1, argnums=1)(w, B, X)  # d f / d b, as a function of w
    assert g.requires_grad
    (dw,) = torch.autograd.grad(g.sum(), w)
    eps = 1e-6
    num = torch.zeros_like(W)
    for i in range(2):
        for j in range(3):
            e = torch.zeros_like(W)
            e[i, j] = eps
            num[i, j] = (f1_grads(W + e, B, X)[1].sum() -
                         f1_grads(W - e, B, X)[1].sum()) / (2 * eps)
    close(dw, num, 1e-8)


# ---------------------------------------------------------------- vjp / jvp
def test_vjp_matches_explicit():
    def f(a, c):
        return a.sin() * c, (a * c).sum()
    out, fn = F.vjp(f, V3, A[0])
    close(out[0], V3.sin() * A[0])
    ct = (T([1.0, 2.0, -1.0]), T(0.5))
    ga, gc = fn(ct)
    close(ga, ct[0] * V3.cos() * A[0] + 0.5 * A[0])
    close(gc, ct[0] * V3.sin() + 0.5 * V3)
    ga2, _ = fn(ct)  # callable again
    close(ga2, ga)
    with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
        fn(ct[0])
    out, fn, aux = F.vjp(lambda a: (a.exp(), a.sum()), V3, has_aux=True)
    close(fn(torch.ones(3, dtype=D))[0], V3.exp())
    close(aux, V3.sum())


@pytest.mark.parametrize("op", ["sin_mul", "inplace"])
def test_jvp_matches_finite_differences(op):
    def f(a, c):
        y = a.sin() * c
        return (y * 1).mul_(c) if op == "inplace" else y  # in-place: no double backward (rows)
    t1, t2 = A[1], A[2]
    out, jv = F.jvp(f, (V3, A[0]), (t1, t2))
    close(out, f(V3, A[0]))
    eps = 1e-6
    num = (f(V3 + eps * t1, A[0] + eps * t2) - f(V3 - eps * t1, A[0] - eps * t2)) / (2 * eps)
    close(jv, num, 1e-8)
    out, jv, aux = F.jvp(lambda a: (a * a, a.sum()), (V3,), (t1,), has_aux=True)
    close(jv, 2 * V3 * t1)
    close(aux, V3.sum())
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        F.jvp(lambda a: a, V3, (t1,))
    with pytest.raises(RuntimeError, match="same shape"):
        F.jvp(lambda a: a, (V3,), (A,))


def test_linearize_and_functionalize():
    out, fn = F.linearize(lambda a: a.sin() * a.sum(), V3)
    close(out, V3.sin() * V3.sum())
    jac = torch.autograd.functional.jacobian(lambda a: a.sin() * a.sum(), V3)
    close(fn(A[0]), jac @ A[0], 1e-12)
    close(fn(A[1]), jac @ A[1], 1e-12)

    def f(a):
        b = a.clone()
        b.mul_(2)
        return b
    close(F.functionalize(f)(V3), V3 * 2)


# ---------------------------------------------------------------- jacobians and hessians
def _mlp(p, x):
    h = torch.tanh(x @ p["w1"].t() + p["b1"])
    return h @ p["w2"].t() + p["b2"]


MLP = {"w1": T([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6], [0.1, 0.2, 0.3], [-0.4, 0.0, 0.9]]),
       "b1": T([0.1, -0.2, 0.3, 0.0]),
       "w2": T([[0.2, -0.5, 0.7, 0.1], [0.6, 0.3, -0.2, 0.4]]), "b2": T([0.01, -0.02])}


def test_jacrev_jacfwd_mlp_vs_autograd_functional():
    ref = torch.autograd.functional.jacobian(lambda x: _mlp(MLP, x), V3)
    close(F.jacrev(_mlp, argnums=1)(MLP, V3), ref)
    close(F.jacfwd(_mlp, argnums=1)(MLP, V3), ref)
    close(ref, fd_jac(lambda x: _mlp(MLP, x), V3), 1e-8)
    # with respect to a parameter pytree: out.shape + param.shape per parameter
    jp = F.jacrev(_mlp)(MLP, V3)
    for k in MLP:
        refk = torch.autograd.functional.jacobian(lambda t: _mlp(dict(MLP, **{k: t}), V3), MLP[k])
        close(jp[k], refk)


def test_jacrev_structure_and_shapes():
    j = F.jacrev(lambda a, c: (a * c, a @ c), argnums=(0, 1))(V3, A[1])
    assert isinstance(j, tuple) and len(j) == 2 and isinstance(j[0], tuple)
    close(j[0][0], torch.diag(A[1]))
    close(j[0][1], torch.diag(V3))
    close(j[1][0], A[1])
    close(j[1][1], V3)
    jm = F.jacrev(lambda m: m.sin() @ V3)(A)
    assert tuple(jm.shape) == (3, 3, 3)
    close(jm, fd_jac(lambda m: m.sin() @ V3, A), 1e-8)
    j0 = F.jacrev(torch.sin)(T(0.4))
    assert tuple(j0.shape) == () and abs(j0.item() - math.cos(0.4)) < 1e-14
    j, aux = F.jacrev(lambda a: (a.exp(), a.sum()), has_aux=True)(V3)
    close(j, torch.diag(V3.exp()))
    close(aux, V3.sum())
    close(F.jacrev(lambda a: a.exp(), chunk_size=2)(V3), torch.diag(V3.exp()))
    with pytest.raises(ValueError, match="chunk_size"):
        F.jacrev(torch.sin, chunk_size=0)


def test_hessian_quadratic_form_and_nonlinear():
    h = F.hessian(lambda a: a @ A @ a)(V3)
    close(h, A + A.t(), 1e-12)

    def g(a):
        return a.sin().sum() * a[0] + (a ** 3).sum()
    h = F.hessian(g)(V3)
    close(h, fd_jac(F.grad(g), V3), 1e-7)
    close(h, h.t(), 1e-12)
    hh = F.hessian(lambda a, c: (a * c).pow(2).sum(), argnums=(0, 1))(V3, A[0])
    close(hh[0][1], torch.diag(4 * V3 * A[0]))
    close(F.jacrev(F.jacrev(g))(V3), h, 1e-12)


# ---------------------------------------------------------------- vmap
def test_vmap_in_dims_out_dims():
    close(F.vmap(lambda r: r.sin() * 2)(X), X.sin() * 2)
    r = F.vmap(lambda c, s: c * s, in_dims=(1, None))(X, Y)
    close(r, torch.stack([X[:, i] * Y for i in range(3)]))
    r = F.vmap(lambda c: c.cumsum(0), in_dims=-1, out_dims=-1)(X)
    close(r, X.cumsum(0))
    a, s = F.vmap(lambda c: (c * 2, c.sum()), out_dims=(1, 0))(X)
    close(a, (X * 2).t())
    close(s, X.sum(1))
    r = F.vmap(lambda d, k: d["a"] * k + d["b"], in_dims=({"a": 0, "b": None}, 0))(
        {"a": X, "b": V3}, Y)
    close(r, X * Y.unsqueeze(1) + V3)
    r = F.vmap(lambda c, scale=1.0: c * scale)(X, scale=3.0)  # kwargs are not mapped
    close(r, X * 3)
    c = F.vmap(lambda c: 7, out_dims=None)(X)
    assert c == 7
    close(torch.vmap(lambda c: c + 1)(X), X + 1)


def test_vmap_nested():
    r = F.vmap(F.vmap(lambda a, c: a * c, in_dims=(0, None)), in_dims=(None, 0))(V3, Y)
    close(r, Y.unsqueeze(1) * V3.unsqueeze(0))
    M = torch.arange(24, dtype=D).reshape(2, 3, 4)
    r = F.vmap(F.vmap(lambda v: v.sum(), in_dims=1), in_dims=0)(M)
    close(r, M.sum(1))


def test_vmap_over_jacrev_and_grad_over_vmap():
    r = F.vmap(F.jacrev(lambda a: a.sin() * a.sum()))(X)
    for i in range(2):
        close(r[i], torch.autograd.functional.jacobian(lambda a: a.sin() * a.sum(), X[i]))
    g = F.grad(lambda w: F.vmap(lambda c: (c @ w).sin())(X).sum())(V3)
    close(g, ((X @ V3).cos().unsqueeze(1) * X).sum(0))


def test_per_sample_gradients_tutorial_pattern():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                torch.nn.Linear(4, 1)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.linspace(-1, 1, 15, dtype=D).reshape(5, 3)
    y = torch.linspace(0, 1, 5, dtype=D)

    def loss_fn(p, xi, yi):
        out = F.functional_call(model, p, (xi.unsqueeze(0),))
        return ((out.squeeze() - yi) ** 2)

    ps = F.vmap(F.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        model.zero_grad()
        ((model(x[i:i + 1]).squeeze() - y[i]) ** 2).backward()
        for k, p in model.named_parameters():
            assert tuple(ps[k].shape) == (5,) + tuple(p.shape)
            close(ps[k][i], p.grad)


def test_model_ensembling_pattern():
    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                  torch.nn.Linear(4, 2)).double() for _ in range(3)]
    params, buffers = F.stack_module_state(models)
    assert params["0.weight"].is_leaf and params["0.weight"].requires_grad
    assert tuple(params["2.bias"].shape) == (3, 2)
    base = copy.deepcopy(models[0]).to("meta")
    x = torch.linspace(-1, 1, 15, dtype=D).reshape(5, 3)

    def fmodel(p, b, z):
        return F.functional_call(base, (p, b), (z,))
    out = F.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        close(out[i], m(x))
    out.sum().backward()  # gradients reach the stacked leaves
    assert params["0.weight"].grad is not None
    with pytest.raises(RuntimeError, match="at least one model"):
        F.stack_module_state([])


def test_vmap_errors():
    with pytest.raises(ValueError, match=r"vmap: Expected all tensors to have the same size in "
                       r"the mapped dimension, got sizes \[2, 3\] for the mapped dimension"):
        F.vmap(torch.add)(X, V3)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
        F.vmap(torch.add, in_dims=(0,))(X, Y)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a"):
        F.vmap(torch.add, in_dims=[0, 0])(X, Y)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a"):
        F.vmap(torch.add, in_dims="a")(X, Y)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
        F.vmap(lambda d: d["a"] * 2, in_dims=({"b": 0},))({"a": X})
    with pytest.raises(ValueError, match=r"Got in_dim=5 for some input, but that input is a "
                       r"Tensor of dimensionality 2 so expected in_dim to satisfy "
                       r"-2 <= in_dim < 2"):
        F.vmap(torch.add, in_dims=(0, 5))(X, X)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        F.vmap(lambda a, c: a * c, in_dims=(0, 0))(X, 2)
    with pytest.raises(ValueError, match="Expected at least one Tensor to vmap over"):
        F.vmap(lambda a, c: a * c, in_dims=(None, None))(X, 2)
    with pytest.raises(ValueError, match="must only return Tensors"):
        F.vmap(lambda a: 3)(X)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        F.vmap(lambda a: a, out_dims=None)(X)
    with pytest.raises(ValueError, match="out_dims is not compatible"):
        F.vmap(lambda a: a, out_dims=(0, 1))(X)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        F.vmap(lambda a: a, randomness="foo")
    with pytest.raises(ValueError, match="size 0"):
        F.vmap(lambda a: a)(torch.zeros(0, 2))


def test_vmap_randomness():
    r = torch.ones(3, 2, dtype=D)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error"):
        F.vmap(lambda t: t + torch.randn(2, dtype=D))(r)
    torch.manual_seed(1)
    a = F.vmap(lambda t: t * torch.rand(2, dtype=D), randomness="same")(r)
    close(a[0], a[1], 0)
    close(a[0], a[2], 0)
    torch.manual_seed(1)
    b = F.vmap(lambda t: t * torch.rand(2, dtype=D), randomness="different")(r)
    assert not torch.equal(b[0], b[1])


def test_grad_errors():
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, "
                       "got tensor with 2 dims"):
        F.grad(lambda a: a * 2)(X)
    with pytest.raises(RuntimeError, match="Got argnum=3, but only 1 positional inputs"):
        F.grad(lambda a: a.sum(), argnums=3)(X)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        F.grad(lambda a: a.sum(), argnums=(0, 0))(X)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        F.grad(lambda a: a.sum(), argnums=1.0)(X)
    with pytest.raises(RuntimeError, match=r"should be a tuple: \(output, aux\)"):
        F.grad(lambda a: a.sum(), has_aux=True)(X)


# ---------------------------------------------------------------- functional_call
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(3, 4, dtype=D)
        self.l2 = torch.nn.Linear(4, 2, dtype=D)
        self.register_buffer("scale", T([2.0, 0.5]))

    def forward(self, z):
        return self.l2(self.l1(z).tanh()) * self.scale


def _net_params(k=1.0):
    return {"l1.weight": MLP["w1"] * k, "l1.bias": MLP["b1"], "l2.weight": MLP["w2"],
            "l2.bias": MLP["b2"]}


def test_functional_call_values_and_restore():
    net = Net()
    own = dict(net.named_parameters())
    out = F.functional_call(net, _net_params(), (X,))
    close(out, _mlp(MLP, X) * T([2.0, 0.5]))
    out = F.functional_call(net, (_net_params(), {"scale": T([1.0, 1.0])}), X)
    close(out, _mlp(MLP, X))
    assert all(net.get_parameter(k) is v for k, v in own.items())
    close(net.scale, T([2.0, 0.5]))
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        F.functional_call(net, (_net_params(), _net_params()), (X,))

    class Bad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, z):
            raise ValueError("boom")
    bad = Bad()
    w = bad.lin.weight
    with pytest.raises(ValueError, match="boom"):
        F.functional_call(bad, {"lin.weight": torch.zeros(2, 2)}, (X,))
    assert bad.lin.weight is w and "weight" in bad.lin._parameters


def test_functional_call_gradients_reach_passed_tensors():
    net = Net()
    p = {k: v.clone().requires_grad_() for k, v in _net_params().items()}
    F.functional_call(net, p, (X,)).pow(2).sum().backward()
    assert all(q.grad is None for q in net.parameters())
    g = F.grad(lambda q: F.functional_call(net, q, (X,)).pow(2).sum())(_net_params())
    for k in p:
        close(g[k], p[k].grad, 1e-12)
    # against finite differences on one entry
    eps = 1e-6
    e = torch.zeros(4, 3, dtype=D)
    e[1, 2] = eps

    pp, pm = _net_params(), _net_params()
    pp["l1.weight"], pm["l1.weight"] = pp["l1.weight"] + e, pm["l1.weight"] - e
    num = (F.functional_call(net, pp, (X,)).pow(2).sum() -
           F.functional_call(net, pm, (X,)).pow(2).sum()) / (2 * eps)
    assert abs(g["l1.weight"][1, 2].item() - num.item()) < 1e-7


def test_functional_call_tie_weights_strict_buffers():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(2, 2, bias=False, dtype=D)
            self.b = torch.nn.Linear(2, 2, bias=False, dtype=D)
            self.b.weight = self.a.weight

        def forward(self, z):
            return self.b(self.a(z))
    m = Tied()
    z = torch.ones(1, 2, dtype=D)
    w = torch.eye(2, dtype=D) * 2
    close(F.functional_call(m, {"a.weight": w}, z), T([[4.0, 4.0]]))
    close(F.functional_call(m, {"a.weight": w}, z, tie_weights=False), m.b(z @ w.t()))
    with pytest.raises(ValueError, match="which are tied. Consider using tie_weights=False"):
        F.functional_call(m, {"a.weight": w, "b.weight": w * 2}, z)
    with pytest.raises(RuntimeError, match="Error\\(s\\) in reparametrizing for Tied:\n\t"
                       "Unexpected key\\(s\\): 'c'."):
        F.functional_call(m, {"a.weight": w, "c": w}, z, strict=True)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'a.weight', 'b.weight'"):
        F.functional_call(m, {}, z, strict=True, tie_weights=False)
    bn = torch.nn.BatchNorm1d(2).double()
    buf = {"running_mean": torch.zeros(2, dtype=D), "running_var": torch.ones(2, dtype=D),
           "num_batches_tracked": torch.tensor(0)}
    F.functional_call(bn, buf, T([[1.0, 2.0], [3.0, 5.0]]))
    close(buf["running_mean"], T([0.2, 0.35]), 1e-15)
    close(buf["running_var"], T([1.1, 1.35]), 1e-15)  # momentum 0.1, unbiased variances 2 and 4.5
    close(bn.running_mean, torch.zeros(2, dtype=D), 0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = torch.nn.utils.stateless.functional_call(m, {"a.weight": w}, (z,))
    close(out, T([[4.0, 4.0]]))
    assert any(issubclass(r.category, FutureWarning) for r in rec)


def test_functional_call_c_module():
    lstm = torch.nn.LSTM(3, 4, batch_first=True).double()
    own = {k: v.detach().clone() for k, v in lstm.named_parameters()}
    sub = {k: torch.linspace(-0.5, 0.5, v.numel(), dtype=D).reshape(v.shape)
           for k, v in own.items()}
    x = torch.linspace(-1, 1, 30, dtype=D).reshape(2, 5, 3)
    ref = copy.deepcopy(lstm)
    ref.load_state_dict(sub)
    with torch.no_grad():
        out = F.functional_call(lstm, sub, (x,))[0]
        close(out, ref(x)[0], 1e-12)
    out = F.functional_call(lstm, sub, (x,))[0]  # nothing requires grad: allowed
    close(out, ref(x)[0].detach(), 1e-12)
    # with gradients: they reach the substitutes and the input, not the module's tensors
    req = {k: v.clone().requires_grad_() for k, v in sub.items()}
    xr = x.clone().requires_grad_()
    out, (h, c) = F.functional_call(lstm, req, (xr,))
    loss = out.pow(2).sum() + 3 * h.sum() + c.sin().sum()
    got = torch.autograd.grad(loss, list(req.values()) + [xr])
    ref.zero_grad()
    xx = x.clone().requires_grad_()
    o2, (h2, c2) = ref(xx)
    (o2.pow(2).sum() + 3 * h2.sum() + c2.sin().sum()).backward()
    for g, want in zip(got, [p.grad for p in ref.parameters()] + [xx.grad]):
        close(g, want, 1e-12)
    F.functional_call(lstm, req, (xr,))[0].sum().backward()
    assert req["weight_hh_l0"].grad is not None
    assert all(p.grad is None for p in lstm.parameters())
    lstm.requires_grad_(False)  # a frozen module: the substitutes still get their gradients
    got2 = torch.autograd.grad(F.functional_call(lstm, req, (xr,))[0].pow(2).sum(),
                               req["bias_ih_l0"])
    lstm.requires_grad_(True)
    ref.zero_grad()
    ref(x)[0].pow(2).sum().backward()
    close(got2[0], ref.bias_ih_l0.grad, 1e-12)
    assert not any(p.grad is not None for p in lstm.parameters())
    # per-sample gradients through it
    ps = F.vmap(F.grad(lambda p, xi: F.functional_call(lstm, p, (xi.unsqueeze(0),))[0].sum()),
                in_dims=(None, 0))(sub, x)
    for i in range(2):
        ref.zero_grad()
        ref(x[i:i + 1])[0].sum().backward()
        for k, p in ref.named_parameters():
            close(ps[k][i], p.grad, 1e-12)
    # a partial substitution: the module's own parameters get their gradients too
    part = {"weight_ih_l0": req["weight_ih_l0"]}
    F.functional_call(lstm, part, (x,))[0].sum().backward()
    ref2 = copy.deepcopy(lstm)
    ref2.load_state_dict(dict(own, weight_ih_l0=sub["weight_ih_l0"]))
    ref2.zero_grad()
    ref2(x)[0].sum().backward()
    close(lstm.weight_hh_l0.grad, ref2.weight_hh_l0.grad, 1e-12)
    assert lstm.weight_ih_l0.grad is None
    lstm.zero_grad()
    # second derivatives through the C module are refused, not answered without its part
    with pytest.raises(torch.UnsupportedError, match="double backward"):
        F.hessian(lambda w: F.functional_call(lstm, dict(sub, bias_hh_l0=w), (x,))[0].sum())(
            sub["bias_hh_l0"])
    # vmap over it (model ensembling under no_grad)
    st = {k: torch.stack([v, v * 0.5]) for k, v in sub.items()}
    with torch.no_grad():
        o = F.vmap(lambda p: F.functional_call(lstm, p, (x,))[0])(st)
    close(o[0], ref(x)[0].detach(), 1e-12)
    for k, v in lstm.named_parameters():
        close(v.detach(), own[k], 0)
