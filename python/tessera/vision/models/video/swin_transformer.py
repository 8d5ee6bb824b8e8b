"""torchvision.models.video.swin_transformer: Video Swin Transformer (swin3d_t / s / b) on
[N, C, T, H, W] clips, with torchvision's module, parameter and buffer names (patch_embed,
features, norm, head; relative_position_bias_table / relative_position_index). The blocks and
patch merging are the 2-D Swin's (tessera.vision.models.swin_transformer), as in torchvision."""
from functools import partial

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from .._utils import _check_weights
from ..swin_transformer import PatchMerging, SwinTransformerBlock

__all__ = ["SwinTransformer3d", "swin3d_t", "swin3d_s", "swin3d_b"]


def _get_window_and_shift_size(shift_size, size_dhw, window_size):
    for i in range(3):
        if size_dhw[i] <= window_size[i]:
            window_size[i] = size_dhw[i]
            shift_size[i] = 0
    return window_size, shift_size


def _get_relative_position_bias(table, index, window_size):
    vol = window_size[0] * window_size[1] * window_size[2]
    bias = table[index[:vol, :vol].flatten()].view(vol, vol, -1)
    return bias.permute(2, 0, 1).contiguous().unsqueeze(0)


def _compute_pad_size_3d(size_dhw, patch_size):
    return tuple((patch_size[i] - size_dhw[i] % patch_size[i]) % patch_size[i] for i in range(3))


def _compute_attention_mask_3d(x, size_dhw, window_size, shift_size):
    """[num_windows, vol, vol]: 0 within a shifted region, -100 across regions"""
    mask = x.new_zeros(*size_dhw)
    nw = [size_dhw[i] // window_size[i] for i in range(3)]
    slices = [((0, -window_size[i]), (-window_size[i], -shift_size[i]), (-shift_size[i], None))
              for i in range(3)]
    count = 0
    for d in slices[0]:
        for h in slices[1]:
            for w in slices[2]:
                mask[d[0]:d[1], h[0]:h[1], w[0]:w[1]] = count
                count += 1
    mask = mask.view(nw[0], window_size[0], nw[1], window_size[1], nw[2], window_size[2])
    mask = mask.permute(0, 2, 4, 1, 3, 5).reshape(nw[0] * nw[1] * nw[2],
                                                  window_size[0] * window_size[1] * window_size[2])
    mask = mask.unsqueeze(1) - mask.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


def shifted_window_attention_3d(input, qkv_weight, proj_weight, relative_position_bias,
                                window_size, num_heads, shift_size, attention_dropout=0.0,
                                dropout=0.0, qkv_bias=None, proj_bias=None, training=True):
    """window multi-head self-attention on [B, T, H, W, C] with a relative position bias,
    shifted windows (and their mask) where shift_size is non-zero"""
    b, t, h, w, c = input.shape
    pad = _compute_pad_size_3d((t, h, w), window_size)
    x = F.pad(input, (0, 0, 0, pad[2], 0, pad[1], 0, pad[0]))
    _, tp, hp, wp, _ = x.shape
    shifted = sum(shift_size) > 0
    if shifted:
        x = ts.roll(x, shifts=(-shift_size[0], -shift_size[1], -shift_size[2]), dims=(1, 2, 3))
    nt, nh, nw = tp // window_size[0], hp // window_size[1], wp // window_size[2]
    num_windows = nt * nh * nw
    vol = window_size[0] * window_size[1] * window_size[2]
    x = x.view(b, nt, window_size[0], nh, window_size[1], nw, window_size[2], c)
    x = x.permute(0, 1, 3, 5, 2, 4, 6, 7).reshape(b * num_windows, vol, c)
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, c // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    q = q * (c // num_heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1)) + relative_position_bias
    if shifted:
        mask = _compute_attention_mask_3d(x, (tp, hp, wp), window_size, shift_size)
        attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, vol, vol)
        attn = (attn + mask.unsqueeze(1).unsqueeze(0)).view(-1, num_heads, vol, vol)
    attn = F.dropout(F.softmax(attn, dim=-1), p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), vol, c)
    x = F.dropout(F.linear(x, proj_weight, proj_bias), p=dropout, training=training)
    x = x.view(b, nt, nh, nw, window_size[0], window_size[1], window_size[2], c)
    x = x.permute(0, 1, 4, 2, 5, 3, 6, 7).reshape(b, tp, hp, wp, c)
    if shifted:
        x = ts.roll(x, shifts=(shift_size[0], shift_size[1], shift_size[2]), dims=(1, 2, 3))
    return x[:, :t, :h, :w, :].contiguous()


class ShiftedWindowAttention3d(nn.Module):
    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        if len(window_size) != 3 or len(shift_size) != 3:
            raise ValueError("ShiftedWindowAttention3d: window_size and shift_size need 3 "
                             "entries, got %r and %r" % (window_size, shift_size))
        self.window_size = list(window_size)
        self.shift_size = list(shift_size)
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        wd, wh, ww = self.window_size
        self.relative_position_bias_table = nn.Parameter(
            ts.zeros((2 * wd - 1) * (2 * wh - 1) * (2 * ww - 1), num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        coords = ts.stack(ts.meshgrid(ts.arange(wd), ts.arange(wh), ts.arange(ww), indexing="ij"))
        flat = ts.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0)
        index = ((rel[:, :, 0] + (wd - 1)) * ((2 * wh - 1) * (2 * ww - 1))
                 + (rel[:, :, 1] + (wh - 1)) * (2 * ww - 1) + (rel[:, :, 2] + (ww - 1)))
        self.register_buffer("relative_position_index", index.contiguous())

    def get_relative_position_bias(self, window_size):
        return _get_relative_position_bias(self.relative_position_bias_table,
                                           self.relative_position_index, window_size)

    def forward(self, x):
        _, t, h, w, _ = x.shape
        window_size, shift_size = _get_window_and_shift_size(
            list(self.shift_size), [t, h, w], list(self.window_size))
        return shifted_window_attention_3d(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(window_size),
            window_size, self.num_heads, shift_size=shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class PatchEmbed3d(nn.Module):
    def __init__(self, patch_size, in_channels=3, embed_dim=96, norm_layer=None):
        super().__init__()
        self.tuple_patch_size = tuple(patch_size)
        self.proj = nn.Conv3d(in_channels, embed_dim, kernel_size=self.tuple_patch_size,
                              stride=self.tuple_patch_size)
        self.norm = norm_layer(embed_dim) if norm_layer is not None else nn.Identity()

    def forward(self, x):
        _, _, t, h, w = x.shape
        pad = _compute_pad_size_3d((t, h, w), self.tuple_patch_size)
        x = self.proj(F.pad(x, (0, pad[2], 0, pad[1], 0, pad[0])))
        return self.norm(x.permute(0, 2, 3, 4, 1))


class SwinTransformer3d(nn.Module):
    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1, num_classes=400,
                 norm_layer=None, block=None, downsample_layer=PatchMerging, patch_embed=None):
        super().__init__()
        self.num_classes = num_classes
        if block is None:
            block = partial(SwinTransformerBlock, attn_layer=ShiftedWindowAttention3d)
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        patch_embed = patch_embed or PatchEmbed3d
        self.patch_embed = patch_embed(patch_size=patch_size, embed_dim=embed_dim,
                                       norm_layer=norm_layer)
        self.pos_drop = nn.Dropout(p=dropout)
        layers = []
        total = sum(depths)
        bid = 0
        for i_stage, depth in enumerate(depths):
            dim = embed_dim * 2 ** i_stage
            stage = []
            for i_layer in range(depth):
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2
                                               for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout,
                                   attention_dropout=attention_dropout,
                                   stochastic_depth_prob=stochastic_depth_prob * bid / (total - 1),
                                   norm_layer=norm_layer, attn_layer=ShiftedWindowAttention3d))
                bid += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        self.num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(self.num_features)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.head = nn.Linear(self.num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(self.pos_drop(self.patch_embed(x)))
        x = self.norm(x).permute(0, 4, 1, 2, 3)
        return self.head(ts.flatten(self.avgpool(x), 1))


def _swin3d(name, embed_dim, depths, num_heads, weights, kwargs):
    _check_weights(name, weights, kwargs)
    return SwinTransformer3d(patch_size=[2, 4, 4], embed_dim=embed_dim, depths=depths,
                             num_heads=num_heads, window_size=[8, 7, 7],
                             stochastic_depth_prob=0.1, **kwargs)


def swin3d_t(*, weights=None, progress=True, **kwargs):
    return _swin3d("swin3d_t", 96, [2, 2, 6, 2], [3, 6, 12, 24], weights, kwargs)


def swin3d_s(*, weights=None, progress=True, **kwargs):
    return _swin3d("swin3d_s", 96, [2, 2, 18, 2], [3, 6, 12, 24], weights, kwargs)


def swin3d_b(*, weights=None, progress=True, **kwargs):
    return _swin3d("swin3d_b", 128, [2, 2, 18, 2], [4, 8, 16, 32], weights, kwargs)
