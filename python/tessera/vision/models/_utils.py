"""Shared pieces of tessera.vision.models: the weights= check, torchvision's _make_divisible,
Conv2dNormActivation, SqueezeExcitation, StochasticDepth and IntermediateLayerGetter (same
module and state-dict names)."""
from collections import OrderedDict

import tessera as ts
from tessera import nn


def _check_weights(name, weights, kwargs):
    """torchvision's weights= / pretrained= arguments: only None / False (no downloads)."""
    pretrained = kwargs.pop("pretrained", False)
    if pretrained or weights is not None:
        raise ValueError(
            "tessera.vision.models.%s: weights=%r is not supported (tessera downloads nothing); "
            "build with weights=None and load a local checkpoint: "
            "model.load_state_dict(tessera.load(path))"
            % (name, weights if weights is not None else "pretrained=True"))
    kwargs.pop("progress", None)


def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class Conv2dNormActivation(nn.Sequential):
    """Conv2d, norm layer, activation (torchvision.ops.Conv2dNormActivation)."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=None, groups=1,
                 norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU, dilation=1, inplace=True,
                 bias=None):
        if padding is None:
            padding = (kernel_size - 1) // 2 * dilation
        if bias is None:
            bias = norm_layer is None
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                            dilation=dilation, groups=groups, bias=bias)]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            layers.append(activation_layer() if inplace is None
                          else activation_layer(inplace=inplace))
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation: x * scale_activation(fc2(activation(fc1(avgpool(x)))))."""

    def __init__(self, input_channels, squeeze_channels, activation=nn.ReLU,
                 scale_activation=nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(scale) * x


class StochasticDepth(nn.Module):
    """torchvision.ops.StochasticDepth: drops whole residual rows (mode "row") or the whole batch
    ("batch") with probability p while training; identity in eval."""

    def __init__(self, p, mode):
        super().__init__()
        if p < 0.0 or p > 1.0:
            raise ValueError("StochasticDepth: p must be in [0, 1], got %r" % (p,))
        if mode not in ("row", "batch"):
            raise ValueError("StochasticDepth: mode must be 'row' or 'batch', got %r" % (mode,))
        self.p, self.mode = p, mode

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        shape = [x.shape[0]] + [1] * (x.dim() - 1) if self.mode == "row" else [1] * x.dim()
        noise = (ts.rand(*shape, device=x.device) < survival).to(x.dtype)
        if survival > 0.0:
            noise = noise / survival
        return x * noise

    def extra_repr(self):
        return "p=%s, mode=%s" % (self.p, self.mode)



class IntermediateLayerGetter(nn.ModuleDict):
    """torchvision.models._utils.IntermediateLayerGetter: the model's direct children in order, up
    to the last one named in return_layers; forward returns an OrderedDict
    {return_layers[name]: that child's output}."""

    def __init__(self, model, return_layers):
        names = [n for n, _ in model.named_children()]
        if not set(return_layers).issubset(names):
            raise ValueError("IntermediateLayerGetter: return_layers %s are not present in model"
                             % sorted(set(return_layers) - set(names)))
        orig = {str(k): str(v) for k, v in return_layers.items()}
        remaining = dict(orig)
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            remaining.pop(name, None)
            if not remaining:
                break
        super().__init__(layers)
        self.return_layers = orig

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out
