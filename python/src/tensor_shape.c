/* tensor_shape.c — shape ops of the Tensor and tessera.*: view / reshape / permute / transpose /
 * squeeze / unsqueeze / flatten / expand / narrow / select (views), chunk / split / unbind (tuples
 * of views), cat / stack, index_select / gather / scatter_add, as_strided (a view of the storage).
 */
#include "tensor_impl.h"

#include <stdlib.h>

#define T TSP_T

/* sizes given as separate ints (view(2, 3)) or as one sequence (view((2, 3))) */
static int shape_of_args(PyObject *const *args, Py_ssize_t nargs, ts_shape *s, const char *fn) {
    if (nargs == 1 && !PyIndex_Check(args[0])) return tsp_shape_arg(args[0], s, fn, "size");
    if (nargs > TS_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s(): %zd dims, at most %d are supported", fn, nargs,
                     TS_MAX_DIMS);
        return -1;
    }
    s->ndim = (int)nargs;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (tsp_int_arg(args[i], &s->dims[i], fn, "size") < 0) return -1;
    return 0;
}
static int dims_of_args(PyObject *const *args, Py_ssize_t nargs, ts_dims *d, const char *fn) {
    ts_shape s;
    if (shape_of_args(args, nargs, &s, fn) < 0) return -1;
    d->n = s.ndim;
    for (int i = 0; i < s.ndim; i++) d->d[i] = (int)s.dims[i];
    return 0;
}

typedef ts_tensor *(*shape_fn)(ts_tensor *, ts_shape);

static PyObject *with_shape(ts_tensor *t, ts_shape s, shape_fn f) {
    ts_tensor *r;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = f(t, s));
    return tsp_wrap(r);
}

#define SIZES_METHOD(name, f)                                                                      \
    static PyObject *m_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {           \
        ts_shape s;                                                                                \
        if (shape_of_args(args, nargs, &s, #name) < 0) return NULL;                                \
        return with_shape(T(self), s, f);                                                          \
    }
static PyObject *m_view_shape(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    ts_shape s;
    if (shape_of_args(args, nargs, &s, "view") < 0) return NULL;
    return with_shape(T(self), s, ts_view);
}
/* view(*shape) or view(dtype): the same bytes as another dtype */
static PyObject *m_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs == 1 && tsp_is_dtype(args[0])) {
        ts_dtype dt;
        if (tsp_dtype_arg(args[0], &dt, "view", "dtype") < 0) return NULL;
        ts_tensor *r;
        if (tsp_enter()) return NULL;
        TSP_NOGIL(r = ts_view_dtype(T(self), dt));
        return tsp_wrap(r);
    }
    return m_view_shape(self, args, nargs);
}
SIZES_METHOD(reshape, ts_reshape)
SIZES_METHOD(expand, ts_expand)

/* reshape(input, shape) / broadcast_to(input, shape) */
static PyObject *input_and_shape(PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                                 const char *fn, shape_fn f) {
    static const char *const names[] = {"input", "shape"};
    PyObject *a[2];
    ts_shape s;
    ts_tensor *t;
    if (tsp_parse(args, nargs, kw, fn, names, 2, 2, a) < 0 ||
        !(t = tsp_tensor_arg(a[0], fn, "input")) || tsp_shape_arg(a[1], &s, fn, "shape") < 0)
        return NULL;
    return with_shape(t, s, f);
}
static PyObject *f_reshape(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return input_and_shape(a, n, kw, "reshape", ts_reshape);
}
static PyObject *f_broadcast_to(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return input_and_shape(a, n, kw, "broadcast_to", ts_expand);
}

static PyObject *as_other(PyObject *self, PyObject *other, const char *fn, shape_fn f) {
    ts_tensor *o = tsp_tensor_arg(other, fn, "other");
    return o ? with_shape(T(self), ts_shape_of(o), f) : NULL;
}
static PyObject *m_view_as(PyObject *self, PyObject *o) {
    return as_other(self, o, "view_as", ts_view);
}
static PyObject *m_reshape_as(PyObject *self, PyObject *o) {
    return as_other(self, o, "reshape_as", ts_reshape);
}
static PyObject *m_expand_as(PyObject *self, PyObject *o) {
    return as_other(self, o, "expand_as", ts_expand);
}

static PyObject *permute_dims(ts_tensor *t, ts_dims d) {
    ts_tensor *r;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_permute(t, d));
    return tsp_wrap(r);
}
static PyObject *m_permute(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    ts_dims d;
    return dims_of_args(args, nargs, &d, "permute") < 0 ? NULL : permute_dims(T(self), d);
}
static PyObject *f_permute(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"input", "dims"};
    PyObject *a[2];
    ts_tensor *t;
    ts_dims d;
    if (tsp_parse(args, nargs, kw, "permute", names, 2, 2, a) < 0 ||
        !(t = tsp_tensor_arg(a[0], "permute", "input")) ||
        tsp_dims_arg(a[1], &d, "permute", "dims") < 0)
        return NULL;
    return permute_dims(t, d);
}

/* ops taking the input and up to three ints: transpose(d0, d1), narrow(dim, start, length)... */
typedef struct int_op {
    const char *name;
    const char *args[3];
    int nreq, nopt;      /* required ints, optional ints after them */
    int64_t defaults[3]; /* for the optional ones */
    ts_tensor *(*f)(ts_tensor *, const int64_t *);
} int_op;

static ts_tensor *do_transpose(ts_tensor *t, const int64_t *v) {
    return ts_transpose(t, (int)v[0], (int)v[1]);
}
static ts_tensor *do_narrow(ts_tensor *t, const int64_t *v) {
    return ts_narrow(t, (int)v[0], v[1], v[2]);
}
static ts_tensor *do_select(ts_tensor *t, const int64_t *v) {
    return ts_select(t, (int)v[0], v[1]);
}
static ts_tensor *do_unsqueeze(ts_tensor *t, const int64_t *v) {
    return ts_unsqueeze(t, (int)v[0]);
}
static ts_tensor *do_flatten(ts_tensor *t, const int64_t *v) {
    return ts_flatten(t, (int)v[0], (int)v[1]);
}
static ts_tensor *do_t(ts_tensor *t, const int64_t *v) {
    (void)v;
    return ts_t(t);
}

static const int_op op_transpose = {"transpose", {"dim0", "dim1"}, 2, 0, {0}, do_transpose};
static const int_op op_swapaxes = {"swapaxes", {"axis0", "axis1"}, 2, 0, {0}, do_transpose};
static const int_op op_narrow = {"narrow", {"dim", "start", "length"}, 3, 0, {0}, do_narrow};
static const int_op op_select = {"select", {"dim", "index"}, 2, 0, {0}, do_select};
static const int_op op_unsqueeze = {"unsqueeze", {"dim"}, 1, 0, {0}, do_unsqueeze};
static const int_op op_flatten = {"flatten", {"start_dim", "end_dim"}, 0, 2, {0, -1}, do_flatten};
static const int_op op_t = {"t", {NULL}, 0, 0, {0}, do_t};

static PyObject *call_int_op(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const int_op *op) {
    const char *names[4] = {"input"};
    int n = op->nreq + op->nopt;
    for (int i = 0; i < n; i++) names[i + 1] = op->args[i];
    PyObject *a[4] = {0};
    int r = self ? tsp_parse(args, nargs, kw, op->name, names + 1, n, op->nreq, a + 1)
                 : tsp_parse(args, nargs, kw, op->name, names, n + 1, op->nreq + 1, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], op->name, "input"), *res;
    if (!t) return NULL;
    int64_t v[3];
    for (int i = 0; i < n; i++) {
        v[i] = op->defaults[i];
        if (a[i + 1] && (op == &op_narrow ? tsp_int_or_tensor_arg : tsp_int_arg)(
                            a[i + 1], &v[i], op->name, op->args[i]) < 0)
            return NULL;
    }
    if (tsp_enter()) return NULL;
    TSP_NOGIL(res = op->f(t, v));
    return tsp_wrap(res);
}

#define INT_OP_LIST(X)                                                                             \
    X(transpose, op_transpose)                                                                     \
    X(swapaxes, op_swapaxes)                                                                       \
    X(narrow, op_narrow)                                                                           \
    X(select, op_select) X(unsqueeze, op_unsqueeze) X(flatten, op_flatten) X(t, op_t)
#define DEF_INT_OP(name, op) TSP_METHOD_AND_FUNCTION(name, call_int_op, &op)
INT_OP_LIST(DEF_INT_OP)

/* squeeze(input, dim=None) */
static PyObject *call_squeeze(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const char *fn) {
    static const char *const names[] = {"input", "dim"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "squeeze", names + 1, 1, 0, a + 1)
                 : tsp_parse(args, nargs, kw, "squeeze", names, 2, 1, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], "squeeze", "input"), *res;
    int64_t dim;
    if (!t) return NULL;
    if (!a[1] || a[1] == Py_None) return tsp_unary(ts_squeeze, t);
    if (!PyIndex_Check(a[1]) || tsp_tensor_of(a[1])) { /* squeeze(dim=(0, 2)) */
        ts_dims d;
        if (tsp_dims_arg(a[1], &d, "squeeze", "dim") < 0 || tsp_enter()) return NULL;
        TSP_NOGIL(res = ts_squeeze_dims(t, d));
        return tsp_wrap(res);
    }
    if (tsp_int_arg(a[1], &dim, "squeeze", "dim") < 0 || tsp_enter()) return NULL;
    TSP_NOGIL(res = ts_squeeze_dim(t, (int)dim));
    return tsp_wrap(res);
}
TSP_METHOD_AND_FUNCTION(squeeze, call_squeeze, "squeeze")

/* ------------------------------------------------------------------ tuples of views */

typedef int (*split_fn)(ts_tensor *, int64_t, int, ts_tensor **, int);

/* split / chunk by an int: the C op writes the views */
static PyObject *pieces_by_int(ts_tensor *t, int64_t k, int64_t dim, split_fn f) {
    int64_t size = ts_size(t, (int)dim);
    if (tsp_check()) return NULL;
    int max = (int)(size > 0 ? size : 1) + 1;
    ts_tensor **out = calloc((size_t)max, sizeof *out);
    if (!out) return PyErr_NoMemory();
    int n;
    TSP_NOGIL(n = f(t, k, (int)dim, out, max));
    PyObject *r;
    if (n < 0 || n > max || ts_error() != TS_OK) {
        for (int i = 0; i < n && i < max; i++) tsp_drop(out[i]);
        r = tsp_raise_pending();
    } else
        r = tsp_tuple_of(out, n);
    free(out);
    return r;
}
static int chunk_adapter(ts_tensor *t, int64_t k, int dim, ts_tensor **out, int max) {
    return ts_chunk(t, (int)k, dim, out, max);
}

/* split(sections list): successive narrows */
static PyObject *split_sections(ts_tensor *t, PyObject *sections, int64_t dim) {
    PyObject *seq = PySequence_Fast(sections, "split(): split_size_or_sections");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *tup = PyTuple_New(n);
    int64_t start = 0;
    for (Py_ssize_t i = 0; tup && i < n; i++) {
        int64_t len;
        ts_tensor *piece;
        if (tsp_int_arg(PySequence_Fast_GET_ITEM(seq, i), &len, "split", "split_size_or_sections") <
            0) {
            Py_CLEAR(tup);
            break;
        }
        TSP_NOGIL(piece = ts_narrow(t, (int)dim, start, len));
        PyObject *o = tsp_wrap(piece);
        if (!o) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, o);
        start += len;
    }
    Py_DECREF(seq);
    if (tup && start != ts_size(t, (int)dim)) {
        Py_DECREF(tup);
        PyErr_Format(tsp_error_type, "split(): sections sum to %lld but dim %lld has size %lld",
                     (long long)start, (long long)dim, (long long)ts_size(t, (int)dim));
        return NULL;
    }
    return tup;
}

/* split(input, split_size_or_sections, dim=0) / chunk(input, chunks, dim=0) */
static PyObject *call_pieces(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             bool is_chunk) {
    static const char *const split_names[] = {"input", "split_size_or_sections", "dim"};
    static const char *const chunk_names[] = {"input", "chunks", "dim"};
    const char *const *names = is_chunk ? chunk_names : split_names;
    const char *fn = is_chunk ? "chunk" : "split";
    PyObject *a[3] = {0};
    int r = self ? tsp_parse(args, nargs, kw, fn, names + 1, 2, 1, a + 1)
                 : tsp_parse(args, nargs, kw, fn, names, 3, 2, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], fn, "input");
    int64_t k, dim = 0;
    if (!t || (a[2] && tsp_int_arg(a[2], &dim, fn, "dim") < 0) || tsp_enter()) return NULL;
    if (!is_chunk && !PyIndex_Check(a[1])) return split_sections(t, a[1], dim);
    if (tsp_int_arg(a[1], &k, fn, names[1]) < 0) return NULL;
    return pieces_by_int(t, k, dim, is_chunk ? chunk_adapter : ts_split);
}
TSP_METHOD_AND_FUNCTION(split, call_pieces, false)
TSP_METHOD_AND_FUNCTION(chunk, call_pieces, true)

/* unbind(input, dim=0): the selects along dim (ts_unbind: one multi-output op's views) */
static int unbind_adapter(ts_tensor *t, int64_t k, int dim, ts_tensor **out, int max) {
    (void)k;
    return ts_unbind(t, dim, out, max);
}
static PyObject *call_unbind(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const char *fn) {
    static const char *const names[] = {"input", "dim"};
    PyObject *a[2] = {0};
    int r = self ? tsp_parse(args, nargs, kw, "unbind", names + 1, 1, 0, a + 1)
                 : tsp_parse(args, nargs, kw, "unbind", names, 2, 1, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], "unbind", "input");
    int64_t dim = 0;
    if (!t || (a[1] && tsp_int_arg(a[1], &dim, "unbind", "dim") < 0) || tsp_enter()) return NULL;
    return pieces_by_int(t, 0, dim, unbind_adapter);
}
TSP_METHOD_AND_FUNCTION(unbind, call_unbind, "unbind")

/* ------------------------------------------------------------------ joining */
typedef ts_tensor *(*join_fn)(ts_tensor *const *, int, int);

/* cat(tensors, dim=0) / stack(tensors, dim=0) */
static PyObject *join(PyObject *const *args, Py_ssize_t nargs, PyObject *kw, const char *fn,
                      join_fn f) {
    static const char *const names[] = {"tensors", "dim", "out"};
    PyObject *a[3];
    int64_t dim = 0;
    if (tsp_parse(args, nargs, kw, fn, names, 3, 1, a) < 0 ||
        (a[1] && tsp_int_arg(a[1], &dim, fn, "dim") < 0))
        return NULL;
    if (tsp_tensor_of(a[0])) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'tensors' must be a sequence of Tensors, not Tensor", fn);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(a[0], "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument 'tensors' must be a sequence of Tensors, not %.100s", fn,
                     Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ts_tensor **ts = malloc((size_t)(n ? n : 1) * sizeof *ts), *r = NULL;
    int ok = ts != NULL;
    if (!ts) PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ts[i] = tsp_tensor_of(PySequence_Fast_GET_ITEM(seq, i));
        if (!ts[i]) {
            PyErr_Format(
                PyExc_TypeError,
                "%s(): argument 'tensors' must be a sequence of Tensors, not %.100s at index %zd",
                fn, Py_TYPE(PySequence_Fast_GET_ITEM(seq, i))->tp_name, i);
            ok = 0;
        }
    }
    if (ok && !tsp_enter()) {
        TSP_NOGIL(r = f(ts, (int)n, (int)dim));
        free(ts);
        Py_DECREF(seq);
        return tsp_wrap(r);
    }
    free(ts);
    Py_DECREF(seq);
    return NULL;
}
static PyObject *f_cat(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return join(a, n, kw, "cat", ts_cat);
}
static PyObject *f_stack(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    return join(a, n, kw, "stack", ts_stack);
}

/* ------------------------------------------------------------------ indexing by tensors */
/* index_select(input, dim, index) / gather(input, dim, index) */
static PyObject *call_dim_index(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kw, const char *fn,
                                ts_tensor *(*f)(ts_tensor *, int, ts_tensor *)) {
    static const char *const names[] = {"input", "dim", "index"};
    PyObject *a[3] = {0};
    int r = self ? tsp_parse(args, nargs, kw, fn, names + 1, 2, 2, a + 1)
                 : tsp_parse(args, nargs, kw, fn, names, 3, 3, a);
    ts_tensor *t = r < 0 ? NULL : self ? T(self) : tsp_tensor_arg(a[0], fn, "input"), *idx, *res;
    int64_t dim;
    if (!t || tsp_int_arg(a[1], &dim, fn, "dim") < 0 ||
        !(idx = tsp_tensor_arg(a[2], fn, "index")) || tsp_enter())
        return NULL;
    TSP_NOGIL(res = f(t, (int)dim, idx));
    return tsp_wrap(res);
}
#define DIM_INDEX(name)                                                                            \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return call_dim_index(self, a, n, kw, #name, ts_##name);                                   \
    }                                                                                              \
    static PyObject *f_##name(PyObject *mod, PyObject *const *a, Py_ssize_t n, PyObject *kw) {     \
        (void)mod;                                                                                 \
        return call_dim_index(NULL, a, n, kw, #name, ts_##name);                                   \
    }
DIM_INDEX(index_select)
DIM_INDEX(gather)

/* scatter_add(dim, index, src) and scatter_add_ */
static PyObject *call_scatter_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kw, bool in_place) {
    static const char *const names[] = {"dim", "index", "src"};
    const char *fn = in_place ? "scatter_add_" : "scatter_add";
    PyObject *a[3];
    int64_t dim;
    ts_tensor *idx, *src, *r;
    if (tsp_parse(args, nargs, kw, fn, names, 3, 3, a) < 0 ||
        tsp_int_arg(a[0], &dim, fn, "dim") < 0 || !(idx = tsp_tensor_arg(a[1], fn, "index")) ||
        !(src = tsp_tensor_arg(a[2], fn, "src")) || tsp_enter())
        return NULL;
    TSP_NOGIL(r = in_place ? ts_scatter_add_(T(self), (int)dim, idx, src)
                           : ts_scatter_add(T(self), (int)dim, idx, src));
    return tsp_result(self, r, in_place);
}
static PyObject *m_scatter_add(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return call_scatter_add(self, a, n, kw, false);
}
static PyObject *m_scatter_add_(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {
    return call_scatter_add(self, a, n, kw, true);
}

/* as_strided(size, stride, storage_offset=None): a view of the storage with these strides */
static PyObject *call_as_strided(ts_tensor *t, PyObject *size, PyObject *stride, PyObject *off) {
    ts_shape sz, st;
    int64_t o = -1;
    if (tsp_shape_arg(size, &sz, "as_strided", "size") < 0 ||
        tsp_shape_arg(stride, &st, "as_strided", "stride") < 0 ||
        (off && off != Py_None && tsp_int_arg(off, &o, "as_strided", "storage_offset") < 0))
        return NULL;
    if (sz.ndim != st.ndim)
        return PyErr_Format(PyExc_RuntimeError,
                            "as_strided: mismatch in length of strides (%d) and shape (%d)",
                            st.ndim, sz.ndim);
    if (off && off != Py_None && o < 0)
        return PyErr_Format(PyExc_RuntimeError, "as_strided: storage_offset must be >= 0, got %lld",
                            (long long)o);
    ts_tensor *r;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_as_strided(t, sz, st.dims, o));
    return tsp_wrap(r);
}
static PyObject *m_as_strided(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    static const char *const names[] = {"size", "stride", "storage_offset"};
    PyObject *a[3];
    if (tsp_parse(args, n, kw, "as_strided", names, 3, 2, a) < 0) return NULL;
    return call_as_strided(T(self), a[0], a[1], a[2]);
}
static PyObject *f_as_strided(PyObject *mod, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"input", "size", "stride", "storage_offset"};
    PyObject *a[4];
    ts_tensor *t;
    if (tsp_parse(args, n, kw, "as_strided", names, 4, 3, a) < 0 ||
        !(t = tsp_tensor_arg(a[0], "as_strided", "input")))
        return NULL;
    return call_as_strided(t, a[1], a[2], a[3]);
}

/* resize_(*sizes) / resize_as_(other): in place, self returned */
static PyObject *resized(PyObject *self, ts_tensor *r) {
    if (!r) return tsp_raise_pending();
    Py_INCREF(self);
    return self;
}
static PyObject *m_resize_(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    ts_shape s;
    if (shape_of_args(args, nargs, &s, "resize_") < 0 || tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_resize_(T(self), s));
    return resized(self, r);
}
static PyObject *m_resize_as_(PyObject *self, PyObject *o) {
    ts_tensor *other = tsp_tensor_arg(o, "resize_as_", "the_template"), *r;
    if (!other || tsp_enter()) return NULL;
    TSP_NOGIL(r = ts_resize_as_(T(self), other));
    return resized(self, r);
}

#define M_INT_OP(name, op) {#name, FN(m_##name), FAST, NULL},
#define F_INT_OP(name, op) {#name, FN(f_##name), FAST, NULL},
PyMethodDef tsp_tensor_shape_methods[] = {
    INT_OP_LIST(M_INT_OP){
        "view", FN(m_view), METH_FASTCALL,
        "view(*shape): a view (one dim may be -1); view(dtype): the bytes as dtype"},
    {"reshape", FN(m_reshape), METH_FASTCALL, "reshape(*shape): a view when possible, else a copy"},
    {"expand", FN(m_expand), METH_FASTCALL, "expand(*sizes): a broadcast view (-1 keeps a dim)"},
    {"view_as", m_view_as, METH_O, NULL},
    {"reshape_as", m_reshape_as, METH_O, NULL},
    {"expand_as", m_expand_as, METH_O, NULL},
    {"permute", FN(m_permute), METH_FASTCALL, "permute(*dims)"},
    {"squeeze", FN(m_squeeze), FAST, "squeeze(dim=None)"},
    {"split", FN(m_split), FAST, "split(split_size_or_sections, dim=0)"},
    {"chunk", FN(m_chunk), FAST, "chunk(chunks, dim=0)"},
    {"unbind", FN(m_unbind), FAST, "unbind(dim=0)"},
    {"index_select", FN(m_index_select), FAST, "index_select(dim, index)"},
    {"gather", FN(m_gather), FAST, "gather(dim, index)"},
    {"scatter_add", FN(m_scatter_add), FAST, "scatter_add(dim, index, src)"},
    {"scatter_add_", FN(m_scatter_add_), FAST, "scatter_add_(dim, index, src)"},
    {"as_strided", FN(m_as_strided), FAST, "as_strided(size, stride, storage_offset=None)"},
    {"resize_", FN(m_resize_), METH_FASTCALL, "resize_(*sizes): in place, new elements unset"},
    {"resize_as_", m_resize_as_, METH_O, "resize_as_(other): resize_ to other's shape"},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_shape_functions[] = {
    INT_OP_LIST(F_INT_OP){"reshape", FN(f_reshape), FAST, "reshape(input, shape)"},
    {"broadcast_to", FN(f_broadcast_to), FAST, "broadcast_to(input, shape)"},
    {"permute", FN(f_permute), FAST, "permute(input, dims)"},
    {"squeeze", FN(f_squeeze), FAST, NULL},
    {"split", FN(f_split), FAST, NULL},
    {"chunk", FN(f_chunk), FAST, NULL},
    {"unbind", FN(f_unbind), FAST, NULL},
    {"cat", FN(f_cat), FAST, "cat(tensors, dim=0)"},
    {"concat", FN(f_cat), FAST, "cat(tensors, dim=0)"},
    {"concatenate", FN(f_cat), FAST, "cat(tensors, dim=0)"},
    {"stack", FN(f_stack), FAST, "stack(tensors, dim=0)"},
    {"index_select", FN(f_index_select), FAST, NULL},
    {"gather", FN(f_gather), FAST, NULL},
    {"as_strided", FN(f_as_strided), FAST, NULL},
    {NULL, NULL, 0, NULL},
};
