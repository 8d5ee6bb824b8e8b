/* tensor_linalg_forms.c — the torch.linalg forms composed in C over the decompositions and
 * reductions (include/tessera/linalg.h, issue 76) as private tessera._C functions, one C call
 * each: linalg.norm, vecdot, vander, tensorinv, tensorsolve, householder_product, torch.svd and
 * matrix_rank with tolerance tensors. python/tessera/linalg.py keeps PyTorch's signatures. */
#include <math.h>
#include <stdio.h>

#include "tensor_impl.h"
#include "tessera/linalg.h"

/* ord: None (NULL), a str, or a number (inf allowed) as the C API's text */
static int ord_arg(PyObject *o, char *buf, size_t n, const char **out, const char *fn) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return -1;
        snprintf(buf, n, "%s", s);
    } else {
        double v;
        if (tsp_scalar_arg(o, 0, &v, fn, "ord") < 0) return -1;
        if (isinf(v))
            snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
        else
            snprintf(buf, n, "%.17g", v);
    }
    *out = buf;
    return 0;
}

/* _linalg_norm(A, ord=None, dim=None, keepdim=False, dtype=None) */
static PyObject *f_norm SIG {
    (void)mod;
    const char *fn = "linalg.norm";
    PARSE(fn, 1, "A", "ord", "dim", "keepdim", "dtype");
    ts_tensor *A = TARG(0, fn), *r[1] = {0};
    char buf[64];
    const char *ord;
    ts_dims d;
    const bool has_dim = a[2] && a[2] != Py_None;
    bool keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (!A || ord_arg(a[1], buf, sizeof buf, &ord, fn) < 0 ||
        (has_dim && tsp_dims_arg(a[2], &d, fn, "dim") < 0) ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_dtype_arg(a[4], &dt, fn, "dtype") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_norm(A, ord, has_dim ? &d : NULL, keepdim, dt));
    return tsp_results(fn, r, 1);
}

/* _linalg_vecdot(x, y, dim=-1) */
static PyObject *f_vecdot SIG {
    (void)mod;
    const char *fn = "linalg.vecdot";
    PARSE(fn, 2, "x", "y", "dim");
    ts_tensor *x = TARG(0, fn), *y = x ? TARG(1, fn) : NULL, *r[1] = {0};
    int64_t dim = -1;
    if (!y || (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &dim, fn, "dim") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_vecdot(x, y, (int)dim));
    return tsp_results(fn, r, 1);
}

/* _linalg_vander(x, N=None) */
static PyObject *f_vander SIG {
    (void)mod;
    const char *fn = "linalg.vander";
    PARSE(fn, 1, "x", "N");
    ts_tensor *x = TARG(0, fn), *r[1] = {0};
    int64_t N = -1;
    if (!x || (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &N, fn, "N") < 0)) return NULL;
    if (a[1] && a[1] != Py_None && N < 1) N = 0; /* "N must be greater than 1." */
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_vander(x, N));
    return tsp_results(fn, r, 1);
}

/* _linalg_tensorinv(A, ind=2) */
static PyObject *f_tensorinv SIG {
    (void)mod;
    const char *fn = "linalg.tensorinv";
    PARSE(fn, 1, "A", "ind");
    ts_tensor *A = TARG(0, fn), *r[1] = {0};
    int64_t ind = 2;
    if (!A || (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &ind, fn, "ind") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_linalg_tensorinv(A, ind));
    return tsp_results(fn, r, 1);
}

/* _linalg_tensorsolve(A, B, dims=None) */
static PyObject *f_tensorsolve SIG {
    (void)mod;
    const char *fn = "linalg.tensorsolve";
    PARSE(fn, 2, "A", "B", "dims");
    ts_tensor *A = TARG(0, fn), *B = A ? TARG(1, fn) : NULL, *r[1] = {0};
    ts_dims d;
    const bool has = a[2] && a[2] != Py_None;
    if (!B || (has && tsp_dims_arg(a[2], &d, fn, "dims") < 0) || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_tensorsolve(A, B, has ? &d : NULL));
    return tsp_results(fn, r, 1);
}

/* _linalg_householder_product(A, tau) */
static PyObject *f_householder SIG {
    (void)mod;
    const char *fn = "linalg.householder_product";
    PARSE(fn, 2, "A", "tau");
    ts_tensor *A = TARG(0, fn), *t = A ? TARG(1, fn) : NULL, *r[1] = {0};
    if (!t || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_linalg_householder_product(A, t));
    return tsp_results(fn, r, 1);
}

/* _svd(A, some=True, compute_uv=True): (U, S, V) */
static PyObject *f_svd_torch SIG {
    (void)mod;
    const char *fn = "svd";
    PARSE(fn, 1, "A", "some", "compute_uv");
    ts_tensor *A = TARG(0, fn), *r[3] = {0};
    bool some, uv;
    if (!A || tsp_bool_arg(a[1], true, &some, fn, "some") < 0 ||
        tsp_bool_arg(a[2], true, &uv, fn, "compute_uv") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_svd(A, some, uv, &r[1], &r[2]));
    return tsp_results(fn, r, 3);
}

/* a tolerance: None (NULL), a number (a 0-dim float64 tensor on A's device) or a tensor */
static int tol_arg(PyObject *o, ts_tensor *A, ts_tensor **out, const char *fn, const char *arg) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if ((*out = tsp_tensor_of(o))) return 0;
    double v;
    if (tsp_double_arg(o, 0, &v, fn, arg) < 0) return -1;
    *out = ts_scalar(v, (ts_opts){.dtype = TS_F64, .device = ts_device_of(A)});
    return *out ? 0 : (tsp_raise_pending(), -1);
}

/* _linalg_matrix_rank_tol(A, atol=None, rtol=None, hermitian=False) */
static PyObject *f_rank_tol SIG {
    (void)mod;
    const char *fn = "linalg.matrix_rank";
    PARSE(fn, 1, "A", "atol", "rtol", "hermitian");
    ts_tensor *A = TARG(0, fn), *at = NULL, *rt = NULL, *r[1] = {0};
    bool herm;
    if (!A || tsp_bool_arg(a[3], false, &herm, fn, "hermitian") < 0) return NULL;
    ts_scope_begin(); /* the tolerance scalars made here */
    if (tol_arg(a[1], A, &at, fn, "atol") < 0 || tol_arg(a[2], A, &rt, fn, "rtol") < 0 ||
        tsp_enter()) {
        ts_scope_end();
        return NULL;
    }
    TSP_NOGIL(r[0] = ts_linalg_matrix_rank_tol(A, at, rt, herm));
    if (r[0]) r[0] = ts_keep(r[0]);
    ts_scope_end();
    return tsp_results(fn, r, 1);
}

PyMethodDef tsp_tensor_linalg_forms_functions[] = {
    {"_linalg_norm", FN(f_norm), FAST,
     "_linalg_norm(A, ord=None, dim=None, keepdim=False, dtype=None)"},
    {"_linalg_vecdot", FN(f_vecdot), FAST, "_linalg_vecdot(x, y, dim=-1)"},
    {"_linalg_vander", FN(f_vander), FAST, "_linalg_vander(x, N=None)"},
    {"_linalg_tensorinv", FN(f_tensorinv), FAST, "_linalg_tensorinv(A, ind=2)"},
    {"_linalg_tensorsolve", FN(f_tensorsolve), FAST, "_linalg_tensorsolve(A, B, dims=None)"},
    {"_linalg_householder_product", FN(f_householder), FAST, "_linalg_householder_product(A, tau)"},
    {"_svd", FN(f_svd_torch), FAST, "_svd(A, some=True, compute_uv=True): (U, S, V)"},
    {"_linalg_matrix_rank_tol", FN(f_rank_tol), FAST,
     "_linalg_matrix_rank_tol(A, atol=None, rtol=None, hermitian=False)"},
    {NULL, NULL, 0, NULL}};
