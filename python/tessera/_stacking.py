"""PyTorch's stacking and broadcasting helpers (issue 52), composed from cat / stack / reshape /
expand, so they differentiate and run on every device: atleast_1d/2d/3d, hstack, vstack,
row_stack, dstack, column_stack, broadcast_shapes, broadcast_tensors, meshgrid, cartesian_prod."""
from . import _C
from ._C import meshgrid  # noqa: F401  (C's, src/ops/coordinates.c; issue 76)

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "broadcast_shapes", "broadcast_tensors", "meshgrid", "cartesian_prod"]


def _tensors(fn, args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    for i, t in enumerate(args):
        if not isinstance(t, _C.Tensor):
            raise TypeError("%s(): expected Tensor as element %d in argument 0, but got %s"
                            % (fn, i, type(t).__name__))
    return args


def _atleast(fn, nd, args):
    one = len(args) == 1 and isinstance(args[0], _C.Tensor)
    ts = _tensors(fn, args)
    out = []
    for t in ts:
        if t.ndim < nd:
            if nd == 3 and t.ndim == 2:
                t = t.unsqueeze(-1)
            elif nd == 3 and t.ndim == 1:
                t = t.reshape(1, -1, 1)
            else:
                t = t.reshape((1,) * (nd - t.ndim) + tuple(t.shape))
        out.append(t)
    return out[0] if one else tuple(out)


def atleast_1d(*tensors):
    """torch.atleast_1d: 0-dim tensors as 1-element vectors (a view)"""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    """torch.atleast_2d: 0- and 1-dim tensors as [1, n] (a view)"""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    """torch.atleast_3d: [n] -> [1, n, 1], [m, n] -> [m, n, 1] (a view)"""
    return _atleast("atleast_3d", 3, tensors)


def _check_nonempty(fn, ts):
    if len(ts) == 0:
        raise RuntimeError("%s expects a non-empty TensorList" % fn)


def hstack(tensors, *, out=None):
    """torch.hstack: cat along dim 1 (1-D tensors: along dim 0)"""
    ts = _tensors("hstack", (tensors,))
    _check_nonempty("hstack", ts)
    if out is not None:
        raise TypeError("hstack(): out= is not supported")
    ts = [atleast_1d(t) for t in ts]
    return _C.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors, *, out=None):
    """torch.vstack: cat along dim 0 of atleast_2d"""
    ts = _tensors("vstack", (tensors,))
    _check_nonempty("vstack", ts)
    if out is not None:
        raise TypeError("vstack(): out= is not supported")
    return _C.cat([atleast_2d(t) for t in ts], 0)


row_stack = vstack


def dstack(tensors, *, out=None):
    """torch.dstack: cat along dim 2 of atleast_3d"""
    ts = _tensors("dstack", (tensors,))
    _check_nonempty("dstack", ts)
    if out is not None:
        raise TypeError("dstack(): out= is not supported")
    return _C.cat([atleast_3d(t) for t in ts], 2)


def column_stack(tensors, *, out=None):
    """torch.column_stack: 0- and 1-D tensors as columns [n, 1], then hstack"""
    ts = _tensors("column_stack", (tensors,))
    _check_nonempty("column_stack", ts)
    if out is not None:
        raise TypeError("column_stack(): out= is not supported")
    return hstack([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in ts])


def broadcast_shapes(*shapes):
    """torch.broadcast_shapes: the shape all the given shapes broadcast to"""
    dims = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        for i, n in enumerate(reversed(s)):
            if n < 0:
                raise RuntimeError("Trying to create tensor with negative dimension %d" % n)
            if i == len(dims):
                dims.append(n)
            elif dims[i] == 1:
                dims[i] = n
            elif n != 1 and n != dims[i]:
                raise RuntimeError("Shape mismatch: objects cannot be broadcast to a single shape."
                                   "  Mismatch is at dim %d" % i)
    return _C.Size(tuple(reversed(dims)))


def broadcast_tensors(*tensors):
    """torch.broadcast_tensors: each tensor expanded to the common shape (views)"""
    ts = _tensors("broadcast_tensors", tensors)
    shape = broadcast_shapes(*[tuple(t.shape) for t in ts])
    return tuple(t.expand(shape) for t in ts)


def cartesian_prod(*tensors):
    """torch.cartesian_prod: the rows of every combination of the 1-D tensors' elements"""
    ts = _tensors("cartesian_prod", tensors)
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError("Expect a 1D vector, but got shape %s" % (list(t.shape),))
    if len(ts) == 1:
        return ts[0]
    return _C.stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], 1)
