"""out= on tessera's functions (python/tessera/_out.py, issue 53): values against NumPy float64,
PyTorch's resize / dtype / autograd rules, the out object returned."""
import warnings

import numpy as np
import pytest

import tessera as torch

RNG = np.random.default_rng(5)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
TOL = dict(rtol=1e-5, atol=1e-6)  # float32 results of a few float32 ops on O(1) numbers


def t(x, dtype=torch.float32):
    return torch.tensor(np.asarray(x).tolist(), dtype=dtype)


@pytest.mark.parametrize("name,args,ref", [
    ("add", (A, A[::-1].copy()), A + A[::-1]),
    ("sub", (A, 2 * A), -A),
    ("mul", (A, A), A * A),
    ("div", (A, A * A + 1), A / (A * A + 1)),
    ("exp", (A,), np.exp(A)),
    ("log", (np.abs(A) + 0.5,), np.log(np.abs(A) + 0.5)),
    ("sqrt", (np.abs(A),), np.sqrt(np.abs(A))),
    ("matmul", (A, B), A @ B),
    ("mm", (A, B), A @ B),
])
def test_values_into_out(name, args, ref):
    out = torch.empty(ref.shape)
    r = getattr(torch, name)(*[t(a) for a in args], out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, **TOL)


def test_reductions_cat_stack_clamp_where():
    a = t(A)
    out = torch.empty(3)
    torch.sum(a, 1, out=out)
    np.testing.assert_allclose(out.numpy(), A.sum(1), **TOL)
    torch.mean(a, 1, out=out)
    np.testing.assert_allclose(out.numpy(), A.mean(1), **TOL)
    out = torch.empty(6, 4)
    torch.cat([a, 2 * a], out=out)
    np.testing.assert_allclose(out.numpy(), np.concatenate([A, 2 * A]), **TOL)
    out = torch.empty(2, 3, 4)
    torch.stack([a, -a], out=out)
    np.testing.assert_allclose(out.numpy(), np.stack([A, -A]), **TOL)
    out = torch.empty(3, 4)
    torch.clamp(a, -0.5, 0.5, out=out)
    np.testing.assert_allclose(out.numpy(), np.clip(A, -0.5, 0.5), **TOL)
    torch.where(a > 0, a, -a, out=out)
    np.testing.assert_allclose(out.numpy(), np.abs(A), **TOL)


def test_max_min_with_dim_take_a_pair():
    a = t(A)
    v, i = torch.empty(3), torch.empty(3, dtype=torch.long)
    r = torch.max(a, 1, out=(v, i))
    assert r[0] is v and r[1] is i and r.values is v
    np.testing.assert_allclose(v.numpy(), A.max(1), **TOL)
    assert i.tolist() == A.argmax(1).tolist()
    with pytest.warns(UserWarning, match="resized"):
        torch.min(a, 0, out=(v, i))
    np.testing.assert_allclose(v.numpy(), A.min(0), **TOL)  # resized from 3 to 4
    assert i.tolist() == A.argmin(0).tolist()
    with pytest.raises(RuntimeError, match="dtype long int, but got float"):
        torch.max(a, 1, out=(torch.empty(3), torch.empty(3)))


def test_out_aliasing_an_input():
    a = t(A)
    torch.mul(a, a, out=a)
    np.testing.assert_allclose(a.numpy(), A * A, **TOL)


def test_resize_warns_unless_empty():
    a = t(A)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = torch.empty(0)
        torch.add(a, a, out=e)
    assert tuple(e.shape) == (3, 4)
    np.testing.assert_allclose(e.numpy(), 2 * A, **TOL)
    o = torch.zeros(5)
    with pytest.warns(UserWarning, match=r"had shape \[5\].*required output shape \[3, 4\]"):
        r = torch.add(a, a, out=o)
    assert r is o and tuple(o.shape) == (3, 4)
    np.testing.assert_allclose(o.numpy(), 2 * A, **TOL)


def test_dtype_rules():
    a, i = t(A), torch.ones(3, 4, dtype=torch.long)
    d = torch.empty(3, 4, dtype=torch.float64)
    torch.add(a, a, out=d)  # float -> double: cast allowed for elementwise ops
    np.testing.assert_allclose(d.numpy(), 2 * A.astype(np.float32), rtol=1e-6)
    torch.add(i, i, out=d)
    assert d.tolist() == [[2.0] * 4] * 3
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                       "output type Long"):
        torch.exp(a, out=torch.empty(3, 4, dtype=torch.long))
    with pytest.raises(RuntimeError, match="dtype float, but got double"):
        torch.mm(a, t(B), out=torch.empty(3, 2, dtype=torch.float64))  # mm: exact
    with pytest.raises(TypeError, match="can't be cast to the desired output type Long"):
        torch.cat([a, a], out=torch.empty(6, 4, dtype=torch.long))
    s = torch.empty(1, dtype=torch.long)  # sum computes in out's dtype: 0.6 + 0.6 -> 0 + 0
    torch.sum(torch.tensor([[0.6, 0.6]]), 1, out=s)
    assert s.tolist() == [0]
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not int"):
        torch.add(a, a, out=3)


def test_no_autograd_through_out():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"add\(\): functions with out=\.\.\. arguments don't "
                       "support automatic differentiation"):
        torch.add(x, x, out=torch.empty(2))
    with torch.no_grad():
        o = torch.add(x, x, out=torch.empty(2))
    assert o.tolist() == [2.0, 2.0] and not o.requires_grad
    assert torch.can_cast(torch.int64, torch.float32) and not torch.can_cast(torch.float32,
                                                                             torch.int32)


def test_module_level_inplace_functions():
    x = t(A)
    r = torch.sin_(x)
    assert r is x
    np.testing.assert_allclose(x.numpy(), np.sin(A), **TOL)
    y = t(A)
    torch.clamp_min_(y, 0.25)
    np.testing.assert_allclose(y.numpy(), np.maximum(A, 0.25), **TOL)
    with pytest.raises(RuntimeError, match="result type Float can't be cast"):
        torch.exp_(torch.ones(2, dtype=torch.long))
    with pytest.raises(RuntimeError, match="requires grad"):
        torch.cos_(torch.ones(2, requires_grad=True))
