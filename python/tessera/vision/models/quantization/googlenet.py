"""torchvision.models.quantization.googlenet: GoogLeNet with QuantStub / DeQuantStub, ReLU modules
in its conv blocks (fused with conv + bn), FloatFunctional cats and fuse_model (torchvision's
module and state-dict names)."""
import tessera as ts
from tessera import nn
from tessera.ao import quantization as tq
from tessera.ao.nn.quantized import FloatFunctional
from tessera.nn import functional as F

from ..googlenet import BasicConv2d, GoogLeNet, GoogLeNetOutputs, Inception, InceptionAux
from .utils import _build, _fuse_blocks, _ReLUConvBlock

__all__ = ["QuantizableGoogLeNet", "googlenet"]


class QuantizableBasicConv2d(_ReLUConvBlock, BasicConv2d):
    pass


class QuantizableInception(Inception):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.cat = FloatFunctional()

    def _cat(self, xs):
        return self.cat.cat(xs, 1)


class QuantizableInceptionAux(InceptionAux):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = ts.flatten(self.conv(F.adaptive_avg_pool2d(x, (4, 4))), 1)
        return self.fc2(self.dropout(self.relu(self.fc1(x))))


class QuantizableGoogLeNet(GoogLeNet):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, blocks=[QuantizableBasicConv2d, QuantizableInception,
                                        QuantizableInceptionAux], **kwargs)
        self.quant = tq.QuantStub()
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        """GoogLeNet's forward between the stubs (the input transform before QuantStub); the
        auxiliary heads' outputs (training only) are not dequantized, and come as torchvision
        0.29's quantizable GoogLeNet gives them: swapped against the float network's,
        GoogLeNetOutputs(logits, aux1's, aux2's)"""
        x, aux2, aux1 = self._forward(self.quant(self._transform_input(x)))
        x = self.dequant(x)
        if self.training and self.aux_logits:
            return GoogLeNetOutputs(x, aux1, aux2)
        return x

    def fuse_model(self, is_qat=None):
        """conv + bn + relu of every conv block fused in place (numerics unchanged, still float)"""
        _fuse_blocks(self, QuantizableBasicConv2d, is_qat)


def googlenet(*, weights=None, progress=True, quantize=False, **kwargs):
    return _build("quantized_googlenet", QuantizableGoogLeNet, (), weights, quantize, kwargs)
