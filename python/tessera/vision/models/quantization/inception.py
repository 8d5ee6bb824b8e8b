"""torchvision.models.quantization.inception: Inception v3 with QuantStub / DeQuantStub, ReLU
modules in its conv blocks (fused with conv + bn), FloatFunctional cats (myop; InceptionE's myop1
... myop3) and fuse_model (torchvision's module and state-dict names)."""
import tessera as ts
from tessera import nn
from tessera.ao import quantization as tq
from tessera.ao.nn.quantized import FloatFunctional
from tessera.nn import functional as F

from .. import inception as inception_module
from ..inception import InceptionOutputs
from .utils import _build, _fuse_blocks, _fuse_modules

__all__ = ["QuantizableInception3", "inception_v3"]


class QuantizableBasicConv2d(inception_module.BasicConv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))

    def fuse_model(self, is_qat=None):
        _fuse_modules(self, ["conv", "bn", "relu"], is_qat, inplace=True)


class QuantizableInceptionA(inception_module.InceptionA):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = FloatFunctional()

    def forward(self, x):
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return self.myop.cat([self.branch1x1(x), b5, b3, bp], 1)


class QuantizableInceptionB(inception_module.InceptionB):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = FloatFunctional()

    def forward(self, x):
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return self.myop.cat([self.branch3x3(x), b3, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class QuantizableInceptionC(inception_module.InceptionC):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = FloatFunctional()

    def forward(self, x):
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for m in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                  self.branch7x7dbl_5):
            bd = m(bd)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return self.myop.cat([self.branch1x1(x), b7, bd, bp], 1)


class QuantizableInceptionD(inception_module.InceptionD):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop = FloatFunctional()

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return self.myop.cat([b3, b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class QuantizableInceptionE(inception_module.InceptionE):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, conv_block=QuantizableBasicConv2d, **kwargs)
        self.myop1 = FloatFunctional()
        self.myop2 = FloatFunctional()
        self.myop3 = FloatFunctional()

    def forward(self, x):
        b3 = self.branch3x3_1(x)
        b3 = self.myop1.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = self.myop2.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return self.myop3.cat([self.branch1x1(x), b3, bd, bp], 1)


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
        x = self.quant(self._transform_input(x))
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        for m in (self.Mixed_5b, self.Mixed_5c, self.Mixed_5d, self.Mixed_6a, self.Mixed_6b,
                  self.Mixed_6c, self.Mixed_6d, self.Mixed_6e):
            x = m(x)
        aux = self.AuxLogits(x) if self.AuxLogits is not None and self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        x = self.dequant(self.fc(ts.flatten(self.dropout(self.avgpool(x)), 1)))
        if self.training and self.aux_logits:
            return InceptionOutputs(x, aux)
        return x

    def fuse_model(self, is_qat=None):
        """conv + bn + relu of every conv block fused in place (numerics unchanged, still float)"""
        _fuse_blocks(self, QuantizableBasicConv2d, is_qat)


def inception_v3(*, weights=None, progress=True, quantize=False, **kwargs):
    return _build("quantized_inception_v3", QuantizableInception3, (), weights, quantize, kwargs)
