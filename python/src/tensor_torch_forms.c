/* tensor_torch_forms.c — the small torch forms of include/tessera/torch_forms.h (issue 76) as
 * private tessera._C functions, one C call each: expand_copy, squeeze_copy, view_copy, fill,
 * nonzero_static, range, rsub and the in-place samplers cauchy_, geometric_, log_normal_ (their
 * generator= is python/tessera/_generator.py's drawing scope around the call). */
#include "tensor_impl.h"

/* _expand_copy(input, size) */
static PyObject *f_expand_copy SIG {
    (void)mod;
    const char *fn = "expand_copy";
    PARSE(fn, 2, "input", "size");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    ts_shape s;
    if (!t || tsp_shape_arg(a[1], &s, fn, "size") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_expand_copy(t, s));
    return tsp_results(fn, r, 1);
}

/* _squeeze_copy(input, dim=None) */
static PyObject *f_squeeze_copy SIG {
    (void)mod;
    const char *fn = "squeeze_copy";
    PARSE(fn, 1, "input", "dim");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    ts_dims d;
    const bool has = a[1] && a[1] != Py_None;
    if (!t || (has && tsp_dims_arg(a[1], &d, fn, "dim") < 0) || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_squeeze_copy(t, has ? &d : NULL));
    return tsp_results(fn, r, 1);
}

/* _view_copy(input, size_or_dtype) */
static PyObject *f_view_copy SIG {
    (void)mod;
    const char *fn = "view_copy";
    PARSE(fn, 2, "input", "size");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    if (!t) return NULL;
    if (tsp_is_dtype(a[1])) {
        ts_dtype dt;
        if (tsp_dtype_arg(a[1], &dt, fn, "dtype") < 0 || tsp_enter()) return NULL;
        TSP_NOGIL(r[0] = ts_view_copy_dtype(t, dt));
    } else {
        ts_shape s;
        if (tsp_shape_arg(a[1], &s, fn, "size") < 0 || tsp_enter()) return NULL;
        TSP_NOGIL(r[0] = ts_view_copy(t, s));
    }
    return tsp_results(fn, r, 1);
}

/* size, stride and storage_offset of the as_strided forms (a[i0], a[i0 + 1], a[i0 + 2]) */
static int strided_args(PyObject **a, int i0, ts_shape *size, ts_shape *stride, int64_t *off,
                        const char *fn) {
    *off = -1;
    if (tsp_shape_arg(a[i0], size, fn, "size") < 0 ||
        tsp_shape_arg(a[i0 + 1], stride, fn, "stride") < 0)
        return -1;
    if (size->ndim != stride->ndim) {
        PyErr_Format(PyExc_RuntimeError, "%s(): mismatch in length of strides (%d) and shape (%d)",
                     fn, stride->ndim, size->ndim);
        return -1;
    }
    if (a[i0 + 2] && a[i0 + 2] != Py_None) {
        if (tsp_int_arg(a[i0 + 2], off, fn, "storage_offset") < 0) return -1;
        if (*off < 0) {
            PyErr_Format(PyExc_RuntimeError, "%s(): storage_offset must be >= 0, got %lld", fn,
                         (long long)*off);
            return -1;
        }
    }
    return 0;
}

/* _as_strided_copy(input, size, stride, storage_offset=None) */
static PyObject *f_as_strided_copy SIG {
    (void)mod;
    const char *fn = "as_strided_copy";
    PARSE(fn, 3, "input", "size", "stride", "storage_offset");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    ts_shape size, stride;
    int64_t off;
    if (!t || strided_args(a, 1, &size, &stride, &off, fn) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_as_strided_copy(t, size, stride.dims, off));
    return tsp_results(fn, r, 1);
}

/* _as_strided_scatter(input, src, size, stride, storage_offset=None) */
static PyObject *f_as_strided_scatter SIG {
    (void)mod;
    const char *fn = "as_strided_scatter";
    PARSE(fn, 4, "input", "src", "size", "stride", "storage_offset");
    ts_tensor *t = TARG(0, fn), *src = t ? TARG(1, fn) : NULL, *r[1] = {0};
    ts_shape size, stride;
    int64_t off;
    if (!src || strided_args(a, 2, &size, &stride, &off, fn) < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r[0] = ts_as_strided_scatter(t, src, size, stride.dims, off));
    return tsp_results(fn, r, 1);
}

/* _hash_tensor(input, dim=None, keepdim=False, mode=0) */
static PyObject *f_hash_tensor SIG {
    (void)mod;
    const char *fn = "hash_tensor";
    PARSE(fn, 1, "input", "dim", "keepdim", "mode");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    ts_dims d;
    const bool has = a[1] && a[1] != Py_None;
    bool keepdim;
    int64_t m = 0;
    if (!t || (has && tsp_dims_arg(a[1], &d, fn, "dim") < 0) ||
        tsp_bool_arg(a[2], false, &keepdim, fn, "keepdim") < 0 ||
        (a[3] && tsp_int_arg(a[3], &m, fn, "mode") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_hash_tensor(t, has ? &d : NULL, keepdim, m));
    return tsp_results(fn, r, 1);
}

/* _fill(input, value): value a number or a 0-dim tensor (complex too) */
static PyObject *f_fill SIG {
    (void)mod;
    const char *fn = "fill";
    PARSE(fn, 2, "input", "value");
    ts_tensor *t = TARG(0, fn), *r[1] = {0}, *own = NULL;
    if (!t) return NULL;
    ts_tensor *v = tsp_tensor_of(a[1]);
    if (!v) {
        if (PyComplex_Check(a[1])) {
            own = tsp_tensor_from_data(a[1], TS_C128, (ts_opts){.device = ts_device_of(t)});
        } else {
            double x;
            if (tsp_double_arg(a[1], 0, &x, fn, "value") < 0) return NULL;
            own = ts_scalar(x, (ts_opts){.dtype = TS_F64, .device = ts_device_of(t)});
        }
        if (!own) return PyErr_Occurred() ? NULL : tsp_raise_pending();
        v = own;
    }
    if (tsp_enter()) return ts_release(own), NULL;
    TSP_NOGIL(r[0] = ts_fill(t, v));
    ts_release(own);
    return tsp_results(fn, r, 1);
}

/* _nonzero_static(input, size, fill_value=-1) */
static PyObject *f_nonzero_static SIG {
    (void)mod;
    const char *fn = "nonzero_static";
    PARSE(fn, 2, "input", "size", "fill_value");
    ts_tensor *t = TARG(0, fn), *r[1] = {0};
    int64_t size, fill = -1;
    if (!t || tsp_int_arg(a[1], &size, fn, "size") < 0 ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &fill, fn, "fill_value") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_nonzero_static(t, size, fill));
    return tsp_results(fn, r, 1);
}

/* _range(start, end, step, dtype, device=None, requires_grad=False) */
static PyObject *f_range SIG {
    (void)mod;
    const char *fn = "range";
    PARSE(fn, 4, "start", "end", "step", "dtype", "device", "requires_grad");
    double s, e, st;
    ts_opts o = {0};
    ts_tensor *r[1] = {0};
    if (tsp_double_arg(a[0], 0, &s, fn, "start") < 0 ||
        tsp_double_arg(a[1], 0, &e, fn, "end") < 0 ||
        tsp_double_arg(a[2], 1, &st, fn, "step") < 0 ||
        tsp_opts_args(a[3], a[4], a[5], NULL, &o, fn) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r[0] = ts_range(s, e, st, o));
    return tsp_results(fn, r, 1);
}

/* _rsub(input, other, alpha=1): other a tensor or a number (weak scalar beside input) */
static PyObject *f_rsub SIG {
    (void)mod;
    const char *fn = "rsub";
    PARSE(fn, 2, "input", "other", "alpha");
    ts_tensor *t = TARG(0, fn), *r[1] = {0}, *own = NULL;
    double alpha;
    if (!t || tsp_scalar_arg(a[2], 1.0, &alpha, fn, "alpha") < 0) return NULL;
    ts_tensor *o = tsp_tensor_of(a[1]);
    if (!o) {
        double v;
        if (tsp_double_arg(a[1], 0, &v, fn, "other") < 0) return NULL;
        if (!(own = tsp_scalar_beside(t, a[1], v))) return tsp_raise_pending();
        o = own;
    }
    if (tsp_enter()) return ts_release(own), NULL;
    TSP_NOGIL(r[0] = ts_rsub(t, o, alpha));
    ts_release(own);
    return tsp_results(fn, r, 1);
}

/* _cauchy_(self, median=0, sigma=1), _geometric_(self, p), _log_normal_(self, mean=1, std=2) */
static PyObject *f_cauchy_ SIG {
    (void)mod;
    const char *fn = "cauchy_";
    PARSE(fn, 1, "self", "median", "sigma");
    ts_tensor *t = TARG(0, fn), *r;
    double m, s;
    if (!t || tsp_double_arg(a[1], 0, &m, fn, "median") < 0 ||
        tsp_double_arg(a[2], 1, &s, fn, "sigma") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_cauchy_(t, m, s));
    return tsp_inplace_result(a[0], r);
}

static PyObject *f_geometric_ SIG {
    (void)mod;
    const char *fn = "geometric_";
    PARSE(fn, 2, "self", "p");
    ts_tensor *t = TARG(0, fn), *r;
    double p;
    if (!t || tsp_double_arg(a[1], 0, &p, fn, "p") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_geometric_(t, p));
    return tsp_inplace_result(a[0], r);
}

static PyObject *f_log_normal_ SIG {
    (void)mod;
    const char *fn = "log_normal_";
    PARSE(fn, 1, "self", "mean", "std");
    ts_tensor *t = TARG(0, fn), *r;
    double m, s;
    if (!t || tsp_double_arg(a[1], 1, &m, fn, "mean") < 0 ||
        tsp_double_arg(a[2], 2, &s, fn, "std") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_log_normal_(t, m, s));
    return tsp_inplace_result(a[0], r);
}

PyMethodDef tsp_tensor_torch_forms_functions[] = {
    {"_expand_copy", FN(f_expand_copy), FAST, "_expand_copy(input, size)"},
    {"_squeeze_copy", FN(f_squeeze_copy), FAST, "_squeeze_copy(input, dim=None)"},
    {"_view_copy", FN(f_view_copy), FAST, "_view_copy(input, size_or_dtype)"},
    {"_as_strided_copy", FN(f_as_strided_copy), FAST,
     "_as_strided_copy(input, size, stride, storage_offset=None)"},
    {"_as_strided_scatter", FN(f_as_strided_scatter), FAST,
     "_as_strided_scatter(input, src, size, stride, storage_offset=None)"},
    {"_hash_tensor", FN(f_hash_tensor), FAST,
     "_hash_tensor(input, dim=None, keepdim=False, mode=0)"},
    {"_fill", FN(f_fill), FAST, "_fill(input, value)"},
    {"_nonzero_static", FN(f_nonzero_static), FAST, "_nonzero_static(input, size, fill_value=-1)"},
    {"_range", FN(f_range), FAST,
     "_range(start, end, step, dtype, device=None, requires_grad=False)"},
    {"_rsub", FN(f_rsub), FAST, "_rsub(input, other, alpha=1)"},
    {"_cauchy_", FN(f_cauchy_), FAST, "_cauchy_(self, median=0, sigma=1)"},
    {"_geometric_", FN(f_geometric_), FAST, "_geometric_(self, p)"},
    {"_log_normal_", FN(f_log_normal_), FAST, "_log_normal_(self, mean=1, std=2)"},
    {NULL, NULL, 0, NULL}};
