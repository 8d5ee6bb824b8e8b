#!/usr/bin/env python3
"""gen_golden_resnet.py — writes tests/golden/resnet.safetensors with PyTorch for
tests/test_golden_resnet.c: residual networks with torchvision's names, each as a state dict saved
by PyTorch (BatchNorm statistics and affine parameters moved away from their initial values), an
input, and float64 results computed from those float32 weights: eval-mode logits, train-mode
logits and cross-entropy loss, every gradient of that loss, and the BatchNorm running statistics
after the train-mode forward.

  r18n  resnet18 at width 4 (channels 4/8/16/32, torchvision's structure and names), ImageNet stem
  r18c  resnet18 at width 4 with the CIFAR stem (3x3 conv1, maxpool an Identity), 1 input channel
        (the gradients of a few tensors in full, every gradient's sum of squares)
  rbtl  a ResNet of Bottlenecks, one a stage, at width 4 with groups 2 and width_per_group 32
        (grouped 3x3 convs), gradients as r18c
  r20n  He et al.'s resnet20 at width 4, option A shortcuts (no parameters)
  r20b  resnet20 at width 4, option B shortcuts (downsample.0 conv 1x1 + downsample.1 BatchNorm)
  r20f  resnet20 at full width (16/32/64) with weights from formula_state_dict, computed the same
        way by the C test, so that its 0.27M weights need not be committed; gradients as r18c

The models are written here with torchvision's structure and names; with torchvision importable
(pip install --no-deps --target DIR torchvision pillow; PYTHONPATH=DIR) main() first checks that
this resnet18 and resnet50 have torchvision's keys and shapes and, with the same weights, its
outputs. Run: /opt/torch2/bin/torch-python tools/gen_golden_resnet.py   (the file is committed)"""
import copy
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import OUT, save_safetensors  # noqa: E402


def conv3x3(i, o, stride=1, groups=1):
    return nn.Conv2d(i, o, 3, stride, 1, groups=groups, bias=False)


def conv1x1(i, o, stride=1):
    return nn.Conv2d(i, o, 1, stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, width_per_group=64):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x if self.downsample is None else self.downsample(x)  # torchvision's, in place
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, width_per_group=64):
        super().__init__()
        width = int(planes * (width_per_group / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv3x3(width, width, stride, groups)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv1x1(width, planes * 4)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


class ShortcutA(nn.Module):
    """He et al.'s option A: x[:, :, ::s, ::s] with the new channels zero, split over both sides."""

    def __init__(self, inplanes, outplanes, stride):
        super().__init__()
        self.front = (outplanes - inplanes) // 2
        self.back = outplanes - inplanes - self.front
        self.stride = stride

    def forward(self, x):
        s = self.stride
        return F.pad(x[:, :, ::s, ::s], (0, 0, 0, 0, self.front, self.back))


class ResNet(nn.Module):
    """torchvision's ResNet with Tessera's ts_resnet_config: width (channels of the stem and the
    first stage), in_channels, the CIFAR stem; paper_cifar makes He et al.'s 3-stage CIFAR nets
    (no maxpool, option A shortcuts unless shortcut_conv)."""

    def __init__(self, block, layers, num_classes=1000, in_channels=3, width=64, cifar_stem=False,
                 zero_init_residual=False, paper_cifar=False, shortcut_conv=False, groups=1,
                 width_per_group=64):
        super().__init__()
        self.inplanes = width
        self.groups, self.width_per_group = groups, width_per_group
        self.option_a = paper_cifar and not shortcut_conv
        small = cifar_stem or paper_cifar
        self.conv1 = (conv3x3(in_channels, width) if small else
                      nn.Conv2d(in_channels, width, 7, 2, 3, bias=False))
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        if not paper_cifar:
            self.maxpool = nn.Identity() if cifar_stem else nn.MaxPool2d(3, 2, 1)
        for i, n in enumerate(layers):
            setattr(self, f"layer{i + 1}", self._make_layer(block, width << i, n, 2 if i else 1))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)
        self.stages = len(layers)

    def _make_layer(self, block, planes, blocks, stride):
        out = planes * block.expansion
        down = None
        if stride != 1 or self.inplanes != out:
            down = (ShortcutA(self.inplanes, out, stride) if self.option_a else
                    nn.Sequential(conv1x1(self.inplanes, out, stride), nn.BatchNorm2d(out)))
        gw = (self.groups, self.width_per_group)
        seq = [block(self.inplanes, planes, stride, down, *gw)]
        self.inplanes = out
        seq += [block(out, planes, 1, None, *gw) for _ in range(1, blocks)]
        return nn.Sequential(*seq)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        if hasattr(self, "maxpool"):
            x = self.maxpool(x)
        for i in range(self.stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(**kw):
    return ResNet(BasicBlock, [2, 2, 2, 2], **kw)


def resnet50(**kw):
    return ResNet(Bottleneck, [3, 4, 6, 3], **kw)


def resnet20(**kw):
    return ResNet(BasicBlock, [3, 3, 3], paper_cifar=True, **{"num_classes": 10, "width": 16, **kw})


# ---------------------------------------------------------------- formula weights (r20f)
def hash_u(name, n):
    """n values in [-1, 1), from the 32-bit FNV-1a hash of the key and the element index mixed by
    murmur3's finaliser: integer arithmetic only, so C computes the very same numbers."""
    h = 2166136261
    for ch in name.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    m32 = np.uint64(0xFFFFFFFF)
    x = ((np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B1)) + np.uint64(h)) & m32
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x85EBCA6B)) & m32
    x ^= x >> np.uint64(13)
    x = (x * np.uint64(0xC2B2AE35)) & m32
    x ^= x >> np.uint64(16)
    return torch.from_numpy(x.astype(np.float64) / 2.0 ** 32 * 2.0 - 1.0)


def formula_value(name, shape):
    """The value of state-dict entry `name` (float64; stored as float32). Keep in step with
    formula_fill in tests/test_golden_resnet.c."""
    n = math.prod(shape)
    u = hash_u(name, n)
    if name.endswith("num_batches_tracked"):
        return None
    if len(shape) == 4:  # conv: uniform with the variance 2 / fan_in (He)
        fan_in = shape[1] * shape[2] * shape[3]
        v = u * math.sqrt(6.0 / fan_in)
    elif name.endswith("running_var"):
        v = 1.0 + 0.25 * (u + 1.0)
    elif name.endswith("running_mean") or name.endswith("bias"):
        v = 0.1 * u
    elif name.startswith("fc.weight"):
        v = u / math.sqrt(shape[1])
    else:  # BatchNorm weight
        v = 1.0 + 0.1 * u
    return v.reshape(shape)


def formula_state_dict(model):
    sd = {}
    for k, t in model.state_dict().items():
        v = formula_value(k, tuple(t.shape))
        sd[k] = t.clone() if v is None else v.to(torch.float32)
    return sd


# ---------------------------------------------------------------- the cases
def perturb(model, g, in_shape):
    """BatchNorm affine parameters off 1 and 0, running statistics from two train-mode forwards on
    random data: eval mode then tests something."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.add_(0.2 * torch.randn(m.weight.shape, generator=g))
                m.bias.add_(0.2 * torch.randn(m.bias.shape, generator=g))
        model.train()
        for _ in range(2):
            model(torch.randn(in_shape, generator=g))


def results(t, p, model, x, y, grad_keys=None):
    """float64 results of the float32 state dict: eval logits, train logits and loss, gradients,
    running statistics after the train-mode forward."""
    m = copy.deepcopy(model).double()
    x64 = x.double()
    m.eval()
    with torch.no_grad():
        t[f"{p}.logits_eval"] = m(x64).float()
    m.train()
    logits = m(x64)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    t[f"{p}.logits_train"], t[f"{p}.loss"] = logits.float(), loss.float().reshape(())
    for k, v in m.named_parameters():
        if grad_keys is None or k in grad_keys:
            t[f"{p}.grad.{k}"] = v.grad.float()
        t[f"{p}.gradsq.{k}"] = (v.grad ** 2).sum().reshape(())  # float64
    for k, v in m.state_dict().items():
        if "running" in k or "num_batches" in k:
            t[f"{p}.after.{k}"] = v.float() if v.is_floating_point() else v
    return loss.item()


def case(t, p, model, x, y, g, grad_keys=None):
    perturb(model, g, x.shape)
    for k, v in model.state_dict().items():
        t[f"{p}.model.{k}"] = v.clone()
    t[f"{p}.input"], t[f"{p}.target"] = x, y
    loss = results(t, p, model, x, y, grad_keys)
    print(f"{p}: {sum(v.numel() for v in model.parameters())} parameters, loss {loss:.6f}")


def torchvision_check():
    """This file's resnet18 and resnet50 against torchvision's, when it can be imported."""
    try:
        import torchvision.models as tvm
    except ImportError:
        print("torchvision not importable: structure check skipped")
        return
    for name, ours in (("resnet18", resnet18()), ("resnet50", resnet50())):
        theirs = getattr(tvm, name)()
        a, b = ours.state_dict(), theirs.state_dict()
        assert list(a) == list(b), f"{name}: keys differ"
        assert all(a[k].shape == b[k].shape for k in a), f"{name}: shapes differ"
        theirs.load_state_dict(a, strict=True)
        x = torch.randn(1, 3, 64, 64)
        ours.eval(), theirs.eval()
        with torch.no_grad():
            err = (ours(x) - theirs(x)).abs().max().item()
        assert err == 0, f"{name}: outputs differ by {err}"
        print(f"{name}: torchvision's keys, shapes and outputs")


def main():
    torch.set_num_threads(1)
    torchvision_check()
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    t = {}
    torch.manual_seed(1)
    case(t, "r18n", resnet18(width=4, num_classes=10), torch.randn(2, 3, 48, 48, generator=g),
         torch.randint(0, 10, (2,), generator=g), g)
    some = {"conv1.weight", "bn1.bias", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
            "layer4.1.bn2.weight", "fc.weight", "fc.bias"}
    case(t, "r18c", resnet18(width=4, num_classes=10, in_channels=1, cifar_stem=True),
         torch.randn(4, 1, 28, 28, generator=g), torch.randint(0, 10, (4,), generator=g), g, some)
    case(t, "rbtl", ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10, width=4, groups=2,
                           width_per_group=32),
         torch.randn(2, 3, 48, 48, generator=g), torch.randint(0, 10, (2,), generator=g), g, some)
    case(t, "r20n", resnet20(width=4), torch.randn(4, 3, 32, 32, generator=g),
         torch.randint(0, 10, (4,), generator=g), g)
    case(t, "r20b", resnet20(width=4, shortcut_conv=True), torch.randn(2, 3, 32, 32, generator=g),
         torch.randint(0, 10, (2,), generator=g), g)
    # full-size resnet20 from the formula; gradients in full for a few tensors
    m = resnet20()
    m.load_state_dict(formula_state_dict(m), strict=True)
    x = torch.randn(2, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (2,), generator=g)
    t["r20f.input"], t["r20f.target"] = x, y
    keys = {"conv1.weight", "bn1.weight", "layer2.0.conv1.weight", "layer2.0.bn2.bias",
            "layer3.2.bn2.weight", "fc.weight", "fc.bias"}
    loss = results(t, "r20f", m, x, y, keys)
    print(f"r20f: {sum(v.numel() for v in m.parameters())} parameters (formula), loss {loss:.6f}")
    path = os.path.join(OUT, "resnet.safetensors")
    save_safetensors(path, t, {"torch": torch.__version__})
    print(f"{path}: {len(t)} tensors, {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
