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


def is_parameter(x):
    return isinstance(x, Parameter)
