"""tessera.sparse — sparse COO tensors (torch.sparse_coo_tensor, Tensor.to_sparse,
torch.sparse.mm) over Tessera's public dense ops (issue 53).

A SparseTensor holds `indices`, an int64 tensor [sparse_dim, nnz], and `values`, a tensor
[nnz, *dense_sizes], on one device, with its `size` (sparse sizes then dense sizes). Every operation
here is a composition of public dense ops (index_select, index_add, unique, nonzero, advanced
indexing), so it runs on every device and differentiates as they do: a product `sparse @ dense`
has gradients with respect to the dense operand and to the sparse values.

Supported: construction and its checks (indices are always checked against the size: an index out of
range would otherwise be a wrong number), to_dense / coalesce / indices / values, transpose of two
sparse (or two dense) dims, `.to(device, dtype)`, sum, scalar mul / div, neg, sparse + sparse
(sparse), sparse + dense and dense + sparse (dense), sparse * dense of one shape (sparse),
sparse @ dense and dense @ sparse (dense). Everything else PyTorch has for sparse tensors raises
NotImplementedError naming the op ("... sparse tensors are not supported there"); a SparseTensor is
not a tessera.Tensor (isinstance), and the dense ops refuse it with that error rather than
densifying it."""
import functools
import math
import re

from . import _C
from ._C import Tensor
from ._strided import layout, strided

__all__ = ["SparseTensor", "sparse_coo_tensor", "sparse_coo", "mm", "sum", "addmm", "smm", "spmm"]

sparse_coo = layout("sparse_coo")


def _unsupported(op):
    return NotImplementedError(
        "%s: sparse tensors (layout tessera.sparse_coo) are not supported there; convert with "
        ".to_dense() first" % op)


def _prod(xs):
    return math.prod(xs)


def _result_dtype(a, b):
    return (_C.zeros(1, dtype=a) + _C.zeros(1, dtype=b)).dtype


def _is_sparse(x):
    return isinstance(x, SparseTensor)


class SparseTensor:
    """A sparse COO tensor (layout tessera.sparse_coo): see the module's doc."""
    _ts_sparse = True  # what the C argument checks look for, to name sparse tensors in errors
    __slots__ = ("_i", "_v", "_size", "_coalesced", "__weakref__")

    def __init__(self, indices, values, size, coalesced):
        self._i, self._v, self._size, self._coalesced = indices, values, tuple(size), coalesced

    # ---------------------------------------------------------------- what it is
    layout = sparse_coo
    is_sparse = True
    is_sparse_csr = False
    is_quantized = False
    is_meta = False
    is_nested = False
    is_xpu = is_mps = False

    @property
    def shape(self):
        return _C.Size(self._size)

    def size(self, dim=None):
        if dim is None:
            return _C.Size(self._size)
        return self._size[self._dim(dim, "size")]

    def dim(self):
        return len(self._size)

    ndimension = dim

    @property
    def ndim(self):
        return len(self._size)

    def numel(self):
        return _prod(self._size)

    nelement = numel

    def __len__(self):
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    @property
    def dtype(self):
        return self._v.dtype

    @property
    def device(self):
        return self._v.device

    @property
    def is_cuda(self):
        return self._v.is_cuda

    @property
    def is_cpu(self):
        return self._v.device.type == "cpu"

    def sparse_dim(self):
        return self._i.shape[0]

    def dense_dim(self):
        return self._v.dim() - 1

    def _nnz(self):
        return self._i.shape[1]

    def is_coalesced(self):
        return self._coalesced

    def _indices(self):
        return self._i

    def _values(self):
        return self._v

    def indices(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._i

    def values(self):
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._v

    def _dim(self, d, op):
        n = max(len(self._size), 1)
        if not -n <= d < n:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but "
                             "got %d)" % (-n, n - 1, d))
        return d % n

    def _like(self, indices=None, values=None, size=None, coalesced=None):
        return SparseTensor(self._i if indices is None else indices,
                            self._v if values is None else values,
                            self._size if size is None else size,
                            self._coalesced if coalesced is None else coalesced)

    # ---------------------------------------------------------------- autograd
    @property
    def requires_grad(self):
        return self._v.requires_grad

    def requires_grad_(self, requires_grad=True):
        self._v.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        g = self._v.grad
        return None if g is None else SparseTensor(self._i, g, self._size, self._coalesced)

    @property
    def grad_fn(self):
        return self._v.grad_fn

    @property
    def is_leaf(self):
        return self._v.is_leaf

    def detach(self):
        return self._like(values=self._v.detach())

    def clone(self, *, memory_format=None):
        return self._like(indices=self._i.clone(), values=self._v.clone())

    # ---------------------------------------------------------------- conversions
    def coalesce(self):
        """duplicates summed, indices sorted (row-major) and unique (C: ts_sparse_coalesce)"""
        if self._coalesced:
            return self
        return SparseTensor(*_C._sparse_coalesce(self._i, self._v, self._size, False))

    def to_dense(self, dtype=None, *, masked_grad=None):
        out = _C._sparse_to_dense(self._i, self._v, self._size, self._coalesced)
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
            raise _unsupported("to_sparse(layout=%r)" % (layout,))
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim "
                               "argument !=self.sparse_dim() is not supported")
        return self

    to_sparse_coo = to_sparse

    def to(self, *args, **kwargs):
        values = self._v.to(*args, **kwargs)
        if values is self._v:
            return self
        return self._like(indices=self._i.to(values.device), values=values)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def long(self):
        return self.to(_C.int64)

    def int(self):
        return self.to(_C.int32)

    def bool(self):
        return self.to(_C.bool)

    # ---------------------------------------------------------------- shape
    def transpose(self, dim0, dim1):
        """two sparse dims (indices rows swapped) or two dense dims (C: ts_sparse_transpose)"""
        return SparseTensor(*_C._sparse_transpose(self._i, self._v, self._size, self._coalesced,
                                                  dim0, dim1))

    def t(self):
        if self.dim() > 2:
            raise RuntimeError("t() expects a tensor with <= 2 sparse and 0 dense dimensions, "
                               "but self is %dD" % self.dim())
        return self.transpose(0, 1) if self.dim() == 2 else self._like()

    swapaxes = swapdims = transpose

    # ---------------------------------------------------------------- reductions
    def sum(self, dim=None, keepdim=False, dtype=None):
        """all dims: a dense 0-dim tensor; some: sparse (dense once every sparse dim is summed)
        (C: ts_sparse_sum)"""
        if keepdim:
            raise _unsupported("sum(keepdim=True)" if dim is None else "sum(dim, keepdim=True)")
        if dim is not None:
            dim = (dim,) if isinstance(dim, int) else tuple(dim)
            for d in dim:
                self._dim(d, "sum")
        r = _C._sparse_sum(self._i, self._v, self._size, self._coalesced, dim, dtype)
        return r if isinstance(r, Tensor) else SparseTensor(*r)

    # ---------------------------------------------------------------- arithmetic
    def neg(self):
        return self._like(values=-self._v)

    __neg__ = negative = neg

    def mul(self, other):
        """by a number, a 0-dim tensor or a dense tensor of one shape (C: ts_sparse_mul)"""
        if not isinstance(other, (int, float, bool, Tensor)):
            raise _unsupported("mul(sparse, %s)" % ("sparse" if _is_sparse(other)
                                                      else type(other).__name__))
        if isinstance(other, Tensor) and other.dim() != 0 and (
                tuple(other.shape) != tuple(self.shape) or self.dense_dim() != 0):
            raise _unsupported("mul(sparse, dense) other than of one shape without dense dims "
                               "(sizes %s and %s)" % (list(self.shape), list(other.shape)))
        return SparseTensor(*_C._sparse_mul(self._i, self._v, self._size, self._coalesced, other))

    __mul__ = __rmul__ = multiply = mul

    def div(self, other):
        if isinstance(other, (int, float, bool)) or (isinstance(other, Tensor)
                                                     and other.dim() == 0):
            return self._like(values=self._v / other)
        raise _unsupported("div(sparse, tensor)")

    __truediv__ = divide = true_divide = div

    def add(self, other, *, alpha=1):
        if _is_sparse(other):
            return _add_sparse(self, other, alpha)
        if isinstance(other, Tensor):
            return _add_dense(self.to_dense(), other, alpha, "add")
        raise _unsupported("add(sparse, %s)" % type(other).__name__)

    __add__ = add

    def __radd__(self, other):
        if isinstance(other, Tensor):
            return _add_dense(other, self, 1, "add")
        raise _unsupported("add(%s, sparse)" % type(other).__name__)

    def sub(self, other, *, alpha=1):
        return self.add(other, alpha=-alpha)

    __sub__ = subtract = sub

    def __rsub__(self, other):
        if isinstance(other, Tensor):
            return _add_dense(other, self, -1, "sub")
        raise _unsupported("sub(%s, sparse)" % type(other).__name__)

    def mm(self, mat2):
        return _mm(self, mat2, "mm")

    def matmul(self, other):
        return _mm(self, other, "matmul")

    __matmul__ = matmul

    def __rmatmul__(self, other):
        return _dense_mm_sparse(other, self, "matmul")

    # ---------------------------------------------------------------- printing
    def __repr__(self):
        """PyTorch's layout: indices and values without their dtype or device, then the
        suffixes (device, size, nnz, dtype, layout, requires_grad / grad_fn) wrapped at 80"""
        ind = " " * len("tensor(")
        first = "tensor(indices=" + _inner(self._i, len("tensor(indices="))
        second = ind + "values=" + _inner(self._v.detach(), len(ind + "values="))
        suffixes = []
        dev = self._v.device
        if dev.type != "cpu":
            suffixes.append("device='%s'" % dev)
        suffixes += ["size=%s" % (tuple(self._size),), "nnz=%d" % self._nnz()]
        default = (_C.get_default_dtype() if hasattr(_C, "get_default_dtype") else _C.float32)
        if self._v.dtype not in (default, _C.int64, _C.bool):
            suffixes.append("dtype=%r" % self._v.dtype)
        suffixes.append("layout=tessera.sparse_coo")
        if self._v.requires_grad:
            fn = self._v.grad_fn
            suffixes.append("requires_grad=True" if fn is None
                            else "grad_fn=<%s>" % type(fn).__name__)
        out = first + ",\n" + second + ",\n" + ind
        line = len(ind)
        for k, suf in enumerate(suffixes):
            if k and line + len(suf) + 2 > 80:
                out += ",\n" + ind
                line = len(ind)
            elif k:
                out += ", "
                line += 2
            out += suf
            line += len(suf)
        return out + ")"

    __str__ = __repr__

    # ---------------------------------------------------------------- everything else refuses
    def __getattr__(self, name):
        """a dense Tensor's other methods exist (hasattr is True, as in PyTorch) and refuse when
        called; its other attributes refuse when read"""
        if name.startswith("__") or not hasattr(Tensor, name):
            raise AttributeError("'SparseTensor' object has no attribute '%s'" % name)
        if callable(getattr(Tensor, name)):
            return functools.partial(_refuse(name), self)
        raise _unsupported("Tensor.%s" % name)

    def __bool__(self):
        raise _unsupported("bool()")

    def __iter__(self):
        raise _unsupported("iter()")

    def __getitem__(self, index):
        raise _unsupported("indexing (Tensor.__getitem__)")

    def __setitem__(self, index, value):
        raise _unsupported("Tensor.__setitem__")

    def __array__(self, *args, **kwargs):
        raise _unsupported("numpy conversion (__array__)")

    def __reduce_ex__(self, protocol):
        raise _unsupported("pickling / tessera.save")

    __hash__ = object.__hash__


def _inner(t, indent):
    """t's repr without dtype / device / grad suffixes, its later lines indented by indent"""
    text = re.sub(r", (dtype=tessera\.\w+|device='[^']*'|requires_grad=True|grad_fn=<\w+>)", "",
                  repr(t))
    if t.numel() == 0 and "size=" not in text:
        text = text[:-1] + ", size=%s)" % (tuple(t.shape),)
    lines = text.split("\n")
    return "\n".join([lines[0]] + [(" " * indent + ln) if ln else ln for ln in lines[1:]])


def _refuse(name):
    def op(self, *args, **kwargs):
        raise _unsupported("Tensor.%s" % name)
    op.__name__ = name
    return op


# the operators Python looks up on the type (so not through __getattr__): each refuses by name
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "pow", "rpow", "floordiv", "rfloordiv", "mod",
              "rmod", "and", "rand", "or", "ror", "xor", "rxor", "invert", "abs", "pos",
              "lshift", "rshift", "rlshift", "rrshift", "rtruediv", "divmod", "rdivmod"):
    setattr(SparseTensor, "__%s__" % _name, _refuse("__%s__" % _name))
SparseTensor.__hash__ = object.__hash__
del _name


# ------------------------------------------------------------------------------ construction
def _as_tensor(x, dtype=None, device=None):
    if isinstance(x, Tensor):
        return x
    return _C.tensor(x, dtype=dtype, device=device)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """torch.sparse_coo_tensor: indices [sparse_dim, nnz] (integers), values [nnz, *dense_sizes];
    size inferred when None (the largest index + 1 per sparse dim). The indices are always checked
    against the size (check_invariants=False does not skip that). C: ts_sparse_coo_tensor."""
    if _is_sparse(indices) or _is_sparse(values):
        raise TypeError("sparse_coo_tensor(): indices and values must be dense tensors")
    values = _as_tensor(values, dtype=dtype, device=device)
    indices = _as_tensor(indices, device=device if device is not None else values.device)
    return SparseTensor(*_C._sparse_coo_tensor(indices, values, size, dtype, device,
                                               requires_grad, is_coalesced,
                                               bool(check_invariants)))


def dense_to_sparse(x, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """Tensor.to_sparse(sparse_dim=None): the nonzero entries (a NaN counts as nonzero), coalesced;
    with sparse_dim < x.dim(), the sub-tensors of the last dims that have a nonzero
    (C: ts_dense_to_sparse)"""
    if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
        raise _unsupported("to_sparse(layout=%r)" % (layout,))
    return SparseTensor(*_C._dense_to_sparse(x, sparse_dim))


def dense_to_dense(x, dtype=None, *, masked_grad=None):
    """Tensor.to_dense() of a dense tensor: itself (another dtype: a converted copy)"""
    return x if dtype is None else x.to(dtype)


def dense_layout(x):
    return strided


# ------------------------------------------------------------------------------ arithmetic
def _add_dense(dense, sp, alpha, op):
    if tuple(dense.shape) != tuple(sp.shape):
        raise RuntimeError("%s: expected 'self' and 'other' to have same size, but self has size "
                           "%s while other has size %s (a sparse operand does not broadcast)"
                           % (op, list(dense.shape), list(sp.shape)))
    if dense.device != sp.device:
        raise _C.DeviceError("%s: dense operand on %s, sparse on %s"
                             % (op, dense.device, sp.device))
    other = sp.to_dense()
    return dense + other if alpha == 1 else dense + other * alpha


def _add_sparse(a, b, alpha):
    if a.shape != b.shape:
        raise RuntimeError("add: expected sizes of 'self' and 'other' to match, but %s != %s"
                           % (list(a.shape), list(b.shape)))
    if a.sparse_dim() != b.sparse_dim():
        raise RuntimeError("add: expected 'self' and 'other' to have same sparse dimensions, "
                           "but %d != %d" % (a.sparse_dim(), b.sparse_dim()))
    if a.device != b.device:
        raise _C.DeviceError("add: sparse operands on %s and %s" % (a.device, b.device))
    dt = _result_dtype(a.dtype, b.dtype)
    bv = b._v.to(dt) if alpha == 1 else b._v.to(dt) * alpha
    s = SparseTensor(_C.cat([a._i, b._i], 1), _C.cat([a._v.to(dt), bv], 0), a._size, False)
    return s.coalesce()


def _check_mm(sp, other, op):
    if not isinstance(other, Tensor):
        if _is_sparse(other):
            raise _unsupported("%s(sparse, sparse)" % op)
        raise TypeError("%s(): argument 'mat2' must be Tensor, not %s"
                        % (op, type(other).__name__))
    if sp.dim() != 2 or sp.sparse_dim() != 2:
        raise _unsupported("%s with a sparse operand of %d dims (%d sparse): only 2-D sparse "
                           "matrices" % (op, sp.dim(), sp.sparse_dim()))
    if other.dim() not in (1, 2) or (op == "mm" and other.dim() != 2):
        raise RuntimeError("%s: the dense operand must be %s, got %d dims"
                           % (op, "2-D" if op == "mm" else "1-D or 2-D", other.dim()))
    if other.shape[0] != sp.shape[1]:
        raise RuntimeError("%s: sparse operand of size %s and dense operand of size %s cannot be "
                           "multiplied" % (op, list(sp.shape), list(other.shape)))
    if other.dtype != sp.dtype:
        raise RuntimeError("%s: expected the sparse and dense operands to have the same dtype, "
                           "but got: %s != %s" % (op, sp.dtype, other.dtype))
    if other.device != sp.device:
        raise _C.DeviceError("%s: sparse operand on %s, dense on %s"
                             % (op, sp.device, other.device))


def _mm(sp, dense, op):
    """sparse [n, m] @ dense [m, k] (or [m]): out[r] += v * dense[c] for each entry (r, c, v),
    through index_select and index_add (differentiable in dense and in the values; C: ts_sparse_mm)"""
    _check_mm(sp, dense, op)
    return _C._sparse_mm(sp._i, sp._v, sp._size, sp._coalesced, dense)


def _dense_mm_sparse(dense, sp, op):
    """dense [n, m] @ sparse [m, k] = (sparse^T @ dense^T)^T"""
    if not isinstance(dense, Tensor):
        raise _unsupported("%s(%s, sparse)" % (op, type(dense).__name__))
    if dense.dim() == 1:
        return _mm(sp.t(), dense, op)
    if dense.dim() != 2:
        raise _unsupported("%s with a dense operand of %d dims and a sparse one"
                           % (op, dense.dim()))
    if sp.dim() == 2 and dense.shape[1] != sp.shape[0]:
        raise RuntimeError("%s: dense operand of size %s and sparse operand of size %s cannot be "
                           "multiplied" % (op, list(dense.shape), list(sp.shape)))
    return _mm(sp.t(), dense.t(), op).t()


# ------------------------------------------------------------------------------ torch.sparse
def mm(mat1, mat2, reduce=None):
    """torch.sparse.mm: sparse @ dense -> dense (dense @ sparse too)"""
    if reduce is not None:
        raise _unsupported("sparse.mm(reduce=%r)" % (reduce,))
    if _is_sparse(mat1):
        return _mm(mat1, mat2, "mm")
    if _is_sparse(mat2):
        return _dense_mm_sparse(mat1, mat2, "mm")
    return _C.mm(mat1, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2), mat1 sparse (C: ts_sparse_addmm)"""
    if not _is_sparse(mat1):
        raise RuntimeError("sparse.addmm: expected mat1 to be a sparse tensor")
    _check_mm(mat1, mat2, "addmm")
    return _C._sparse_addmm(mat, mat1._i, mat1._v, mat1._size, mat1._coalesced, mat2, beta, alpha)


def smm(input, mat):
    """torch.smm: sparse @ dense as a sparse tensor"""
    if not _is_sparse(input):
        raise RuntimeError("smm: expected the first operand to be a sparse tensor")
    return dense_to_sparse(_mm(input, mat, "smm"))


def spmm(input, mat2):
    """torch.spmm: sparse @ dense -> dense"""
    return mm(input, mat2)


def sum(input, dim=None, dtype=None):
    """torch.sparse.sum: all dims -> a dense 0-dim tensor; some dims -> sparse (dense once
    every sparse dim is summed)"""
    if not _is_sparse(input):
        return _C.sum(input) if dim is None else _C.sum(input, dim)
    return input.sum(dim, dtype=dtype)


# ------------------------------------------------------------------------------ tessera.X hooks
def _any_sparse(args, kwargs):
    return any(_is_sparse(a) for a in args) or any(_is_sparse(a) for a in kwargs.values())


def _top_add(input, other, *, alpha=1):
    if _is_sparse(input):
        return input.add(other, alpha=alpha)
    if isinstance(input, Tensor):
        return _add_dense(input, other, alpha, "add")
    raise _unsupported("add(%s, sparse)" % type(input).__name__)


def _top_sub(input, other, *, alpha=1):
    if _is_sparse(input):
        return input.sub(other, alpha=alpha)
    if isinstance(input, Tensor):
        return _add_dense(input, other, -alpha, "sub")
    raise _unsupported("sub(%s, sparse)" % type(input).__name__)


def _top_mul(input, other):
    if _is_sparse(input):
        return input.mul(other)
    if isinstance(input, Tensor):
        return other.mul(input)
    raise _unsupported("mul(%s, sparse)" % type(input).__name__)


def _top_matmul(input, other):
    if _is_sparse(input):
        return input.matmul(other)
    return _dense_mm_sparse(input, other, "matmul")


def _top_mm(input, mat2):
    return mm(input, mat2)


def _top_sum(input, dim=None, keepdim=False, *, dtype=None):
    if not _is_sparse(input):
        raise _unsupported("sum")
    return input.sum(dim, keepdim=keepdim, dtype=dtype)


def _method(name):
    def call(input, *args, **kwargs):
        if not _is_sparse(input):
            raise _unsupported(name)
        return getattr(input, name)(*args, **kwargs)
    return call


_HOOKS = {"add": _top_add, "sub": _top_sub, "subtract": _top_sub, "mul": _top_mul,
          "multiply": _top_mul, "matmul": _top_matmul, "mm": _top_mm, "sum": _top_sum,
          "neg": _method("neg"), "negative": _method("neg"), "div": _method("div"),
          "divide": _method("div"), "true_divide": _method("div")}


def install(namespace):
    """tessera.X for X in _HOOKS: the dense function runs unchanged; when it refuses a sparse
    operand, the sparse one runs (through _out.FALLBACK: the out= wrapper every one of them has
    already catches the refusal, so the dense path pays nothing). tessera.is_tensor(sparse) is
    True. tessera.t / transpose (C functions without that wrapper) refuse sparse operands: the
    methods s.t() / s.transpose() work."""
    from . import _out
    for name, handler in _HOOKS.items():
        _out.FALLBACK[name] = (_any_sparse, handler)
    is_tensor = namespace.get("is_tensor")

    def _is_tensor(obj):
        return _is_sparse(obj) or is_tensor(obj)

    _is_tensor.__doc__ = getattr(is_tensor, "__doc__", None)
    namespace["is_tensor"] = _is_tensor
