"""tessera.utils.checkpoint — activation checkpointing as PyTorch's torch.utils.checkpoint.

checkpoint(function, *args) runs function with the graph recorded as usual, but the tensors its
ops save for backward are dropped when it returns and recomputed (function run again on the same
inputs, with the same random numbers and autocast state) the first time the backward needs them:
memory for compute. Gradients reach the inputs and every parameter the function uses. The C core
does the work (ts_checkpoint_begin/end, src/autograd/checkpoint.c; docs/PYTHON_AUTOGRAD.md).

Differences from PyTorch: use_reentrant=True and False both run the non-reentrant algorithm (the
gradients are the same); the random state is always restored for the recomputation
(preserve_rng_state=False is accepted and changes nothing); context_fn is refused; the function
must run the same ops each time, or the backward raises.
"""
from .. import _C
from .._C import Tensor
from ..autograd import is_grad_enabled

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs) with its intermediates recomputed in backward instead of kept."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported by Tessera")
    if determinism_check not in ("default", "none"):
        raise ValueError("checkpoint: determinism_check should be 'default' or 'none', got %r"
                         % (determinism_check,))
    if not is_grad_enabled():
        return function(*args, **kwargs)
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

    def recompute(*tensors):
        again = list(args)
        for i, t in zip(positions, tensors):
            again[i] = t
        function(*again, **kwargs)

    frame = _C._checkpoint_begin(recompute, [args[i] for i in positions])
    try:
        return function(*args, **kwargs)
    finally:
        _C._checkpoint_end(frame)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """PyTorch's checkpoint_sequential: the modules (a Sequential or a list) split into `segments`
    runs of len // segments, the last run taking the rest; every run but the last checkpointed
    (segments above the number of modules count as that number)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("checkpoint_sequential: unexpected keyword arguments: "
                         + ", ".join(sorted(kwargs)))
    if not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    if segments < 1 or not functions:
        raise ValueError("checkpoint_sequential: expected segments >= 1 and at least one module, "
                         "got %d and %d" % (segments, len(functions)))

    def run_function(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    segments = min(segments, len(functions))
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_function(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1)(input)
