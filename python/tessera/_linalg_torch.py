"""torch.*'s older names for the linear-algebra ops (issue 52): det, logdet, slogdet, inverse,
cholesky, cholesky_solve, cholesky_inverse, qr(some=), svd(some=, compute_uv=) with V (not Vh),
pinverse, matrix_power, matrix_exp, lu, lu_solve, lu_unpack, triangular_solve; each a thin layer
over tessera.linalg (and the Tensor methods of the same names forward here)."""
from . import _C
from . import linalg as _la
from .linalg import return_types as _rt

__all__ = ["det", "logdet", "slogdet", "inverse", "cholesky", "cholesky_solve",
           "cholesky_inverse", "qr", "geqrf", "ormqr", "svd", "pinverse", "matrix_power",
           "matrix_exp", "lu", "lu_solve", "lu_unpack", "triangular_solve", "svd_lowrank",
           "pca_lowrank"]


def _no_out(fn, out):
    if out is not None:
        raise TypeError("%s(): out= is not supported" % fn)


def det(input):
    return _C._linalg_det(input)


def logdet(input):
    return _C._linalg_det(input, "logdet")


def slogdet(input, *, out=None):
    _no_out("slogdet", out)
    return _rt.slogdet(*_C._linalg_det(input, "slogdet"))


def inverse(input, *, out=None):
    _no_out("inverse", out)
    return _C._linalg_inv(input)


def cholesky(input, upper=False, *, out=None):
    _no_out("cholesky", out)
    return _C._linalg_cholesky(input, upper)


def cholesky_solve(input, input2, upper=False, *, out=None):
    _no_out("cholesky_solve", out)
    return _C._linalg_cholesky_solve(input, input2, upper)


def cholesky_inverse(input, upper=False, *, out=None):
    _no_out("cholesky_inverse", out)
    return _C._linalg_cholesky_inverse(input, upper)


def qr(input, some=True, *, out=None):
    _no_out("qr", out)
    return _rt.qr(*_C._linalg_qr(input, "reduced" if some else "complete"))


def geqrf(input, *, out=None):
    """(a, tau): LAPACK's compact QR (R above the diagonal, Householder vectors below)"""
    _no_out("geqrf", out)
    return _rt.geqrf(*_C._geqrf(input))


def ormqr(input, input2, input3, left=True, transpose=False, *, out=None):
    """Q @ other (left, not transpose), Q^T @ other, other @ Q or other @ Q^T, Q the product of
    geqrf's reflectors in input scaled by input2 (tau); differentiable"""
    _no_out("ormqr", out)
    return _C._ormqr(input, input2, input3, left, transpose)


def svd(input, some=True, compute_uv=True, *, out=None):
    """U, S, V (V, not Vh); compute_uv=False: U and V zero-filled (m x m, n x n), as PyTorch"""
    _no_out("svd", out)
    return _rt.svd(*_C._svd(input, some, compute_uv))


def pinverse(input, rcond=1e-15):
    return _C._linalg_pinv(input, 0.0, float(rcond), False)


def matrix_power(input, n):
    return _C._linalg_matrix_power(input, n)


def matrix_exp(input):
    return _C._linalg_matrix_exp(input)


def lu(A, pivot=True, get_infos=False, out=None):
    """torch.lu: (LU, pivots) or (LU, pivots, infos)"""
    _no_out("lu", out)
    _la._pivot("lu", pivot)
    if get_infos:
        return tuple(_C._linalg_lu_factor(A, True))
    return tuple(_C._linalg_lu_factor(A))


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    _no_out("lu_solve", out)
    return _C._linalg_lu_solve(LU_data, LU_pivots, b)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    _no_out("lu_unpack", out)
    P, L, U = _C._linalg_lu_unpack(LU_data, LU_pivots)
    empty = _C.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    return _rt.lu_unpack(P if unpack_pivots else empty, L if unpack_data else empty,
                         U if unpack_data else empty)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """the solution X of op(A) X = b (op: transpose or not) and a copy of A"""
    _no_out("triangular_solve", out)
    X = _C._linalg_solve_triangular(A.mT if transpose else A, b, upper != transpose, True,
                                    unitriangular)
    return _rt.triangular_solve(X, A.clone())


def _lowrank_q(fn, q):
    if q is not None and int(q) < 0:
        raise ValueError("%s: q(=%d) must be non-negative integer" % (fn, int(q)))
    return q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ~= U diag(S) V^T, k = min(q, m, n) columns: Halko et al.'s randomized
    SVD (src/ops/linalg_lowrank.c); the random test matrix comes from tessera's generator"""
    return tuple(_C._svd_lowrank(A, _lowrank_q("svd_lowrank", q), 2 if niter is None else niter,
                                 M))


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V): svd_lowrank of A minus its column means (center) or of A; q None: min(6, m, n)"""
    return tuple(_C._pca_lowrank(A, _lowrank_q("pca_lowrank", q), bool(center), niter))
