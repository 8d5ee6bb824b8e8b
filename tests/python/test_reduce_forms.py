"""Reductions in every call form PyTorch accepts — positional and keyword dim / keepdim, dims as
int, negative int, tuple and list, dtype=, unbiased= and correction=, the method and the tessera.*
function, named-tuple fields — each against NumPy in float64 on the same float32 values.

Every form below was checked to run under PyTorch 2.15 with the same NumPy reference
(the list is PyTorch's accepted surface, not Tessera's). Tolerance: the inputs are exact in float64,
so the only error is float32 accumulation over at most 24 terms: 24 * 2^-24 * sum|a| absolute, and
64 * 2^-24 relative for products and exponentials; indices and booleans compare exactly."""
import numpy as np
import pytest

import tessera as T

FORMS = [
 ("x.sum()", "a.sum()"),
 ("x.sum(1)", "a.sum(1)"),
 ("x.sum(dim=1)", "a.sum(1)"),
 ("x.sum(1, True)", "a.sum(1, keepdims=True)"),
 ("x.sum(dim=-1, keepdim=True)", "a.sum(-1, keepdims=True)"),
 ("x.sum(keepdim=True, dim=(0, 2))", "a.sum((0, 2), keepdims=True)"),
 ("x.sum([0, 1])", "a.sum((0, 1))"),
 ("x.sum(dtype=T.float64)", "a.sum()"),
 ("T.sum(x, 1, keepdim=True)", "a.sum(1, keepdims=True)"),
 ("T.sum(x, dim=(1, 2))", "a.sum((1, 2))"),
 ("T.sum(input=x, dim=0)", "a.sum(0)"),
 ("x.mean(-2)", "a.mean(-2)"),
 ("x.mean(dim=(0, -1), keepdim=True)", "a.mean((0, 2), keepdims=True)"),
 ("T.mean(x, 2, True)", "a.mean(2, keepdims=True)"),
 ("x.mean(dtype=T.float64)", "a.mean()"),
 ("x.prod(1)", "a.prod(1)"),
 ("x.prod(dim=2, keepdim=True)", "a.prod(2, keepdims=True)"),
 ("T.prod(x, 0, dtype=T.float64)", "a.prod(0)"),
 ("x.amax(dim=(0, 2))", "a.max((0, 2))"),
 ("x.amin(1, keepdim=True)", "a.min(1, keepdims=True)"),
 ("T.amax(x, dim=-1, keepdim=True)", "a.max(-1, keepdims=True)"),
 ("x.max()", "a.max()"),
 ("x.max(1)[0]", "a.max(1)"),
 ("x.max(dim=1).values", "a.max(1)"),
 ("x.max(1, keepdim=True).indices", "a.argmax(1)[:, None, :]"),
 ("x.max(keepdim=True, dim=2)[1]", "a.argmax(2)[..., None]"),
 ("T.max(x, 0).values", "a.max(0)"),
 ("T.min(x, dim=2, keepdim=True)[0]", "a.min(2, keepdims=True)"),
 ("x.min(dim=-1).indices", "a.argmin(-1)"),
 ("x.argmax()", "a.argmax()"),
 ("x.argmax(dim=1)", "a.argmax(1)"),
 ("x.argmax(1, True)", "a.argmax(1)[:, None, :]"),
 ("T.argmin(x, dim=2, keepdim=True)", "a.argmin(2)[..., None]"),
 ("x.std()", "a.std(ddof=1)"),
 ("x.std(1)", "a.std(1, ddof=1)"),
 ("x.std(dim=1, unbiased=False)", "a.std(1)"),
 ("x.std(1, correction=0, keepdim=True)", "a.std(1, keepdims=True)"),
 ("x.std(dim=(0, 2), correction=2)", "a.std((0, 2), ddof=2)"),
 ("T.std(x, 2, keepdim=True)", "a.std(2, ddof=1, keepdims=True)"),
 ("x.var(0)", "a.var(0, ddof=1)"),
 ("x.var(dim=-1, keepdim=True, unbiased=False)", "a.var(-1, keepdims=True)"),
 ("T.var(x, dim=1, correction=0)", "a.var(1)"),
 ("x.var(unbiased=False)", "a.var()"),
 ("x.logsumexp(1)", "np.log(np.exp(a).sum(1))"),
 ("T.logsumexp(x, dim=(0, 1), keepdim=True)", "np.log(np.exp(a).sum((0, 1), keepdims=True))"),
 ("x.nansum(1)", "np.nansum(a, 1)"),
 ("x.nanmean(dim=2, keepdim=True)", "np.nanmean(a, 2, keepdims=True)"),
 ("x.norm()", "np.sqrt((a * a).sum())"),
 ("x.norm(p=1, dim=1)", "np.abs(a).sum(1)"),
 ("x.norm(2, -1, True)", "np.sqrt((a * a).sum(-1, keepdims=True))"),
 ("T.norm(x, dim=(1, 2))", "np.sqrt((a * a).sum((1, 2)))"),
 ("x.cumsum(1)", "np.cumsum(a, 1)"),
 ("x.cumsum(dim=-1)", "np.cumsum(a, -1)"),
 ("T.cumsum(x, dim=0, dtype=T.float64)", "np.cumsum(a, 0)"),
 ("x.cumprod(dim=2)", "np.cumprod(a, 2)"),
 ("x.median()", "np.sort(a.ravel())[(a.size - 1) // 2]"),
 ("x.median(dim=1).values", "np.sort(a, 1)[:, 1, :]"),
 ("(x > 0).all(dim=1)", "(a > 0).all(1)"),
 ("(x > 0).any(1, keepdim=True)", "(a > 0).any(1, keepdims=True)"),
 ("T.all(x > 0, dim=2)", "(a > 0).all(2)"),
 ("T.count_nonzero(x > 0, dim=1)", "(a > 0).sum(1)"),
 ("(x > 0).sum(dim=(0, 2))", "(a > 0).sum((0, 2))"),
 ("x.aminmax(dim=1).max", "a.max(1)"),
 ("T.aminmax(x, dim=0, keepdim=True).min", "a.min(0, keepdims=True)"),
]


A32 = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("expr,ref", FORMS, ids=[e for e, _ in FORMS])
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_reduction_form(expr, ref, device):
    a = A32.astype(np.float64)
    x = T.tensor(A32).to(device)
    got = eval(expr, {"x": x, "T": T, "np": np})
    want = np.asarray(eval(ref, {"a": a, "np": np}))
    g = got.to("cpu").numpy() if isinstance(got, T.Tensor) else np.asarray(got)
    assert g.shape == want.shape, (expr, g.shape, want.shape)
    if want.dtype.kind in "biu":
        assert (g == want).all(), (expr, g, want)
    else:
        atol = 24 * 2.0 ** -24 * np.abs(a).sum()
        assert np.allclose(g.astype(np.float64), want, rtol=64 * 2.0 ** -24, atol=atol), \
            (expr, g, want)
