"""tessera._double_vjp — forward-mode derivatives through two reverse passes (the double-vjp
trick), the one definition autograd.functional.jvp (create_graph=True), func.jvp and forward_ad's
unpack_dual share.

For outputs y(x) and a dummy cotangent u per output (zeros that require grad), the first reverse
pass gives g(u) = J^T u, which is linear in u; the second differentiates <g(u), t> with respect to
u, which is J t whatever u's value. Both passes keep their graphs (a later pass or unpack may need
them); the second records its own graph only with create_graph.
"""
from . import _C

# The primitives used, in one place (tools/functional_torch_check.py binds them to PyTorch's).
Tensor = _C.Tensor


def _grad(*args, **kwargs):
    from .autograd import grad
    return grad(*args, **kwargs)


def double_vjp(outputs, inputs, tangents, create_graph, check_first=None):
    """(first, jv) for sequences outputs, inputs and tangents (one per input; None: an implicit
    one, for a single-element input). first[i]: the first pass's gradient of input i, None where
    no output depends on it (or it is not a tensor that requires grad); check_first(first), when
    given, runs between the passes (strict checks). jv[k]: J t of output k, None where it depends
    on no input through a gradient that involves its cotangent (an output that does not require
    grad, or whose gradients do not depend on u): callers fill zeros or say "no dependence"."""
    us = [_C.zeros_like(o).requires_grad_(True) if isinstance(o, Tensor) and o.requires_grad
          else None for o in outputs]
    live = [k for k, u in enumerate(us) if u is not None]
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    first = [None] * len(inputs)
    if live and diff:
        got = _grad([outputs[k] for k in live], [inputs[i] for i in diff],
                    [us[k] for k in live], retain_graph=True, create_graph=True,
                    allow_unused=True)
        for i, g in zip(diff, got):
            first[i] = g
    if check_first is not None:
        check_first(first)
    pairs = [(g, t) for g, t in zip(first, tangents)
             if isinstance(g, Tensor) and g.requires_grad]
    jv = [None] * len(outputs)
    if pairs:
        got = _grad([g for g, _ in pairs], [us[k] for k in live], [t for _, t in pairs],
                    retain_graph=True, create_graph=create_graph, allow_unused=True)
        for k, v in zip(live, got):
            jv[k] = v
    return first, jv
