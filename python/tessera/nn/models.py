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


def _cmake(factory, *args):
    """(the C module _C.<factory>(*args) builds, the recipe that builds it again on unpickling)"""
    return getattr(_C, factory)(*args), (factory, args)


class CModule(Module):
    """A Module over a C module `c` (a _C.CModule). `recipe` (from _cmake) lets it pickle: the
    state holds the recipe and the C tensors by dotted name, and unpickling builds the C module
    again and copies the values in (torch.save(model) of a whole module)."""

    def __init__(self, c, recipe=None):
        super().__init__()
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_c_recipe", recipe)
        self._place_all(c)

    def _place_all(self, c):
        for name, p in c.named_tensors(False, Parameter):
            self._place(name, p, "_parameters")
        for name, b in c.named_tensors(True, Tensor):
            self._place(name, b, "_buffers")

    def _from_torch_state(self, state):
        """a module PyTorch pickled (its own attributes, no recipe): the state with the recipe
        the class derives from those attributes (_torch_recipe), or None once restored as a
        plain Module (a class without one)"""
        import collections
        maker = getattr(type(self), "_torch_recipe", None)
        recipe = maker(state) if maker is not None and "_parameters" in state else None
        if recipe is None:
            super().__setstate__(state)
            return None
        state = dict(state, _c_recipe=recipe, _c_parameters=state["_parameters"],
                     _c_buffers=state.get("_buffers") or collections.OrderedDict())
        state["_parameters"], state["_buffers"] = (collections.OrderedDict(),
                                                   collections.OrderedDict())
        state.setdefault("_modules", collections.OrderedDict())
        return state

    def _leaf(self, dotted, store):
        *path, leaf = dotted.split(".")
        m = self
        for part in path:
            m = m._modules[part]
        return getattr(m, store)[leaf]

    def __getstate__(self):
        if self.__dict__.get("_c") is None:
            return super().__getstate__()
        if self._c_recipe is None:
            raise TypeError(f"tessera: cannot pickle {type(self).__name__}: its C module has no "
                            "recipe; save its state_dict() instead")
        import collections
        state = self.__dict__.copy()
        del state["_c"]
        c_names = {}
        for store, buffers in (("_parameters", False), ("_buffers", True)):
            named = collections.OrderedDict(
                (n, self._leaf(n, store)) for n, _ in self._c.named_tensors(buffers, Tensor))
            state["_c" + store] = named
            c_names[store] = {n for n in named if "." not in n}
            state[store] = collections.OrderedDict(
                (k, v) for k, v in self.__dict__[store].items() if k not in c_names[store])
        state["_modules"] = collections.OrderedDict(
            (k, v) for k, v in self._modules.items() if not isinstance(v, _CChild))
        return state

    def __setstate__(self, state):
        if state.get("_c_parameters") is None:
            state = self._from_torch_state(state)
            if state is None:
                return
        recipe = state["_c_recipe"]
        from ..autograd import no_grad
        saved = {"_parameters": state.pop("_c_parameters"), "_buffers": state.pop("_c_buffers")}
        rest = {k: state.pop(k) for k in ("_parameters", "_buffers", "_modules")}
        c = getattr(_C, recipe[0])(*recipe[1])
        Module.__init__(self)
        self.__dict__.update(state)
        object.__setattr__(self, "_c", c)
        self._place_all(c)
        for store in ("_parameters", "_buffers", "_modules"):
            self.__dict__[store].update(rest[store])
        with no_grad():
            for store in ("_parameters", "_buffers"):
                for name, old in saved[store].items():
                    if old is None:
                        continue
                    try:
                        new = self._leaf(name, store)
                    except KeyError:
                        raise RuntimeError(f"tessera: unpickling {type(self).__name__}: the file "
                                           f"has {name}, which its C module does not") from None
                    if old.shape != new.shape:
                        raise RuntimeError(f"tessera: unpickling {type(self).__name__}: {name} "
                                           f"has shape {tuple(old.shape)}, the module "
                                           f"{tuple(new.shape)}")
                    _C._nn_move_(new, old.device, old.dtype)
                    if old.is_shared() and old.device.type == "cpu":
                        new.set_(old)  # shared memory (tessera.multiprocessing): the same pages
                    else:
                        new.copy_(old)
                    new.requires_grad_(old.requires_grad)
        self._sync_mode()

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


def _copy_c_module(self, memo):
    """copy.deepcopy of a C-backed module: the same constructor call, then the values, the
    training flag and the Python attributes (nn.TransformerEncoder clones its layer this way)"""
    import copy
    args, kwargs = copy.deepcopy(self._ctor, memo)  # an activation Module is copied too
    p0 = next(iter(self._c_tensors()), None)
    kw = dict(kwargs, device=None if p0 is None else p0.device,
              dtype=None if p0 is None else p0.dtype)
    new = type(self)(*args, **kw)
    memo[id(self)] = new
    from ..autograd import no_grad
    with no_grad():
        for a, b in zip(self._c_tensors(), new._c_tensors()):
            b.copy_(a)
            b.requires_grad_(a.requires_grad)
    for k, v in self.__dict__.items():
        if k not in new.__dict__ and k != "_c":
            object.__setattr__(new, k, copy.deepcopy(v, memo))
    new.train(self.training)
    return new


class MultiheadAttention(CModule):
    """PyTorch's nn.MultiheadAttention. The C module (src/nn/mha.c) holds the weights and runs
    the forward; what it lacks (add_bias_kv, add_zero_attn, kdim/vdim != embed_dim: the weights
    are then Python Parameters; per-head weights) runs F.multi_head_attention_forward."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        same = kdim == embed_dim and vdim == embed_dim
        if add_bias_kv or add_zero_attn or not same:
            self._py_init(embed_dim, num_heads, dropout, bias, add_bias_kv, kdim, vdim,
                          device, dtype)
        else:
            super().__init__(*_cmake("_nn_mha", embed_dim, num_heads, float(dropout), bool(bias),
                                     bool(batch_first)))
            self.register_parameter("bias_k", None)  # kept off the C module's tensor list
            self.register_parameter("bias_v", None)
        for k, v in (("embed_dim", embed_dim), ("num_heads", num_heads), ("kdim", kdim),
                     ("vdim", vdim), ("_qkv_same_embed_dim", same), ("dropout", float(dropout)),
                     ("batch_first", batch_first), ("head_dim", embed_dim // num_heads),
                     ("add_zero_attn", add_zero_attn),
                     ("_ctor", ((embed_dim, num_heads), dict(
                         dropout=dropout, bias=bias, add_bias_kv=add_bias_kv,
                         add_zero_attn=add_zero_attn, kdim=kdim, vdim=vdim,
                         batch_first=batch_first)))):
            object.__setattr__(self, k, v)
        if self._c is not None:
            _to(self, device, dtype)

    def _py_init(self, e, h, dropout, bias, add_bias_kv, kdim, vdim, device, dtype):
        """the weights as Python Parameters, PyTorch's names, order and initialisation"""
        from . import init
        from .layers import Linear
        Module.__init__(self)
        object.__setattr__(self, "_c", None)
        if e <= 0 or h <= 0 or e % h:
            raise AssertionError(f"embed_dim must be divisible by num_heads, got {e} and {h}")

        def new(*shape):
            return Parameter(_C.empty(*shape, device=device, dtype=dtype))
        if kdim == e and vdim == e:
            self.in_proj_weight = new(3 * e, e)
            for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(n, None)
        else:
            self.q_proj_weight, self.k_proj_weight = new(e, e), new(e, kdim)
            self.v_proj_weight = new(e, vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = new(3 * e)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = new(1, 1, e), new(1, 1, e)
        else:
            self.bias_k = self.bias_v = None
        if self.in_proj_weight is not None:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if bias:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if add_bias_kv:
            for t in (self.bias_k, self.bias_v):  # xavier_normal_: fan_in = fan_out = e
                init.normal_(t, 0.0, (1.0 / e) ** 0.5)

    def _c_tensors(self):
        return [p for _, p in self.named_parameters()]

    def __setattr__(self, name, value):
        if self.__dict__.get("_c") is None:  # Python-held weights: replaceable as PyTorch's
            Module.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def __deepcopy__(self, memo):
        if self._c is None:
            import copy
            new = type(self).__new__(type(self))
            memo[id(self)] = new
            for k, v in self.__dict__.items():
                object.__setattr__(new, k, copy.deepcopy(v, memo))
            return new
        return _copy_c_module(self, memo)

    def _sync_mode(self):
        if self._c is not None:
            self._c.train(self.training)

    def __repr__(self):
        if self._c is not None:
            return repr(self._c)
        return Module.__repr__(self)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if self._c is not None and (average_attn_weights or not need_weights):
            self._sync_mode()
            return self._c.mha(query, key, value, key_padding_mask, attn_mask, bool(is_causal),
                               bool(need_weights))
        from .functional_attn import multi_head_attention_forward
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        same = self._qkv_same_embed_dim
        out, w = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not same,
            q_proj_weight=None if same else self.q_proj_weight,
            k_proj_weight=None if same else self.k_proj_weight,
            v_proj_weight=None if same else self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, w


_ACTIVATIONS = {"relu": 0, "gelu": 1}


def _builtin_activation(activation):
    """the C layer's code of an activation given as PyTorch allows (a name, F.relu / F.gelu, an
    nn.ReLU / nn.GELU()), or None: another callable, run by the Python forward"""
    from . import functional as F
    from .layers import GELU, ReLU
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise RuntimeError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    if activation is F.relu or isinstance(activation, ReLU):
        return 0
    if activation is F.gelu or (isinstance(activation, GELU) and
                                getattr(activation, "approximate", "none") == "none"):
        return 1
    if not callable(activation):
        raise TypeError(f"TransformerEncoderLayer: activation must be a string or a callable, "
                        f"got {type(activation).__name__}")
    return None


class TransformerEncoderLayer(CModule):
    """PyTorch's nn.TransformerEncoderLayer over the C layer (src/nn/transformer.c), which holds
    the weights; an activation other than relu / gelu (any callable) runs the same layer in
    Python over the same weights (transformer.py: encoder_layer_forward)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        code = _builtin_activation(activation)
        super().__init__(*_cmake("_nn_encoder_layer", d_model, nhead, dim_feedforward,
                                 float(dropout), 0 if code is None else code,
                                 float(layer_norm_eps), bool(batch_first), bool(norm_first),
                                 bool(bias)))
        for k, v in (("d_model", d_model), ("nhead", nhead), ("dropout_p", float(dropout)),
                     ("layer_norm_eps", float(layer_norm_eps)), ("batch_first", batch_first),
                     ("norm_first", norm_first), ("_act_code", code),
                     ("_ctor", ((d_model, nhead), dict(
                         dim_feedforward=dim_feedforward, dropout=dropout,
                         activation=activation, layer_norm_eps=layer_norm_eps,
                         batch_first=batch_first, norm_first=norm_first, bias=bias)))):
            object.__setattr__(self, k, v)
        if code is None:
            if isinstance(activation, Module):
                self.activation = activation  # a child, as PyTorch registers it
            else:
                object.__setattr__(self, "activation", activation)
        _to(self, device, dtype)

    def _c_tensors(self):
        return [t for _, t in self._c.named_tensors(False, Tensor)]

    def __deepcopy__(self, memo):
        return _copy_c_module(self, memo)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        if self._act_code is None:
            from .transformer import encoder_layer_forward
            return encoder_layer_forward(self, src, src_mask, src_key_padding_mask, is_causal)
        self._sync_mode()
        return self._c.encoder_layer(src, src_mask, bool(is_causal), src_key_padding_mask)


class GPT(CModule):
    """The C model zoo's GPT (nn.h: ts_gpt_new): tok_emb, pos_emb, drop, blocks.N, ln_f; the head
    is tied to tok_emb.weight. forward(idx int64 [B, T]) -> logits [B, T, vocab_size]."""

    def __init__(self, vocab_size=256, context=256, n_layer=4, n_head=4, n_embd=256,
                 dropout=0.0, device=None, dtype=None):
        super().__init__(*_cmake("_nn_gpt", vocab_size, context, n_layer, n_head, n_embd,
                                 float(dropout)))
        _to(self, device, dtype)

    def checkpoint_blocks(self, every=1, sublayers=False):
        """Activation checkpointing (nn.h: ts_gpt_checkpoint_blocks): block i recomputes its
        activations in backward when every > 0 and i % every == 0 (0: none); with sublayers its
        attention and feed-forward are checkpointed each on its own (ts_gpt_checkpoint_sublayers),
        so a backward holds one sublayer's recomputation at a time. Returns self."""
        self._c.checkpoint_blocks(int(every), bool(sublayers))
        return self

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, greedy=False):
        return self._c.generate(idx, int(max_new_tokens), float(temperature),
                                0 if top_k is None else int(top_k), bool(greedy))


def _resnet(depth, cifar, num_classes, in_channels, width, cifar_stem=False,
            zero_init_residual=False):
    return CModule(*_cmake("_nn_resnet", depth, cifar, num_classes, in_channels, width,
                           cifar_stem, zero_init_residual))


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
