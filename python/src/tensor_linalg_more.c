/* tensor_linalg_more.c — torch.linalg's eig / eigvals, ldl_factor(_ex) / ldl_solve, polar,
 * matrix_sqrth and torch.ormqr (include/tessera/linalg.h) as private tessera._C functions, one C
 * call each; several results come back as a plain tuple, which python/tessera/linalg.py makes
 * PyTorch's named tuples. */
#include <string.h>

#include "tensor_impl.h"
#include "tessera/linalg.h"

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

PyMethodDef tsp_tensor_linalg_more_functions[] = {
    {"_linalg_eig", FN(f_eig), FAST, "_linalg_eig(A, vectors=True)"},
    {"_ormqr", FN(f_ormqr), FAST, "_ormqr(input, input2, input3, left=True, transpose=False)"},
    {"_linalg_ldl_factor", FN(f_ldl_factor), FAST,
     "_linalg_ldl_factor(A, hermitian=False, ex=False)"},
    {"_linalg_ldl_solve", FN(f_ldl_solve), FAST, "_linalg_ldl_solve(LD, pivots, B, hermitian)"},
    {"_linalg_polar", FN(f_polar), FAST, "_linalg_polar(A): (U, H)"},
    {"_linalg_matrix_sqrth", FN(f_matrix_sqrth), FAST, "_linalg_matrix_sqrth(A)"},
    {NULL, NULL, 0, NULL}};
