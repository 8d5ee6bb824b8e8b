/* tensor_statistics.c — statistics, draws by weight and coordinate tables as tessera.* functions
 * and Tensor methods (issue 76): cov / corrcoef / cross (src/ops/statistics.c), multinomial
 * (src/ops/sampling.c), tril_indices / triu_indices / meshgrid (src/ops/coordinates.c). One C call
 * each. */
#include <stdlib.h>

#include "tensor_impl.h"

#define T TSP_T

static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

/* an optional tensor argument (None or absent: NULL); -1 with the exception set */
static int opt_tensor(PyObject *o, ts_tensor **out, const char *fn, const char *arg) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    return (*out = tsp_tensor_arg(o, fn, arg)) ? 0 : -1;
}

/* cov(input, *, correction=1, fweights=None, aweights=None) */
static PyObject *call_cov(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                          const char *fn) {
    const char *names[] = {"input", "correction", "fweights", "aweights"};
    PyObject *a[4] = {0};
    int64_t corr = 1;
    ts_tensor *fw, *aw, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 0, a) < 0 ||
        (a[1] && tsp_int_arg(a[1], &corr, fn, "correction") < 0) ||
        opt_tensor(a[2], &fw, fn, "fweights") < 0 || opt_tensor(a[3], &aw, fn, "aweights") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_cov(t, corr, fw, aw));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(cov, call_cov, "cov")

static PyObject *call_corrcoef(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const char *fn) {
    const char *names[] = {"input"};
    PyObject *a[1] = {0};
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 1, 0, a) < 0 || tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_corrcoef(t));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(corrcoef, call_corrcoef, "corrcoef")

/* cross(input, other, dim=None) */
static PyObject *call_cross(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    const char *names[] = {"input", "other", "dim"};
    PyObject *a[3] = {0};
    int64_t dim = -1;
    ts_tensor *other, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 1, a) < 0 ||
        !(other = tsp_tensor_arg(a[1], fn, "other")) ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &dim, fn, "dim") < 0) || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    const bool has_dim = a[2] && a[2] != Py_None;
    TSP_NOGIL(r = ts_cross(t, other, has_dim, (int)dim));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(cross, call_cross, "cross")

/* multinomial(input, num_samples, replacement=False, *, generator=None, out=None) */
static PyObject *call_multinomial(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kw, const char *fn) {
    const char *names[] = {"input", "num_samples", "replacement", "generator", "out"};
    PyObject *a[5] = {0};
    int64_t k;
    bool repl;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 5, 1, a) < 0 ||
        tsp_int_arg(a[1], &k, fn, "num_samples") < 0 ||
        tsp_bool_arg(a[2], false, &repl, fn, "replacement") < 0 || tsp_enter())
        return NULL;
    if (a[4] && a[4] != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s(): out= is not supported", fn);
        return NULL;
    }
    ts_tensor *t = input_of(self, a[0]);
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[3], fn, &gs) < 0) return NULL;
    TSP_NOGIL(r = ts_multinomial(t, k, repl));
    return tsp_generator_finish(&gs, tsp_wrap(r));
}
TSP_METHOD_AND_FUNCTION(multinomial, call_multinomial, "multinomial")

/* tril_indices / triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None) */
static PyObject *tri_indices(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                             ts_tensor *(*f)(int64_t, int64_t, int64_t, ts_opts)) {
    PARSE(fn, 2, "row", "col", "offset", "dtype", "device", "layout");
    int64_t row, col, offset = 0;
    ts_opts o = {0};
    ts_tensor *r;
    if (tsp_int_arg(a[0], &row, fn, "row") < 0 || tsp_int_arg(a[1], &col, fn, "col") < 0 ||
        (a[2] && tsp_int_arg(a[2], &offset, fn, "offset") < 0) ||
        tsp_opts_args(a[3], a[4], NULL, NULL, &o, fn) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = f(row, col, offset, o));
    return tsp_wrap(r);
}
static PyObject *f_tril_indices SIG {
    (void)mod;
    return tri_indices(args, nargs, kw, "tril_indices", ts_tril_indices);
}
static PyObject *f_triu_indices SIG {
    (void)mod;
    return tri_indices(args, nargs, kw, "triu_indices", ts_triu_indices);
}

/* meshgrid(*tensors, indexing=None): the tensors as arguments or one sequence */
static PyObject *f_meshgrid(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    const char *fn = "meshgrid", *indexing = NULL;
    PyObject *ix = NULL;
    if (kw) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(kw, &pos, &k, &v)) {
            if (!PyUnicode_Check(k) || PyUnicode_CompareWithASCIIString(k, "indexing")) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'", fn,
                             k);
                return NULL;
            }
            ix = v;
        }
    }
    if (tsp_str_arg(ix, NULL, &indexing, fn, "indexing") < 0) return NULL;
    PyObject *src = args;
    if (PyTuple_GET_SIZE(args) == 1 && !tsp_tensor_of(PyTuple_GET_ITEM(args, 0)))
        src = PyTuple_GET_ITEM(args, 0);
    PyObject *seq = PySequence_Fast(src, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): expected Tensors or a sequence of Tensors, not %.100s",
                     fn, Py_TYPE(src)->tp_name);
        return NULL;
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TS_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s(): at most %d tensors, got %zd", fn, TS_MAX_DIMS, n);
        return NULL;
    }
    ts_tensor *ts[TS_MAX_DIMS], *out[TS_MAX_DIMS] = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!(ts[i] = tsp_tensor_of(o))) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): expected Tensor as element %zd in argument 0, but got %.100s", fn,
                         i, Py_TYPE(o)->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    }
    int r;
    if (tsp_enter()) return Py_DECREF(seq), NULL;
    TSP_NOGIL(r = ts_meshgrid(ts, (int)n, indexing, out, TS_MAX_DIMS));
    Py_DECREF(seq);
    if (r < 0) {
        for (int i = 0; i < (int)n; i++) tsp_drop(out[i]);
        return tsp_raise_pending();
    }
    return tsp_tuple_of(out, r);
}

/* a Tensor or a number argument: *t the tensor (NULL for a number, whose value goes to *v);
 * -1 with a TypeError naming fn and arg for anything else */
static int tensor_or_number(PyObject *o, ts_tensor **t, double *v, const char *fn,
                            const char *arg) {
    *t = tsp_tensor_of(o);
    if (*t) return 0;
    const int k = tsp_number(o, v);
    if (k == 0)
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Tensor or float, not %.100s", fn,
                     arg, Py_TYPE(o)->tp_name);
    return k == 1 ? 0 : -1;
}

/* normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
 * device=None, pin_memory=False, requires_grad=False): a tensor mean and/or std (ts_normal), or
 * numbers with size (ts_normal_ on a new tensor) */
static PyObject *f_normal SIG {
    (void)mod;
    const char *fn = "normal";
    PARSE(fn, 1, "mean", "std", "size", "generator", "out", "dtype", "layout", "device",
          "pin_memory", "requires_grad");
    ts_tensor *mean, *std = NULL, *r;
    double mean_s = 0, std_s = 1;
    if (tensor_or_number(a[0], &mean, &mean_s, fn, "mean") < 0 ||
        (a[1] && tensor_or_number(a[1], &std, &std_s, fn, "std") < 0))
        return NULL;
    if (a[4] && a[4] != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s(): out= is not supported", fn);
        return NULL;
    }
    const bool sized = a[2] && a[2] != Py_None;
    ts_opts o = {0};
    ts_shape s = {0};
    if (!mean && !std) {
        if (!sized) {
            PyErr_Format(PyExc_TypeError, "%s(): with a float mean and std, size is required", fn);
            return NULL;
        }
        if (tsp_shape_arg(a[2], &s, fn, "size") < 0 ||
            tsp_opts_args(a[5], a[7], a[9], a[8], &o, fn) < 0)
            return NULL;
        if (!(std_s >= 0)) {
            PyErr_Format(PyExc_RuntimeError, "normal expects std >= 0.0, but found std %g", std_s);
            return NULL;
        }
    } else if (sized) {
        PyErr_Format(PyExc_TypeError, "%s(): size is only for a float mean and std", fn);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    tsp_generator_scope gs;
    if (tsp_generator_begin(a[3], fn, &gs) < 0) return NULL;
    if (mean || std) {
        TSP_NOGIL(r = ts_normal(mean, mean_s, std, std_s));
    } else {
        const bool grad = o.requires_grad;
        o.requires_grad = false;
        TSP_NOGIL(r = ts_empty(s, o));
        if (r && !ts_normal_(r, mean_s, std_s)) {
            ts_release(r);
            r = NULL;
        }
        if (r && grad) ts_set_requires_grad(r, true);
    }
    return tsp_generator_finish(&gs, tsp_wrap(r));
}

/* dist(input, other, p=2) */
static PyObject *call_dist(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    const char *names[] = {"input", "other", "p"};
    PyObject *a[3] = {0};
    double p = 2;
    ts_tensor *other, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 1, a) < 0 ||
        !(other = tsp_tensor_arg(a[1], fn, "other")) || tsp_scalar_arg(a[2], 2, &p, fn, "p") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_dist(t, other, p));
    return tsp_wrap(r);
}
static PyObject *f_dist SIG {
    (void)mod;
    return call_dist(NULL, args, nargs, kw, "dist");
}

/* renorm(input, p, dim, maxnorm) */
static PyObject *f_renorm SIG {
    (void)mod;
    const char *fn = "renorm";
    PARSE(fn, 4, "input", "p", "dim", "maxnorm");
    ts_tensor *t = TARG(0, fn), *r;
    double p, maxnorm;
    int64_t dim;
    if (!t || tsp_scalar_arg(a[1], 0, &p, fn, "p") < 0 || tsp_int_arg(a[2], &dim, fn, "dim") < 0 ||
        tsp_scalar_arg(a[3], 0, &maxnorm, fn, "maxnorm") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_renorm(t, p, (int)dim, maxnorm));
    return tsp_wrap(r);
}

/* trapezoid / cumulative_trapezoid(y, x=None, *, dx=None, dim=-1): x a Tensor of sample points or
 * a number (the spacing, as dx) */
static PyObject *integrate(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                           ts_tensor *(*f)(ts_tensor *, ts_tensor *, double, int)) {
    PARSE(fn, 1, "y", "x", "dx", "dim");
    ts_tensor *y = TARG(0, fn), *x = NULL, *r;
    double dx = 1;
    int64_t dim = -1;
    if (!y) return NULL;
    const bool has_x = a[1] && a[1] != Py_None, has_dx = a[2] && a[2] != Py_None;
    if (has_x && has_dx) {
        PyErr_Format(PyExc_TypeError, "%s(): pass x or dx, not both", fn);
        return NULL;
    }
    if ((has_x && tensor_or_number(a[1], &x, &dx, fn, "x") < 0) ||
        tsp_double_arg(a[2], dx, &dx, fn, "dx") < 0 ||
        (a[3] && tsp_int_arg(a[3], &dim, fn, "dim") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = f(y, x, dx, (int)dim));
    return tsp_wrap(r);
}
static PyObject *f_trapezoid SIG {
    (void)mod;
    return integrate(args, nargs, kw, "trapezoid", ts_trapezoid);
}
static PyObject *f_cumulative_trapezoid SIG {
    (void)mod;
    return integrate(args, nargs, kw, "cumulative_trapezoid", ts_cumulative_trapezoid);
}

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},

#define STAT_OPS(X)                                                                                \
    X(cov, "cov(input, *, correction=1, fweights=None, aweights=None)")                            \
    X(corrcoef, "corrcoef(input)")                                                                 \
    X(cross, "cross(input, other, dim=None)")                                                      \
    X(multinomial, "multinomial(input, num_samples, replacement=False, *, generator=None)")

PyMethodDef tsp_tensor_statistics_methods[] = {STAT_OPS(BOTH){NULL, NULL, 0, NULL}};
PyMethodDef tsp_tensor_statistics_functions[] = {
    STAT_OPS(FUNC){"tril_indices", FN(f_tril_indices), FAST,
                   "tril_indices(row, col, offset=0, *, dtype=None, device=None)"},
    {"triu_indices", FN(f_triu_indices), FAST,
     "triu_indices(row, col, offset=0, *, dtype=None, device=None)"},
    {"normal", FN(f_normal), FAST,
     "normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, "
     "requires_grad=False)"},
    {"dist", FN(f_dist), FAST, "dist(input, other, p=2)"},
    {"renorm", FN(f_renorm), FAST, "renorm(input, p, dim, maxnorm)"},
    {"trapezoid", FN(f_trapezoid), FAST, "trapezoid(y, x=None, *, dx=None, dim=-1)"},
    {"cumulative_trapezoid", FN(f_cumulative_trapezoid), FAST,
     "cumulative_trapezoid(y, x=None, *, dx=None, dim=-1)"},
    {"meshgrid", FN(f_meshgrid), METH_VARARGS | METH_KEYWORDS,
     "meshgrid(*tensors, indexing=None): the grids of 0-/1-D tensors ('ij' or 'xy')"},
    {NULL, NULL, 0, NULL}};
