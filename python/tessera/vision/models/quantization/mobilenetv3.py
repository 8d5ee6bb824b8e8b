"""torchvision.models.quantization.mobilenetv3: MobileNetV3-Large with QuantStub / DeQuantStub,
FloatFunctional residual adds and squeeze-excitation products, ReLU for ReLU6 and fuse_model
(torchvision's names). quantize=True is torchvision's: fused for QAT, prepare_qat with the
backend's default QAT qconfig (qnnpack), then convert, with no data run through (its weights come
from QAT training)."""
from tessera import nn
from tessera.ao import quantization as tq
from tessera.ao.nn.quantized import FloatFunctional

from .._utils import Conv2dNormActivation, SqueezeExcitation
from ..mobilenetv3 import InvertedResidual, MobileNetV3, _mobilenet_v3_conf
from .utils import _QuantStubs, _build, _fuse_modules

__all__ = ["QuantizableMobileNetV3", "mobilenet_v3_large"]


class QuantizableSqueezeExcitation(SqueezeExcitation):
    """hardsigmoid scale, its product with the input through FloatFunctional.mul (torchvision's
    version 2; its hook giving version-1 QAT checkpoints the scale_activation fake-quant keys is
    not kept: tessera's state dicts carry no versions)"""
    _version = 2

    def __init__(self, *args, **kwargs):
        kwargs["scale_activation"] = nn.Hardsigmoid
        super().__init__(*args, **kwargs)
        self.skip_mul = FloatFunctional()

    def _scale(self, x):
        return self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))

    def forward(self, x):
        return self.skip_mul.mul(self._scale(x), x)

    def fuse_model(self, is_qat=None):
        _fuse_modules(self, ["fc1", "activation"], is_qat, inplace=True)


class QuantizableInvertedResidual(InvertedResidual):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, se_layer=QuantizableSqueezeExcitation, **kwargs)
        self.skip_add = FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.block(x))
        return self.block(x)


class QuantizableMobileNetV3(_QuantStubs, MobileNetV3):
    def fuse_model(self, is_qat=None):
        """conv + bn (+ relu; Hardswish stays apart) and the squeeze-excitation's fc1 + relu fused
        in place"""
        for m in self.modules():
            if type(m) is Conv2dNormActivation:
                names = ["0", "1"]
                if len(m) == 3 and type(m[2]) is nn.ReLU:
                    names.append("2")
                _fuse_modules(m, names, is_qat, inplace=True)
            elif type(m) is QuantizableSqueezeExcitation:
                m.fuse_model(is_qat)


def _mobilenet_v3_model(name, setting, last_channel, weights, quantize, kwargs):
    backend = kwargs.pop("backend", "qnnpack")
    model = _build(name, QuantizableMobileNetV3, (setting, last_channel), weights, False,
                   dict(kwargs, block=QuantizableInvertedResidual))
    if quantize:
        # torchvision's: QAT-prepared (its weights are a QAT checkpoint), then converted
        model.fuse_model(is_qat=True)
        model.qconfig = tq.get_default_qat_qconfig(backend)
        tq.prepare_qat(model, inplace=True)
        tq.convert(model, inplace=True)
        model.eval()
    return model


def mobilenet_v3_large(*, weights=None, progress=True, quantize=False, **kwargs):
    conf = {k: kwargs.pop(k) for k in ("width_mult", "reduced_tail", "dilated") if k in kwargs}
    setting, last_channel = _mobilenet_v3_conf("mobilenet_v3_large", **conf)
    return _mobilenet_v3_model("quantized_mobilenet_v3_large", setting, last_channel, weights,
                               quantize, kwargs)
