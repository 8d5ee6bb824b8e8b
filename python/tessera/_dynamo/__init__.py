"""tessera._dynamo — the torch._dynamo names that libraries (Hugging Face transformers) import or
decorate with at module level. Tessera has no Dynamo: nothing is ever traced, so the decorators
return their argument (tessera.compiler's), is_compiling is False, and mark_static_address has
nothing to mark. torch._dynamo._trace_wrapped_higher_order_op.TransformGetItemToIndex is here as
well (see that module)."""
from tessera.compiler import (allow_in_graph, assume_constant_result, disable,  # noqa: F401
                              is_compiling, reset)

__all__ = ["allow_in_graph", "assume_constant_result", "disable", "is_compiling", "reset",
           "mark_static_address", "mark_dynamic", "maybe_mark_dynamic", "graph_break"]


def mark_static_address(t, guard=True):
    """No effect: without a compiler no graph keeps addresses."""


def mark_dynamic(t, index, *, min=None, max=None):
    """No effect: without a compiler no shape is specialised."""


def maybe_mark_dynamic(t, index):
    """No effect (see mark_dynamic)."""


def graph_break():
    """No effect: there is no graph to break."""
