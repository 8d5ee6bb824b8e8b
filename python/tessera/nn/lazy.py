"""PyTorch's lazy modules LazyLinear and LazyBatchNorm1d / 2d / 3d (issue 53: d2l builds its models
with them), over UninitializedParameter / UninitializedBuffer.

A lazy module's parameters are UninitializedParameter objects with no elements until the first
forward reads the input's features (Linear: the last dim; BatchNorm: dim 1). Then each parameter
gets its memory in place (`materialize`: the same object, now a Parameter, so an optimizer made
before the first forward updates it, as in PyTorch), reset_parameters() initialises it as the
eager module would, and the module becomes that module (`cls_to_become`: type(m) is nn.Linear
afterwards, which d2l's `type(m) == nn.Linear` initialisers test). Before then, in-place writes
such as `m.weight.data.normal_()` touch no element (PyTorch ignores them too).
The Lazy convolutions are nn.conv's own (their weight is None until the first forward)."""
from .. import _C
from .layers import BatchNorm1d, BatchNorm2d, Linear
from .module import Module
from .parameter import Parameter
from .pool_norm import BatchNorm3d

Tensor = _C.Tensor

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d"]


class UninitializedParameter(Parameter):
    """A Parameter without a shape yet (no elements); materialize(shape) gives it its memory and
    makes it a Parameter, the object kept."""
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, device=device, dtype=dtype), requires_grad)

    def materialize(self, shape, device=None, dtype=None):
        """shape's uninitialised memory on device / dtype (None: the ones it was made with)"""
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        self.data = _C.empty(*shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return "<UninitializedParameter>"

    def __reduce_ex__(self, proto):
        return (UninitializedParameter, (self.requires_grad, self.device, self.dtype))


class UninitializedBuffer(Tensor):
    """A buffer without a shape yet; the lazy module replaces it with a tensor of the input's
    features on the first forward"""

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        return Tensor._make_subclass(cls, _C.empty(0, device=device, dtype=dtype), requires_grad)

    def __repr__(self):
        return "<UninitializedBuffer>"


def _uninit(t):
    return isinstance(t, (UninitializedParameter, UninitializedBuffer))


class _LazyModuleMixin:
    """initialize_parameters(input) on the first forward, then the module becomes cls_to_become"""
    cls_to_become = None

    def has_uninitialized_params(self):
        return any(_uninit(t) for t in list(self._parameters.values()) +
                   list(self._buffers.values()))

    def forward(self, input, *args, **kwargs):
        become = type(self).cls_to_become
        if self.has_uninitialized_params():
            self.initialize_parameters(input)
        if not self.has_uninitialized_params():
            self.__class__ = become
        return become.forward(self, input, *args, **kwargs)


class LazyLinear(_LazyModuleMixin, Linear):
    """Linear(in_features, out_features) with in_features the first input's last dim"""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_features = int(input.shape[-1])
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyNormBase(_LazyModuleMixin):
    """BatchNormNd(num_features) with num_features the first input's dim 1"""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        self.cls_to_become.__init__(self, 0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats, self._bias = affine, track_running_stats, affine
        self._factory = (device, dtype)
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self._buffers["running_mean"] = UninitializedBuffer(device=device, dtype=dtype)
            self._buffers["running_var"] = UninitializedBuffer(device=device, dtype=dtype)
            self._buffers["num_batches_tracked"] = _C.zeros((), device=device, dtype=_C.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.num_features = n = int(input.shape[1])
            device, dtype = self._factory
            if self.affine:
                self.weight.materialize((n,))
                self.bias.materialize((n,))
            if self.track_running_stats:
                for name in ("running_mean", "running_var"):
                    self._buffers[name] = _C.zeros(n, device=device, dtype=dtype)
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    cls_to_become = BatchNorm3d
