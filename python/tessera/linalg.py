"""tessera.linalg — torch.linalg's norms and products over the C library (issue 52).

vector_norm, matrix_norm ('fro', 1, -1, inf, -inf; 'nuc', 2 and -2 need singular values and raise
tessera.UnsupportedError for now), norm (PyTorch's dispatch between the two), multi_dot, vecdot.
"""
from . import _C


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if out is not None:
        raise TypeError("linalg.vector_norm(): out= is not supported")
    return _C._linalg_vector_norm(x, ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    if out is not None:
        raise TypeError("linalg.matrix_norm(): out= is not supported")
    return _C._linalg_matrix_norm(A, ord, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """PyTorch's rule: a string ord, a dim of two dims, or (no dim) a 2-D input with an ord is a
    matrix norm; anything else a vector norm (ord None: the 2-norm of the flattened input)."""
    if out is not None:
        raise TypeError("linalg.norm(): out= is not supported")
    if isinstance(dim, int):
        dim = (dim,)
    if ord is not None:
        if isinstance(ord, str) or (dim is not None and len(dim) == 2) or \
                (dim is None and A.ndim == 2):
            return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype)
        if dim is None and A.ndim != 1:
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must "
                               "be 1D or 2D. Got %dD." % A.ndim)
        return vector_norm(A, ord, dim, keepdim, dtype=dtype)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
    return vector_norm(A, 2, dim, keepdim, dtype=dtype)


def multi_dot(tensors, *, out=None):
    if out is not None:
        raise TypeError("linalg.multi_dot(): out= is not supported")
    return _C._linalg_multi_dot(list(tensors))


def vecdot(x, y, *, dim=-1):
    """sum(x * y, dim) for real tensors (broadcasting)"""
    return (x * y).sum(dim)
