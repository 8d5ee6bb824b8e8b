"""tessera.autograd — grad(), backward(), no_grad and friends over the C core's autograd.

The C core keeps a thread-local no-grad nesting count; no_grad adds a level, enable_grad leaves
every level for its block and re-enters them after (so it works inside no_grad), as in PyTorch.
"""
import functools

from . import _C
from ._C import Tensor, is_grad_enabled

__all__ = ["grad", "backward", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "detect_anomaly", "set_detect_anomaly", "Function", "Variable"]
from ._legacy import Variable  # noqa: E402  (torch.autograd.Variable: returns a Tensor)


class _GradMode:
    """A context manager that is also a decorator (each call of the function runs inside it)."""

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args()):
                return func(*args, **kwargs)
        return wrapper

    def _args(self):
        return ()

    def clone(self):
        return self.__class__(*self._args())


class no_grad(_GradMode):
    """Ops inside record no graph (`with tessera.no_grad():` or `@tessera.no_grad()`)."""

    def __init__(self, orig_func=None):
        self._depth = []
        self._func = orig_func if callable(orig_func) else None

    def __call__(self, *args, **kwargs):
        if self._func is not None:  # @no_grad without parentheses
            with no_grad():
                return self._func(*args, **kwargs)
        return super().__call__(*args)

    def __enter__(self):
        _C._grad_disable()
        self._depth.append(True)
        return None

    def __exit__(self, *exc):
        self._depth.pop()
        _C._grad_restore_disable()
        return False


class inference_mode(no_grad):
    """Like no_grad (the C core has no separate inference mode); mode=False does nothing."""

    def __init__(self, mode=True):
        super().__init__(mode if callable(mode) else None)
        self._mode = bool(mode) if not callable(mode) else True

    def _args(self):
        return (self._mode,)

    def __enter__(self):
        if self._mode:
            super().__enter__()
        else:
            self._depth.append(False)

    def __exit__(self, *exc):
        if self._depth[-1]:
            return super().__exit__(*exc)
        self._depth.pop()
        return False


class enable_grad(_GradMode):
    """Ops inside record the graph even within no_grad."""

    def __init__(self, orig_func=None):
        self._levels = []
        self._func = orig_func if callable(orig_func) else None

    def __call__(self, *args, **kwargs):
        if self._func is not None:
            with enable_grad():
                return self._func(*args, **kwargs)
        return super().__call__(*args)

    def __enter__(self):
        self._levels.append(_C._grad_enable())
        return None

    def __exit__(self, *exc):
        _C._grad_restore_enable(self._levels.pop())
        return False


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): a context manager, or (called alone) a switch for the thread."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._inner = enable_grad() if self._mode else no_grad()
        self._prev_enabled = is_grad_enabled()
        # torch: calling it as a function takes effect at once
        if self._mode and not self._prev_enabled:
            self._applied = _C._grad_enable()
        elif not self._mode and self._prev_enabled:
            _C._grad_disable()
            self._applied = -1
        else:
            self._applied = None

    def _args(self):
        return (self._mode,)

    def __call__(self, func):
        self._undo()  # as a decorator: the switch applies inside each call only
        return super().__call__(func)

    def _undo(self):
        if self._applied is None:
            return
        if self._applied == -1:
            _C._grad_restore_disable()
        else:
            _C._grad_restore_enable(self._applied)
        self._applied = None

    def __enter__(self):
        # the constructor already switched; the block undoes it on exit
        return None

    def __exit__(self, *exc):
        self._undo()
        return False


class set_detect_anomaly:
    """Backward names the forward op whose backward produced NaN/Inf (context manager)."""

    def __init__(self, mode=True):
        self._mode = bool(mode)

    def __enter__(self):
        _C._set_detect_anomaly(self._mode)

    def __exit__(self, *exc):
        _C._set_detect_anomaly(False)
        return False


detect_anomaly = set_detect_anomaly


def _as_tuple(x):
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates d(tensors)/d(leaves) into the leaves' .grad (torch.autograd.backward); with
    inputs, into those tensors' .grad only; create_graph records the gradients' own graph."""
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    else:
        grad_tensors = _as_tuple(grad_tensors) if not isinstance(grad_tensors, Tensor) else (grad_tensors,)
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise _C.TesseraError("backward(): 'inputs' argument to backward() cannot be empty.")
    if not create_graph and inputs is None:
        _C._backward(tensors, grad_tensors, bool(retain_graph))
        return
    _C._grad(tensors, grad_tensors, inputs, bool(retain_graph), bool(create_graph), False, True)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """grad(is_grads_batched=True): each grad_outputs[i] holds a batch of cotangents along its
    first dim; the result is the batch of vector-Jacobian products, stacked along a new first dim
    (one reverse pass per batch entry, as a loop: tessera.func.vmap's approach)."""
    if grad_outputs is None:
        raise _C.TesseraError("grad(): is_grads_batched=True needs grad_outputs")
    gos = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    sizes = {int(g.shape[0]) for g in gos if isinstance(g, Tensor) and g.dim() > 0}
    if len(sizes) != 1 or any(isinstance(g, Tensor) and g.dim() == 0 for g in gos):
        raise _C.TesseraError("grad(): with is_grads_batched=True every grad_output must have "
                              "the same first (batch) dim, got shapes %s"
                              % [tuple(g.shape) for g in gos if isinstance(g, Tensor)])
    n = sizes.pop()
    per = []
    for b in range(n):
        gb = tuple(g[b] if isinstance(g, Tensor) else g for g in gos)
        keep = True if b < n - 1 else retain_graph
        per.append(grad(outputs, inputs, gb, retain_graph=keep, create_graph=create_graph,
                        allow_unused=True))
    out = []
    for i, x in enumerate(inputs):
        col = [r[i] for r in per]
        if all(c is None for c in col):
            if materialize_grads:
                out.append(_C.zeros((n,) + tuple(x.shape), dtype=x.dtype, device=x.device))
            elif not allow_unused:
                raise _C.TesseraError("One of the differentiated Tensors appears to not have "
                                      "been used in the graph. Set allow_unused=True if this is "
                                      "the desired behavior.")
            else:
                out.append(None)
            continue
        col = [_C.zeros_like(x) if c is None else c for c in col]
        out.append(_C.stack(col, 0))
    return tuple(out)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of outputs with respect to inputs (torch.autograd.grad), without touching any
    .grad. Only the part of the graph that leads to the inputs runs; inputs may be leaves or
    tensors made by recorded ops. create_graph=True records the gradients' graph, so they can be
    differentiated again (higher-order gradients)."""
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    if not inputs:
        raise _C.TesseraError("grad requires non-empty inputs.")
    if grad_outputs is not None:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise _C.TesseraError("grad can be implicitly created only for scalar outputs"
                                  if not grad_outputs else
                                  "got %d tensors and %d gradients" % (len(outputs), len(grad_outputs)))
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError("grad(): argument 'inputs' must be Tensors, not %s" % type(x).__name__)
        if not x.requires_grad:
            raise _C.TesseraError("One of the differentiated Tensors does not require grad")
    for o in outputs:
        if isinstance(o, Tensor) and not o.requires_grad:
            raise _C.TesseraError("element 0 of tensors does not require grad and does not have a "
                                  "grad_fn")
    result = _C._grad(outputs, grad_outputs, inputs, bool(retain_graph), bool(create_graph),
                      bool(allow_unused), False)
    if materialize_grads:
        result = tuple(_C.zeros_like(x) if g is None else g for x, g in zip(inputs, result))
    return result


import sys as _sys  # noqa: E402

from . import _autograd_function as function  # noqa: E402
from ._autograd_function import Function  # noqa: E402

# `import tessera.autograd.function` / `from tessera.autograd.function import once_differentiable`
_sys.modules[__name__ + ".function"] = function

from . import _autograd_graph as graph  # noqa: E402

# `import tessera.autograd.graph` / `from tessera.autograd.graph import save_on_cpu`
_sys.modules[__name__ + ".graph"] = graph

from . import _autograd_functional as functional  # noqa: E402

# `import tessera.autograd.functional` / `from tessera.autograd.functional import jacobian`
_sys.modules[__name__ + ".functional"] = functional

from . import _autograd_forward_ad as forward_ad  # noqa: E402

# `import tessera.autograd.forward_ad as fwAD`
_sys.modules[__name__ + ".forward_ad"] = forward_ad
