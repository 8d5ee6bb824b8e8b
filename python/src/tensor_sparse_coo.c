/* tensor_sparse_coo.c — include/tessera/sparse.h's COO ops as private tessera._C functions, one C
 * call each (issue 76, decision 0048). python/tessera/sparse.py's SparseTensor holds the four
 * fields of a ts_coo (indices, values, size, coalesced) and passes them; a sparse result comes
 * back as the tuple (indices, values, size, coalesced), a dense one as a Tensor. */
#include "tensor_impl.h"
#include "tessera/sparse.h"

/* a[i0 .. i0 + 3]: indices, values, size, coalesced */
static int coo_arg(PyObject **a, int i0, ts_coo *c, const char *fn) {
    *c = (ts_coo){0};
    if (!(c->indices = tsp_tensor_arg(a[i0], fn, "indices")) ||
        !(c->values = tsp_tensor_arg(a[i0 + 1], fn, "values")) ||
        tsp_shape_arg(a[i0 + 2], &c->size, fn, "size") < 0 ||
        tsp_bool_arg(a[i0 + 3], false, &c->coalesced, fn, "coalesced") < 0)
        return -1;
    return 0;
}

/* the result of a call made inside the binding's scope: moved out and wrapped */
static PyObject *coo_result(ts_status st, ts_coo r, ts_tensor *dense) {
    if (st == TS_OK && dense) {
        dense = ts_keep(dense);
        ts_scope_end();
        return dense ? tsp_wrap(dense) : tsp_raise_pending();
    }
    if (st == TS_OK) {
        r.indices = ts_keep(r.indices);
        r.values = r.indices ? ts_keep(r.values) : NULL;
    }
    ts_scope_end();
    if (st != TS_OK || !r.indices || !r.values) {
        ts_release(r.indices);
        return tsp_raise_pending();
    }
    ts_tensor *p[2] = {r.indices, r.values};
    PyObject *t = tsp_tuple_of(p, 2), *size = t ? tsp_size_obj(r.size) : NULL;
    PyObject *res = size ? Py_BuildValue("(OOOO)", PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1),
                                         size, r.coalesced ? Py_True : Py_False)
                         : NULL;
    Py_XDECREF(t);
    Py_XDECREF(size);
    return res;
}

/* _sparse_coo_tensor(indices, values, size=None, dtype=None, device=None, requires_grad=False,
 * is_coalesced=None, check_invariants=False) */
static PyObject *f_coo_tensor SIG {
    (void)mod;
    const char *fn = "sparse_coo_tensor";
    PARSE(fn, 2, "indices", "values", "size", "dtype", "device", "requires_grad", "is_coalesced",
          "check_invariants");
    ts_tensor *i = TARG(0, fn), *v = i ? TARG(1, fn) : NULL;
    ts_shape size;
    const bool has_size = a[2] && a[2] != Py_None;
    ts_opts o = {0};
    bool check, coal = false;
    const bool has_coal = a[6] && a[6] != Py_None;
    if (!v || (has_size && tsp_shape_arg(a[2], &size, fn, "size") < 0) ||
        tsp_opts_args(a[3], a[4], a[5], NULL, &o, fn) < 0 ||
        (has_coal && tsp_bool_arg(a[6], false, &coal, fn, "is_coalesced") < 0) ||
        tsp_bool_arg(a[7], false, &check, fn, "check_invariants") < 0 || tsp_enter())
        return NULL;
    ts_scope_begin();
    if (a[3] && a[3] != Py_None && ts_dtype_of(v) != o.dtype) v = ts_to_dtype(v, o.dtype);
    if (a[4] && a[4] != Py_None) {
        v = v ? ts_to(v, o.device) : NULL;
        i = v ? ts_to(i, o.device) : NULL;
    }
    if (v && o.requires_grad) {
        v = ts_clone(ts_detach(v));
        if (v && ts_set_requires_grad(v, true) != TS_OK) v = NULL;
    }
    ts_coo r = {0};
    const ts_status st = v && i ? ts_sparse_coo_tensor(i, v, has_size ? &size : NULL,
                                                       has_coal ? coal : -1, check, &r)
                                : (ts_error() == TS_OK ? TS_ERR_STATE : ts_error());
    return coo_result(st, r, NULL);
}

/* _sparse_coalesce(indices, values, size, coalesced) */
static PyObject *f_coalesce SIG {
    (void)mod;
    const char *fn = "coalesce";
    PARSE(fn, 4, "indices", "values", "size", "coalesced");
    ts_coo c, r = {0};
    if (coo_arg(a, 0, &c, fn) < 0 || tsp_enter()) return NULL;
    ts_scope_begin();
    return coo_result(ts_sparse_coalesce(c, &r), r, NULL);
}

/* _dense_to_sparse(x, sparse_dim=None) */
static PyObject *f_dense_to_sparse SIG {
    (void)mod;
    const char *fn = "dense_to_sparse";
    PARSE(fn, 1, "input", "sparse_dim");
    ts_tensor *x = TARG(0, fn);
    int64_t sd = -1;
    if (!x || (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &sd, fn, "sparse_dim") < 0) ||
        tsp_enter())
        return NULL;
    if (a[1] && a[1] != Py_None && (sd < 0 || sd > ts_ndim(x))) {
        PyErr_Format(PyExc_RuntimeError,
                     "dense_to_sparse: sparse_dim argument must be in [0,%d] range, but %lld is "
                     "given",
                     ts_ndim(x), (long long)sd);
        return NULL;
    }
    ts_coo r = {0};
    ts_scope_begin();
    return coo_result(ts_dense_to_sparse(x, (int)sd, &r), r, NULL);
}

/* _sparse_transpose(indices, values, size, coalesced, dim0, dim1) */
static PyObject *f_transpose SIG {
    (void)mod;
    const char *fn = "transpose";
    PARSE(fn, 6, "indices", "values", "size", "coalesced", "dim0", "dim1");
    ts_coo c, r = {0};
    int64_t d0, d1;
    if (coo_arg(a, 0, &c, fn) < 0 || tsp_int_arg(a[4], &d0, fn, "dim0") < 0 ||
        tsp_int_arg(a[5], &d1, fn, "dim1") < 0 || tsp_enter())
        return NULL;
    ts_scope_begin();
    return coo_result(ts_sparse_transpose(c, (int)d0, (int)d1, &r), r, NULL);
}

/* _sparse_mul(indices, values, size, coalesced, other): other a number or a tensor */
static PyObject *f_mul SIG {
    (void)mod;
    const char *fn = "mul";
    PARSE(fn, 5, "indices", "values", "size", "coalesced", "other");
    ts_coo c, r = {0};
    if (coo_arg(a, 0, &c, fn) < 0) return NULL;
    ts_tensor *o = tsp_tensor_of(a[4]);
    ts_scope_begin();
    if (!o) {
        double x;
        if (tsp_double_arg(a[4], 0, &x, fn, "other") < 0) return ts_scope_end(), NULL;
        o = tsp_scalar_beside(c.values, a[4], x);
    }
    if (!o || tsp_enter()) {
        ts_scope_end();
        return PyErr_Occurred() ? NULL : tsp_raise_pending();
    }
    return coo_result(ts_sparse_mul(c, o, &r), r, NULL);
}

/* _sparse_sum(indices, values, size, coalesced, dim=None, dtype=None): Tensor or COO tuple */
static PyObject *f_sum SIG {
    (void)mod;
    const char *fn = "sum";
    PARSE(fn, 4, "indices", "values", "size", "coalesced", "dim", "dtype");
    ts_coo c, r = {0};
    ts_dims d;
    const bool has = a[4] && a[4] != Py_None;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (coo_arg(a, 0, &c, fn) < 0 || (has && tsp_dims_arg(a[4], &d, fn, "dim") < 0) ||
        tsp_dtype_arg(a[5], &dt, fn, "dtype") < 0 || tsp_enter())
        return NULL;
    ts_tensor *dense = NULL;
    ts_scope_begin();
    const ts_status st = ts_sparse_sum(c, has ? &d : NULL, dt, &r, &dense);
    return coo_result(st, r, dense);
}

/* _sparse_to_dense(indices, values, size, coalesced) */
static PyObject *f_to_dense SIG {
    (void)mod;
    const char *fn = "to_dense";
    PARSE(fn, 4, "indices", "values", "size", "coalesced");
    ts_coo c;
    ts_tensor *r[1] = {0};
    if (coo_arg(a, 0, &c, fn) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_sparse_to_dense(c));
    return tsp_results(fn, r, 1);
}

/* _sparse_mm(indices, values, size, coalesced, mat2) */
static PyObject *f_mm SIG {
    (void)mod;
    const char *fn = "mm";
    PARSE(fn, 5, "indices", "values", "size", "coalesced", "mat2");
    ts_coo c;
    ts_tensor *m2, *r[1] = {0};
    if (coo_arg(a, 0, &c, fn) < 0 || !(m2 = TARG(4, fn)) || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_sparse_mm(c, m2));
    return tsp_results(fn, r, 1);
}

/* _sparse_addmm(mat, indices, values, size, coalesced, mat2, beta=1, alpha=1) */
static PyObject *f_addmm SIG {
    (void)mod;
    const char *fn = "sparse.addmm";
    PARSE(fn, 6, "input", "indices", "values", "size", "coalesced", "mat2", "beta", "alpha");
    ts_tensor *m = TARG(0, fn), *m2, *r[1] = {0};
    ts_coo c;
    double beta, alpha;
    if (!m || coo_arg(a, 1, &c, fn) < 0 || !(m2 = TARG(5, fn)) ||
        tsp_scalar_arg(a[6], 1, &beta, fn, "beta") < 0 ||
        tsp_scalar_arg(a[7], 1, &alpha, fn, "alpha") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_sparse_addmm(m, c, m2, beta, alpha));
    return tsp_results(fn, r, 1);
}

PyMethodDef tsp_tensor_sparse_coo_functions[] = {
    {"_sparse_coo_tensor", FN(f_coo_tensor), FAST,
     "_sparse_coo_tensor(indices, values, size=None, dtype=None, device=None, requires_grad=False, "
     "is_coalesced=None, check_invariants=False): (indices, values, size, coalesced)"},
    {"_sparse_coalesce", FN(f_coalesce), FAST,
     "_sparse_coalesce(indices, values, size, coalesced)"},
    {"_dense_to_sparse", FN(f_dense_to_sparse), FAST, "_dense_to_sparse(x, sparse_dim=None)"},
    {"_sparse_transpose", FN(f_transpose), FAST,
     "_sparse_transpose(indices, values, size, coalesced, dim0, dim1)"},
    {"_sparse_mul", FN(f_mul), FAST, "_sparse_mul(indices, values, size, coalesced, other)"},
    {"_sparse_sum", FN(f_sum), FAST,
     "_sparse_sum(indices, values, size, coalesced, dim=None, dtype=None)"},
    {"_sparse_to_dense", FN(f_to_dense), FAST,
     "_sparse_to_dense(indices, values, size, coalesced)"},
    {"_sparse_mm", FN(f_mm), FAST, "_sparse_mm(indices, values, size, coalesced, mat2)"},
    {"_sparse_addmm", FN(f_addmm), FAST,
     "_sparse_addmm(input, indices, values, size, coalesced, mat2, beta=1, alpha=1)"},
    {NULL, NULL, 0, NULL}};
