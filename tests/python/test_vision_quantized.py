"""tessera.vision.models.quantization (torchvision.models.quantization): the quantizable ResNet,
MobileNetV2, ShuffleNetV2, GoogLeNet, Inception v3 and MobileNetV3-Large builders, registered as
quantized_<name>; float by default, eager-mode post-training quantization with quantize=True
(MobileNetV3: QAT-prepared and converted, as torchvision does)."""
import numpy as np
import pytest

import tessera
from tessera.vision import models
from tessera.vision.models import quantization as qm


def test_registered_under_torchvisions_names():
    names = set(models.list_models())
    want = {"quantized_resnet18", "quantized_resnet50", "quantized_resnext101_32x8d",
            "quantized_resnext101_64x4d", "quantized_mobilenet_v2", "quantized_shufflenet_v2_x0_5",
            "quantized_shufflenet_v2_x1_0", "quantized_shufflenet_v2_x1_5",
            "quantized_shufflenet_v2_x2_0", "quantized_googlenet", "quantized_inception_v3",
            "quantized_mobilenet_v3_large"}
    assert want <= names
    assert models.get_model_builder("quantized_resnet18") is qm.resnet18
    assert models.get_model_builder("quantized_googlenet") is qm.googlenet
    assert models.get_model_builder("quantized_inception_v3") is qm.inception_v3
    assert models.get_model_builder("quantized_mobilenet_v3_large") is qm.mobilenet_v3_large


@pytest.mark.filterwarnings("ignore:The default weight initialization")
@pytest.mark.parametrize("name", ["resnet18", "resnet50", "shufflenet_v2_x0_5", "googlenet",
                                  "inception_v3", "mobilenet_v3_large"])
def test_float_model_is_the_float_network(name):
    """the same state-dict keys as the float builder, its state dict loads strictly, and (ReLU
    kept, residual add + relu, cat, the squeeze-excitation product) the same outputs bit for bit"""
    tessera.manual_seed(0)
    ref = getattr(models, name)().eval()
    q = getattr(qm, name)().eval()
    assert set(q.state_dict()) == set(ref.state_dict())
    q.load_state_dict(ref.state_dict(), strict=True)
    side = 75 if name == "inception_v3" else 48  # Inception v3's smallest input
    x = tessera.rand(2, 3, side, side)
    with tessera.no_grad():
        assert tessera.equal(q(x), ref(x))


def test_mobilenet_v2_has_relu_for_relu6():
    q = qm.mobilenet_v2()
    kinds = {type(m).__name__ for m in q.modules()}
    assert "ReLU" in kinds and "ReLU6" not in kinds
    assert type(q.features[1].skip_add if hasattr(q.features[1], "skip_add") else
                q.features[2].skip_add).__name__ == "FloatFunctional"


@pytest.mark.filterwarnings("ignore:The default weight initialization")
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "shufflenet_v2_x0_5", "googlenet"])
def test_quantize_true_runs_post_training_quantization(name):
    """fused and converted (ConvReLU2d modules, Quantize stub); the output comes through the
    DeQuantStub from the classifier's quint8 result: every value is a multiple of its scale away
    from the zero point. ShuffleNetV2 chunks, views and transposes quantized tensors (its channel
    shuffle) and takes their mean (its global pool); GoogLeNet max-pools them with ceil_mode,
    cats its branches and pools them to 1x1."""
    tessera.manual_seed(0)
    q = getattr(qm, name)(quantize=True)
    assert type(q.quant).__name__ == "Quantize"
    assert any(type(m).__name__ == "ConvReLU2d" for m in q.modules())
    fc = q.classifier[1] if name == "mobilenet_v2" else q.fc
    y = q(tessera.rand(1, 3, 64, 64)).numpy()
    assert y.shape == (1, 1000) and np.isfinite(y).all()
    k = y / fc.scale + fc.zero_point
    assert np.abs(k - np.round(k)).max() < 1e-3
    if name != "mobilenet_v2":  # its random init ends near 0: all 0 there, in PyTorch too
        assert len(np.unique(y)) > 10


def test_refusals():
    with pytest.raises(RuntimeError, match="only weights=None"):
        qm.resnet18(weights="DEFAULT")
    with pytest.raises(RuntimeError, match="Quantized backend not supported"):
        qm.resnet18(quantize=True, backend="tensorrt")


@pytest.mark.filterwarnings("ignore:The default weight initialization")
@pytest.mark.parametrize("name", ["mobilenet_v2", "shufflenet_v2_x2_0", "resnext101_64x4d",
                                  "googlenet", "inception_v3", "mobilenet_v3_large"])
def test_state_dict_names_and_shapes_are_the_float_builders(name):
    """torchvision's quantizable models have exactly their float builders' state-dict names and
    shapes (checked in torchvision 0.29); the float builders' are checked against torchvision's
    in test_vision_models_builders.py"""
    a = {k: tuple(v.shape) for k, v in getattr(models, name)().state_dict().items()}
    b = {k: tuple(v.shape) for k, v in getattr(qm, name)().state_dict().items()}
    assert a == b


def test_quantized_shufflenet_exports_as_qdq(tmp_path):
    """the quantized ShuffleNetV2 (its chunk, channel shuffle and global mean on quantized tensors)
    written as QDQ and read back by the importer gives the eager output bit for bit, and so does
    ONNX Runtime where it is installed"""
    tessera.manual_seed(0)
    q = qm.shufflenet_v2_x0_5(quantize=True)
    x = tessera.rand(1, 3, 64, 64)
    with tessera.no_grad():
        y = q(x)
    path = str(tmp_path / "shufflenet_q.onnx")
    tessera.onnx.export(q, (x,), path)
    back = tessera.onnx.load(path)
    with tessera.no_grad():
        assert tessera.equal(back(x), y)
    try:
        import onnxruntime as ort
    except ImportError:
        return
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    r = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
    assert np.array_equal(r, y.numpy())


@pytest.mark.filterwarnings("ignore:The default weight initialization")
@pytest.mark.parametrize("name", ["googlenet", "inception_v3"])
def test_aux_heads_in_training_are_the_float_networks(name):
    """in training mode with aux_logits the quantizable GoogLeNet / Inception v3 return the float
    network's GoogLeNetOutputs / InceptionOutputs, the same values (same seed for the dropouts);
    GoogLeNet's two auxiliary outputs swapped, as torchvision 0.29's quantizable GoogLeNet gives
    them (checked there); aux_logits=False leaves the heads out, as in the float builder"""
    tessera.manual_seed(0)
    ref = getattr(models, name)()
    q = getattr(qm, name)()
    q.load_state_dict(ref.state_dict(), strict=True)
    side = 299 if name == "inception_v3" else 48  # its aux head needs a 17x17 Mixed_6e
    x = tessera.rand(2, 3, side, side)
    with tessera.no_grad():
        tessera.manual_seed(1)
        a = ref(x)
        tessera.manual_seed(1)
        b = q(x)
    assert type(a) is type(b) and a._fields == b._fields
    if name == "googlenet":
        b = type(b)(b.logits, b.aux_logits1, b.aux_logits2)
    for u, v in zip(a, b):
        assert tessera.equal(u, v)
    small = getattr(qm, name)(aux_logits=False)
    assert set(small.state_dict()) == set(getattr(models, name)(aux_logits=False).state_dict())


def test_mobilenet_v3_fuses_as_torchvision():
    """conv + bn + relu fused, conv + bn where Hardswish follows (it stays a module), the
    squeeze-excitation's fc1 + relu fused, its product a FloatFunctional.mul; fuse_model keeps
    the float network's outputs"""
    tessera.manual_seed(0)
    q = qm.mobilenet_v3_large().eval()
    x = tessera.rand(1, 3, 64, 64)
    with tessera.no_grad():
        before = q(x)
    q.fuse_model()
    kinds = [type(m).__name__ for m in q.modules()]
    assert "BatchNorm2d" not in kinds and "ConvReLU2d" in kinds and "Hardswish" in kinds
    se = q.features[4].block[2]
    assert type(se).__name__ == "QuantizableSqueezeExcitation"
    assert type(se.fc1).__name__ == "ConvReLU2d" and type(se.activation).__name__ == "Identity"
    assert type(se.skip_mul).__name__ == "FloatFunctional"
    with tessera.no_grad():
        after = q(x)
    assert np.allclose(after.numpy(), before.numpy(), rtol=1e-4, atol=1e-5)


def test_mobilenet_v3_quantize_true_is_qat_prepared_and_converted():
    """torchvision's path: fuse_model(is_qat=True), the backend's QAT qconfig (qnnpack),
    prepare_qat, convert (no data run through: scale 1, zero point 0, as PyTorch gives), eval"""
    q = qm.mobilenet_v3_large(quantize=True)
    assert not q.training
    assert type(q.quant).__name__ == "Quantize"
    assert type(q.features[1].block[0][0]).__name__ == "ConvReLU2d"
    assert type(q.features[4].block[2].fc1).__name__ == "ConvReLU2d"
    assert type(q.features[4].block[2].skip_mul).__name__ == "QFunctional"
    assert type(q.classifier[3]).__name__ == "Linear" and q.classifier[3].scale == 1.0
    with pytest.raises(AssertionError, match="tensorrt not supported"):
        qm.mobilenet_v3_large(quantize=True, backend="tensorrt")
    with pytest.raises(RuntimeError, match="only weights=None"):
        qm.mobilenet_v3_large(weights="DEFAULT")


@pytest.mark.filterwarnings("ignore:The default weight initialization")
@pytest.mark.parametrize("name", ["inception_v3", "mobilenet_v3_large"])
def test_quantized_inception_and_mobilenet_v3_run(name):
    """the quantized model runs (Inception v3: quantized avg_pool2d; MobileNetV3: quantized
    Hardswish, hardsigmoid and QFunctional.mul) to a (1, 1000) output on its last Linear's quint8
    grid. Inception v3's random weights give a varied output at 299x299 (all zero at 80x80, in
    PyTorch too); MobileNetV3's, converted from unobserved fake quants (scale 1), all zero, as in
    PyTorch."""
    tessera.manual_seed(0)
    q = getattr(qm, name)(quantize=True)
    fc = q.fc if name == "inception_v3" else q.classifier[3]
    side = 299 if name == "inception_v3" else 80
    y = q(tessera.rand(1, 3, side, side)).numpy()
    assert y.shape == (1, 1000) and np.isfinite(y).all()
    k = y / fc.scale + fc.zero_point
    assert np.abs(k - np.round(k)).max() < 1e-3
    if name == "inception_v3":
        assert len(np.unique(y)) > 10
