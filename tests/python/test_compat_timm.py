"""timm under tessera.compat (issue 75): import, list_models, a model built, run forward and
backward. Skipped when timm is not importable (PYTHONPATH=.../build/python:/opt/torch-libs); the
logits and gradients against PyTorch are compared by the procedure in docs/COMPAT.md."""
import sys

import pytest

import tessera
import tessera.compat as compat


@pytest.fixture(scope="module")
def timm():
    compat.uninstall()
    compat.install()
    try:
        import timm as t
    except ImportError as e:
        compat.uninstall()
        pytest.skip("timm is not importable here (%s): put /opt/torch-libs on PYTHONPATH" % e)
    yield t
    for k in [k for k in sys.modules if k == "timm" or k.startswith("timm.")]:
        del sys.modules[k]
    compat.uninstall()


def test_timm_resnet18_forward_backward(timm):
    assert "resnet18" in timm.list_models("resnet1*")
    import torch
    tessera.manual_seed(0)
    m = timm.create_model("resnet18", pretrained=False, num_classes=5).eval()
    assert isinstance(m, tessera.nn.Module)
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    y = m(x)
    assert y.shape == (2, 5)
    y.sum().backward()
    assert x.grad.shape == x.shape and m.fc.weight.grad is not None
    f = timm.create_model("resnet18", features_only=True, pretrained=False).eval()
    assert [o.shape[1] for o in f(torch.randn(1, 3, 32, 32))] == [64, 64, 128, 256, 512]
