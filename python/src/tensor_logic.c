/* tensor_logic.c — issue 52's predicates, truth reductions, cumulative ops and pointwise forms as
 * Tensor methods and tessera.* functions (src/ops/logic.c, cumulative.c, ternary.c, nan_forms.c,
 * diff.c, repeat.c, gcd.c):
 * isnan / isinf / isfinite / isposinf / isneginf / isreal, logical_xor, heaviside, any / all,
 * isclose / allclose / equal, cumsum / cumprod / cummax / cummin / logcumsumexp, addcmul /
 * addcdiv, lerp, fmax / fmin, nansum / nanmean, diff, gcd / lcm, repeat / tile, and the aliases
 * positive, ravel, unflatten, true_divide. One C call each. */
#include <string.h>

#include "tensor_impl.h"

#define T TSP_T

static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

/* a Tensor, or a Python number beside t (a new 0-dim tensor put in *owned) */
static ts_tensor *tensor_or_number(ts_tensor *t, PyObject *o, ts_tensor **owned, const char *fn,
                                   const char *arg) {
    ts_tensor *r = tsp_tensor_of(o);
    double v;
    if (r) return r;
    int k = o ? tsp_number(o, &v) : 0;
    if (k < 0) return NULL;
    if (k == 0) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Tensor or a number, not %.100s",
                     fn, arg, o ? Py_TYPE(o)->tp_name : "None");
        return NULL;
    }
    *owned = tsp_scalar_beside(t, o, v);
    if (!*owned) tsp_raise_pending();
    return *owned;
}

/* ------------------------------------------------------------------ predicates */
TSP_DEF_UNARY(isnan, ts_isnan)
TSP_DEF_UNARY(isinf, ts_isinf)
TSP_DEF_UNARY(isfinite, ts_isfinite)
TSP_DEF_UNARY(isposinf, ts_isposinf)
TSP_DEF_UNARY(isneginf, ts_isneginf)
TSP_DEF_UNARY(isreal, ts_isreal)

/* fn(input, other) with other a Tensor or a number */
typedef struct binfn {
    const char *name, *arg;
    ts_tensor *(*f)(ts_tensor *, ts_tensor *);
} binfn;
static const binfn b_xor = {"logical_xor", "other", ts_logical_xor};
static const binfn b_heaviside = {"heaviside", "values", ts_heaviside};
static const binfn b_fmax = {"fmax", "other", ts_fmax};
static const binfn b_fmin = {"fmin", "other", ts_fmin};
static const binfn b_gcd = {"gcd", "other", ts_gcd};
static const binfn b_lcm = {"lcm", "other", ts_lcm};

static PyObject *call_binfn(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const binfn *b) {
    const char *names[] = {"input", b->arg};
    PyObject *a[2] = {0};
    ts_tensor *owned = NULL, *o, *r;
    if (tsp_parse_input(self, args, nargs, kw, b->name, names, 2, 1, a) < 0) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    if (!(o = tensor_or_number(t, a[1], &owned, b->name, b->arg)) || tsp_enter()) {
        tsp_drop(owned);
        return NULL;
    }
    TSP_NOGIL(r = b->f(t, o));
    tsp_drop(owned);
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(logical_xor, call_binfn, &b_xor)
TSP_METHOD_AND_FUNCTION(heaviside, call_binfn, &b_heaviside)
TSP_METHOD_AND_FUNCTION(fmax, call_binfn, &b_fmax)
TSP_METHOD_AND_FUNCTION(fmin, call_binfn, &b_fmin)
TSP_METHOD_AND_FUNCTION(gcd, call_binfn, &b_gcd)
TSP_METHOD_AND_FUNCTION(lcm, call_binfn, &b_lcm)

/* ------------------------------------------------------------------ any, all, nansum, nanmean */
static PyObject *call_truth(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    const bool nan_red = fn[0] == 'n';
    static const char *const names[] = {"input", "dim", "keepdim", "dtype"};
    PyObject *a[4] = {0};
    ts_dims d = {0};
    bool keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, nan_red ? 4 : 3, 0, a) <
            0 ||
        (a[1] && a[1] != Py_None && tsp_dims_arg(a[1], &d, fn, "dim") < 0) ||
        tsp_bool_arg(a[2], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_dtype_arg(a[3], &dt, fn, "dtype") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *c = NULL, *r;
    Py_BEGIN_ALLOW_THREADS;
    if (dt != TS_DTYPE_DEFAULT) t = c = ts_to_dtype(t, dt);
    if (t && !nan_red && a[1] && a[1] != Py_None && d.n == 0) { /* dim=(): elementwise */
        r = ts_ne_scalar(t, 0);
        if (r && ts_dtype_of(t) == TS_U8) {
            ts_tensor *u = ts_to_dtype(r, TS_U8);
            tsp_drop(r);
            r = u;
        }
    } else
        r = !t                      ? NULL
            : !strcmp(fn, "any")    ? ts_any(t, d, keepdim)
            : !strcmp(fn, "all")    ? ts_all(t, d, keepdim)
            : !strcmp(fn, "nansum") ? ts_nansum(t, d, keepdim)
                                    : ts_nanmean(t, d, keepdim);
    tsp_drop(c);
    Py_END_ALLOW_THREADS;
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(any, call_truth, "any")
TSP_METHOD_AND_FUNCTION(all, call_truth, "all")
TSP_METHOD_AND_FUNCTION(nansum, call_truth, "nansum")
TSP_METHOD_AND_FUNCTION(nanmean, call_truth, "nanmean")

/* ------------------------------------------------------------------ isclose, allclose, equal */
static PyObject *call_close(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    const int kind = !strcmp(fn, "isclose") ? 0 : !strcmp(fn, "allclose") ? 1 : 2;
    static const char *const names[] = {"input", "other", "rtol", "atol", "equal_nan"};
    PyObject *a[5] = {0};
    double rtol, atol;
    bool equal_nan;
    ts_tensor *o, *r = NULL;
    int res = -1;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, kind == 2 ? 2 : 5, 1, a) <
            0 ||
        !(o = tsp_tensor_arg(a[1], fn, "other")) ||
        tsp_double_arg(a[2], 1e-05, &rtol, fn, "rtol") < 0 ||
        tsp_double_arg(a[3], 1e-08, &atol, fn, "atol") < 0 ||
        tsp_bool_arg(a[4], false, &equal_nan, fn, "equal_nan") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    if (kind == 0) {
        TSP_NOGIL(r = ts_isclose(t, o, rtol, atol, equal_nan));
        return tsp_wrap(r);
    }
    TSP_NOGIL(res = kind == 1 ? ts_allclose(t, o, rtol, atol, equal_nan) : ts_equal(t, o));
    if (res < 0) return tsp_raise_pending();
    return PyBool_FromLong(res);
}
TSP_METHOD_AND_FUNCTION(isclose, call_close, "isclose")
TSP_METHOD_AND_FUNCTION(allclose, call_close, "allclose")
TSP_METHOD_AND_FUNCTION(equal, call_close, "equal")

/* ------------------------------------------------------------------ cumulative */
static PyStructSequence_Field cum_fields[] = {
    {"values", "the running max (min)"},
    {"indices", "where each came from"},
    {NULL, NULL},
};
static PyStructSequence_Desc cummax_desc = {"tessera.return_types.cummax", NULL, cum_fields, 2};
static PyStructSequence_Desc cummin_desc = {"tessera.return_types.cummin", NULL, cum_fields, 2};
static PyTypeObject *cummax_type, *cummin_type;

static PyObject *call_cum(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                          const char *fn) {
    const bool ext = !strcmp(fn, "cummax") || !strcmp(fn, "cummin");
    const bool has_dtype = !strcmp(fn, "cumsum") || !strcmp(fn, "cumprod");
    static const char *const names[] = {"input", "dim", "dtype"};
    PyObject *a[3] = {0};
    int64_t dim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, has_dtype ? 3 : 2, 1, a) <
            0 ||
        tsp_int_arg(a[1], &dim, fn, "dim") < 0 || tsp_dtype_arg(a[2], &dt, fn, "dtype") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *r, *idx = NULL;
    if (!ext) {
        TSP_NOGIL(r = !strcmp(fn, "cumsum")    ? ts_cumsum(t, (int)dim, dt)
                      : !strcmp(fn, "cumprod") ? ts_cumprod(t, (int)dim, dt)
                                               : ts_logcumsumexp(t, (int)dim));
        return tsp_wrap(r);
    }
    const bool max = !strcmp(fn, "cummax");
    PyTypeObject **type = max ? &cummax_type : &cummin_type;
    if (!*type && !(*type = PyStructSequence_NewType(max ? &cummax_desc : &cummin_desc)))
        return NULL;
    TSP_NOGIL(r = max ? ts_cummax(t, (int)dim, &idx) : ts_cummin(t, (int)dim, &idx));
    if (!r || ts_error() != TS_OK) {
        tsp_drop(r), tsp_drop(idx);
        return tsp_raise_pending();
    }
    PyObject *v = tsp_wrap(r), *i = tsp_wrap(idx);
    PyObject *res = v && i ? PyStructSequence_New(*type) : NULL;
    if (!res) {
        Py_XDECREF(v), Py_XDECREF(i);
        return NULL;
    }
    PyStructSequence_SET_ITEM(res, 0, v);
    PyStructSequence_SET_ITEM(res, 1, i);
    return res;
}
TSP_METHOD_AND_FUNCTION(cumsum, call_cum, "cumsum")
TSP_METHOD_AND_FUNCTION(cumprod, call_cum, "cumprod")
TSP_METHOD_AND_FUNCTION(cummax, call_cum, "cummax")
TSP_METHOD_AND_FUNCTION(cummin, call_cum, "cummin")
TSP_METHOD_AND_FUNCTION(logcumsumexp, call_cum, "logcumsumexp")

/* ------------------------------------------------------------------ addcmul, addcdiv, lerp */
static PyObject *call_addc(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    static const char *const names[] = {"input", "tensor1", "tensor2", "value"};
    PyObject *a[4] = {0};
    double value;
    ts_tensor *t1, *t2, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 4, 2, a) < 0) return NULL;
    if (a[3] && (PyLong_Check(a[1]) || PyFloat_Check(a[1])) && tsp_tensor_of(a[2]) &&
        tsp_tensor_of(a[3])) { /* torch's deprecated addcmul(input, Number value, t1, t2) */
        if (PyErr_WarnFormat(PyExc_UserWarning, 1,
                             "This overload of %s is deprecated: %s(Number value, Tensor tensor1, "
                             "Tensor tensor2); use %s(Tensor tensor1, Tensor tensor2, *, "
                             "Number value=1)",
                             fn, fn, fn) < 0)
            return NULL;
        PyObject *v = a[1];
        a[1] = a[2], a[2] = a[3], a[3] = v;
    }
    if (!(t1 = tsp_tensor_arg(a[1], fn, "tensor1")) ||
        !(t2 = tsp_tensor_arg(a[2], fn, "tensor2")) ||
        tsp_scalar_arg(a[3], 1.0, &value, fn, "value") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = fn[4] == 'm' ? ts_addcmul(t, t1, t2, value) : ts_addcdiv(t, t1, t2, value));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(addcmul, call_addc, "addcmul")
TSP_METHOD_AND_FUNCTION(addcdiv, call_addc, "addcdiv")

static PyObject *call_lerp(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    static const char *const names[] = {"input", "end", "weight"};
    PyObject *a[3] = {0};
    ts_tensor *e, *w, *r;
    double v = 0;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 3, 2, a) < 0 ||
        !(e = tsp_tensor_arg(a[1], fn, "end")))
        return NULL;
    w = tsp_tensor_of(a[2]);
    if (!w) {
        int k = tsp_number(a[2], &v);
        if (k <= 0) {
            if (k == 0)
                PyErr_Format(PyExc_TypeError,
                             "lerp(): argument 'weight' must be Tensor or a number, not %.100s",
                             Py_TYPE(a[2])->tp_name);
            return NULL;
        }
    }
    if (tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = w ? ts_lerp(t, e, w) : ts_lerp_scalar(t, e, v));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(lerp, call_lerp, "lerp")

/* ------------------------------------------------------------------ diff */
static PyObject *call_diff(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    static const char *const names[] = {"input", "n", "dim", "prepend", "append"};
    PyObject *a[5] = {0};
    int64_t n = 1, dim = -1;
    ts_tensor *pre = NULL, *app = NULL, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 5, 0, a) < 0 ||
        (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &n, fn, "n") < 0) ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &dim, fn, "dim") < 0) ||
        (a[3] && a[3] != Py_None && !(pre = tsp_tensor_arg(a[3], fn, "prepend"))) ||
        (a[4] && a[4] != Py_None && !(app = tsp_tensor_arg(a[4], fn, "append"))) || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_diff(t, n, (int)dim, pre, app));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(diff, call_diff, "diff")

/* ------------------------------------------------------------------ repeat, tile */
/* ints given as separate arguments or as one sequence (x.repeat(2, 3), x.repeat((2, 3))) */
static int reps_of(PyObject *const *args, Py_ssize_t nargs, int64_t *v, int *n, const char *fn,
                   const char *arg) {
    PyObject *seq = NULL;
    if (nargs == 1 && !PyIndex_Check(args[0])) {
        if (!(seq = PySequence_Fast(args[0], ""))) {
            PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a tuple of ints, not %.100s",
                         fn, arg, Py_TYPE(args[0])->tp_name);
            return -1;
        }
        nargs = PySequence_Fast_GET_SIZE(seq);
        args = PySequence_Fast_ITEMS(seq);
    }
    int r = 0;
    if (nargs > TS_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has too many entries (%zd)", fn, arg,
                     nargs);
        r = -1;
    }
    for (Py_ssize_t i = 0; r == 0 && i < nargs; i++) r = tsp_int_arg(args[i], &v[i], fn, arg);
    *n = (int)nargs;
    Py_XDECREF(seq);
    return r;
}

static PyObject *m_repeat(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    int64_t v[TS_MAX_DIMS];
    int n = 0;
    ts_tensor *r;
    if (kw && PyTuple_GET_SIZE(kw) > 0) {
        if (nargs != 0 || PyTuple_GET_SIZE(kw) != 1 ||
            strcmp(PyUnicode_AsUTF8(PyTuple_GET_ITEM(kw, 0)), "repeats") != 0) {
            PyErr_SetString(PyExc_TypeError, "repeat(): takes the repeats only");
            return NULL;
        }
        nargs = 1; /* x.repeat(repeats=(2, 3)): the value follows the positionals */
    }
    if (reps_of(args, nargs, v, &n, "repeat", "repeats") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_repeat(T(self), v, n));
    return tsp_wrap(r);
}

static PyObject *call_tile(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    int64_t v[TS_MAX_DIMS];
    int n = 0;
    ts_tensor *r;
    if (self && nargs >= 1 && !kw) { /* x.tile(2, 3) or x.tile((2, 3)) */
        if (reps_of(args, nargs, v, &n, fn, "dims") < 0) return NULL;
    } else {
        static const char *const names[] = {"input", "dims"};
        PyObject *a[2] = {0};
        if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 2, 1, a) < 0 ||
            reps_of(&a[1], 1, v, &n, fn, "dims") < 0)
            return NULL;
        if (!self) self = a[0];
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_tile(T(self), v, n));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(tile, call_tile, "tile")

/* ------------------------------------------------------------------ aliases */
/* torch.positive: the input itself (bool refused, as PyTorch's unary +) */
static PyObject *call_positive(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const char *fn) {
    static const char *const names[] = {"input"};
    PyObject *a[1] = {0};
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 1, 0, a) < 0) return NULL;
    PyObject *x = self ? self : a[0];
    if (ts_dtype_of(T(x)) == TS_BOOL) {
        PyErr_SetString(PyExc_TypeError, "The `+` operator, on a bool tensor is not supported.");
        return NULL;
    }
    return Py_NewRef(x);
}
TSP_METHOD_AND_FUNCTION(positive, call_positive, "positive")

static PyObject *call_ravel(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    static const char *const names[] = {"input"};
    PyObject *a[1] = {0};
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 1, 0, a) < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_reshape(t, (ts_shape){1, {-1}}));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(ravel, call_ravel, "ravel")

/* unflatten(input, dim, sizes): dim split into sizes (one -1 inferred) */
static PyObject *call_unflatten(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kw, const char *fn) {
    static const char *const names[] = {"input", "dim", "sizes"};
    PyObject *a[3] = {0};
    int64_t dim, sz[TS_MAX_DIMS];
    int n = 0;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, (const char **)names, 3, 2, a) < 0 ||
        tsp_int_arg(a[1], &dim, fn, "dim") < 0 || reps_of(&a[2], 1, sz, &n, fn, "sizes") < 0)
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    ts_shape s = ts_shape_of(t), o = {0};
    if (s.ndim == 0) {
        PyErr_SetString(PyExc_IndexError,
                        "unflatten: Dimension specified as 0 but tensor has no dimensions");
        return NULL;
    }
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError, "unflatten: sizes must be non-empty");
        return NULL;
    }
    int64_t d = dim < 0 ? dim + (s.ndim ? s.ndim : 1) : dim;
    if (d < 0 || d >= (s.ndim ? s.ndim : 1)) {
        PyErr_Format(PyExc_IndexError,
                     "unflatten: Dimension out of range (expected to be in range of [%d, %d], but "
                     "got %lld)",
                     -(s.ndim ? s.ndim : 1), (s.ndim ? s.ndim : 1) - 1, (long long)dim);
        return NULL;
    }
    if (s.ndim - 1 + n > TS_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "unflatten: the result would have more than 8 dims");
        return NULL;
    }
    int64_t known = 1, infer = -1;
    for (int i = 0; i < n; i++) {
        if (sz[i] == -1) {
            if (infer >= 0) {
                PyErr_SetString(PyExc_RuntimeError,
                                "unflatten: only one dimension can be inferred");
                return NULL;
            }
            infer = i;
        } else
            known *= sz[i];
    }
    int64_t len = s.ndim ? s.dims[d] : 1;
    if (infer >= 0 && known != 0 && len % known == 0) sz[infer] = len / known;
    if ((infer < 0 && known != len) || (infer >= 0 && sz[infer] == -1)) {
        PyErr_Format(PyExc_RuntimeError,
                     "unflatten: Provided sizes don't multiply up to the size of dim %lld (%lld) "
                     "in the input tensor",
                     (long long)dim, (long long)len);
        return NULL;
    }
    for (int i = 0; i < d; i++) o.dims[o.ndim++] = s.dims[i];
    for (int i = 0; i < n; i++) o.dims[o.ndim++] = sz[i];
    for (int i = (int)d + 1; i < s.ndim; i++) o.dims[o.ndim++] = s.dims[i];
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_reshape(t, o));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(unflatten, call_unflatten, "unflatten")

/* Tensor.true_divide: Tensor.div */
static PyObject *m_true_divide(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw) {
    PyObject *div = PyObject_GetAttrString(self, "div");
    if (!div) return NULL;
    PyObject *r = PyObject_Vectorcall(div, args, (size_t)nargs, kw);
    Py_DECREF(div);
    return r;
}

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},
#define U_METH(name)    {#name, m_##name, METH_NOARGS, #name "()"},
#define U_FUNC(name)    {#name, f_##name, METH_O, #name "(input)"},

#define PREDICATES(X) X(isnan) X(isinf) X(isfinite) X(isposinf) X(isneginf) X(isreal)
#define FAST_OPS(X)                                                                                \
    X(logical_xor, "logical_xor(input, other)")                                                    \
    X(heaviside, "heaviside(input, values)")                                                       \
    X(fmax, "fmax(input, other)")                                                                  \
    X(fmin, "fmin(input, other)")                                                                  \
    X(gcd, "gcd(input, other)")                                                                    \
    X(lcm, "lcm(input, other)")                                                                    \
    X(any, "any(input, dim=None, keepdim=False)")                                                  \
    X(all, "all(input, dim=None, keepdim=False)")                                                  \
    X(nansum, "nansum(input, dim=None, keepdim=False, *, dtype=None)")                             \
    X(nanmean, "nanmean(input, dim=None, keepdim=False, *, dtype=None)")                           \
    X(isclose, "isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)")                   \
    X(allclose, "allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool")         \
    X(equal, "equal(input, other) -> bool")                                                        \
    X(cumsum, "cumsum(input, dim, *, dtype=None)")                                                 \
    X(cumprod, "cumprod(input, dim, *, dtype=None)")                                               \
    X(cummax, "cummax(input, dim) -> (values, indices)")                                           \
    X(cummin, "cummin(input, dim) -> (values, indices)")                                           \
    X(logcumsumexp, "logcumsumexp(input, dim)")                                                    \
    X(addcmul, "addcmul(input, tensor1, tensor2, *, value=1)")                                     \
    X(addcdiv, "addcdiv(input, tensor1, tensor2, *, value=1)")                                     \
    X(lerp, "lerp(input, end, weight)")                                                            \
    X(diff, "diff(input, n=1, dim=-1, prepend=None, append=None)")                                 \
    X(tile, "tile(input, dims)")                                                                   \
    X(positive, "positive(input)")                                                                 \
    X(ravel, "ravel(input)")                                                                       \
    X(unflatten, "unflatten(input, dim, sizes)")

PyMethodDef tsp_tensor_logic_methods[] = {
    PREDICATES(U_METH) FAST_OPS(BOTH){"repeat", FN(m_repeat), FAST, "repeat(*repeats)"},
    {"true_divide", FN(m_true_divide), FAST, "true_divide(other): div(other)"},
    {NULL, NULL, 0, NULL}};

PyMethodDef tsp_tensor_logic_functions[] = {PREDICATES(U_FUNC) FAST_OPS(FUNC){NULL, NULL, 0, NULL}};
