"""gen_golden_vision_ops.py — tests/golden/vision_ops.json: torchvision.ops' results for fixed
inputs (nms, batched_nms, the box ops, roi_align and roi_pool with their input gradients,
MultiScaleRoIAlign, FeaturePyramidNetwork), which tests/python/test_vision_ops.py compares
tessera.vision.ops with. Run with a Python that has torch and torchvision:

    /opt/torch2/bin/torch-python tools/gen_golden_vision_ops.py tests/golden/vision_ops.json
"""
import json
import math
import sys
from collections import OrderedDict

import torch
import torchvision
from torchvision import ops


def lst(t):
    return t.detach().double().flatten().tolist() if t.is_floating_point() else t.flatten().tolist()


def boxes_of(n, seed, span=40.0, size=12.0):
    v = []
    for i in range(n):
        x = (math.sin(0.9 * i + seed) + 1) * span / 2
        y = (math.cos(1.3 * i + 2 * seed) + 1) * span / 2
        w = 1 + (math.sin(2.1 * i + seed) + 1) * size / 2
        h = 1 + (math.cos(0.7 * i + seed) + 1) * size / 2
        v.append([x, y, x + w, y + h])
    return torch.tensor(v, dtype=torch.float32)


def main(path):
    out = OrderedDict(torchvision=torchvision.__version__)
    # nms / batched_nms: scores with ties (every fourth repeats the one before)
    b = boxes_of(60, 0.3)
    s = torch.tensor([0.5 if i % 4 == 3 else (math.sin(3.7 * i) + 1) / 2 for i in range(60)],
                     dtype=torch.float32)
    s[3::4] = s[2::4]
    idxs = torch.tensor([(i * 7) % 3 for i in range(60)])
    out["nms_boxes"], out["nms_scores"], out["nms_idxs"] = lst(b), lst(s), lst(idxs)
    for thr in (0.2, 0.45, 0.7):
        out["nms_%g" % thr] = lst(ops.nms(b, s, thr))
        out["batched_nms_%g" % thr] = lst(ops.batched_nms(b, s, idxs, thr))
    out["nms_f64_0.45"] = lst(ops.nms(b.double(), s.double(), 0.45))
    # IoU exactly 0.5 at thresholds 0.5 and just below
    e = torch.tensor([[0.0, 0.0, 4.0, 4.0], [0.0, 0.0, 4.0, 2.0]])
    out["nms_exact_0.5"] = lst(ops.nms(e, torch.tensor([0.9, 0.8]), 0.5))
    out["nms_exact_0.4999"] = lst(ops.nms(e, torch.tensor([0.9, 0.8]), 0.4999))
    # box ops
    b1, b2 = boxes_of(6, 1.1), boxes_of(5, 2.7)
    b2[1] = torch.tensor([100.0, 100.0, 104.0, 103.0])  # no overlap with anything
    out["b1"], out["b2"] = lst(b1), lst(b2)
    for fmt in ("xyxy", "xywh", "cxcywh"):
        c1 = ops.box_convert(b1, "xyxy", fmt)
        c2 = ops.box_convert(b2, "xyxy", fmt)
        out["convert_" + fmt] = lst(c1)
        out["area_" + fmt] = lst(ops.box_area(c1, fmt=fmt))
        out["iou_" + fmt] = lst(ops.box_iou(c1, c2, fmt=fmt))
        for g in ("xyxy", "xywh", "cxcywh"):
            out["convert_%s_%s" % (fmt, g)] = lst(ops.box_convert(c1, fmt, g))
    x1 = b1.clone().requires_grad_()
    for name, fn in (("giou", ops.generalized_box_iou), ("diou", ops.distance_box_iou),
                     ("ciou", ops.complete_box_iou)):
        x1.grad = None
        r = fn(x1, b2)
        r.sum().backward()
        out[name], out[name + "_grad"] = lst(r), lst(x1.grad)
    out["iou_f64"] = lst(ops.box_iou(b1.double(), b2.double()))
    out["iou_int"] = lst(ops.box_iou(b1.round().to(torch.int64), b2.round().to(torch.int64)))
    big = torch.tensor([[-3.0, 2.5, 50.0, 7.0], [4.0, -1.0, 9.0, 80.0]])
    out["clip"] = lst(ops.clip_boxes_to_image(big, (30, 40)))
    out["small_6"] = lst(ops.remove_small_boxes(b1, 6.0))
    # roi_align / roi_pool: input [2, 3, 10, 12], rois in and around the image
    x = torch.tensor([math.sin(0.37 * i) * 2 + math.cos(0.11 * i)
                      for i in range(2 * 3 * 10 * 12)], dtype=torch.float32).reshape(2, 3, 10, 12)
    rois = torch.tensor([[0, 1.5, 2.0, 14.0, 12.5], [1, -3.0, -2.0, 6.0, 5.0],
                         [1, 10.0, 8.0, 30.0, 25.0], [0, 4.2, 4.2, 4.4, 4.3],
                         [1, 0.0, 0.0, 23.9, 19.9], [0, 20.0, 3.0, 22.0, 40.0]],
                        dtype=torch.float32)
    out["roi_x"], out["roi_rois"] = lst(x), lst(rois)
    wts = torch.tensor([math.cos(0.23 * i) for i in range(6 * 3 * 3 * 4)]).reshape(6, 3, 3, 4)
    for name, kw in (("a", dict(spatial_scale=0.5, sampling_ratio=2, aligned=False)),
                     ("b", dict(spatial_scale=0.5, sampling_ratio=-1, aligned=True)),
                     ("c", dict(spatial_scale=0.25, sampling_ratio=1, aligned=True)),
                     ("d", dict(spatial_scale=0.5, sampling_ratio=0, aligned=False))):
        xx = x.clone().requires_grad_()
        y = ops.roi_align(xx, rois, (3, 4), **kw)
        (y * wts).sum().backward()
        out["roi_align_" + name], out["roi_align_%s_grad" % name] = lst(y), lst(xx.grad)
    xx = x.clone().requires_grad_()
    y = ops.roi_pool(xx, rois, (3, 4), spatial_scale=0.5)
    (y * wts).sum().backward()
    out["roi_pool"], out["roi_pool_grad"] = lst(y), lst(xx.grad)
    # the list form: the same rois as two per-image lists
    lists = [rois[rois[:, 0] == 0, 1:], rois[rois[:, 0] == 1, 1:]]
    out["roi_align_list"] = lst(ops.roi_align(x, lists, 2, 0.5, 2, True))
    # MultiScaleRoIAlign over two levels (scales 1/4 and 1/8 of a 64 x 64 image)
    f1 = torch.tensor([math.sin(0.05 * i) for i in range(2 * 2 * 16 * 16)]).reshape(2, 2, 16, 16)
    f2 = torch.tensor([math.cos(0.07 * i) for i in range(2 * 2 * 8 * 8)]).reshape(2, 2, 8, 8)
    bl = [torch.tensor([[1.0, 2.0, 60.0, 50.0], [3.0, 3.0, 9.0, 12.0]]),
          torch.tensor([[10.0, 10.0, 40.0, 63.0], [0.0, 0.0, 5.0, 5.0], [20.0, 5.0, 62.0, 60.0]])]
    m = ops.MultiScaleRoIAlign(["p2", "p3"], 3, 2, canonical_scale=32, canonical_level=3)
    r = m(OrderedDict(p2=f1.float(), p3=f2.float(), skip=f2.float()), [t.float() for t in bl],
          [(64, 64), (60, 62)])
    out["msra_f1"], out["msra_f2"] = lst(f1.float()), lst(f2.float())
    out["msra_boxes0"], out["msra_boxes1"] = lst(bl[0]), lst(bl[1])
    out["msra"] = lst(r)
    # FeaturePyramidNetwork with weights set by formula, and LastLevelMaxPool
    fpn = ops.FeaturePyramidNetwork([2, 3], 2, extra_blocks=ops.feature_pyramid_network.LastLevelMaxPool())
    sd = OrderedDict()
    for k, (name, p) in enumerate(fpn.state_dict().items()):
        v = torch.tensor([math.sin(0.3 * j + k) * 0.5 for j in range(p.numel())]).reshape(p.shape)
        sd[name] = v.float()
    fpn.load_state_dict(sd)
    out["fpn_names"] = list(sd.keys())
    c1 = torch.tensor([math.sin(0.2 * i) for i in range(1 * 2 * 6 * 6)]).reshape(1, 2, 6, 6).float()
    c2 = torch.tensor([math.cos(0.3 * i) for i in range(1 * 3 * 3 * 3)]).reshape(1, 3, 3, 3).float()
    res = fpn(OrderedDict(c1=c1, c2=c2))
    out["fpn_in1"], out["fpn_in2"] = lst(c1), lst(c2)
    out["fpn_keys"] = list(res.keys())
    for k, v in res.items():
        out["fpn_" + k] = lst(v)
        out["fpn_shape_" + k] = list(v.shape)
    with open(path, "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/golden/vision_ops.json")
