"""Issue 52's remaining operators as exact compositions over Tessera's C ops (they run on every
device and differentiate where the pieces do): the random family on the seeded Philox generator
(normal, Tensor.cauchy_ / exponential_ / geometric_ / log_normal_), index_put,
as_strided_copy / as_strided_scatter, empty_strided / empty_permuted,
nonzero_static, hash_tensor. Tensor methods reach these through python/src/tensor_extra.c."""
import math

from . import _C
from ._shape_more import broadcast_tensors as _broadcast_tensors
from ._storage import storage, untyped_storage  # noqa: F401  (Tensor methods, tensor_extra.c)

__all__ = ["normal", "index_put", "index_put_", "as_strided_copy", "as_strided_scatter", "empty_strided", "empty_permuted",
           "nonzero_static", "hash_tensor", "resize_as_"]

# ---- Tensor.retain_grad -------------------------------------------------------------------------

_RETAINING = {}  # id(tensor) -> weakref: the non-leaves whose .grad is kept (one hook each)


def retain_grad(self):
    """Tensor.retain_grad(): after backward a non-leaf's .grad holds its gradient, accumulated
    over backward passes as a leaf's (a hook that stores it); a leaf keeps its .grad anyway"""
    import weakref
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf or id(self) in _RETAINING:
        return None
    key = id(self)
    ref = weakref.ref(self, lambda _r, key=key: _RETAINING.pop(key, None))
    _RETAINING[key] = ref

    def keep(grad):
        t = ref()
        if t is not None:
            g = grad.detach()
            t.grad = g.clone() if t.grad is None else t.grad + g
        return None
    self.register_hook(keep)
    return None


def _retains_grad(self):
    """Tensor.retains_grad (python/src/autograd.c): retain_grad() was called on this non-leaf"""
    ref = _RETAINING.get(id(self))
    return ref is not None and ref() is self


from ._generator import drawing as _drawing


# ---- random family ----------------------------------------------------------------------------

def _uniform(t):
    """uniform [0, 1) values of t's shape, dtype and device (the seeded generator)"""
    return _C.rand_like(t)


def _fill_(self, values):
    with _C_no_grad():
        self.copy_(values)
    return self


def _C_no_grad():
    from .autograd import no_grad
    return no_grad()


def _check_float(self, fn):
    if not self.dtype.is_floating_point:
        raise TypeError("%s(): expected a floating-point tensor, got %s" % (fn, self.dtype))


@_drawing("cauchy_")
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    return _C._cauchy_(self, median, sigma)


@_drawing("exponential_")
def exponential_(self, lambd=1.0, *, generator=None):
    _check_float(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError("exponential_(): expects lambda > 0.0, but found lambda=%s" % lambd)
    u = _uniform(self)
    return _fill_(self, (-u).log1p().neg().div(lambd))


@_drawing("geometric_")
def geometric_(self, p, *, generator=None):
    return _C._geometric_(self, p)


@_drawing("log_normal_")
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return _C._log_normal_(self, mean, std)


# normal: C's (ts_normal, src/ops/sampling.c; python/src/tensor_statistics.c)
from ._C import normal  # noqa: E402,F401


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return self.normal_(mean, std, generator=generator)


# ---- index_put -----------------------------------------------------------------------------

def _lin_index(input, indices, fn):
    """(flat row index over the first k dims, k) for a tuple of index tensors (bool masks expand)"""
    T = _C.Tensor
    if isinstance(indices, T):
        indices = (indices,)
    idx = []
    for t in indices:
        if t is None:
            raise TypeError("%s(): None in indices is not supported" % fn)
        if not isinstance(t, T):
            t = _C.tensor(t)
        if t.device != input.device:
            raise _C.DeviceError("%s(): indices on %s, input on %s" % (fn, t.device, input.device))
        if t.dtype == _C.bool or t.dtype == _C.uint8:
            nz = t.to(_C.bool).nonzero()
            idx.extend(nz[:, j] for j in range(t.ndim))
        elif t.dtype.is_floating_point:
            raise IndexError("%s(): tensors used as indices must be long, int, byte or bool" % fn)
        else:
            idx.append(t.to(_C.int64))
    k = len(idx)
    if k > input.ndim:
        raise IndexError("%s(): too many indices for tensor of dimension %d" % (fn, input.ndim))
    idx = list(_broadcast_tensors(*idx)) if k > 1 else idx
    lin = None
    for j, t in enumerate(idx):
        size = input.shape[j]
        if t.numel() and (bool((t >= size).any()) or bool((t < -size).any())):
            raise IndexError("%s(): index out of bounds for dimension %d with size %d"
                             % (fn, j, size))
        t = _C.where(t < 0, t + size, t)
        lin = t if lin is None else lin * size + t
    return lin, k


def _index_put(input, indices, values, accumulate, fn):
    T = _C.Tensor
    if not isinstance(values, T):
        values = _C.tensor(values, dtype=input.dtype, device=input.device)
    if values.device != input.device:
        raise _C.DeviceError("%s(): values on %s, input on %s" % (fn, values.device, input.device))
    lin, k = _lin_index(input, indices, fn)
    if lin is None:
        return input.clone()
    rest = tuple(input.shape[k:])
    rows = 1
    for s in input.shape[:k]:
        rows *= s
    xf = input.reshape((rows,) + rest)
    v = values.to(input.dtype).expand(tuple(lin.shape) + rest).reshape((-1,) + rest)
    li = lin.reshape(-1)
    out = xf.index_add(0, li, v) if accumulate else xf.index_copy(0, li, v)
    return out.reshape(tuple(input.shape))


def index_put(input, indices, values, accumulate=False):
    """torch.index_put: input[indices] = values (accumulate: +=), out of place"""
    return _index_put(input, indices, values, accumulate, "index_put")


def index_put_(input, indices, values, accumulate=False):
    r = _index_put(input, indices, values, accumulate, "index_put_")
    return input.copy_(r)




# ---- strided storage: as_strided_copy / as_strided_scatter ------------------------------------

def as_strided_copy(input, size, stride, storage_offset=None):
    """torch.as_strided_copy: the elements of an as_strided view over input's storage, as a new
    tensor; every element read must be one of input's own (else a RuntimeError)"""
    return _C._as_strided_copy(input, size, stride, storage_offset)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """torch.as_strided_scatter: input with the elements of its as_strided view replaced by src"""
    return _C._as_strided_scatter(input, src, size, stride, storage_offset)


# ---- uninitialised factories, nonzero_static --------------------------------------------------

def _empty_kw(dtype, device, requires_grad):
    kw = {}
    if dtype is not None:
        kw["dtype"] = dtype
    if device is not None:
        kw["device"] = device
    if requires_grad:
        kw["requires_grad"] = True
    return kw


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """torch.empty_strided: an uninitialised tensor of size (Tessera lays it out contiguously:
    stride is checked for length, not kept)"""
    size = tuple(size)
    if len(tuple(stride)) != len(size):
        raise RuntimeError("empty_strided(): mismatch in length of strides and shape")
    return _C.empty(size, **_empty_kw(dtype, device, requires_grad))


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                      requires_grad=False, pin_memory=False):
    return empty_strided(size, stride, dtype=dtype or self.dtype,
                         device=device or self.device, requires_grad=requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """torch.empty_permuted: an uninitialised tensor of size (laid out contiguously)"""
    size, perm = tuple(size), tuple(physical_layout)
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError("empty_permuted(): physical_layout must be a permutation of the dims")
    return _C.empty(size, **_empty_kw(dtype, device, requires_grad))


def nonzero_static(input, *, size, fill_value=-1):
    """torch.nonzero_static: nonzero()'s rows, cut or padded with fill_value to size rows"""
    return _C._nonzero_static(input, size, fill_value)


def scatter_add(input, dim, index, src):
    """torch.scatter_add: Tensor.scatter_add as a function"""
    return input.scatter_add(dim, index, src)


class layout:
    """torch.layout: Tessera's tensors are all strided (dense)"""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "tessera." + self._name


strided = layout("strided")
__all__ += ["scatter_add", "layout", "strided"]


_GRID_MODES = ("bilinear", "nearest", "bicubic")
_GRID_PADS = ("zeros", "border", "reflection")


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """torch.grid_sampler (modes as ints: 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros,
    1 border, 2 reflection): F.grid_sample"""
    from .nn.functional_grid import grid_sample
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ValueError("grid_sampler(): interpolation_mode and padding_mode must be 0, 1 or 2")
    return grid_sample(input, grid, _GRID_MODES[interpolation_mode], _GRID_PADS[padding_mode],
                       bool(align_corners))


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.ndim != 4:
        raise RuntimeError("grid_sampler_2d(): expected 4-D input, got %d-D" % input.ndim)
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    if input.ndim != 5:
        raise RuntimeError("grid_sampler_3d(): expected 5-D input, got %d-D" % input.ndim)
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta, size, align_corners):
    from .nn.functional_grid import affine_grid
    return affine_grid(theta, size, align_corners)


__all__ += ["grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator"]


from ._C import histogramdd  # noqa: E402,F401  (C: include/tessera/numeric.h)


__all__ += ["histogramdd"]


def _angle_values(x):
    base = _C.where(x < 0, _C.full_like(x, math.pi), _C.zeros_like(x))
    return _C.where(x != x, x, base)


_ANGLE_FN = []


def _angle_function():
    """a custom Function whose gradient is zero everywhere (PyTorch's angle_backward for real
    inputs), built on first use (tessera.autograd imports this module)"""
    if not _ANGLE_FN:
        from ._autograd_function import Function

        class _Angle(Function):
            @staticmethod
            def forward(ctx, x):
                return _angle_values(x)

            @staticmethod
            def backward(ctx, grad):
                return _C.zeros_like(grad)
        _ANGLE_FN.append(_Angle)
    return _ANGLE_FN[0]


def angle(input):
    """torch.angle of a real tensor: 0 for x >= 0 (and -0.0), pi for x < 0, NaN for NaN; a float
    result (the default float dtype for integer and bool inputs) whose gradient is zero, as
    PyTorch's. Of a complex tensor: atan2(imag, real)."""
    if input.is_complex():
        return _C.angle(input)
    if not input.is_floating_point():
        return _angle_values(input.to(_C.get_default_dtype()))
    if input.requires_grad and _C.is_grad_enabled():
        return _angle_function().apply(input)
    return _angle_values(input)


__all__ += ["angle"]


# ---- hash_tensor ------------------------------------------------------------------------------

def hash_tensor(input, dim=None, *, keepdim=False, mode=0):
    """torch.hash_tensor (mode 0): the xor of the elements' 64-bit patterns — floats as float64,
    integers and bool as int64 — over dim (None or (): every dim), as uint64"""
    return _C._hash_tensor(input, dim, keepdim, mode)


def resize_as_(input, the_template, *, memory_format=None):
    """torch.resize_as_: input resized in place to the_template's shape (Tensor.resize_as_)"""
    from . import contiguous_format, preserve_format
    if memory_format not in (None, contiguous_format, preserve_format):
        raise RuntimeError("resize_as_(): only a contiguous result is supported")
    return input.resize_as_(the_template)
