/* tensor_values.c — a Tensor's values in Python: item / tolist / float() / int() / bool() / len(),
 * repr in PyTorch's format, format(), copy.deepcopy and pickling. */
#include "tensor_impl.h"

#include <stdlib.h>
#include <string.h>

#define T TSP_T

/* ------------------------------------------------------------------ values to Python */
/* the tensor's elements as a contiguous cpu buffer of f64 (floating), (f64, f64) pairs (complex)
 * or i64 (else); malloc'ed */
static void *host_values(ts_tensor *t, bool *floating, int64_t *n) {
    ts_dtype dt = ts_dtype_of(t);
    const bool cx = ts_dtype_is_complex(dt);
    *floating = ts_dtype_is_floating(dt);
    *n = ts_numel(t);
    ts_tensor *c, *h = NULL;
    const size_t es = cx ? 16 : 8;
    void *buf = malloc((size_t)(*n ? *n : 1) * es);
    if (!buf) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS;
    ts_no_grad_begin();
    c = ts_to_dtype(t, cx ? TS_C128 : *floating ? TS_F64 : TS_I64);
    if (c) h = ts_contiguous(c);
    tsp_drop(c);
    c = h ? ts_to(h, ts_cpu()) : NULL;
    tsp_drop(h);
    if (c) ts_copy_to_host(c, buf, (size_t)(*n) * es);
    tsp_drop(c);
    ts_no_grad_end();
    Py_END_ALLOW_THREADS;
    if (tsp_check()) return free(buf), NULL;
    return buf;
}

static PyObject *scalar_obj(ts_dtype dt, bool floating, const void *buf, int64_t i) {
    if (ts_dtype_is_complex(dt))
        return PyComplex_FromDoubles(((const double *)buf)[2 * i],
                                     ((const double *)buf)[2 * i + 1]);
    if (floating) return PyFloat_FromDouble(((const double *)buf)[i]);
    int64_t v = ((const int64_t *)buf)[i];
    if (dt == TS_BOOL) return PyBool_FromLong(v != 0);
    if (dt == TS_U64) return PyLong_FromUnsignedLongLong((uint64_t)v);
    return PyLong_FromLongLong(v);
}

/* nested lists of dims[d:] from buf starting at *pos */
static PyObject *nested_list(const ts_shape *s, int d, ts_dtype dt, bool floating, const void *buf,
                             int64_t *pos) {
    if (d == s->ndim) return scalar_obj(dt, floating, buf, (*pos)++);
    PyObject *list = PyList_New(s->dims[d]);
    for (int64_t i = 0; list && i < s->dims[d]; i++) {
        PyObject *item = nested_list(s, d + 1, dt, floating, buf, pos);
        if (!item) return Py_DECREF(list), NULL;
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *m_tolist(PyObject *self, PyObject *unused) {
    (void)unused;
    if (tsp_enter()) return NULL;
    bool floating;
    int64_t n, pos = 0;
    void *buf = host_values(T(self), &floating, &n);
    if (!buf) return NULL;
    ts_shape s = ts_shape_of(T(self));
    PyObject *r = nested_list(&s, 0, ts_dtype_of(T(self)), floating, buf, &pos);
    free(buf);
    return r;
}

static PyObject *m_item(PyObject *self, PyObject *unused) {
    (void)unused;
    if (tsp_enter()) return NULL;
    ts_tensor *t = T(self);
    if (ts_numel(t) != 1) {
        PyErr_Format(PyExc_ValueError,
                     "item(): a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)ts_numel(t));
        return NULL;
    }
    ts_dtype dt = ts_dtype_of(t);
    if (ts_dtype_is_floating(dt)) {
        double v;
        TSP_NOGIL(v = ts_item(t););
        if (tsp_check()) return NULL;
        return PyFloat_FromDouble(v);
    }
    bool floating;
    int64_t n;
    void *buf = host_values(t, &floating, &n); /* integers exactly (ts_item goes through double) */
    if (!buf) return NULL;
    PyObject *r = scalar_obj(dt, false, buf, 0);
    free(buf);
    return r;
}

PyObject *tsp_tensor_float(PyObject *self) {
    PyObject *v = m_item(self, NULL);
    if (!v || PyFloat_CheckExact(v)) return v;
    PyObject *f = PyNumber_Float(v);
    Py_DECREF(v);
    return f;
}
PyObject *tsp_tensor_int(PyObject *self) {
    PyObject *v = m_item(self, NULL);
    if (!v || PyLong_CheckExact(v)) return v;
    PyObject *i = PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}
PyObject *tsp_tensor_index(PyObject *self) {
    if (ts_dtype_is_floating(ts_dtype_of(T(self))) || ts_numel(T(self)) != 1) {
        PyErr_SetString(PyExc_TypeError,
                        "only integer tensors of a single element can be converted to an index");
        return NULL;
    }
    return tsp_tensor_int(self);
}
int tsp_tensor_bool(PyObject *self) {
    if (ts_numel(T(self)) != 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Boolean value of Tensor with more than one value is ambiguous");
        return -1;
    }
    PyObject *v = m_item(self, NULL);
    if (!v) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}
Py_ssize_t tsp_tensor_length(PyObject *self) {
    if (ts_ndim(T(self)) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)ts_size(T(self), 0);
}

/* s with its first `from` replaced by `to` (s itself when absent); malloc'ed or s */
static char *replace_first(char *s, const char *from, const char *to) {
    char *at = strstr(s, from);
    if (!at) return s;
    size_t head = (size_t)(at - s), nfrom = strlen(from), nto = strlen(to);
    char *r = malloc(strlen(s) - nfrom + nto + 1);
    if (!r) return s;
    memcpy(r, s, head);
    memcpy(r + head, to, nto);
    strcpy(r + head + nto, at + nfrom);
    free(s);
    return r;
}

/* The C printer names every dtype but float32; torch names every dtype but the default one
 * (set_default_dtype): under another default, float32 is named and the default is not. */
static char *default_dtype_suffix(char *s, ts_dtype dt) {
    if (tsp_default_float == TS_F32 || (dt != TS_F32 && dt != tsp_default_float)) return s;
    char name[64];
    PyOS_snprintf(name, sizeof name, ", dtype=torch.%s", ts_dtype_name(tsp_default_float));
    if (dt != TS_F32) return replace_first(s, name, "");
    if (strstr(s, ", requires_grad=True"))
        return replace_first(s, ", requires_grad=True",
                             ", dtype=torch.float32, requires_grad=True");
    char *close = strrchr(s, ')');
    if (!close) return s;
    *close = '\0';
    size_t n = strlen(s) + 32;
    char *r = malloc(n);
    if (r)
        snprintf(r, n, "%s, dtype=torch.float32)", s);
    else
        *close = ')';
    return r ? (free(s), r) : s;
}

/* The C printer's text, with torch's grad_fn=<AddBackward0> for results of recorded ops
 * (requires_grad=True stays for leaves) and tessera's dtype names. */
PyObject *tsp_tensor_repr(PyObject *self) {
    if (tsp_tensor_is_quantized(T(self))) return tsp_quant_repr(self);
    char *s;
    TSP_NOGIL(s = ts_to_string(T(self)););
    if (!s) return tsp_raise_pending();
    s = default_dtype_suffix(s, ts_dtype_of(T(self)));
    const char *fn = ts_is_leaf(T(self)) ? NULL : ts_grad_fn_name(T(self));
    if (fn) {
        char grad_fn[128];
        PyOS_snprintf(grad_fn, sizeof grad_fn, "grad_fn=<%s>", fn);
        s = replace_first(s, "requires_grad=True", grad_fn);
    }
    s = replace_first(s, "dtype=torch.", "dtype=tessera.");
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

/* format(t, spec): a 0-dim tensor formats as its value (f"{loss:.4f}"), others as repr */
static PyObject *m_format(PyObject *self, PyObject *spec) {
    PyObject *v = ts_ndim(T(self)) == 0 ? m_item(self, NULL) : PyObject_Repr(self);
    if (!v) return NULL;
    PyObject *r = PyObject_Format(v, spec);
    Py_DECREF(v);
    return r;
}

/* A new meta leaf of that size and stride (a view of a meta storage just large enough); NULL with
 * the error set. Strides are >= 0 (the caller checks). */
static ts_tensor *meta_strided(ts_dtype dt, ts_shape size, const int64_t *stride, bool rg) {
    int64_t extent = 1; /* elements the layout spans */
    for (int d = 0; d < size.ndim; d++)
        extent = size.dims[d] == 0 || extent == 0 ? 0 : extent + (size.dims[d] - 1) * stride[d];
    ts_tensor *base = ts_empty(TS_SHAPE(extent), (ts_opts){.dtype = dt, .device = ts_meta()});
    ts_tensor *t = base ? ts_as_strided(base, size, stride, 0) : NULL;
    ts_release(base);
    if (t && rg) ts_set_requires_grad(t, true);
    return t;
}

/* copy.deepcopy(t): a new leaf with copied storage, the same requires_grad, type and attributes
 * (a meta tensor: its size and strides, as PyTorch's) */
static PyObject *m_deepcopy(PyObject *self, PyObject *memo) {
    ts_tensor *d = NULL, *c = NULL;
    if (ts_device_of(T(self)).type == TS_META) {
        ts_tensor *t = T(self);
        int64_t st[TS_MAX_DIMS];
        for (int k = 0; k < ts_ndim(t); k++) st[k] = ts_stride(t, k);
        TSP_NOGIL(c = meta_strided(ts_dtype_of(t), ts_shape_of(t), st, false));
    } else {
        d = ts_detach(T(self)), c = d ? ts_clone(d) : NULL;
    }
    tsp_drop(d);
    if (c && ts_error() == TS_OK) ts_set_requires_grad(c, ts_requires_grad(T(self)));
    PyObject *r = tsp_wrap_as(Py_TYPE(self), c);
    if (!r) return NULL;
    PyObject *dict = ((tsp_tensor *)self)->dict;
    if (PyDict_Check(memo)) { /* copy.deepcopy's memo: id(self) -> the copy */
        PyObject *key = PyLong_FromVoidPtr(self);
        int rc = key ? PyDict_SetItem(memo, key, r) : -1;
        Py_XDECREF(key);
        if (rc < 0) return Py_DECREF(r), NULL;
    }
    if (dict && PyDict_GET_SIZE(dict)) {
        PyObject *copy = PyImport_ImportModule("copy");
        PyObject *dc = copy ? PyObject_CallMethod(copy, "deepcopy", "OO", dict, memo) : NULL;
        Py_XDECREF(copy);
        if (!dc) return Py_DECREF(r), NULL;
        ((tsp_tensor *)r)->dict = dc;
    }
    return r;
}

/* a tuple of the ints v[0..n) */
static PyObject *int_tuple(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (!x) return Py_DECREF(t), NULL;
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* a meta tensor has no values: (tessera._C._rebuild_meta_tensor, (type, dtype name, size, stride,
 * requires_grad, attributes)), PyTorch's _rebuild_meta_tensor_no_storage with the type added */
static PyObject *reduce_meta(PyObject *self) {
    ts_tensor *t = T(self);
    const ts_shape s = ts_shape_of(t);
    int64_t st[TS_MAX_DIMS];
    for (int d = 0; d < s.ndim; d++) st[d] = ts_stride(t, d);
    PyObject *mod = PyImport_ImportModule("tessera._C");
    PyObject *fn = mod ? PyObject_GetAttrString(mod, "_rebuild_meta_tensor") : NULL;
    Py_XDECREF(mod);
    PyObject *size = fn ? int_tuple(s.dims, s.ndim) : NULL;
    PyObject *stride = size ? int_tuple(st, s.ndim) : NULL;
    PyObject *dict = ((tsp_tensor *)self)->dict;
    PyObject *r =
        stride ? Py_BuildValue("O(OsOOOO)", fn, (PyObject *)Py_TYPE(self),
                               ts_dtype_name(ts_dtype_of(t)), size, stride,
                               ts_requires_grad(t) ? Py_True : Py_False, dict ? dict : Py_None)
               : NULL;
    Py_XDECREF(fn), Py_XDECREF(size), Py_XDECREF(stride);
    return r;
}

/* pickle: (tessera._C._rebuild_tensor, (type, values as nested lists, dtype name, device,
 * requires_grad, attributes)); the values are exact in every dtype (f16/bf16 widen to double) */
static PyObject *m_reduce_ex(PyObject *self, PyObject *protocol) {
    (void)protocol;
    if (ts_device_of(T(self)).type == TS_META) return reduce_meta(self);
    PyObject *mod = PyImport_ImportModule("tessera._C");
    PyObject *fn = mod ? PyObject_GetAttrString(mod, "_rebuild_tensor") : NULL;
    Py_XDECREF(mod);
    PyObject *values = fn ? m_tolist(self, NULL) : NULL;
    PyObject *dev = values ? tsp_device_obj(ts_device_of(T(self))) : NULL;
    PyObject *dev_str = dev ? PyObject_Str(dev) : NULL;
    PyObject *dict = ((tsp_tensor *)self)->dict;
    PyObject *r = dev_str ? Py_BuildValue("O(OOsOOO)", fn, (PyObject *)Py_TYPE(self), values,
                                          ts_dtype_name(ts_dtype_of(T(self))), dev_str,
                                          ts_requires_grad(T(self)) ? Py_True : Py_False,
                                          dict ? dict : Py_None)
                          : NULL;
    Py_XDECREF(fn), Py_XDECREF(values), Py_XDECREF(dev), Py_XDECREF(dev_str);
    return r;
}
static PyObject *f_rebuild_tensor(PyObject *mod, PyObject *const *a, Py_ssize_t n) {
    (void)mod;
    ts_opts o = {0};
    ts_dtype dt = TS_DTYPE_DEFAULT;
    bool rg;
    if (n != 6 || !PyType_Check(a[0]) || !PyType_IsSubtype((PyTypeObject *)a[0], tsp_tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "_rebuild_tensor(): bad arguments");
        return NULL;
    }
    if (tsp_dtype_arg(a[2], &dt, "_rebuild_tensor", "dtype") < 0 ||
        tsp_device_arg(a[3], &o.device, "_rebuild_tensor", "device") < 0 ||
        tsp_bool_arg(a[4], false, &rg, "_rebuild_tensor", "requires_grad") < 0)
        return NULL;
    o.requires_grad = rg;
    ts_tensor *t = tsp_tensor_from_data(a[1], dt, o);
    PyObject *r = t ? tsp_wrap_as((PyTypeObject *)a[0], t) : NULL;
    if (r && a[5] != Py_None) {
        PyObject *d = PyDict_Copy(a[5]);
        if (!d) return Py_DECREF(r), NULL;
        ((tsp_tensor *)r)->dict = d;
    }
    return r;
}

/* _rebuild_meta_tensor(type, dtype, size, stride, requires_grad, attributes): a meta tensor of
 * that size and stride (a view of a meta storage just large enough), a leaf */
static PyObject *f_rebuild_meta_tensor(PyObject *mod, PyObject *const *a, Py_ssize_t n) {
    (void)mod;
    const char *fn = "_rebuild_meta_tensor";
    ts_dtype dt = TS_DTYPE_DEFAULT;
    ts_shape size, stride;
    bool rg;
    if (n != 6 || !PyType_Check(a[0]) || !PyType_IsSubtype((PyTypeObject *)a[0], tsp_tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "_rebuild_meta_tensor(): bad arguments");
        return NULL;
    }
    if (tsp_dtype_arg(a[1], &dt, fn, "dtype") < 0 || tsp_shape_arg(a[2], &size, fn, "size") < 0 ||
        tsp_shape_arg(a[3], &stride, fn, "stride") < 0 ||
        tsp_bool_arg(a[4], false, &rg, fn, "requires_grad") < 0)
        return NULL;
    if (stride.ndim != size.ndim) {
        PyErr_SetString(PyExc_ValueError,
                        "_rebuild_meta_tensor(): size and stride differ in length");
        return NULL;
    }
    for (int d = 0; d < size.ndim; d++) {
        if (size.dims[d] < 0 || stride.dims[d] < 0) {
            PyErr_SetString(PyExc_ValueError, "_rebuild_meta_tensor(): a negative size or stride");
            return NULL;
        }
    }
    ts_tensor *t = NULL;
    TSP_NOGIL(t = meta_strided(dt, size, stride.dims, rg));
    PyObject *r = t ? tsp_wrap_as((PyTypeObject *)a[0], t) : tsp_wrap(NULL);
    if (r && a[5] != Py_None) {
        PyObject *d = PyDict_Copy(a[5]);
        if (!d) return Py_DECREF(r), NULL;
        ((tsp_tensor *)r)->dict = d;
    }
    return r;
}

PyMethodDef tsp_tensor_values_methods[] = {
    {"item", m_item, METH_NOARGS, "the one element as a Python number"},
    {"tolist", m_tolist, METH_NOARGS, "the elements as nested lists"},
    {"__format__", m_format, METH_O, NULL},
    {"__deepcopy__", m_deepcopy, METH_O, NULL},
    {"__reduce_ex__", m_reduce_ex, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};
PyMethodDef tsp_tensor_values_functions[] = {
    {"_rebuild_tensor", FN(f_rebuild_tensor), METH_FASTCALL, "pickle's constructor of Tensors"},
    {"_rebuild_meta_tensor", FN(f_rebuild_meta_tensor), METH_FASTCALL,
     "pickle's constructor of meta Tensors"},
    {NULL, NULL, 0, NULL},
};
