"""tessera.vision.ops' box and region ops (issue 75: C functions in include/tessera/vision_ops.h,
bound by python/src/vision_ops.c) against torchvision 0.x's results for fixed inputs, written out
by tools/gen_golden_vision_ops.py into tests/golden/vision_ops.json: nms and batched_nms (exact
indices; ties in score in the boxes' order; an IoU exactly at the threshold is kept), the box ops
and their gradients, roi_align (four settings) and roi_pool with their input gradients, the list
form, MultiScaleRoIAlign over two levels, FeaturePyramidNetwork with LastLevelMaxPool; on cpu and
sim:0; then the errors.

Tolerances: the ops run torchvision's float32 arithmetic in its order, so they differ from it at
most by a few roundings: 8 eps32 relative for the box ops (ciou's atan: of libm's, a few ulps),
16 eps32 max|input| for roi_align's sums (a reordered sum of at most 4 samples x grid terms each
of magnitude <= max|input|), 64 eps32 max|gradient| for the gradients (sums over rois and
samples); the FPN's convolutions sum at most 27 products in an order of their own: 1e-5
relative to the largest value."""
import json
import os
from collections import OrderedDict

import pytest

import tessera as torch
from tessera.vision import ops

EPS32 = 2.0**-24
GOLD = json.load(open(os.path.join(os.path.dirname(__file__), "..", "golden", "vision_ops.json")))


def T(key_or_list, shape=None, dtype=torch.float32, device="cpu"):
    v = GOLD[key_or_list] if isinstance(key_or_list, str) else key_or_list
    t = torch.tensor(v, dtype=dtype)
    return (t.reshape(shape) if shape else t).to(device)


def vals(t):
    return t.detach().to("cpu").double().reshape(-1).tolist()


def near(got, key, tol):
    ref = GOLD[key] if isinstance(key, str) else key
    g = vals(got)
    assert len(g) == len(ref), (key, len(g), len(ref))
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(g, ref)) if not abs(a - b) <= tol * (1 + abs(b))]
    assert not bad, (key, bad[:5])


def near_abs(got, key, tol):
    ref = GOLD[key]
    g = vals(got)
    assert len(g) == len(ref)
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(g, ref)) if not abs(a - b) <= tol]
    assert not bad, (key, bad[:5])


def idx(t):
    assert t.dtype == torch.int64
    return t.to("cpu").tolist()


@pytest.mark.parametrize("thr", [0.2, 0.45, 0.7])
def test_nms(device, thr):
    b = T("nms_boxes", (60, 4), device=device)
    s = T("nms_scores", device=device)
    i = T("nms_idxs", dtype=torch.int64, device=device)
    assert idx(ops.nms(b, s, thr)) == GOLD["nms_%g" % thr]
    assert idx(ops.batched_nms(b, s, i, thr)) == GOLD["batched_nms_%g" % thr]


def test_nms_f64_exact_threshold_empty(device):
    b = T("nms_boxes", (60, 4), torch.float64, device)
    assert idx(ops.nms(b, T("nms_scores", dtype=torch.float64, device=device), 0.45)) == \
        GOLD["nms_f64_0.45"]
    e = torch.tensor([[0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 4.0, 2.0]], device=device)
    sc = torch.tensor([0.9, 0.8], device=device)
    assert idx(ops.nms(e, sc, 0.5)) == GOLD["nms_exact_0.5"] == [0, 1]
    assert idx(ops.nms(e, sc, 0.4999)) == GOLD["nms_exact_0.4999"]
    k = ops.nms(torch.zeros(0, 4, device=device), torch.zeros(0, device=device), 0.5)
    assert k.shape == (0,) and k.dtype == torch.int64


@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
def test_box_formats(device, fmt):
    b1, b2 = T("b1", (6, 4), device=device), T("b2", (5, 4), device=device)
    c1 = ops.box_convert(b1, "xyxy", fmt)
    c2 = ops.box_convert(b2, "xyxy", fmt)
    near(c1, "convert_" + fmt, 8 * EPS32)
    near(ops.box_area(c1, fmt=fmt), "area_" + fmt, 8 * EPS32)
    near(ops.box_iou(c1, c2, fmt=fmt), "iou_" + fmt, 8 * EPS32)
    for g in ("xyxy", "xywh", "cxcywh"):
        near(ops.box_convert(c1, fmt, g), "convert_%s_%s" % (fmt, g), 8 * EPS32)


@pytest.mark.parametrize("name", ["giou", "diou", "ciou"])
def test_box_iou_variants_and_gradients(device, name):
    fn = {"giou": ops.generalized_box_iou, "diou": ops.distance_box_iou,
          "ciou": ops.complete_box_iou}[name]
    x1 = T("b1", (6, 4), device=device).requires_grad_()
    r = fn(x1, T("b2", (5, 4), device=device))
    r.sum().backward()
    near(r, name, 8 * EPS32)
    near(x1.grad, name + "_grad", 32 * EPS32)


def test_box_misc(device):
    b1, b2 = T("b1", (6, 4), device=device), T("b2", (5, 4), device=device)
    near(ops.box_iou(b1.double(), b2.double()), "iou_f64", 1e-15)
    r = ops.box_iou(b1.round().to(torch.int64), b2.round().to(torch.int64))
    assert r.dtype == torch.float32
    near(r, "iou_int", 8 * EPS32)
    big = torch.tensor([[-3.0, 2.5, 50.0, 7.0], [4.0, -1.0, 9.0, 80.0]], device=device)
    near(ops.clip_boxes_to_image(big, (30, 40)), "clip", 0)
    assert idx(ops.remove_small_boxes(b1, 6.0)) == GOLD["small_6"]


ROI_SETTINGS = {"a": dict(spatial_scale=0.5, sampling_ratio=2, aligned=False),
                "b": dict(spatial_scale=0.5, sampling_ratio=-1, aligned=True),
                "c": dict(spatial_scale=0.25, sampling_ratio=1, aligned=True),
                "d": dict(spatial_scale=0.5, sampling_ratio=0, aligned=False)}


def roi_inputs(device):
    x = T("roi_x", (2, 3, 10, 12), device=device)
    rois = T("roi_rois", (6, 5), device=device)
    wts = torch.tensor([__import__("math").cos(0.23 * i) for i in range(216)]).reshape(6, 3, 3, 4)
    return x, rois, wts.to(device)


@pytest.mark.parametrize("setting", sorted(ROI_SETTINGS))
def test_roi_align(device, setting):
    x, rois, wts = roi_inputs(device)
    xx = x.clone().requires_grad_()
    y = ops.roi_align(xx, rois, (3, 4), **ROI_SETTINGS[setting])
    assert y.shape == (6, 3, 3, 4)
    maxv = max(abs(v) for v in GOLD["roi_x"])
    near_abs(y, "roi_align_" + setting, 16 * EPS32 * maxv)
    (y * wts).sum().backward()
    maxg = max(abs(v) for v in GOLD["roi_align_%s_grad" % setting])
    near_abs(xx.grad, "roi_align_%s_grad" % setting, 64 * EPS32 * maxg)
    # the module form
    m = ops.RoIAlign((3, 4), **ROI_SETTINGS[setting])
    near_abs(m(x, rois), "roi_align_" + setting, 16 * EPS32 * maxv)


def test_roi_pool_and_list_form(device):
    x, rois, wts = roi_inputs(device)
    xx = x.clone().requires_grad_()
    y = ops.roi_pool(xx, rois, (3, 4), spatial_scale=0.5)
    near(y, "roi_pool", 0)
    (y * wts).sum().backward()
    maxg = max(abs(v) for v in GOLD["roi_pool_grad"])
    near_abs(xx.grad, "roi_pool_grad", 8 * EPS32 * maxg)
    near(ops.RoIPool(3, 0.5)(x, rois)[:, :, :, :3], vals(ops.roi_pool(x, rois, 3, 0.5)), 0)
    lists = [rois[rois[:, 0] == 0][:, 1:], rois[rois[:, 0] == 1][:, 1:]]
    maxv = max(abs(v) for v in GOLD["roi_x"])
    near_abs(ops.roi_align(x, lists, 2, 0.5, 2, True), "roi_align_list", 16 * EPS32 * maxv)


def test_multiscale_roi_align(device):
    f1 = T("msra_f1", (2, 2, 16, 16), device=device)
    f2 = T("msra_f2", (2, 2, 8, 8), device=device)
    boxes = [T("msra_boxes0", (2, 4), device=device), T("msra_boxes1", (3, 4), device=device)]
    m = ops.MultiScaleRoIAlign(["p2", "p3"], 3, 2, canonical_scale=32, canonical_level=3)
    f1g = f1.clone().requires_grad_()
    r = m(OrderedDict(p2=f1g, p3=f2, skip=f2), boxes, [(64, 64), (60, 62)])
    assert r.shape == (5, 2, 3, 3)
    near_abs(r, "msra", 16 * EPS32)
    r.sum().backward()
    assert f1g.grad is not None and float(f1g.grad.abs().sum()) > 0
    assert "MultiScaleRoIAlign(featmap_names=['p2', 'p3']" in repr(m)


def test_feature_pyramid_network(device):
    from tessera.vision.ops.feature_pyramid_network import LastLevelMaxPool
    fpn = ops.FeaturePyramidNetwork([2, 3], 2, extra_blocks=LastLevelMaxPool())
    sd = fpn.state_dict()
    assert list(sd.keys()) == GOLD["fpn_names"]
    import math
    new = OrderedDict()
    for k, (name, p) in enumerate(sd.items()):
        v = [math.sin(0.3 * j + k) * 0.5 for j in range(p.numel())]
        new[name] = torch.tensor(v, dtype=torch.float32).reshape(tuple(p.shape))
    fpn.load_state_dict(new)
    fpn.to(device)
    res = fpn(OrderedDict(c1=T("fpn_in1", (1, 2, 6, 6), device=device),
                          c2=T("fpn_in2", (1, 3, 3, 3), device=device)))
    assert list(res.keys()) == GOLD["fpn_keys"]
    for k, v in res.items():
        assert list(v.shape) == GOLD["fpn_shape_" + k]
        big = max(abs(e) for e in GOLD["fpn_" + k])
        near_abs(v, "fpn_" + k, 1e-5 * (1 + big))


def test_errors():
    b = torch.zeros(3, 4)
    s = torch.zeros(3)
    with pytest.raises(torch.TesseraError, match="nms: boxes must have shape"):
        ops.nms(torch.zeros(3, 5), s, 0.5)
    with pytest.raises(torch.TesseraError, match="scores must have shape"):
        ops.nms(b, torch.zeros(4), 0.5)
    with pytest.raises(torch.TesseraError, match="same device"):
        ops.nms(b, s.to("sim:0"), 0.5)
    with pytest.raises(torch.TesseraError, match="idxs must be an integer"):
        ops.batched_nms(b, s, torch.zeros(3), 0.5)
    x = torch.zeros(2, 3, 8, 8)
    with pytest.raises(torch.TesseraError, match="rois must have shape"):
        ops.roi_align(x, torch.zeros(4, 4), 2)
    with pytest.raises(ValueError, match="List\\[Tensor\\[L, 4\\]\\]"):
        ops.roi_align(x, [torch.zeros(2, 5)], 2)
    with pytest.raises(torch.TesseraError, match="output_size must be positive"):
        ops.roi_align(x, torch.zeros(1, 5), (-1, 2))
    with pytest.raises(torch.TesseraError, match="batch index"):
        ops.roi_pool(x, torch.tensor([[5.0, 0, 0, 1, 1]]), 2)
    with pytest.raises(torch.TesseraError, match="same device"):
        ops.roi_align(x, torch.zeros(1, 5).to("sim:0"), 2)
    with pytest.raises(ValueError, match="unsupported format"):
        ops.box_iou(b, b, fmt="xywhr")
    with pytest.raises(torch.TesseraError, match="boxes1 must have shape"):
        ops.box_iou(torch.zeros(3, 5), b)
