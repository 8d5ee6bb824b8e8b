"""torchvision.models.quantization.inception: Inception v3 with QuantStub / DeQuantStub, ReLU
modules in its conv blocks (fused with conv + bn), FloatFunctional cats (myop; InceptionE's myop1
... myop3) and fuse_model (torchvision's module and state-dict names)."""
from tessera.ao import quantization as tq
from tessera.ao.nn.quantized import FloatFunctional

from .. import inception as inception_module
from ..inception import InceptionOutputs
from .utils import _build, _fuse_blocks, _ReLUConvBlock

__all__ = ["QuantizableInception3", "inception_v3"]


class QuantizableBasicConv2d(_ReLUConvBlock, inception_module.BasicConv2d):
    pass


class _MyopCat:
    """a block's joins through its FloatFunctional `myop` (first base)"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = FloatFunctional()

    def _cat(self, xs, k=0):
        return self.myop.cat(xs, 1)


class QuantizableInceptionA(_MyopCat, inception_module.InceptionA):
    pass


class QuantizableInceptionB(_MyopCat, inception_module.InceptionB):
    pass


class QuantizableInceptionC(_MyopCat, inception_module.InceptionC):
    pass


class QuantizableInceptionD(_MyopCat, inception_module.InceptionD):
    pass


class QuantizableInceptionE(inception_module.InceptionE):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop1 = FloatFunctional()
        self.myop2 = FloatFunctional()
        self.myop3 = FloatFunctional()

    def _cat(self, xs, k=0):  # its three joins, each with its own FloatFunctional
        return (self.myop1, self.myop2, self.myop3)[k - 1].cat(xs, 1)


class QuantizableInceptionAux(inception_module.InceptionAux):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)


class QuantizableInception3(inception_module.Inception3):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, inception_blocks=[
            QuantizableBasicConv2d, QuantizableInceptionA, QuantizableInceptionB,
            QuantizableInceptionC, QuantizableInceptionD, QuantizableInceptionE,
            QuantizableInceptionAux], **kwargs)
        self.quant = tq.QuantStub()
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        """Inception v3's forward between the stubs (the input transform before QuantStub); the
        auxiliary head's output (training only) is not dequantized, as in torchvision"""
        x, aux = self._forward(self.quant(self._transform_input(x)))
        x = self.dequant(x)
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x

    def fuse_model(self, is_qat=None):
        """conv + bn + relu of every conv block fused in place (numerics unchanged, still float)"""
        _fuse_blocks(self, QuantizableBasicConv2d, is_qat)


def inception_v3(*, weights=None, progress=True, quantize=False, **kwargs):
    return _build("quantized_inception_v3", QuantizableInception3, (), weights, quantize, kwargs)
