"""torchvision.models.swin_transformer: Swin Transformer V1 (swin_t / s / b) and V2 (swin_v2_t /
s / b) with torchvision's module, parameter and buffer names (relative_position_index,
V2's relative_coords_table, logit_scale and cpb_mlp)."""
import math
from functools import partial

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from ..ops.misc import MLP, Permute
from ._utils import StochasticDepth, _check_weights

__all__ = ["SwinTransformer", "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s",
           "swin_v2_b"]


def _patch_merging_pad(x):
    """[..., H, W, C] -> [..., ceil(H/2), ceil(W/2), 4C]: the 2x2 neighbours side by side"""
    h, w = x.shape[-3], x.shape[-2]
    x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
    return ts.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :],
                   x[..., 1::2, 1::2, :]], -1)


def _get_relative_position_bias(table, index, window_size):
    n = window_size[0] * window_size[1]
    bias = table[index].view(n, n, -1)
    return bias.permute(2, 0, 1).contiguous().unsqueeze(0)


class PatchMerging(nn.Module):
    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        return self.reduction(self.norm(_patch_merging_pad(x)))


class PatchMergingV2(nn.Module):
    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x):
        return self.norm(self.reduction(_patch_merging_pad(x)))


def _shift_mask(pad_h, pad_w, window_size, shift_size, num_windows, like):
    """[nW, Ws*Ws, Ws*Ws]: 0 where two positions of a shifted window came from the same region of
    the image, -100 elsewhere"""
    mask = ts.zeros((pad_h, pad_w), dtype=like.dtype, device=like.device)
    hs = ((0, -window_size[0]), (-window_size[0], -shift_size[0]), (-shift_size[0], None))
    ws = ((0, -window_size[1]), (-window_size[1], -shift_size[1]), (-shift_size[1], None))
    count = 0
    for h in hs:
        for w in ws:
            mask[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    mask = mask.view(pad_h // window_size[0], window_size[0], pad_w // window_size[1],
                     window_size[1])
    mask = mask.permute(0, 2, 1, 3).reshape(num_windows, window_size[0] * window_size[1])
    mask = mask.unsqueeze(1) - mask.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


def shifted_window_attention(input, qkv_weight, proj_weight, relative_position_bias, window_size,
                             num_heads, shift_size, attention_dropout=0.0, dropout=0.0,
                             qkv_bias=None, proj_bias=None, logit_scale=None, training=True):
    """window multi-head self-attention with relative position bias on [B, H, W, C] (torchvision's
    shifted_window_attention; V2's cosine attention when logit_scale is given)"""
    b, h, w, c = input.shape
    pad_r = (window_size[1] - w % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - h % window_size[0]) % window_size[0]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
    _, pad_h, pad_w, _ = x.shape
    shift_size = list(shift_size)
    if window_size[0] >= pad_h:
        shift_size[0] = 0
    if window_size[1] >= pad_w:
        shift_size[1] = 0
    shifted = sum(shift_size) > 0
    if shifted:
        x = ts.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    nw = (pad_h // window_size[0]) * (pad_w // window_size[1])
    x = x.view(b, pad_h // window_size[0], window_size[0], pad_w // window_size[1],
               window_size[1], c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b * nw, window_size[0] * window_size[1], c)
    if logit_scale is not None and qkv_bias is not None:  # V2: no key bias
        n = qkv_bias.numel() // 3
        qkv_bias = ts.cat([qkv_bias[:n], ts.zeros_like(qkv_bias[n:2 * n]), qkv_bias[2 * n:]])
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if logit_scale is not None:
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        attn = attn * ts.clamp(logit_scale, max=math.log(100.0)).exp()
    else:
        attn = (q * (c // num_heads) ** -0.5).matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias
    if shifted:
        mask = _shift_mask(pad_h, pad_w, window_size, shift_size, nw, x)
        attn = attn.view(x.size(0) // nw, nw, num_heads, x.size(1), x.size(1))
        attn = (attn + mask.unsqueeze(1).unsqueeze(0)).view(-1, num_heads, x.size(1), x.size(1))
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.view(b, pad_h // window_size[0], pad_w // window_size[1], window_size[0],
               window_size[1], c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, pad_h, pad_w, c)
    if shifted:
        x = ts.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x[:, :h, :w, :].contiguous()


class ShiftedWindowAttention(nn.Module):
    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("ShiftedWindowAttention: window_size and shift_size must be of "
                             "length 2")
        self.window_size = list(window_size)
        self.shift_size = list(shift_size)
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self):
        wh, ww = self.window_size
        self.relative_position_bias_table = nn.Parameter(
            ts.zeros((2 * wh - 1) * (2 * ww - 1), self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self):
        wh, ww = self.window_size
        coords = ts.stack(ts.meshgrid(ts.arange(wh), ts.arange(ww), indexing="ij"))
        flat = ts.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        # (dh + wh - 1) * (2 ww - 1) + (dw + ww - 1)
        index = (rel[:, :, 0] + (wh - 1)) * (2 * ww - 1) + (rel[:, :, 1] + (ww - 1))
        self.register_buffer("relative_position_index", index.flatten())

    def get_relative_position_bias(self):
        return _get_relative_position_bias(self.relative_position_bias_table,
                                           self.relative_position_index, self.window_size)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """cosine attention with a learned logit scale; the position bias from a small MLP (cpb_mlp)
    over log-spaced relative coordinates"""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias,
                         proj_bias=proj_bias, attention_dropout=attention_dropout,
                         dropout=dropout)
        self.logit_scale = nn.Parameter(ts.log(10 * ts.ones((num_heads, 1, 1))))
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            n = self.qkv.bias.numel() // 3
            with ts.no_grad():
                self.qkv.bias[n:2 * n].zero_()

    def define_relative_position_bias_table(self):
        wh, ww = self.window_size
        ch = ts.arange(-(wh - 1), wh, dtype=ts.float32) / (wh - 1)
        cw = ts.arange(-(ww - 1), ww, dtype=ts.float32) / (ww - 1)
        table = ts.stack(ts.meshgrid([ch, cw], indexing="ij"))
        table = table.permute(1, 2, 0).contiguous().unsqueeze(0) * 8  # in [-8, 8]
        table = ts.sign(table) * ts.log2(ts.abs(table) + 1.0) / 3.0
        self.register_buffer("relative_coords_table", table)

    def get_relative_position_bias(self):
        bias = _get_relative_position_bias(
            self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads),
            self.relative_position_index, self.window_size)
        return 16 * ts.sigmoid(bias)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, logit_scale=self.logit_scale,
            training=self.training)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttention):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads,
                               attention_dropout=attention_dropout, dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None,
                       dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """post-norm residual branches (norm after attention / MLP)"""

    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttentionV2):
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio,
                         dropout=dropout, attention_dropout=attention_dropout,
                         stochastic_depth_prob=stochastic_depth_prob, norm_layer=norm_layer,
                         attn_layer=attn_layer)

    def forward(self, x):
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1,
                 num_classes=1000, norm_layer=None, block=None, downsample_layer=PatchMerging):
        super().__init__()
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        layers = [nn.Sequential(
            nn.Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]),
                      stride=(patch_size[0], patch_size[1])),
            Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total = sum(depths)
        block_id = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                stage.append(block(
                    dim, num_heads[i_stage], window_size=window_size,
                    shift_size=[0 if i_layer % 2 == 0 else w // 2 for w in window_size],
                    mlp_ratio=mlp_ratio, dropout=dropout, attention_dropout=attention_dropout,
                    stochastic_depth_prob=stochastic_depth_prob * float(block_id) / (total - 1),
                    norm_layer=norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


_CONFIGS = {  # name: embed_dim, depths, num_heads, window, stochastic depth, v2
    "swin_t": (96, [2, 2, 6, 2], [3, 6, 12, 24], [7, 7], 0.2, False),
    "swin_s": (96, [2, 2, 18, 2], [3, 6, 12, 24], [7, 7], 0.3, False),
    "swin_b": (128, [2, 2, 18, 2], [4, 8, 16, 32], [7, 7], 0.5, False),
    "swin_v2_t": (96, [2, 2, 6, 2], [3, 6, 12, 24], [8, 8], 0.2, True),
    "swin_v2_s": (96, [2, 2, 18, 2], [3, 6, 12, 24], [8, 8], 0.3, True),
    "swin_v2_b": (128, [2, 2, 18, 2], [4, 8, 16, 32], [8, 8], 0.5, True),
}


def _swin(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    dim, depths, heads, window, sd, v2 = _CONFIGS[arch]
    if v2:
        kwargs.setdefault("block", SwinTransformerBlockV2)
        kwargs.setdefault("downsample_layer", PatchMergingV2)
    return SwinTransformer(patch_size=[4, 4], embed_dim=dim, depths=depths, num_heads=heads,
                           window_size=window, stochastic_depth_prob=sd, **kwargs)


def swin_t(*, weights=None, progress=True, **kwargs):
    return _swin("swin_t", weights, kwargs)


def swin_s(*, weights=None, progress=True, **kwargs):
    return _swin("swin_s", weights, kwargs)


def swin_b(*, weights=None, progress=True, **kwargs):
    return _swin("swin_b", weights, kwargs)


def swin_v2_t(*, weights=None, progress=True, **kwargs):
    return _swin("swin_v2_t", weights, kwargs)


def swin_v2_s(*, weights=None, progress=True, **kwargs):
    return _swin("swin_v2_s", weights, kwargs)


def swin_v2_b(*, weights=None, progress=True, **kwargs):
    return _swin("swin_v2_b", weights, kwargs)
