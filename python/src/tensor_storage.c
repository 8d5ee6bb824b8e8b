/* tensor_storage.c — a tensor's storage from Python (tessera/storage.h): Tensor.set_ in its
 * three forms (set_(), set_(source tensor), set_(source tensor or storage, storage_offset, size,
 * stride)), is_set_to, data_ptr, and the storage views behind untyped_storage() / storage(), whose
 * Python classes are python/tessera/_storage.py's UntypedStorage / TypedStorage (each holds a 1-D
 * tensor over the whole storage in its `_tensor`). as_strided_ is an in-place view method
 * (tensor_view_inplace.c). */
#include "tensor_impl.h"
#include "tessera/storage.h"

static PyObject *in_place(PyObject *self, ts_tensor *r) {
    if (!r) return tsp_raise_pending();
    return Py_NewRef(self);
}

/* the tensor behind a set_ source: a Tensor, or a storage object's _tensor */
static ts_tensor *source_arg(PyObject *o, bool *is_storage) {
    *is_storage = !PyObject_TypeCheck(o, tsp_tensor_type);
    if (!*is_storage) return TSP_T(o);
    PyObject *inner = PyObject_GetAttrString(o, "_tensor");
    if (!inner || !PyObject_TypeCheck(inner, tsp_tensor_type)) {
        Py_XDECREF(inner);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "set_(): argument 'source' must be a Tensor or a storage, not %s",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    ts_tensor *t = TSP_T(inner);
    Py_DECREF(inner); /* the storage object keeps it alive */
    return t;
}

static PyObject *m_set_(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    static const char *const names[] = {"source", "storage_offset", "size", "stride"};
    PyObject *a[4] = {0};
    if (tsp_parse(args, n, kw, "set_", names, 4, 0, a) < 0 || tsp_enter()) return NULL;
    ts_tensor *t = TSP_T(self), *r;
    if (!a[0] || a[0] == Py_None) {
        if (a[1] || a[2] || a[3])
            return PyErr_Format(PyExc_TypeError, "set_(): storage_offset, size and stride need a "
                                                 "source");
        TSP_NOGIL(r = ts_set_empty_(t));
        return in_place(self, r);
    }
    bool is_storage;
    ts_tensor *src = source_arg(a[0], &is_storage);
    if (!src) return NULL;
    if (!is_storage && !a[1] && !a[2] && !a[3]) {
        TSP_NOGIL(r = ts_set_(t, src));
        return in_place(self, r);
    }
    int64_t off = 0;
    ts_shape size, stride;
    if (a[1] && a[1] != Py_None && tsp_int_arg(a[1], &off, "set_", "storage_offset") < 0)
        return NULL;
    if (a[2] && a[2] != Py_None) {
        if (tsp_shape_arg(a[2], &size, "set_", "size") < 0) return NULL;
    } else if (!is_storage) {
        return PyErr_Format(PyExc_TypeError, "set_(): a source tensor with storage_offset needs "
                                             "size");
    } else { /* the whole storage from storage_offset, 1-D */
        const int64_t bytes = ts_numel(src) * (int64_t)ts_element_size(src);
        const int64_t rest = bytes / (int64_t)ts_element_size(t) - off;
        size = TS_SHAPE(rest > 0 ? rest : 0);
    }
    const bool strided = a[3] && a[3] != Py_None;
    if (strided && tsp_shape_arg(a[3], &stride, "set_", "stride") < 0) return NULL;
    if (strided && stride.ndim != size.ndim)
        return PyErr_Format(PyExc_RuntimeError,
                            "set_: mismatch in length of strides (%d) and shape (%d)", stride.ndim,
                            size.ndim);
    TSP_NOGIL(r = ts_set_storage_(t, src, off, size, strided ? stride.dims : NULL));
    return in_place(self, r);
}

static PyObject *m_is_set_to(PyObject *self, PyObject *o) {
    ts_tensor *other = tsp_tensor_arg(o, "is_set_to", "tensor");
    if (!other) return NULL;
    return PyBool_FromLong(ts_is_set_to(TSP_T(self), other));
}

static PyObject *m_data_ptr(PyObject *self, PyObject *unused) {
    (void)unused;
    uintptr_t p = ts_data_ptr(TSP_T(self));
    if (tsp_check()) return NULL;
    return PyLong_FromSize_t((size_t)p);
}

/* _storage_view(dtype=None): the whole storage as a 1-D tensor of dtype (None: bytes, uint8) */
static PyObject *m_storage_view(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    static const char *const names[] = {"dtype"};
    PyObject *a[1] = {0};
    ts_dtype dt = TS_U8;
    if (tsp_parse(args, n, kw, "_storage_view", names, 1, 0, a) < 0) return NULL;
    if (a[0] && a[0] != Py_None && tsp_dtype_arg(a[0], &dt, "_storage_view", "dtype") < 0)
        return NULL;
    return tsp_wrap(ts_storage_view(TSP_T(self), dt));
}

PyMethodDef tsp_tensor_storage_methods[] = {
    {"set_", FN(m_set_), FAST,
     "set_(source=None, storage_offset=0, size=None, stride=None): in place, another storage"},
    {"data_ptr", m_data_ptr, METH_NOARGS, "data_ptr(): the address of the first element"},
    {"is_set_to", m_is_set_to, METH_O, "is_set_to(tensor): same storage, offset, size, stride"},
    {"_storage_view", FN(m_storage_view), FAST,
     "_storage_view(dtype=None): the whole storage as a 1-D tensor (uint8 by default)"},
    {NULL, NULL, 0, NULL},
};
