/* dlpack.c — tensors shared with NumPy, PyTorch and any DLPack consumer without a copy:
 * Tensor.__dlpack__ / __dlpack_device__ / numpy(), and tessera.from_dlpack, from_numpy,
 * as_tensor (and _data_ptr for tests), all over the C API's ts_to_dlpack / ts_from_dlpack.
 * Sim devices exist only inside Tessera: ts_to_dlpack refuses them, so __dlpack_device__ names
 * them kDLExtDev (12) and __dlpack__ exports them only as a copy, when asked for dl_device=(1, 0).
 */
#include "tensor_impl.h"

#include <dlpack/dlpack.h>

static const char CAPSULE[] = "dltensor";   /* the DLPack Python spec's names */
static const char USED[] = "used_dltensor"; /* a consumer renames what it took */
#define DL_BOOL 6 /* DLPack 0.8's kDLBool, which Debian's 0.6 header lacks */

static PyObject *module; /* tessera._C, whose tensor() makes tensors of lists */

/* ------------------------------------------------------------------ export */
/* Runs when the capsule dies: the deleter belongs to whoever consumed it, unless nobody did. */
static void capsule_free(PyObject *cap) {
    if (!PyCapsule_IsValid(cap, CAPSULE)) return;
    DLManagedTensor *m = PyCapsule_GetPointer(cap, CAPSULE);
    if (m && m->deleter) m->deleter(m);
}

static DLDevice dl_device_of(ts_device d) {
    if (d.type == TS_CPU) return (DLDevice){kDLCPU, 0};
    if (d.type == TS_CUDA) return (DLDevice){kDLCUDA, d.index};
    return (DLDevice){kDLExtDev, d.index}; /* sim */
}

static int buffer_error(const char *fmt, const char *arg) {
    PyErr_Format(PyExc_BufferError, fmt, arg);
    return -1;
}

/* dl_device=(type, id) */
static int dl_device_arg(PyObject *o, DLDevice *out) {
    int type, id;
    if (!PyTuple_Check(o) || !PyArg_ParseTuple(o, "ii", &type, &id)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "__dlpack__(): argument 'dl_device' must be a tuple (device_type, device_id), "
                     "not %s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = (DLDevice){(DLDeviceType)type, id};
    return 0;
}

/* copy=None / True / False -> -1 (as needed), 1, 0; -2 with an exception */
static int copy_arg(PyObject *o) {
    return o == Py_None ? -1 : PyObject_IsTrue(o) < 0 ? -2 : PyObject_IsTrue(o);
}

/* What __dlpack__ exports: t itself, a clone (copy=True) or a cpu copy (dl_device=(1, 0)). */
static int export_source(ts_tensor *t, DLDevice want, int copy, ts_tensor **src) {
    DLDevice own = dl_device_of(ts_device_of(t));
    bool to_cpu = want.device_type != own.device_type || want.device_id != own.device_id;
    const char *dev = ts_device_str(ts_device_of(t));
    if (to_cpu && !(want.device_type == kDLCPU && want.device_id == 0))
        return buffer_error("__dlpack__: a tensor on %s exports to its own device or to the cpu "
                            "(dl_device=(1, 0)) only",
                            dev);
    if (to_cpu && copy == 0)
        return buffer_error("__dlpack__: a tensor on %s needs a copy to reach the cpu, and copy "
                            "is False",
                            dev);
    if (own.device_type == kDLExtDev && !to_cpu)
        return buffer_error("__dlpack__: %s has no DLPack device type (sim devices exist only "
                            "inside Tessera); use .cpu() or __dlpack__(dl_device=(1, 0))",
                            dev);
    TSP_NOGIL(*src = to_cpu ? ts_to(t, ts_cpu()) : copy == 1 ? ts_clone(t) : ts_retain(t););
    return *src ? 0 : (tsp_raise_pending(), -1);
}

PyObject *tsp_tensor_dlpack(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    /* max_version is read and ignored: the C API makes DLPack 0.6 ("dltensor") capsules, which
     * the spec lets a producer return whatever version the consumer could take */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OOO:__dlpack__", kw, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    if (stream != Py_None && !PyLong_Check(stream))
        return PyErr_Format(PyExc_TypeError,
                            "__dlpack__(): argument 'stream' must be None or int, not %s",
                            Py_TYPE(stream)->tp_name);
    ts_tensor *t = tsp_tensor_of(self), *src;
    if (ts_requires_grad(t))
        return PyErr_Format(PyExc_BufferError,
                            "Can't export tensors that require gradient, use tensor.detach()");
    DLDevice want = dl_device_of(ts_device_of(t));
    int cp = copy_arg(copy);
    if (cp == -2 || (dl_device != Py_None && dl_device_arg(dl_device, &want) < 0) ||
        export_source(t, want, cp, &src) < 0)
        return NULL;
    DLManagedTensor *m; /* the capsule keeps the memory alive, not src */
    TSP_NOGIL(m = ts_to_dlpack(src); ts_release(src););
    if (!m) return tsp_raise_pending();
    PyObject *cap = PyCapsule_New(m, CAPSULE, capsule_free);
    if (!cap) m->deleter(m);
    return cap;
}

PyObject *tsp_tensor_dlpack_device(PyObject *self, PyObject *unused) {
    (void)unused;
    DLDevice d = dl_device_of(ts_device_of(tsp_tensor_of(self)));
    return Py_BuildValue("(ii)", (int)d.device_type, d.device_id);
}

/* ------------------------------------------------------------------ numpy() */
/* What a NumPy array made by numpy() keeps alive (its base): the exported memory, described to
 * NumPy by __array_interface__ (writable, unlike numpy.from_dlpack's arrays in NumPy 1.x). */
typedef struct array_owner {
    PyObject_HEAD PyObject *interface;
    DLManagedTensor *m;
} array_owner;

static void owner_dealloc(PyObject *self) {
    array_owner *o = (array_owner *)self;
    Py_XDECREF(o->interface);
    if (o->m && o->m->deleter) o->m->deleter(o->m);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *owner_interface(PyObject *self, void *unused) {
    (void)unused;
    PyObject *i = ((array_owner *)self)->interface;
    Py_INCREF(i);
    return i;
}

static PyGetSetDef owner_getset[] = {
    {"__array_interface__", owner_interface, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject owner_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._ArrayOwner",
    .tp_basicsize = sizeof(array_owner),
    .tp_dealloc = owner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_getset = owner_getset,
    .tp_doc = "the memory of a Tensor shared with a NumPy array",
};

/* NumPy's type string ("<f4") of a dtype, NULL when NumPy has none (bfloat16) */
static const char *typestr(ts_dtype dt) {
    static const char *const le[TS_DTYPE_COUNT] = {
        [TS_F32] = "<f4", [TS_F64] = "<f8",  [TS_F16] = "<f2", [TS_I64] = "<i8",   [TS_I32] = "<i4",
        [TS_U8] = "|u1",  [TS_BOOL] = "|b1", [TS_I8] = "|i1",  [TS_I16] = "<i2",   [TS_U16] = "<u2",
        [TS_U32] = "<u4", [TS_U64] = "<u8",  [TS_C64] = "<c8", [TS_C128] = "<c16",
    };
    static const char *const be[TS_DTYPE_COUNT] = {
        [TS_F32] = ">f4", [TS_F64] = ">f8",  [TS_F16] = ">f2", [TS_I64] = ">i8",   [TS_I32] = ">i4",
        [TS_U8] = "|u1",  [TS_BOOL] = "|b1", [TS_I8] = "|i1",  [TS_I16] = ">i2",   [TS_U16] = ">u2",
        [TS_U32] = ">u4", [TS_U64] = ">u8",  [TS_C64] = ">c8", [TS_C128] = ">c16",
    };
    return (unsigned)dt < TS_DTYPE_COUNT ? (PY_LITTLE_ENDIAN ? le : be)[dt] : NULL;
}

static PyObject *int64_tuple(const int64_t *v, int n, int64_t scale) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i] * scale);
        if (!x) return Py_DECREF(t), NULL;
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* The __array_interface__ (version 3) of an exported cpu tensor. */
static PyObject *array_interface(const DLManagedTensor *m, const char *ty, size_t esize) {
    const DLTensor *d = &m->dl_tensor;
    PyObject *shape = int64_tuple(d->shape, d->ndim, 1);
    PyObject *strides = int64_tuple(d->strides, d->ndim, (int64_t)esize);
    PyObject *i =
        shape && strides
            ? Py_BuildValue("{s:i,s:O,s:O,s:s,s:(NO)}", "version", 3, "shape", shape, "strides",
                            strides, "typestr", ty, "data", PyLong_FromVoidPtr(d->data), Py_False)
            : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return i;
}

static PyObject *numpy_refusal(ts_tensor *t) {
    if (ts_requires_grad(t))
        return PyErr_Format(PyExc_RuntimeError,
                            "Can't call numpy() on Tensor that requires grad. Use "
                            "tensor.detach().numpy() instead.");
    if (ts_device_of(t).type != TS_CPU)
        return PyErr_Format(PyExc_TypeError,
                            "can't convert %s device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.",
                            ts_device_str(ts_device_of(t)));
    return PyErr_Format(PyExc_TypeError, "Got unsupported ScalarType %s",
                        ts_dtype_name(ts_dtype_of(t)));
}

/* numpy.asarray over an owner of the exported memory: the array shares the tensor's memory */
static PyObject *shared_array(PyObject *np, DLManagedTensor *m, const char *ty, size_t esize) {
    array_owner *o = PyObject_New(array_owner, &owner_type);
    if (!o) return m->deleter(m), NULL;
    o->m = m;
    o->interface = array_interface(m, ty, esize);
    PyObject *a = o->interface ? PyObject_CallMethod(np, "asarray", "O", o) : NULL;
    Py_DECREF(o);
    return a;
}

PyObject *tsp_tensor_numpy(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_tensor *t = tsp_tensor_of(self);
    const char *ty = typestr(ts_dtype_of(t));
    if (ts_requires_grad(t) || ts_device_of(t).type != TS_CPU || !ty) return numpy_refusal(t);
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return NULL;
    PyObject *a;
    if (ts_numel(t) == 0) { /* no memory to share (its address may be NULL) */
        PyObject *shape = int64_tuple(ts_shape_of(t).dims, ts_ndim(t), 1);
        a = shape ? PyObject_CallMethod(np, "empty", "Os", shape, ty) : NULL;
        Py_XDECREF(shape);
    } else {
        DLManagedTensor *m = ts_to_dlpack(t);
        a = m ? shared_array(np, m, ty, ts_element_size(t)) : tsp_raise_pending();
    }
    Py_DECREF(np);
    return a;
}

/* __array__(dtype=None, copy=None): NumPy's protocol (np.array(t), np.asarray(t)) as PyTorch's:
 * numpy(), then astype(dtype) when a dtype is asked for. copy=False cannot be promised for a cast;
 * otherwise the array shares the tensor's memory (np.array copies it by itself). */
PyObject *tsp_tensor_array(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", names, &dtype, &copy)) return NULL;
    PyObject *a = tsp_tensor_numpy(self, NULL);
    if (!a || dtype == Py_None) return a;
    PyObject *meth = PyObject_GetAttrString(a, "astype"), *pos = PyTuple_Pack(1, dtype),
             *kwargs = Py_BuildValue("{sO}", "copy", copy == Py_None ? Py_False : copy);
    PyObject *r = meth && pos && kwargs ? PyObject_Call(meth, pos, kwargs) : NULL;
    Py_XDECREF(meth), Py_XDECREF(pos), Py_XDECREF(kwargs);
    Py_DECREF(a);
    return r;
}

/* ------------------------------------------------------------------ import */
/* Takes the DLManagedTensor of a "dltensor" capsule: the tensor owns it from then on and the
 * capsule is renamed, so that its destructor leaves it alone. */
static PyObject *import_capsule(PyObject *cap) {
    if (PyCapsule_IsValid(cap, USED))
        return PyErr_Format(PyExc_RuntimeError,
                            "from_dlpack received an invalid capsule. Note that DLTensor capsules "
                            "can be consumed only once, so you might have already constructed a "
                            "tensor from it once.");
    if (!PyCapsule_IsValid(cap, CAPSULE))
        return PyErr_Format(PyExc_TypeError,
                            "from_dlpack(): expected a \"dltensor\" capsule (DLPack 0.6), got one "
                            "named \"%s\"",
                            PyCapsule_GetName(cap) ? PyCapsule_GetName(cap) : "(null)");
    ts_tensor *t = ts_from_dlpack(PyCapsule_GetPointer(cap, CAPSULE));
    if (!t) return tsp_raise_pending(); /* the capsule still owns it */
    PyCapsule_SetName(cap, USED);
    return tsp_wrap(t);
}

/* obj.__dlpack__(): a cuda producer is asked to order its work before the legacy default stream
 * (1), which every blocking stream waits for; the cpu has no streams (None). */
static PyObject *import_protocol(PyObject *obj) {
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    int type = kDLCPU, id = 0;
    if (!dev)
        PyErr_Clear();
    else if (!PyTuple_Check(dev) || !PyArg_ParseTuple(dev, "ii", &type, &id)) {
        if (!PyTuple_Check(dev))
            PyErr_Format(PyExc_TypeError,
                         "from_dlpack(): __dlpack_device__() must return a (device_type, "
                         "device_id) tuple, not %.100s",
                         Py_TYPE(dev)->tp_name);
        return Py_DECREF(dev), NULL;
    }
    Py_XDECREF(dev);
    PyObject *args = PyTuple_New(0);
    PyObject *kw = type == kDLCUDA ? Py_BuildValue("{s:i}", "stream", 1) : NULL;
    PyObject *fn = PyObject_GetAttrString(obj, "__dlpack__");
    PyObject *cap = fn && args ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(fn), Py_XDECREF(args), Py_XDECREF(kw);
    if (!cap) return NULL;
    PyObject *r = PyCapsule_CheckExact(cap)
                      ? import_capsule(cap)
                      : PyErr_Format(PyExc_TypeError, "__dlpack__() returned %s, not a capsule",
                                     Py_TYPE(cap)->tp_name);
    Py_DECREF(cap);
    return r;
}

static PyObject *from_dlpack(PyObject *unused, PyObject *obj) {
    (void)unused;
    ts_tensor *t = tsp_tensor_of(obj);
    if (t) { /* a Tessera tensor on any device, sim too: an alias without the graph */
        if (ts_requires_grad(t))
            return PyErr_Format(PyExc_BufferError,
                                "Can't export tensors that require gradient, use tensor.detach()");
        return tsp_wrap(ts_detach(t));
    }
    if (PyCapsule_CheckExact(obj)) return import_capsule(obj);
    if (PyObject_HasAttrString(obj, "__dlpack__")) return import_protocol(obj);
    return PyErr_Format(PyExc_TypeError,
                        "from_dlpack(): argument 'ext_tensor' must have __dlpack__ or be a DLPack "
                        "capsule, not %s",
                        Py_TYPE(obj)->tp_name);
}

/* ------------------------------------------------------------------ from_numpy (buffers) */
/* A DLManagedTensor over a Python buffer (a NumPy array: any dtype, bool and read-only arrays
 * too, which NumPy 1.x's __dlpack__ refuses): it holds the buffer, and with it the array. */
typedef struct buffer_ctx {
    DLManagedTensor m;
    Py_buffer view;
    int64_t shape[TS_MAX_DIMS], strides[TS_MAX_DIMS];
} buffer_ctx;

/* Tessera drops the memory from any thread, with or without the GIL. */
static void buffer_deleter(DLManagedTensor *m) {
    buffer_ctx *c = m->manager_ctx;
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyBuffer_Release(&c->view);
        PyGILState_Release(g);
    }
    PyMem_RawFree(c);
}

static void buffer_ctx_free(buffer_ctx *c) {
    PyBuffer_Release(&c->view);
    PyMem_RawFree(c);
}

static int unsupported_array(PyObject *arr) {
    PyObject *dt = PyObject_GetAttrString(arr, "dtype");
    if (!dt) return -1;
    PyErr_Format(PyExc_TypeError,
                 "can't convert np.ndarray of type numpy.%S. The only supported types are: "
                 "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, "
                 "uint64, uint32, uint16, uint8, and bool.",
                 dt);
    Py_DECREF(dt);
    return -1;
}

/* The buffer's struct-module format ("f", "<i8", "?") as a DLPack dtype. */
static int buffer_dtype(PyObject *arr, const Py_buffer *v, DLDataType *out) {
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == (PY_LITTLE_ENDIAN ? '<' : '>')) f++;
    uint8_t code = 255;
    if (f[0] && !f[1]) switch (f[0]) {
        case '?':
            code = DL_BOOL;
            break;
        case 'e':
        case 'f':
        case 'd':
            code = kDLFloat;
            break;
        case 'B':
        case 'H':
        case 'I':
        case 'L':
        case 'Q':
            code = kDLUInt;
            break;
        case 'b':
        case 'h':
        case 'i':
        case 'l':
        case 'q':
            code = kDLInt;
            break;
        }
    if (f[0] == 'Z' && (f[1] == 'f' || f[1] == 'd') && !f[2]) code = kDLComplex; /* complex64/128 */
    if (code == 255) return unsupported_array(arr);
    *out = (DLDataType){code, (uint8_t)(v->itemsize * 8), 1};
    return 0;
}

/* shape and strides (bytes -> elements) of the buffer into c */
static int buffer_layout(buffer_ctx *c) {
    Py_buffer *v = &c->view;
    if (v->ndim > TS_MAX_DIMS)
        return PyErr_Format(PyExc_ValueError, "from_numpy: %d dimensions; at most %d", v->ndim,
                            TS_MAX_DIMS),
               -1;
    for (int i = 0; i < v->ndim; i++) {
        c->shape[i] = v->shape[i];
        c->strides[i] = v->strides[i] / v->itemsize;
        if (v->strides[i] < 0)
            return PyErr_Format(PyExc_ValueError,
                                "At least one stride in the given numpy array is negative, and "
                                "tensors with negative strides are not currently supported. (You "
                                "can probably work around this by making a copy of your array "
                                "with array.copy().)"),
                   -1;
        if (v->strides[i] % v->itemsize)
            return PyErr_Format(PyExc_ValueError,
                                "from_numpy: stride %zd of dim %d is not a multiple of the "
                                "element size %zd",
                                v->strides[i], i, v->itemsize),
                   -1;
    }
    return 0;
}

static int readonly_warning(const Py_buffer *v) {
    if (!v->readonly) return 0;
    return PyErr_WarnEx(PyExc_UserWarning,
                        "The given NumPy array is not writable, and Tessera does not support "
                        "non-writable tensors: writing to the tensor writes the array's memory. "
                        "Copy the array (array.copy()) to protect its data.",
                        1);
}

static PyObject *import_buffer(PyObject *arr, bool warn) {
    buffer_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c) return PyErr_NoMemory();
    if (PyObject_GetBuffer(arr, &c->view, PyBUF_RECORDS_RO) < 0) return PyMem_RawFree(c), NULL;
    DLTensor *d = &c->m.dl_tensor;
    if (buffer_dtype(arr, &c->view, &d->dtype) < 0 || buffer_layout(c) < 0 ||
        (warn && readonly_warning(&c->view) < 0))
        return buffer_ctx_free(c), NULL;
    d->data = c->view.buf;
    d->device = (DLDevice){kDLCPU, 0};
    d->ndim = c->view.ndim;
    d->shape = c->shape;
    d->strides = c->strides;
    c->m.manager_ctx = c;
    c->m.deleter = buffer_deleter;
    ts_tensor *t = ts_from_dlpack(&c->m);
    if (!t) return buffer_ctx_free(c), tsp_raise_pending(); /* still ours */
    return tsp_wrap(t);
}

/* o an instance of numpy.<name>: 1, 0 (also without NumPy: nothing is then), -1 on error */
static int is_numpy(PyObject *o, const char *name) {
    PyObject *mods = PyImport_GetModuleDict(); /* NumPy made o, so it is imported already */
    PyObject *np = mods ? PyDict_GetItemString(mods, "numpy") : NULL;
    if (!np) return 0;
    PyObject *type = PyObject_GetAttrString(np, name);
    int r = type ? PyObject_IsInstance(o, type) : -1;
    Py_XDECREF(type);
    return r;
}
static int is_ndarray(PyObject *o) { return is_numpy(o, "ndarray"); }

int tsp_is_ndarray(PyObject *o, int ndim_min) {
    int r = is_ndarray(o);
    if (r <= 0 || ndim_min <= 0) return r;
    PyObject *nd = PyObject_GetAttrString(o, "ndim");
    long n = nd ? PyLong_AsLong(nd) : -1;
    Py_XDECREF(nd);
    if (n == -1 && PyErr_Occurred()) return -1;
    return n >= ndim_min;
}

int tsp_is_numpy_scalar(PyObject *o) { return is_numpy(o, "generic"); }

/* tessera.tensor(array or NumPy scalar): numpy.asarray (a negatively strided array copied by
 * NumPy first), shared, then cloned: a tensor of its own with the array's dtype */
ts_tensor *tsp_numpy_tensor(PyObject *o) {
    PyObject *mods = PyImport_GetModuleDict();
    PyObject *np = mods ? PyDict_GetItemString(mods, "numpy") : NULL;
    PyObject *arr = np ? PyObject_CallMethod(np, "asarray", "O", o) : NULL;
    if (!arr) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tensor(): NumPy is not loaded");
        return NULL;
    }
    PyObject *strides = PyObject_GetAttrString(arr, "strides");
    int negative = 0;
    for (Py_ssize_t i = 0; strides && i < PyTuple_Size(strides); i++)
        negative |= PyLong_AsLong(PyTuple_GET_ITEM(strides, i)) < 0;
    Py_XDECREF(strides);
    if (negative) {
        PyObject *c = PyObject_CallMethod(arr, "copy", NULL);
        Py_DECREF(arr);
        arr = c;
    }
    if (!arr || PyErr_Occurred()) return Py_XDECREF(arr), NULL;
    PyObject *shared = import_buffer(arr, false);
    Py_DECREF(arr);
    if (!shared) return NULL;
    ts_tensor *t;
    TSP_NOGIL(t = ts_clone(tsp_tensor_of(shared)));
    Py_DECREF(shared);
    if (!t || ts_error() != TS_OK) return tsp_drop(t), tsp_raise_pending(), NULL;
    return t;
}

static PyObject *from_numpy(PyObject *unused, PyObject *arr) {
    (void)unused;
    int r = is_ndarray(arr);
    if (r < 0) return NULL;
    if (!r)
        return PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %s)", Py_TYPE(arr)->tp_name);
    return import_buffer(arr, true);
}

/* __array_wrap__(array, context=None, return_scalar=False): NumPy hands back the result of a
 * function it ran on the tensor's array (np.exp(t), np.clip(t, 0, 1), np.transpose(t)...).
 * PyTorch's answer: torch.from_numpy(array), a bool array made uint8 first; context and
 * return_scalar are ignored (a 0-dim result stays a tensor), as PyTorch does. */
PyObject *tsp_tensor_array_wrap(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"array", "context", "return_scalar", NULL};
    PyObject *arr, *ctx = Py_None, *scalar = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:__array_wrap__", names, &arr, &ctx, &scalar))
        return NULL;
    PyObject *dt = PyObject_GetAttrString(arr, "dtype");
    PyObject *kind = dt ? PyObject_GetAttrString(dt, "kind") : NULL;
    Py_XDECREF(dt);
    if (!kind) return NULL;
    int is_bool = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "b") == 0;
    Py_DECREF(kind);
    PyObject *a =
        is_bool ? PyObject_CallMethod(arr, "astype", "s", "uint8") : (Py_INCREF(arr), arr);
    PyObject *t = a ? from_numpy(NULL, a) : NULL;
    Py_XDECREF(a);
    return t;
}

/* ------------------------------------------------------------------ as_tensor, _data_ptr */
/* t (a new reference) converted to dtype / device when they differ, else t itself. */
static PyObject *converted(PyObject *t, PyObject *dtype, PyObject *device) {
    ts_tensor *x = tsp_tensor_of(t);
    ts_dtype dt = ts_dtype_of(x);
    ts_device dev = ts_device_of(x);
    if (tsp_dtype_arg(dtype, &dt, "as_tensor", "dtype") < 0 ||
        (device != Py_None && tsp_device_arg(device, &dev, "as_tensor", "device") < 0))
        return Py_DECREF(t), NULL;
    if (dt == ts_dtype_of(x) && ts_device_equal(dev, ts_device_of(x))) return t;
    ts_tensor *y;
    TSP_NOGIL(y = ts_to(x, dev); if (y && dt != ts_dtype_of(y)) {
        ts_tensor *z = ts_to_dtype(y, dt);
        ts_release(y);
        y = z;
    });
    Py_DECREF(t);
    return tsp_wrap(y);
}

static PyObject *as_tensor(PyObject *unused, PyObject *args, PyObject *kwargs) {
    (void)unused;
    static char *kw[] = {"data", "dtype", "device", NULL};
    PyObject *data, *dtype = Py_None, *device = Py_None, *t;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:as_tensor", kw, &data, &dtype, &device))
        return NULL;
    int nd = tsp_tensor_of(data) ? 0 : is_ndarray(data);
    if (nd < 0) return NULL;
    if (tsp_tensor_of(data))
        Py_INCREF(data), t = data;
    else if (nd)
        t = import_buffer(data, true);
    else if (PyObject_HasAttrString(data, "__dlpack__"))
        t = import_protocol(data);
    else { /* lists and numbers: a new tensor, made in the dtype and on the device asked */
        PyObject *fn = PyObject_GetAttrString(module, "tensor");
        PyObject *kwd = fn ? Py_BuildValue("{s:O,s:O}", "dtype", dtype, "device", device) : NULL;
        PyObject *a = kwd ? PyTuple_Pack(1, data) : NULL;
        t = a ? PyObject_Call(fn, a, kwd) : NULL;
        Py_XDECREF(fn), Py_XDECREF(kwd), Py_XDECREF(a);
        return t;
    }
    return t ? converted(t, dtype, device) : NULL;
}

/* The address of t's first element (cpu / cuda), read from a DLPack export, for tests. */
static PyObject *data_ptr(PyObject *unused, PyObject *arg) {
    (void)unused;
    ts_tensor *t = tsp_tensor_arg(arg, "_data_ptr", "tensor");
    if (!t) return NULL;
    ts_tensor *d = ts_detach(t);
    DLManagedTensor *m = d ? ts_to_dlpack(d) : NULL;
    ts_release(d);
    if (!m) return tsp_raise_pending();
    PyObject *r = PyLong_FromVoidPtr(m->dl_tensor.data);
    m->deleter(m);
    return r;
}

static PyMethodDef functions[] = {
    {"from_dlpack", from_dlpack, METH_O,
     "from_dlpack(ext_tensor): a Tensor sharing the memory of an object with __dlpack__ (NumPy, "
     "PyTorch...) or of a DLPack capsule"},
    {"from_numpy", from_numpy, METH_O,
     "from_numpy(ndarray): a cpu Tensor sharing the array's memory (writes show both ways)"},
    {"as_tensor", FN(as_tensor), METH_VARARGS | METH_KEYWORDS,
     "as_tensor(data, dtype=None, device=None): data as a Tensor, sharing its memory when no "
     "conversion is needed"},
    {"_data_ptr", data_ptr, METH_O, "the address of a cpu or cuda tensor's first element"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_dlpack(PyObject *m) {
    if (PyType_Ready(&owner_type) < 0) return -1;
    module = m; /* borrowed: a single-phase module lives as long as the process */
    return PyModule_AddFunctions(m, functions);
}
