"""Autograd through in-place writes on views, as libraries use them (PyTorch's CopySlices;
src/autograd/copy_slices.c): ghostnet's `x[:, :c].add_(y)`, `out.narrow(1, 0, c).copy_(z)`,
`out[..., idx] = v` and int / slice setitem inside a forward, the in-place activations, clamp_,
masked_fill_ and mul_ through slices, a transpose and a diagonal. The gradients are PyTorch 2.15's
(float64, printed by the script in this file's last comment) on cpu and sim:0; the errors are
PyTorch's messages."""
import numpy as np
import pytest

import tessera

F64 = tessera.float64


def vals(shape, seed):
    n = int(np.prod(shape))
    return np.array([0.2 + ((0.37 * i + seed * 0.61) % 1.0) for i in range(n)]).reshape(shape)


def T(a, device, rg=False):
    return tessera.tensor(np.asarray(a), dtype=F64, device=device, requires_grad=rg)


def close(t, want):
    # the same float64 operations as PyTorch's, some in another order: a few ulps of values < 20
    np.testing.assert_allclose(t.detach().cpu().numpy().ravel(), want, rtol=1e-12, atol=1e-13)


GX_ADD = [
    3.5911609200000005, 4.120371200000001, 2.477475000000001, 5.774273279999995,
    0.5821935599999999, 1.6392499200000006, 1.092726999999998, 0.15871999999999967,
    1.8078706799999986, 2.1334233600000005, 0.3873409200000011, 2.9984768000000064,
    0.33017499999999916, 2.904814079999997, 1.1310591599999984, 0.7346419200000001,
    4.585144600000002, 2.393600000000009, 0.28655148000000097, 2.513064960000003,
    0.01592891999999997, 0.6243583999999963, 4.012515000000001, 0.07077887999999946,
]
GY_ADD = [
    2.2167660000000002, 1.7459200000000004, 2.2522500000000005, 3.1381919999999983,
    1.0037820000000002, 1.2418560000000005, 0.6603499999999988, 2.342591999999998,
    0.5712419999999993, 1.0203359999999997, 3.1405100000000004, 1.0880000000000039,
]
LOSS_ADD = 17.633029720400003
GX_COPY = [
    2.9099999999999984, 1.0200000000000018, 2.129999999999999, 4.427019034058825,
    1.7892169180472757, 3.232362554557533, 1.2300000000000026, 2.34, 3.4499999999999975,
    2.147547458833987, 3.2987930240184733, 1.145801152255138,
]
GZ_COPY = [
    1.719999999999999, 1.1408000000000011, 4.7520000000000024, 0., 0., 0., 1.1279999999999977,
    4.50239999999999, 1.747199999999998, 0., 0., 0.,
]
GX_SET = [
    0., 4.502399999999996, 0., 1.9023999999999923, 0., 0., 0., 7.547199999999991, 0., 0., 0.,
    1.5983999999999992, 0., 2.486399999999985, 0., 6.935999999999989, 0., 0., 0.,
    1.3199999999999978, 0., 0., 0., 0.,
]
GV_SET = [
    5.831999999999992, 8.424, 11.5128, 11.138400000000006, 2.6207999999999845, 16.740000000000016,
    3.9959999999999907, 5.7887999999999895, 4.118399999999991, 7.084800000000014, 0., 0.,
]
GW_SET = [
    0.9660000000000002, 0., 0.37840000000000057, 1.2959999999999983,
]
GX_ACT = [
    3.443232000000002, 0., 0.5, 10.186136774261026, 0., 6.660048000000016, 15.89999999999999, 0.,
    1., -1., 0.5, 9.379073878356076, -1., 6.599999999999986, 14.700000000000015,
    -0.3163707936369262,
]
GY_ACT = [
    1.4760959999999999, 1.0437120000000049, 0., 0.04147341405447644,
]


def test_ghostnet_narrow_add(device):
    x, y = T(vals((2, 4, 3), 1), device, True), T(vals((2, 2, 3), 2), device, True)
    c = T(vals((2, 4, 3), 3), device)
    b = x * x
    b[:, :2].add_(y)
    assert b.grad_fn.name() == "CopySlices"
    loss = (b * b * c).sum()
    assert abs(loss.item() - LOSS_ADD) < 1e-12
    loss.backward()
    close(x.grad, GX_ADD)
    close(y.grad, GY_ADD)


def test_narrow_copy(device):
    x, z = T(vals((2, 2, 3), 4), device, True), T(vals((2, 2, 3), 5), device, True)
    c = T(vals((2, 4, 3), 6), device)
    out = tessera.zeros(2, 4, 3, dtype=F64, device=device)
    out.narrow(1, 0, 2).copy_(z * 2)  # out requires no grad before: it joins the graph
    out.narrow(1, 2, 2).copy_(tessera.sin(x))
    h = out * out
    h.narrow(1, 1, 2).copy_(x * 3)  # over values that had a gradient: theirs is zero now
    (h * c).sum().backward()
    close(x.grad, GX_COPY)
    close(z.grad, GZ_COPY)


def test_setitem_in_forward(device):
    x, v = T(vals((2, 3, 4), 7), device, True), T(vals((2, 3, 2), 8), device, True)
    w, c = T(vals((4,), 9), device, True), T(vals((2, 3, 4), 10), device)
    out = x * 2
    out[..., tessera.tensor([0, 2], device=device)] = v * 3
    out[1, 2] = w
    out[:, 1:3, 1] = 0.5
    (out * out * c).sum().backward()
    close(x.grad, GX_SET)
    close(v.grad, GV_SET)
    close(w.grad, GW_SET)


def test_activations_on_views(device):
    x, y = T(vals((4, 4), 11) - 0.6, device, True), T(vals((4,), 12), device, True)
    b = x * 3
    b.diagonal().mul_(y)
    b[2:, :2].clamp_(-0.5, 0.5)
    b[:, 2].masked_fill_(tessera.tensor([True, False, True, False], device=device), 0.25)
    b[:2].relu_()
    s = x * 2
    s.t()[3].sigmoid_()
    ((b * b).sum() + b[:, 1].sum() + (s * b).sum()).backward()
    close(x.grad, GX_ACT)
    close(y.grad, GY_ACT)


def test_history_and_errors(device):
    x = T(vals((3, 4), 13), device, True)
    b = x * 1
    v, w = b[:, :2], b[:, 2:]
    v.mul_(2)
    assert (b.grad_fn.name(), v.grad_fn.name(), w.grad_fn.name()) == (
        "CopySlices", "AsStridedBackward0", "AsStridedBackward0")
    # sigmoid_ saved its output; a later write through another view of the base changes it
    a = T(vals((4, 4), 11) - 0.6, device, True) * 3
    a.t()[3].sigmoid_()
    a[:2].relu_()
    with pytest.raises(tessera.StateError, match="modified by an inplace operation"):
        (a * a).sum().backward()
    with pytest.raises(tessera.StateError, match="a view of a leaf Variable that requires grad "
                                                 "is being used in an in-place operation."):
        x[:, :2].add_(1)
    with tessera.no_grad():
        ng = b[0]
    with pytest.raises(tessera.StateError, match="A view was created in no_grad mode and is "
                                                 "being modified inplace with grad mode enabled"):
        ng.mul_(2)
    with pytest.raises(tessera.StateError, match="Output 1 of Split is a view and is being "
                                                 "modified inplace. This view is the output of a "
                                                 "function that returns multiple views."):
        b.split(2, 1)[1].mul_(2)
    with pytest.raises(tessera.StateError, match="Output 2 of Unbind is a view"):
        b.unbind(1)[2].add_(1)
    with tessera.no_grad():  # nothing recorded: allowed
        b[:, 1].add_(1)


# The reference numbers: PyTorch 2.15, float64, the same functions as the tests above on these
# inputs (vals), printed with numpy.array2string(..., floatmode="unique").
