"""index_put / index_put_ (a tuple of index tensors broadcast, flattened to one linear index, then
C's put), nonzero_static and scatter_add as functions; Tensor methods reach them through
python/src/tensor_python_methods.c."""
from . import _C
from ._stacking import broadcast_tensors as _broadcast_tensors

__all__ = ["index_put", "index_put_", "nonzero_static", "scatter_add"]


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


def nonzero_static(input, *, size, fill_value=-1):
    """torch.nonzero_static: nonzero()'s rows, cut or padded with fill_value to size rows"""
    return _C._nonzero_static(input, size, fill_value)


def scatter_add(input, dim, index, src):
    """torch.scatter_add: Tensor.scatter_add as a function"""
    return input.scatter_add(dim, index, src)
