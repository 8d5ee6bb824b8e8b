"""tessera.library — torch.library's custom operators written in Python: custom_op registers a
function as torch.ops.<namespace>.<name>; register_autograd gives it a backward (the call then
runs through a tessera.autograd.Function: setup_context saves what backward needs, backward
returns one gradient per tensor input); register_fake records the shape function (Tessera has no
fake-tensor tracing, so it is kept and not called). Hugging Face transformers registers its MoE
fallbacks this way at import time."""
from . import ops as _ops

__all__ = ["custom_op", "register_fake", "register_autograd", "CustomOpDef"]

_REGISTRY = {}


def _split(qualname):
    ns, sep, name = qualname.partition("::")
    if not sep or not ns or not name or "." in name:
        raise ValueError("custom_op: the name must be 'namespace::name', got %r" % (qualname,))
    return ns, name


class CustomOpDef:
    """A registered operator: callable; torch.ops.<ns>.<name> calls it."""

    def __init__(self, qualname, fn, mutates_args, schema):
        self._qualname, self._fn = qualname, fn
        self._mutates_args, self._schema = mutates_args, schema
        self._fake = None
        self._backward = self._setup_context = None

    def __call__(self, *args, **kwargs):
        if self._backward is None:
            return self._fn(*args, **kwargs)
        return _autograd_call(self, args, kwargs)

    def register_fake(self, fn):
        self._fake = fn
        return fn

    def register_autograd(self, backward, *, setup_context=None):
        self._backward, self._setup_context = backward, setup_context

    def __repr__(self):
        return "<CustomOpDef(%s)>" % self._qualname


def _autograd_call(op, args, kwargs):
    from .autograd import Function
    from ._C import Tensor

    class _Op(Function):
        @staticmethod
        def forward(ctx, *a):
            out = op._fn(*a, **kwargs)
            if op._setup_context is not None:
                op._setup_context(ctx, a, out)
            return out

        @staticmethod
        def backward(ctx, *grads):
            g = op._backward(ctx, *grads)
            g = tuple(g) if isinstance(g, (tuple, list)) else (g,)
            # one gradient per input (None for the non-tensors), as Function wants
            return tuple(gi if isinstance(a, Tensor) else None for gi, a in zip(g, args)) + \
                (None,) * (len(args) - len(g))

    _Op.__name__ = op._qualname.replace("::", "_")
    return _Op.apply(*args)


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Registers fn as the operator name ('namespace::name'); usable as a decorator."""
    def register(f):
        ns, op_name = _split(name)
        op = CustomOpDef(name, f, mutates_args, schema)
        _REGISTRY[name] = op
        space = getattr(_ops, ns, None)
        if space is None:
            space = _ops._Namespace(ns, {})
            setattr(_ops, ns, space)
        setattr(space, op_name, _ops._OpOverloadPacket(op, op_name))
        return op

    return register if fn is None else register(fn)


def _op(name):
    op = name if isinstance(name, CustomOpDef) else _REGISTRY.get(name)
    if op is None:
        raise RuntimeError("torch.library: no custom operator %r is registered (custom_op first)"
                           % (name,))
    return op


def register_fake(op, fn=None, /, *, lib=None, _stacklevel=1):
    """Records fn as op's shape function (kept, not called: no fake-tensor tracing here)."""
    def register(f):
        _op(op).register_fake(f)
        return f

    return register if fn is None else register(fn)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Makes op differentiable: backward(ctx, *grad_outputs) -> one gradient per input."""
    _op(op).register_autograd(backward, setup_context=setup_context)
