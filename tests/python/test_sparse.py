"""Sparse COO tensors (python/tessera/sparse.py, issue 53): every operation against the same
computation on dense float64 NumPy arrays, gradients against central differences, the errors, on
cpu and sim:0. The reprs and messages marked "PyTorch" are PyTorch 2.15's, with torch -> tessera."""
import numpy as np
import pytest

import tessera

RNG = np.random.default_rng(53)


def T(a, device, dtype=tessera.float64):
    return tessera.tensor(np.asarray(a).tolist(), dtype=dtype, device=device)


def N(t):
    return np.array(t.detach().cpu().tolist(), dtype=np.float64)


def coo(device, shape=(4, 5), nnz=7, dense=(), dup=True, seed=0):
    """a random uncoalesced COO tensor (duplicates when dup) and its dense float64 NumPy twin"""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(0, s, nnz) for s in shape])
    if dup:
        idx[:, -1] = idx[:, 0]  # at least one duplicate
    vals = rng.standard_normal((nnz,) + dense)
    ref = np.zeros(tuple(shape) + dense)
    for k in range(nnz):
        ref[tuple(idx[:, k])] += vals[k]
    s = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), T(vals, device),
                                  tuple(shape) + dense)
    return s, ref, idx, vals


def ac(actual, expected, rtol=1e-14, atol=1e-15):
    """float64 results of a few roundings: within a few ulps (numpy's rtol default, 1e-7, would
    let a relative error of 1e-7 through)"""
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def central(f, x, eps=1e-6):
    """d f / d x by central differences (f: float64 array -> number)"""
    g = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[k] += eps
        xm[k] -= eps
        g[k] = (f(xp) - f(xm)) / (2 * eps)
    return g


# ------------------------------------------------------------------------------ construction
def test_to_dense_sums_duplicates(device):
    s, ref, _, _ = coo(device)
    d = s.to_dense()
    assert d.device == tessera.device(device) and d.dtype == tessera.float64
    ac(N(d), ref, rtol=0, atol=1e-15)
    assert s.layout == tessera.sparse_coo and s.is_sparse and not s.is_coalesced()
    assert (s.shape, s.dim(), s.ndim, s.size(1), s._nnz(), s.sparse_dim(), s.dense_dim()) == \
        (tessera.Size([4, 5]), 2, 2, 5, 7, 2, 0)
    assert tessera.is_tensor(s) and not isinstance(s, tessera.Tensor)


def test_hybrid_dense_dims(device):
    s, ref, _, _ = coo(device, shape=(3, 4), nnz=5, dense=(2,))
    assert (s.sparse_dim(), s.dense_dim(), tuple(s.shape)) == (2, 1, (3, 4, 2))
    ac(N(s.to_dense()), ref, atol=1e-15)
    ac(N(s.coalesce().to_dense()), ref, atol=1e-15)


def test_size_inferred_and_dtype_device():
    i = [[0, 2, 1], [1, 0, 3]]
    s = tessera.sparse_coo_tensor(i, [1.0, 2.0, 3.0])
    assert tuple(s.shape) == (3, 4) and s.dtype == tessera.float32
    s = tessera.sparse_coo_tensor(i, [1, 2, 3], (5, 5), dtype=tessera.float64, device="sim:0")
    assert s.dtype == tessera.float64 and s.device == tessera.device("sim:0")
    assert s._indices().dtype == tessera.int64 and s._indices().device == s.device
    e = tessera.sparse_coo_tensor(tessera.empty(2, 0, dtype=tessera.int64), tessera.empty(0))
    assert tuple(e.shape) == (0, 0) and e._nnz() == 0
    assert N(tessera.sparse_coo_tensor(tessera.empty(2, 0, dtype=tessera.int64),
                                       tessera.empty(0), (2, 2)).to_dense()).tolist() == \
        [[0, 0], [0, 0]]


def test_coalesce(device):
    s, ref, idx, _ = coo(device, nnz=9)
    c = s.coalesce()
    assert c.is_coalesced() and c.coalesce() is c
    lin = [int(a) * 5 + int(b) for a, b in zip(*c.indices().tolist())]
    assert lin == sorted(set(lin)) == sorted({int(a) * 5 + int(b) for a, b in zip(*idx)})
    ac(N(c.values()), [ref[k // 5, k % 5] for k in lin], atol=1e-15)
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        s.values()
    assert s._indices().shape[1] == 9 and s._values().shape[0] == 9
    b = tessera.sparse_coo_tensor([[1, 0, 1]], [True, False, True], (2,)).coalesce()
    assert b.dtype == tessera.bool and b.values().tolist() == [False, True]


def test_to_sparse_round_trip(device):
    x = RNG.standard_normal((4, 3))
    x[x < 0.3] = 0
    x[1, 1] = np.nan
    s = T(x, device).to_sparse()
    assert s.is_coalesced() and s._nnz() == int(np.count_nonzero(x))
    np.testing.assert_array_equal(N(s.to_dense()), x)  # NaN kept: it is nonzero
    assert N(s.indices()).T.tolist() == np.argwhere(x != 0).tolist()
    z = tessera.zeros(2, 2, device=device).to_sparse()
    assert z._nnz() == 0 and N(z.to_dense()).tolist() == [[0, 0], [0, 0]]
    y = np.zeros((3, 2, 2))
    y[1, 0, 1] = 5
    h = T(y, device).to_sparse(1)
    assert (h.sparse_dim(), h.dense_dim(), h._nnz()) == (1, 2, 1)
    np.testing.assert_array_equal(N(h.to_dense()), y)
    assert T(y, device).to_sparse(0)._nnz() == 1
    assert s.to_sparse() is s and T(x, device).layout == tessera.strided
    d = T(x, device)
    assert d.to_dense() is d and not d.is_sparse
    with pytest.raises(RuntimeError, match=r"sparse_dim argument must be in \[0,2\] range, but 3"):
        d.to_sparse(3)


def test_to_sparse_gradient(device):
    x = RNG.standard_normal((3, 4))
    x[x < 0] = 0
    w = RNG.standard_normal((3, 4))
    t = T(x, device).requires_grad_()
    (t.to_sparse().to_dense() * T(w, device)).sum().backward()
    ac(N(t.grad), np.where(x != 0, w, 0.0))


def test_to_device_dtype(device):
    s, ref, _, _ = coo("cpu")
    m = s.to(device)
    assert m.device == tessera.device(device) and m._indices().device == m.device
    f = m.to(tessera.float32)
    assert f.dtype == tessera.float32 and f._indices().dtype == tessera.int64
    ac(N(f.to_dense()), ref, rtol=1e-6, atol=1e-6)
    assert s.double() is s


# ------------------------------------------------------------------------------ arithmetic
def test_mm_matmul(device):
    s, ref, _, _ = coo(device)
    d = RNG.standard_normal((5, 3))
    want = ref @ d
    for got in (tessera.mm(s, T(d, device)), tessera.matmul(s, T(d, device)), s @ T(d, device),
                s.mm(T(d, device)), tessera.sparse.mm(s, T(d, device)),
                tessera.spmm(s, T(d, device))):
        assert got.device == tessera.device(device) and not getattr(got, "is_sparse", True)
        ac(N(got), want, rtol=1e-13, atol=1e-13)
    v = RNG.standard_normal(5)
    ac(N(s @ T(v, device)), ref @ v, rtol=1e-13, atol=1e-13)
    w = RNG.standard_normal((2, 4))
    ac(N(T(w, device) @ s), w @ ref, rtol=1e-13, atol=1e-13)
    ac(N(tessera.mm(T(w, device), s)), w @ ref, rtol=1e-13, atol=1e-13)
    sm = tessera.smm(s, T(d, device))
    assert sm.is_sparse
    ac(N(sm.to_dense()), want, rtol=1e-13, atol=1e-13)
    a = RNG.standard_normal((4, 3))
    ac(N(tessera.sparse.addmm(T(a, device), s, T(d, device), beta=0.5,
                                                      alpha=2.0)), 0.5 * a + 2 * want,
                               rtol=1e-13, atol=1e-13)


def test_add_sub(device):
    s, ref, _, _ = coo(device)
    s2, ref2, _, _ = coo(device, seed=1)
    d = RNG.standard_normal((4, 5))
    ac(N(T(d, device) + s), d + ref, atol=1e-15)
    ac(N(s + T(d, device)), ref + d, atol=1e-15)
    ac(N(T(d, device) - s), d - ref, atol=1e-15)
    ac(N(tessera.add(T(d, device), s, alpha=3)), d + 3 * ref, atol=1e-14)
    ac(N(tessera.sub(T(d, device), s)), d - ref, atol=1e-15)
    ss = s + s2
    assert ss.is_sparse and ss.is_coalesced()
    ac(N(ss.to_dense()), ref + ref2, atol=1e-15)
    ac(N((s - s2).to_dense()), ref - ref2, atol=1e-15)
    ac(N(tessera.add(s, s2, alpha=2).to_dense()), ref + 2 * ref2,
                               atol=1e-14)
    # gat's `torch.eye(V) + adj` with an int64 adjacency: a float32 dense result (PyTorch's)
    adj = tessera.sparse_coo_tensor(np.array([[0, 1, 1], [1, 2, 2]], dtype=np.int32).T.T.tolist(),
                                    tessera.ones(3), (3, 3), dtype=tessera.int64).to(device)
    r = tessera.eye(3, device=device) + adj
    assert r.dtype == tessera.float32 and r.tolist() == [[1, 1, 0], [0, 1, 2], [0, 0, 1]]
    with pytest.raises(RuntimeError, match="to have same size"):
        tessera.ones(4, device=device, dtype=tessera.float64) + s


def test_mul_neg_div_sum(device):
    s, ref, _, _ = coo(device, shape=(3, 4, 2), nnz=6)
    ac(N((s * 2.5).to_dense()), ref * 2.5, atol=1e-15)
    ac(N((2.5 * s).to_dense()), ref * 2.5, atol=1e-15)
    ac(N((-s).to_dense()), -ref, atol=1e-15)
    ac(N(tessera.neg(s).to_dense()), -ref, atol=1e-15)
    ac(N((s / 4).to_dense()), ref / 4, atol=1e-15)
    d = RNG.standard_normal((3, 4, 2))
    p = T(d, device) * s
    assert p.is_sparse
    ac(N(p.to_dense()), d * ref, atol=1e-15)
    ac(N(tessera.mul(s, T(d, device)).to_dense()), d * ref, atol=1e-15)
    assert abs(s.sum().item() - ref.sum()) < 1e-13 and s.sum().dim() == 0
    assert abs(tessera.sum(s).item() - ref.sum()) < 1e-13
    for dims in (0, 1, 2, (0, 2), (1, 2), -1):
        r = tessera.sparse.sum(s, dims)
        axes = dims if isinstance(dims, tuple) else (dims,)
        assert r.is_sparse
        ac(N(r.to_dense()), ref.sum(axis=axes), atol=1e-14)
    full = tessera.sparse.sum(s, (0, 1, 2))
    assert not full.is_sparse and abs(full.item() - ref.sum()) < 1e-13
    h, href, _, _ = coo(device, shape=(3, 4), nnz=6, dense=(2,))
    dense_left = h.sum((0, 1))  # every sparse dim summed: dense
    assert not dense_left.is_sparse
    ac(N(dense_left), href.sum(axis=(0, 1)), atol=1e-14)
    ac(N(h.sum(2).to_dense()), href.sum(axis=2), atol=1e-14)


def test_transpose(device):
    s, ref, _, _ = coo(device)
    for t in (s.t(), s.transpose(0, 1), s.transpose(1, 0), s.swapdims(-1, 0)):
        assert t.is_sparse and not t.is_coalesced() and tuple(t.shape) == (5, 4)
        ac(N(t.to_dense()), ref.T, atol=1e-15)
    h, href, _, _ = coo(device, shape=(3,), nnz=3, dense=(2, 4))
    ac(N(h.transpose(1, 2).to_dense()), href.transpose(0, 2, 1),
                               atol=1e-15)
    with pytest.raises(RuntimeError, match="sparse dimension with a dense"):
        h.transpose(0, 1)


# ------------------------------------------------------------------------------ gradients
def test_mm_gradients_central_differences(device):
    _, _, idx, vals = coo(device, nnz=6)
    d = RNG.standard_normal((5, 3))
    g = RNG.standard_normal((4, 3))  # the loss: sum(g * (S @ D))

    def loss(v, m):
        s = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), T(v, device), (4, 5))
        return float(((s @ T(m, device)) * T(g, device)).sum().item())

    v = T(vals, device).requires_grad_()
    m = T(d, device).requires_grad_()
    s = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), v, (4, 5))
    ((s @ m) * T(g, device)).sum().backward()
    ac(N(m.grad), central(lambda x: loss(vals, x), d), rtol=1e-7,
                               atol=1e-8)
    ac(N(v.grad), central(lambda x: loss(x, d), vals), rtol=1e-7,
                               atol=1e-8)


def test_leaf_sparse_grad_and_dense_ops_gradients(device):
    _, ref, idx, vals = coo(device, nnz=5)
    s = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), T(vals, device), (4, 5),
                                  requires_grad=True)
    assert s.requires_grad and s.grad is None
    w = RNG.standard_normal((4, 5))
    (s.coalesce().to_dense() * T(w, device)).sum().backward()
    g = s.grad
    assert g.is_sparse and tuple(g.shape) == (4, 5)
    ac(N(g._values()), [w[a, b] for a, b in idx.T], atol=1e-15)
    # dense + sparse, sum: gradients to both sides
    v = T(vals, device).requires_grad_()
    d = T(w, device).requires_grad_()
    sp = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), v, (4, 5))
    ((d + sp) ** 2).sum().backward()
    ac(N(d.grad), 2 * (w + ref), atol=1e-13)

    def f(x):
        q = tessera.sparse_coo_tensor(T(idx, device, tessera.int64), T(x, device), (4, 5))
        return float(((T(w, device) + q) ** 2).sum().item())
    ac(N(v.grad), central(f, vals), rtol=1e-7, atol=1e-7)


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("args, message", [
    (([[0, 5], [1, 0]], [1.0, 2.0], (2, 2)),
     "size is inconsistent with indices: for dim 0, size is 2 but found index 5"),
    (([[0, -1], [1, 0]], [1.0, 2.0], (2, 2)), "found negative index -1 for dim 0"),
    (([[0, 1], [1, 0]], [1.0, 2.0, 3.0], (2, 2)),
     "indices and values must have same nnz, but got nnz from indices: 2, nnz from values: 3"),
    (([[0, 1], [1, 0]], [1.0, 2.0], (2,)),
     r"'len\(size\) == sparse_dim \+ dense_dim' is not satisfied: len\(size\) = 1, sparse_dim"
     r" = 2, dense_dim = 0"),
    (([0, 1], [1.0, 2.0], (2, 2)), r"indices must be sparse_dim x nnz, but got: \[2\]"),
    (([[0, 1]], [[1.0, 2.0], [3.0, 4.0]], (2, 3)),
     r"values has incorrect size, expected \[2, 3\], got \[2, 2\]"),
])
def test_construction_errors(args, message):  # the messages are PyTorch's
    with pytest.raises(RuntimeError, match=message):
        tessera.sparse_coo_tensor(*args)


def test_unsupported_ops_raise(device):
    s, _, _, _ = coo(device)
    d = tessera.ones(4, 5, dtype=tessera.float64, device=device)
    cases = {"exp": lambda: s.exp(), "exp()": lambda: tessera.exp(s),
             "relu()": lambda: tessera.relu(s), "t()": lambda: tessera.t(s),
             "add()": lambda: d.add(s),
             "__gt__": lambda: s > 0, "__lt__": lambda: d > s, "__getitem__": lambda: s[0],
             "__pow__": lambda: s ** 2, "view": lambda: s.view(20), "bool()": lambda: bool(s),
             "softmax": lambda: tessera.nn.functional.softmax(s, 0),
             "matmul(sparse, sparse)": lambda: s @ s.t(), "add(sparse, float)": lambda: s + 1.0}
    for name, f in cases.items():
        with pytest.raises(NotImplementedError, match="sparse tensors") as e:
            f()
        assert name in str(e.value), (name, str(e.value))
    with pytest.raises(RuntimeError, match="same dtype"):
        s @ tessera.ones(5, 2, device=device)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        s @ tessera.ones(4, 2, dtype=tessera.float64, device=device)
    with pytest.raises(RuntimeError, match="dense_to_sparse|layout"):
        d.to_sparse(layout="csr")
    with pytest.raises(AttributeError):
        s.not_an_attribute
    assert hasattr(s, "exp")  # as PyTorch: the method exists and refuses when called
    with pytest.raises(NotImplementedError, match="Tensor.mT: sparse tensors"):
        s.mT


# ------------------------------------------------------------------------------ printing
def test_repr_is_pytorchs():
    i = tessera.tensor([[0, 1, 1], [2, 0, 2]])
    s = tessera.sparse_coo_tensor(i, tessera.tensor([3.0, 4.0, 5.0]), (2, 3))
    assert repr(s) == ("tensor(indices=tensor([[0, 1, 1],\n"
                       "                       [2, 0, 2]]),\n"
                       "       values=tensor([3., 4., 5.]),\n"
                       "       size=(2, 3), nnz=3, layout=tessera.sparse_coo)")
    s = tessera.sparse_coo_tensor([[0, 1]], tessera.tensor([1.0, 2.0], dtype=tessera.float64),
                                  (3,), requires_grad=True)
    assert repr(s) == (
        "tensor(indices=tensor([[0, 1]]),\n"
        "       values=tensor([1., 2.]),\n"
        "       size=(3,), nnz=2, dtype=tessera.float64, layout=tessera.sparse_coo,\n"
        "       requires_grad=True)")
    assert repr(tessera.zeros(2, 2).to_sparse()) == (
        "tensor(indices=tensor([], size=(2, 0)),\n"
        "       values=tensor([], size=(0,)),\n"
        "       size=(2, 2), nnz=0, layout=tessera.sparse_coo)")


def test_factories_refuse_a_sparse_layout():
    assert tessera.zeros(2, layout=tessera.strided).tolist() == [0, 0]
    for f in (lambda: tessera.zeros(2, 2, layout=tessera.sparse_coo),
              lambda: tessera.zeros_like(tessera.ones(2), layout=tessera.sparse_coo),
              lambda: tessera.ones(1).new_zeros(2, layout=tessera.sparse_coo),
              lambda: tessera.arange(3, layout=tessera.sparse_coo)):
        with pytest.raises(NotImplementedError, match="layout=tessera.sparse_coo is not supported"):
            f()


def test_xavier_normal_is_glorots_normal():  # gat's init (nn.init.xavier_normal_)
    w = tessera.empty(2, 32, 1)  # fan_in 32, fan_out 2
    tessera.manual_seed(7)
    tessera.nn.init.xavier_normal_(w, gain=1.5)
    ref = tessera.empty(2, 32, 1)
    tessera.manual_seed(7)
    tessera.nn.init.normal_(ref, 0.0, 1.5 * (2.0 / 34) ** 0.5)
    assert w.tolist() == ref.tolist()
