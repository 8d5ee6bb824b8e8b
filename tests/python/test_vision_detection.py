"""tessera.vision.models.detection (issue 75): the pieces against float64 numpy references
(AnchorGenerator, BoxCoder, Matcher, GeneralizedRCNNTransform) or stored torchvision values
(RegionProposalNetwork.filter_proposals, a tiny fasterrcnn_mobilenet_v3_large_320_fpn eval;
tests/data/vision_detection_refs.npz from tools/vision_detection_refs.py)."""
import importlib.util
import math
import os

import numpy as np
import pytest

import tessera as ts
from tessera.vision.models import detection
from tessera.vision.models.detection import _utils as det_utils
from tessera.vision.models.detection.anchor_utils import AnchorGenerator
from tessera.vision.models.detection.image_list import ImageList
from tessera.vision.models.detection.rpn import RegionProposalNetwork, RPNHead
from tessera.vision.models.detection.transform import GeneralizedRCNNTransform

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFS = os.path.join(ROOT, "tests", "data", "vision_detection_refs.npz")
_spec = importlib.util.spec_from_file_location(
    "vision_detection_refs", os.path.join(ROOT, "tools", "vision_detection_refs.py"))
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

F32 = 2.0 ** -23


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def test_anchor_generator_matches_formula():
    sizes, ratios = ((16, 32), (64,)), ((0.5, 1.0, 2.0), (1.0, 2.0))
    ag = AnchorGenerator(sizes, ratios)
    assert ag.num_anchors_per_location() == [6, 2]
    images = ImageList(ts.zeros(2, 3, 64, 96), [(60, 90), (64, 96)])
    feats = [ts.zeros(2, 4, 8, 12), ts.zeros(2, 4, 4, 6)]
    got = ag(images, feats)
    assert len(got) == 2
    ref = []
    for (gh, gw), s, r in zip([(8, 12), (4, 6)], sizes, ratios):
        sh, sw = 64 // gh, 96 // gw
        hr = np.sqrt(np.array(r, np.float64))
        ws = ((1 / hr)[:, None] * np.array(s, np.float64)[None]).ravel()
        hs = (hr[:, None] * np.array(s, np.float64)[None]).ravel()
        base = np.round(np.stack([-ws, -hs, ws, hs], 1) / 2)
        ys, xs = np.meshgrid(np.arange(gh) * sh, np.arange(gw) * sw, indexing="ij")
        shifts = np.stack([xs.ravel(), ys.ravel(), xs.ravel(), ys.ravel()], 1)
        ref.append((shifts[:, None, :] + base[None]).reshape(-1, 4))
    ref = np.concatenate(ref)
    for a in got:
        assert tuple(a.shape) == ref.shape
        np.testing.assert_array_equal(_np(a), ref)  # small integers: exact in float32


def _ref_encode(gt, pr, w):
    pw, ph = pr[:, 2] - pr[:, 0], pr[:, 3] - pr[:, 1]
    px, py = pr[:, 0] + 0.5 * pw, pr[:, 1] + 0.5 * ph
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return np.stack([w[0] * (gx - px) / pw, w[1] * (gy - py) / ph, w[2] * np.log(gw / pw),
                     w[3] * np.log(gh / ph)], 1)


def _ref_decode(codes, boxes, w, clip):
    bw, bh = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    cx, cy = boxes[:, 0] + 0.5 * bw, boxes[:, 1] + 0.5 * bh
    dx, dy = codes[:, 0] / w[0], codes[:, 1] / w[1]
    dw, dh = np.minimum(codes[:, 2] / w[2], clip), np.minimum(codes[:, 3] / w[3], clip)
    pcx, pcy = dx * bw + cx, dy * bh + cy
    pw, ph = np.exp(dw) * bw, np.exp(dh) * bh
    return np.stack([pcx - pw / 2, pcy - ph / 2, pcx + pw / 2, pcy + ph / 2], 1)


def _boxes(rs, n):
    xy = rs.uniform(0, 100, (n, 2))
    return np.concatenate([xy, xy + rs.uniform(2, 50, (n, 2))], 1)


def test_box_coder_encode_decode():
    rs = np.random.RandomState(0)
    gt, pr = _boxes(rs, 50), _boxes(rs, 50)
    w = (10.0, 8.0, 5.0, 3.0)  # distinct: a swapped weight shows
    coder = det_utils.BoxCoder(w)
    enc = coder.encode([ts.tensor(gt[:20], dtype=ts.float32), ts.tensor(gt[20:], dtype=ts.float32)],
                       [ts.tensor(pr[:20], dtype=ts.float32), ts.tensor(pr[20:], dtype=ts.float32)])
    assert [tuple(e.shape) for e in enc] == [(20, 4), (30, 4)]
    ref = _ref_encode(gt.astype(np.float32).astype(np.float64),
                      pr.astype(np.float32).astype(np.float64), w)
    got = np.concatenate([_np(e) for e in enc])
    # a few float32 roundings of values up to |ref| ~ 10s (log and divisions: 1 ulp each)
    np.testing.assert_allclose(got, ref, rtol=0, atol=64 * F32 * np.abs(ref).max())
    codes = rs.randn(50, 8) * 2
    codes[0, 2] = 20.0  # beyond bbox_xform_clip
    dec = coder.decode(ts.tensor(codes, dtype=ts.float32), [ts.tensor(pr, dtype=ts.float32)])
    assert tuple(dec.shape) == (50, 2, 4)
    c32 = codes.astype(np.float32).astype(np.float64)
    p32 = pr.astype(np.float32).astype(np.float64)
    ref = np.stack([_ref_decode(c32[:, 4 * k:4 * k + 4], p32, w, math.log(1000.0 / 16))
                    for k in range(2)], 1)
    np.testing.assert_allclose(_np(dec), ref, rtol=0, atol=64 * F32 * np.abs(ref).max())
    # round trip in float64
    back = coder.decode_single(coder.encode_single(ts.tensor(gt, dtype=ts.float64),
                                                   ts.tensor(pr, dtype=ts.float64)),
                               ts.tensor(pr, dtype=ts.float64))
    np.testing.assert_allclose(_np(back), gt, rtol=0, atol=1e-10)


def _ref_match(q, high, low, allow_low):
    """q float32; thresholds compared in q's dtype (as torch does with a Python scalar)"""
    high, low = q.dtype.type(high), q.dtype.type(low)
    best = q.max(0)
    matches = q.argmax(0)
    out = matches.copy()
    out[best < low] = -1
    out[(best >= low) & (best < high)] = -2
    if allow_low:
        for g in range(q.shape[0]):
            for p in np.where(q[g] == q[g].max())[0]:
                out[p] = matches[p]
    return out


@pytest.mark.parametrize("allow_low", [False, True])
def test_matcher(allow_low):
    rs = np.random.RandomState(1)
    q = np.round(rs.rand(5, 40), 2).astype(np.float32)  # ties on purpose
    q[3, :] = np.minimum(q[3, :], 0.2)  # a gt matched only by low-quality matches
    q[:, 0] = [0.3, 0.1, 0.2, 0.0, 0.25]  # best exactly at the low threshold: not below
    q[:, 1] = [0.1, 0.7, 0.2, 0.0, 0.25]  # best exactly at the high threshold: matched
    m = det_utils.Matcher(0.7, 0.3, allow_low_quality_matches=allow_low)
    got = m(ts.tensor(q))
    np.testing.assert_array_equal(got.numpy(), _ref_match(q, 0.7, 0.3, allow_low))
    with pytest.raises(ValueError, match="No ground-truth"):
        m(ts.zeros(0, 4))


def test_transform_resize_batch_postprocess():
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    t = GeneralizedRCNNTransform(100, 130, mean, std).eval()
    rs = np.random.RandomState(2)
    imgs = [rs.rand(3, 50, 80).astype(np.float32), rs.rand(3, 64, 60).astype(np.float32)]
    tgt = [{"boxes": ts.tensor([[5.0, 6.0, 40.0, 45.0]]), "labels": ts.tensor([1])},
           {"boxes": ts.tensor([[1.0, 2.0, 30.0, 60.0]]), "labels": ts.tensor([2])}]
    il, out_t = t([ts.tensor(i) for i in imgs], tgt)
    sizes = []
    for i in imgs:
        h, w = i.shape[1:]
        s = min(100 / min(h, w), 130 / max(h, w))
        sizes.append((int(math.floor(h * s)), int(math.floor(w * s))))
    assert il.image_sizes == sizes
    H = max(s[0] for s in sizes)
    W = max(s[1] for s in sizes)
    assert tuple(il.tensors.shape) == (2, 3, 32 * math.ceil(H / 32), 32 * math.ceil(W / 32))
    got = _np(il.tensors)
    # the padding is zero; the normalized image's mean over the image equals the normalized
    # mean (bilinear resize with scale recompute keeps values inside the input's range)
    for k, (h, w) in enumerate(sizes):
        assert np.all(got[k, :, h:, :] == 0) and np.all(got[k, :, :, w:] == 0)
        lo = ((imgs[k].min(axis=(1, 2)) - mean) / std)[:, None, None]
        hi = ((imgs[k].max(axis=(1, 2)) - mean) / std)[:, None, None]
        assert np.all(got[k, :, :h, :w] >= lo - 1e-5) and np.all(got[k, :, :h, :w] <= hi + 1e-5)
    for k, (h, w) in enumerate(sizes):
        oh, ow = imgs[k].shape[1:]
        ref = np.array(tgt[k]["boxes"].numpy(), np.float64) * [w / ow, h / oh, w / ow, h / oh]
        np.testing.assert_allclose(_np(out_t[k]["boxes"]), ref, rtol=4 * F32)
    # postprocess maps back to the original size
    res = [{"boxes": out_t[k]["boxes"], "labels": ts.tensor([1]), "scores": ts.tensor([0.5])}
           for k in range(2)]
    back = t.postprocess(res, il.image_sizes, [i.shape[1:] for i in imgs])
    for k in range(2):
        np.testing.assert_allclose(_np(back[k]["boxes"]), _np(tgt[k]["boxes"]), rtol=8 * F32)
    # normalize alone, against numpy
    x = rs.rand(3, 4, 5).astype(np.float32)
    ref = (x - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    np.testing.assert_allclose(_np(t.normalize(ts.tensor(x))), ref, rtol=0, atol=8 * F32 * 5)
    # padding to multiples of size_divisible: a multiple stays as it is
    b = t.batch_images([ts.ones(3, 64, 50), ts.ones(3, 40, 96)], size_divisible=32)
    assert tuple(b.shape) == (2, 3, 64, 96)
    with pytest.raises(TypeError, match="floating"):
        t.normalize(ts.zeros(3, 4, 4, dtype=ts.uint8))


def _refs():
    if not os.path.exists(REFS):
        pytest.skip("no %s: run tools/vision_detection_refs.py under the reference PyTorch"
                    % REFS)
    return np.load(REFS)


def test_rpn_filter_proposals_matches_torchvision():
    refs = _refs()
    proposals, objectness, n, shapes = gen.rpn_case()
    rpn = RegionProposalNetwork(AnchorGenerator(), RPNHead(4, 3), 0.7, 0.3, 256, 0.5,
                                dict(training=20, testing=20), dict(training=50, testing=50),
                                0.5, score_thresh=0.2).eval()
    boxes, scores = rpn.filter_proposals(ts.tensor(proposals), ts.tensor(objectness), shapes, n)
    for i in range(2):
        np.testing.assert_allclose(_np(boxes[i]), refs["rpn_boxes%d" % i], rtol=0, atol=0)
        np.testing.assert_allclose(_np(scores[i]), refs["rpn_scores%d" % i], rtol=2 * F32)


def test_fasterrcnn_mobilenet_320_eval_matches_torchvision():
    refs = _refs()
    m = getattr(detection, gen.E2E_NAME)(weights=None, weights_backbone=None, **gen.E2E_KW)
    sd = m.state_dict()
    arrays = gen.det_weights({k: tuple(v.shape) for k, v in sd.items()})
    m.load_state_dict({k: ts.tensor(v) for k, v in arrays.items()}, strict=True)
    m.eval()
    with ts.no_grad():
        r = m([ts.tensor(gen.image())])[0]
    rb, rs_, rl = refs["e2e_boxes"], refs["e2e_scores"], refs["e2e_labels"]
    b, s, lab = _np(r["boxes"]), _np(r["scores"]), r["labels"].numpy()
    assert b.shape == rb.shape
    # float32 through ~60 layers: scores to ~1e-5 relative; boxes in pixels of a 150-wide image
    np.testing.assert_allclose(s, rs_, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(lab, rl)
    np.testing.assert_allclose(b, rb, rtol=0, atol=2e-3)


def test_weights_argument_rejected():
    with pytest.raises(ValueError, match="downloads nothing"):
        detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights="DEFAULT")


def test_focal_and_giou_losses_match_formula():
    from tessera.vision import ops
    rs = np.random.RandomState(4)
    x = rs.randn(6, 5)
    t = (rs.rand(6, 5) > 0.7).astype(np.float64)
    p = 1 / (1 + np.exp(-x))
    ce = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
    p_t = p * t + (1 - p) * (1 - t)
    ref = (0.25 * t + 0.75 * (1 - t)) * ce * (1 - p_t) ** 2
    got = ops.sigmoid_focal_loss(ts.tensor(x), ts.tensor(t), reduction="none")
    np.testing.assert_allclose(_np(got), ref, rtol=1e-12, atol=1e-15)
    assert abs(float(ops.sigmoid_focal_loss(ts.tensor(x), ts.tensor(t), reduction="sum"))
               - ref.sum()) <= 1e-12 * ref.sum()
    b1, b2 = _boxes(rs, 7), _boxes(rs, 7)

    def area(b):
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt, rb = np.maximum(b1[:, :2], b2[:, :2]), np.minimum(b1[:, 2:], b2[:, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), 1)
    union = area(b1) + area(b2) - inter
    enc = np.prod(np.maximum(b1[:, 2:], b2[:, 2:]) - np.minimum(b1[:, :2], b2[:, :2]), 1)
    ref = 1 - (inter / (union + 1e-7) - (enc - union) / (enc + 1e-7))  # torchvision's eps
    got = ops.generalized_box_iou_loss(ts.tensor(b1), ts.tensor(b2))
    np.testing.assert_allclose(_np(got), ref, rtol=1e-12, atol=1e-14)
    with pytest.raises(ts.ShapeError, match="one shape"):
        ops.generalized_box_iou_loss(ts.tensor(b1), ts.tensor(b2[:3]))
