"""Strided-layout forms: as_strided_copy / as_strided_scatter, the uninitialised factories
empty_strided / new_empty_strided / empty_permuted (contiguous results), resize_as_, and
torch.layout (every Tessera tensor is strided: tessera.strided)."""
from . import _C

__all__ = ["as_strided_copy", "as_strided_scatter", "empty_strided", "empty_permuted", "resize_as_",
           "layout", "strided"]


def as_strided_copy(input, size, stride, storage_offset=None):
    """torch.as_strided_copy: the elements of an as_strided view over input's storage, as a new
    tensor; every element read must be one of input's own (else a RuntimeError)"""
    return _C._as_strided_copy(input, size, stride, storage_offset)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """torch.as_strided_scatter: input with the elements of its as_strided view replaced by src"""
    return _C._as_strided_scatter(input, src, size, stride, storage_offset)


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


def resize_as_(input, the_template, *, memory_format=None):
    """torch.resize_as_: input resized in place to the_template's shape (Tensor.resize_as_)"""
    from . import contiguous_format, preserve_format
    if memory_format not in (None, contiguous_format, preserve_format):
        raise RuntimeError("resize_as_(): only a contiguous result is supported")
    return input.resize_as_(the_template)


class layout:
    """torch.layout: Tessera's tensors are all strided (dense)"""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "tessera." + self._name


strided = layout("strided")
