"""tessera._dynamo._trace_wrapped_higher_order_op — TransformGetItemToIndex, a context manager that
in PyTorch turns `tensor[scalar_tensor]` into an index op so vmap can trace it. Tessera's indexing
with a 0-d index tensor already is an index op (no .item()), so the block runs unchanged."""
import contextlib

__all__ = ["TransformGetItemToIndex"]


class TransformGetItemToIndex(contextlib.AbstractContextManager):
    def __exit__(self, *exc):
        return None
