"""tessera.linalg — torch.linalg over the C library (issue 52).

Norms and products: vector_norm, matrix_norm (every ord: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf),
norm (PyTorch's dispatch between the two), multi_dot, vecdot, cross, diagonal, vander.
Decompositions and solvers (include/tessera/linalg.h: LAPACK on the host in float64, float32 and
float64 tensors on any device; on cuda and sim that is a round trip through the host): inv /
inv_ex, solve / solve_ex, det, slogdet, cholesky / cholesky_ex, qr, svd, svdvals, eigh,
eigvalsh, lstsq, pinv, matrix_rank, matrix_power, matrix_exp, cond, solve_triangular, lu_factor /
lu_factor_ex, lu, lu_solve, householder_product, tensorinv, tensorsolve, eig / eigvals (complex
results for real matrices), ldl_factor / ldl_factor_ex / ldl_solve, polar, matrix_sqrth, with
PyTorch's named tuples and gradients. Complex input matrices are not supported.
"""
import collections as _collections
import math as _math

from . import _C


def _named(name, fields):
    t = _collections.namedtuple(name, fields)
    t.__module__ = "tessera.return_types"
    return t


class return_types:
    """PyTorch's torch.return_types for the linalg results (named tuples)"""
    linalg_inv_ex = _named("linalg_inv_ex", ["inverse", "info"])
    linalg_solve_ex = _named("linalg_solve_ex", ["result", "info"])
    linalg_slogdet = _named("linalg_slogdet", ["sign", "logabsdet"])
    slogdet = _named("slogdet", ["sign", "logabsdet"])
    linalg_cholesky_ex = _named("linalg_cholesky_ex", ["L", "info"])
    linalg_qr = _named("linalg_qr", ["Q", "R"])
    qr = _named("qr", ["Q", "R"])
    geqrf = _named("geqrf", ["a", "tau"])
    linalg_svd = _named("linalg_svd", ["U", "S", "Vh"])
    svd = _named("svd", ["U", "S", "V"])
    linalg_eigh = _named("linalg_eigh", ["eigenvalues", "eigenvectors"])
    linalg_lstsq = _named("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
    linalg_lu_factor = _named("linalg_lu_factor", ["LU", "pivots"])
    linalg_lu_factor_ex = _named("linalg_lu_factor_ex", ["LU", "pivots", "info"])
    linalg_lu = _named("linalg_lu", ["P", "L", "U"])
    lu_unpack = _named("lu_unpack", ["P", "L", "U"])
    triangular_solve = _named("triangular_solve", ["solution", "cloned_coefficient"])
    linalg_eig = _named("linalg_eig", ["eigenvalues", "eigenvectors"])
    linalg_ldl_factor = _named("linalg_ldl_factor", ["LD", "pivots"])
    linalg_ldl_factor_ex = _named("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
    linalg_polar = _named("linalg_polar", ["U", "H"])
    geqrf = _named("geqrf", ["a", "tau"])


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError's name; Tessera raises its TesseraError (a RuntimeError) with
    PyTorch's message for singular and non-positive-definite inputs"""


def _no_out(fn, out):
    if out is not None:
        raise TypeError("linalg.%s(): out= is not supported" % fn)


def _pivot(fn, pivot):
    if not pivot:
        raise NotImplementedError("linalg.%s: LU without pivoting is not implemented" % fn)


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
    matrix norm; anything else a vector norm (ord None: the 2-norm of the flattened input)
    (C: ts_linalg_norm)."""
    if out is not None:
        raise TypeError("linalg.norm(): out= is not supported")
    return _C._linalg_norm(A, ord, dim, keepdim, dtype=dtype)


def multi_dot(tensors, *, out=None):
    if out is not None:
        raise TypeError("linalg.multi_dot(): out= is not supported")
    return _C._linalg_multi_dot(list(tensors))


def vecdot(x, y, *, dim=-1):
    """sum(conj(x) * y, dim) (broadcasting; conj of a real tensor is itself)"""
    return _C._linalg_vecdot(x, y, dim)


def cross(input, other, *, dim=-1, out=None):
    _no_out("cross", out)
    from ._numeric_forms import cross as _cross
    return _cross(input, other, dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return A.diagonal(offset, dim1, dim2)


def vander(x, *, N=None):
    """x[..., i] ** j for j < N (N None: x.size(-1)): [..., n, N]"""
    return _C._linalg_vander(x, N)


# ---------------------------------------------------------------- decompositions and solvers
def inv(A, *, out=None):
    _no_out("inv", out)
    return _C._linalg_inv(A)


def inv_ex(A, *, check_errors=False, out=None):
    _no_out("inv_ex", out)
    if check_errors:
        X = _C._linalg_inv(A)
        return return_types.linalg_inv_ex(X, _C.zeros(tuple(A.shape[:-2]), dtype=_C.int32,
                                                      device=A.device))
    return return_types.linalg_inv_ex(*_C._linalg_inv(A, True))


def solve(A, B, *, left=True, out=None):
    _no_out("solve", out)
    return _C._linalg_solve(A, B, left)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    _no_out("solve_ex", out)
    if check_errors:
        X = _C._linalg_solve(A, B, left)
        return return_types.linalg_solve_ex(X, _C.zeros(tuple(A.shape[:-2]), dtype=_C.int32,
                                                        device=A.device))
    return return_types.linalg_solve_ex(*_C._linalg_solve(A, B, left, True))


def det(A, *, out=None):
    _no_out("det", out)
    return _C._linalg_det(A)


def slogdet(A, *, out=None):
    _no_out("slogdet", out)
    return return_types.linalg_slogdet(*_C._linalg_det(A, "slogdet"))


def cholesky(A, *, upper=False, out=None):
    _no_out("cholesky", out)
    return _C._linalg_cholesky(A, upper)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    _no_out("cholesky_ex", out)
    if check_errors:
        L = _C._linalg_cholesky(A, upper)
        return return_types.linalg_cholesky_ex(L, _C.zeros(tuple(A.shape[:-2]), dtype=_C.int32,
                                                           device=A.device))
    return return_types.linalg_cholesky_ex(*_C._linalg_cholesky(A, upper, True))


def qr(A, mode="reduced", *, out=None):
    _no_out("qr", out)
    return return_types.linalg_qr(*_C._linalg_qr(A, mode))


def svd(A, full_matrices=True, *, driver=None, out=None):
    _no_out("svd", out)
    return return_types.linalg_svd(*_C._linalg_svd(A, full_matrices))


def svdvals(A, *, driver=None, out=None):
    _no_out("svdvals", out)
    return _C._linalg_svd(A, False, False)


def eigh(A, UPLO="L", *, out=None):
    _no_out("eigh", out)
    return return_types.linalg_eigh(*_C._linalg_eigh(A, UPLO))


def eigvalsh(A, UPLO="L", *, out=None):
    _no_out("eigvalsh", out)
    return _C._linalg_eigh(A, UPLO, False)


def _tol(x, A=None):
    """a tolerance: None, a number or a one-element tensor (-1: None for the C call); a meta
    tolerance for a meta A: no value, none needed (only shapes are computed)"""
    if x is None:
        return -1.0
    if isinstance(x, _C.Tensor):
        if x.numel() != 1:
            raise NotImplementedError("linalg: a tensor of tolerances per matrix is not "
                                      "supported; give one number")
        if x.is_meta and isinstance(A, _C.Tensor) and A.is_meta:
            return 0.0
        x = x.item()
    return float(x)


def lstsq(A, B, rcond=None, *, driver=None, out=None):
    _no_out("lstsq", out)
    return return_types.linalg_lstsq(*_C._linalg_lstsq(A, B, _tol(rcond, A), driver))


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None, out=None):
    _no_out("pinv", out)
    if rcond is not None:
        rtol = rcond
        atol = 0.0 if atol is None else atol
    return _C._linalg_pinv(A, _tol(atol, A), _tol(rtol, A), hermitian)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None, out=None):
    _no_out("matrix_rank", out)
    if tol is not None:
        atol, rtol = tol, 0.0
    if any(isinstance(t, _C.Tensor) and t.numel() != 1 for t in (atol, rtol)):
        # tolerances per matrix (tensors broadcast against the batch)
        return _C._linalg_matrix_rank_tol(A, atol, rtol, hermitian)
    return _C._linalg_pinv(A, _tol(atol, A), _tol(rtol, A), hermitian, True)


def matrix_power(A, n, *, out=None):
    _no_out("matrix_power", out)
    return _C._linalg_matrix_power(A, n)


def matrix_exp(A):
    return _C._linalg_matrix_exp(A)


def cond(A, p=None, *, out=None):
    _no_out("cond", out)
    if p is None:
        p = "2"
    elif not isinstance(p, str):
        p = "inf" if p == _math.inf else "-inf" if p == -_math.inf else "%d" % p \
            if p == int(p) else repr(p)
    return _C._linalg_cond(A, p)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    _no_out("solve_triangular", out)
    return _C._linalg_solve_triangular(A, B, upper, left, unitriangular)


def lu_factor(A, *, pivot=True, out=None):
    _no_out("lu_factor", out)
    _pivot("lu_factor", pivot)
    return return_types.linalg_lu_factor(*_C._linalg_lu_factor(A))


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    _no_out("lu_factor_ex", out)
    _pivot("lu_factor_ex", pivot)
    if check_errors:
        LU, piv = _C._linalg_lu_factor(A)
        return return_types.linalg_lu_factor_ex(
            LU, piv, _C.zeros(tuple(A.shape[:-2]), dtype=_C.int32, device=A.device))
    return return_types.linalg_lu_factor_ex(*_C._linalg_lu_factor(A, True))


def lu(A, *, pivot=True, out=None):
    _no_out("lu", out)
    _pivot("lu", pivot)
    return return_types.linalg_lu(*_C._linalg_lu(A))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    _no_out("lu_solve", out)
    return _C._linalg_lu_solve(LU, pivots, B, left, adjoint)


def householder_product(A, tau, *, out=None):
    """the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i the i-th column of A
    below the diagonal with a 1 on it (composed in C: differentiable)"""
    _no_out("householder_product", out)
    return _C._linalg_householder_product(A, tau)


def tensorinv(A, ind=2, *, out=None):
    _no_out("tensorinv", out)
    return _C._linalg_tensorinv(A, ind)


def tensorsolve(A, B, dims=None, *, out=None):
    _no_out("tensorsolve", out)
    return _C._linalg_tensorsolve(A, B, dims)


def eig(A, *, out=None):
    """(eigenvalues, eigenvectors) of a real square A, complex (LAPACK geev's order and
    normalisation); differentiable when the loss does not depend on the eigenvectors' phases"""
    _no_out("eig", out)
    return return_types.linalg_eig(*_C._linalg_eig(A))


def eigvals(A, *, out=None):
    _no_out("eigvals", out)
    return _C._linalg_eig(A, False)


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """(LD, pivots, info): LAPACK sytrf's compact LDL^T of the lower triangle; no gradient"""
    _no_out("ldl_factor_ex", out)
    r = return_types.linalg_ldl_factor_ex(*_C._linalg_ldl_factor(A, hermitian, True))
    if check_errors and not r.info.is_meta and bool((r.info != 0).any()):
        raise RuntimeError("torch.linalg.ldl_factor_ex: The factorization could not be completed "
                           "because the block diagonal matrix D is exactly singular.")
    return r


def ldl_factor(A, *, hermitian=False, out=None):
    _no_out("ldl_factor", out)
    return return_types.linalg_ldl_factor(*_C._linalg_ldl_factor(A, hermitian, False))


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    _no_out("ldl_solve", out)
    return _C._linalg_ldl_solve(LD, pivots, B, hermitian)


def polar(A, *, out=None):
    """(U, H) with A = U H, U with orthonormal columns, H symmetric positive semi-definite"""
    _no_out("polar", out)
    return return_types.linalg_polar(*_C._linalg_polar(A))


def matrix_sqrth(A):
    """the symmetric positive-definite square root of a symmetric positive-definite A (lower
    triangle read)"""
    return _C._linalg_matrix_sqrth(A)
