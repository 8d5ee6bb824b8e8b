/* tensor_numeric.c — issue 76's numeric forms as tessera._C functions, one C call each
 * (include/tessera/numeric.h): ctc_loss, histogram, histogramdd, pdist, gradient, frexp,
 * unravel_index, combinations. Arguments are taken in PyTorch's forms here; the C functions check
 * their values. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

/* an int, a sequence of ints or an integral tensor -> a PyMem array of *n int64 (PyMem_Free it);
 * -1 with the exception set */
static int int64_list(PyObject *o, int64_t **out, Py_ssize_t *n, const char *fn, const char *arg) {
    *out = NULL;
    ts_tensor *t = tsp_tensor_of(o);
    if (t) {
        if (ts_dtype_of(t) == TS_BOOL || ts_dtype_of(t) == TS_F16 || ts_dtype_of(t) == TS_BF16 ||
            ts_dtype_of(t) == TS_F32 || ts_dtype_of(t) == TS_F64) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s must be integral", fn, arg);
            return -1;
        }
        *n = (Py_ssize_t)ts_numel(t);
        if (!(*out = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof(int64_t)))) {
            PyErr_NoMemory();
            return -1;
        }
        ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(t, TS_I64), ts_cpu()));
        const ts_status st =
            c ? ts_copy_to_host(c, *out, (size_t)*n * sizeof(int64_t)) : ts_error();
        ts_release(c);
        if (st != TS_OK) {
            PyMem_Free(*out);
            *out = NULL;
            return tsp_check();
        }
        return 0;
    }
    if (PyIndex_Check(o)) {
        *n = 1;
        if (!(*out = PyMem_Malloc(sizeof(int64_t)))) return PyErr_NoMemory(), -1;
        return tsp_int_arg(o, *out, fn, arg);
    }
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be an int, a sequence of ints or "
                     "a Tensor, not %.100s",
                     fn, arg, Py_TYPE(o)->tp_name);
        return -1;
    }
    *n = PySequence_Fast_GET_SIZE(seq);
    if (!(*out = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof(int64_t)))) {
        Py_DECREF(seq);
        return PyErr_NoMemory(), -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++)
        if (tsp_int_arg(PySequence_Fast_GET_ITEM(seq, i), *out + i, fn, arg) < 0) {
            Py_DECREF(seq);
            PyMem_Free(*out);
            *out = NULL;
            return -1;
        }
    Py_DECREF(seq);
    return 0;
}

static int reduction_arg(PyObject *o, ts_reduction *r) {
    const char *s;
    if (tsp_str_arg(o, "mean", &s, "ctc_loss", "reduction") < 0) return -1;
    if (!strcmp(s, "mean"))
        *r = TS_REDUCTION_MEAN;
    else if (!strcmp(s, "sum"))
        *r = TS_REDUCTION_SUM;
    else if (!strcmp(s, "none"))
        *r = TS_REDUCTION_NONE;
    else
        return PyErr_Format(PyExc_ValueError, "%s is not a valid value for reduction", s), -1;
    return 0;
}

/* ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction='mean',
 * zero_infinity=False) */
static PyObject *f_ctc_loss SIG {
    (void)mod;
    PARSE("ctc_loss", 4, "log_probs", "targets", "input_lengths", "target_lengths", "blank",
          "reduction", "zero_infinity");
    ts_tensor *lp = TARG(0, "ctc_loss"), *tg = lp ? TARG(1, "ctc_loss") : NULL, *y;
    int64_t blank = 0, *il = NULL, *tl = NULL;
    Py_ssize_t nil = 0, ntl = 0;
    ts_reduction r;
    bool zi;
    if (!tg || (a[4] && tsp_int_arg(a[4], &blank, "ctc_loss", "blank") < 0) ||
        reduction_arg(a[5], &r) < 0 ||
        tsp_bool_arg(a[6], false, &zi, "ctc_loss", "zero_infinity") < 0)
        return NULL;
    if (int64_list(a[2], &il, &nil, "ctc_loss", "input_lengths") < 0) return NULL;
    if (int64_list(a[3], &tl, &ntl, "ctc_loss", "target_lengths") < 0) return PyMem_Free(il), NULL;
    if (nil != ntl) {
        PyMem_Free(il), PyMem_Free(tl);
        return PyErr_Format(PyExc_RuntimeError,
                            "ctc_loss: input_lengths (%zd) and target_lengths (%zd) must have "
                            "the same number of entries",
                            nil, ntl);
    }
    if (tsp_enter()) return PyMem_Free(il), PyMem_Free(tl), NULL;
    TSP_NOGIL(y = ts_ctc_loss(lp, tg, il, tl, (int64_t)nil, blank, r, zi));
    PyMem_Free(il), PyMem_Free(tl);
    return tsp_wrap(y);
}

/* histogram(input, bins=100, *, range=None, weight=None, density=False) -> (hist, bin_edges) */
static PyObject *f_histogram SIG {
    (void)mod;
    const char *fn = "histogram";
    PARSE("histogram", 1, "input", "bins", "range", "weight", "density");
    ts_tensor *x = TARG(0, fn), *edges = NULL, *w = NULL, *r[2] = {0};
    int64_t bins = 100;
    double rg[2] = {0, 0};
    bool density;
    if (!x) return NULL;
    if (a[1] && (edges = tsp_tensor_of(a[1])) == NULL && tsp_int_arg(a[1], &bins, fn, "bins") < 0)
        return NULL;
    if (a[2] && a[2] != Py_None) {
        Py_ssize_t n;
        double *v = tsp_doubles(a[2], &n, "histogram(): range");
        if (!v) return NULL;
        if (n != 2) {
            PyMem_Free(v);
            return PyErr_Format(PyExc_RuntimeError, "histogram(): range must have 2 values");
        }
        rg[0] = v[0], rg[1] = v[1];
        PyMem_Free(v);
    }
    if ((a[3] && a[3] != Py_None && !(w = tsp_tensor_arg(a[3], fn, "weight"))) ||
        tsp_bool_arg(a[4], false, &density, fn, "density") < 0 || tsp_enter())
        return NULL;
    const bool has_range = a[2] && a[2] != Py_None;
    TSP_NOGIL(r[0] = ts_histogram(x, bins, edges, has_range, rg[0], rg[1], w, density, &r[1]));
    return tsp_results(fn, r, 2);
}

/* histogramdd(input, bins, *, range=None, weight=None, density=False) -> (hist, [edges]) */
static PyObject *f_histogramdd SIG {
    (void)mod;
    const char *fn = "histogramdd";
    PARSE("histogramdd", 2, "input", "bins", "range", "weight", "density");
    ts_tensor *x = TARG(0, fn), *w = NULL, *edges[TS_MAX_DIMS] = {0}, *eo[TS_MAX_DIMS] = {0};
    int64_t bins[TS_MAX_DIMS];
    double *rg = NULL;
    bool density, any_edges = false;
    if (!x) return NULL;
    const int nd = ts_ndim(x);
    const int64_t D = nd ? ts_size(x, -1) : 0;
    if (nd < 1 || D > TS_MAX_DIMS) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch.histogramdd: input tensor should have at least 1 "
                     "dimension and at most %d columns",
                     TS_MAX_DIMS);
        return NULL;
    }
    if (PyIndex_Check(a[1]) && !tsp_tensor_of(a[1])) {
        if (tsp_int_arg(a[1], &bins[0], fn, "bins") < 0) return NULL;
        for (int d = 1; d < D; d++) bins[d] = bins[0];
    } else {
        PyObject *seq = PySequence_Fast(a[1], "histogramdd(): bins must be an int or a sequence");
        if (!seq) return NULL;
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n != D) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_RuntimeError,
                                "torch.histogramdd: expected %lld sequences of bin edges for each "
                                "dimension of input, but got %zd",
                                (long long)D, n);
        }
        for (Py_ssize_t d = 0; d < n; d++) {
            PyObject *b = PySequence_Fast_GET_ITEM(seq, d);
            if ((edges[d] = tsp_tensor_of(b)))
                any_edges = true, bins[d] = 0;
            else if (tsp_int_arg(b, &bins[d], fn, "bins") < 0)
                return Py_DECREF(seq), NULL;
        }
        Py_DECREF(seq);
    }
    if (a[2] && a[2] != Py_None) {
        Py_ssize_t n;
        if (!(rg = tsp_doubles(a[2], &n, "histogramdd(): range"))) return NULL;
        if (n != 2 * D) {
            PyMem_Free(rg);
            return PyErr_Format(PyExc_RuntimeError,
                                "torch.histogramdd: for a %lld-dimensional histogram range should "
                                "have %lld elements, but got %zd",
                                (long long)D, 2 * (long long)D, n);
        }
    }
    if ((a[3] && a[3] != Py_None && !(w = tsp_tensor_arg(a[3], fn, "weight"))) ||
        tsp_bool_arg(a[4], false, &density, fn, "density") < 0 || tsp_enter())
        return PyMem_Free(rg), NULL;
    ts_tensor *h;
    TSP_NOGIL(h = ts_histogramdd(x, bins, any_edges ? edges : NULL, rg, w, density, eo));
    PyMem_Free(rg);
    if (!h) return tsp_raise_pending();
    PyObject *hist = tsp_wrap(h), *list = hist ? PyList_New(D) : NULL;
    for (int d = 0; d < D; d++) {
        PyObject *e = list ? tsp_wrap(eo[d]) : (tsp_drop(eo[d]), NULL);
        if (list && !e) Py_CLEAR(list);
        if (list) PyList_SET_ITEM(list, d, e);
    }
    if (!list) return Py_XDECREF(hist), NULL;
    PyObject *res = PyTuple_Pack(2, hist, list);
    Py_DECREF(hist), Py_DECREF(list);
    return res;
}

/* pdist(input, p=2) */
static PyObject *f_pdist SIG {
    (void)mod;
    PARSE("pdist", 1, "input", "p");
    ts_tensor *x = TARG(0, "pdist"), *y;
    double p;
    if (!x || tsp_double_arg(a[1], 2.0, &p, "pdist", "p") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(y = ts_pdist(x, p));
    return tsp_wrap(y);
}

/* gradient(input, *, spacing=1, dim=None, edge_order=1) -> tuple of tensors */
static PyObject *f_gradient SIG {
    (void)mod;
    const char *fn = "gradient";
    PARSE("gradient", 1, "input", "spacing", "dim", "edge_order");
    ts_tensor *x = TARG(0, fn), *coords[TS_MAX_DIMS] = {0}, *out[TS_MAX_DIMS] = {0};
    int64_t order = 1;
    int dims[TS_MAX_DIMS], nd;
    double h[TS_MAX_DIMS];
    bool any_coords = false;
    if (!x || (a[3] && tsp_int_arg(a[3], &order, fn, "edge_order") < 0)) return NULL;
    if (a[2] && a[2] != Py_None) {
        ts_dims dd;
        if (tsp_dims_arg(a[2], &dd, fn, "dim") < 0) return NULL;
        nd = dd.n;
        for (int i = 0; i < nd; i++) dims[i] = dd.d[i];
    } else {
        nd = ts_ndim(x);
        for (int i = 0; i < nd; i++) dims[i] = i;
    }
    PyObject *sp = a[1] && a[1] != Py_None ? a[1] : NULL;
    double v;
    int isnum = sp ? tsp_number(sp, &v) : 1;
    if (!sp) v = 1.0;
    if (isnum < 0) return NULL;
    ts_tensor *st = sp ? tsp_tensor_of(sp) : NULL;
    if (st && ts_ndim(st) == 0) isnum = 1, v = ts_item(st);
    if (isnum) {
        for (int i = 0; i < nd; i++) h[i] = v;
    } else {
        PyObject *seq = PySequence_Fast(sp, "gradient(): spacing must be a number, a list of "
                                            "numbers or a list of tensors");
        if (!seq) return NULL;
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n != nd) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_RuntimeError,
                                "torch.gradient expected spacing to be unspecified, a scalar or "
                                "it's spacing and dim arguments to have the same length, but got "
                                "a spacing argument of length %zd and a dim argument of length %d.",
                                n, nd);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
            ts_tensor *c = tsp_tensor_of(e);
            if (c && ts_ndim(c) == 0)
                h[i] = ts_item(c);
            else if (c)
                coords[i] = c, any_coords = true, h[i] = 1.0;
            else if (tsp_double_arg(e, 1.0, &h[i], fn, "spacing") < 0)
                return Py_DECREF(seq), NULL;
        }
        Py_DECREF(seq);
    }
    if (tsp_enter()) return NULL;
    ts_status s;
    TSP_NOGIL(s = ts_gradient(x, dims, nd, h, any_coords ? coords : NULL, (int)order, out));
    if (s != TS_OK) return tsp_raise_pending();
    return tsp_tuple_of(out, nd);
}

/* frexp(input) -> (mantissa, exponent) */
static PyObject *f_frexp SIG {
    (void)mod;
    PARSE("frexp", 1, "input", "out");
    ts_tensor *x = TARG(0, "frexp"), *r[2] = {0};
    if (!x || tsp_enter()) return NULL;
    if (a[1] && a[1] != Py_None)
        return PyErr_Format(PyExc_TypeError, "frexp(): out= is not supported");
    TSP_NOGIL(ts_frexp(x, &r[0], &r[1]));
    return tsp_results("frexp", r, 2);
}

/* unravel_index(indices, shape) -> tuple of int64 tensors */
static PyObject *f_unravel_index SIG {
    (void)mod;
    const char *fn = "unravel_index";
    PARSE("unravel_index", 2, "indices", "shape");
    ts_tensor *idx = tsp_tensor_of(a[0]), *own = NULL, *out[TS_MAX_DIMS * 2] = {0};
    int64_t *shape = NULL;
    Py_ssize_t n;
    if (!idx) { /* a Python int or a list of ints */
        int64_t *v;
        Py_ssize_t k;
        if (int64_list(a[0], &v, &k, fn, "indices") < 0) return NULL;
        own = ts_tensor_i64(PyIndex_Check(a[0]) ? TS_SHAPE() : TS_SHAPE(k), v,
                            (ts_opts){.dtype = TS_I64});
        PyMem_Free(v);
        if (!(idx = own)) return tsp_raise_pending();
    }
    if (int64_list(a[1], &shape, &n, fn, "shape") < 0) return ts_release(own), NULL;
    if (n > TS_MAX_DIMS * 2) {
        PyMem_Free(shape), ts_release(own);
        return PyErr_Format(PyExc_RuntimeError, "unravel_index: at most %d dims", TS_MAX_DIMS * 2);
    }
    if (tsp_enter()) return PyMem_Free(shape), ts_release(own), NULL;
    ts_status s;
    TSP_NOGIL(s = ts_unravel_index(idx, shape, (int)n, out));
    PyMem_Free(shape), ts_release(own);
    if (s != TS_OK) return tsp_raise_pending();
    return tsp_tuple_of(out, (int)n);
}

/* combinations(input, r=2, with_replacement=False) */
static PyObject *f_combinations SIG {
    (void)mod;
    const char *fn = "combinations";
    PARSE("combinations", 1, "input", "r", "with_replacement");
    ts_tensor *x = TARG(0, fn), *y;
    int64_t r = 2;
    bool wr;
    if (!x || (a[1] && tsp_int_arg(a[1], &r, fn, "r") < 0) ||
        tsp_bool_arg(a[2], false, &wr, fn, "with_replacement") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(y = ts_combinations(x, r, wr));
    return tsp_wrap(y);
}

PyMethodDef tsp_tensor_numeric_functions[] = {
    {"ctc_loss", FN(f_ctc_loss), FAST,
     "ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction='mean', "
     "zero_infinity=False)"},
    {"histogram", FN(f_histogram), FAST,
     "histogram(input, bins=100, *, range=None, weight=None, density=False)"},
    {"histogramdd", FN(f_histogramdd), FAST,
     "histogramdd(input, bins, *, range=None, weight=None, density=False)"},
    {"pdist", FN(f_pdist), FAST, "pdist(input, p=2)"},
    {"gradient", FN(f_gradient), FAST, "gradient(input, *, spacing=1, dim=None, edge_order=1)"},
    {"frexp", FN(f_frexp), FAST, "frexp(input) -> (mantissa, exponent)"},
    {"unravel_index", FN(f_unravel_index), FAST, "unravel_index(indices, shape)"},
    {"combinations", FN(f_combinations), FAST, "combinations(input, r=2, with_replacement=False)"},
    {NULL, NULL, 0, NULL}};
