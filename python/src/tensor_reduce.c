/* tensor_reduce.c — reductions: sum / mean / prod / amax / amin / logsumexp / argmax / argmin /
 * std / var with dim= (an int or a tuple) and keepdim=, and max / min, which with dim= return
 * (values, indices) as torch does, and with a tensor are maximum / minimum. */
#include "tensor_impl.h"

#define T TSP_T

typedef struct reduction {
    const char *name;
    ts_tensor *(*all)(ts_tensor *);
    ts_tensor *(*dim)(ts_tensor *, int, bool);
    ts_tensor *(*dims)(ts_tensor *, ts_dims, bool);
} reduction;

static const reduction r_sum = {"sum", ts_sum, ts_sum_dim, ts_sum_dims};
static const reduction r_mean = {"mean", ts_mean, ts_mean_dim, ts_mean_dims};
static const reduction r_prod = {"prod", ts_prod, ts_prod_dim, NULL};
static const reduction r_amax = {"amax", ts_max, ts_amax_dim, ts_amax_dims};
static const reduction r_amin = {"amin", ts_min, ts_amin_dim, ts_amin_dims};
static const reduction r_logsumexp = {"logsumexp", ts_logsumexp, ts_logsumexp_dim,
                                      ts_logsumexp_dims};
static const reduction r_argmax = {"argmax", ts_argmax, ts_argmax_dim, NULL};
static const reduction r_argmin = {"argmin", ts_argmin, ts_argmin_dim, NULL};

/* the reduction over dim (None: all; an int; a tuple), keepdim */
static ts_tensor *reduce(const reduction *r, ts_tensor *t, bool has_dim, ts_dims d, bool keepdim) {
    if (!has_dim) {
        ts_tensor *all = r->all(t), *kept;
        if (!keepdim || !all) return all;
        ts_shape s = ts_shape_of(t); /* keepdim over all dims: every dim of size 1 */
        for (int i = 0; i < s.ndim; i++) s.dims[i] = 1;
        kept = ts_reshape(all, s);
        tsp_drop(all);
        return kept;
    }
    if (d.n == 1) return r->dim(t, d.d[0], keepdim);
    if (r->dims) return r->dims(t, d, keepdim);
    ts_error_set(TS_ERR_ARG, "%s: a tuple of dims is not supported (one dim at a time)", r->name);
    return NULL;
}

/* r(input, dim=None, keepdim=False, dtype=None) */
static PyObject *call_reduction(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kw, const reduction *r) {
    static const char *const names[] = {"input", "dim", "keepdim", "dtype"};
    PyObject *a[4] = {0};
    ts_dims d = {0};
    bool keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (tsp_parse_input(self, args, nargs, kw, r->name, names, 4, 0, a) < 0) return NULL;
    bool has_dim = a[1] && a[1] != Py_None;
    if ((has_dim && tsp_dims_arg(a[1], &d, r->name, "dim") < 0) ||
        tsp_bool_arg(a[2], false, &keepdim, r->name, "keepdim") < 0 ||
        tsp_dtype_arg(a[3], &dt, r->name, "dtype") < 0 || tsp_enter())
        return NULL;
    if (has_dim && d.n == 0) has_dim = false; /* dim=() : every dim */
    ts_tensor *t = T(a[0]), *c = NULL, *res;
    Py_BEGIN_ALLOW_THREADS;
    if (dt != TS_DTYPE_DEFAULT) t = c = ts_to_dtype(t, dt); /* torch casts before reducing */
    res = t ? reduce(r, t, has_dim, d, keepdim) : NULL;
    tsp_drop(c);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(res);
}

#define REDUCTION_LIST(X)                                                                          \
    X(sum, r_sum)                                                                                  \
    X(mean, r_mean)                                                                                \
    X(prod, r_prod)                                                                                \
    X(amax, r_amax)                                                                                \
    X(amin, r_amin) X(logsumexp, r_logsumexp) X(argmax, r_argmax) X(argmin, r_argmin)
#define DEF_REDUCTION(name, r) TSP_METHOD_AND_FUNCTION(name, call_reduction, &r)
REDUCTION_LIST(DEF_REDUCTION)

/* ------------------------------------------------------------------ std / var */
/* std(input, dim=None, unbiased=True, keepdim=False, *, correction=None) */
static PyObject *call_moment(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             bool is_std) {
    static const char *const names[] = {"input", "dim", "unbiased", "keepdim", "correction"};
    const char *fn = is_std ? "std" : "var";
    PyObject *a[5] = {0};
    ts_dims d = {0};
    bool unbiased, keepdim;
    double correction;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 5, 0, a) < 0) return NULL;
    if (a[1] && PyBool_Check(a[1])) a[2] = a[1], a[1] = NULL; /* std(unbiased) */
    bool has_dim = a[1] && a[1] != Py_None;
    if ((has_dim && tsp_dims_arg(a[1], &d, fn, "dim") < 0) ||
        tsp_bool_arg(a[2], true, &unbiased, fn, "unbiased") < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_double_arg(a[4], unbiased ? 1 : 0, &correction, fn, "correction") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = T(a[0]), *res;
    if (!has_dim || d.n == 0) { /* every dim, as a list, so correction and keepdim apply */
        d.n = ts_ndim(t);
        for (int i = 0; i < d.n; i++) d.d[i] = i;
    }
    if (is_std)
        TSP_NOGIL(res = ts_std_dims(t, d, keepdim, correction));
    else
        TSP_NOGIL(res = ts_var_dims(t, d, keepdim, correction));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(std, call_moment, true)
TSP_METHOD_AND_FUNCTION(var, call_moment, false)

/* ------------------------------------------------------------------ max / min */
static PyStructSequence_Field minmax_fields[] = {
    {"values", "the max (min) along the dim"},
    {"indices", "where they are"},
    {NULL, NULL},
};
static PyStructSequence_Desc max_desc = {"tessera.return_types.max", NULL, minmax_fields, 2};
static PyStructSequence_Desc min_desc = {"tessera.return_types.min", NULL, minmax_fields, 2};
static PyTypeObject *max_type, *min_type;

/* (values, indices) of max/min along dim */
static PyObject *values_indices(ts_tensor *t, int64_t dim, bool keepdim, bool is_max) {
    ts_tensor *idx = NULL, *val;
    if (is_max)
        TSP_NOGIL(val = ts_max_dim(t, (int)dim, keepdim, &idx));
    else
        TSP_NOGIL(val = ts_min_dim(t, (int)dim, keepdim, &idx));
    if (!val || ts_error() != TS_OK) {
        tsp_drop(val), tsp_drop(idx);
        return tsp_raise_pending();
    }
    PyObject *v = tsp_wrap(val), *i = tsp_wrap(idx);
    PyObject *r = v && i ? PyStructSequence_New(is_max ? max_type : min_type) : NULL;
    if (!r) {
        Py_XDECREF(v), Py_XDECREF(i);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, v);
    PyStructSequence_SET_ITEM(r, 1, i);
    return r;
}

/* max(input), max(input, dim, keepdim=False), max(input, other) */
static PyObject *call_minmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             bool is_max) {
    static const char *const names[] = {"input", "dim", "keepdim"};
    const char *fn = is_max ? "max" : "min";
    PyObject *a[3] = {0};
    bool keepdim;
    int64_t dim;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 0, a) < 0) return NULL;
    if (a[1] && tsp_tensor_of(a[1])) { /* max(a, b): elementwise */
        ts_tensor *r;
        if (tsp_enter()) return NULL;
        if (is_max)
            TSP_NOGIL(r = ts_maximum(T(a[0]), T(a[1])));
        else
            TSP_NOGIL(r = ts_minimum(T(a[0]), T(a[1])));
        return tsp_wrap(r);
    }
    if (tsp_bool_arg(a[2], false, &keepdim, fn, "keepdim") < 0) return NULL;
    if (!a[1] || a[1] == Py_None) return tsp_unary(is_max ? ts_max : ts_min, T(a[0]));
    if (tsp_int_arg(a[1], &dim, fn, "dim") < 0 || tsp_enter()) return NULL;
    return values_indices(T(a[0]), dim, keepdim, is_max);
}
TSP_METHOD_AND_FUNCTION(max, call_minmax, true)
TSP_METHOD_AND_FUNCTION(min, call_minmax, false)

#define M_RED(name, r) {#name, FN(m_##name), FAST, #name "(dim=None, keepdim=False)"},
#define F_RED(name, r) {#name, FN(f_##name), FAST, #name "(input, dim=None, keepdim=False)"},
PyMethodDef tsp_tensor_reduce_methods[] = {
    REDUCTION_LIST(M_RED){"std", FN(m_std), FAST, "std(dim=None, unbiased=True, keepdim=False)"},
    {"var", FN(m_var), FAST, "var(dim=None, unbiased=True, keepdim=False)"},
    {"max", FN(m_max), FAST, "max(dim=None, keepdim=False): with dim, (values, indices)"},
    {"min", FN(m_min), FAST, "min(dim=None, keepdim=False): with dim, (values, indices)"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_reduce_functions[] = {
    REDUCTION_LIST(F_RED){"std", FN(f_std), FAST, NULL},
    {"var", FN(f_var), FAST, NULL},
    {"max", FN(f_max), FAST, NULL},
    {"min", FN(f_min), FAST, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_tensor_reduce(PyObject *m) {
    (void)m;
    max_type = PyStructSequence_NewType(&max_desc);
    min_type = PyStructSequence_NewType(&min_desc);
    return max_type && min_type ? 0 : -1;
}
