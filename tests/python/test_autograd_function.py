"""tessera.autograd.Function (custom backward functions, python/tessera/_autograd_function.py over
ts_custom_function_apply) on cpu and sim:0: PyTorch's LegendrePolynomial3 tutorial trained against
a float64 NumPy rewrite; the ctx (save_for_backward, needs_input_grad, mark_dirty,
mark_non_differentiable, set_materialize_grads, attributes); both forward forms; non-tensor
arguments and outputs; no_grad; a custom Function inside a module trained with loss.backward();
errors (the user's exception out of backward(), wrong gradients); grad_fn.name() and
next_functions."""
import math

import numpy as np
import pytest

import tessera
from tessera import nn
from tessera.autograd import Function
from tessera.autograd.function import once_differentiable


def f64(t):
    return np.asarray(t.detach().to("cpu").tolist(), dtype=np.float64)


# ------------------------------------------------------------------ the tutorial
class LegendrePolynomial3(Function):
    """pytorch/tutorials beginner_source/examples_autograd/polynomial_custom_function.py"""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


def legendre_numpy(steps, lr, x, y):
    """The tutorial's loop in float64 NumPy with the hand-derived gradients."""
    a, b, c, d = 0.0, -1.0, 0.0, 0.3
    for _ in range(steps):
        u = c + d * x
        p3 = 0.5 * (5 * u ** 3 - 3 * u)
        r = 2 * (a + b * p3 - y)  # dloss/dy_pred
        dp = r * b * 1.5 * (5 * u ** 2 - 1)  # through P3's backward
        ga, gb, gc, gd = r.sum(), (r * p3).sum(), dp.sum(), (dp * x).sum()
        a, b, c, d = a - lr * ga, b - lr * gb, c - lr * gc, d - lr * gd
    return np.array([a, b, c, d])


@pytest.mark.parametrize("steps", [300])
def test_legendre_tutorial(device, steps):
    dt = tessera.float64
    x = tessera.linspace(-math.pi, math.pi, 2000, dtype=dt, device=device)
    y = tessera.sin(x)
    a = tessera.full((), 0.0, dtype=dt, device=device, requires_grad=True)
    b = tessera.full((), -1.0, dtype=dt, device=device, requires_grad=True)
    c = tessera.full((), 0.0, dtype=dt, device=device, requires_grad=True)
    d = tessera.full((), 0.3, dtype=dt, device=device, requires_grad=True)
    lr = 5e-6
    for t in range(steps):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t == 0:
            assert y_pred.grad_fn.name() == "AddBackward0"
        loss.backward()
        with tessera.no_grad():
            a -= lr * a.grad
            b -= lr * b.grad
            c -= lr * c.grad
            d -= lr * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    got = np.array([a.item(), b.item(), c.item(), d.item()])
    want = legendre_numpy(steps, lr, f64(x), f64(y))
    # float64: sums of 2000 terms per step (relative error ~ 2000 * 2^-53 each), a contracting
    # gradient descent; 1e-9 leaves room for summation order and nothing for a wrong formula
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert abs(want[3] - 0.3) > 1e-3  # it trained


# ------------------------------------------------------------------ against built-in autograd
class MulAdd(Function):
    """out = x * w + scale (w broadcast over x's rows, scale a Python number)"""

    @staticmethod
    def forward(ctx, x, w, scale, *, shift=0.0):
        ctx.save_for_backward(x, w)
        ctx.scale = scale  # arbitrary attributes
        return x * w * scale + shift

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w * ctx.scale if ctx.needs_input_grad[0] else None
        gw = g * x * ctx.scale if ctx.needs_input_grad[1] else None  # [2, 3]: summed to [3]
        return gx, gw, None


def test_matches_builtin(device):
    tessera.manual_seed(1)
    x = tessera.randn(2, 3, dtype=tessera.float64, device=device, requires_grad=True)
    w = tessera.randn(3, dtype=tessera.float64, device=device, requires_grad=True)
    r = tessera.randn(2, 3, dtype=tessera.float64, device=device)
    out = MulAdd.apply(x, w, 2.5, shift=1.0)
    assert out.grad_fn.name() == "MulAddBackward"
    (out * r).sum().backward()
    xn, wn, rn = f64(x), f64(w), f64(r)
    np.testing.assert_allclose(f64(out), xn * wn * 2.5 + 1.0, rtol=1e-15)
    np.testing.assert_allclose(f64(x.grad), rn * wn * 2.5, rtol=1e-15)
    np.testing.assert_allclose(f64(w.grad), (rn * xn * 2.5).sum(0), rtol=1e-14)


def test_needs_input_grad_and_none_grads(device):
    seen = {}

    class F(Function):
        @staticmethod
        def forward(ctx, x, w, k):
            seen["needs"] = ctx.needs_input_grad
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None  # None for w (needs none) and k (not a tensor)

    x = tessera.ones(3, device=device, requires_grad=True)
    w = tessera.ones(3, device=device)
    F.apply(x, w, 2).sum().backward()
    assert seen["needs"] == (True, False, False)
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert w.grad is None


def test_setup_context_form(device):
    class Cube(Function):
        @staticmethod
        def forward(x, power=3):
            return x ** power

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            assert power == 3  # the default, bound as PyTorch does
            ctx.save_for_backward(x)
            ctx.power = power

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * ctx.power * x ** (ctx.power - 1), None

    x = tessera.tensor([1.0, -2.0, 0.5], dtype=tessera.float64, device=device, requires_grad=True)
    Cube.apply(x).sum().backward()
    np.testing.assert_allclose(f64(x.grad), 3 * f64(x) ** 2, rtol=1e-15)


def test_outputs_tuple_non_tensor_and_non_differentiable(device):
    got = {}

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            idx = (x > 0).to(tessera.int64)  # integer output: never differentiable
            b = x * 3
            ctx.mark_non_differentiable(b)
            return x * 2, b, idx, "label"

        @staticmethod
        def backward(ctx, ga, gb, gidx, glabel):
            got["gb"] = gb.tolist()
            got["rest"] = (gidx is None or gidx.abs().sum().item() == 0, glabel)
            return ga * 2

    x = tessera.tensor([1.0, -1.0], device=device, requires_grad=True)
    a, b, idx, label = Split.apply(x)
    assert label == "label"
    assert a.requires_grad and not b.requires_grad and not idx.requires_grad
    assert b.grad_fn is None
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert got["gb"] == [0.0, 0.0]  # materialized: zeros for the non-differentiable output
    assert got["rest"] == (True, None)


def test_materialize_grads(device):
    got = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 1, x * 1

        @staticmethod
        def backward(ctx, g0, g1):
            got.append(g1 if g1 is None else g1.tolist())
            return g0, None

    for materialize, want in ((True, [0.0, 0.0]), (False, None)):
        x = tessera.ones(2, device=device, requires_grad=True)
        y0, _ = Two.apply(x, materialize)
        y0.sum().backward()
        assert got[-1] == want


def test_mark_dirty(device):
    class AddOne_(Function):
        @staticmethod
        def forward(ctx, a):
            a.add_(1)
            ctx.mark_dirty(a)
            ctx.save_for_backward(a)
            return a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors  # saved after the in-place change: still valid
            return g * 1

    x = tessera.tensor([1.0, 2.0], device=device, requires_grad=True)
    a = x * 2
    out = AddOne_.apply(a)
    assert out is a
    assert a.grad_fn.name() == "AddOne_Backward"
    assert a.tolist() == [3.0, 5.0]
    (a * a).sum().backward()  # d/dx (2x + 1)^2 = 4 (2x + 1)
    assert x.grad.tolist() == [12.0, 20.0]
    leaf = tessera.ones(2, device=device, requires_grad=True)
    with pytest.raises(tessera.TesseraError, match="leaf Variable"):
        AddOne_.apply(leaf)

    class NotReturned(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.mark_dirty(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(tessera.TesseraError, match="marked as dirty"):
        NotReturned.apply(x * 1)


def test_no_grad_and_leaf_inputs(device):
    x = tessera.ones(2, device=device, requires_grad=True)
    with tessera.no_grad():
        y = LegendrePolynomial3.apply(x)
    assert y.grad_fn is None and not y.requires_grad
    assert y.tolist() == [1.0, 1.0]
    z = LegendrePolynomial3.apply(tessera.ones(2, device=device))  # nothing requires grad
    assert not z.requires_grad


def test_once_differentiable_and_retain_graph(device):
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            assert not tessera.is_grad_enabled()
            x, = ctx.saved_tensors
            return 2 * x * g

    x = tessera.tensor([3.0], device=device, requires_grad=True)
    y = Sq.apply(x)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [12.0]
    with pytest.raises(tessera.TesseraError, match="second time"):
        y.backward()


# ------------------------------------------------------------------ in a model
class CustomTanh(Function):
    @staticmethod
    def forward(ctx, x):
        y = tessera.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * (1 - y * y)


class Net(nn.Module):
    def __init__(self, custom):
        super().__init__()
        self.fc1, self.fc2, self.custom = nn.Linear(4, 8), nn.Linear(8, 2), custom

    def forward(self, x):
        h = self.fc1(x)
        h = CustomTanh.apply(h) if self.custom else tessera.tanh(h)
        return self.fc2(h)


def test_in_model_training(device):
    """Three SGD steps with loss.backward(): the custom tanh's model follows the built-in one."""
    params = []
    for custom in (False, True):
        tessera.manual_seed(7)
        net = Net(custom).to(device).double()
        opt = tessera.optim.SGD(net.parameters(), lr=0.1)
        tessera.manual_seed(8)
        x = tessera.randn(5, 4, dtype=tessera.float64, device=device)
        t = tessera.randn(5, 2, dtype=tessera.float64, device=device)
        for _ in range(3):
            opt.zero_grad()
            loss = ((net(x) - t) ** 2).mean()
            loss.backward()
            opt.step()
        params.append([f64(p) for p in net.parameters()])
    for a, b in zip(*params):
        # the same formula composed differently: 1 - tanh^2 against tanh's own backward
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------ errors
def test_backward_exception_propagates(device):
    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom from backward")

    x = tessera.ones(2, device=device, requires_grad=True)
    with pytest.raises(ValueError, match="boom from backward"):
        Boom.apply(x).sum().backward()
    with pytest.raises(ValueError, match="boom from backward"):
        tessera.autograd.backward([Boom.apply(x).sum()])
    # the pass after it is clean
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("bad, err, text", [
    ("count", tessera.TesseraError, "incorrect number of gradients"),
    ("non_tensor", tessera.TesseraError, "different than None at position 2"),
    ("type", TypeError, "expected a Tensor or None"),
    ("shape", tessera.ShapeError, "WrongBackward: backward returned an invalid gradient"),
])
def test_wrong_gradients(device, bad, err, text):
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            if bad == "count":
                return (g,)
            if bad == "non_tensor":
                return g, g
            if bad == "type":
                return 3.0, None
            return g.reshape(3, 2), None

    x = tessera.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(err, match=text):
        Wrong.apply(x, 2).sum().backward()


def test_wrong_device(sim_device):
    class Elsewhere(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.to("cpu")

    x = tessera.ones(2, device=sim_device, requires_grad=True)
    with pytest.raises(tessera.DeviceError, match="ElsewhereBackward: backward returned a "
                                                  "gradient on cpu for input 0, which is on sim:0"):
        Elsewhere.apply(x).sum().backward()


def test_saved_tensor_modified_in_place(device):
    x = tessera.ones(2, device=device, requires_grad=True)
    a = x * 1
    y = LegendrePolynomial3.apply(a)
    with tessera.no_grad():
        a.add_(1)
    with pytest.raises(tessera.TesseraError, match="modified by an inplace operation"):
        y.sum().backward()


def test_create_graph_differentiates_the_backward(device):
    x = tessera.tensor([1.0, 0.5], device=device, requires_grad=True)
    y = LegendrePolynomial3.apply(x).sum()
    g, = tessera.autograd.grad(y, x, create_graph=True)  # P3'(x) = 1.5 (5 x^2 - 1)
    assert g.tolist() == [6.0, 0.375] and g.requires_grad
    gg, = tessera.autograd.grad(g.sum(), x)  # P3''(x) = 15 x
    assert gg.tolist() == [15.0, 7.5]


def test_function_basics():
    assert issubclass(LegendrePolynomial3, tessera.autograd.function.Function)
    with pytest.raises(NotImplementedError):
        Function.apply(tessera.ones(1, requires_grad=True))
    with pytest.raises(TypeError, match="save_for_backward"):
        tessera.autograd.function.FunctionCtx().save_for_backward(1.0)


# ------------------------------------------------------------------ the graph's surface
def test_next_functions(device):
    x = tessera.ones(2, 3, device=device, requires_grad=True)
    w = tessera.ones(3, device=device, requires_grad=True)
    c = tessera.ones(3, device=device)
    y = (x * w + c).sum()
    fn = y.grad_fn
    assert fn.name() == "SumBackward0"
    (add, nr), = fn.next_functions
    assert add.name() == "AddBackward0" and nr == 0
    (mul, _), (none, _) = add.next_functions
    assert none is None  # c needs no gradient
    (acc_x, _), (acc_w, _) = mul.next_functions
    assert acc_x.name() == "torch::autograd::AccumulateGrad" and acc_x.next_functions == ()
    assert acc_x.variable.shape == x.shape and acc_x.variable.requires_grad
    acc_w.variable.grad = tessera.full((3,), 5.0, device=device)  # the same tensor as w
    assert w.grad.tolist() == [5.0, 5.0, 5.0]
    assert y.grad_fn == fn and hash(y.grad_fn) == hash(fn) and fn != add
    assert x.grad_fn is None
    # a custom Function's node links to its inputs' nodes
    z = LegendrePolynomial3.apply(x * 2)
    assert z.grad_fn.next_functions[0][0].name() == "MulBackward0"


# ------------------------------------------------------------------ module backward hooks
def test_module_full_backward_hooks(device):
    """register_full_backward_(pre_)hook (identity Functions around the call): what the hooks
    see and what their replacements do, against the Linear layer's closed-form gradients."""
    tessera.manual_seed(0)
    lin = nn.Linear(3, 2).to(device).double()
    log = []

    def pre(m, go):
        log.append(("pre", f64(go[0])))
        return (go[0] * 2,)

    def hook(m, gi, go):
        assert m is lin
        log.append(("full", f64(gi[0]), f64(go[0])))
        return (gi[0] * 10,)

    h1 = lin.register_full_backward_hook(hook)
    h2 = lin.register_full_backward_pre_hook(pre)
    x = tessera.tensor([[1.0, 2.0, 3.0]], dtype=tessera.float64, device=device,
                       requires_grad=True)
    r = np.array([[1.0, -1.0]])
    (lin(x) * tessera.tensor(r.tolist(), dtype=tessera.float64, device=device)).sum().backward()
    W = f64(lin.weight)
    assert [e[0] for e in log] == ["pre", "full"]
    np.testing.assert_array_equal(log[0][1], r)
    np.testing.assert_array_equal(log[1][2], 2 * r)  # the pre hook's replacement
    np.testing.assert_allclose(log[1][1], 2 * r @ W, rtol=1e-15)
    np.testing.assert_allclose(f64(x.grad), 20 * r @ W, rtol=1e-15)  # the hook's replacement
    np.testing.assert_allclose(f64(lin.weight.grad), 2 * r.T @ f64(x), rtol=1e-15)
    # inputs that need no gradient: the hook runs with grad_input None
    log.clear()
    h1.remove()
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(gi))
    lin(tessera.ones(1, 3, dtype=tessera.float64, device=device)).sum().backward()
    assert seen == [(None,)]
    h2.remove()


def test_lifetime(device):
    """The ctx (and what it saved) goes with the graph: after backward, with the outputs, and for
    a dirty input that was also saved (no cycle through the node)."""
    import gc
    import weakref

    refs = []

    class Keep(Function):
        @staticmethod
        def forward(ctx, a, dirty):
            refs.append(weakref.ref(ctx))
            if dirty:
                a.mul_(2)
                ctx.mark_dirty(a)
            ctx.save_for_backward(a)
            return a if dirty else a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    gc.collect()
    base = tessera._C._live_tensors(device)
    for dirty in (False, True):
        for run_backward in (True, False):
            x = tessera.ones(3, device=device, requires_grad=True)
            y = Keep.apply(x * 1, dirty)
            if run_backward:
                y.sum().backward()
                assert x.grad.tolist() == [2.0, 2.0, 2.0]
            del x, y
            gc.collect()
            assert refs[-1]() is None, (dirty, run_backward)
    assert tessera._C._live_tensors(device) == base


# ------------------------------------------------------------------ Tensor.register_hook
def test_tensor_register_hook(device):
    x = tessera.ones(3, device=device, requires_grad=True)
    y = x * 2
    seen = []
    h = y.register_hook(lambda g: (seen.append(g.tolist()), g * 10)[1])
    y.register_hook(lambda g: seen.append(g.tolist()))  # None: keeps the (replaced) gradient
    assert y.grad_fn.name() == "MulBackward0"
    (y * 3 + y).sum().backward()  # y's whole gradient is 3 + 1
    assert seen == [[4.0] * 3, [40.0] * 3]
    assert x.grad.tolist() == [80.0] * 3
    h.remove()
    h.remove()  # twice is harmless

    # on a custom Function's output, removed, retain_graph
    x.grad = None
    z = LegendrePolynomial3.apply(x * 1)
    calls = []
    z.register_hook(lambda g: calls.append(1) or g * 2)
    gone = z.register_hook(lambda g: calls.append("removed"))
    gone.remove()
    z.sum().backward(retain_graph=True)
    z.sum().backward()
    assert calls == [1, 1]
    assert x.grad.tolist() == [2 * 2 * 6.0] * 3  # P3'(1) = 6, doubled by the hook, two passes

    with pytest.raises(ZeroDivisionError):
        w = x * 2
        w.register_hook(lambda g: 1 / 0)
        w.sum().backward()
    with pytest.raises(tessera.ShapeError, match="register_hook"):
        w = x * 2
        w.register_hook(lambda g: g.sum())
        w.sum().backward()
    with pytest.raises(tessera.TesseraError, match="doesn't require gradient"):
        tessera.ones(2).register_hook(lambda g: g)
