"""python/tessera/_double_vjp.py: the one double-vjp helper (J t by two reverse passes) behind
autograd.functional.jvp(create_graph=True), func.jvp and forward_ad.unpack_dual — every one of
them goes through it, each gives J t against the closed form in float64, and forward_ad tells
"no dependence" (None) from a zero tangent."""
import pytest

import tessera as torch
import tessera._double_vjp as dv
import tessera.autograd.forward_ad as fwAD
from tessera.autograd.functional import jvp as functional_jvp
from tessera.func import jvp as func_jvp

F64 = torch.float64


def close(a, b, tol=1e-12):
    return float((a - b).abs().max()) <= tol * (1 + float(b.abs().max()))


def f(x, w):
    return (x * x * w).sin(), (x * w).sum()


def want(x, w, tx, tw):
    # d sin(x^2 w) = cos(x^2 w) (2 x w tx + x^2 tw); d sum(x w) = sum(w tx + x tw)
    return (torch.cos(x * x * w) * (2 * x * w * tx + x * x * tw), (w * tx + x * tw).sum())


@pytest.fixture
def data():
    torch.manual_seed(3)
    return [torch.randn(4, dtype=F64) for _ in range(4)]


@pytest.fixture
def calls(monkeypatch):
    seen = []
    real = dv.double_vjp

    def spy(*args, **kwargs):
        seen.append(len(args[0]))
        return real(*args, **kwargs)
    monkeypatch.setattr(dv, "double_vjp", spy)
    return seen


def test_functional_jvp_create_graph(data, calls):
    x, w, tx, tw = data
    out, jv = functional_jvp(f, (x, w), (tx, tw), create_graph=True)
    assert calls == [2]
    for got, ref in zip(jv, want(x, w, tx, tw)):
        assert close(got, ref)
    assert all(j.requires_grad for j in jv)


def test_func_jvp(data, calls):
    x, w, tx, tw = data
    out, jv = func_jvp(f, (x, w), (tx, tw))
    assert calls == [2]
    for got, ref in zip(jv, want(x, w, tx, tw)):
        assert close(got, ref)


def test_forward_ad(data, calls):
    x, w, tx, tw = data
    with fwAD.dual_level():
        dx, dw = fwAD.make_dual(x, tx), fwAD.make_dual(w, tw)
        y0, y1 = f(dx, dw)
        c = torch.ones(3, dtype=F64, requires_grad=True) * 2  # depends on no dual
        lin = dx.detach() * 0 + dw * 0  # depends on a dual through a zero gradient path
        t1 = fwAD.unpack_dual(y1).tangent
        t0 = fwAD.unpack_dual(y0).tangent  # y0 shares y1's graph: still there
        assert fwAD.unpack_dual(c).tangent is None
        tl = fwAD.unpack_dual(lin).tangent
    assert calls == [1, 1, 1, 1]
    ref0, ref1 = want(x, w, tx, tw)
    assert close(t0, ref0) and close(t1, ref1)
    assert tl is not None and float(tl.abs().max()) == 0


def test_helper_contract(data):
    x, w, tx, tw = data
    x, w = x.requires_grad_(), w.requires_grad_()
    u = torch.ones(2, dtype=F64, requires_grad=True)  # an input no output uses
    outs = list(f(x, w)) + [torch.zeros(3, dtype=F64)]  # an output that does not require grad
    first, jv = dv.double_vjp(outs, [x, w, u], [tx, tw, torch.ones(2, dtype=F64)], False)
    assert first[2] is None and first[0] is not None and jv[2] is None
    for got, ref in zip(jv, want(x.detach(), w.detach(), tx, tw)):
        assert close(got, ref) and not got.requires_grad
    # a tangent of another dtype: J t in the gradient's dtype (the engine casts a seed)
    _, jv32 = dv.double_vjp(outs[:1], [x], [tx.to(torch.float32)], False)
    assert jv32[0].dtype == F64
    assert close(jv32[0], torch.cos(x * x * w).detach() * 2 * x.detach() * w.detach()
                 * tx.to(torch.float32).to(F64))
    seen = []
    dv.double_vjp(outs, [x, w, u], [tx, tw, tw[:2]], False, check_first=seen.append)
    assert len(seen) == 1 and seen[0][2] is None
