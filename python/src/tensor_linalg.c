/* tensor_linalg.c — issue 52's products and norm-type reductions as Tensor methods and tessera.*
 * functions: addmm / addmv / addr / baddbmm / addbmm (beta=, alpha=, in-place forms), mv, dot,
 * vdot, outer / ger, inner, kron, trace, tensordot, norm, aminmax, count_nonzero, var_mean,
 * std_mean, cdist, pairwise_distance, cosine_similarity, the mT / mH / H properties, and the
 * _linalg_* / _normalize functions behind tessera.linalg and F.normalize. One C call each. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "tensor_impl.h"
#include "tessera/complex.h"

#define T TSP_T

/* ------------------------------------------------------------------ addmm and family */
typedef ts_tensor *(*addx_fn)(ts_tensor *, ts_tensor *, ts_tensor *, double, double);
typedef struct addx_op {
    const char *name, *a, *b;
    addx_fn f;
    bool in_place;
} addx_op;

/* addX(input, a, b, *, beta=1, alpha=1) */
static PyObject *call_addx(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const addx_op *op) {
    const char *names[] = {"input", op->a, op->b, "beta", "alpha"};
    PyObject *a[5] = {0};
    double beta, alpha;
    ts_tensor *ta, *tb, *r;
    if (tsp_parse_input(self, args, nargs, kw, op->name, names, 5, 2, a) < 0) return NULL;
    if (!(ta = tsp_tensor_arg(a[1], op->name, op->a)) ||
        !(tb = tsp_tensor_arg(a[2], op->name, op->b)) ||
        tsp_scalar_arg(a[3], 1.0, &beta, op->name, "beta") < 0 ||
        tsp_scalar_arg(a[4], 1.0, &alpha, op->name, "alpha") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = op->f(T(a[0]), ta, tb, beta, alpha));
    return tsp_result(self, r, op->in_place);
}

#define ADDX_LIST(X)                                                                               \
    X(addmm, "mat1", "mat2")                                                                       \
    X(addmv, "mat", "vec")                                                                         \
    X(addr, "vec1", "vec2") X(baddbmm, "batch1", "batch2") X(addbmm, "batch1", "batch2")
#define DEF_ADDX(name, an, bn)                                                                     \
    static const addx_op op_##name = {#name, an, bn, ts_##name, false};                            \
    static const addx_op op_##name##_ = {#name "_", an, bn, ts_##name##_, true};                   \
    TSP_METHOD_AND_FUNCTION(name, call_addx, &op_##name)                                           \
    static PyObject *m_##name##_(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) { \
        return call_addx(self, a, n, kw, &op_##name##_);                                           \
    }
ADDX_LIST(DEF_ADDX)

/* ------------------------------------------------------------------ binary products */
typedef struct bin_op {
    const char *name, *other;
    ts_tensor *(*f)(ts_tensor *, ts_tensor *);
} bin_op;

static PyObject *call_bin(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                          const bin_op *op) {
    const char *names[] = {"input", op->other};
    PyObject *a[2] = {0};
    ts_tensor *tb, *r;
    if (tsp_parse_input(self, args, nargs, kw, op->name, names, 2, 1, a) < 0 ||
        !(tb = tsp_tensor_arg(a[1], op->name, op->other)) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = op->f(T(a[0]), tb));
    return tsp_wrap(r);
}

#define BIN_LIST(X)                                                                                \
    X(mv, "vec", ts_mv)                                                                            \
    X(dot, "tensor", ts_dot)                                                                       \
    X(vdot, "other", ts_vdot)                                                                      \
    X(outer, "vec2", ts_outer)                                                                     \
    X(ger, "vec2", ts_outer) X(inner, "other", ts_inner) X(kron, "other", ts_kron)
#define DEF_BIN(name, other, cfn)                                                                  \
    static const bin_op op_##name = {#name, other, cfn};                                           \
    TSP_METHOD_AND_FUNCTION(name, call_bin, &op_##name)
BIN_LIST(DEF_BIN)

TSP_DEF_UNARY(trace, ts_trace)

/* tensordot(a, b, dims=2): an int (a's last dims with b's first), or two lists / ints */
static int dims_list(PyObject *o, ts_dims *d, const char *fn) {
    if (PyLong_Check(o)) {
        int64_t v;
        if (tsp_int_arg(o, &v, fn, "dims") < 0) return -1;
        d->n = 1, d->d[0] = (int)v;
        return 0;
    }
    return tsp_dims_arg(o, d, fn, "dims");
}

static PyObject *f_tensordot(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"a", "b", "dims", "out"};
    const char *fn = "tensordot";
    PyObject *a[4] = {0};
    ts_tensor *ta, *tb, *r;
    ts_dims da = {0}, db = {0};
    if (tsp_parse(args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        !(ta = tsp_tensor_arg(a[0], fn, "a")) || !(tb = tsp_tensor_arg(a[1], fn, "b")))
        return NULL;
    if (a[3] && a[3] != Py_None) {
        PyErr_SetString(PyExc_TypeError, "tensordot(): out= is not supported");
        return NULL;
    }
    PyObject *dims = a[2] ? a[2] : NULL;
    if (dims && tsp_tensor_of(dims)) { /* a tensor of dims: as its list */
        PyObject *l = PyObject_CallMethod(dims, "tolist", NULL);
        if (!l) return NULL;
        PyObject *res = NULL;
        PyObject *nargs2[3] = {a[0], a[1], l};
        res = f_tensordot(NULL, nargs2, 3, NULL);
        Py_DECREF(l);
        return res;
    }
    if (!dims || PyLong_Check(dims)) {
        int64_t k = 2;
        if (dims && tsp_int_arg(dims, &k, fn, "dims") < 0) return NULL;
        const int na = ts_ndim(ta);
        if (k < 0 || k > na || k > ts_ndim(tb) || k > TS_MAX_DIMS) {
            PyErr_Format(PyExc_RuntimeError,
                         "tensordot expects dims >= 0 and at most the operands' dims, but got "
                         "dims=%lld",
                         (long long)k);
            return NULL;
        }
        da.n = db.n = (int)k;
        for (int i = 0; i < (int)k; i++) da.d[i] = na - (int)k + i, db.d[i] = i;
    } else {
        PyObject *seq = PySequence_Fast(dims, "tensordot(): dims must be an int or two lists");
        if (!seq) return NULL;
        int rc = -1;
        if (PySequence_Fast_GET_SIZE(seq) != 2)
            PyErr_SetString(PyExc_RuntimeError,
                            "tensordot expects dims to be a pair of lists of dims");
        else
            rc = dims_list(PySequence_Fast_GET_ITEM(seq, 0), &da, fn) < 0 ||
                         dims_list(PySequence_Fast_GET_ITEM(seq, 1), &db, fn) < 0
                     ? -1
                     : 0;
        Py_DECREF(seq);
        if (rc < 0) return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_tensordot(ta, tb, da, db));
    return tsp_wrap(r);
}

/* ------------------------------------------------------------------ norms */
/* dim=None | int | sequence -> *d (n == 0: all); *given says whether one was passed */
static int opt_dims(PyObject *o, ts_dims *d, bool *given, const char *fn) {
    d->n = 0;
    *given = o && o != Py_None;
    if (!*given) return 0;
    return tsp_dims_arg(o, d, fn, "dim");
}

/* an ord argument: a number (inf allowed) */
static int ord_arg(PyObject *o, double dflt, double *out, const char *fn, const char *arg) {
    return tsp_scalar_arg(o, dflt, out, fn, arg);
}

/* _linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) */
static PyObject *f__linalg_vector_norm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"x", "ord", "dim", "keepdim", "dtype"};
    const char *fn = "vector_norm";
    PyObject *a[5] = {0};
    double ord;
    ts_dims d;
    bool given, keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    ts_tensor *r;
    if (tsp_parse_input(NULL, args, nargs, kw, fn, names, 5, 0, a) < 0 ||
        ord_arg(a[1], 2.0, &ord, fn, "ord") < 0 || opt_dims(a[2], &d, &given, fn) < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_dtype_arg(a[4], &dt, fn, "dtype") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_vector_norm(T(a[0]), ord, d, keepdim, dt));
    return tsp_wrap(r);
}

/* an ord for matrix_norm: "fro" / "nuc" or a number, as the C API's string */
static int matrix_ord(PyObject *o, char *buf, size_t n, const char *fn) {
    if (!o || o == Py_None) return snprintf(buf, n, "fro"), 0;
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return -1;
        snprintf(buf, n, "%s", s);
        return 0;
    }
    double v;
    if (tsp_scalar_arg(o, 0, &v, fn, "ord") < 0) return -1;
    if (isinf(v))
        snprintf(buf, n, "%s", v > 0 ? "inf" : "-inf");
    else
        snprintf(buf, n, "%.17g", v);
    return 0;
}

/* _linalg_matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None) */
static PyObject *f__linalg_matrix_norm(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"A", "ord", "dim", "keepdim", "dtype"};
    const char *fn = "matrix_norm";
    PyObject *a[5] = {0};
    char ord[64];
    ts_dims d = {.n = 2, .d = {-2, -1}};
    bool keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    ts_tensor *r;
    if (tsp_parse_input(NULL, args, nargs, kw, fn, names, 5, 0, a) < 0 ||
        matrix_ord(a[1], ord, sizeof ord, fn) < 0 ||
        (a[2] && a[2] != Py_None && tsp_dims_arg(a[2], &d, fn, "dim") < 0) ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_dtype_arg(a[4], &dt, fn, "dtype") < 0)
        return NULL;
    if (d.n != 2) {
        PyErr_Format(PyExc_RuntimeError, "linalg.matrix_norm: dim must be a 2-tuple. Got %d dims",
                     d.n);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_matrix_norm(T(a[0]), ord, d.d[0], d.d[1], keepdim, dt));
    return tsp_wrap(r);
}

/* torch.norm / Tensor.norm(p='fro', dim=None, keepdim=False, dtype=None): a string p is 'fro'
 * (the 2-norm over dim, as PyTorch's) or a matrix norm; a number (None: 2) a vector norm */
static PyObject *call_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "p", "dim", "keepdim", "out", "dtype"};
    const char *fn = "norm";
    PyObject *a[6] = {0};
    ts_dims d;
    bool given, keepdim;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 6, 0, a) < 0 ||
        opt_dims(a[2], &d, &given, fn) < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_dtype_arg(a[5], &dt, fn, "dtype") < 0)
        return NULL;
    if (a[4] && a[4] != Py_None) {
        PyErr_SetString(PyExc_TypeError, "norm(): out= is not supported");
        return NULL;
    }
    ts_tensor *t = T(a[0]);
    PyObject *p = a[1] ? a[1] : NULL;
    if (p && PyUnicode_Check(p)) {
        const char *s = PyUnicode_AsUTF8(p);
        if (!s) return NULL;
        if (!strcmp(s, "fro") && (!given || d.n <= 2)) {
            if (tsp_enter()) return NULL;
            TSP_NOGIL(r = ts_vector_norm(t, 2, d, keepdim, dt));
            return tsp_wrap(r);
        }
        if (!given) {
            d.n = ts_ndim(t);
            for (int i = 0; i < d.n && i < TS_MAX_DIMS; i++) d.d[i] = i;
        }
        if (d.n != 2) {
            PyErr_Format(PyExc_RuntimeError, "norm: p='%s' needs a 2-D input or dim of two dims",
                         s);
            return NULL;
        }
        if (tsp_enter()) return NULL;
        TSP_NOGIL(r = ts_matrix_norm(t, s, d.d[0], d.d[1], keepdim, dt));
        return tsp_wrap(r);
    }
    double ord;
    if ((p && p != Py_None ? ord_arg(p, 2.0, &ord, fn, "p") : (ord = 2.0, 0)) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_vector_norm(t, ord, d, keepdim, dt));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(norm, call_norm, NULL)

/* _linalg_multi_dot(tensors) */
static PyObject *f__linalg_multi_dot(PyObject *mod, PyObject *arg) {
    (void)mod;
    const char *fn = "multi_dot";
    if (tsp_tensor_of(arg)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'tensors' must be a sequence of Tensors", fn);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "multi_dot(): argument 'tensors' must be a sequence");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_tensor **ts = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ts), *r = NULL;
    PyObject *res = NULL;
    bool ok = ts != NULL;
    if (!ts) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = (ts[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), fn, "tensors")) != NULL;
    if (ok && !tsp_enter()) {
        TSP_NOGIL(r = ts_multi_dot(ts, (int)n));
        res = tsp_wrap(r);
    }
    PyMem_Free(ts);
    Py_DECREF(seq);
    return res;
}

/* _einsum(equation, tensors): torch.einsum after python/tessera/_einsum.py's forms */
static PyObject *f__einsum(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *fn = "einsum", *eq;
    PyObject *arg;
    if (!PyArg_ParseTuple(args, "sO:_einsum", &eq, &arg)) return NULL;
    PyObject *seq = PySequence_Fast(arg, "einsum(): argument 'operands' must be a sequence");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_tensor **ts = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ts), *r = NULL;
    PyObject *res = NULL;
    bool ok = ts != NULL;
    if (!ts) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = (ts[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), fn, "operands")) != NULL;
    if (ok && n > INT_MAX)
        ok = (PyErr_SetString(PyExc_ValueError, "einsum(): too many operands"), false);
    if (ok && !tsp_enter()) {
        TSP_NOGIL(r = ts_einsum(eq, ts, (int)n));
        res = tsp_wrap(r);
    }
    PyMem_Free(ts);
    Py_DECREF(seq);
    return res;
}

/* _normalize(input, p=2.0, dim=1, eps=1e-12) */
static PyObject *f__normalize(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"input", "p", "dim", "eps"};
    const char *fn = "normalize";
    PyObject *a[4] = {0};
    double p, eps;
    int64_t dim = 1;
    ts_tensor *r;
    if (tsp_parse_input(NULL, args, nargs, kw, fn, names, 4, 0, a) < 0 ||
        ord_arg(a[1], 2.0, &p, fn, "p") < 0 || (a[2] && tsp_int_arg(a[2], &dim, fn, "dim") < 0) ||
        tsp_double_arg(a[3], 1e-12, &eps, fn, "eps") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_lp_normalize(T(a[0]), p, (int)dim, eps));
    return tsp_wrap(r);
}

/* ------------------------------------------------------------------ moments, aminmax */
static PyObject *pair(ts_tensor *x, ts_tensor *y, PyTypeObject *type) {
    if (!x || ts_error() != TS_OK) {
        tsp_drop(x), tsp_drop(y);
        return tsp_raise_pending();
    }
    PyObject *a = tsp_wrap(x), *b = tsp_wrap(y);
    PyObject *r = a && b ? (type ? PyStructSequence_New(type) : PyTuple_New(2)) : NULL;
    if (!r) {
        Py_XDECREF(a), Py_XDECREF(b);
        return NULL;
    }
    if (type) {
        PyStructSequence_SET_ITEM(r, 0, a);
        PyStructSequence_SET_ITEM(r, 1, b);
    } else {
        PyTuple_SET_ITEM(r, 0, a);
        PyTuple_SET_ITEM(r, 1, b);
    }
    return r;
}

/* var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None) */
static PyObject *call_moment_mean(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kw, bool is_std) {
    static const char *const names[] = {"input", "dim", "unbiased", "keepdim", "correction"};
    const char *fn = is_std ? "std_mean" : "var_mean";
    PyObject *a[5] = {0};
    ts_dims d;
    bool given, unbiased, keepdim;
    double correction;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 5, 0, a) < 0) return NULL;
    if (a[1] && PyBool_Check(a[1])) a[2] = a[1], a[1] = NULL; /* var_mean(x, unbiased) */
    if (opt_dims(a[1], &d, &given, fn) < 0 ||
        tsp_bool_arg(a[2], true, &unbiased, fn, "unbiased") < 0 ||
        tsp_bool_arg(a[3], false, &keepdim, fn, "keepdim") < 0 ||
        tsp_double_arg(a[4], unbiased ? 1 : 0, &correction, fn, "correction") < 0 || tsp_enter())
        return NULL;
    ts_tensor *m = NULL, *v;
    if (is_std)
        TSP_NOGIL(v = ts_std_mean(T(a[0]), d, keepdim, correction, &m));
    else
        TSP_NOGIL(v = ts_var_mean(T(a[0]), d, keepdim, correction, &m));
    return pair(v, m, NULL);
}
TSP_METHOD_AND_FUNCTION(var_mean, call_moment_mean, false)
TSP_METHOD_AND_FUNCTION(std_mean, call_moment_mean, true)

static PyStructSequence_Field aminmax_fields[] = {
    {"min", "the minimum"},
    {"max", "the maximum"},
    {NULL, NULL},
};
static PyStructSequence_Desc aminmax_desc = {"tessera.return_types.aminmax", NULL, aminmax_fields,
                                             2};
static PyTypeObject *aminmax_type;

/* aminmax(input, *, dim=None, keepdim=False) */
static PyObject *call_aminmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "dim", "keepdim"};
    const char *fn = "aminmax";
    PyObject *a[3] = {0};
    int64_t dim = 0;
    bool keepdim;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 0, a) < 0 ||
        (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &dim, fn, "dim") < 0) ||
        tsp_bool_arg(a[2], false, &keepdim, fn, "keepdim") < 0 || tsp_enter())
        return NULL;
    const bool hd = a[1] && a[1] != Py_None;
    ts_tensor *hi = NULL, *lo;
    TSP_NOGIL(lo = ts_aminmax(T(a[0]), hd, (int)dim, keepdim, &hi));
    return pair(lo, hi, aminmax_type);
}
TSP_METHOD_AND_FUNCTION(aminmax, call_aminmax, NULL)

/* count_nonzero(input, dim=None) */
static PyObject *call_count_nonzero(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kw, void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "dim"};
    const char *fn = "count_nonzero";
    PyObject *a[2] = {0};
    ts_dims d;
    bool given;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 2, 0, a) < 0 ||
        opt_dims(a[1], &d, &given, fn) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_count_nonzero(T(a[0]), d));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(count_nonzero, call_count_nonzero, NULL)

/* ------------------------------------------------------------------ distances */
/* cdist(x1, x2, p=2.0, compute_mode=None): compute_mode is accepted and ignored (the direct
 * differences always: the most accurate of PyTorch's two ways) */
static PyObject *f_cdist(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"x1", "x2", "p", "compute_mode"};
    const char *fn = "cdist";
    PyObject *a[4] = {0};
    ts_tensor *x1, *x2, *r;
    double p;
    if (tsp_parse(args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        !(x1 = tsp_tensor_arg(a[0], fn, "x1")) || !(x2 = tsp_tensor_arg(a[1], fn, "x2")) ||
        ord_arg(a[2], 2.0, &p, fn, "p") < 0)
        return NULL;
    if (a[3] && a[3] != Py_None && !PyUnicode_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError, "cdist(): compute_mode must be a string or None");
        return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_cdist(x1, x2, p));
    return tsp_wrap(r);
}

/* pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False) */
static PyObject *f_pairwise_distance(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"x1", "x2", "p", "eps", "keepdim"};
    const char *fn = "pairwise_distance";
    PyObject *a[5] = {0};
    ts_tensor *x1, *x2, *r;
    double p, eps;
    bool keepdim;
    if (tsp_parse(args, nargs, kw, fn, names, 5, 2, a) < 0 ||
        !(x1 = tsp_tensor_arg(a[0], fn, "x1")) || !(x2 = tsp_tensor_arg(a[1], fn, "x2")) ||
        ord_arg(a[2], 2.0, &p, fn, "p") < 0 || tsp_double_arg(a[3], 1e-6, &eps, fn, "eps") < 0 ||
        tsp_bool_arg(a[4], false, &keepdim, fn, "keepdim") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_pairwise_distance(x1, x2, p, eps, keepdim));
    return tsp_wrap(r);
}

/* cosine_similarity(x1, x2, dim=1, eps=1e-8) */
static PyObject *f_cosine_similarity(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"x1", "x2", "dim", "eps"};
    const char *fn = "cosine_similarity";
    PyObject *a[4] = {0};
    ts_tensor *x1, *x2, *r;
    int64_t dim = 1;
    double eps;
    if (tsp_parse(args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        !(x1 = tsp_tensor_arg(a[0], fn, "x1")) || !(x2 = tsp_tensor_arg(a[1], fn, "x2")) ||
        (a[2] && tsp_int_arg(a[2], &dim, fn, "dim") < 0) ||
        tsp_double_arg(a[3], 1e-8, &eps, fn, "eps") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_cosine_similarity(x1, x2, (int)dim, eps));
    return tsp_wrap(r);
}

/* ------------------------------------------------------------------ mT, mH, H */
static PyObject *get_mT(PyObject *self, void *unused) {
    (void)unused;
    const int nd = ts_ndim(T(self));
    if (nd < 2) {
        PyErr_Format(PyExc_RuntimeError,
                     "tensor.mT is only supported on matrices or batches of matrices. Got %d-D "
                     "tensor.",
                     nd);
        return NULL;
    }
    ts_tensor *r;
    TSP_NOGIL(r = ts_transpose(T(self), -2, -1));
    return tsp_wrap(r);
}
/* the conjugate transposes: conj (a real tensor as it is) then the transpose */
static ts_tensor *adjoint(ts_tensor *t, bool last2) {
    ts_scope_begin();
    ts_tensor *c = ts_conj(t), *r = !c ? NULL : last2 ? ts_transpose(c, -2, -1) : ts_t(c);
    r = r ? ts_keep(r) : NULL;
    ts_scope_end();
    return r;
}
static ts_tensor *adjoint_t(ts_tensor *t) { return adjoint(t, false); }
static ts_tensor *adjoint_mt(ts_tensor *t) { return adjoint(t, true); }
static PyObject *get_mH(PyObject *self, void *unused) {
    (void)unused;
    if (ts_ndim(T(self)) < 2) return get_mT(self, NULL); /* its error */
    return tsp_unary(adjoint_mt, T(self));
}
static PyObject *get_H(PyObject *self, void *unused) {
    (void)unused;
    const int nd = ts_ndim(T(self));
    if (nd != 2 && nd != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "tensor.H is only supported on matrices (2-D tensors). Got %d-D tensor.", nd);
        return NULL;
    }
    return tsp_unary(adjoint_t, T(self));
}

#define M_ADDX(name, an, bn)                                                                       \
    {#name, FN(m_##name), FAST, #name "(" an ", " bn ", *, beta=1, alpha=1)"},                     \
        {#name "_", FN(m_##name##_), FAST, #name "_(" an ", " bn ", *, beta=1, alpha=1)"},
#define F_ADDX(name, an, bn)    {#name, FN(f_##name), FAST, NULL},
#define M_BIN(name, other, cfn) {#name, FN(m_##name), FAST, #name "(" other ")"},
#define F_BIN(name, other, cfn) {#name, FN(f_##name), FAST, NULL},
PyMethodDef tsp_tensor_linalg_methods[] = {
    ADDX_LIST(M_ADDX) BIN_LIST(M_BIN){"trace", (PyCFunction)m_trace, METH_NOARGS, "trace()"},
    {"norm", FN(m_norm), FAST, "norm(p='fro', dim=None, keepdim=False, dtype=None)"},
    {"aminmax", FN(m_aminmax), FAST, "aminmax(*, dim=None, keepdim=False)"},
    {"count_nonzero", FN(m_count_nonzero), FAST, "count_nonzero(dim=None)"},
    {"var_mean", FN(m_var_mean), FAST, NULL},
    {"std_mean", FN(m_std_mean), FAST, NULL},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_linalg_functions[] = {
    ADDX_LIST(F_ADDX) BIN_LIST(F_BIN){"trace", (PyCFunction)f_trace, METH_O, NULL},
    {"tensordot", FN(f_tensordot), FAST, "tensordot(a, b, dims=2)"},
    {"norm", FN(f_norm), FAST, NULL},
    {"aminmax", FN(f_aminmax), FAST, NULL},
    {"count_nonzero", FN(f_count_nonzero), FAST, NULL},
    {"var_mean", FN(f_var_mean), FAST, NULL},
    {"std_mean", FN(f_std_mean), FAST, NULL},
    {"cdist", FN(f_cdist), FAST, "cdist(x1, x2, p=2.0, compute_mode=None)"},
    {"pairwise_distance", FN(f_pairwise_distance), FAST, NULL},
    {"cosine_similarity", FN(f_cosine_similarity), FAST, NULL},
    {"_linalg_vector_norm", FN(f__linalg_vector_norm), FAST, NULL},
    {"_linalg_matrix_norm", FN(f__linalg_matrix_norm), FAST, NULL},
    {"_linalg_multi_dot", (PyCFunction)f__linalg_multi_dot, METH_O, NULL},
    {"_einsum", (PyCFunction)f__einsum, METH_VARARGS, "_einsum(equation, operands)"},
    {"_normalize", FN(f__normalize), FAST, NULL},
    {NULL, NULL, 0, NULL},
};
PyGetSetDef tsp_tensor_linalg_getset[] = {
    {"mT", get_mT, NULL, "the last two dims transposed", NULL},
    {"mH", get_mH, NULL, "the conjugate transpose of the last two dims", NULL},
    {"H", get_H, NULL, "the conjugate transpose of a matrix", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

int tsp_init_tensor_linalg(void) {
    aminmax_type = PyStructSequence_NewType(&aminmax_desc);
    return aminmax_type ? 0 : -1;
}
