"""tessera.vision.ops.misc — torchvision.ops.misc's layers: FrozenBatchNorm2d (batch norm with fixed
statistics and affine parameters, all buffers: the C batch_norm in eval form), and the building
blocks torchvision's models share (Conv2dNormActivation, SqueezeExcitation, from
tessera.vision.models._utils), MLP and Permute."""
import tessera as _t
from tessera import nn
from tessera.nn import functional as F
from ..models._utils import Conv2dNormActivation, SqueezeExcitation  # noqa: F401

__all__ = ["FrozenBatchNorm2d", "Conv2dNormActivation", "SqueezeExcitation", "MLP", "Permute"]


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d whose statistics and affine parameters are fixed buffers (weight, bias,
    running_mean, running_var): y = (x - running_mean) / sqrt(running_var + eps) * weight + bias"""

    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", _t.ones(num_features))
        self.register_buffer("bias", _t.zeros(num_features))
        self.register_buffer("running_mean", _t.zeros(num_features))
        self.register_buffer("running_var", _t.ones(num_features))

    def forward(self, x):
        if x.dim() != 4:
            raise ValueError("FrozenBatchNorm2d: expected 4D input (got %dD input)" % x.dim())
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            False, 0.0, self.eps)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"


class Permute(nn.Module):
    """torchvision.ops.misc.Permute: x.permute(dims)"""

    def __init__(self, dims):
        super().__init__()
        self.dims = list(dims)

    def forward(self, x):
        return _t.permute(x, self.dims)


class MLP(nn.Sequential):
    """torchvision.ops.MLP: (Linear, norm, activation, Dropout) per hidden size, the last Linear
    followed by Dropout only"""

    def __init__(self, in_channels, hidden_channels, norm_layer=None, activation_layer=nn.ReLU,
                 inplace=None, bias=True, dropout=0.0):
        params = {} if inplace is None else {"inplace": inplace}
        layers = []
        in_dim = in_channels
        for hidden_dim in hidden_channels[:-1]:
            layers.append(nn.Linear(in_dim, hidden_dim, bias=bias))
            if norm_layer is not None:
                layers.append(norm_layer(hidden_dim))
            layers.append(activation_layer(**params))
            layers.append(nn.Dropout(dropout, **params))
            in_dim = hidden_dim
        layers.append(nn.Linear(in_dim, hidden_channels[-1], bias=bias))
        layers.append(nn.Dropout(dropout, **params))
        super().__init__(*layers)
