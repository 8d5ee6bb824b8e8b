/* tensor_sort.c — issue 52's sorting and selection ops as Tensor methods and tessera.* functions
 * (src/ops/sort.c, quantile.c, search.c): sort / argsort / msort, topk, kthvalue, median /
 * nanmedian, mode (the (values, indices) pairs as tessera.return_types.*), quantile /
 * nanquantile, searchsorted / bucketize, unique / unique_consecutive, histc, bincount, isin. */
#include <string.h>

#include "tensor_impl.h"

#define T TSP_T

/* ------------------------------------------------------------------ helpers */
static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

static int int_or(PyObject *o, int64_t dflt, int64_t *v, const char *fn, const char *arg) {
    *v = dflt;
    return o && o != Py_None ? tsp_int_arg(o, v, fn, arg) : 0;
}

static PyStructSequence_Field pair_fields[] = {
    {"values", "the values"},
    {"indices", "their indices along the dim"},
    {NULL, NULL},
};
enum { P_SORT, P_TOPK, P_KTHVALUE, P_MEDIAN, P_NANMEDIAN, P_MODE, P_COUNT };
static const char *const pair_names[P_COUNT] = {
    "tessera.return_types.sort",      "tessera.return_types.topk",
    "tessera.return_types.kthvalue",  "tessera.return_types.median",
    "tessera.return_types.nanmedian", "tessera.return_types.mode"};
static PyTypeObject *pair_types[P_COUNT];

/* (values, indices) as the named pair `kind`; both references move in */
static PyObject *pair(int kind, ts_tensor *v, ts_tensor *i) {
    if (!v || !i || ts_error() != TS_OK) {
        tsp_drop(v), tsp_drop(i);
        return tsp_raise_pending();
    }
    PyObject *pv = tsp_wrap(v), *pi = tsp_wrap(i);
    PyObject *r = pv && pi ? PyStructSequence_New(pair_types[kind]) : NULL;
    if (!r) {
        Py_XDECREF(pv), Py_XDECREF(pi);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, pv);
    PyStructSequence_SET_ITEM(r, 1, pi);
    return r;
}

/* a tensor argument, or a Python number as a 0-dim tensor (int64 / float64 / bool, as torch
 * wraps a Scalar) on `beside`'s device; *made: the tensor to drop afterwards */
static ts_tensor *tensor_or_scalar(PyObject *o, ts_tensor *beside, ts_tensor **made, const char *fn,
                                   const char *arg) {
    *made = NULL;
    ts_tensor *t = o ? tsp_tensor_of(o) : NULL;
    if (t) return t;
    double v;
    int k = o ? tsp_number(o, &v) : 0;
    if (k < 0) return NULL;
    if (k == 0) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Tensor or Number, not %.100s",
                     fn, arg, o ? Py_TYPE(o)->tp_name : "nothing");
        return NULL;
    }
    ts_opts opts = {0};
    opts.dtype = PyBool_Check(o) ? TS_BOOL : PyLong_Check(o) ? TS_I64 : TS_F64;
    if (beside) opts.device = ts_device_of(beside);
    *made = ts_full(TS_SHAPE(), v, opts);
    if (!*made) tsp_raise_pending();
    return *made;
}

/* ------------------------------------------------------------------ sort, argsort, msort */
/* sort(input, dim=-1, descending=False, stable=False); argsort the same (indices only) */
static PyObject *call_sort(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    static const char *const names[] = {"input", "dim", "descending", "stable"};
    PyObject *a[4] = {0};
    int64_t dim;
    bool desc, stable;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 0, a) < 0 ||
        int_or(a[1], -1, &dim, fn, "dim") < 0 ||
        tsp_bool_arg(a[2], false, &desc, fn, "descending") < 0 ||
        tsp_bool_arg(a[3], false, &stable, fn, "stable") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *v = NULL, *i = NULL;
    if (fn[0] == 'a') {
        TSP_NOGIL(i = ts_argsort(t, (int)dim, desc, stable));
        return tsp_wrap(i);
    }
    TSP_NOGIL(v = ts_sort(t, (int)dim, desc, stable, &i));
    return pair(P_SORT, v, i);
}
TSP_METHOD_AND_FUNCTION(sort, call_sort, "sort")
TSP_METHOD_AND_FUNCTION(argsort, call_sort, "argsort")
TSP_DEF_UNARY(msort, ts_msort)

/* ------------------------------------------------------------------ topk, kthvalue, mode */
/* topk(input, k, dim=-1, largest=True, sorted=True) */
static PyObject *call_topk(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "k", "dim", "largest", "sorted"};
    PyObject *a[5] = {0};
    int64_t k, dim;
    bool largest, sorted;
    if (tsp_parse_input(self, args, nargs, kw, "topk", names, 5, 1, a) < 0 ||
        tsp_int_or_tensor_arg(a[1], &k, "topk", "k") < 0 ||
        int_or(a[2], -1, &dim, "topk", "dim") < 0 ||
        tsp_bool_arg(a[3], true, &largest, "topk", "largest") < 0 ||
        tsp_bool_arg(a[4], true, &sorted, "topk", "sorted") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *v, *i = NULL;
    TSP_NOGIL(v = ts_topk(t, k, (int)dim, largest, sorted, &i));
    return pair(P_TOPK, v, i);
}
TSP_METHOD_AND_FUNCTION(topk, call_topk, NULL)

/* kthvalue(input, k, dim=-1, keepdim=False) */
static PyObject *call_kthvalue(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "k", "dim", "keepdim"};
    PyObject *a[4] = {0};
    int64_t k, dim;
    bool keepdim;
    if (tsp_parse_input(self, args, nargs, kw, "kthvalue", names, 4, 1, a) < 0 ||
        tsp_int_or_tensor_arg(a[1], &k, "kthvalue", "k") < 0 ||
        int_or(a[2], -1, &dim, "kthvalue", "dim") < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, "kthvalue", "keepdim") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *v, *i = NULL;
    TSP_NOGIL(v = ts_kthvalue(t, k, (int)dim, keepdim, &i));
    return pair(P_KTHVALUE, v, i);
}
TSP_METHOD_AND_FUNCTION(kthvalue, call_kthvalue, NULL)

/* median(input) / median(input, dim, keepdim=False); nanmedian; mode(input, dim=-1, keepdim) */
static PyObject *call_median(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const char *fn) {
    static const char *const names[] = {"input", "dim", "keepdim"};
    PyObject *a[3] = {0};
    int64_t dim;
    bool keepdim;
    const int kind = fn[0] == 'm' && fn[1] == 'o' ? P_MODE : fn[0] == 'n' ? P_NANMEDIAN : P_MEDIAN;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 0, a) < 0 ||
        tsp_bool_arg(a[2], false, &keepdim, fn, "keepdim") < 0)
        return NULL;
    ts_tensor *t = input_of(self, a[0]), *v, *i = NULL;
    if (kind != P_MODE && (!a[1] || a[1] == Py_None)) {
        if (tsp_enter()) return NULL;
        TSP_NOGIL(v = kind == P_MEDIAN ? ts_median(t) : ts_nanmedian(t));
        return tsp_wrap(v);
    }
    if (int_or(a[1], -1, &dim, fn, "dim") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(v = kind == P_MODE     ? ts_mode(t, (int)dim, keepdim, &i)
                  : kind == P_MEDIAN ? ts_median_dim(t, (int)dim, keepdim, &i)
                                     : ts_nanmedian_dim(t, (int)dim, keepdim, &i));
    return pair(kind, v, i);
}
TSP_METHOD_AND_FUNCTION(median, call_median, "median")
TSP_METHOD_AND_FUNCTION(nanmedian, call_median, "nanmedian")
TSP_METHOD_AND_FUNCTION(mode, call_median, "mode")

/* ------------------------------------------------------------------ quantile */
/* quantile(input, q, dim=None, keepdim=False, *, interpolation='linear') */
static PyObject *call_quantile(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const char *fn) {
    static const char *const names[] = {"input", "q", "dim", "keepdim", "interpolation"};
    PyObject *a[5] = {0};
    int64_t dim = 0;
    bool keepdim;
    const char *interp;
    double qs = 0;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 5, 1, a) < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_str_arg(a[4], "linear", &interp, fn, "interpolation") < 0)
        return NULL;
    const bool has_dim = a[2] && a[2] != Py_None;
    if ((has_dim && tsp_int_arg(a[2], &dim, fn, "dim") < 0)) return NULL;
    ts_tensor *q = tsp_tensor_of(a[1]);
    if (!q && tsp_double_arg(a[1], 0, &qs, fn, "q") < 0) return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]), *r;
    if (fn[0] == 'n')
        TSP_NOGIL(r = ts_nanquantile(t, q, qs, has_dim, (int)dim, keepdim, interp));
    else
        TSP_NOGIL(r = ts_quantile(t, q, qs, has_dim, (int)dim, keepdim, interp));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(quantile, call_quantile, "quantile")
TSP_METHOD_AND_FUNCTION(nanquantile, call_quantile, "nanquantile")

/* ------------------------------------------------------------------ searchsorted, bucketize */
/* searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None) */
static PyObject *f_searchsorted(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"sorted_sequence", "input", "out_int32",
                                        "right",           "side",  "sorter"};
    const char *fn = "searchsorted";
    PyObject *a[6] = {0};
    bool out_int32, right;
    const char *side;
    ts_tensor *seq, *sorter = NULL, *made = NULL, *v, *r;
    if (tsp_parse(args, nargs, kw, fn, names, 6, 2, a) < 0 ||
        !(seq = tsp_tensor_arg(a[0], fn, "sorted_sequence")) ||
        tsp_bool_arg(a[2], false, &out_int32, fn, "out_int32") < 0 ||
        tsp_bool_arg(a[3], false, &right, fn, "right") < 0 ||
        tsp_str_arg(a[4], NULL, &side, fn, "side") < 0 ||
        (a[5] && a[5] != Py_None && !(sorter = tsp_tensor_arg(a[5], fn, "sorter"))))
        return NULL;
    if (side) {
        if (strcmp(side, "left") != 0 && strcmp(side, "right") != 0) {
            PyErr_Format(PyExc_ValueError,
                         "torch.searchsorted(): side can only be 'left' or 'right' but got %s",
                         side);
            return NULL;
        }
        if (right && side[0] == 'l') {
            PyErr_SetString(PyExc_ValueError,
                            "torch.searchsorted(): side and right can't be set to opposites, got "
                            "side of left while right was True");
            return NULL;
        }
        right = side[0] == 'r';
    }
    if (!(v = tensor_or_scalar(a[1], seq, &made, fn, "input")) || tsp_enter()) {
        tsp_drop(made);
        return NULL;
    }
    TSP_NOGIL(r = ts_searchsorted(seq, v, out_int32, right, sorter));
    tsp_drop(made);
    return tsp_wrap(r);
}

/* bucketize(input, boundaries, *, out_int32=False, right=False) */
static PyObject *f_bucketize(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"input", "boundaries", "out_int32", "right"};
    const char *fn = "bucketize";
    PyObject *a[4] = {0};
    bool out_int32, right;
    ts_tensor *b, *made = NULL, *v, *r;
    if (tsp_parse(args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        !(b = tsp_tensor_arg(a[1], fn, "boundaries")) ||
        tsp_bool_arg(a[2], false, &out_int32, fn, "out_int32") < 0 ||
        tsp_bool_arg(a[3], false, &right, fn, "right") < 0)
        return NULL;
    if (!(v = tensor_or_scalar(a[0], b, &made, fn, "input")) || tsp_enter()) {
        tsp_drop(made);
        return NULL;
    }
    TSP_NOGIL(r = ts_bucketize(v, b, out_int32, right));
    tsp_drop(made);
    return tsp_wrap(r);
}

/* isin(elements, test_elements, *, assume_unique=False, invert=False): either may be a number */
static PyObject *f_isin(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"elements", "test_elements", "assume_unique", "invert"};
    const char *fn = "isin";
    PyObject *a[4] = {0};
    bool unique, invert;
    ts_tensor *e, *te, *m1 = NULL, *m2 = NULL, *r = NULL;
    if (tsp_parse(args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        tsp_bool_arg(a[2], false, &unique, fn, "assume_unique") < 0 ||
        tsp_bool_arg(a[3], false, &invert, fn, "invert") < 0)
        return NULL;
    ts_tensor *te0 = tsp_tensor_of(a[1]), *e0 = tsp_tensor_of(a[0]);
    if (!e0 && !te0) {
        PyErr_SetString(PyExc_TypeError, "isin(): expected at least one Tensor argument");
        return NULL;
    }
    e = tensor_or_scalar(a[0], te0, &m1, fn, "elements");
    te = e ? tensor_or_scalar(a[1], e0, &m2, fn, "test_elements") : NULL;
    if (e && te && !tsp_enter()) {
        TSP_NOGIL(r = ts_isin(e, te, unique, invert));
        tsp_drop(m1), tsp_drop(m2);
        return tsp_wrap(r);
    }
    tsp_drop(m1), tsp_drop(m2);
    return NULL;
}

/* ------------------------------------------------------------------ unique */
/* unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None);
 * unique_consecutive(input, return_inverse=False, return_counts=False, dim=None) */
static PyObject *call_unique(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const char *fn) {
    const bool consecutive = strlen(fn) > 6;
    static const char *const un[] = {"input", "sorted", "return_inverse", "return_counts", "dim"};
    static const char *const uc[] = {"input", "return_inverse", "return_counts", "dim"};
    PyObject *a[5] = {0};
    bool sorted = true, inv, cnt;
    int64_t dim = 0;
    int o = consecutive ? 0 : 1; /* where return_inverse is, less one */
    if (tsp_parse_input(self, args, nargs, kw, fn, consecutive ? uc : un, consecutive ? 4 : 5, 0,
                        a) < 0 ||
        (!consecutive && tsp_bool_arg(a[1], true, &sorted, fn, "sorted") < 0) ||
        tsp_bool_arg(a[o + 1], false, &inv, fn, "return_inverse") < 0 ||
        tsp_bool_arg(a[o + 2], false, &cnt, fn, "return_counts") < 0)
        return NULL;
    const bool has_dim = a[o + 3] && a[o + 3] != Py_None;
    if ((has_dim && tsp_int_arg(a[o + 3], &dim, fn, "dim") < 0) || tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]), *out[3] = {NULL, NULL, NULL};
    TSP_NOGIL(out[0] = consecutive
                           ? ts_unique_consecutive(t, has_dim, (int)dim, inv ? &out[1] : NULL,
                                                   cnt ? &out[2] : NULL)
                           : ts_unique(t, sorted, has_dim, (int)dim, inv ? &out[1] : NULL,
                                       cnt ? &out[2] : NULL));
    if (!out[0] || ts_error() != TS_OK) {
        for (int i = 0; i < 3; i++) tsp_drop(out[i]);
        return tsp_raise_pending();
    }
    if (!inv && !cnt) return tsp_wrap(out[0]);
    if (!inv) out[1] = out[2], out[2] = NULL;
    return tsp_tuple_of(out, 1 + inv + cnt);
}
TSP_METHOD_AND_FUNCTION(unique, call_unique, "unique")
TSP_METHOD_AND_FUNCTION(unique_consecutive, call_unique, "unique_consecutive")

/* ------------------------------------------------------------------ histc, bincount */
/* histc(input, bins=100, min=0, max=0) */
static PyObject *call_histc(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "bins", "min", "max"};
    PyObject *a[4] = {0};
    int64_t bins;
    double lo, hi;
    if (tsp_parse_input(self, args, nargs, kw, "histc", names, 4, 0, a) < 0 ||
        int_or(a[1], 100, &bins, "histc", "bins") < 0 ||
        tsp_scalar_arg(a[2], 0, &lo, "histc", "min") < 0 ||
        tsp_scalar_arg(a[3], 0, &hi, "histc", "max") < 0 || tsp_enter())
        return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_histc(input_of(self, a[0]), bins, lo, hi));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(histc, call_histc, NULL)

/* bincount(input, weights=None, minlength=0) */
static PyObject *call_bincount(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "weights", "minlength"};
    PyObject *a[3] = {0};
    int64_t minlength;
    ts_tensor *w = NULL, *r;
    if (tsp_parse_input(self, args, nargs, kw, "bincount", names, 3, 0, a) < 0 ||
        (a[1] && a[1] != Py_None && !(w = tsp_tensor_arg(a[1], "bincount", "weights"))) ||
        int_or(a[2], 0, &minlength, "bincount", "minlength") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_bincount(input_of(self, a[0]), w, minlength));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(bincount, call_bincount, NULL)

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},

#define SORT_OPS(X)                                                                                \
    X(sort, "sort(input, dim=-1, descending=False, stable=False): (values, indices)")              \
    X(argsort, "argsort(input, dim=-1, descending=False, stable=False)")                           \
    X(topk, "topk(input, k, dim=-1, largest=True, sorted=True): (values, indices)")                \
    X(kthvalue, "kthvalue(input, k, dim=-1, keepdim=False): (values, indices)")                    \
    X(median, "median(input, dim=None, keepdim=False): with dim, (values, indices)")               \
    X(nanmedian, "nanmedian(input, dim=None, keepdim=False): with dim, (values, indices)")         \
    X(mode, "mode(input, dim=-1, keepdim=False): (values, indices)")                               \
    X(quantile, "quantile(input, q, dim=None, keepdim=False, *, interpolation='linear')")          \
    X(nanquantile, "nanquantile(input, q, dim=None, keepdim=False, *, interpolation='linear')")    \
    X(unique, "unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)")   \
    X(unique_consecutive,                                                                          \
      "unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)")            \
    X(histc, "histc(input, bins=100, min=0, max=0)")                                               \
    X(bincount, "bincount(input, weights=None, minlength=0)")

PyMethodDef tsp_tensor_sort_methods[] = {SORT_OPS(BOTH){"msort", m_msort, METH_NOARGS, "msort()"},
                                         {NULL, NULL, 0, NULL}};

PyMethodDef tsp_tensor_sort_functions[] = {
    SORT_OPS(FUNC){"msort", f_msort, METH_O, "msort(input)"},
    FUNC(searchsorted, "searchsorted(sorted_sequence, input, *, out_int32=False, right=False, "
                       "side=None, sorter=None)")
        FUNC(bucketize, "bucketize(input, boundaries, *, out_int32=False, right=False)")
            FUNC(isin, "isin(elements, test_elements, *, assume_unique=False, invert=False)"){
                NULL, NULL, 0, NULL}};

int tsp_init_tensor_sort(void) {
    for (int k = 0; k < P_COUNT; k++) {
        PyStructSequence_Desc d = {pair_names[k], NULL, pair_fields, 2};
        if (!(pair_types[k] = PyStructSequence_NewType(&d))) return -1;
    }
    return 0;
}
