/* tensor.c — the tessera.Tensor type: wrapping a ts_tensor, its lifetime, its attributes (shape,
 * dtype, device...), the queries (size, dim, numel...), tessera.Size, and the type's assembly.
 * Operators live in tensor_ops.c, shape ops in tensor_shape.c, reductions in tensor_reduce.c,
 * factories in tensor_factory.c, values to Python in tensor_values.c, moves and casts in
 * tensor_move.c. */
#include "tensor_impl.h"

#include <stdlib.h>
#include <string.h>

PyTypeObject *tsp_tensor_type;
static PyTypeObject tensor_type;

/* ------------------------------------------------------------------ wrapping */
void tsp_drop(ts_tensor *t) {
    if (ts_scope_depth() == 0) ts_release(t);
}
ts_tensor *tsp_own(ts_tensor *t) { return ts_scope_depth() > 0 ? ts_retain(t) : t; }

PyObject *tsp_wrap_as(PyTypeObject *type, ts_tensor *t) {
    /* Inside a C scope (a Python forward called by a C module) the scope owns t: Python takes a
     * reference of its own so the scope's end does not free what Python still holds. */
    if (!t || ts_error() != TS_OK) {
        tsp_drop(t);
        return tsp_raise_pending();
    }
    tsp_tensor *o;
    if (type == &tensor_type) {
        o = PyObject_GC_New(tsp_tensor, type);
        if (o) {
            o->weakrefs = NULL, o->dict = NULL;
            PyObject_GC_Track(o);
        }
    } else
        o = (tsp_tensor *)type->tp_alloc(type, 0);
    if (!o) {
        tsp_drop(t);
        return NULL;
    }
    o->t = tsp_own(t);
    return (PyObject *)o;
}

PyObject *tsp_wrap(ts_tensor *t) { return tsp_wrap_as(&tensor_type, t); }

ts_tensor *tsp_tensor_of(PyObject *o) {
    if (Py_IS_TYPE(o, &tensor_type) || PyObject_TypeCheck(o, &tensor_type))
        return ((tsp_tensor *)o)->t;
    return NULL;
}

ts_tensor *tsp_tensor_arg(PyObject *o, const char *fn, const char *arg) {
    ts_tensor *t = o ? tsp_tensor_of(o) : NULL;
    if (!t && !tsp_sparse_arg_error(o, fn, arg))
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be Tensor, not %.100s", fn, arg,
                     o ? Py_TYPE(o)->tp_name : "nothing");
    return t;
}

PyObject *tsp_unary(ts_tensor *(*f)(ts_tensor *), ts_tensor *t) {
    if (tsp_enter()) return NULL;
    ts_tensor *r;
    TSP_NOGIL(r = f(t););
    return tsp_wrap(r);
}

#define T(self) (((tsp_tensor *)(self))->t)

PyObject *tsp_inplace_result(PyObject *self, ts_tensor *r) {
    if (!r || ts_error() != TS_OK) return tsp_raise_pending();
    tsp_drop(r); /* outside a scope the op's reference is ours */
    return Py_NewRef(self);
}

/* ------------------------------------------------------------------ lifetime */
static void tensor_dealloc(PyObject *self) {
    tsp_tensor *o = (tsp_tensor *)self;
    PyObject_GC_UnTrack(self);
    if (o->weakrefs) PyObject_ClearWeakRefs(self);
    Py_CLEAR(o->dict);
    ts_tensor *t = o->t;
    o->t = NULL;
    ts_release(t);
    Py_TYPE(self)->tp_free(self);
}
static int tensor_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((tsp_tensor *)self)->dict);
    Py_VISIT(Py_TYPE(self)); /* instances of heap subclasses own their type */
    return 0;
}
static int tensor_clear(PyObject *self) {
    Py_CLEAR(((tsp_tensor *)self)->dict);
    return 0;
}

/* ------------------------------------------------------------------ tessera.Size */
static PyTypeObject size_type;

PyObject *tsp_size_obj(ts_shape s) {
    PyObject *tup = PyTuple_New(s.ndim);
    if (!tup) return NULL;
    for (int i = 0; i < s.ndim; i++) {
        PyObject *d = PyLong_FromLongLong(s.dims[i]);
        if (!d) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, d);
    }
    PyObject *size = PyObject_CallOneArg((PyObject *)&size_type, tup);
    Py_DECREF(tup);
    return size;
}
static PyObject *size_repr(PyObject *self) {
    PyObject *list = PySequence_List(self);
    if (!list) return NULL;
    PyObject *r = PyUnicode_FromFormat("tessera.Size(%R)", list);
    Py_DECREF(list);
    return r;
}
static PyObject *size_numel(PyObject *self, PyObject *unused) {
    (void)unused;
    long long n = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(self, i));
        if (d == -1 && PyErr_Occurred()) return NULL;
        n *= d;
    }
    return PyLong_FromLongLong(n);
}
static PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, "the number of elements a tensor of this shape has"},
    {NULL, NULL, 0, NULL},
};
static PyTypeObject size_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.Size",
    .tp_basicsize = 0, /* set from tuple's at init */
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_TUPLE_SUBCLASS,
    .tp_doc = "A tensor's shape: a tuple of ints (like torch.Size).",
    .tp_repr = size_repr,
    .tp_methods = size_methods,
};

/* ------------------------------------------------------------------ attributes */
static PyObject *get_shape(PyObject *self, void *unused) {
    (void)unused;
    return tsp_size_obj(ts_shape_of(T(self)));
}
static PyObject *get_dtype(PyObject *self, void *unused) {
    (void)unused;
    return tsp_dtype_obj(ts_dtype_of(T(self)));
}
static PyObject *get_device(PyObject *self, void *unused) {
    (void)unused;
    return tsp_device_obj(ts_device_of(T(self)));
}
static PyObject *get_ndim(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromLong(ts_ndim(T(self)));
}
static PyObject *get_is_cuda(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_device_of(T(self)).type == TS_CUDA);
}
static PyObject *get_is_cpu(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_device_of(T(self)).type == TS_CPU);
}
static PyObject *get_is_meta(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_device_of(T(self)).type == TS_META);
}
/* is_xpu, is_mps: PyTorch's checks for devices tessera has no backend for: always False */
static PyObject *get_false(PyObject *self, void *unused) {
    (void)self, (void)unused;
    Py_RETURN_FALSE;
}
static PyObject *get_t_attr(PyObject *self, void *unused) {
    (void)unused;
    const int nd = ts_ndim(T(self));
    if (nd <= 2) return tsp_unary(ts_t, T(self));
    ts_dims rev = {.n = nd}; /* PyTorch's x.T on more dims: all dims reversed */
    for (int i = 0; i < nd; i++) rev.d[i] = nd - 1 - i;
    ts_tensor *r;
    TSP_NOGIL(r = ts_permute(T(self), rev));
    return tsp_wrap(r);
}
static PyObject *get_data(PyObject *self, void *unused) {
    (void)unused;
    return tsp_wrap(ts_detach(T(self)));
}
/* p.data = x: the same C tensor now shares x's storage (ts_tensor_set_data), keeping its
 * requires_grad, grad and graph — so a C optimizer or C module holding it sees the new weight (a
 * fresh C tensor in the object would leave them on the old one). */
static int set_data(PyObject *self, PyObject *value, void *unused) {
    (void)unused;
    ts_tensor *v = value ? tsp_tensor_arg(value, "Tensor.data", "value") : NULL;
    if (!v) return -1;
    ts_tensor_set_data(T(self), v);
    return tsp_check();
}

static PyGetSetDef core_getset[] = {
    {"shape", get_shape, NULL, "the shape (tessera.Size)", NULL},
    {"dtype", get_dtype, NULL, "the element type", NULL},
    {"device", get_device, NULL, "the device the tensor lives on", NULL},
    {"ndim", get_ndim, NULL, "the number of dims", NULL},
    {"is_cuda", get_is_cuda, NULL, "on a CUDA device", NULL},
    {"is_cpu", get_is_cpu, NULL, "on the cpu", NULL},
    {"is_meta", get_is_meta, NULL, "on the meta device (a shape and dtype, no data)", NULL},
    {"is_xpu", get_false, NULL, "on an XPU (always False: no such backend)", NULL},
    {"is_mps", get_false, NULL, "on an MPS device (always False: no such backend)", NULL},
    {"T", get_t_attr, NULL, "the transpose (2-D)", NULL},
    {"data", get_data, set_data, "the tensor detached from autograd (shares storage)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------------ queries */
static PyObject *m_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"dim"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "size", names, 1, 0, a) < 0) return NULL;
    if (!a[0] || a[0] == Py_None) return tsp_size_obj(ts_shape_of(T(self)));
    int64_t d;
    if (tsp_int_arg(a[0], &d, "size", "dim") < 0) return NULL;
    int64_t n = ts_size(T(self), (int)d);
    if (tsp_check()) return NULL;
    return PyLong_FromLongLong(n);
}
static PyObject *m_stride(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"dim"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "stride", names, 1, 0, a) < 0) return NULL;
    int nd = ts_ndim(T(self));
    if (a[0] && a[0] != Py_None) {
        int64_t d;
        if (tsp_int_arg(a[0], &d, "stride", "dim") < 0) return NULL;
        int64_t s = ts_stride(T(self), (int)d);
        if (tsp_check()) return NULL;
        return PyLong_FromLongLong(s);
    }
    PyObject *tup = PyTuple_New(nd);
    for (int i = 0; tup && i < nd; i++) {
        PyObject *v = PyLong_FromLongLong(ts_stride(T(self), i));
        if (!v) return Py_DECREF(tup), NULL;
        PyTuple_SET_ITEM(tup, i, v);
    }
    return tup;
}
static PyObject *m_dim(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(ts_ndim(T(self)));
}
static PyObject *m_numel(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(ts_numel(T(self)));
}
static PyObject *m_element_size(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(ts_element_size(T(self)));
}
static PyObject *m_is_contiguous(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kw) {
    static const char *const names[] = {"memory_format"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "is_contiguous", names, 1, 0, a) < 0) return NULL;
    const int f = tsp_memory_format_arg(a[0], "is_contiguous");
    if (f == -2) return NULL;
    return PyBool_FromLong(
        ts_is_contiguous_format(T(self), f < 0 ? TS_CONTIGUOUS_FORMAT : (ts_memory_format)f));
}
static PyObject *m_is_pinned(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_is_pinned(T(self)));
}
static PyObject *m_is_floating_point(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_dtype_is_floating(ts_dtype_of(T(self))));
}
static PyObject *m_storage_offset(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(ts_storage_offset(T(self)));
}
static PyObject *m_get_device(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_device d = ts_device_of(T(self));
    return PyLong_FromLong(d.type == TS_CPU ? -1 : d.index);
}

/* iter(t): the rows (torch iterates over unbind(0)) */
static PyObject *tensor_iter(PyObject *self) {
    if (ts_ndim(T(self)) == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    PyObject *rows = PyObject_CallMethod(self, "unbind", NULL);
    if (!rows) return NULL;
    PyObject *it = PyObject_GetIter(rows);
    Py_DECREF(rows);
    return it;
}

/* Tensor._make_subclass(cls, data, require_grad=False): nn.Parameter's constructor (torch's) */
static PyObject *m_make_subclass(PyObject *cls, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kw) {
    static const char *const names[] = {"cls", "data", "require_grad"};
    PyObject *a[3];
    if (tsp_parse(args, nargs, kw, "_make_subclass", names, 3, 2, a) < 0) return NULL;
    (void)cls;
    bool rg;
    ts_tensor *data = tsp_tensor_arg(a[1], "_make_subclass", "data");
    if (!data || tsp_bool_arg(a[2], false, &rg, "_make_subclass", "require_grad") < 0) return NULL;
    if (!PyType_Check(a[0]) || !PyType_IsSubtype((PyTypeObject *)a[0], &tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "_make_subclass(): cls must be a subclass of Tensor");
        return NULL;
    }
    ts_tensor *t = ts_detach(data);
    if (t && ts_error() == TS_OK) ts_set_requires_grad(t, rg);
    return tsp_wrap_as((PyTypeObject *)a[0], t);
}

/* t.as_subclass(cls): torch's: a cls instance aliasing t's data that stays attached to the autograd
 * graph (a differentiable view of the whole tensor; gradients flow back to t) */
static PyObject *m_as_subclass(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "as_subclass(): cls must be a subclass of Tensor");
        return NULL;
    }
    if (tsp_enter() < 0) return NULL;
    return tsp_wrap_as((PyTypeObject *)cls, ts_view(T(self), ts_shape_of(T(self))));
}

PyMethodDef tsp_tensor_core_methods[] = {
    {"size", FN(m_size), FAST, "size(dim=None): the shape, or one dim's size"},
    {"stride", FN(m_stride), FAST, "stride(dim=None)"},
    {"dim", m_dim, METH_NOARGS, "the number of dims"},
    {"ndimension", m_dim, METH_NOARGS, "the number of dims"},
    {"numel", m_numel, METH_NOARGS, "the number of elements"},
    {"nelement", m_numel, METH_NOARGS, "the number of elements"},
    {"element_size", m_element_size, METH_NOARGS, "bytes per element"},
    {"is_contiguous", FN(m_is_contiguous), FAST, NULL},
    {"is_pinned", m_is_pinned, METH_NOARGS, NULL},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, NULL},
    {"storage_offset", m_storage_offset, METH_NOARGS, NULL},
    {"get_device", m_get_device, METH_NOARGS, "the device index (-1 on the cpu)"},
    {"_make_subclass", FN(m_make_subclass), FAST | METH_CLASS, NULL},
    {"as_subclass", m_as_subclass, METH_O, "as_subclass(cls): a cls alias that keeps the graph"},
    {"__dlpack__", FN(tsp_tensor_dlpack), METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", tsp_tensor_dlpack_device, METH_NOARGS, NULL},
    {"numpy", tsp_tensor_numpy, METH_NOARGS, "a NumPy array (zero-copy on the cpu)"},
    {"__array__", (PyCFunction)(void (*)(void))tsp_tensor_array, METH_VARARGS | METH_KEYWORDS,
     "NumPy's array protocol: numpy(), cast to dtype when given"},
    {"__array_wrap__", (PyCFunction)(void (*)(void))tsp_tensor_array_wrap,
     METH_VARARGS | METH_KEYWORDS, "NumPy's result of a function of the tensor: from_numpy"},
    {NULL, NULL, 0, NULL},
};

/* _live_tensors(device="cpu"): tensors alive on a device (the C core's memory statistics) */
static PyObject *f_live_tensors(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kw) {
    (void)mod;
    static const char *const names[] = {"device"};
    PyObject *a[1];
    ts_device d = ts_cpu();
    ts_mem_stats st;
    if (tsp_parse(args, nargs, kw, "_live_tensors", names, 1, 0, a) < 0 ||
        (a[0] && tsp_device_arg(a[0], &d, "_live_tensors", "device") < 0))
        return NULL;
    if (ts_memory_stats(d, &st) != TS_OK) return tsp_raise_pending();
    return PyLong_FromLongLong(st.live_tensors);
}
/* _scope_begin() / _scope_end(): a C scope around Python code, as when the C core calls back into
 * Python (tests use it to check that Tensors survive the scope's end) */
static PyObject *f_scope_begin(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    ts_scope_begin();
    Py_RETURN_NONE;
}
static PyObject *f_scope_end(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    ts_scope_end();
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}
static PyMethodDef type_functions[] = {
    {"_scope_begin", f_scope_begin, METH_NOARGS, NULL},
    {"_scope_end", f_scope_end, METH_NOARGS, NULL},
    {"_live_tensors", FN(f_live_tensors), FAST, "_live_tensors(device=\"cpu\")"},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ the type */
static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);

static PyMappingMethods tensor_as_mapping = {
    .mp_length = tsp_tensor_length,
    .mp_subscript = tsp_tensor_getitem,
    .mp_ass_subscript = tsp_tensor_setitem,
};

static PyTypeObject tensor_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.Tensor",
    .tp_basicsize = sizeof(tsp_tensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A tensor on a device (cpu, cuda:N, sim:N), backed by Tessera's C core.",
    .tp_dealloc = tensor_dealloc,
    .tp_traverse = tensor_traverse,
    .tp_clear = tensor_clear,
    .tp_repr = tsp_tensor_repr,
    .tp_as_mapping = &tensor_as_mapping,
    .tp_iter = tensor_iter,
    .tp_weaklistoffset = offsetof(tsp_tensor, weakrefs),
    .tp_dictoffset = offsetof(tsp_tensor, dict),
    .tp_new = tensor_new,
};

/* Tensor(), Tensor(*sizes), Tensor(data): torch.Tensor's legacy constructor (the default dtype) */
static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Tensor(): takes no keyword arguments");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *a0 = n == 1 ? PyTuple_GET_ITEM(args, 0) : NULL;
    int nd = a0 && PyIndex_Check(a0) ? tsp_is_ndarray(a0, 0) : 0; /* an array has __index__ */
    if (nd < 0) return NULL;
    if (a0 && (nd || !PyIndex_Check(a0)) && !Py_IS_TYPE(a0, &size_type)) { /* Size: a shape */
        ts_tensor *t =
            tsp_tensor_from_data(PyTuple_GET_ITEM(args, 0), tsp_default_float, (ts_opts){0});
        return t ? tsp_wrap_as(type, t) : NULL;
    }
    ts_shape s = {.ndim = 1};
    if (n && tsp_shape_args(args, 0, &s, "Tensor") < 0) return NULL;
    return tsp_wrap_as(type, ts_empty(s, (ts_opts){.dtype = tsp_default_float}));
}

/* all tables of the pieces, concatenated into one (the type wants one array) */
extern PyMethodDef tsp_tensor_python_methods[];       /* tensor_python_methods.c (issue 52) */
extern PyMethodDef tsp_tensor_inplace_methods[];      /* tensor_inplace.c (issue 53) */
extern PyMethodDef tsp_tensor_view_inplace_methods[]; /* tensor_view_inplace.c (issue 53) */
extern PyMethodDef tsp_tensor_storage_methods[];      /* tensor_storage.c (issue 53) */
extern PyMethodDef tsp_tensor_shared_methods[];       /* tensor_shared.c (issue 53) */
extern PyMethodDef tsp_tensor_shared_functions[];     /* tensor_shared.c (issue 53) */

static PyMethodDef *concat_methods(PyMethodDef *const *parts, int n) {
    size_t count = 1;
    for (int i = 0; i < n; i++)
        for (PyMethodDef *d = parts[i]; d->ml_name; d++) count++;
    PyMethodDef *all = PyMem_Calloc(count, sizeof *all), *p = all;
    if (!all) return (PyMethodDef *)PyErr_NoMemory();
    for (int i = 0; i < n; i++)
        for (PyMethodDef *d = parts[i]; d->ml_name; d++) *p++ = *d;
    return all; /* kept for the process, as the type is */
}
static PyGetSetDef *concat_getset(PyGetSetDef *const *parts, int n) {
    size_t count = 1;
    for (int i = 0; i < n; i++)
        for (PyGetSetDef *d = parts[i]; d->name; d++) count++;
    PyGetSetDef *all = PyMem_Calloc(count, sizeof *all), *p = all;
    if (!all) return (PyGetSetDef *)PyErr_NoMemory();
    for (int i = 0; i < n; i++)
        for (PyGetSetDef *d = parts[i]; d->name; d++) *p++ = *d;
    return all;
}

static int add_type(PyObject *m, const char *name, PyTypeObject *t) {
    if (PyType_Ready(t) < 0) return -1;
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) return Py_DECREF(t), -1;
    return 0;
}

int tsp_init_tensor(PyObject *m) {
    PyMethodDef *const methods[] = {
        tsp_tensor_core_methods,          tsp_tensor_ops_methods,     tsp_tensor_select_methods,
        tsp_tensor_shape_methods,         tsp_tensor_reduce_methods,  tsp_autograd_methods,
        tsp_tensor_factory_methods,       tsp_tensor_values_methods,  tsp_tensor_move_methods,
        tsp_tensor_special_methods,       tsp_tensor_linalg_methods,  tsp_tensor_rearrange_methods,
        tsp_tensor_index_forms_methods,   tsp_tensor_sort_methods,    tsp_tensor_logic_methods,
        tsp_tensor_linalg_decomp_methods, tsp_tensor_python_methods,  tsp_tensor_inplace_methods,
        tsp_tensor_view_inplace_methods,  tsp_tensor_storage_methods, tsp_tensor_shared_methods,
        tsp_tensor_complex_methods,       tsp_tensor_sparse_methods,  tsp_tensor_scatter_methods,
        tsp_tensor_statistics_methods,    tsp_tensor_quant_methods};
    PyGetSetDef *const getsets[] = {core_getset,
                                    tsp_autograd_getset,
                                    tsp_tensor_linalg_getset,
                                    tsp_tensor_complex_getset,
                                    tsp_tensor_sparse_getset,
                                    tsp_tensor_quant_getset};
    tensor_type.tp_methods = concat_methods(methods, (int)(sizeof methods / sizeof *methods));
    tensor_type.tp_getset = concat_getset(getsets, (int)(sizeof getsets / sizeof *getsets));
    if (!tensor_type.tp_methods || !tensor_type.tp_getset) return -1;
    tensor_type.tp_as_number = &tsp_tensor_as_number;
    tensor_type.tp_richcompare = tsp_tensor_richcompare;
    tensor_type.tp_hash =
        PyBaseObject_Type.tp_hash; /* by identity, like torch (== is elementwise) */
    tsp_tensor_as_number.nb_float = tsp_tensor_float;
    tsp_tensor_as_number.nb_int = tsp_tensor_int;
    tsp_tensor_as_number.nb_index = tsp_tensor_index;
    tsp_tensor_as_number.nb_bool = tsp_tensor_bool;
    size_type.tp_base = &PyTuple_Type;
    size_type.tp_new = PyTuple_Type.tp_new;
    tsp_tensor_type = &tensor_type;
    tsp_init_tensor_special(); /* before PyType_Ready: `%` gets __mod__ and __rmod__ too */
    if (add_type(m, "Tensor", &tensor_type) < 0 || add_type(m, "Size", &size_type) < 0) return -1;
    PyMethodDef *const functions[] = {
        tsp_tensor_core_functions,         tsp_tensor_ops_functions,
        tsp_tensor_select_functions,       tsp_tensor_shape_functions,
        tsp_tensor_reduce_functions,       tsp_tensor_special_functions,
        tsp_tensor_linalg_functions,       tsp_tensor_rearrange_functions,
        tsp_tensor_index_forms_functions,  tsp_tensor_sort_functions,
        tsp_tensor_logic_functions,        tsp_tensor_linalg_decomp_functions,
        tsp_tensor_complex_functions,      tsp_tensor_scatter_functions,
        tsp_tensor_statistics_functions,   tsp_tensor_quant_functions,
        tsp_tensor_qops_functions,         tsp_tensor_numeric_functions,
        tsp_tensor_linalg_forms_functions, tsp_tensor_qobserver_functions,
        tsp_tensor_torch_forms_functions,  tsp_tensor_sparse_coo_functions};
    if (tsp_init_tensor_linalg() < 0 || tsp_init_tensor_sort() < 0) return -1;
    for (int i = 0; i < (int)(sizeof functions / sizeof *functions); i++)
        if (PyModule_AddFunctions(m, functions[i]) < 0) return -1;
    if (PyModule_AddFunctions(m, type_functions) < 0 ||
        PyModule_AddFunctions(m, tsp_tensor_values_functions) < 0 ||
        PyModule_AddFunctions(m, tsp_tensor_shared_functions) < 0)
        return -1;
    return tsp_init_tensor_ops(m) < 0 ? -1 : tsp_init_tensor_reduce(m);
}
