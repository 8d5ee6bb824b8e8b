"""tessera.vision.models.quantization (torchvision.models.quantization): the quantizable ResNet,
MobileNetV2 and ShuffleNetV2 builders, registered as quantized_<name>; float by default, eager-mode
post-training quantization with quantize=True."""
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
            "quantized_shufflenet_v2_x2_0"}
    assert want <= names
    assert models.get_model_builder("quantized_resnet18") is qm.resnet18


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "shufflenet_v2_x0_5"])
def test_float_model_is_the_float_network(name):
    """the same state-dict keys as the float builder, its state dict loads strictly, and (ReLU
    kept, residual add + relu, cat) the same outputs bit for bit"""
    tessera.manual_seed(0)
    ref = getattr(models, name)().eval()
    q = getattr(qm, name)().eval()
    assert set(q.state_dict()) == set(ref.state_dict())
    q.load_state_dict(ref.state_dict(), strict=True)
    x = tessera.rand(2, 3, 48, 48)
    with tessera.no_grad():
        assert tessera.equal(q(x), ref(x))


def test_mobilenet_v2_has_relu_for_relu6():
    q = qm.mobilenet_v2()
    kinds = {type(m).__name__ for m in q.modules()}
    assert "ReLU" in kinds and "ReLU6" not in kinds
    assert type(q.features[1].skip_add if hasattr(q.features[1], "skip_add") else
                q.features[2].skip_add).__name__ == "FloatFunctional"


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "shufflenet_v2_x0_5"])
def test_quantize_true_runs_post_training_quantization(name):
    """fused and converted (ConvReLU2d modules, Quantize stub); the output comes through the
    DeQuantStub from the classifier's quint8 result: every value is a multiple of its scale away
    from the zero point. ShuffleNetV2 chunks, views and transposes quantized tensors (its channel
    shuffle) and takes their mean (its global pool)."""
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


@pytest.mark.parametrize("name", ["mobilenet_v2", "shufflenet_v2_x2_0", "resnext101_64x4d"])
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
