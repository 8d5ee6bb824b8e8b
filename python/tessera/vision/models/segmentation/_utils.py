"""the shared pieces of the segmentation models: _SimpleSegmentationModel (backbone features ->
classifier (+ aux classifier) -> bilinear upsampling to the input size) and the argument checks
of the builders."""
from collections import OrderedDict

from tessera import nn
from tessera.nn import functional as F

from .._utils import _check_weights


class _SimpleSegmentationModel(nn.Module):
    __constants__ = ["aux_classifier"]

    def __init__(self, backbone, classifier, aux_classifier=None):
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x):
        size = x.shape[-2:]
        features = self.backbone(x)
        result = OrderedDict()
        out = self.classifier(features["out"])
        result["out"] = F.interpolate(out, size=size, mode="bilinear", align_corners=False)
        if self.aux_classifier is not None:
            aux = self.aux_classifier(features["aux"])
            result["aux"] = F.interpolate(aux, size=size, mode="bilinear", align_corners=False)
        return result


def _segmentation_args(arch, weights, weights_backbone, num_classes, kwargs):
    """weights / weights_backbone must be None (no downloads); num_classes defaults to 21 (VOC)"""
    _check_weights(arch, weights, kwargs)
    if weights_backbone is not None:
        raise ValueError(
            "tessera.vision.models.segmentation.%s: weights_backbone=%r is not supported "
            "(tessera downloads nothing); build with weights_backbone=None and load a local "
            "checkpoint: model.load_state_dict(tessera.load(path))" % (arch, weights_backbone))
    if kwargs:
        raise TypeError("tessera.vision.models.segmentation.%s: unexpected arguments %s"
                        % (arch, sorted(kwargs)))
    return 21 if num_classes is None else num_classes
