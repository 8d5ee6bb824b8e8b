"""conv2d on inputs so small that some kernel taps only ever meet the padding (src/nn/conv.c's
crop_dim: a ResNet's 3x3 convolutions at 1x1 and 2x2 after downsampling 28x28 images, the corpus's
siamese_network): those taps are cut off (and a kernel that then covers the whole input runs as a
matrix product), so the result, the input's and bias's gradients and the
weight's gradient (exactly zero on the cut taps) must equal a float64 NumPy convolution, on cpu and
sim:0; also the shapes where every tap is used, groups, dilation, unbatched and 1 x W inputs, and
the second derivative."""
import numpy as np
import pytest

import tessera as torch
import tessera.nn.functional as F


def t(a, device="cpu", grad=False, dtype=np.float64):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).clone().to(device)
    if grad:
        x.requires_grad_(True)
    return x


def host(x):
    return x.detach().to("cpu").double().numpy()


def windows(x, kh, kw, s, p, d):
    """xp[n, c, i s + a d, j s + b d] as [N, C, kh, kw, OH, OW] over the zero-padded input"""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, kh, kw, oh, ow))
    for a in range(kh):
        for b in range(kw):
            out[:, :, a, b] = xp[:, :, a * d[0]:a * d[0] + s[0] * (oh - 1) + 1:s[0],
                                 b * d[1]:b * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return out, xp.shape


def ref_conv(x, w, b, s, p, d, groups):
    """output, and the gradients for an upstream r: (fn(r) -> gx, gw, gb)"""
    win, pshape = windows(x, w.shape[2], w.shape[3], s, p, d)
    o, cg = w.shape[0], w.shape[1]
    og = o // groups
    y = np.concatenate([np.einsum("nckhij,ockh->noij", win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og])
                        for g in range(groups)], axis=1) + b[None, :, None, None]

    def grads(r):
        gw = np.concatenate([np.einsum("noij,nckhij->ockh", r[:, g * og:(g + 1) * og], win[:, g * cg:(g + 1) * cg])
                             for g in range(groups)], axis=0)
        gwin = np.concatenate([np.einsum("noij,ockh->nckhij", r[:, g * og:(g + 1) * og], w[g * og:(g + 1) * og])
                               for g in range(groups)], axis=1)
        gxp = np.zeros(pshape)
        oh, ow = r.shape[2], r.shape[3]
        for a in range(w.shape[2]):
            for bb in range(w.shape[3]):
                gxp[:, :, a * d[0]:a * d[0] + s[0] * (oh - 1) + 1:s[0],
                    bb * d[1]:bb * d[1] + s[1] * (ow - 1) + 1:s[1]] += gwin[:, :, a, bb]
        gx = gxp[:, :, p[0]:p[0] + x.shape[2], p[1]:p[1] + x.shape[3]]
        return gx, gw, r.sum(axis=(0, 2, 3))

    return y, grads


# (input N C H W, weight O Cg kh kw, stride, padding, dilation, groups, the taps that meet the input)
CASES = {
    "3x3_on_1x1": ((4, 6, 1, 1), (5, 6, 3, 3), (1, 1), (1, 1), (1, 1), 1, (slice(1, 2), slice(1, 2))),
    "3x3_s2_on_2x2": ((3, 4, 2, 2), (6, 4, 3, 3), (2, 2), (1, 1), (1, 1), 1, (slice(1, 3), slice(1, 3))),
    "7x7_p3_on_2x2": ((2, 3, 2, 2), (4, 3, 7, 7), (1, 1), (3, 3), (1, 1), 1, (slice(2, 5), slice(2, 5))),
    "3x3_on_1xW": ((2, 4, 1, 5), (3, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1, (slice(1, 2), slice(0, 3))),
    "dilated_on_2x2": ((2, 4, 2, 2), (3, 4, 3, 3), (1, 1), (2, 2), (2, 2), 1, (slice(1, 2), slice(1, 2))),
    "groups_on_1x1": ((3, 4, 1, 1), (6, 2, 3, 3), (1, 1), (1, 1), (1, 1), 2, (slice(1, 2), slice(1, 2))),
    "stride3_5x5_on_3x3": ((2, 2, 3, 3), (3, 2, 5, 5), (3, 3), (2, 2), (1, 1), 1, (slice(2, 5), slice(2, 5))),
    "whole_2x2_on_2x2": ((3, 4, 2, 2), (5, 4, 2, 2), (1, 1), (0, 0), (1, 1), 1, (slice(0, 2), slice(0, 2))),
    "whole_1x1_on_1x1": ((3, 4, 1, 1), (5, 4, 1, 1), (2, 2), (0, 0), (1, 1), 1, (slice(0, 1), slice(0, 1))),
    "all_taps_3x3_on_2x2": ((2, 3, 2, 2), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, (slice(0, 3), slice(0, 3))),
    "all_taps_3x3_s2_on_4x4": ((2, 3, 4, 4), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1), 1, (slice(0, 3), slice(0, 3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_float64(name, device):
    xs, ws, s, p, d, groups, used = CASES[name]
    rng = np.random.default_rng(len(name))
    xv, wv, bv = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    x, w, b = t(xv, device, True), t(wv, device, True), t(bv, device, True)
    y = F.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=groups)
    want, grads = ref_conv(xv, wv, bv, s, p, d, groups)
    assert tuple(y.shape) == want.shape
    np.testing.assert_allclose(host(y), want, rtol=1e-12, atol=1e-12)
    r = rng.standard_normal(want.shape)
    y.backward(t(r, device))
    gx, gw, gb = grads(r)
    np.testing.assert_allclose(host(x.grad), gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host(w.grad), gw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host(b.grad), gb, rtol=1e-12, atol=1e-12)
    mask = np.ones(ws, dtype=bool)
    mask[:, :, used[0], used[1]] = False
    assert (host(w.grad)[mask] == 0).all()  # the cut taps meet only zeros


def test_float32_and_unbatched(device):
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((8, 1, 1)), rng.standard_normal((4, 8, 3, 3))
    y = F.conv2d(t(xv, device, dtype=np.float32), t(wv, device, dtype=np.float32), padding=1)
    want = np.einsum("c,oc->o", xv[:, 0, 0], wv[:, :, 1, 1])[:, None, None]
    assert tuple(y.shape) == (4, 1, 1)
    # 8 products and sums in float32: each term within 8 * 2^-24 of the float64 sum of magnitudes
    bound = 8 * 2.0**-24 * np.abs(xv[:, 0, 0] * wv[:, :, 1, 1]).sum(axis=1)[:, None, None]
    assert (np.abs(host(y) - want) <= bound).all()


def test_second_derivative(device):
    """d/dw of sum(dL/dx * q) with L = sum(conv(x, w) * r): linear in w, so central differences
    are exact up to rounding"""
    xs, ws = (2, 3, 1, 1), (4, 3, 3, 3)
    rng = np.random.default_rng(7)
    xv, wv, r, q = (rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal((2, 4, 1, 1)),
                    rng.standard_normal(xs))

    def inner(wa, create):
        x, w = t(xv, device, True), t(wa, device, True)
        (gx,) = torch.autograd.grad((F.conv2d(x, w, padding=1) * t(r, device)).sum(), (x,), create_graph=create)
        return gx, w

    gx, w = inner(wv, True)
    (gw,) = torch.autograd.grad((gx * t(q, device)).sum(), (w,))
    num = np.zeros(ws)
    for i in range(wv.size):
        wp, wm = wv.copy(), wv.copy()
        wp.flat[i] += 0.5
        wm.flat[i] -= 0.5
        num.flat[i] = (host(inner(wp, False)[0]) * q).sum() - (host(inner(wm, False)[0]) * q).sum()
    np.testing.assert_allclose(host(gw), num, rtol=1e-10, atol=1e-10)


def test_errors_name_the_callers_shapes():
    with pytest.raises(Exception, match=r"conv2d.*\[5, 7, 3, 3\]"):
        F.conv2d(t(np.zeros((2, 6, 1, 1))), t(np.zeros((5, 7, 3, 3))), padding=1)
