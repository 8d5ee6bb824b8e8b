"""torchvision.models.quantization.utils: ReLU6 / in-place ReLU made plain ReLU (what eager-mode
quantization fuses), the post-training quantization a builder's quantize=True runs, and
fuse_modules or fuse_modules_qat by the model's mode."""
import tessera
from tessera import nn
from tessera.ao import quantization as tq


class _QuantStubs:
    """the quantizable networks' QuantStub / DeQuantStub around the float network's forward
    (first base: QuantizableResNet(_QuantStubs, ResNet))"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quant = tq.QuantStub()
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        return self.dequant(super().forward(self.quant(x)))


def _replace_relu(module):
    """every nn.ReLU / nn.ReLU6 (exactly those types) below module becomes nn.ReLU(inplace=False)"""
    reassign = {}
    for name, mod in module.named_children():
        _replace_relu(mod)
        if type(mod) is nn.ReLU or type(mod) is nn.ReLU6:
            reassign[name] = nn.ReLU(inplace=False)
    for key, value in reassign.items():
        module._modules[key] = value


def quantize_model(model, backend):
    """torchvision's eager-mode post-training quantization of a quantizable model in place: fbgemm
    (x86) takes per-channel weights, qnnpack per-tensor; calibrated on one random 299x299 image, as
    torchvision does (weights=None: the quantized model is only as good as that)"""
    if backend not in ("fbgemm", "x86", "qnnpack"):
        raise RuntimeError("Quantized backend not supported: %r (fbgemm, x86 or qnnpack)"
                           % (backend,))
    model.eval()
    weight = (tq.default_weight_observer if backend == "qnnpack"
              else tq.default_per_channel_weight_observer)
    model.qconfig = tq.QConfig(activation=tq.default_observer, weight=weight)
    model.fuse_model()
    tq.prepare(model, inplace=True)
    model(tessera.rand(1, 3, 299, 299))
    tq.convert(model, inplace=True)
    return model


def _fuse_modules(model, modules_to_fuse, is_qat, **kwargs):
    if is_qat is None:
        is_qat = model.training
    method = tq.fuse_modules_qat if is_qat else tq.fuse_modules
    return method(model, modules_to_fuse, **kwargs)


def _build(name, cls, args, weights, quantize, kwargs, backend="fbgemm"):
    """a builder's body: cls(*args, **kwargs) with ReLU for ReLU6, quantized when asked (the
    `backend` keyword, torchvision's default per network); weights None only"""
    if weights is not None:
        raise RuntimeError("%s: only weights=None (tessera downloads nothing; load a state dict "
                           "with load_state_dict)" % name)
    backend = kwargs.pop("backend", backend)
    model = cls(*args, **kwargs)
    _replace_relu(model)
    if quantize:
        quantize_model(model, backend)
    return model


class _ReLUConvBlock:
    """GoogLeNet's / Inception's quantizable conv block (first base: QuantizableBasicConv2d(
    _ReLUConvBlock, BasicConv2d)): an nn.ReLU module after conv + bn, which fuse_model fuses"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))

    def fuse_model(self, is_qat=None):
        _fuse_modules(self, ["conv", "bn", "relu"], is_qat, inplace=True)


def _fuse_blocks(model, block_type, is_qat):
    """every `block_type` conv block below model fused in place (GoogLeNet's, Inception's)"""
    for m in model.modules():
        if type(m) is block_type:
            m.fuse_model(is_qat)
