"""A tensor's storage as PyTorch shows it: Tensor.untyped_storage() (its bytes) and
Tensor.storage() (its elements, PyTorch's TypedStorage). Each object holds a 1-D tensor over the
whole storage (`_tensor`, from the C library's ts_storage_view), so it shares the memory: writes
through it reach every tensor of that storage, and Tensor.set_(storage, offset, size, stride)
takes it as a source."""
from . import _C

__all__ = ["UntypedStorage", "TypedStorage"]


def _index(i, n, what):
    if not isinstance(i, int):
        raise TypeError("%s indices must be integers or slices, not %s" % (what, type(i).__name__))
    if i < -n or i >= n:
        raise IndexError("index %d out of range for storage of size %d" % (i, n))
    return i + n if i < 0 else i


class _StorageBase:
    _tensor = None

    def __len__(self):
        return self._tensor.numel()

    def size(self):
        return self._tensor.numel()

    def nbytes(self):
        return self._tensor.numel() * self._tensor.element_size()

    def element_size(self):
        return self._tensor.element_size()

    def data_ptr(self):
        return self._tensor.data_ptr()

    @property
    def device(self):
        return self._tensor.device

    @property
    def is_cuda(self):
        return self._tensor.device.type == "cuda"

    def tolist(self):
        return self._tensor.tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise RuntimeError("slices of a storage must have step 1, got %d" % step)
            return self._like(self._tensor[start:max(start, stop)])
        return self._tensor[_index(i, len(self), type(self).__name__)].item()

    def __setitem__(self, i, value):
        if isinstance(i, slice):
            self._tensor[i] = value
        else:
            self._tensor[_index(i, len(self), type(self).__name__)] = value

    def fill_(self, value):
        self._tensor.fill_(value)
        return self

    def zero_(self):
        return self.fill_(0)

    def share_memory_(self):
        """moves the storage into shared memory, in place (Tensor.share_memory_)"""
        self._tensor.share_memory_()
        return self

    def is_shared(self):
        return self._tensor.is_shared()

    def copy_(self, source, non_blocking=False):
        if source.nbytes() != self.nbytes():
            raise RuntimeError("copy_: storages of %d and %d bytes" % (self.nbytes(),
                                                                          source.nbytes()))
        self.untyped()._tensor.copy_(source.untyped()._tensor)
        return self

    def clone(self):
        return self._like(self._tensor.clone())

    def to(self, device=None, non_blocking=False):
        return self._like(self._tensor.to(device))

    def cpu(self):
        return self if self.device.type == "cpu" else self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)

    def __repr__(self):
        body = "\n".join(" " + str(v) for v in self.tolist())
        return "%s\n[%s(%sdevice=%s) of size %d]" % (body, self._name(), self._dtype_repr(),
                                                    self.device, len(self))


class UntypedStorage(_StorageBase):
    """A storage's bytes. UntypedStorage(n, device=None) makes n zeroed bytes; the storage of a
    tensor comes from tensor.untyped_storage()."""

    def __init__(self, *args, device=None, _tensor=None):
        if _tensor is not None:
            self._tensor = _tensor
            return
        if len(args) > 1:
            raise TypeError("UntypedStorage(): expected at most one argument (a size or a "
                            "sequence of byte values), got %d" % len(args))
        src = args[0] if args else 0
        if isinstance(src, int):
            if src < 0:
                raise RuntimeError("UntypedStorage(): size must be >= 0, got %d" % src)
            self._tensor = _C.zeros(src, dtype=_C.uint8, device=device)
        else:
            self._tensor = _C.tensor(list(src), dtype=_C.uint8, device=device)

    def _like(self, t):
        return UntypedStorage(_tensor=t)

    def _name(self):
        return "tessera.storage.UntypedStorage"

    def _dtype_repr(self):
        return ""

    @property
    def dtype(self):
        return _C.uint8

    def untyped(self):
        return self


class TypedStorage(_StorageBase):
    """A storage's elements in a tensor's dtype (tensor.storage())."""

    def __init__(self, *, _tensor):
        self._tensor = _tensor

    def _like(self, t):
        return TypedStorage(_tensor=t)

    def _name(self):
        return "tessera.storage.TypedStorage"

    def _dtype_repr(self):
        return "dtype=%s, " % self.dtype

    @property
    def dtype(self):
        return self._tensor.dtype

    def untyped(self):
        return UntypedStorage(_tensor=self._tensor._storage_view())

    _untyped_storage = property(untyped)


def untyped_storage(self):
    """Tensor.untyped_storage(): the bytes of the tensor's whole storage"""
    return UntypedStorage(_tensor=self._storage_view())


def storage(self):
    """Tensor.storage(): the tensor's whole storage as elements of its dtype"""
    return TypedStorage(_tensor=self._storage_view(self.dtype))
