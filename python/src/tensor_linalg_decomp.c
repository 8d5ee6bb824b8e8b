/* tensor_linalg_decomp.c — torch.linalg's decompositions and solvers (issue 52,
 * include/tessera/linalg.h) as private tessera._C functions `_linalg_*` (and `_ormqr`), one C call
 * each, with positional or keyword arguments: inv, solve, det, lu, cholesky, qr, svd, eigh, eig /
 * eigvals, ldl_factor / ldl_solve, polar, matrix_sqrth, lstsq, pinv, the low-rank forms...;
 * several results come back as a plain tuple, which python/tessera/linalg.py makes PyTorch's
 * named tuples. */
#include <math.h>
#include <string.h>

#include "tensor_impl.h"
#include "tessera/linalg.h"

/* the parse of every function here: names, how many are tensors (first), the rest as objects */

/* ------------------------------------------------------------------ LU family */
static PyObject *f_inv SIG {
    (void)mod;
    PARSE("linalg.inv", 1, "A", "ex");
    ts_tensor *A = TARG(0, "linalg.inv"), *r[2] = {0};
    bool ex;
    if (!A || tsp_bool_arg(a[1], false, &ex, "linalg.inv", "ex") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_inv_ex(A, ex ? &r[1] : NULL));
    return tsp_results("linalg", r, ex ? 2 : 1);
}

static PyObject *f_solve SIG {
    (void)mod;
    PARSE("linalg.solve", 2, "A", "B", "left", "ex");
    ts_tensor *A = TARG(0, "linalg.solve"), *B = A ? TARG(1, "linalg.solve") : NULL, *r[2] = {0};
    bool left, ex;
    if (!B || tsp_bool_arg(a[2], true, &left, "linalg.solve", "left") < 0 ||
        tsp_bool_arg(a[3], false, &ex, "linalg.solve", "ex") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_solve_ex(A, B, left, ex ? &r[1] : NULL));
    return tsp_results("linalg", r, ex ? 2 : 1);
}

static PyObject *f_det SIG {
    (void)mod;
    PARSE("linalg.det", 1, "A", "kind");
    ts_tensor *A = TARG(0, "linalg.det"), *r[2] = {0};
    const char *kind;
    if (!A || tsp_str_arg(a[1], "det", &kind, "linalg.det", "kind") < 0 || tsp_enter()) return NULL;
    const bool slog = !strcmp(kind, "slogdet");
    TSP_NOGIL(r[0] = slog                      ? ts_linalg_slogdet(A, &r[1])
                     : !strcmp(kind, "logdet") ? ts_logdet(A)
                                               : ts_linalg_det(A));
    return tsp_results("linalg", r, slog ? 2 : 1);
}

static PyObject *f_lu_factor SIG {
    (void)mod;
    PARSE("linalg.lu_factor", 1, "A", "ex");
    ts_tensor *A = TARG(0, "linalg.lu_factor"), *r[3] = {0};
    bool ex;
    if (!A || tsp_bool_arg(a[1], false, &ex, "linalg.lu_factor", "ex") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_lu_factor_ex(A, &r[1], ex ? &r[2] : NULL));
    return tsp_results("linalg", r, ex ? 3 : 2);
}

static PyObject *f_lu_unpack SIG {
    (void)mod;
    PARSE("lu_unpack", 2, "LU_data", "LU_pivots");
    ts_tensor *LU = TARG(0, "lu_unpack"), *piv = LU ? TARG(1, "lu_unpack") : NULL, *r[3] = {0};
    if (!piv || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_lu_unpack(LU, piv, &r[1], &r[2]));
    return tsp_results("linalg", r, 3);
}

static PyObject *f_lu SIG {
    (void)mod;
    PARSE("linalg.lu", 1, "A");
    ts_tensor *A = TARG(0, "linalg.lu"), *r[3] = {0};
    if (!A || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_lu(A, &r[1], &r[2]));
    return tsp_results("linalg", r, 3);
}

static PyObject *f_lu_solve SIG {
    (void)mod;
    const char *fn = "linalg.lu_solve";
    PARSE(fn, 3, "LU", "pivots", "B", "left", "adjoint");
    ts_tensor *LU = TARG(0, fn), *piv = LU ? TARG(1, fn) : NULL, *B = piv ? TARG(2, fn) : NULL;
    ts_tensor *r[1] = {0};
    bool left, adj;
    if (!B || tsp_bool_arg(a[3], true, &left, fn, "left") < 0 ||
        tsp_bool_arg(a[4], false, &adj, fn, "adjoint") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_lu_solve(LU, piv, B, left, adj));
    return tsp_results("linalg", r, 1);
}

/* ------------------------------------------------------------------ triangular, cholesky */
static PyObject *f_cholesky SIG {
    (void)mod;
    PARSE("linalg.cholesky", 1, "A", "upper", "ex");
    ts_tensor *A = TARG(0, "linalg.cholesky"), *r[2] = {0};
    bool upper, ex;
    if (!A || tsp_bool_arg(a[1], false, &upper, "linalg.cholesky", "upper") < 0 ||
        tsp_bool_arg(a[2], false, &ex, "linalg.cholesky", "ex") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_cholesky_ex(A, upper, ex ? &r[1] : NULL));
    return tsp_results("linalg", r, ex ? 2 : 1);
}

static PyObject *f_solve_triangular SIG {
    (void)mod;
    const char *fn = "linalg.solve_triangular";
    PARSE(fn, 2, "A", "B", "upper", "left", "unitriangular");
    ts_tensor *A = TARG(0, fn), *B = A ? TARG(1, fn) : NULL, *r[1] = {0};
    bool upper, left, unit;
    if (!B || tsp_bool_arg(a[2], false, &upper, fn, "upper") < 0 ||
        tsp_bool_arg(a[3], true, &left, fn, "left") < 0 ||
        tsp_bool_arg(a[4], false, &unit, fn, "unitriangular") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_solve_triangular(A, B, upper, left, unit));
    return tsp_results("linalg", r, 1);
}

static PyObject *f_cholesky_solve SIG {
    (void)mod;
    PARSE("cholesky_solve", 2, "B", "L", "upper");
    ts_tensor *B = TARG(0, "cholesky_solve"), *L = B ? TARG(1, "cholesky_solve") : NULL;
    ts_tensor *r[1] = {0};
    bool upper;
    if (!L || tsp_bool_arg(a[2], false, &upper, "cholesky_solve", "upper") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_cholesky_solve(B, L, upper));
    return tsp_results("linalg", r, 1);
}

static PyObject *f_cholesky_inverse SIG {
    (void)mod;
    PARSE("cholesky_inverse", 1, "L", "upper");
    ts_tensor *L = TARG(0, "cholesky_inverse"), *r[1] = {0};
    bool upper;
    if (!L || tsp_bool_arg(a[1], false, &upper, "cholesky_inverse", "upper") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_cholesky_inverse(L, upper));
    return tsp_results("linalg", r, 1);
}

/* ------------------------------------------------------------------ qr, svd, eigh */
static PyObject *f_qr SIG {
    (void)mod;
    PARSE("linalg.qr", 1, "A", "mode");
    ts_tensor *A = TARG(0, "linalg.qr"), *r[2] = {0};
    const char *mode;
    if (!A || tsp_str_arg(a[1], "reduced", &mode, "linalg.qr", "mode") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_qr(A, mode, &r[1]));
    return tsp_results("linalg", r, 2);
}

static PyObject *f_geqrf SIG {
    (void)mod;
    PARSE("geqrf", 1, "input");
    ts_tensor *A = TARG(0, "geqrf"), *r[2] = {0};
    if (!A || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_geqrf(A, &r[1]));
    return tsp_results("linalg", r, 2);
}

static PyObject *f_svd SIG {
    (void)mod;
    PARSE("linalg.svd", 1, "A", "full_matrices", "vectors");
    ts_tensor *A = TARG(0, "linalg.svd"), *r[3] = {0};
    bool full, vectors;
    if (!A || tsp_bool_arg(a[1], true, &full, "linalg.svd", "full_matrices") < 0 ||
        tsp_bool_arg(a[2], true, &vectors, "linalg.svd", "vectors") < 0 || tsp_enter())
        return NULL;
    if (!vectors) {
        TSP_NOGIL(r[0] = ts_linalg_svdvals(A));
        return tsp_results("linalg", r, 1);
    }
    TSP_NOGIL(r[0] = ts_linalg_svd(A, full, &r[1], &r[2]));
    return tsp_results("linalg", r, 3);
}

static PyObject *f_eigh SIG {
    (void)mod;
    PARSE("linalg.eigh", 1, "A", "UPLO", "vectors");
    ts_tensor *A = TARG(0, "linalg.eigh"), *r[2] = {0};
    const char *uplo;
    bool vectors;
    if (!A || tsp_str_arg(a[1], "L", &uplo, "linalg.eigh", "UPLO") < 0 ||
        tsp_bool_arg(a[2], true, &vectors, "linalg.eigh", "vectors") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = vectors ? ts_linalg_eigh(A, uplo, &r[1]) : ts_linalg_eigvalsh(A, uplo));
    return tsp_results("linalg", r, vectors ? 2 : 1);
}

/* ------------------------------------------------------------------ lstsq, pinv, rank */
static PyObject *f_lstsq SIG {
    (void)mod;
    const char *fn = "linalg.lstsq";
    PARSE(fn, 2, "A", "B", "rcond", "driver");
    ts_tensor *A = TARG(0, fn), *B = A ? TARG(1, fn) : NULL, *r[4] = {0};
    double rcond;
    const char *drv;
    if (!B || tsp_scalar_arg(a[2], -1, &rcond, fn, "rcond") < 0 ||
        tsp_str_arg(a[3], "gelsy", &drv, fn, "driver") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_lstsq(A, B, rcond, drv, &r[1], &r[2], &r[3]));
    return tsp_results("linalg", r, 4);
}

/* _linalg_pinv(A, atol=None, rtol=None, hermitian=False, rank=False) */
static PyObject *f_pinv SIG {
    (void)mod;
    const char *fn = "linalg.pinv";
    PARSE(fn, 1, "A", "atol", "rtol", "hermitian", "rank");
    ts_tensor *A = TARG(0, fn), *r[1] = {0};
    double atol, rtol;
    bool herm, rank;
    if (!A || tsp_scalar_arg(a[1], -1, &atol, fn, "atol") < 0 ||
        tsp_scalar_arg(a[2], -1, &rtol, fn, "rtol") < 0 ||
        tsp_bool_arg(a[3], false, &herm, fn, "hermitian") < 0 ||
        tsp_bool_arg(a[4], false, &rank, fn, "rank") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = rank ? ts_linalg_matrix_rank(A, atol, rtol, herm)
                          : ts_linalg_pinv(A, atol, rtol, herm));
    return tsp_results("linalg", r, 1);
}

/* ------------------------------------------------------------------ matrix functions */
static PyObject *f_matrix_power SIG {
    (void)mod;
    PARSE("linalg.matrix_power", 2, "A", "n");
    ts_tensor *A = TARG(0, "linalg.matrix_power"), *r[1] = {0};
    int64_t n;
    if (!A || tsp_int_arg(a[1], &n, "linalg.matrix_power", "n") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_matrix_power(A, n));
    return tsp_results("linalg", r, 1);
}

/* _svd_lowrank(A, q=None, niter=2, M=None), _pca_lowrank(A, q=None, center=True, niter=2):
 * (U, S, V); q None: PyTorch's default */
static int lowrank_q(PyObject *o, int64_t *q, const char *fn) {
    if (!o || o == Py_None) {
        *q = TS_LOWRANK_Q_DEFAULT;
        return 0;
    }
    return tsp_int_arg(o, q, fn, "q");
}

static PyObject *f_svd_lowrank SIG {
    (void)mod;
    const char *fn = "svd_lowrank";
    PARSE(fn, 1, "A", "q", "niter", "M");
    ts_tensor *A = TARG(0, fn), *M = NULL, *r[3] = {0};
    int64_t q, niter = 2;
    if (!A || lowrank_q(a[1], &q, fn) < 0 ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &niter, fn, "niter") < 0))
        return NULL;
    if (a[3] && a[3] != Py_None && !(M = tsp_tensor_arg(a[3], fn, "M"))) return NULL;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_svd_lowrank(A, q, niter, M, &r[1], &r[2]));
    return tsp_results("linalg", r, 3);
}

static PyObject *f_pca_lowrank SIG {
    (void)mod;
    const char *fn = "pca_lowrank";
    PARSE(fn, 1, "A", "q", "center", "niter");
    ts_tensor *A = TARG(0, fn), *r[3] = {0};
    int64_t q, niter = 2;
    bool center;
    if (!A || lowrank_q(a[1], &q, fn) < 0 || tsp_bool_arg(a[2], true, &center, fn, "center") < 0 ||
        (a[3] && a[3] != Py_None && tsp_int_arg(a[3], &niter, fn, "niter") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_pca_lowrank(A, q, center, niter, &r[1], &r[2]));
    return tsp_results("linalg", r, 3);
}

static PyObject *f_matrix_exp SIG {
    (void)mod;
    PARSE("linalg.matrix_exp", 1, "A");
    ts_tensor *A = TARG(0, "linalg.matrix_exp"), *r[1] = {0};
    if (!A || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_matrix_exp(A));
    return tsp_results("linalg", r, 1);
}

static PyObject *f_cond SIG {
    (void)mod;
    PARSE("linalg.cond", 1, "A", "p");
    ts_tensor *A = TARG(0, "linalg.cond"), *r[1] = {0};
    const char *p;
    if (!A || tsp_str_arg(a[1], "2", &p, "linalg.cond", "p") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_cond(A, p));
    return tsp_results("linalg", r, 1);
}

/* _linalg_eig(A, vectors=True): (L, V) or L */
static PyObject *f_eig SIG {
    (void)mod;
    PARSE("linalg.eig", 1, "A", "vectors");
    ts_tensor *A = TARG(0, "linalg.eig"), *r[2] = {0};
    bool vectors;
    if (!A || tsp_bool_arg(a[1], true, &vectors, "linalg.eig", "vectors") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = vectors ? ts_linalg_eig(A, &r[1]) : ts_linalg_eigvals(A));
    return tsp_results("linalg", r, vectors ? 2 : 1);
}

/* _ormqr(input, tau, other, left=True, transpose=False) */
static PyObject *f_ormqr SIG {
    (void)mod;
    PARSE("ormqr", 3, "input", "input2", "input3", "left", "transpose");
    ts_tensor *A = TARG(0, "ormqr"), *t = A ? TARG(1, "ormqr") : NULL;
    ts_tensor *C = t ? TARG(2, "ormqr") : NULL, *r[1] = {0};
    bool left, trans;
    if (!C || tsp_bool_arg(a[3], true, &left, "ormqr", "left") < 0 ||
        tsp_bool_arg(a[4], false, &trans, "ormqr", "transpose") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_ormqr(A, t, C, left, trans));
    return tsp_results("linalg", r, 1);
}

/* _linalg_ldl_factor(A, hermitian=False, ex=False): (LD, pivots[, info]) */
static PyObject *f_ldl_factor SIG {
    (void)mod;
    PARSE("linalg.ldl_factor", 1, "A", "hermitian", "ex");
    ts_tensor *A = TARG(0, "linalg.ldl_factor"), *r[3] = {0};
    bool herm, ex;
    if (!A || tsp_bool_arg(a[1], false, &herm, "linalg.ldl_factor", "hermitian") < 0 ||
        tsp_bool_arg(a[2], false, &ex, "linalg.ldl_factor", "ex") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_ldl_factor_ex(A, herm, &r[1], ex ? &r[2] : NULL));
    return tsp_results("linalg", r, ex ? 3 : 2);
}

/* _linalg_ldl_solve(LD, pivots, B, hermitian=False) */
static PyObject *f_ldl_solve SIG {
    (void)mod;
    const char *fn = "linalg.ldl_solve";
    PARSE(fn, 3, "LD", "pivots", "B", "hermitian");
    ts_tensor *LD = TARG(0, fn), *P = LD ? TARG(1, fn) : NULL, *B = P ? TARG(2, fn) : NULL;
    ts_tensor *r[1] = {0};
    bool herm;
    if (!B || tsp_bool_arg(a[3], false, &herm, fn, "hermitian") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_ldl_solve(LD, P, B, herm));
    return tsp_results("linalg", r, 1);
}

/* _linalg_polar(A): (U, H) */
static PyObject *f_polar SIG {
    (void)mod;
    PARSE("linalg.polar", 1, "A");
    ts_tensor *A = TARG(0, "linalg.polar"), *r[2] = {0};
    if (!A || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_polar(A, &r[1]));
    return tsp_results("linalg", r, 2);
}

static PyObject *f_matrix_sqrth SIG {
    (void)mod;
    PARSE("linalg.matrix_sqrth", 1, "A");
    ts_tensor *A = TARG(0, "linalg.matrix_sqrth"), *r[1] = {0};
    if (!A || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_matrix_sqrth(A));
    return tsp_results("linalg", r, 1);
}

PyMethodDef tsp_tensor_linalg_decomp_functions[] = {
    {"_linalg_inv", FN(f_inv), FAST, "_linalg_inv(A, ex=False)"},
    {"_linalg_solve", FN(f_solve), FAST, "_linalg_solve(A, B, left=True, ex=False)"},
    {"_linalg_det", FN(f_det), FAST, "_linalg_det(A, kind='det'|'slogdet'|'logdet')"},
    {"_linalg_lu_factor", FN(f_lu_factor), FAST, "_linalg_lu_factor(A, ex=False)"},
    {"_linalg_lu_unpack", FN(f_lu_unpack), FAST, "_linalg_lu_unpack(LU_data, LU_pivots)"},
    {"_linalg_lu", FN(f_lu), FAST, "_linalg_lu(A)"},
    {"_linalg_lu_solve", FN(f_lu_solve), FAST, "_linalg_lu_solve(LU, pivots, B, left, adjoint)"},
    {"_linalg_cholesky", FN(f_cholesky), FAST, "_linalg_cholesky(A, upper=False, ex=False)"},
    {"_linalg_solve_triangular", FN(f_solve_triangular), FAST,
     "_linalg_solve_triangular(A, B, upper, left=True, unitriangular=False)"},
    {"_linalg_cholesky_solve", FN(f_cholesky_solve), FAST, "_linalg_cholesky_solve(B, L, upper)"},
    {"_linalg_cholesky_inverse", FN(f_cholesky_inverse), FAST,
     "_linalg_cholesky_inverse(L, upper)"},
    {"_linalg_qr", FN(f_qr), FAST, "_linalg_qr(A, mode='reduced')"},
    {"_geqrf", FN(f_geqrf), FAST, "_geqrf(input): (a, tau)"},
    {"_linalg_svd", FN(f_svd), FAST, "_linalg_svd(A, full_matrices=True, vectors=True)"},
    {"_linalg_eigh", FN(f_eigh), FAST, "_linalg_eigh(A, UPLO='L', vectors=True)"},
    {"_linalg_lstsq", FN(f_lstsq), FAST, "_linalg_lstsq(A, B, rcond=None, driver='gelsy')"},
    {"_linalg_pinv", FN(f_pinv), FAST,
     "_linalg_pinv(A, atol=None, rtol=None, hermitian=False, rank=False)"},
    {"_linalg_matrix_power", FN(f_matrix_power), FAST, "_linalg_matrix_power(A, n)"},
    {"_linalg_matrix_exp", FN(f_matrix_exp), FAST, "_linalg_matrix_exp(A)"},
    {"_linalg_cond", FN(f_cond), FAST, "_linalg_cond(A, p='2')"},
    {"_svd_lowrank", FN(f_svd_lowrank), FAST, "_svd_lowrank(A, q=None, niter=2, M=None)"},
    {"_pca_lowrank", FN(f_pca_lowrank), FAST, "_pca_lowrank(A, q=None, center=True, niter=2)"},
    {"_linalg_eig", FN(f_eig), FAST, "_linalg_eig(A, vectors=True)"},
    {"_ormqr", FN(f_ormqr), FAST, "_ormqr(input, input2, input3, left=True, transpose=False)"},
    {"_linalg_ldl_factor", FN(f_ldl_factor), FAST,
     "_linalg_ldl_factor(A, hermitian=False, ex=False)"},
    {"_linalg_ldl_solve", FN(f_ldl_solve), FAST, "_linalg_ldl_solve(LD, pivots, B, hermitian)"},
    {"_linalg_polar", FN(f_polar), FAST, "_linalg_polar(A): (U, H)"},
    {"_linalg_matrix_sqrth", FN(f_matrix_sqrth), FAST, "_linalg_matrix_sqrth(A)"},
    {NULL, NULL, 0, NULL}};

/* ------------------------------------------------------------------ Tensor methods */
/* Tensor.<name>(*args, **kw) is tessera.<name>(self, *args, **kw) (python/tessera/_linalg_torch.py
 * and the linalg functions keep the argument handling in one place) */
static PyObject *forward(const char *name, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kw) {
    PyObject *mod = PyImport_ImportModule("tessera");
    PyObject *f = mod ? PyObject_GetAttrString(mod, name) : NULL;
    Py_XDECREF(mod);
    if (!f) return NULL;
    const Py_ssize_t nkw = kw ? PyTuple_GET_SIZE(kw) : 0;
    PyObject *stack[16];
    if (nargs + nkw + 1 > 16) {
        Py_DECREF(f);
        PyErr_Format(PyExc_TypeError, "%s(): too many arguments", name);
        return NULL;
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) stack[i + 1] = args[i];
    PyObject *r = PyObject_Vectorcall(f, stack, (size_t)(nargs + 1), kw);
    Py_DECREF(f);
    return r;
}

#define METHODS(X)                                                                                 \
    X(det)                                                                                         \
    X(logdet)                                                                                      \
    X(slogdet)                                                                                     \
    X(inverse)                                                                                     \
    X(cholesky)                                                                                    \
    X(cholesky_solve)                                                                              \
    X(cholesky_inverse)                                                                            \
    X(qr)                                                                                          \
    X(geqrf)                                                                                       \
    X(ormqr) X(svd) X(pinverse) X(matrix_power) X(matrix_exp) X(lu) X(lu_solve) X(triangular_solve)
#define DEF_FORWARD(name)                                                                          \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return forward(#name, self, a, n, kw);                                                     \
    }
METHODS(DEF_FORWARD)
#define M_FORWARD(name) {#name, FN(m_##name), FAST, "tessera." #name "(self, ...)"},

PyMethodDef tsp_tensor_linalg_decomp_methods[] = {METHODS(M_FORWARD){NULL, NULL, 0, NULL}};
