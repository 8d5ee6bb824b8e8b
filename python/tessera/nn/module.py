"""tessera.nn.Module — PyTorch's Module in pure Python: registration, traversal, state dicts,
train/eval, moves between devices and dtypes (in place: Parameter objects keep their identity)."""
import warnings
from collections import OrderedDict, namedtuple

from .. import _C
from .parameter import Parameter

Tensor = _C.Tensor

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _assign_tensor(dst, src):
    """load_state_dict(assign=True)'s step: dst shares src's storage, shape, device and dtype."""
    dst.data = src
    if dst.grad is not None:
        dst.grad = None


def _parse_to(args, kwargs):
    """Module.to's arguments -> (device or None, dtype or None), as torch._C._nn._parse_to."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    # memory_format: accepted; Tessera keeps weights OIHW, and a convolution's output follows its
    # input's format (a channels_last input stays channels_last), so nothing moves here
    fmt = kwargs.pop("memory_format", None)
    if fmt is not None and not hasattr(fmt, "_ts_memory_format"):
        raise TypeError(f"to() argument 'memory_format' must be torch.memory_format, not "
                        f"{type(fmt).__name__}")
    tensor = kwargs.pop("tensor", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, Tensor):
            tensor = a
        elif isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, bool):  # non_blocking
            continue
        elif a is not None:
            device = a
    if tensor is not None:
        device, dtype = tensor.device, tensor.dtype
    if dtype is not None and not getattr(dtype, "is_floating_point", True):
        raise TypeError("nn.Module.to only accepts floating point dtypes, but got desired "
                        f"dtype={dtype}")
    return device, dtype


class Module:
    """Base class of every layer and model. Subclasses set attributes in __init__ (Parameters,
    Modules and buffers are registered by __setattr__) and define forward()."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())

    # ------------------------------------------------------------------ registration
    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")

    def register_parameter(self, name, param):
        self._check_init()
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if getattr(param, "grad_fn", None) is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_init()
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._check_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')

    def _remove_everywhere(self, name, keep=None):
        """name out of every registry but `keep` (PyTorch's remove_from: a parameter or child
        assigned again keeps its place in the order)"""
        for d in (self.__dict__, self._parameters, self._buffers, self._modules):
            if d is not keep:
                d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_everywhere(name, keep=params)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_everywhere(name, keep=self._modules)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            self._modules[name] = None
        elif params is not None and isinstance(value, Tensor) and \
                getattr(value, "_is_buffer", False):           # nn.Buffer(t, persistent=...)
            self._remove_everywhere(name, keep=self._buffers)
            self.register_buffer(name, value, persistent=getattr(value, "persistent", True))
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers)
        return sorted(set(keys + list(self._modules)))

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate and id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, m in mods:
            for k, v in getattr(m, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{m._get_name()} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        mod, _, name = target.rpartition(".")
        return getattr(self.get_submodule(mod), name)

    # ------------------------------------------------------------------ state dicts
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        return destination

    def _local_state(self):
        out = OrderedDict((k, v) for k, v in self._parameters.items() if v is not None)
        out.update((k, v) for k, v in self._buffers.items()
                   if v is not None and k not in self._non_persistent_buffers_set)
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies the values into this module's tensors (their objects stay). Errors are PyTorch's:
        RuntimeError listing missing / unexpected keys (strict) and size mismatches; nothing is
        copied when any is found. assign=True (PyTorch's, for a module built on the meta device):
        each parameter and buffer takes the state dict's tensor itself instead — its storage,
        device and dtype, shared, not copied — keeping its requires_grad and losing its grad. The
        module's Tensor objects stay (a C module or an optimizer holding them follows)."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = OrderedDict()
        custom = []  # modules that load keys of their own (tessera.ao.nn.quantized's)
        for prefix_name, m in self.named_modules(remove_duplicate=False):
            for k, v in m._local_state().items():
                own[prefix_name + ("." if prefix_name else "") + k] = v
            keys = getattr(m, "_custom_state_keys", None)
            if keys is not None:
                pre = prefix_name + ("." if prefix_name else "")
                custom.append((m, pre))
                own.update((pre + k, None) for k in keys())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        pairs = []
        for k, dst in own.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            if dst is None:  # a custom key: its module's _load_custom_state reads it
                continue
            if not isinstance(src, Tensor):
                errors.append(f'While copying the parameter named "{k}", expected torch.Tensor or '
                              f"Tensor-like object from checkpoint but received {type(src)}")
                continue
            if tuple(src.shape) != tuple(dst.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape {src.shape} from "
                              f"checkpoint, the shape in current model is {dst.shape}.")
                continue
            pairs.append((dst, src))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(errors)))
        for dst, src in pairs:
            if assign:
                _assign_tensor(dst, src)
                continue
            if dst.is_meta and not src.is_meta:
                warnings.warn("copying from a non-meta parameter in the checkpoint to a meta "
                              "parameter in the current model, which is a no-op. (Did you mean "
                              "to pass `assign=True` to assign items in the state dictionary to "
                              "their corresponding key in the module instead of copying them in "
                              "place?)")
            _C._nn_assign_(dst, src)
        for m, pre in custom:
            if all(pre + k in state_dict for k in m._custom_state_keys()):
                m._load_custom_state(state_dict, pre)
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ modes, grads, moves
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        _C._nn_zero_grad(list(self.parameters()), set_to_none)

    def _tensors(self):
        """every parameter and buffer once (shared ones too)"""
        seen = set()
        for m in self.modules():
            for t in list(m._parameters.values()) + list(m._buffers.values()):
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield t

    def to(self, *args, **kwargs):
        """Moves / casts every parameter and buffer IN PLACE (their gradients follow): the Tensor
        objects stay the same, so optimizers made before keep working (PyTorch's behaviour)."""
        device, dtype = _parse_to(args, dict(kwargs))
        for t in self._tensors():
            cast = dtype if dtype is not None and t.is_floating_point() else None
            _C._nn_move_(t, device, cast)
        return self

    def to_empty(self, *, device, recurse=True):
        """Gives every parameter and buffer (and gradient) new, uninitialised memory on `device`,
        keeping shapes, dtypes and the Tensor objects: how a module built on the meta device gets
        real tensors (then initialise or load them). recurse=False: this module's own only."""
        from .. import empty_like
        if recurse:
            tensors = list(self._tensors())
        else:
            tensors = [t for t in list(self._parameters.values()) + list(self._buffers.values())
                       if t is not None]
        for t in tensors:
            g = t.grad
            t.data = empty_like(t, device=device)
            if g is not None:
                g.data = empty_like(g, device=device)
        return self

    def share_memory(self):
        """Moves every parameter and buffer (and a gradient that exists already) into shared
        memory in place (Tensor.share_memory_): processes given the module by
        tessera.multiprocessing then train the same tensors. Gradients made later are not shared
        (PyTorch's behaviour)."""
        for t in self._tensors():
            t.share_memory_()
            if t.grad is not None:
                t.grad.share_memory_()
        return self

    def cuda(self, device=None):
        return self.to("cuda" if device is None else
                       (f"cuda:{device}" if isinstance(device, int) else device))

    def cpu(self):
        return self.to("cpu")

    def type(self, dst_type):
        return self.to(dtype=dst_type)

    def float(self):
        return self.to(dtype=_C.float32)

    def double(self):
        return self.to(dtype=_C.float64)

    def half(self):
        return self.to(dtype=_C.float16)

    def bfloat16(self):
        return self.to(dtype=_C.bfloat16)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def register_forward_hook(self, hook):
        return _Handle(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return _Handle(self._forward_pre_hooks, hook)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> new grad_input or None, once the gradients
        with respect to the module's inputs are computed (nn/_backward_hooks.py)."""
        return _Handle(self.__dict__.setdefault("_backward_hooks", OrderedDict()), hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> new grad_output or None, before the module's backward."""
        return _Handle(self.__dict__.setdefault("_backward_pre_hooks", OrderedDict()), hook,
                       prepend)

    def __call__(self, *args, **kwargs):
        if self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks"):
            from ._backward_hooks import call_with_backward_hooks
            return call_with_backward_hooks(self, self._call_forward_hooks, args, kwargs)
        return self._call_forward_hooks(*args, **kwargs)

    def _call_forward_hooks(self, *args, **kwargs):
        if not self._forward_hooks and not self._forward_pre_hooks:
            return self.forward(*args, **kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    # ------------------------------------------------------------------ printing
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)


class _Handle:
    """RemovableHandle of a hook"""
    _next = 0

    def __init__(self, store, hook, prepend=False):
        _Handle._next += 1
        self.id, self._store = _Handle._next, store
        store[self.id] = hook
        if prepend:
            store.move_to_end(self.id, last=False)

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
