"""Issue 52's common refusals, now PyTorch's forms: tensors where numbers were taken, keyword forms,
div(rounding_mode=), integer bitwise ops, squeeze over a tuple, int32 indices, pooling's
return_indices and divisor_override, padding='same' when uneven, bias=False, and the backward of
an empty contraction. Expected values are exact or float64 references (no PyTorch needed)."""
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F


def _np(t):
    return np.asarray(t.detach().cpu().tolist())


# ------------------------------------------------------------------ tensors where numbers were
def test_clamp_tensor_bounds_values_and_grads():
    x = torch.tensor([-2.0, 0.0, 1.0, 3.0, 5.0], requires_grad=True)
    lo = torch.tensor([0.0, 0.0, 2.0, 2.0, 6.0], requires_grad=True)
    hi = torch.tensor([1.0, 1.0, 3.0, 3.0, 4.0], requires_grad=True)
    y = x.clamp(min=lo, max=hi)
    # lo > hi (last): hi, as min(max(x, lo), hi)
    assert y.tolist() == [0.0, 0.0, 2.0, 3.0, 4.0]
    y.sum().backward()
    # PyTorch 2.15's (checked): min(max(x, lo), hi)'s gradients, a tie split in halves
    assert x.grad.tolist() == [0.0, 0.5, 0.0, 0.5, 0.0]
    assert lo.grad.tolist() == [1.0, 0.5, 1.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 0.0, 0.5, 1.0]


def test_clamp_tensor_forms():
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    assert x.clamp(min=torch.tensor(0.0), max=2.0).tolist() == [[1, 0, 2], [2, 2, 0]]
    assert torch.clamp(x, max=torch.tensor([1.0, 2.0, 3.0])).tolist() == [[1, -2, 3],
                                                                          [1, 2, -6]]
    assert x.clamp_min(torch.tensor(0.0)).tolist() == [[1, 0, 3], [4, 5, 0]]
    assert x.clamp_max(torch.tensor(0.0)).tolist() == [[0, -2, 0], [0, 0, -6]]
    i = torch.tensor([1, 5])
    r = i.clamp(min=torch.tensor(2.5))
    assert r.dtype == torch.float32 and r.tolist() == [2.5, 5.0]
    nan = torch.tensor([1.0, 5.0]).clamp(min=torch.tensor(float("nan")))
    assert all(math.isnan(v) for v in nan.tolist())
    z = x.clone()
    z.clamp_(min=torch.tensor(0.0))
    assert z.tolist() == [[1, 0, 3], [4, 5, 0]]


def test_masked_fill_tensor_value():
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    assert x.masked_fill(x > 0, torch.tensor(7.0)).tolist() == [[7, -2, 7], [7, 7, -6]]
    assert torch.tensor([1, 2]).masked_fill(torch.tensor([True, False]),
                                            torch.tensor(2.7)).tolist() == [2, 2]
    v = torch.tensor(1.0, requires_grad=True)
    x.masked_fill(x > 0, v).sum().backward()
    assert v.grad.item() == 4.0
    with pytest.raises(TypeError, match="value"):
        x.masked_fill(x > 0, torch.tensor([7.0]))


def test_narrow_tensor_start_and_space_endpoints():
    x = torch.arange(6.0).reshape(2, 3)
    assert x.narrow(1, torch.tensor(1), 2).tolist() == [[1, 2], [4, 5]]
    with pytest.raises(TypeError, match="start"):
        x.narrow(1, torch.tensor(1.0), 2)
    assert torch.linspace(torch.tensor(0.0), torch.tensor(1.0), 5).tolist() == \
        [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(TypeError, match="start"):
        torch.linspace(torch.tensor([0.0]), 1.0, 5)
    assert torch.logspace(0, 2, 3).tolist() == [1.0, 10.0, 100.0]
    assert torch.logspace(0, 2, 3, base=2).tolist() == [1.0, 2.0, 4.0]
    assert torch.logspace(torch.tensor(0.0), 2, 3, dtype=torch.int64).tolist() == [1, 10, 100]
    ref = 10.0 ** np.linspace(-1.0, 1.5, 7)
    np.testing.assert_allclose(_np(torch.logspace(-1.0, 1.5, 7, dtype=torch.float64)), ref,
                               rtol=1e-15)


# ------------------------------------------------------------------ keyword forms
def test_cast_memory_format_fill_value_round_decimals():
    x = torch.tensor([[1.5, -2.25]])
    assert x.float(memory_format=torch.preserve_format).tolist() == [[1.5, -2.25]]
    assert x.double(memory_format=torch.contiguous_format).dtype == torch.float64
    assert x.long(memory_format=torch.preserve_format).tolist() == [[1, -2]]
    c = torch.zeros(1, 2, 2, 2).float(memory_format=torch.channels_last)
    assert c.is_contiguous(memory_format=torch.channels_last)
    y = torch.zeros(3)
    y.fill_(value=2.5)
    assert y.tolist() == [2.5, 2.5, 2.5]
    y.fill_(torch.tensor(4.0))
    assert y.tolist() == [4.0, 4.0, 4.0]
    v = [1.25, 2.35, -0.125, 1234.5678, 0.5, 1.5]
    r = torch.tensor(v, dtype=torch.float64).round(decimals=2).tolist()
    ref = [np.round(a * 100.0) / 100.0 for a in v]  # half to even of x * 10^d, / 10^d
    assert r == ref
    assert torch.round(torch.tensor([1250.0, 2350.0, 15.0]), decimals=-2).tolist() == \
        [1200.0, 2400.0, 0.0]
    f = torch.tensor([1.005, 2.675], dtype=torch.float32).round(decimals=2)
    want = [float(np.float32(np.round(np.float32(a) * np.float32(100)) / np.float32(100)))
            for a in [1.005, 2.675]]
    assert f.tolist() == want
    assert torch.tensor([3, 4]).round().tolist() == [3, 4]
    with pytest.raises(torch.TesseraError, match="decimals"):
        torch.tensor([3, 4]).round(decimals=1)
    g = torch.tensor([1.23], requires_grad=True)
    g.round(decimals=1).sum().backward()
    assert g.grad.tolist() == [0.0]


# ------------------------------------------------------------------ div(rounding_mode=)
def test_div_rounding_mode():
    a, b = torch.tensor([5, -7, 7, -5]), torch.tensor([2, 2, -2, -2])
    assert torch.div(a, b, rounding_mode="trunc").tolist() == [2, -3, -3, 2]
    assert torch.div(a, b, rounding_mode="floor").tolist() == [2, -4, -4, 2]
    assert (a // b).tolist() == [2, -4, -4, 2]
    assert torch.floor_divide(a, b).tolist() == [2, -4, -4, 2]
    assert a.div(2, rounding_mode="trunc").dtype == torch.int64
    assert (7 // torch.tensor([2, -2])).tolist() == [3, -4]
    x = torch.tensor([5.5, -5.5, 1.0, -0.5])
    assert x.div(2.0, rounding_mode="trunc").tolist() == [2.0, -2.0, 0.0, -0.0]
    assert x.div(2.0, rounding_mode="floor").tolist() == [2.0, -3.0, 0.0, -1.0]
    assert x.div(2.0, rounding_mode=None).tolist() == [2.75, -2.75, 0.5, -0.25]
    assert torch.div(torch.tensor([1.0, -1.0]), 0.0, rounding_mode="trunc").tolist() == \
        [math.inf, -math.inf]
    assert torch.tensor([5, 3]).div(2.5, rounding_mode="floor").tolist() == [2.0, 1.0]
    with pytest.raises(torch.TesseraError, match="ZeroDivisionError"):
        torch.div(a, 0, rounding_mode="floor")
    with pytest.raises(ValueError, match="rounding_mode"):
        torch.div(a, b, rounding_mode="round")
    z = torch.tensor([7.0, -7.0])
    z.div_(2, rounding_mode="floor")
    assert z.tolist() == [3.0, -4.0]


# ------------------------------------------------------------------ bitwise
def test_integer_bitwise_ops():
    i = torch.tensor([5, 3, 12, -1])
    assert (i & 6).tolist() == [4, 2, 4, 6]
    assert (i | 6).tolist() == [7, 7, 14, -1]
    assert (i ^ 6).tolist() == [3, 5, 10, -7]
    assert (~i).tolist() == [-6, -4, -13, 0]
    assert (6 & i).tolist() == [4, 2, 4, 6]
    assert torch.bitwise_and(i, torch.tensor([1, 1, 4, 8])).tolist() == [1, 1, 4, 8]
    assert i.bitwise_xor(i).tolist() == [0, 0, 0, 0]
    assert torch.bitwise_not(torch.tensor([0, 255], dtype=torch.uint8)).tolist() == [255, 0]
    assert (torch.tensor([1, 2]) << 3).tolist() == [8, 16]
    assert (torch.tensor([1, 2]) << 70).tolist() == [0, 0]
    assert (torch.tensor([-8], dtype=torch.int32) >> 40).tolist() == [-1]
    assert (torch.tensor([-8, 9]) >> 1).tolist() == [-4, 4]
    assert (torch.tensor([3], dtype=torch.uint8) << 7).tolist() == [128]
    assert torch.bitwise_left_shift(torch.tensor([1]), torch.tensor([-1])).tolist() == [0]
    b = torch.tensor([True, False, True])
    assert (b & torch.tensor([True, True, False])).tolist() == [True, False, False]
    assert (~b).tolist() == [False, True, False]
    assert (b ^ True).dtype == torch.bool
    j = torch.tensor([12, 10], dtype=torch.int32)
    j &= 6
    j |= 1
    j ^= 2
    j <<= 1
    j >>= 1
    assert j.dtype == torch.int32 and j.tolist() == [7, 1]
    with pytest.raises(torch.TesseraError, match="bitwise_and"):
        torch.tensor([1.0]) & torch.tensor([1.0])
    with pytest.raises(torch.TesseraError, match="bitwise_and"):
        i & 1.5


# ------------------------------------------------------------------ squeeze, int32 indices
def test_squeeze_tuple_and_int32_indices():
    x = torch.zeros(1, 2, 1, 3)
    assert x.squeeze((0, 2)).shape == (2, 3)
    assert torch.squeeze(x, dim=(0, 1)).shape == (2, 1, 3)
    assert x.squeeze(()).shape == (1, 2, 1, 3)
    assert x.unsqueeze(0).shape == (1, 1, 2, 1, 3)
    with pytest.raises(torch.TesseraError, match="multiple times"):
        x.squeeze((0, 0))
    t = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=True)
    i32 = torch.tensor([[0], [2]], dtype=torch.int32)
    g = t.gather(1, i32)
    assert g.tolist() == [[1.0], [-6.0]]
    g.sum().backward()
    assert t.grad.tolist() == [[1, 0, 0], [0, 0, 1]]
    s = torch.zeros(2, 3).scatter_add(1, i32, torch.ones(2, 1))
    assert s.tolist() == [[1, 0, 0], [0, 0, 1]]
    assert t.index_select(1, torch.tensor([2], dtype=torch.int32)).tolist() == [[3.0], [-6.0]]
    with pytest.raises(torch.TesseraError, match="int32/int64"):
        t.gather(1, torch.tensor([[0], [1]], dtype=torch.int16))


# ------------------------------------------------------------------ pooling
def test_max_pool2d_return_indices():
    x = torch.tensor(np.array([[3, 1, 0, 2], [1, 9, 4, 4], [0, 0, 1, 5], [2, 7, 8, 1]],
                              dtype=np.float32).reshape(1, 1, 4, 4).tolist(), requires_grad=True)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    assert y.tolist() == [[[[9.0, 4.0], [7.0, 8.0]]]]
    assert idx.dtype == torch.int64 and idx.tolist() == [[[[5, 6], [13, 14]]]]
    y.sum().backward()
    assert x.grad.sum().item() == 4.0
    m = nn.MaxPool2d(2, return_indices=True)
    y2, idx2 = m(x.detach())
    assert idx2.tolist() == idx.tolist()
    y3, idx3 = F.max_pool2d(x.detach()[0], 3, stride=1, padding=1, return_indices=True)
    assert idx3.shape == (1, 4, 4) and idx3[0, 0, 0].item() == 5


def test_avg_pool2d_divisor_override():
    x = torch.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
    y = F.avg_pool2d(x, 2, divisor_override=3)
    ref = np.arange(16.0).reshape(4, 4).reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).sum((2, 3)) / 3
    np.testing.assert_allclose(_np(y)[0, 0], ref, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.full((1, 1, 4, 4), 1 / 3), rtol=1e-6)
    # padded and ceil-mode windows: the sum of the valid elements over the divisor
    z = F.avg_pool2d(torch.ones(1, 1, 3, 3), 2, stride=2, padding=1, ceil_mode=True,
                     divisor_override=2)
    assert z.tolist() == [[[[0.5, 1.0], [1.0, 2.0]]]]
    m = nn.AvgPool2d(2, divisor_override=1)
    assert m(torch.ones(1, 1, 2, 2)).tolist() == [[[[4.0]]]]
    with pytest.raises(RuntimeError, match="divisor"):
        F.avg_pool2d(x, 2, divisor_override=0)


# ------------------------------------------------------------------ conv padding
def _conv_ref(x, w, pads):
    """float64 cross-correlation of x [C, H, W] with w [O, C, kh, kw], pads (top, bottom, left,
    right)"""
    xp = np.pad(x, ((0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    o, c, kh, kw = w.shape
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    out = np.zeros((o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = np.tensordot(w, xp[:, i:i + kh, j:j + kw], axes=3)
    return out


def test_conv2d_padding_same_uneven_and_valid():
    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal((1, 2, 5, 6)), rng.standard_normal((3, 2, 2, 3))
    x = torch.tensor(xn.tolist(), dtype=torch.float64, requires_grad=True)
    w = torch.tensor(wn.tolist(), dtype=torch.float64)
    y = F.conv2d(x, w, padding="same")
    assert y.shape == (1, 3, 5, 6)
    # total padding (1, 2): height 0 top 1 bottom, width 1 left 1 right
    np.testing.assert_allclose(_np(y)[0], _conv_ref(xn[0], wn, (0, 1, 1, 1)), rtol=1e-12)
    y.sum().backward()
    assert x.grad.shape == (1, 2, 5, 6)
    y2 = F.conv2d(x, w, padding="same", dilation=(1, 2))  # total (1, 4)
    np.testing.assert_allclose(
        _np(y2)[0], _conv_ref(xn[0], np.kron(wn, [[1, 0]])[..., :5], (0, 1, 2, 2)), rtol=1e-12)
    yv = F.conv2d(x, w, padding="valid")
    np.testing.assert_allclose(_np(yv)[0], _conv_ref(xn[0], wn, (0, 0, 0, 0)), rtol=1e-12)
    conv = nn.Conv2d(2, 3, (2, 3), padding="same", dtype=torch.float64)
    assert conv(x).shape == (1, 3, 5, 6)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, w, padding="same", stride=2)


# ------------------------------------------------------------------ bias=False
def test_bias_false_modules():
    bn = nn.BatchNorm2d(3, bias=False)
    assert bn.bias is None and [n for n, _ in bn.named_parameters()] == ["weight"]
    x = torch.randn(4, 3, 2, 2)
    y = bn(x)
    m = x.mean((0, 2, 3), keepdim=True)
    v = ((x - m) ** 2).mean((0, 2, 3), keepdim=True)
    np.testing.assert_allclose(_np(y), _np((x - m) / (v + 1e-5).sqrt()), rtol=1e-4, atol=1e-5)
    assert "bias=False" in repr(bn)
    mha = nn.MultiheadAttention(4, 2, bias=False)
    names = [n for n, _ in mha.named_parameters()]
    assert names == ["in_proj_weight", "out_proj.weight"]
    q = torch.randn(3, 1, 4)
    out, _ = mha(q, q, q)
    assert out.shape == (3, 1, 4)
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, bias=False)
    assert not any(n.endswith("bias") for n, _ in layer.named_parameters())
    assert layer(q).shape == (3, 1, 4)
    lin = nn.Linear(3, 2, bias=False)
    assert lin.bias is None and lin(torch.ones(1, 3)).shape == (1, 2)


# ------------------------------------------------------------------ empty contraction
@pytest.mark.parametrize("sa,sb", [((3, 0), (0, 4)), ((2, 3, 0), (2, 0, 4)), ((0,), (0,)),
                                   ((0,), (0, 4)), ((3, 0), (0,)), ((2, 3, 0), (0, 4))])
def test_matmul_empty_contraction_backward(sa, sb):
    a = torch.randn(*sa, dtype=torch.float64, requires_grad=True)
    b = torch.randn(*sb, dtype=torch.float64, requires_grad=True)
    y = a @ b
    assert float(_np(y).__abs__().sum()) == 0.0
    (y * 2).sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert float(np.abs(_np(a.grad)).sum()) == 0.0 and float(np.abs(_np(b.grad)).sum()) == 0.0
    w = torch.randn(5, 0, requires_grad=True)
    x = torch.randn(2, 0, requires_grad=True)
    F.linear(x, w).sum().backward()
    assert w.grad.shape == (5, 0) and x.grad.shape == (2, 0)
