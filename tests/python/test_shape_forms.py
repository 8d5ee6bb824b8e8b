"""Issue 52's shape and indexing forms (python/src/tensor_rearrange.c, tensor_index_forms.c,
tessera/_stacking.py) against numpy on cpu and sim:0: values, shapes, dtypes, gradients of a few,
and the refusals."""
import numpy as np
import pytest

import tessera as torch


def T(a, device, dtype=None, rg=False):
    a = np.asarray(a)
    t = torch.tensor(a.tolist(), dtype=dtype or (torch.float64 if a.dtype.kind == "f" else None),
                     device=device)
    if rg:
        t.requires_grad_(True)
    return t


def N(t):
    return np.array(t.tolist())


def eq(t, ref):
    ref = np.asarray(ref)
    assert tuple(t.shape) == ref.shape, (tuple(t.shape), ref.shape)
    np.testing.assert_allclose(N(t).reshape(ref.shape), ref, rtol=1e-12, atol=0)


A = np.sin(np.arange(1, 61) * 1.7).reshape(3, 4, 5)


def test_flip_roll_rot(device):
    x = T(A, device)
    eq(torch.flip(x, (0, 2)), np.flip(A, (0, 2)))
    eq(x.flip(1, 2), np.flip(A, (1, 2)))
    eq(x.flip(-1), np.flip(A, -1))
    eq(torch.fliplr(x), np.fliplr(A))
    eq(x.flipud(), np.flipud(A))
    for k in (-1, 0, 1, 2, 3, 5):
        eq(torch.rot90(x, k, (1, 2)), np.rot90(A, k, (1, 2)))
    eq(x.rot90(), np.rot90(A))
    eq(torch.roll(x, 7), np.roll(A, 7))
    eq(x.roll((1, -2), (0, 2)), np.roll(A, (1, -2), (0, 2)))
    eq(x.roll(-1, 1), np.roll(A, -1, 1))


def test_tril_triu(device):
    x = T(A, device)
    for k in (-2, -1, 0, 1, 3):
        eq(torch.tril(x, k), np.tril(A, k))
        eq(x.triu(diagonal=k), np.triu(A, k))
    y = x.clone()
    assert y.tril_(1) is y
    eq(y, np.tril(A, 1))
    i = torch.tensor([[1, 2], [3, 4]], device=device)
    assert torch.triu(i).dtype == torch.int64 and torch.triu(i).tolist() == [[1, 2], [0, 4]]


def test_diagonals(device):
    x = T(A, device)
    for off in (-2, 0, 1, 4):
        eq(torch.diagonal(x, off, 1, 2), np.diagonal(A, off, 1, 2))
        eq(x.diagonal(offset=off, dim1=2, dim2=0), np.diagonal(A, off, 2, 0))
    v = A[0, 0]
    eq(torch.diag(T(v, device), 1), np.diag(v, 1))
    eq(torch.diag(T(A[0], device), -1), np.diag(A[0], -1))
    eq(torch.diagflat(T(A[0, :2, :2], device)), np.diagflat(A[0, :2, :2]))
    # a view, as PyTorch's: writes through it reach the tensor
    w = T(A, device)
    w.diagonal(1, 0, 2).fill_(-7.0)
    ref_w = A.copy()
    for i in range(3):  # dims 0 (3) and 2 (5), offset 1: min(3, 5 - 1) elements
        ref_w[i, :, i + 1] = -7.0
    eq(w, ref_w)
    w.diagonal(-1).zero_()
    for i in range(2):  # dims 0 (3) and 1 (4), offset -1: min(3 - 1, 4) elements
        ref_w[i + 1, i, :] = 0
    eq(w, ref_w)
    e = torch.diag_embed(T(A[0], device), offset=-1)
    ref = np.zeros((4, 6, 6))
    for b in range(4):
        ref[b] = np.diag(A[0, b], -1)
    eq(e, ref)
    e2 = torch.diag_embed(T(A[0], device), 1, 0, 2)  # the planes are dims (0, 2)
    eq(e2, np.transpose(np.stack([np.diag(A[0, b], 1) for b in range(4)]), (1, 0, 2)))


def test_repeat_interleave_movedim_unfold(device):
    x = T(A[0], device)
    eq(x.repeat_interleave(2), np.repeat(A[0].reshape(-1), 2))
    eq(torch.repeat_interleave(x, 3, dim=1), np.repeat(A[0], 3, 1))
    r = torch.tensor([0, 2, 1, 3], device=device)
    eq(x.repeat_interleave(r, dim=0), np.repeat(A[0], [0, 2, 1, 3], 0))
    assert torch.repeat_interleave(r).tolist() == [1, 1, 2, 3, 3, 3]
    y = T(A, device)
    eq(torch.movedim(y, 0, -1), np.moveaxis(A, 0, -1))
    eq(y.moveaxis((0, 1), (2, 0)), np.moveaxis(A, (0, 1), (2, 0)))
    eq(torch.swapdims(y, 0, 2), np.swapaxes(A, 0, 2))
    u = y.unfold(2, 2, 2)
    ref = np.stack([A[:, :, i:i + 2] for i in (0, 2)], 2)
    eq(u, ref)
    eq(T(A[0, 0], device).unfold(0, 3, 1), np.stack([A[0, 0, i:i + 3] for i in range(3)]))


def test_splits(device):
    x = T(A, device)
    for got, ref in zip(torch.tensor_split(x, 3, dim=2), np.array_split(A, 3, 2)):
        eq(got, ref)
    for got, ref in zip(x.tensor_split([1, 4], 2), np.split(A, [1, 4], 2)):
        eq(got, ref)
    for got, ref in zip(torch.tensor_split(x, torch.tensor([1, 3]), 1), np.split(A, [1, 3], 1)):
        eq(got, ref)
    for got, ref in zip(torch.hsplit(x, 2), np.hsplit(A, 2)):
        eq(got, ref)
    for got, ref in zip(torch.vsplit(x, [1]), np.vsplit(A, [1])):
        eq(got, ref)
    for got, ref in zip(x.dsplit([2, 3]), np.dsplit(A, [2, 3])):
        eq(got, ref)
    p = x.split_with_sizes([1, 3], 1)
    eq(p[0], A[:, :1]), eq(p[1], A[:, 1:])
    with pytest.raises(RuntimeError, match="hsplit"):
        torch.hsplit(x, 3)
    with pytest.raises(RuntimeError, match="split_with_sizes"):
        x.split_with_sizes([1, 1], 1)


def test_stacks(device):
    a, b = A[0, 0], A[1, 0]
    ta, tb = T(a, device), T(b, device)
    eq(torch.hstack([ta, tb]), np.hstack([a, b]))
    eq(torch.vstack((ta, tb)), np.vstack([a, b]))
    eq(torch.row_stack((ta, tb)), np.vstack([a, b]))
    eq(torch.dstack([ta, tb]), np.dstack([a, b]))
    eq(torch.column_stack([ta, tb]), np.column_stack([a, b]))
    m = T(A[0], device)
    eq(torch.hstack([m, m]), np.hstack([A[0], A[0]]))
    eq(torch.dstack([m, m]), np.dstack([A[0], A[0]]))
    s = torch.tensor(2.0, device=device)
    assert torch.atleast_1d(s).shape == (1,) and torch.atleast_2d(s).shape == (1, 1)
    assert torch.atleast_3d(ta).shape == (1, 5, 1) and torch.atleast_3d(m).shape == (4, 5, 1)
    assert [t.shape for t in torch.atleast_2d(ta, m)] == [(1, 5), (4, 5)]
    g = torch.meshgrid(ta[:2], tb[:3], indexing="ij")
    ng = np.meshgrid(a[:2], b[:3], indexing="ij")
    eq(g[0], ng[0]), eq(g[1], ng[1])
    g = torch.meshgrid(ta[:2], tb[:3], T(a[:4], device), indexing="xy")
    ng = np.meshgrid(a[:2], b[:3], a[:4], indexing="xy")
    for x, y in zip(g, ng):
        eq(x, y)
    c = torch.cartesian_prod(ta[:2], tb[:3])
    eq(c, np.array([[i, j] for i in a[:2] for j in b[:3]]))
    bt = torch.broadcast_tensors(T(A[0, :, :1], device), ta)
    eq(bt[0], np.broadcast_to(A[0, :, :1], (4, 5))), eq(bt[1], np.broadcast_to(a, (4, 5)))
    bd = torch.block_diag(T(A[0, :2, :2], device), ta[:3], torch.tensor(7.0, device=device,
                                                                         dtype=torch.float64))
    ref = np.zeros((4, 6))
    ref[:2, :2], ref[2, 2:5], ref[3, 5] = A[0, :2, :2], a[:3], 7
    eq(bd, ref)


def test_take_index_ops(device):
    x = T(A[0], device)
    i = torch.tensor([[0, -1], [7, 3]], device=device)
    eq(torch.take(x, i), np.take(A[0], [[0, -1], [7, 3]]))
    # no dim: t flattened, negative indices counted from the end of all its elements
    eq(torch.take_along_dim(x, torch.tensor([-1, 0, -20], device=device)),
       np.take(A[0].ravel(), [-1, 0, -20]))
    idx = np.array([[3, 0, 1, 2, 0]])
    eq(torch.take_along_dim(x, torch.tensor(idx.tolist(), device=device), dim=0),
       np.take_along_axis(A[0], np.broadcast_to(idx, (1, 5)), 0))
    eq(x.take_along_dim(torch.tensor([1, 19], device=device)), A[0].reshape(-1)[[1, 19]])
    ix = torch.tensor([4, 0, 4], device=device)
    src = A[1, :, :3]
    ref = A[0].copy()
    for k, j in enumerate([4, 0, 4]):
        ref[:, j] += 2 * src[:, k]
    eq(torch.index_add(x, 1, ix, T(src, device), alpha=2), ref)
    y = x.clone()
    assert y.index_add_(1, ix, T(src, device), alpha=2) is y
    eq(y, ref)
    ref = A[0].copy()
    ref[:, [2, 0]] = src[:, :2]
    eq(x.index_copy(1, torch.tensor([2, 0], device=device), T(src[:, :2], device)), ref)
    ref = A[0].copy()
    ref[[1, 3]] = -1.5
    eq(x.index_fill(0, torch.tensor([1, 3], device=device), -1.5), ref)
    eq(x.index_fill(0, torch.tensor([1, 3], device=device), torch.tensor(-1.5)), ref)
    # a 0-dim tensor value gets the filled positions' gradient
    v = torch.tensor(-1.5, dtype=torch.float64, device=device, requires_grad=True)
    (x.index_fill(0, torch.tensor([1, 3], device=device), v) * T(A[1], device)).sum().backward()
    assert v.grad.item() == pytest.approx(A[1][[1, 3]].sum(), rel=1e-12)
    neg = torch.tensor([[-1], [0], [-5], [2]], device=device)
    eq(x.take_along_dim(neg, 1), A[0][[0, 1, 2, 3], [4, 0, 0, 2]].reshape(4, 1))


def _scatter_ref(self, dim, index, src, op, include_self):
    out = self.copy()
    cnt = np.zeros(self.shape, int) + (1 if include_self else 0)
    for pos in np.ndindex(index.shape):
        o = list(pos)
        o[dim] = index[pos]
        o = tuple(o)
        v = src[pos]
        if cnt[o] == 0:
            out[o] = v
        elif op in ("sum", "mean"):
            out[o] += v
        elif op == "prod":
            out[o] *= v
        elif op == "amax":
            out[o] = max(out[o], v)
        elif op == "amin":
            out[o] = min(out[o], v)
        elif op == "last":
            out[o] = v
        cnt[o] += 1
    if op == "mean":
        out = np.where(cnt > 0, out / np.maximum(cnt, 1), out)
    return out


def test_scatter_family(device):
    s = A[0]
    src = A[1]
    index = np.array([[2, 0, 1, 3, 3], [3, 3, 0, 1, 3]])
    ti, ts_, tsrc = torch.tensor(index.tolist(), device=device), T(s, device), T(src, device)
    eq(torch.scatter(ts_, 0, ti, tsrc), _scatter_ref(s, 0, index, src, "last", True))
    ti32 = torch.tensor(index.tolist(), dtype=torch.int32, device=device)
    eq(ts_.scatter(0, ti32, tsrc), _scatter_ref(s, 0, index, src, "last", True))
    eq(ts_.scatter(0, ti, 2.5), _scatter_ref(s, 0, index, np.full(index.shape, 2.5), "last", True))
    eq(ts_.scatter(0, ti, tsrc, reduce="add"), _scatter_ref(s, 0, index, src, "sum", True))
    eq(ts_.scatter(0, ti, tsrc, reduce="multiply"), _scatter_ref(s, 0, index, src, "prod", True))
    y = ts_.clone()
    assert y.scatter_(0, ti, tsrc) is y
    eq(y, _scatter_ref(s, 0, index, src, "last", True))
    for op in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            eq(torch.scatter_reduce(ts_, 0, ti, tsrc, op, include_self=inc),
               _scatter_ref(s, 0, index, src, op, inc))
    iv = torch.tensor([[5, 1], [2, 2]], device=device)
    got = torch.tensor([[1, 2], [3, 4]], device=device).scatter_reduce(1, torch.tensor(
        [[0, 0], [1, 1]], device=device), iv, "mean", include_self=False)
    assert got.dtype == torch.int64 and got.tolist() == [[3, 2], [3, 2]]
    with pytest.raises(RuntimeError, match="scatter_reduce"):
        ts_.scatter_reduce(0, ti, tsrc, "max")


def test_masks_nonzero(device):
    x = T(A[0], device)
    m = x > 0.3
    eq(torch.masked_select(x, m), A[0][A[0] > 0.3])
    row = torch.tensor([True, False, False, True, True], device=device)
    eq(x.masked_select(row), A[0][:, [0, 3, 4]].reshape(-1))
    src = T(A[2].reshape(-1), device)
    ref = A[0].copy()
    ref[A[0] > 0.3] = A[2].reshape(-1)[:int((A[0] > 0.3).sum())]
    eq(x.masked_scatter(m, src), ref)
    y = x.clone()
    assert y.masked_scatter_(m, src) is y
    eq(y, ref)
    nz = np.argwhere(A[0] > 0.3)
    assert torch.nonzero(m).tolist() == nz.tolist() and torch.argwhere(m).tolist() == nz.tolist()
    assert torch.nonzero(m).dtype == torch.int64
    tup = m.nonzero(as_tuple=True)
    assert [t.tolist() for t in tup] == [list(v) for v in np.nonzero(A[0] > 0.3)]
    assert torch.nonzero(torch.zeros(2, 3, device=device)).shape == (0, 2)


def test_gradients(device):
    x = T(A[0], device, rg=True)
    g = T(A[1], device)
    (torch.flip(x, (1,)) * g).sum().backward()
    eq(x.grad, np.flip(A[1], 1))
    x.grad = None
    (torch.roll(x, 2, 1) * g).sum().backward()
    eq(x.grad, np.roll(A[1], -2, 1))
    x.grad = None
    (torch.tril(x) * g).sum().backward()
    eq(x.grad, np.tril(A[1]))
    x.grad = None
    torch.diagonal(x, 1).sum().backward()
    eq(x.grad, np.eye(4, 5, 1))
    x.grad = None
    s = T(A[2], device, rg=True)
    ti = torch.tensor([[0, 0, 1, 1, 2]], device=device)
    (torch.scatter_reduce(x, 0, ti, s, "amax", include_self=False) * g).sum().backward()
    assert x.grad is not None and s.grad is not None


def test_errors(device):
    x = T(A[0], device)
    with pytest.raises(RuntimeError, match="flip"):
        x.flip(0, 0)
    with pytest.raises(RuntimeError, match="tril"):
        torch.tril(x[0])
    with pytest.raises(RuntimeError, match="diagonal"):
        x.diagonal(0, 1, 1)
    with pytest.raises(RuntimeError, match="take"):
        torch.take(x, torch.tensor([20], device=device))
    with pytest.raises(RuntimeError, match="index_fill"):
        x.index_fill(0, torch.tensor([9], device=device), 1.0)
    with pytest.raises(RuntimeError, match="scatter"):
        x.scatter(0, torch.tensor([[5]], device=device), 1.0)
    with pytest.raises(RuntimeError, match="masked_select"):
        x.masked_select(torch.ones(4, 5, device=device))
    with pytest.raises(RuntimeError, match="meshgrid"):
        torch.meshgrid(x, indexing="yx")
    with pytest.raises(RuntimeError, match="rot90"):
        x.rot90(1, (0,))
