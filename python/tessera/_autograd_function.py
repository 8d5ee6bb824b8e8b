"""tessera.autograd.function — custom autograd Functions (torch.autograd.Function).

A Function's forward runs here under no_grad; its outputs go into the C engine's graph through
_C._function_apply (ts_custom_function_apply), whose node calls back into Python for backward, so a
custom Function inside a model trained with loss.backward() works on every device. Both forms of
PyTorch 2.x: forward(ctx, *args, **kwargs), or forward(*args, **kwargs) with
setup_context(ctx, inputs, output).

Under create_graph (double backward) the backward's ops record the gradients' graph when it saved
only inputs with save_for_backward; one that saved an output or a value made in the forward (which
carry no history here), or is @once_differentiable, gives gradients whose second backward raises.
No forward-mode AD (jvp), no vmap. A tensor saved with
save_for_backward is checked for in-place changes as in PyTorch; a tensor kept as a plain ctx
attribute is not (and one that is also marked dirty would keep the graph alive in a cycle).
"""
import functools
import inspect
import weakref

from . import _C
from ._C import Tensor, is_grad_enabled

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "InplaceFunction", "NestedIOFunction",
           "once_differentiable"]


def _no_grad():
    from .autograd import no_grad
    return no_grad()


class FunctionCtx:
    """The ctx given to forward / setup_context and backward: save_for_backward, saved_tensors,
    needs_input_grad, mark_dirty, mark_non_differentiable, set_materialize_grads, and any
    attribute a user sets."""

    def __init__(self):
        self.needs_input_grad = ()
        self.materialize_grads = True
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self._saved = None  # [(tensor, version)] once the forward has run

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument %d is "
                                "not a Variable" % i)
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        raise NotImplementedError("save_for_forward: forward-mode AD (jvp) is not in Tessera")

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def mark_shared_storage(self, *pairs):
        raise RuntimeError("mark_shared_storage is deprecated. Tensors with shared storages are "
                           "automatically tracked.")

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        if self._saved is None:
            return tuple(self.to_save)
        out = []
        for t, version in self._saved:
            if t is not None and t._version != version:
                raise _C.TesseraError(
                    "one of the variables needed for gradient computation has been modified by "
                    "an inplace operation: [%s %s], which is output 0 of %s, is at version %d; "
                    "expected version %d instead." % (t.dtype, list(t.shape), self._name,
                                                      t._version, version))
            out.append(t)
        return tuple(out)

    saved_variables = saved_tensors


BackwardCFunction = FunctionCtx


def once_differentiable(fn):
    """Marks a backward as not differentiable again: it runs without recording, and under
    create_graph its gradients fail a second backward that reaches them (PyTorch's DelayedError)."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _no_grad():
            return fn(ctx, *args)
    wrapper._once_differentiable = True
    return wrapper


def _is_setup_context_defined(cls):
    return inspect.getattr_static(cls, "setup_context", None) is not \
        inspect.getattr_static(Function, "setup_context")


def _contains(seq, obj):
    return any(x is obj for x in seq)


class _FunctionMeta(type):
    """Gives each Function subclass PyTorch's ctx class name (<Name>Backward)."""

    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = name + "Backward"


class Function(metaclass=_FunctionMeta):
    """Base class of custom autograd functions (torch.autograd.Function)::

        class Exp(tessera.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                y, = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)
    """

    generate_vmap_rule = False

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. "
                           "Please use new-style autograd function with static forward method. "
                           "(Example: https://pytorch.org/docs/stable/autograd.html"
                           "#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("jvp: forward-mode AD is not in Tessera")

    @classmethod
    def vmap(cls, info, in_dims, *args):
        raise NotImplementedError("vmap: Tessera has no vmap")

    @classmethod
    def apply(cls, *args, **kwargs):
        setup_ctx = _is_setup_context_defined(cls)
        if setup_ctx:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = tuple(bound.args), bound.kwargs
        ctx = FunctionCtx()
        ctx._name = cls._backward_name
        grad_on = is_grad_enabled()
        ctx.needs_input_grad = tuple(grad_on and isinstance(a, Tensor) and a.requires_grad
                                     for a in args)
        with _no_grad():
            if setup_ctx:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not any(ctx.needs_input_grad):
            return output
        return _wrap_outputs(cls, ctx, args, output)


def _wrap_outputs(cls, ctx, args, output):
    """Puts the node into the graph: the outputs that are tensors become the node's outputs."""
    is_tuple = isinstance(output, tuple)
    outs = output if is_tuple else (output,)
    for t in ctx.dirty_tensors:
        if not _contains(outs, t):
            raise _C.TesseraError("Some elements marked as dirty during the forward method were "
                                  "not returned as output. The inputs that are modified inplace "
                                  "must all be outputs of the Function.")
    positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
    if not positions:
        return output  # nothing to differentiate: PyTorch returns such outputs as they are
    flags = []
    for i in positions:
        o = outs[i]
        f = 0
        if _contains(ctx.non_differentiable, o):
            f |= 1  # TS_CUSTOM_OUT_NON_DIFFERENTIABLE
        if _contains(ctx.dirty_tensors, o):
            f |= 2  # TS_CUSTOM_OUT_DIRTY
        flags.append(f)
    # saved tensors, with their versions at the end of the forward; a dirty one is kept as a
    # detached alias (same storage and version counter) so the node and it make no cycle
    saved = []
    for t in ctx.to_save:
        if t is not None and _contains(ctx.dirty_tensors, t):
            t = t.detach()
        saved.append((t, t._version if t is not None else 0))
    ctx._saved = saved
    # the node will own the ctx: it must not hold the outputs (a dirty one's history is the node)
    ctx.to_save = ctx.dirty_tensors = ctx.non_differentiable = ()
    inputs = [a if isinstance(a, Tensor) else None for a in args]
    bridge = _Bridge(cls, ctx, len(outs), positions, args)
    results = _C._function_apply(cls._backward_name, bridge, inputs,
                                 [outs[i] for i in positions], flags, ctx.materialize_grads)
    new = list(outs)
    for k, i in enumerate(positions):
        # a dirty output is the input object itself (its history now the node's)
        new[i] = outs[i] if flags[k] & 2 else results[k]
    # under create_graph the backward's own ops record the gradients' graph; that graph is whole
    # only when everything it reads has its history: the inputs (a saved output or a value made
    # in the forward has none here), so anything else makes the node once-differentiable
    twice = not getattr(cls.backward, "_once_differentiable", False) and all(
        t is None or _contains(args, t) for t, _ in saved)
    for k, i in enumerate(positions):
        if new[i].grad_fn is not None:
            _C._set_twice_differentiable(new[i], twice)
            break
    return tuple(new) if is_tuple else new[0]


class _Bridge:
    """Called by the C engine with one gradient per tensor output; returns one per argument."""

    __slots__ = ("cls", "ctx", "n_outs", "positions", "is_tensor")

    def __init__(self, cls, ctx, n_outs, positions, args):
        self.cls, self.ctx, self.n_outs, self.positions = cls, ctx, n_outs, positions
        self.is_tensor = [isinstance(a, Tensor) for a in args]

    def __call__(self, *grads):
        full = [None] * self.n_outs
        for g, i in zip(grads, self.positions):
            full[i] = g
        result = self.cls.backward(self.ctx, *full)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.is_tensor)
        name = self.cls._backward_name
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        if len(result) != n:
            raise _C.TesseraError("function %s returned an incorrect number of gradients "
                                  "(expected %d, got %d)" % (name, n, len(result)))
        for i, (g, is_t) in enumerate(zip(result, self.is_tensor)):
            if g is None:
                continue
            if not is_t:
                raise _C.TesseraError("function %s returned a gradient different than None at "
                                      "position %d, but the corresponding forward input was not a "
                                      "Variable" % (name, i + 1))
            if not isinstance(g, Tensor):
                raise TypeError("function %s returned a gradient of type %s at position %d; "
                                "expected a Tensor or None" % (name, type(g).__name__, i + 1))
        return result


class InplaceFunction(Function):
    """torch.autograd.function.InplaceFunction: a Function with an inplace flag."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    """torch's legacy NestedIOFunction: not supported."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("NestedIOFunction (legacy autograd functions) is not supported")


class _TensorHookHandle:
    """What Tensor.register_hook returns: remove() takes the hook off (RemovableHandle)."""

    def __init__(self, tensor, hook_id):
        self._tensor, self.id = weakref.ref(tensor), hook_id

    def remove(self):
        t = self._tensor()
        if t is not None and self.id:
            _C._tensor_remove_hook(t, self.id)
        self.id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register_hook(tensor, hook):
    """Tensor.register_hook (python/src/autograd_function.c, src/autograd/tensor_hooks.c; on a
    leaf src/autograd/leaf_hooks.c)."""
    if not tensor.requires_grad:
        raise _C.TesseraError("cannot register a hook on a tensor that doesn't require gradient")
    return _TensorHookHandle(tensor, _C._tensor_register_hook(tensor, hook))


class _PostAccumulateGradHookHandle(_TensorHookHandle):
    """What Tensor.register_post_accumulate_grad_hook returns: remove() takes the hook off."""

    def __init__(self, tensor, ids):
        super().__init__(tensor, ids[0])
        self._keeper = ids[1]

    def remove(self):
        t = self._tensor()
        if t is not None and self.id:
            _C._tensor_remove_post_hook(t, self.id, self._keeper)
        self.id = 0


def _register_post_accumulate_grad_hook(tensor, hook):
    """Tensor.register_post_accumulate_grad_hook: hook(tensor) -> None runs after backward has
    accumulated the last gradient of the pass into this leaf's .grad (src/autograd/hooks.c)."""
    if not tensor.requires_grad:
        raise _C.TesseraError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor.grad_fn is not None:
        raise _C.TesseraError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    return _PostAccumulateGradHookHandle(tensor, _C._tensor_register_post_hook(tensor, hook))
