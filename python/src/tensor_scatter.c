/* tensor_scatter.c — the scatters into views and by index as Tensor methods and tessera.*
 * functions (issue 76): select_scatter / slice_scatter / diagonal_scatter
 * (src/ops/scatter_views.c), index_reduce / put (+ in place, src/ops/scatter.c). One C call
 * each; an index out of range is PyTorch's IndexError. */
#include <stdint.h>
#include <string.h>

#include "tensor_impl.h"

#define T TSP_T

static ts_tensor *input_of(PyObject *self, PyObject *a0) { return self ? T(self) : T(a0); }

/* m_NAME alone: the in-place forms are Tensor methods only */
#define METHOD_ONLY(name, call, extra)                                                             \
    static PyObject *m_##name(PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *kw) {    \
        return call(self, a, n, kw, extra);                                                        \
    }

/* r's result; a failure whose message says an index is out of range raises IndexError with it
 * (PyTorch's type for that), others as every op's */
static PyObject *index_result(PyObject *self, ts_tensor *r, bool in_place) {
    PyObject *o = tsp_result(self, r, in_place);
    if (o || !PyErr_Occurred()) return o;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    if (msg && (strstr(msg, "out of range") || strstr(msg, "out of bounds"))) {
        PyErr_SetString(PyExc_IndexError, msg);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    } else {
        PyErr_Restore(type, value, tb);
    }
    Py_XDECREF(s);
    return NULL;
}

/* ------------------------------------------------------------------ scatters into views */
/* select_scatter(input, src, dim, index) */
static PyObject *call_select_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kw, const char *fn) {
    const char *names[] = {"input", "src", "dim", "index"};
    PyObject *a[4] = {0};
    int64_t dim, index;
    ts_tensor *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 3, a) < 0 ||
        !(src = tsp_tensor_arg(a[1], fn, "src")) || tsp_int_arg(a[2], &dim, fn, "dim") < 0 ||
        tsp_int_arg(a[3], &index, fn, "index") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_select_scatter(t, src, (int)dim, index));
    return index_result(NULL, r, false);
}
TSP_METHOD_AND_FUNCTION(select_scatter, call_select_scatter, "select_scatter")

/* slice_scatter(input, src, dim=0, start=None, end=None, step=1) */
static PyObject *call_slice_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kw, const char *fn) {
    const char *names[] = {"input", "src", "dim", "start", "end", "step"};
    PyObject *a[6] = {0};
    int64_t dim = 0, start = 0, end = INT64_MAX, step = 1;
    ts_tensor *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 6, 1, a) < 0 ||
        !(src = tsp_tensor_arg(a[1], fn, "src")) ||
        (a[2] && a[2] != Py_None && tsp_int_arg(a[2], &dim, fn, "dim") < 0) ||
        (a[3] && a[3] != Py_None && tsp_int_arg(a[3], &start, fn, "start") < 0) ||
        (a[4] && a[4] != Py_None && tsp_int_arg(a[4], &end, fn, "end") < 0) ||
        (a[5] && a[5] != Py_None && tsp_int_arg(a[5], &step, fn, "step") < 0) || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_slice_scatter(t, src, (int)dim, start, end, step));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(slice_scatter, call_slice_scatter, "slice_scatter")

/* diagonal_scatter(input, src, offset=0, dim1=0, dim2=1) */
static PyObject *call_diagonal_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kw, const char *fn) {
    const char *names[] = {"input", "src", "offset", "dim1", "dim2"};
    PyObject *a[5] = {0};
    int64_t offset = 0, d1 = 0, d2 = 1;
    ts_tensor *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 5, 1, a) < 0 ||
        !(src = tsp_tensor_arg(a[1], fn, "src")) ||
        (a[2] && tsp_int_arg(a[2], &offset, fn, "offset") < 0) ||
        (a[3] && tsp_int_arg(a[3], &d1, fn, "dim1") < 0) ||
        (a[4] && tsp_int_arg(a[4], &d2, fn, "dim2") < 0) || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = ts_diagonal_scatter(t, src, offset, (int)d1, (int)d2));
    return tsp_wrap(r);
}
TSP_METHOD_AND_FUNCTION(diagonal_scatter, call_diagonal_scatter, "diagonal_scatter")

/* ------------------------------------------------------------------ index_reduce, put */
/* index_reduce(input, dim, index, source, reduce, *, include_self=True) (+ Tensor.index_reduce_) */
static PyObject *call_index_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kw, const char *fn) {
    const bool in_place = fn[12] == '_';
    const char *names[] = {"input", "dim", "index", "source", "reduce", "include_self"};
    PyObject *a[6] = {0};
    int64_t dim;
    const char *reduce;
    bool incl;
    ts_tensor *idx, *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 6, 4, a) < 0 ||
        tsp_int_arg(a[1], &dim, fn, "dim") < 0 || !(idx = tsp_tensor_arg(a[2], fn, "index")) ||
        !(src = tsp_tensor_arg(a[3], fn, "source")) ||
        tsp_str_arg(a[4], NULL, &reduce, fn, "reduce") < 0 ||
        tsp_bool_arg(a[5], true, &incl, fn, "include_self") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = in_place ? ts_index_reduce_(t, (int)dim, idx, src, reduce, incl)
                           : ts_index_reduce(t, (int)dim, idx, src, reduce, incl));
    return index_result(self, r, in_place);
}
TSP_METHOD_AND_FUNCTION(index_reduce, call_index_reduce, "index_reduce")
METHOD_ONLY(index_reduce_, call_index_reduce, "index_reduce_")

/* put(input, index, source, accumulate=False) (+ Tensor.put_) */
static PyObject *call_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw,
                          const char *fn) {
    const bool in_place = fn[3] == '_';
    const char *names[] = {"input", "index", "source", "accumulate"};
    PyObject *a[4] = {0};
    bool acc;
    ts_tensor *idx, *src, *r;
    if (tsp_parse_input(self, args, nargs, kw, fn, names, 4, 2, a) < 0 ||
        !(idx = tsp_tensor_arg(a[1], fn, "index")) || !(src = tsp_tensor_arg(a[2], fn, "source")) ||
        tsp_bool_arg(a[3], false, &acc, fn, "accumulate") < 0 || tsp_enter())
        return NULL;
    ts_tensor *t = input_of(self, a[0]);
    TSP_NOGIL(r = in_place ? ts_put_(t, idx, src, acc) : ts_put(t, idx, src, acc));
    return index_result(self, r, in_place);
}
TSP_METHOD_AND_FUNCTION(put, call_put, "put")
METHOD_ONLY(put_, call_put, "put_")

/* ------------------------------------------------------------------ tables */
#define BOTH(name, doc) {#name, FN(m_##name), FAST, doc},
#define FUNC(name, doc) {#name, FN(f_##name), FAST, doc},

#define SCATTER_OPS(X)                                                                             \
    X(select_scatter, "select_scatter(input, src, dim, index)")                                    \
    X(slice_scatter, "slice_scatter(input, src, dim=0, start=None, end=None, step=1)")             \
    X(diagonal_scatter, "diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)")                  \
    X(index_reduce, "index_reduce(input, dim, index, source, reduce, *, include_self=True)")       \
    X(put, "put(input, index, source, accumulate=False)")
#define SCATTER_IN_PLACE(X)                                                                        \
    X(index_reduce_, "index_reduce_(dim, index, source, reduce, *, include_self=True)")            \
    X(put_, "put_(index, source, accumulate=False)")

PyMethodDef tsp_tensor_scatter_methods[] = {SCATTER_OPS(BOTH)
                                                SCATTER_IN_PLACE(BOTH){NULL, NULL, 0, NULL}};
PyMethodDef tsp_tensor_scatter_functions[] = {SCATTER_OPS(FUNC){NULL, NULL, 0, NULL}};
