"""tessera.autograd.forward_ad (PyTorch's forward-mode API, computed by the double-vjp trick):
tangents against their closed forms in float64, several duals, modules with dual parameters,
tangents of tangents, and the errors."""
import math

import pytest

import tessera as torch
import tessera.autograd.forward_ad as fwAD
from tessera import nn

F64 = torch.float64


def close(a, b, tol=1e-12):
    return float((a - b).abs().max()) <= tol * (1 + float(b.abs().max()))


def test_elementwise_tangent_matches_the_derivative():
    xs, ts = [0.3, -1.2, 2.5], [0.5, -1.0, 2.0]
    x, t = torch.tensor(xs, dtype=F64), torch.tensor(ts, dtype=F64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = d.sin() * d + d.exp() / (1 + d * d)
        p, tan = fwAD.unpack_dual(y)
    want = [(math.cos(a) * a + math.sin(a) + math.exp(a) / (1 + a * a)
             - math.exp(a) * 2 * a / (1 + a * a) ** 2) * b for a, b in zip(xs, ts)]
    assert close(tan, torch.tensor(want, dtype=F64))
    assert close(p, x.sin() * x + x.exp() / (1 + x * x))
    assert not tan.requires_grad


def test_matrix_and_two_duals():
    torch.manual_seed(0)
    a = torch.randn(4, 3, dtype=F64)
    x1, x2 = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    t1, t2 = torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)
    with fwAD.dual_level():
        d1, d2 = fwAD.make_dual(x1, t1), fwAD.make_dual(x2, t2)
        y = a @ (d1 * d2)
        tan = fwAD.unpack_dual(y).tangent
        # a result of only one of them
        tan1 = fwAD.unpack_dual((a @ d1).relu()).tangent
    assert close(tan, a @ (t1 * x2 + x1 * t2))
    mask = (a @ x1 > 0).to(F64)
    assert close(tan1, mask * (a @ t1))


def test_unpack_of_the_dual_and_of_unrelated_tensors():
    x, t = torch.ones(2, dtype=F64), torch.full((2,), 3.0, dtype=F64)
    assert fwAD.unpack_dual(x).tangent is None  # no level
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        assert torch.equal(fwAD.unpack_dual(d).tangent, t)
        assert fwAD.unpack_dual(torch.zeros(2)).tangent is None
        # depends on d only through a path with zero derivative: zeros, not None
        z = fwAD.unpack_dual(d.detach() * 2 + (d * 0).sum()).tangent
        assert z is not None and float(z.abs().max()) == 0.0
        # a gradient that does not even involve the cotangent (sign's): zeros as well
        z = fwAD.unpack_dual(d.sign()).tangent
        assert z is not None and z.shape == (2,) and float(z.abs().max()) == 0.0
    with fwAD.dual_level():  # a new level: the old dual has no tangent there
        assert fwAD.unpack_dual(d * 2).tangent is None


def test_module_with_dual_parameters():
    torch.manual_seed(1)
    model = nn.Linear(5, 4).double()
    inp = torch.randn(16, 5, dtype=F64)
    params = {name: p for name, p in model.named_parameters()}
    tangents = {name: torch.rand_like(p) for name, p in params.items()}
    with fwAD.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(p, tangents[name]))
        out = model(inp)
        jvp = fwAD.unpack_dual(out).tangent
    assert close(jvp, inp @ tangents["weight"].T + tangents["bias"])


def test_tangent_of_a_tangent():
    # d/dx of the jvp when the tangent itself requires grad: second derivatives
    x = torch.tensor([0.7, -0.4], dtype=F64)
    t = torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        tan = fwAD.unpack_dual(d.pow(3)).tangent  # 3 x^2 t
    assert tan.requires_grad
    (g,) = torch.autograd.grad(tan.sum(), t)
    assert close(g, 3 * x * x)


def test_errors():
    x = torch.ones(3)
    with pytest.raises(RuntimeError, match="enter_dual_level"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(x, torch.ones(2))
        with pytest.raises(ValueError, match="floating point"):
            fwAD.make_dual(torch.ones(3, dtype=torch.int64), x)
        with pytest.raises(RuntimeError, match="single dual level"):
            fwAD.enter_dual_level()
        d = fwAD.make_dual(x, x)
        with torch.no_grad():
            y = d * 2
            with pytest.raises(RuntimeError, match="no_grad"):
                fwAD.unpack_dual(y)
    with pytest.raises(RuntimeError, match="exit a forward AD level"):
        fwAD.exit_dual_level()


def test_grad_is_grads_batched_gives_jacobian_rows():
    # PyTorch's idiom: a batch of one-hot cotangents gives the Jacobian in one call
    torch.manual_seed(2)
    a = torch.randn(3, 4, dtype=F64)
    x = torch.randn(4, dtype=F64, requires_grad=True)
    y = (a @ x).tanh()
    (jac,) = torch.autograd.grad(y, x, torch.eye(3, dtype=F64), is_grads_batched=True)
    want = (1 - (a @ x.detach()).tanh() ** 2).unsqueeze(1) * a
    assert jac.shape == (3, 4) and close(jac, want)
    z = torch.randn(2, dtype=F64, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        torch.autograd.grad((a @ x).sum(), (x, z), torch.ones(5, dtype=F64), is_grads_batched=True)
    g = torch.autograd.grad((a @ x).sum(), (x, z), torch.ones(5, dtype=F64),
                            is_grads_batched=True, materialize_grads=True)
    assert g[0].shape == (5, 4) and close(g[0][3], a.sum(0)) and g[1].shape == (5, 2)
    assert float(g[1].abs().max()) == 0.0
    with pytest.raises(RuntimeError, match="batch"):
        torch.autograd.grad(y, x, torch.ones((), dtype=F64), is_grads_batched=True)
