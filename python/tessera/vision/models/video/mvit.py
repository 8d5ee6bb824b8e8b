"""torchvision.models.video.mvit: MViT V1 (mvit_v1_b) and V2 (mvit_v2_s) with torchvision's
module and state-dict names (conv_proj, pos_encoding, blocks.N.attn.{qkv, project, pool_q / k / v,
rel_pos_h / w / t}, norm, head). The clip is [N, 3, 16, 224, 224] (the builders fix
spatial_size=(224, 224), temporal_size=16, as torchvision's). torchvision's in-place adds (the
relative position bias on attn[:, :, 1:, 1:], the pooled-query residual on x[:, :, 1:]) are
written as adds of the zero-padded term: the same numbers."""
import math
from dataclasses import dataclass
from functools import partial

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from ...ops.misc import MLP
from .._utils import StochasticDepth, _check_weights

__all__ = ["MViT", "mvit_v1_b", "mvit_v2_s"]


@dataclass
class MSBlockConfig:
    num_heads: int
    input_channels: int
    output_channels: int
    kernel_q: list
    kernel_kv: list
    stride_q: list
    stride_kv: list


def _prod(s):
    p = 1
    for v in s:
        p *= v
    return p


class Pool(nn.Module):
    """a pooling (strided depthwise Conv3d or MaxPool3d) of the tokens but the class token, on
    their [T, H, W] grid, then the norm: [B, (heads,) N, C] -> [B, (heads,) N', C]"""

    def __init__(self, pool, norm, activation=None, norm_before_pool=False):
        super().__init__()
        self.pool = pool
        layers = [m for m in (norm, activation) if m is not None]
        self.norm_act = nn.Sequential(*layers) if layers else None
        self.norm_before_pool = norm_before_pool

    def forward(self, x, thw):
        three = x.dim() == 3
        if three:
            x = x.unsqueeze(1)
        elif x.dim() != 4:
            raise ValueError("MViT Pool: unsupported input shape %s" % (tuple(x.shape),))
        cls, x = x[:, :, :1], x[:, :, 1:]
        x = x.transpose(2, 3)
        b, n, c = x.shape[:3]
        x = x.reshape((b * n, c) + tuple(thw)).contiguous()
        if self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        x = self.pool(x)
        t, h, w = x.shape[2:]
        x = ts.cat((cls, x.reshape(b, n, c, -1).transpose(2, 3)), dim=2)
        if not self.norm_before_pool and self.norm_act is not None:
            x = self.norm_act(x)
        if three:
            x = x.squeeze(1)
        return x, (t, h, w)


def _interpolate(embedding, d):
    if embedding.shape[0] == d:
        return embedding
    return F.interpolate(embedding.permute(1, 0).unsqueeze(0), size=d,
                         mode="linear").squeeze(0).permute(1, 0)


def _rel_index(q, k, device):
    """torchvision's dist.long(): q_i * max(k/q, 1) - (k_j + 1 - k) * max(q/k, 1), truncated"""
    qr, kr = max(k / q, 1.0), max(q / k, 1.0)
    idx = [[int(i * qr - (j + (1.0 - k)) * kr) for j in range(k)] for i in range(q)]
    return ts.tensor(idx, dtype=ts.int64, device=device)


def _add_rel_pos(attn, q, q_thw, k_thw, rel_pos_h, rel_pos_w, rel_pos_t):
    q_t, q_h, q_w = q_thw
    k_t, k_h, k_w = k_thw
    rh = _interpolate(rel_pos_h, int(2 * max(q_h, k_h) - 1))[_rel_index(q_h, k_h, q.device)]
    rw = _interpolate(rel_pos_w, int(2 * max(q_w, k_w) - 1))[_rel_index(q_w, k_w, q.device)]
    rt = _interpolate(rel_pos_t, int(2 * max(q_t, k_t) - 1))[_rel_index(q_t, k_t, q.device)]
    b, nh, _, dim = q.shape
    r_q = q[:, :, 1:].reshape(b, nh, q_t, q_h, q_w, dim)
    rel_h = ts.einsum("bythwc,hkc->bythwk", r_q, rh)
    rel_w = ts.einsum("bythwc,wkc->bythwk", r_q, rw)
    r_q = r_q.permute(2, 0, 1, 3, 4, 5).reshape(q_t, b * nh * q_h * q_w, dim)
    rel_t = ts.matmul(r_q, rt.transpose(1, 2)).transpose(0, 1)
    rel_t = rel_t.view(b, nh, q_h, q_w, q_t, k_t).permute(0, 1, 4, 2, 3, 5)
    rel = (rel_h[:, :, :, :, :, None, :, None] + rel_w[:, :, :, :, :, None, None, :]
           + rel_t[:, :, :, :, :, :, None, None]).reshape(b, nh, q_t * q_h * q_w,
                                                          k_t * k_h * k_w)
    return attn + F.pad(rel, (1, 0, 1, 0))  # torchvision: attn[:, :, 1:, 1:] += rel


def _add_shortcut(x, shortcut, residual_with_cls_embed):
    if residual_with_cls_embed:
        return x + shortcut
    return x + F.pad(shortcut[:, :, 1:, :], (0, 0, 1, 0))  # torchvision: x[:, :, 1:] += ...


class MultiscaleAttention(nn.Module):
    def __init__(self, input_size, embed_dim, output_dim, num_heads, kernel_q, kernel_kv,
                 stride_q, stride_kv, residual_pool, residual_with_cls_embed, rel_pos_embed,
                 dropout=0.0, norm_layer=nn.LayerNorm):
        super().__init__()
        self.embed_dim = embed_dim
        self.output_dim = output_dim
        self.num_heads = num_heads
        self.head_dim = output_dim // num_heads
        self.scaler = 1.0 / math.sqrt(self.head_dim)
        self.residual_pool = residual_pool
        self.residual_with_cls_embed = residual_with_cls_embed
        self.qkv = nn.Linear(embed_dim, 3 * output_dim)
        layers = [nn.Linear(output_dim, output_dim)]
        if dropout > 0.0:
            layers.append(nn.Dropout(dropout, inplace=True))
        self.project = nn.Sequential(*layers)
        hd = self.head_dim

        def conv_pool(kernel, stride):
            return Pool(nn.Conv3d(hd, hd, kernel, stride=stride, padding=[k // 2 for k in kernel],
                                  groups=hd, bias=False), norm_layer(hd))
        self.pool_q = None
        if _prod(kernel_q) > 1 or _prod(stride_q) > 1:
            self.pool_q = conv_pool(kernel_q, stride_q)
        self.pool_k = self.pool_v = None
        if _prod(kernel_kv) > 1 or _prod(stride_kv) > 1:
            self.pool_k = conv_pool(kernel_kv, stride_kv)
            self.pool_v = conv_pool(kernel_kv, stride_kv)
        self.rel_pos_h = self.rel_pos_w = self.rel_pos_t = None
        if rel_pos_embed:
            size = max(input_size[1:])
            q_size = size // stride_q[1] if len(stride_q) > 0 else size
            kv_size = size // stride_kv[1] if len(stride_kv) > 0 else size
            spatial_dim = 2 * max(q_size, kv_size) - 1
            self.rel_pos_h = nn.Parameter(ts.zeros(spatial_dim, hd))
            self.rel_pos_w = nn.Parameter(ts.zeros(spatial_dim, hd))
            self.rel_pos_t = nn.Parameter(ts.zeros(2 * input_size[0] - 1, hd))
            for p in (self.rel_pos_h, self.rel_pos_w, self.rel_pos_t):
                nn.init.trunc_normal_(p, std=0.02)

    def forward(self, x, thw):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).transpose(
            1, 3).unbind(dim=2)
        k, k_thw = self.pool_k(k, thw) if self.pool_k is not None else (k, thw)
        if self.pool_v is not None:
            v = self.pool_v(v, thw)[0]
        if self.pool_q is not None:
            q, thw = self.pool_q(q, thw)
        attn = ts.matmul(self.scaler * q, k.transpose(2, 3))
        if self.rel_pos_h is not None:
            attn = _add_rel_pos(attn, q, thw, k_thw, self.rel_pos_h, self.rel_pos_w,
                                self.rel_pos_t)
        x = ts.matmul(attn.softmax(dim=-1), v)
        if self.residual_pool:
            x = _add_shortcut(x, q, self.residual_with_cls_embed)
        x = x.transpose(1, 2).reshape(b, -1, self.output_dim)
        return self.project(x), thw


class MultiscaleBlock(nn.Module):
    def __init__(self, input_size, cnf, residual_pool, residual_with_cls_embed, rel_pos_embed,
                 proj_after_attn, dropout=0.0, stochastic_depth_prob=0.0,
                 norm_layer=nn.LayerNorm):
        super().__init__()
        self.proj_after_attn = proj_after_attn
        self.pool_skip = None
        if _prod(cnf.stride_q) > 1:
            kernel_skip = [s + 1 if s > 1 else s for s in cnf.stride_q]
            self.pool_skip = Pool(nn.MaxPool3d(kernel_skip, stride=cnf.stride_q,
                                               padding=[k // 2 for k in kernel_skip]), None)
        attn_dim = cnf.output_channels if proj_after_attn else cnf.input_channels
        self.norm1 = norm_layer(cnf.input_channels)
        self.norm2 = norm_layer(attn_dim)
        self.needs_transposal = isinstance(self.norm1, nn.BatchNorm1d)
        self.attn = MultiscaleAttention(
            input_size, cnf.input_channels, attn_dim, cnf.num_heads, kernel_q=cnf.kernel_q,
            kernel_kv=cnf.kernel_kv, stride_q=cnf.stride_q, stride_kv=cnf.stride_kv,
            rel_pos_embed=rel_pos_embed, residual_pool=residual_pool,
            residual_with_cls_embed=residual_with_cls_embed, dropout=dropout,
            norm_layer=norm_layer)
        self.mlp = MLP(attn_dim, [4 * attn_dim, cnf.output_channels], activation_layer=nn.GELU,
                       dropout=dropout, inplace=None)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.project = None
        if cnf.input_channels != cnf.output_channels:
            self.project = nn.Linear(cnf.input_channels, cnf.output_channels)

    def _norm(self, norm, x):
        return norm(x.transpose(1, 2)).transpose(1, 2) if self.needs_transposal else norm(x)

    def forward(self, x, thw):
        x_norm1 = self._norm(self.norm1, x)
        x_attn, thw_new = self.attn(x_norm1, thw)
        if self.project is not None and self.proj_after_attn:
            x = self.project(x_norm1)
        x_skip = x if self.pool_skip is None else self.pool_skip(x, thw)[0]
        x = x_skip + self.stochastic_depth(x_attn)
        x_norm2 = self._norm(self.norm2, x)
        x_proj = x if self.project is None or self.proj_after_attn else self.project(x_norm2)
        return x_proj + self.stochastic_depth(self.mlp(x_norm2)), thw_new


class PositionalEncoding(nn.Module):
    def __init__(self, embed_size, spatial_size, temporal_size, rel_pos_embed):
        super().__init__()
        self.spatial_size = tuple(spatial_size)
        self.temporal_size = temporal_size
        self.class_token = nn.Parameter(ts.zeros(embed_size))
        self.spatial_pos = self.temporal_pos = self.class_pos = None
        if not rel_pos_embed:
            self.spatial_pos = nn.Parameter(ts.zeros(spatial_size[0] * spatial_size[1],
                                                     embed_size))
            self.temporal_pos = nn.Parameter(ts.zeros(temporal_size, embed_size))
            self.class_pos = nn.Parameter(ts.zeros(embed_size))

    def forward(self, x):
        x = ts.cat((self.class_token.expand(x.size(0), -1).unsqueeze(1), x), dim=1)
        if self.spatial_pos is not None:
            hw, e = self.spatial_pos.shape
            pos = ts.repeat_interleave(self.temporal_pos, hw, dim=0) + self.spatial_pos.unsqueeze(
                0).expand(self.temporal_size, -1, -1).reshape(-1, e)
            x = x + ts.cat((self.class_pos.unsqueeze(0), pos), dim=0).unsqueeze(0)
        return x


class MViT(nn.Module):
    def __init__(self, spatial_size, temporal_size, block_setting, residual_pool,
                 residual_with_cls_embed, rel_pos_embed, proj_after_attn, dropout=0.5,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, num_classes=400, block=None,
                 norm_layer=None, patch_embed_kernel=(3, 7, 7), patch_embed_stride=(2, 4, 4),
                 patch_embed_padding=(1, 3, 3)):
        super().__init__()
        total = len(block_setting)
        if total == 0:
            raise ValueError("MViT: block_setting is empty")
        block = block or MultiscaleBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.conv_proj = nn.Conv3d(3, block_setting[0].input_channels,
                                   kernel_size=patch_embed_kernel, stride=patch_embed_stride,
                                   padding=patch_embed_padding)
        input_size = [s // st for s, st in zip((temporal_size,) + tuple(spatial_size),
                                               patch_embed_stride)]
        self.pos_encoding = PositionalEncoding(block_setting[0].input_channels,
                                               (input_size[1], input_size[2]), input_size[0],
                                               rel_pos_embed)
        self.blocks = nn.ModuleList()
        for i, cnf in enumerate(block_setting):
            self.blocks.append(block(
                input_size=input_size, cnf=cnf, residual_pool=residual_pool,
                residual_with_cls_embed=residual_with_cls_embed, rel_pos_embed=rel_pos_embed,
                proj_after_attn=proj_after_attn, dropout=attention_dropout,
                stochastic_depth_prob=stochastic_depth_prob * i / (total - 1.0),
                norm_layer=norm_layer))
            if len(cnf.stride_q) > 0:
                input_size = [s // st for s, st in zip(input_size, cnf.stride_q)]
        self.norm = norm_layer(block_setting[-1].output_channels)
        self.head = nn.Sequential(nn.Dropout(dropout, inplace=True),
                                  nn.Linear(block_setting[-1].output_channels, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                if m.weight is not None:
                    nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, PositionalEncoding):
                for p in m.parameters():
                    nn.init.trunc_normal_(p, std=0.02)

    def forward(self, x):
        if x.dim() == 4:
            x = x.unsqueeze(2)
        elif x.dim() != 5:
            raise ValueError("MViT: input must be [N, C, T, H, W], got %s" % (tuple(x.shape),))
        x = self.conv_proj(x)
        thw = (self.pos_encoding.temporal_size,) + self.pos_encoding.spatial_size
        if tuple(x.shape[2:]) != thw:
            raise ValueError("MViT: the clip gives a %s token grid, the position encoding is for "
                             "%s (build with spatial_size / temporal_size of the clip)"
                             % (tuple(x.shape[2:]), thw))
        x = self.pos_encoding(x.flatten(2).transpose(1, 2))
        for blk in self.blocks:
            x, thw = blk(x, thw)
        return self.head(self.norm(x)[:, 0])


_V1 = [(1, 96, 192, [], [1, 8, 8]), (2, 192, 192, [1, 2, 2], [1, 4, 4]),
       (2, 192, 384, [], [1, 4, 4]), (4, 384, 384, [1, 2, 2], [1, 2, 2])] + \
    [(4, 384, 384, [], [1, 2, 2])] * 9 + [(4, 384, 768, [], [1, 2, 2]),
                                          (8, 768, 768, [1, 2, 2], [1, 1, 1]),
                                          (8, 768, 768, [], [1, 1, 1])]
_V2 = [(1, 96, 96, [1, 1, 1], [1, 8, 8]), (2, 96, 192, [1, 2, 2], [1, 4, 4]),
       (2, 192, 192, [1, 1, 1], [1, 4, 4]), (4, 192, 384, [1, 2, 2], [1, 2, 2])] + \
    [(4, 384, 384, [1, 1, 1], [1, 2, 2])] * 10 + [(8, 384, 768, [1, 2, 2], [1, 1, 1]),
                                                  (8, 768, 768, [1, 1, 1], [1, 1, 1])]


def _settings(rows, all_q):
    """MSBlockConfig per block: (heads, in, out, stride_q, stride_kv); kernel_kv 3x3x3 always,
    kernel_q 3x3x3 where the query is pooled (every block in V2)"""
    k3 = [3, 3, 3]
    return [MSBlockConfig(h, i, o, list(k3) if (all_q or sq) else [], list(k3), list(sq),
                          list(skv)) for h, i, o, sq, skv in rows]


def _mvit(name, block_setting, weights, kwargs, **fixed):
    _check_weights(name, weights, kwargs)
    sd = kwargs.pop("stochastic_depth_prob", 0.2)
    return MViT(spatial_size=(224, 224), temporal_size=16, block_setting=block_setting,
                stochastic_depth_prob=sd, **fixed, **kwargs)


def mvit_v1_b(*, weights=None, progress=True, **kwargs):
    return _mvit("mvit_v1_b", _settings(_V1, False), weights, kwargs, residual_pool=False,
                 residual_with_cls_embed=False, rel_pos_embed=False, proj_after_attn=False)


def mvit_v2_s(*, weights=None, progress=True, **kwargs):
    return _mvit("mvit_v2_s", _settings(_V2, True), weights, kwargs, residual_pool=True,
                 residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True)
