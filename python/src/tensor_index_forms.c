/* tensor_index_forms.c — the forms that index by an index's or a mask's values as Tensor methods
 * and tessera.* functions (src/ops/take.c, scatter.c, nonzero.c): take / take_along_dim,
 * index_add / index_copy / index_fill (+ in place), scatter / scatter_reduce (+ in place),
 * nonzero / argwhere, masked_select / masked_scatter (+ in place). One C call each. */
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

#define T TSP_T

static int int_or(PyObject *o, int64_t dflt, int64_t *v, const char *fn, const char *arg) {
    *v = dflt;
    return o && o != Py_None ? tsp_int_arg(o, v, fn, arg) : 0;
}

static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

/* m_NAME alone: the in-place forms are Tensor methods only */
#define METHOD_ONLY(name, call, extra)                                                             \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return call(self, a, n, kw, extra);                                                        \
    }

/* ------------------------------------------------------------------ take */
static PyObject *call_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                           const char *fn) {
    const bool along = fn[4] == '_';
    const char *names[] = {"input", along ? "indices" : "index", "dim"};
    PyObject *a[3] = {0};
    ts_tensor *i, *r;
    int64_t dim = 0;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, along ? 3 : 2, 1, a) < 0 ||
        !(i = tsp_tensor_arg(a[1], fn, names[1])) || int_or(a[2], 0, &dim, fn, "dim") < 0 ||
        tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    const bool has_dim = a[2] && a[2] != Py_None;
    TSP_NOGIL(r = along ? ts_take_along_dim(t, i, has_dim, (int)dim) : ts_take(t, i));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(take, call_take, "take")
TSP_METHOD_AND_FUNCTION(take_along_dim, call_take, "take_along_dim")

/* ------------------------------------------------------------------ index_add / copy / fill */
typedef struct idx_op {
    const char *name;
    int kind; /* 0 add, 1 copy, 2 fill */
    bool in_place;
} idx_op;

/* index_fill with a 0-dim tensor value: where(mask, value, input), so the value gets its
 * gradient (the sum of the filled positions'), as PyTorch's */
static PyObject *index_fill_tensor(PyObject *self, PyObject **a, int dim, ts_tensor *idx,
                                   const idx_op *op) {
    ts_tensor *v = tsp_tensor_of(a[3]), *t = input_of(self, a[0]), *r = NULL;
    if (ts_ndim(v) != 0) {
        PyErr_Format(tsp_error_type,
                     "%s only supports a 0-dimensional value tensor, but got tensor with %d "
                     "dimension(s).",
                     op->name, ts_ndim(v));
        return NULL;
    }
    if (tsp_enter()) return NULL;
    Py_BEGIN_ALLOW_THREADS;
    ts_scope_begin();
    ts_opts o = {.dtype = TS_BOOL, .device = ts_device_of(t)};
    ts_tensor *m = ts_index_fill(ts_zeros(ts_shape_of(t), o), dim, idx, 1.0);
    ts_tensor *vv = ts_dtype_of(v) == ts_dtype_of(t) ? v : ts_to_dtype(v, ts_dtype_of(t));
    ts_tensor *y = m && vv ? ts_where(m, vv, t) : NULL;
    if (y && op->in_place) y = ts_copy_(t, y);
    r = y && ts_error() == TS_OK ? ts_keep(y) : NULL;
    ts_scope_end();
    Py_END_ALLOW_THREADS;
    return tsp_result(self, r, op->in_place);
}

static PyObject *call_index(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                            const idx_op *op) {
    const char *names[] = {"input", "dim", "index", op->kind == 2 ? "value" : "source", "alpha"};
    PyObject *a[5] = {0};
    int64_t dim;
    double alpha = 1, value = 0;
    ts_tensor *idx, *src = NULL, *r;
    if (tsp_parse_input(self, args, nargs, kw, op->name, names, op->kind == 0 ? 5 : 4, 3, a) < 0 ||
        tsp_int_arg(a[1], &dim, op->name, "dim") < 0 ||
        !(idx = tsp_tensor_arg(a[2], op->name, "index")))
        return NULL;
    if (op->kind == 2 && tsp_tensor_of(a[3])) return index_fill_tensor(self, a, (int)dim, idx, op);
    if (op->kind == 2) {
        if (tsp_scalar_arg(a[3], 0, &value, op->name, "value") < 0) return NULL;
    } else if (!(src = tsp_tensor_arg(a[3], op->name, "source")) ||
               tsp_scalar_arg(a[4], 1, &alpha, op->name, "alpha") < 0)
        return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    const int d = (int)dim;
    if (op->kind == 0)
        TSP_NOGIL(r = op->in_place ? ts_index_add_(t, d, idx, src, alpha)
                                   : ts_index_add(t, d, idx, src, alpha));
    else if (op->kind == 1)
        TSP_NOGIL(r = op->in_place ? ts_index_copy_(t, d, idx, src)
                                   : ts_index_copy(t, d, idx, src));
    else
        TSP_NOGIL(r = op->in_place ? ts_index_fill_(t, d, idx, value)
                                   : ts_index_fill(t, d, idx, value));
    return tsp_result(self, r, op->in_place);
}

#define IDX_LIST(X)                                                                                \
    X(index_add, 0, false, TSP_METHOD_AND_FUNCTION)                                                \
    X(index_add_, 0, true, METHOD_ONLY)                                                            \
    X(index_copy, 1, false, TSP_METHOD_AND_FUNCTION)                                               \
    X(index_copy_, 1, true, METHOD_ONLY)                                                           \
    X(index_fill, 2, false, TSP_METHOD_AND_FUNCTION)                                               \
    X(index_fill_, 2, true, METHOD_ONLY)
#define DEF_IDX(name, kind, ip, how)                                                               \
    static const idx_op op_##name = {#name, kind, ip};                                             \
    how(name, call_index, &op_##name)
IDX_LIST(DEF_IDX)

/* ------------------------------------------------------------------ scatter, scatter_reduce */
static int reduce_arg(PyObject *o, const char **out, const char *fn) {
    *out = NULL;
    if (!o || o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'reduce' must be str, not %.100s", fn,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8(o);
    return *out ? 0 : -1;
}

/* scatter(input, dim, index, src | value, *, reduce=None) */
static PyObject *call_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const char *fn) {
    const bool in_place = fn[7] == '_';
    const char *names[] = {"input", "dim", "index", "src", "value", "reduce"};
    PyObject *a[6] = {0};
    int64_t dim;
    const char *reduce;
    ts_tensor *idx, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 6, 2, a) < 0 ||
        tsp_int_arg(a[1], &dim, fn, "dim") < 0 || !(idx = tsp_tensor_arg(a[2], fn, "index")) ||
        reduce_arg(a[5], &reduce, fn) < 0)
        return NULL;
    PyObject *v = a[3] ? a[3] : a[4];
    if (!v || (a[3] && a[4])) {
        PyErr_Format(PyExc_TypeError, "%s(): expected one of 'src' or 'value'", fn);
        return NULL;
    }
    ts_tensor *src = tsp_tensor_of(v);
    double value = 0;
    if (src && ts_ndim(src) == 0 && a[4]) src = NULL;
    if (!src && tsp_scalar_arg(v, 0, &value, fn, "value") < 0) return NULL;
    if (tsp_enter()) return NULL;
    ts_tensor *t = input_of(self, a[0]);
    const int d = (int)dim;
    if (src)
        TSP_NOGIL(r = in_place ? ts_scatter_(t, d, idx, src, reduce)
                               : ts_scatter(t, d, idx, src, reduce));
    else
        TSP_NOGIL(r = in_place ? ts_scatter_value_(t, d, idx, value, reduce)
                               : ts_scatter_value(t, d, idx, value, reduce));
    return tsp_result(self, r, in_place);
}
TSP_METHOD_AND_FUNCTION(scatter, call_scatter, "scatter")
METHOD_ONLY(scatter_, call_scatter, "scatter_")

static PyObject *call_scatter_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kw, const char *fn) {
    const bool in_place = fn[14] == '_';
    const char *names[] = {"input", "dim", "index", "src", "reduce", "include_self"};
    PyObject *a[6] = {0};
    int64_t dim;
    const char *reduce;
    bool incl;
    ts_tensor *idx, *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 6, 4, a) < 0 ||
        tsp_int_arg(a[1], &dim, fn, "dim") < 0 || !(idx = tsp_tensor_arg(a[2], fn, "index")) ||
        !(src = tsp_tensor_arg(a[3], fn, "src")) || reduce_arg(a[4], &reduce, fn) < 0 ||
        tsp_bool_arg(a[5], true, &incl, fn, "include_self") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = in_place ? ts_scatter_reduce_(t, (int)dim, idx, src, reduce, incl)
                           : ts_scatter_reduce(t, (int)dim, idx, src, reduce, incl));
    return tsp_result(self, r, in_place);
}
TSP_METHOD_AND_FUNCTION(scatter_reduce, call_scatter_reduce, "scatter_reduce")
METHOD_ONLY(scatter_reduce_, call_scatter_reduce, "scatter_reduce_")

/* ------------------------------------------------------------------ nonzero, masks */
static PyObject *call_nonzero(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                              const char *fn) {
    const bool argwhere = fn[0] == 'a';
    const char *names[] = {"input", "as_tuple"};
    PyObject *a[2] = {0};
    bool as_tuple;
    ts_tensor *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, argwhere ? 1 : 2, 0, a) < 0 ||
        tsp_bool_arg(a[1], false, &as_tuple, fn, "as_tuple") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_nonzero(t));
    if (!as_tuple) return tsp_wrap(r);
    if (!r || ts_error() != TS_OK) return tsp_raise_pending();
    /* as_tuple: one 1-D tensor per dim (a 0-dim input: as a 1-D one) */
    const int nd = ts_ndim(t) > 0 ? ts_ndim(t) : 1;
    ts_tensor *pieces[TS_MAX_DIMS];
    for (int k = 0; k < nd; k++) {
        if (ts_ndim(t) == 0) {
            ts_opts o = {.dtype = TS_I64, .device = ts_device_of(r)};
            pieces[k] = ts_zeros(TS_SHAPE(ts_size(r, 0)), o);
        } else {
            ts_tensor *col = ts_select(r, 1, k);
            pieces[k] = col ? ts_contiguous(col) : NULL;
            tsp_drop(col);
        }
    }
    tsp_drop(r);
    for (int k = 0; k < nd; k++)
        if (!pieces[k] && ts_error() == TS_OK) PyErr_NoMemory();
    return tsp_tuple_of(pieces, nd);
}
TSP_METHOD_AND_FUNCTION(nonzero, call_nonzero, "nonzero")
TSP_METHOD_AND_FUNCTION(argwhere, call_nonzero, "argwhere")

static PyObject *call_masked(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                             const char *fn) {
    const int kind = !strcmp(fn, "masked_select") ? 0 : !strcmp(fn, "masked_scatter") ? 1 : 2;
    const char *names[] = {"input", "mask", "source"};
    PyObject *a[3] = {0};
    ts_tensor *m, *src = NULL, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, kind ? 3 : 2, kind ? 2 : 1, a) < 0 ||
        !(m = tsp_tensor_arg(a[1], fn, "mask")) ||
        (kind && !(src = tsp_tensor_arg(a[2], fn, "source"))) || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = kind == 0   ? ts_masked_select(t, m)
                  : kind == 1 ? ts_masked_scatter(t, m, src)
                              : ts_masked_scatter_(t, m, src));
    return tsp_result(self, r, kind == 2);
}
TSP_METHOD_AND_FUNCTION(masked_select, call_masked, "masked_select")
TSP_METHOD_AND_FUNCTION(masked_scatter, call_masked, "masked_scatter")
METHOD_ONLY(masked_scatter_, call_masked, "masked_scatter_")

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},

#define FAST_OPS(X)                                                                                \
    X(take, "take(input, index)")                                                                  \
    X(take_along_dim, "take_along_dim(input, indices, dim=None)")                                  \
    X(index_add, "index_add(input, dim, index, source, *, alpha=1)")                               \
    X(index_copy, "index_copy(input, dim, index, source)")                                         \
    X(index_fill, "index_fill(input, dim, index, value)")                                          \
    X(scatter, "scatter(input, dim, index, src=None, value=None, *, reduce=None)")                 \
    X(scatter_reduce, "scatter_reduce(input, dim, index, src, reduce, *, include_self=True)")      \
    X(nonzero, "nonzero(input, *, as_tuple=False)")                                                \
    X(argwhere, "argwhere(input)")                                                                 \
    X(masked_select, "masked_select(input, mask)")                                                 \
    X(masked_scatter, "masked_scatter(input, mask, source)")
#define IN_PLACE_OPS(X)                                                                            \
    X(index_add_, "index_add_(dim, index, source, *, alpha=1)")                                    \
    X(index_copy_, "index_copy_(dim, index, source)")                                              \
    X(index_fill_, "index_fill_(dim, index, value)")                                               \
    X(scatter_, "scatter_(dim, index, src=None, value=None, *, reduce=None)")                      \
    X(scatter_reduce_, "scatter_reduce_(dim, index, src, reduce, *, include_self=True)")           \
    X(masked_scatter_, "masked_scatter_(mask, source)")

PyMethodDef tsp_tensor_index_forms_methods[] = {FAST_OPS(BOTH)
                                                    IN_PLACE_OPS(BOTH){NULL, NULL, 0, NULL}};

PyMethodDef tsp_tensor_index_forms_functions[] = {FAST_OPS(FUNC){NULL, NULL, 0, NULL}};
