"""tessera.nn.Parameter — a Tensor that a Module registers as a parameter (PyTorch's)."""
from .. import _C

Tensor = _C.Tensor


class Parameter(Tensor):
    """A leaf Tensor with requires_grad=True (by default) sharing `data`'s storage.

    Parameters made by a C module (nn_cmodule.c) wrap the C module's own handles, so the C forward
    and Python see one tensor."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.empty(0)
        return Tensor._make_subclass(cls, data, requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (self.data, self.requires_grad))


class _BufferMeta(type(Tensor)):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and getattr(obj, "_is_buffer", False)


class Buffer(Tensor, metaclass=_BufferMeta):
    """torch.nn.Buffer: `self.x = nn.Buffer(t, persistent=False)` in a Module registers t (detached)
    as a buffer, as register_buffer does. The result is a plain Tensor marked as a buffer."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _C.empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


def is_parameter(x):
    return isinstance(x, Parameter)
