"""torch.autograd.grad / backward(inputs=, create_graph=) in Python: higher-order gradients against
central differences of the first derivative (float64), the classic uses (gradient penalty,
MAML's inner step, autograd.functional.hessian), custom Functions, and the clear error of a
backward that cannot be differentiated again."""
import math

import pytest

import tessera as torch

F = torch.nn.functional
X0 = [0.31, -0.72, 1.13, 0.45, -1.27, 0.66]
V0 = [1.0, -0.5, 0.25, 2.0, -1.5, 0.75]


def _hv(f, x0, device):
    x = torch.tensor(x0, dtype=torch.float64, device=device, requires_grad=True)
    g, = torch.autograd.grad(f(x), x, create_graph=True)
    v = torch.tensor(V0[:len(x0)], dtype=torch.float64, device=device)
    hv, = torch.autograd.grad((g * v).sum(), x)
    return hv.tolist()


def _hv_differences(f, x0, device, eps=1e-5):
    def dirgrad(xs):
        x = torch.tensor(xs, dtype=torch.float64, device=device, requires_grad=True)
        g, = torch.autograd.grad(f(x), x)
        return sum(a * b for a, b in zip(g.tolist(), V0))
    out = []
    for i in range(len(x0)):
        xp, xm = list(x0), list(x0)
        xp[i] += eps
        xm[i] -= eps
        out.append((dirgrad(xp) - dirgrad(xm)) / (2 * eps))
    return out


FUNCS = {
    "tanh_exp": lambda x: (torch.tanh(x) * x.exp()).sum(),
    "sigmoid_silu_gelu": lambda x: (torch.sigmoid(x) * F.silu(x) + F.gelu(x) ** 2).sum(),
    "softmax": lambda x: (F.softmax(x.view(2, 3), dim=1) ** 2).sum(),
    "cross_entropy": lambda x: F.cross_entropy(x.view(2, 3), torch.tensor([2, 0], device=x.device)),
    "mse_linear": lambda x: F.mse_loss(F.linear(x[:2].view(1, 2), x[2:].view(2, 2)),
                                       torch.tensor([[0.5, -1.0]], dtype=torch.float64,
                                                    device=x.device)),
    "indexing_views": lambda x: (x[::2] ** 3).sum() + x.view(2, 3).t()[1].pow(3).sum(),
    "norm_var": lambda x: x.norm() * x.var(),
}


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_hessian_vector_product(name, device):
    got = _hv(FUNCS[name], X0, device)
    want = _hv_differences(FUNCS[name], X0, device)
    for g, w in zip(got, want):
        assert abs(g - w) <= 1e-6 * (1 + abs(w)), (name, got, want)


def test_grad_leaves_other_grads_alone():
    w = torch.tensor([2.0], requires_grad=True)
    x = torch.tensor([3.0], requires_grad=True)
    h = x * 2
    y = (w * h * h).sum()
    gx, gh = torch.autograd.grad(y, (x, h), retain_graph=True)
    assert gx.item() == 48 and gh.item() == 24
    assert w.grad is None and x.grad is None
    z = torch.tensor([1.0], requires_grad=True)
    with pytest.raises(torch.TesseraError, match="allow_unused"):
        torch.autograd.grad(y, (x, z), retain_graph=True)
    gx, gz = torch.autograd.grad(y, (x, z), allow_unused=True, retain_graph=True)
    assert gz is None and gx.item() == 48
    gx, gz = torch.autograd.grad(y, (x, z), materialize_grads=True, retain_graph=True)
    assert gz.item() == 0
    y.backward(inputs=[w])
    assert w.grad.item() == 36 and x.grad is None


def test_backward_create_graph_and_double_backward():
    x = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    gx = x.grad
    assert gx.requires_grad and gx.item() == pytest.approx(3 * 1.5 ** 2)
    x.grad = None
    gx.backward()
    assert x.grad.item() == pytest.approx(6 * 1.5)


def test_gradient_penalty_reaches_parameters():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
                              torch.nn.Linear(8, 1)).double()
    xi = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    g, = torch.autograd.grad(net(xi).sum(), xi, create_graph=True)
    pen = ((g.norm(2, dim=1) - 1) ** 2).mean()
    pen.backward()
    # the penalty depends on the first layer's weight and bias and the last layer's weight
    for p in (net[0].weight, net[0].bias, net[2].weight):
        assert p.grad is not None and p.grad.abs().sum().item() > 0
    # against differences of the penalty in one weight entry
    w = net[0].weight
    eps = 1e-6

    def penalty(delta):
        with torch.no_grad():
            w[1, 2] += delta
        xj = xi.detach().clone().requires_grad_(True)
        gj, = torch.autograd.grad(net(xj).sum(), xj)
        with torch.no_grad():
            w[1, 2] -= delta
        return ((gj.norm(2, dim=1) - 1) ** 2).mean().item()
    up, down = penalty(eps), penalty(-eps)
    assert w.grad[1, 2].item() == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8)


def test_maml_inner_step():
    torch.manual_seed(1)
    w = torch.randn(3, 1, dtype=torch.float64, requires_grad=True)
    xs = torch.randn(4, 3, dtype=torch.float64)
    ys = torch.randn(4, 1, dtype=torch.float64)

    def outer(wv):
        gw, = torch.autograd.grad(F.mse_loss(xs @ wv, ys), wv, create_graph=True)
        return F.mse_loss(xs @ (wv - 0.1 * gw), ys)
    outer(w).backward()
    # closed form: L(w) = |X w - y|^2 / n; w' = w - 0.1 * 2/n X^T (X w - y) = A w + c
    n = 4
    X = [[xs[i, j].item() for j in range(3)] for i in range(n)]
    Y = [ys[i, 0].item() for i in range(n)]
    wv = [w[j, 0].item() for j in range(3)]
    r = [sum(X[i][j] * wv[j] for j in range(3)) - Y[i] for i in range(n)]
    w2 = [wv[j] - 0.2 / n * sum(X[i][j] * r[i] for i in range(n)) for j in range(3)]
    r2 = [sum(X[i][j] * w2[j] for j in range(3)) - Y[i] for i in range(n)]
    d2 = [2 / n * sum(X[i][j] * r2[i] for i in range(n)) for j in range(3)]  # dL/dw'
    # dw'/dw = I - 0.2/n X^T X (symmetric)
    want = [d2[k] - 0.2 / n * sum(sum(X[i][k] * X[i][j] for i in range(n)) * d2[j]
                                  for j in range(3)) for k in range(3)]
    for k in range(3):
        assert w.grad[k, 0].item() == pytest.approx(want[k], rel=1e-10, abs=1e-12)


def test_functional_hessian():
    def f(v):
        return (v ** 3).sum() + v[0] * v[1]
    h = torch.autograd.functional.hessian(f, torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert h.tolist() == [[6.0, 1.0], [1.0, 12.0]]


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x ** 2


class ExpSavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


class CubeOnce(Cube):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * g * x ** 2


def test_custom_function_double_backward():
    x = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    g, = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    gg, = torch.autograd.grad(g.sum(), x)
    assert gg.tolist() == [3.0, -12.0]
    # a saved output has no history here: refused rather than missing the y' term
    for fn, what in ((ExpSavesOutput, "ExpSavesOutputBackward"), (CubeOnce, "CubeOnceBackward")):
        g, = torch.autograd.grad(fn.apply(x).sum(), x, create_graph=True)
        assert g.tolist() == pytest.approx([math.exp(0.5), math.exp(-2.0)] if fn is ExpSavesOutput
                                           else [0.75, 12.0])
        with pytest.raises(torch.TesseraError, match="double backward through " + what):
            torch.autograd.grad(g.sum(), x)


def test_not_twice_differentiable_is_an_error():
    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    y = x * 1
    y.mul_(x)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    assert g.tolist() == pytest.approx([0.6, -1.4])
    with pytest.raises(torch.TesseraError, match="double backward through MulBackward0"):
        torch.autograd.grad(g.sum(), x)


def test_grad_runs_leaf_hooks_once_on_the_sum():
    # PyTorch 2.x: [50, 50, 50] after one call; backward: the hook clamps the sum, not each use
    x = torch.ones(3, requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(1) or g * 10)
    g, = torch.autograd.grad((x * 2 + x * 3).sum(), x)
    assert g.tolist() == [50.0] * 3 and calls == [1] and x.grad is None
    w = torch.ones(2, requires_grad=True)
    w.register_hook(lambda g: g.clamp(max=4))
    (w * 2 + w * 3).sum().backward()
    assert w.grad.tolist() == [4.0, 4.0]


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_wgan_gp_with_a_conv_critic(device):
    # WGAN-GP's penalty on a DCGAN-like critic: conv (stride 2, padding 1), leaky_relu, linear
    torch.manual_seed(3)
    critic = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, stride=2, padding=1),
                                 torch.nn.LeakyReLU(0.2), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 3 * 3, 1)).double().to(device)
    x = torch.randn(3, 2, 6, 6, dtype=torch.float64, device=device)

    def penalty():
        xi = x.clone().requires_grad_(True)
        g, = torch.autograd.grad(critic(xi).sum(), xi, create_graph=True)
        return ((g.reshape(3, -1).norm(2, dim=1) - 1) ** 2).mean()
    penalty().backward()
    w = critic[0].weight
    got = w.grad[1, 0, 2, 1].item()
    eps = 1e-6
    with torch.no_grad():
        w[1, 0, 2, 1] += eps
    up = penalty().item()
    with torch.no_grad():
        w[1, 0, 2, 1] -= 2 * eps
    down = penalty().item()
    with torch.no_grad():
        w[1, 0, 2, 1] += eps
    assert got == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-9)
    assert critic[0].bias.grad is not None
