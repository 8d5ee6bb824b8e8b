/* tensor_rearrange.c — the rearranging shape forms as Tensor methods and tessera.* functions
 * (src/ops/rearrange.c, diagonal.c, repeat.c, join.c's splits): flip / fliplr / flipud / rot90 /
 * roll, tril / triu (+ in place), diagonal / diag / diag_embed / diagflat, repeat_interleave,
 * Tensor.unfold, movedim / moveaxis / swapdims, tensor_split / hsplit / vsplit / dsplit /
 * split_with_sizes, block_diag. One C call each. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

#define T TSP_T

/* ------------------------------------------------------------------ helpers */
/* ints: one int, a sequence of ints or an integer tensor (its values) -> v[0..*n), at most max */
static int int_list(PyObject *o, int64_t *v, int max, int *n, const char *fn, const char *arg) {
    if (tsp_tensor_of(o)) {
        PyObject *l = PyObject_CallMethod(o, "tolist", NULL);
        if (!l) return -1;
        int r = PyLong_Check(l) ? (*n = 1, tsp_int_arg(l, v, fn, arg))
                                : int_list(l, v, max, n, fn, arg);
        Py_DECREF(l);
        return r;
    }
    if (PyIndex_Check(o)) return *n = 1, tsp_int_arg(o, v, fn, arg);
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument '%s' must be an int or a tuple of ints, not %.100s", fn, arg,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    int r = 0;
    if (k > max) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' has too many entries (%zd)", fn, arg,
                     k);
        r = -1;
    }
    for (Py_ssize_t i = 0; r == 0 && i < k; i++)
        r = tsp_int_arg(PySequence_Fast_GET_ITEM(seq, i), &v[i], fn, arg);
    *n = (int)k;
    Py_DECREF(seq);
    return r;
}

static int dims_of(PyObject *o, ts_dims *d, const char *fn, const char *arg) {
    int64_t v[TS_MAX_DIMS];
    int n = 0;
    if (int_list(o, v, TS_MAX_DIMS, &n, fn, arg) < 0) return -1;
    d->n = n;
    for (int i = 0; i < n; i++) d->d[i] = (int)v[i];
    return 0;
}

static int int_or(PyObject *o, int64_t dflt, int64_t *v, const char *fn, const char *arg) {
    *v = dflt;
    return o && o != Py_None ? tsp_int_arg(o, v, fn, arg) : 0;
}

static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

/* ------------------------------------------------------------------ flip, rot90, roll */
static PyObject *call_flip(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const void *unused) {
    (void)unused;
    static const char *const names[] = {"input", "dims"};
    PyObject *a[2] = {0};
    ts_dims d;
    ts_tensor *r;
    if (self && nargs > 1 && !kw) { /* x.flip(0, 1) */
        PyObject *tup = PyTuple_New(nargs);
        if (!tup) return NULL;
        for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
        int rc = dims_of(tup, &d, "flip", "dims");
        Py_DECREF(tup);
        if (rc < 0) return NULL;
    } else if (tsp_parse_input(self, args, nargs, kw, "flip", (const char **)names, 2, 1, a) < 0 ||
               dims_of(a[1], &d, "flip", "dims") < 0)
        return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *t = self ? T(self) : T(a[0]);
    TSP_NOGIL(r = ts_flip(t, d));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(flip, call_flip, NULL)
TSP_DEF_UNARY(fliplr, ts_fliplr)
TSP_DEF_UNARY(flipud, ts_flipud)

static PyObject *call_rot90(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const void *unused) {
    (void)unused;
    const char *names[] = {"input", "k", "dims"};
    PyObject *a[3] = {0};
    int64_t k, v[TS_MAX_DIMS] = {0, 1};
    int n = 2;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, "rot90", names, 3, 0, a) < 0 ||
        int_or(a[1], 1, &k, "rot90", "k") < 0 ||
        (a[2] && int_list(a[2], v, TS_MAX_DIMS, &n, "rot90", "dims") < 0))
        return NULL;
    if (n != 2) {
        PyErr_Format(tsp_error_type, "rot90: expected total rotation dims == 2, but got dims = %d",
                     n);
        return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_rot90(input_of(self, a[0]), k, (int)v[0], (int)v[1]));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(rot90, call_rot90, NULL)

static PyObject *call_roll(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const void *unused) {
    (void)unused;
    const char *names[] = {"input", "shifts", "dims"};
    PyObject *a[3] = {0};
    int64_t s[TS_MAX_DIMS];
    int ns = 0;
    ts_dims d = {0};
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, "roll", names, 3, 1, a) < 0 ||
        int_list(a[1], s, TS_MAX_DIMS, &ns, "roll", "shifts") < 0 ||
        (a[2] && a[2] != Py_None && dims_of(a[2], &d, "roll", "dims") < 0) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_roll(input_of(self, a[0]), s, ns, d));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(roll, call_roll, NULL)

/* ------------------------------------------------------------------ (input, int = 0) forms */
typedef struct int1_op {
    const char *name, *arg;
    ts_tensor *(*f)(ts_tensor *, int64_t);
    bool in_place;
} int1_op;

static PyObject *call_int1(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const int1_op *op) {
    const char *names[] = {"input", op->arg};
    PyObject *a[2] = {0};
    int64_t k;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, op->name, names, 2, 0, a) < 0 ||
        int_or(a[1], 0, &k, op->name, op->arg) < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = op->f(input_of(self, a[0]), k));
    return tsp_result(self, r, op->in_place);
}

/* m_NAME alone: the in-place forms are Tensor methods only */
#define METHOD_ONLY(name, call, extra)                                                             \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return call(self, a, n, kw, extra);                                                        \
    }

#define INT1_LIST(X)                                                                               \
    X(tril, "diagonal", ts_tril, false, TSP_METHOD_AND_FUNCTION)                                   \
    X(triu, "diagonal", ts_triu, false, TSP_METHOD_AND_FUNCTION)                                   \
    X(tril_, "diagonal", ts_tril_, true, METHOD_ONLY)                                              \
    X(triu_, "diagonal", ts_triu_, true, METHOD_ONLY)                                              \
    X(diag, "diagonal", ts_diag, false, TSP_METHOD_AND_FUNCTION)                                   \
    X(diagflat, "offset", ts_diagflat, false, TSP_METHOD_AND_FUNCTION)
#define DEF_INT1(name, arg, cfn, ip, how)                                                          \
    static const int1_op op_##name = {#name, arg, cfn, ip};                                        \
    how(name, call_int1, &op_##name)
INT1_LIST(DEF_INT1)

/* diagonal(input, offset=0, dim1=0, dim2=1) / diag_embed(input, offset=0, dim1=-2, dim2=-1) */
static PyObject *call_diag3(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const char *fn) {
    const char *names[] = {"input", "offset", "dim1", "dim2"};
    PyObject *a[4] = {0};
    const bool embed = fn[4] == '_';
    int64_t off, d1, d2;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 0, a) < 0 ||
        int_or(a[1], 0, &off, fn, "offset") < 0 ||
        int_or(a[2], embed ? -2 : 0, &d1, fn, "dim1") < 0 ||
        int_or(a[3], embed ? -1 : 1, &d2, fn, "dim2") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = embed ? ts_diag_embed(t, off, (int)d1, (int)d2)
                        : ts_diagonal(t, off, (int)d1, (int)d2));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(diagonal, call_diag3, "diagonal")
TSP_METHOD_AND_FUNCTION(diag_embed, call_diag3, "diag_embed")

/* ------------------------------------------------------------------ repeat_interleave, unfold */
static PyObject *call_repeat_interleave(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kw, const void *unused) {
    (void)unused;
    const char *fn = "repeat_interleave";
    const char *names[] = {"input", "repeats", "dim", "output_size"};
    PyObject *a[4] = {0};
    int64_t dim = 0, reps = 0;
    ts_tensor *r = NULL;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 0, a) < 0) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    const bool has_dim = a[2] && a[2] != Py_None;
    if ((has_dim && tsp_int_arg(a[2], &dim, fn, "dim") < 0)) return NULL;
    if (!a[1] || a[1] == Py_None) { /* torch.repeat_interleave(repeats) */
        if (tsp_enter()) return NULL;
        ts_opts o = {.dtype = TS_I64, .device = ts_device_of(t)};
        ts_scope_begin();
        ts_tensor *ar = ts_arange(0, (double)ts_numel(t), 1, o);
        r = ar ? ts_repeat_interleave_tensor(ar, t, true, 0) : NULL;
        r = r && ts_error() == TS_OK ? ts_keep(r) : NULL;
        ts_scope_end();
        return tsp_wrap(r);
    }
    ts_tensor *rt = tsp_tensor_of(a[1]);
    if (!rt && tsp_int_arg(a[1], &reps, fn, "repeats") < 0) return NULL;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = rt ? ts_repeat_interleave_tensor(t, rt, has_dim, (int)dim)
                     : ts_repeat_interleave(t, reps, has_dim, (int)dim));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(repeat_interleave, call_repeat_interleave, NULL)

static PyObject *m_unfold(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"dimension", "size", "step"};
    PyObject *a[3] = {0};
    int64_t v[3];
    ts_tensor *r;
    if (tsp_parse(args, nargs, kw, "unfold", names, 3, 3, a) < 0) return NULL;
    for (int i = 0; i < 3; i++)
        if (tsp_int_arg(a[i], &v[i], "unfold", names[i]) < 0) return NULL;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_unfold(T(self), (int)v[0], v[1], v[2]));
    return tsp_wrap(r);
}

static PyObject *call_movedim(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const char *fn) {
    const char *names[] = {"input", "source", "destination"};
    PyObject *a[3] = {0};
    ts_dims s, d;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 3, 2, a) < 0 ||
        dims_of(a[1], &s, fn, "source") < 0 || dims_of(a[2], &d, fn, "destination") < 0 ||
        tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_movedim(input_of(self, a[0]), s, d));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(movedim, call_movedim, "movedim")
TSP_METHOD_AND_FUNCTION(moveaxis, call_movedim, "moveaxis")

static PyObject *call_swapdims(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kw, const void *unused) {
    (void)unused;
    const char *names[] = {"input", "dim0", "dim1"};
    PyObject *a[3] = {0};
    int64_t d0, d1;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, "swapdims", names, 3, 2, a) < 0 ||
        tsp_int_arg(a[1], &d0, "swapdims", "dim0") < 0 ||
        tsp_int_arg(a[2], &d1, "swapdims", "dim1") < 0 || tsp_enter())
        return NULL;
    TSP_NOGIL(r = ts_transpose(input_of(self, a[0]), (int)d0, (int)d1));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(swapdims, call_swapdims, NULL)

/* ------------------------------------------------------------------ splits */
/* kind: 0 tensor_split, 1 hsplit, 2 vsplit, 3 dsplit, 4 split_with_sizes */
static PyObject *call_tsplit(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const char *fn) {
    const int kind = !strcmp(fn, "hsplit")             ? 1
                     : !strcmp(fn, "vsplit")           ? 2
                     : !strcmp(fn, "dsplit")           ? 3
                     : !strcmp(fn, "split_with_sizes") ? 4
                                                       : 0;
    const char *names[] = {"input", kind == 4 ? "split_sizes" : "indices_or_sections", "dim"};
    PyObject *a[3] = {0};
    if (tsp_parse_input(self, args, nargs, kw, fn, names, kind == 0 || kind == 4 ? 3 : 2, 1, a) < 0)
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    int64_t dim = 0;
    if (int_or(a[2], 0, &dim, fn, "dim") < 0) return NULL;
    const int nd = ts_ndim(t);
    if (kind >= 1 && kind <= 3) {
        const int need = kind == 1 ? 1 : kind == 2 ? 2 : 3;
        if (nd < need) {
            PyErr_Format(tsp_error_type,
                         "torch.%s requires a tensor with at least %d dimension, but got a tensor "
                         "with %d dimensions!",
                         fn, need, nd);
            return NULL;
        }
        dim = kind == 1 ? (nd == 1 ? 0 : 1) : kind == 2 ? 0 : 2;
    }
    ts_tensor *it = tsp_tensor_of(a[1]);
    const bool sections = (PyIndex_Check(a[1]) && !it) || (it && ts_ndim(it) == 0);
    int64_t sec = 0, *v = NULL;
    int n = 0;
    PyObject *res = NULL;
    if (sections && kind != 4) {
        if (it) {
            PyObject *l = PyObject_CallMethod(a[1], "item", NULL);
            int rc = l ? tsp_int_arg(l, &sec, fn, names[1]) : -1;
            Py_XDECREF(l);
            if (rc < 0) return NULL;
        } else if (tsp_int_arg(a[1], &sec, fn, names[1]) < 0)
            return NULL;
        if (kind >= 1 && sec != 0 && nd > dim && ts_size(t, (int)dim) % sec != 0) {
            PyErr_Format(tsp_error_type,
                         "torch.%s attempted to split along dimension %lld, but the size of the "
                         "dimension %lld is not divisible by the split_size %lld!",
                         fn, (long long)dim, (long long)ts_size(t, (int)dim), (long long)sec);
            return NULL;
        }
    } else {
        Py_ssize_t len = it ? (Py_ssize_t)ts_numel(it) : PySequence_Size(a[1]);
        if (len < 0) return NULL;
        v = malloc(sizeof *v * (size_t)(len + 1));
        if (!v) return PyErr_NoMemory();
        PyObject *seq = it ? PyObject_CallMethod(a[1], "tolist", NULL) : Py_NewRef(a[1]);
        PyObject *fast = seq ? PySequence_Fast(seq, "indices") : NULL;
        for (Py_ssize_t i = 0; fast && i < len; i++)
            if (tsp_int_arg(PySequence_Fast_GET_ITEM(fast, i), &v[i], fn, names[1]) < 0) {
                Py_CLEAR(fast);
                break;
            }
        Py_XDECREF(seq);
        if (!fast) return free(v), NULL;
        Py_DECREF(fast);
        n = (int)len;
    }
    if (tsp_enter()) return free(v), NULL;
    const int64_t size = nd > 0 && dim < nd && dim >= -nd ? ts_size(t, (int)dim) : 0;
    const int max = (int)(kind == 4  ? n
                          : sections ? (sec > 0 && sec < (1 << 20) ? sec : 1)
                                     : n + 1);
    ts_tensor **out = calloc((size_t)(max > 0 ? max : 1), sizeof *out);
    (void)size;
    if (!out) return free(v), PyErr_NoMemory();
    int got;
    TSP_NOGIL(got = kind == 4  ? ts_split_with_sizes(t, v, n, (int)dim, out, max)
                    : sections ? ts_tensor_split_sections(t, sec, (int)dim, out, max)
                               : ts_tensor_split_indices(t, v, n, (int)dim, out, max));
    if (got < 0 || got > max || ts_error() != TS_OK) {
        for (int i = 0; i < got && i < max; i++) tsp_drop(out[i]);
        res = tsp_raise_pending();
    } else
        res = tsp_tuple_of(out, got);
    free(out), free(v);
    return res;
}
TSP_METHOD_AND_FUNCTION(tensor_split, call_tsplit, "tensor_split")
TSP_METHOD_AND_FUNCTION(hsplit, call_tsplit, "hsplit")
TSP_METHOD_AND_FUNCTION(vsplit, call_tsplit, "vsplit")
TSP_METHOD_AND_FUNCTION(dsplit, call_tsplit, "dsplit")
TSP_METHOD_AND_FUNCTION(split_with_sizes, call_tsplit, "split_with_sizes")

/* block_diag(*tensors) */
static PyObject *f_block_diag(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kw) {
    (void)mod;
    if (kw && PyTuple_GET_SIZE(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "block_diag() takes no keyword arguments");
        return NULL;
    }
    ts_tensor **ts = malloc(sizeof *ts * (size_t)(nargs > 0 ? nargs : 1)), *r;
    if (!ts) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (!(ts[i] = tsp_tensor_arg(args[i], "block_diag", "tensors"))) return free(ts), NULL;
    if (tsp_enter()) return free(ts), NULL;
    TSP_NOGIL(r = ts_block_diag(ts, (int)nargs));
    free(ts);
    return tsp_wrap(r);
}

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},

#define FAST_OPS(X)                                                                                \
    X(flip, "flip(input, dims)")                                                                   \
    X(rot90, "rot90(input, k=1, dims=[0, 1])")                                                     \
    X(roll, "roll(input, shifts, dims=None)")                                                      \
    X(tril, "tril(input, diagonal=0)")                                                             \
    X(triu, "triu(input, diagonal=0)")                                                             \
    X(diag, "diag(input, diagonal=0)")                                                             \
    X(diagflat, "diagflat(input, offset=0)")                                                       \
    X(diagonal, "diagonal(input, offset=0, dim1=0, dim2=1)")                                       \
    X(diag_embed, "diag_embed(input, offset=0, dim1=-2, dim2=-1)")                                 \
    X(repeat_interleave, "repeat_interleave(input, repeats, dim=None, *, output_size=None)")       \
    X(movedim, "movedim(input, source, destination)")                                              \
    X(moveaxis, "moveaxis(input, source, destination)")                                            \
    X(swapdims, "swapdims(input, dim0, dim1)")                                                     \
    X(tensor_split, "tensor_split(input, indices_or_sections, dim=0)")                             \
    X(hsplit, "hsplit(input, indices_or_sections)")                                                \
    X(vsplit, "vsplit(input, indices_or_sections)")                                                \
    X(dsplit, "dsplit(input, indices_or_sections)")                                                \
    X(split_with_sizes, "split_with_sizes(input, split_sizes, dim=0)")
#define IN_PLACE_OPS(X)                                                                            \
    X(tril_, "tril_(diagonal=0)")                                                                  \
    X(triu_, "triu_(diagonal=0)")

PyMethodDef tsp_tensor_rearrange_methods[] = {
    FAST_OPS(BOTH) IN_PLACE_OPS(BOTH){"fliplr", m_fliplr, METH_NOARGS, "fliplr()"},
    {"flipud", m_flipud, METH_NOARGS, "flipud()"},
    {"unfold", FN(m_unfold), FAST, "unfold(dimension, size, step)"},
    {NULL, NULL, 0, NULL}};

PyMethodDef tsp_tensor_rearrange_functions[] = {
    FAST_OPS(FUNC){"fliplr", f_fliplr, METH_O, "fliplr(input)"},
    {"flipud", f_flipud, METH_O, "flipud(input)"},
    {"block_diag", FN(f_block_diag), FAST, "block_diag(*tensors)"},
    {NULL, NULL, 0, NULL}};
