"""tessera.nn's modules that run a C module (python/src/nn_cmodule.c): MultiheadAttention,
TransformerEncoderLayer, and the C model zoo (GPT, ResNets).

The C module owns the weights; this Module exposes them as Parameters wrapping the SAME handles
(under PyTorch's dotted names, in a tree of plain child Modules), so state_dict, load_state_dict,
optimizers and Module.to (which moves each handle in place) act on what the C forward reads.
Replacing one of these Parameters by another object is not seen by the C forward (it raises)."""
from .. import _C
from .module import Module
from .parameter import Parameter

Tensor = _C.Tensor


class _CChild(Module):
    """a node of the tree mirroring a C module's children (its forward belongs to the C module)"""

    def __init__(self, name):
        super().__init__()
        object.__setattr__(self, "_c_name", name)

    def _get_name(self):
        return self._c_name

    def forward(self, *args):
        raise RuntimeError("tessera: a part of a C-built module cannot be called on its own")


class CModule(Module):
    """A Module over a C module `c` (a _C.CModule)."""

    def __init__(self, c):
        super().__init__()
        object.__setattr__(self, "_c", c)
        for name, p in c.named_tensors(False, Parameter):
            self._place(name, p, "_parameters")
        for name, b in c.named_tensors(True, Tensor):
            self._place(name, b, "_buffers")

    def _place(self, dotted, tensor, store):
        *path, leaf = dotted.split(".")
        m = self
        for part in path:
            if part not in m._modules:
                m._modules[part] = _CChild(part)
            m = m._modules[part]
        getattr(m, store)[leaf] = tensor

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_parameters", ()) and value is not self._parameters[name]:
            raise AttributeError(f"tessera: {type(self).__name__}.{name} is held by the C module; "
                                 "copy into it (load_state_dict, .data.copy_) instead")
        super().__setattr__(name, value)

    def _sync_mode(self):
        self._c.train(self.training)

    def forward(self, x):
        self._sync_mode()
        return self._c.forward(x)

    def __repr__(self):
        return repr(self._c)


def _to(module, device, dtype):
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)
    return module


class MultiheadAttention(CModule):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or \
                vdim not in (None, embed_dim):
            raise NotImplementedError("tessera: MultiheadAttention(add_bias_kv, add_zero_attn, "
                                      "kdim, vdim)")
        super().__init__(_C._nn_mha(embed_dim, num_heads, float(dropout), bool(bias),
                                    bool(batch_first)))
        object.__setattr__(self, "embed_dim", embed_dim)
        object.__setattr__(self, "num_heads", num_heads)
        object.__setattr__(self, "batch_first", batch_first)
        _to(self, device, dtype)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if need_weights and not average_attn_weights:
            raise NotImplementedError("tessera: MultiheadAttention(average_attn_weights=False)")
        self._sync_mode()
        return self._c.mha(query, key, value, key_padding_mask, attn_mask, bool(is_causal),
                           bool(need_weights))


_ACTIVATIONS = {"relu": 0, "gelu": 1}


class TransformerEncoderLayer(CModule):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        if activation not in _ACTIVATIONS:
            raise NotImplementedError(f"tessera: TransformerEncoderLayer(activation={activation!r})"
                                      "; 'relu' and 'gelu' are supported")
        super().__init__(_C._nn_encoder_layer(d_model, nhead, dim_feedforward, float(dropout),
                                              _ACTIVATIONS[activation], float(layer_norm_eps),
                                              bool(batch_first), bool(norm_first), bool(bias)))
        _to(self, device, dtype)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        self._sync_mode()
        return self._c.encoder_layer(src, src_mask, bool(is_causal), src_key_padding_mask)


class GPT(CModule):
    """The C model zoo's GPT (nn.h: ts_gpt_new): tok_emb, pos_emb, drop, blocks.N, ln_f; the head
    is tied to tok_emb.weight. forward(idx int64 [B, T]) -> logits [B, T, vocab_size]."""

    def __init__(self, vocab_size=256, context=256, n_layer=4, n_head=4, n_embd=256,
                 dropout=0.0, device=None, dtype=None):
        super().__init__(_C._nn_gpt(vocab_size, context, n_layer, n_head, n_embd,
                                    float(dropout)))
        _to(self, device, dtype)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, greedy=False):
        return self._c.generate(idx, int(max_new_tokens), float(temperature),
                                0 if top_k is None else int(top_k), bool(greedy))


def _resnet(depth, cifar, num_classes, in_channels, width, cifar_stem=False,
            zero_init_residual=False):
    c = _C._nn_resnet(depth, cifar, num_classes, in_channels, width, cifar_stem,
                      zero_init_residual)
    m = CModule(c)
    return m


def resnet18(num_classes=1000, in_channels=3, width=64, cifar_stem=False,
             zero_init_residual=False):
    """torchvision's resnet18 (parameter names as torchvision's)"""
    return _resnet(18, False, num_classes, in_channels, width, cifar_stem, zero_init_residual)


def resnet34(num_classes=1000, in_channels=3, width=64, cifar_stem=False,
             zero_init_residual=False):
    return _resnet(34, False, num_classes, in_channels, width, cifar_stem, zero_init_residual)


def resnet50(num_classes=1000, in_channels=3, width=64, cifar_stem=False,
             zero_init_residual=False):
    return _resnet(50, False, num_classes, in_channels, width, cifar_stem, zero_init_residual)


def resnet_cifar(depth, num_classes=10, in_channels=3, width=16, zero_init_residual=False):
    """He et al.'s CIFAR ResNets (depth 6n + 2, option A shortcuts)"""
    return _resnet(depth, True, num_classes, in_channels, width, True, zero_init_residual)


def resnet20(num_classes=10, in_channels=3, width=16, zero_init_residual=False):
    return resnet_cifar(20, num_classes, in_channels, width, zero_init_residual)
