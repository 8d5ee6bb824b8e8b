"""Checks tessera.vision.models against torchvision (needs torch + torchvision; not run in CI).

Every builder: the state-dict keys and shapes equal torchvision's. A set of small configurations:
torchvision's state_dict (random BatchNorm statistics) goes through torch.save -> tessera.load ->
load_state_dict(strict=True) and both eval() forwards agree within float32 tolerance.

  PYTHONPATH=build-nocuda/python /opt/torch2/bin/torch-python tools/check_vision_torch.py [names]
"""
import os
import sys
import tempfile

import numpy as np
import torch
import torchvision.models as tvm

import tessera as ts
import tessera.vision.models as M

FORWARD = {  # name: (kwargs, input size)
    "resnet18": ({"num_classes": 10}, 64), "resnet50": ({"num_classes": 10}, 64),
    "resnext50_32x4d": ({"num_classes": 10}, 32), "alexnet": ({"num_classes": 10}, 64),
    "vgg11_bn": ({"num_classes": 10}, 32), "vgg11": ({"num_classes": 10}, 32),
    "squeezenet1_0": ({"num_classes": 10}, 64), "squeezenet1_1": ({"num_classes": 10}, 64),
    "mobilenet_v2": ({"num_classes": 10}, 64), "mobilenet_v3_small": ({"num_classes": 10}, 64),
    "mobilenet_v3_large": ({"num_classes": 10}, 64), "efficientnet_b0": ({"num_classes": 10}, 64),
    "densenet121": ({"num_classes": 10}, 64),
    "vit_b_16": ({"num_classes": 10, "image_size": 32}, 32),
}


def _randomize_bn(model):
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        if isinstance(m, torch.nn.Linear) and hasattr(m, "weight"):
            with torch.no_grad():  # ViT zero-inits its head: make the output informative
                if float(m.weight.abs().max()) == 0.0:
                    m.weight.normal_(0, 0.05, generator=g)


def check_keys(name):
    kw = {"image_size": 28 if name == "vit_h_14" else 32} if name.startswith("vit") else {}
    t = getattr(tvm, name)(weights=None, **kw).state_dict()
    m = getattr(M, name)(weights=None, **kw).state_dict()
    tk, mk = list(t), list(m)
    if tk != mk:
        return "keys differ: only torch %s, only tessera %s" % (
            sorted(set(tk) - set(mk))[:5], sorted(set(mk) - set(tk))[:5])
    bad = [k for k in tk if tuple(t[k].shape) != tuple(m[k].shape)]
    return "shapes differ: %s" % bad[:5] if bad else None


def check_forward(name, kwargs, size):
    torch.manual_seed(0)
    tm = getattr(tvm, name)(weights=None, **kwargs).eval()
    _randomize_bn(tm)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.pt")
        torch.save(tm.state_dict(), path)
        mm = getattr(M, name)(weights=None, **kwargs)
        mm.load_state_dict(ts.load(path), strict=True)
    mm.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, size, size)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).double().numpy()
    with ts.no_grad():
        got = mm(ts.tensor(x)).numpy().astype(np.float64)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)
    return None if err < 1e-4 else "forward max rel err %.3g" % err


def main(argv):
    names = argv or M.list_models()
    failed = 0
    for name in names:
        msg = check_keys(name)
        if msg is None and name in FORWARD:
            msg = check_forward(name, *FORWARD[name])
        status = "ok" if msg is None else "FAIL " + msg
        failed += msg is not None
        print("%-20s %s%s" % (name, status, " (+forward)" if name in FORWARD else ""), flush=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
