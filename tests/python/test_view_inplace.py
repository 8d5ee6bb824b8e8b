"""PyTorch's in-place view methods (python/src/tensor_view_inplace.c; issue 53's tutorials call
batch_me.unsqueeze_(0)): unsqueeze_, squeeze_, t_, transpose_, swapdims_, swapaxes_ change the
tensor's own shape and strides (not its data) and return it; their autograd rules; the helpers that
torch.functional holds (tessera.functional)."""
import numpy as np
import pytest

import tessera as t


def _np(x):
    return x.detach().numpy()


@pytest.mark.parametrize("name, args, ref", [
    ("unsqueeze_", (0,), lambda a: a[None]),
    ("unsqueeze_", (-1,), lambda a: a[..., None]),
    ("squeeze_", (), lambda a: a.squeeze()),
    ("squeeze_", (2,), lambda a: a.squeeze(2)),
    ("t_", (), None),
    ("transpose_", (0, 2), lambda a: a.transpose(2, 1, 0, 3)),
    ("swapdims_", (1, 3), lambda a: a.swapaxes(1, 3)),
    ("swapaxes_", (-1, 0), lambda a: a.swapaxes(-1, 0)),
])
def test_view_inplace_changes_the_tensor_itself(name, args, ref):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 1, 4) if ref else \
        np.arange(6, dtype=np.float32).reshape(2, 3)
    ref = ref or (lambda v: v.T)
    x = t.tensor(a)
    other = x  # another name for the same object sees the change
    r = getattr(x, name)(*args)
    assert r is x and other.shape == ref(a).shape
    np.testing.assert_array_equal(_np(x), ref(a))
    # still a view of the same memory: a write through x shows in a view taken before
    y = t.tensor(a)
    before = y.view(-1)
    getattr(y, name)(*args)
    y.mul_(2)
    np.testing.assert_array_equal(_np(before), 2 * a.reshape(-1))


def test_squeeze_of_a_dim_that_is_not_one_and_t_of_3d():
    x = t.zeros(2, 3)
    assert x.squeeze_(0).shape == (2, 3)
    with pytest.raises(RuntimeError, match="2 dimensions"):
        t.zeros(2, 3, 4).t_()
    x = t.zeros(2, 3)
    with pytest.raises(Exception, match="out of range"):  # unsqueeze's error, x unchanged
        x.unsqueeze_(5)
    assert x.shape == (2, 3)


def test_leaf_that_requires_grad():
    w = t.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.unsqueeze_(0)
    assert w.shape == (3,)
    with t.no_grad():  # allowed there, and w stays the leaf it was
        w.unsqueeze_(0)
    assert w.shape == (1, 3) and w.requires_grad and w.is_leaf and w.grad_fn is None
    (w * t.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    np.testing.assert_array_equal(_np(w.grad), [[1.0, 2.0, 3.0]])
    # a graph that saved the leaf before its shape changed refuses backward, as PyTorch's
    W = t.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    a = t.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
    y = (a @ W).sum()
    with t.no_grad():
        W.t_()
    np.testing.assert_array_equal(_np(W), [[1.0, 3.0], [2.0, 4.0]])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_non_leaf_takes_the_view_and_its_history():
    a = t.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 2
    saved = b * b  # saves b with its old shape
    b.unsqueeze_(0)
    assert b.shape == (1, 3) and "Unsqueeze" in repr(b.grad_fn)
    (b * t.tensor([[1.0, 10.0, 100.0]])).sum().backward(retain_graph=True)
    np.testing.assert_allclose(_np(a.grad), [2.0, 20.0, 200.0])
    a.grad = None
    saved.sum().backward()  # d sum((2a)^2) / da = 8a, through the graph that saved b before
    np.testing.assert_allclose(_np(a.grad), [8.0, 16.0, 24.0])
    c = a * 2
    c.t_()  # 1-D: unchanged, still differentiable
    assert c.shape == (3,) and c.requires_grad


def test_history_under_no_grad_is_refused():
    b = t.ones(3, requires_grad=True) * 2
    with t.no_grad():
        with pytest.raises(NotImplementedError, match="unsqueeze_"):
            b.unsqueeze_(0)
    assert b.shape == (3,)


def test_functional_module_is_torch_functional():
    import tessera.functional as F
    for name in ("einsum", "split", "norm", "meshgrid", "broadcast_tensors", "unique", "tensordot"):
        assert getattr(F, name) is getattr(t, name) and name in F.__all__
    x = t.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(_np(F.einsum("ij,jk->ik", x, x)), _np(x) @ _np(x))
