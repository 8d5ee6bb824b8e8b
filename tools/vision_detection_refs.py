"""vision_detection_refs.py — torchvision reference values for
tests/python/test_vision_detection.py (issue 75), written to tests/data/vision_detection_refs.npz. Run with the reference PyTorch:

  /opt/torch2/bin/torch-python tools/vision_detection_refs.py

Holds: RegionProposalNetwork.filter_proposals on fixed random proposals / objectness, and one
tiny end-to-end fasterrcnn_mobilenet_v3_large_320_fpn eval (num_classes=5, min_size=128,
max_size=160, box_score_thresh=0) whose weights are not stored but made by det_weights() below
from the parameter names (numpy, seeded per name): the test builds the same arrays."""
import os
import sys
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "vision_detection_refs.npz")

E2E_NAME = "fasterrcnn_mobilenet_v3_large_320_fpn"
E2E_KW = dict(num_classes=5, min_size=128, max_size=160, box_score_thresh=0.0,
              box_detections_per_img=30)
IMG_SHAPE = (3, 120, 150)


def det_weights(names_shapes):
    """Deterministic float32 weights for a state dict {name: shape}: conv / linear weights
    N(0, 1 / fan_in), biases N(0, 0.1^2), BatchNorm weights 1 + N(0, 0.1^2), running means
    N(0, 0.1^2), running vars 0.5 + U(0, 1); integer buffers (num_batches_tracked) zero. Each
    array from RandomState(crc32(name)), so the order of the dict does not matter."""
    out = {}
    for name, shape in names_shapes.items():
        rs = np.random.RandomState(zlib.crc32(name.encode()))
        shape = tuple(shape)
        if name.endswith("num_batches_tracked"):
            out[name] = np.zeros(shape, np.int64)
        elif name.endswith("running_var"):
            out[name] = (0.5 + rs.rand(*shape)).astype(np.float32)
        elif name.endswith("running_mean") or name.endswith("bias"):
            out[name] = (0.1 * rs.randn(*shape)).astype(np.float32)
        elif len(shape) == 1:
            out[name] = (1.0 + 0.1 * rs.randn(*shape)).astype(np.float32)
        else:
            fan_in = int(np.prod(shape[1:]))
            out[name] = (rs.randn(*shape) / np.sqrt(fan_in)).astype(np.float32)
    return out


def image():
    return np.random.RandomState(7).rand(*IMG_SHAPE).astype(np.float32)


def rpn_case():
    """fixed inputs of filter_proposals: 2 images, 3 levels of 40 / 24 / 12 anchors"""
    rs = np.random.RandomState(11)
    n = [40, 24, 12]
    xy = rs.uniform(-10, 90, (2, sum(n), 2))
    wh = rs.uniform(0.0, 40, (2, sum(n), 2))
    wh[0, :3] = 0.0005  # small boxes the filter removes
    proposals = np.concatenate([xy, xy + wh], -1).astype(np.float32)
    objectness = rs.randn(2 * sum(n)).astype(np.float32)
    # no exact ties: which of two tied boxes topk / nms keep first is implementation-defined
    return proposals, objectness, n, [(80, 90), (70, 100)]


def main():
    import torch
    import torchvision
    from torchvision.models.detection.rpn import RegionProposalNetwork, RPNHead
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    res = {}
    proposals, objectness, n, shapes = rpn_case()
    rpn = RegionProposalNetwork(AnchorGenerator(), RPNHead(4, 3), 0.7, 0.3, 256, 0.5,
                                dict(training=20, testing=20), dict(training=50, testing=50),
                                0.5, score_thresh=0.2).eval()
    boxes, scores = rpn.filter_proposals(torch.from_numpy(proposals),
                                         torch.from_numpy(objectness), shapes, n)
    for i, (b, s) in enumerate(zip(boxes, scores)):
        res["rpn_boxes%d" % i] = b.numpy()
        res["rpn_scores%d" % i] = s.numpy()
    m = getattr(torchvision.models.detection, E2E_NAME)(weights=None, weights_backbone=None,
                                                         **E2E_KW).eval()
    sd = det_weights({k: tuple(v.shape) for k, v in m.state_dict().items()})
    m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    with torch.no_grad():
        img = torch.from_numpy(image())
        il, _ = m.transform([img])
        feats = m.backbone(il.tensors)
        props, _ = m.rpn(il, feats)
        r = m([img])[0]
    res["e2e_proposals"] = props[0].numpy()
    for k, v in r.items():
        res["e2e_" + k] = v.numpy()
    np.savez_compressed(OUT, **res)
    print("wrote %s: %s" % (OUT, {k: v.shape for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
