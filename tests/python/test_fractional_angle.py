"""Issue 52's fractional max pooling and angle, and the fast paths the speed bench asked for
(einsum through matmul, embedding_bag of 2-D input): each against a float64 NumPy reference —
fractional pooling with given `_random_samples` against ATen's interval rule written out here."""
import math

import numpy as np
import pytest

import tessera as T
import tessera.nn.functional as F

RNG = np.random.default_rng(7)


def _intervals(u, size, out, k):
    """ATen's generate_intervals, in float64"""
    if out == 1:
        return [size - k]
    alpha = (size - k) / (out - 1)
    return [int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)] + [size - k]


def _ref_fractional(x, k, out, samples):
    """values and flat indices of fractional max pooling over the last len(k) dims of x [N, C,
    *S] (samples [N, C, nd]: (W, H) for 2-d, (T, H, W) for 3-d; scan with the first dim slowest,
    the first maximum wins)"""
    nd = len(k)
    n, c, size = x.shape[0], x.shape[1], x.shape[2:]
    y = np.zeros((n, c) + tuple(out))
    idx = np.zeros((n, c) + tuple(out), dtype=np.int64)
    for b in range(n):
        for ch in range(c):
            u = samples[b, ch]
            starts = [_intervals(u[nd - 1 - d] if nd == 2 else u[d], size[d], out[d], k[d])
                      for d in range(nd)]
            for o in np.ndindex(*out):
                best, at = -math.inf, None
                for off in np.ndindex(*k):
                    p = tuple(starts[d][o[d]] + off[d] for d in range(nd))
                    v = x[(b, ch) + p]
                    if at is None or v > best:
                        best, at = v, p
                y[(b, ch) + o] = best
                idx[(b, ch) + o] = np.ravel_multi_index(at, size)
    return y, idx


@pytest.mark.parametrize("shape,k,out", [((2, 3, 9, 11), (2, 3), (4, 5)),
                                         ((1, 2, 6, 6), (3, 3), (1, 4)),
                                         ((2, 2, 5, 6, 7), (2, 2, 3), (3, 4, 5))])
def test_fractional_max_pool_values_indices_grad(shape, k, out):
    nd = len(k)
    x = np.round(RNG.standard_normal(shape) * 2) / 2  # ties: the first maximum must win
    s = RNG.random((shape[0], shape[1], nd))
    ref_y, ref_i = _ref_fractional(x, k, out, s)
    fn = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    xt = T.tensor(x, requires_grad=True)
    y, i = fn(xt, k, output_size=out, return_indices=True, _random_samples=T.tensor(s))
    np.testing.assert_array_equal(y.detach().numpy(), ref_y)
    np.testing.assert_array_equal(i.numpy(), ref_i)
    g = RNG.standard_normal(ref_y.shape)
    (y * T.tensor(g)).sum().backward()
    ref_g = np.zeros(x.shape)
    flat = ref_g.reshape(shape[0], shape[1], -1)
    for b in range(shape[0]):
        for ch in range(shape[1]):
            np.add.at(flat[b, ch], ref_i[b, ch].ravel(), g[b, ch].ravel())
    np.testing.assert_allclose(xt.grad.numpy(), ref_g, rtol=0, atol=1e-12)


def test_fractional_max_pool_forms_and_errors():
    x = T.tensor(RNG.standard_normal((3, 10, 10)), dtype=T.float32)  # unbatched
    s = T.tensor(RNG.random((1, 3, 2)), dtype=T.float32)
    y = F.fractional_max_pool2d(x, 2, output_ratio=0.5, _random_samples=s)
    assert tuple(y.shape) == (3, 5, 5)
    ref, _ = _ref_fractional(x.numpy()[None].astype(np.float64), (2, 2), (5, 5),
                             s.numpy().astype(np.float64))
    np.testing.assert_array_equal(y.numpy(), ref[0].astype(np.float32))
    m = T.nn.FractionalMaxPool2d(3, output_size=(4, 4), return_indices=True)
    y, i = m(T.randn(2, 3, 9, 9))
    assert tuple(y.shape) == (2, 3, 4, 4) and i.dtype == T.int64
    assert tuple(T.nn.FractionalMaxPool3d(2, output_ratio=0.5)(T.randn(1, 1, 8, 8, 8)).shape) == \
        (1, 1, 4, 4, 4)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(ValueError, match="output size, or a pooling ratio"):
        T.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="between 0 and 1"):
        T.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(RuntimeError, match="too large"):
        F.fractional_max_pool2d(x, 4, output_size=8)
    with pytest.raises(RuntimeError, match="_random_samples"):
        F.fractional_max_pool2d(x, 2, output_size=4, _random_samples=T.rand(1, 2, 2))
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        F.fractional_max_pool2d(T.randn(10, 10), 2, output_size=4)


def test_angle():
    v = [-2.5, -0.0, 0.0, 3.0, math.nan, -math.inf, math.inf]
    x = T.tensor(v, dtype=T.float64, requires_grad=True)
    y = T.angle(x)
    ref = np.where(np.isnan(v), np.nan, np.where(np.array(v) < 0, math.pi, 0.0))
    np.testing.assert_array_equal(y.detach().numpy(), ref)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(len(v)))
    np.testing.assert_array_equal(T.tensor([-3, 0, 4]).angle().numpy(),
                                  np.array([math.pi, 0, 0], dtype=np.float32))


@pytest.mark.parametrize("eq,shapes", [
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk->k", [(3, 4), (4, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("bi,bj->bij", [(3, 4), (3, 2)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,jk,k->i", [(2, 3), (3, 4), (4,)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),  # a size-1 label broadcast against 4: the product path
])
def test_einsum_matmul_route(eq, shapes):
    ops = [RNG.standard_normal(s) for s in shapes]
    ts_ops = [T.tensor(o, requires_grad=True) for o in ops]
    if eq == "ij,jk->ik":
        ref = (ops[0].sum(1, keepdims=True) * np.ones((1, 4))) @ ops[1]
    else:
        ref = np.einsum(eq, *ops)
    y = T.einsum(eq, *ts_ops)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(np.shape(ref))
    (y * T.tensor(g)).sum().backward()
    if eq != "ij,jk->ik":  # the gradient of operand 0: einsum of g with the others
        ins, out = eq.split("->")
        terms = ins.split(",")
        geq = ",".join([out] + terms[1:]) + "->" + terms[0]
        if not set(terms[0]) <= set(geq.split("->")[0]):
            return  # a label summed within operand 0 alone: its gradient is a broadcast
        np.testing.assert_allclose(ts_ops[0].grad.numpy(), np.einsum(geq, g, *ops[1:]),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_matches_offsets_form(mode):
    w = RNG.standard_normal((20, 4))
    idx = RNG.integers(0, 20, (5, 3))
    idx[1, :] = 7  # a bag of padding only
    for pad in (None, 7):
        psw = RNG.standard_normal((5, 3)) if mode == "sum" else None
        wt = T.tensor(w, requires_grad=True)
        y = F.embedding_bag(T.tensor(idx), wt, mode=mode, padding_idx=pad,
                            per_sample_weights=None if psw is None else T.tensor(psw))
        ref = np.zeros((5, 4))
        for b in range(5):
            rows = [(w[i] * (1 if psw is None else psw[b, j])) for j, i in enumerate(idx[b])
                    if i != pad]
            if rows:
                ref[b] = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode](rows, axis=0)
        np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
        y.sum().backward()
        assert wt.grad is not None
    with pytest.raises(IndexError, match="out of range"):
        F.embedding_bag(T.tensor([[0, 20]]), T.tensor(w))
