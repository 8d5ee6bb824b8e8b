"""conv_transpose3d in float32 is computed in float64 and rounded once off CUDA (issue 76;
src/nn/conv_transpose.c, ct3d_f32): each output within one float32 rounding of the exact
value, u |y| with u = 2^-24, plus float64's own error, against a NumPy float64 scatter of the
same (float32) inputs. The previous float32 composition (kd 2d transposed convolutions, each
accumulated and rounded in float32, then added) is off by up to 2.4 u sum|x w|, far above u |y|
where the products cancel; PyTorch's float32 by up to 4.7 u sum|x w| on the same cases."""
import numpy as np
import pytest

import tessera
import tessera.nn.functional as F

U32 = 2.0 ** -24


def ref_conv_transpose3d(x, w, stride, padding, output_padding, groups, dilation):
    """float64: out[n, g*cog + co, i*s - p + k*d] += x[n, g*cig + ci, i] w[g*cig + ci, co, k];
    also the sum of the products' magnitudes"""
    n, cin, *ins = x.shape
    _, cog, *ks = w.shape
    cig = cin // groups
    outs = [(ins[a] - 1) * stride[a] - 2 * padding[a] + dilation[a] * (ks[a] - 1) +
            output_padding[a] + 1 for a in range(3)]
    full = [(ins[a] - 1) * stride[a] + dilation[a] * (ks[a] - 1) + 1 + output_padding[a]
            for a in range(3)]
    y = np.zeros((n, cog * groups, *full))
    mag = np.zeros_like(y)
    for g in range(groups):
        xg = x[:, g * cig:(g + 1) * cig]
        wg = w[g * cig:(g + 1) * cig]
        for kd in range(ks[0]):
            for kh in range(ks[1]):
                for kw in range(ks[2]):
                    c = np.einsum("ncdhw,co->nodhw", xg, wg[:, :, kd, kh, kw])
                    a = np.einsum("ncdhw,co->nodhw", np.abs(xg), np.abs(wg[:, :, kd, kh, kw]))
                    sl = tuple(slice(k * dl, k * dl + (i - 1) * s + 1, s) for k, dl, i, s in
                               zip((kd, kh, kw), dilation, ins, stride))
                    y[(slice(None), slice(g * cog, (g + 1) * cog)) + sl] += c
                    mag[(slice(None), slice(g * cog, (g + 1) * cog)) + sl] += a
    crop = (slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, outs))
    return y[crop], mag[crop]


CASES = [  # x shape, w shape, stride, padding, output_padding, groups, dilation
    ((1, 4, 5, 5, 5), (4, 8, 3, 3, 3), (1, 1, 1), (0, 0, 0), (0, 0, 0), 1, (1, 1, 1)),
    ((2, 16, 4, 5, 4), (16, 6, 3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), 1, (1, 1, 1)),
    ((1, 3, 4, 4, 4), (3, 3, 3, 3, 3), (2, 2, 2), (2, 2, 2), (1, 1, 1), 1, (1, 1, 1)),
    ((2, 2, 4, 4, 4), (2, 2, 4, 5, 6), (3, 2, 1), (1, 2, 3), (2, 3, 1), 2, (4, 4, 4)),
    ((2, 8, 5, 6, 7), (8, 4, 5, 3, 3), (2, 2, 2), (1, 1, 1), (0, 1, 0), 1, (1, 1, 1)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_float32_within_one_rounding(device, case):
    xs, ws, s, p, op, g, d = CASES[case]
    rng = np.random.default_rng(76 + case)
    x = (rng.standard_normal(xs) * 10).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1] * g).astype(np.float32)
    ref, mag = ref_conv_transpose3d(x.astype(np.float64), w.astype(np.float64), s, p, op, g, d)
    bias = b.astype(np.float64)[None, :, None, None, None]
    y = F.conv_transpose3d(tessera.from_numpy(x).to(device), tessera.from_numpy(w).to(device),
                           tessera.from_numpy(b).to(device), stride=s, padding=p,
                           output_padding=op, groups=g, dilation=d)
    assert y.dtype == tessera.float32 and tuple(y.shape) == ref.shape
    got = y.to("cpu").numpy().astype(np.float64)
    # the convolution rounded once to float32 (<= u |conv|), then the bias added in float32
    # (<= u |conv + bias|), after float64 sums of at most 10^3 terms
    bound = U32 * (np.abs(ref) + np.abs(ref + bias)) + 1e3 * 2.0 ** -53 * (mag + np.abs(bias))
    err = np.abs(got - (ref + bias))
    assert (err <= bound).all(), float((err / bound).max())


def test_float32_gradients_follow(device):
    """the float64 detour is differentiable: x's and w's gradients are float32 and match the
    float64 op's within float32's rounding"""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    g = rng.standard_normal((1, 3, 4, 7, 4))
    grads = {}
    for dt in (tessera.float32, tessera.float64):
        tx = tessera.from_numpy(x).to(device).to(dt).requires_grad_(True)
        tw = tessera.from_numpy(w).to(device).to(dt).requires_grad_(True)
        y = F.conv_transpose3d(tx, tw, stride=(1, 2, 1), padding=(0, 1, 0))
        assert y.dtype == dt and tuple(y.shape) == g.shape
        (y * tessera.from_numpy(g).to(device).to(dt)).sum().backward()
        assert tx.grad.dtype == dt and tw.grad.dtype == dt
        grads[dt] = [t.grad.to("cpu").numpy().astype(np.float64) for t in (tx, tw)]
    for a, r in zip(grads[tessera.float32], grads[tessera.float64]):
        assert np.allclose(a, r, rtol=4 * U32, atol=1e-5)
