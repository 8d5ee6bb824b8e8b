"""torchvision.models.vision_transformer: ViT-B/16, B/32, L/16, L/32, H/14."""
import math
from collections import OrderedDict
from functools import partial

import tessera as ts
from tessera import nn

from ._utils import _check_weights

__all__ = ["VisionTransformer", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]


class MLPBlock(nn.Sequential):
    """torchvision.ops.MLP(in_dim, [mlp_dim, in_dim], GELU, dropout): keys 0 and 3 are Linear."""

    def __init__(self, in_dim, mlp_dim, dropout):
        super().__init__(nn.Linear(in_dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(mlp_dim, in_dim), nn.Dropout(dropout))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)


class EncoderBlock(nn.Module):
    def __init__(self, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads,
                                                    dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        if input.dim() != 3:
            raise ValueError("EncoderBlock: expected (batch, seq, hidden), got shape %s"
                             % (tuple(input.shape),))
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                 attention_dropout, norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.pos_embedding = nn.Parameter(ts.empty(1, seq_length, hidden_dim))
        nn.init.normal_(self.pos_embedding, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(OrderedDict(
            ("encoder_layer_%d" % i, EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout,
                                                  attention_dropout, norm_layer))
            for i in range(num_layers)))
        self.ln = norm_layer(hidden_dim)

    def forward(self, input):
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim,
                 dropout=0.0, attention_dropout=0.0, num_classes=1000, representation_size=None,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), conv_stem_configs=None):
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError("VisionTransformer: input shape indivisible by patch size")
        if conv_stem_configs is not None:
            raise ValueError("VisionTransformer: conv_stem_configs is not supported")
        self.image_size, self.patch_size = image_size, patch_size
        self.hidden_dim, self.mlp_dim = hidden_dim, mlp_dim
        self.attention_dropout, self.dropout = attention_dropout, dropout
        self.num_classes, self.representation_size = num_classes, representation_size
        self.norm_layer = norm_layer
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2
        self.class_token = nn.Parameter(ts.zeros(1, 1, hidden_dim))
        seq_length += 1
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                               attention_dropout, norm_layer)
        self.seq_length = seq_length
        heads = OrderedDict()
        if representation_size is None:
            heads["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads["act"] = nn.Tanh()
            heads["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads)
        fan_in = 3 * patch_size * patch_size
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in)) \
            if hasattr(nn.init, "trunc_normal_") else \
            nn.init.normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        if representation_size is not None:
            nn.init.normal_(self.heads.pre_logits.weight,
                            std=math.sqrt(1 / self.heads.pre_logits.in_features))
            nn.init.zeros_(self.heads.pre_logits.bias)
        nn.init.zeros_(self.heads.head.weight)
        nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        n, c, h, w = x.shape
        p = self.patch_size
        if h != self.image_size or w != self.image_size:
            raise ValueError("VisionTransformer: wrong image size %dx%d, expected %d"
                             % (h, w, self.image_size))
        x = self.conv_proj(x)
        return x.reshape(n, self.hidden_dim, (h // p) * (w // p)).permute(0, 2, 1)

    def forward(self, x):
        x = self._process_input(x)
        n = x.shape[0]
        x = ts.cat([self.class_token.expand(n, -1, -1), x], 1)
        x = self.encoder(x)
        return self.heads(x[:, 0])


_CONFIGS = {  # patch_size, num_layers, num_heads, hidden_dim, mlp_dim
    "vit_b_16": (16, 12, 12, 768, 3072), "vit_b_32": (32, 12, 12, 768, 3072),
    "vit_l_16": (16, 24, 16, 1024, 4096), "vit_l_32": (32, 24, 16, 1024, 4096),
    "vit_h_14": (14, 32, 16, 1280, 5120),
}


def _vit(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    p, layers, heads, hidden, mlp = _CONFIGS[arch]
    image_size = kwargs.pop("image_size", 224)
    return VisionTransformer(image_size, p, layers, heads, hidden, mlp, **kwargs)


def vit_b_16(*, weights=None, progress=True, **kwargs):
    return _vit("vit_b_16", weights, kwargs)


def vit_b_32(*, weights=None, progress=True, **kwargs):
    return _vit("vit_b_32", weights, kwargs)


def vit_l_16(*, weights=None, progress=True, **kwargs):
    return _vit("vit_l_16", weights, kwargs)


def vit_l_32(*, weights=None, progress=True, **kwargs):
    return _vit("vit_l_32", weights, kwargs)


def vit_h_14(*, weights=None, progress=True, **kwargs):
    return _vit("vit_h_14", weights, kwargs)
