"""tessera.nn's Transformer family beyond the C encoder layer: TransformerEncoder,
TransformerDecoderLayer, TransformerDecoder, Transformer, with PyTorch's parameter names
(encoder.layers.N.self_attn..., decoder.layers.N.multihead_attn..., norm1..3, encoder.norm) so a
PyTorch state dict loads. Built from nn.MultiheadAttention (the C module, cross-attention
included), Linear, LayerNorm and Dropout; the stacks clone their layer with copy.deepcopy as
PyTorch does. Also the Python forward of a TransformerEncoderLayer whose activation is a callable
other than relu / gelu (over the C layer's own weights)."""
import copy

from .. import _C
from . import functional as F
from .container import ModuleList
from .functional_attn import _canonical_mask, multi_head_attention_forward
from .layers import Dropout, LayerNorm, Linear
from .models import MultiheadAttention, TransformerEncoderLayer
from .module import Module


def _param(module, name):
    return module._parameters.get(name)


def _self_attention(layer, x, attn_mask, key_padding_mask, is_causal):
    """the C encoder layer's self_attn (a tree of parameters) applied as PyTorch's _sa_block"""
    a = layer.self_attn
    batched = x.ndim == 3
    if layer.batch_first and batched:
        x = x.transpose(1, 0)
    y, _ = multi_head_attention_forward(
        x, x, x, layer.d_model, layer.nhead, _param(a, "in_proj_weight"),
        _param(a, "in_proj_bias"), None, None, False, layer.dropout_p,
        _param(a.out_proj, "weight"), _param(a.out_proj, "bias"), training=layer.training,
        key_padding_mask=key_padding_mask, need_weights=False, attn_mask=attn_mask,
        is_causal=is_causal)
    return y.transpose(1, 0) if layer.batch_first and batched else y


def encoder_layer_forward(layer, src, src_mask=None, src_key_padding_mask=None,
                          is_causal=False):
    """PyTorch's TransformerEncoderLayer.forward (slow path) with layer.activation, a callable"""
    kpm = _canonical_mask(src_key_padding_mask, "src_key_padding_mask", src.dtype)
    mask = _canonical_mask(src_mask, "src_mask", src.dtype)
    p, training, eps, d = layer.dropout_p, layer.training, layer.layer_norm_eps, layer.d_model

    def norm(name, x):
        n = getattr(layer, name)
        return F.layer_norm(x, (d,), _param(n, "weight"), _param(n, "bias"), eps)

    def sa(x):
        return F.dropout(_self_attention(layer, x, mask, kpm, is_causal), p, training)

    def ff(x):
        l1, l2 = layer.linear1, layer.linear2
        h = layer.activation(F.linear(x, _param(l1, "weight"), _param(l1, "bias")))
        h = F.linear(F.dropout(h, p, training), _param(l2, "weight"), _param(l2, "bias"))
        return F.dropout(h, p, training)

    x = src
    if layer.norm_first:
        x = x + sa(norm("norm1", x))
        return x + ff(norm("norm2", x))
    x = norm("norm1", x + sa(x))
    return norm("norm2", x + ff(x))


def generate_square_subsequent_mask(sz, device=None, dtype=None):
    """float mask [sz, sz]: -inf above the diagonal, 0 elsewhere"""
    return _C.triu(_C.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _detect_is_causal_mask(mask, is_causal, size):
    """PyTorch's: is_causal if given, else whether mask equals the causal mask of its size"""
    if is_causal is not None:
        return bool(is_causal)
    if mask is None:
        return False
    sz = size if size is not None else mask.shape[-2]
    if tuple(mask.shape) != (sz, sz):
        return False
    causal = generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    return bool((mask == causal).all())


def _seq_len(src, batch_first):
    if src.ndim == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        kpm = _canonical_mask(src_key_padding_mask, "src_key_padding_mask", src.dtype)
        mask = _canonical_mask(mask, "mask", src.dtype)
        first = self.layers[0] if len(self.layers) else None
        bf = bool(getattr(first, "batch_first", False))
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, bf))
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, is_causal=is_causal, src_key_padding_mask=kpm)
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), \
            Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerDecoder(Module):
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        first = self.layers[0] if len(self.layers) else None
        bf = bool(getattr(getattr(first, "self_attn", None), "batch_first", False))
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, bf))
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self):
        from . import init
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.ndim == 3
        if batched and src.shape[0 if self.batch_first else 1] != \
                tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    generate_square_subsequent_mask = staticmethod(generate_square_subsequent_mask)
