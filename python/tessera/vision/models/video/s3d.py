"""torchvision.models.video.s3d: S3D (separable 3D Inception) with torchvision's module and
state-dict names. torchvision's avgpool is a fixed (2, 7, 7) window: the clip must have at least
16 frames of 224 x 224 (an error names the shape otherwise)."""
from functools import partial

import tessera as ts
from tessera import nn

from .._utils import _check_weights

__all__ = ["S3D", "s3d"]


class Conv3dNormActivation(nn.Sequential):
    """torchvision.ops.Conv3dNormActivation: Conv3d, norm layer, ReLU"""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None,
                 norm_layer=nn.BatchNorm3d, activation_layer=nn.ReLU, bias=None):
        ks = (kernel_size,) * 3 if isinstance(kernel_size, int) else tuple(kernel_size)
        if padding is None:
            padding = tuple((k - 1) // 2 for k in ks)
        if bias is None:
            bias = norm_layer is None
        layers = [nn.Conv3d(in_channels, out_channels, ks, stride, padding, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_channels


class TemporalSeparableConv(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size, stride, padding, norm_layer):
        super().__init__(
            Conv3dNormActivation(in_planes, out_planes, kernel_size=(1, kernel_size, kernel_size),
                                 stride=(1, stride, stride), padding=(0, padding, padding),
                                 bias=False, norm_layer=norm_layer),
            Conv3dNormActivation(out_planes, out_planes, kernel_size=(kernel_size, 1, 1),
                                 stride=(stride, 1, 1), padding=(padding, 0, 0), bias=False,
                                 norm_layer=norm_layer))


class SepInceptionBlock3D(nn.Module):
    def __init__(self, in_planes, b0_out, b1_mid, b1_out, b2_mid, b2_out, b3_out, norm_layer):
        super().__init__()
        cna = partial(Conv3dNormActivation, kernel_size=1, stride=1, norm_layer=norm_layer)
        self.branch0 = cna(in_planes, b0_out)
        self.branch1 = nn.Sequential(cna(in_planes, b1_mid), TemporalSeparableConv(
            b1_mid, b1_out, kernel_size=3, stride=1, padding=1, norm_layer=norm_layer))
        self.branch2 = nn.Sequential(cna(in_planes, b2_mid), TemporalSeparableConv(
            b2_mid, b2_out, kernel_size=3, stride=1, padding=1, norm_layer=norm_layer))
        self.branch3 = nn.Sequential(nn.MaxPool3d(kernel_size=(3, 3, 3), stride=1, padding=1),
                                     cna(in_planes, b3_out))

    def forward(self, x):
        return ts.cat((self.branch0(x), self.branch1(x), self.branch2(x), self.branch3(x)), 1)


class S3D(nn.Module):
    def __init__(self, num_classes=400, dropout=0.2, norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = partial(nn.BatchNorm3d, eps=0.001, momentum=0.001)
        blk = partial(SepInceptionBlock3D, norm_layer=norm_layer)
        self.features = nn.Sequential(
            TemporalSeparableConv(3, 64, 7, 2, 3, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
            Conv3dNormActivation(64, 64, kernel_size=1, stride=1, norm_layer=norm_layer),
            TemporalSeparableConv(64, 192, 3, 1, 1, norm_layer),
            nn.MaxPool3d(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
            blk(192, 64, 96, 128, 16, 32, 32), blk(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool3d(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1)),
            blk(480, 192, 96, 208, 16, 48, 64), blk(512, 160, 112, 224, 24, 64, 64),
            blk(512, 128, 128, 256, 24, 64, 64), blk(512, 112, 144, 288, 32, 64, 64),
            blk(528, 256, 160, 320, 32, 128, 128),
            nn.MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0)),
            blk(832, 256, 160, 320, 32, 128, 128), blk(832, 384, 192, 384, 48, 128, 128))
        self.avgpool = nn.AvgPool3d(kernel_size=(2, 7, 7), stride=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Conv3d(1024, num_classes, kernel_size=1, stride=1,
                                                  bias=True))

    def forward(self, x):
        x = self.features(x)
        if x.shape[2] < 2 or x.shape[3] < 7 or x.shape[4] < 7:
            raise ValueError("tessera.vision.models.video.S3D: features of shape %s are smaller "
                             "than the (2, 7, 7) avgpool window (the clip needs >= 16 frames of "
                             ">= 224 x 224)" % (tuple(x.shape),))
        x = self.classifier(self.avgpool(x))
        return ts.mean(x, dim=(2, 3, 4))


def s3d(*, weights=None, progress=True, **kwargs):
    _check_weights("s3d", weights, kwargs)
    return S3D(**kwargs)
