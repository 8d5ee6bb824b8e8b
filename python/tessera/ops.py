"""tessera.ops — torch.ops' namespace for the few ATen operators Tessera answers under their ATen
names (torch.ops.aten.<name>.default, or the packet itself called): max_pool2d_with_indices_backward.
"""
from . import _C

__all__ = ["aten"]


def _pair(v, op, name, empty=None):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(x) for x in v)
    if not v and empty is not None:
        return empty
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) == 2:
        return v
    raise RuntimeError("%s: %s must either be a single int, or a tuple of two ints" % (op, name))


def _max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices):
    op = "max_pool2d_with_indices_backward"
    k = _pair(kernel_size, op, "kernel_size")
    s = _pair(stride, op, "stride", empty=k)  # ATen: an empty stride is the kernel size
    return _C._nn_max_pool2d_backward(grad_output, self, k, s, _pair(padding, op, "padding"),
                                      _pair(dilation, op, "dilation"), bool(ceil_mode), indices)


class _OpOverload:
    """one overload (torch.ops.aten.x.default): a callable with its qualified name"""

    def __init__(self, fn, name):
        self._fn, self._name = fn, name

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return "tessera.ops.aten.%s.default" % self._name


class _OpOverloadPacket(_OpOverload):
    """torch.ops.aten.x: callable as its default overload, which .default names"""

    def __init__(self, fn, name):
        super().__init__(fn, name)
        self.default = _OpOverload(fn, name)
        self.overloads = lambda: ["default"]

    def __repr__(self):
        return "tessera.ops.aten.%s" % self._name


class _Namespace:
    def __init__(self, name, ops):
        self._name = name
        for k, fn in ops.items():
            setattr(self, k, _OpOverloadPacket(fn, k))

    def __repr__(self):
        return "tessera.ops.%s" % self._name


aten = _Namespace("aten", {
    "max_pool2d_with_indices_backward": _max_pool2d_with_indices_backward,
})
