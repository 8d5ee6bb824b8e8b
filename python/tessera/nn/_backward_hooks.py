"""Module.register_full_backward_hook / register_full_backward_pre_hook, built as PyTorch's
BackwardHook is: identity custom Functions (tessera.autograd.Function) around a module call's
tensor inputs and outputs. The outputs' identity sees grad_output (pre hooks may replace it); the
inputs' identity sees grad_input once every use inside the module has contributed, and runs the
hooks, which may replace it. When no input requires grad the hooks run with grad_input all None as
soon as grad_output is known."""
from .. import _C
from .._autograd_function import Function

Tensor = _C.Tensor


class _Identity(Function):
    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_grads(grads))


def _wrap(values, on_grads):
    """values with their tensors that require grad replaced by the identity's outputs; on_grads
    gets and returns one gradient per entry of values (None for the others)."""
    idx = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
    if not idx or not _C.is_grad_enabled():
        return values, False

    def relay(grads):
        full = [None] * len(values)
        for g, i in zip(grads, idx):
            full[i] = g
        full = on_grads(tuple(full))
        return [full[i] for i in idx]

    outs = _Identity.apply(relay, *[values[i] for i in idx])
    new = list(values)
    for o, i in zip(outs, idx):
        new[i] = o
    return tuple(new), True


def _checked(result, like, what):
    if result is None:
        return like
    result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(result) != len(like):
        raise _C.TesseraError("backward hook returned an invalid number of %s, got %d, but "
                              "expected %d" % (what, len(result), len(like)))
    return result


def call_with_backward_hooks(module, forward_call, args, kwargs):
    """module's forward under its full backward (pre) hooks."""
    state = {"grad_output": None, "input_wrapped": False}
    n_args = len(args)

    def run_hooks(grad_input):
        for hook in list(module._backward_hooks.values()):
            r = hook(module, grad_input, state["grad_output"])
            grad_input = _checked(r, grad_input, "grad_input")
        return grad_input

    def on_input_grads(grads):
        return run_hooks(grads)

    def on_output_grads(grads):
        for hook in list(module._backward_pre_hooks.values()):
            r = hook(module, grads)
            grads = _checked(r, grads, "grad_output")
        state["grad_output"] = grads
        if not state["input_wrapped"]:
            run_hooks((None,) * n_args)
        return grads

    args, state["input_wrapped"] = _wrap(tuple(args), on_input_grads)
    out = forward_call(*args, **kwargs)
    if isinstance(out, Tensor):
        wrapped, _ = _wrap((out,), on_output_grads)
        return wrapped[0]
    if isinstance(out, tuple):
        wrapped, _ = _wrap(out, on_output_grads)
        return wrapped
    return out
