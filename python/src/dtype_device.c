/* dtype_device.c — tessera.dtype (one singleton per ts_dtype: tessera.float32, tessera.long...) and
 * tessera.device (like torch.device, also a `with` default-device scope), and parsing both from
 * the arguments Python code passes. */
#include "tensor_impl.h"

#include <string.h>

/* ------------------------------------------------------------------ dtype */
typedef struct {
    PyObject_HEAD ts_dtype dt;
} dtype_obj;

static PyTypeObject dtype_type;
static PyObject *dtypes[TS_DTYPE_COUNT]; /* the singletons, index = ts_dtype */

PyObject *tsp_dtype_obj(ts_dtype dt) {
    if (dt == TS_DTYPE_DEFAULT) dt = TS_F32;
    if ((unsigned)dt >= TS_DTYPE_COUNT || !dtypes[dt]) {
        PyErr_Format(PyExc_ValueError, "tessera: unknown dtype %d", (int)dt);
        return NULL;
    }
    Py_INCREF(dtypes[dt]);
    return dtypes[dt];
}

static PyObject *dtype_repr(PyObject *self) {
    return PyUnicode_FromFormat("tessera.%s", ts_dtype_name(((dtype_obj *)self)->dt));
}
static PyObject *dtype_is_floating(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_dtype_is_floating(((dtype_obj *)self)->dt));
}
static PyObject *dtype_is_complex(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_dtype_is_complex(((dtype_obj *)self)->dt));
}
static PyObject *dtype_itemsize(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromSize_t(ts_dtype_size(((dtype_obj *)self)->dt));
}
static PyObject *dtype_is_signed(PyObject *self, void *unused) {
    (void)unused;
    ts_dtype dt = ((dtype_obj *)self)->dt;
    return PyBool_FromLong(dt != TS_U8 && dt != TS_U16 && dt != TS_U32 && dt != TS_U64 &&
                           dt != TS_BOOL);
}
/* pickling and copy.deepcopy return the singleton */
static PyObject *dtype_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyUnicode_FromString(ts_dtype_name(((dtype_obj *)self)->dt));
}

static PyGetSetDef dtype_getset[] = {
    {"is_floating_point", dtype_is_floating, NULL, "a floating-point dtype", NULL},
    {"is_complex", dtype_is_complex, NULL, "a complex dtype", NULL},
    {"itemsize", dtype_itemsize, NULL, "bytes per element", NULL},
    {"is_signed", dtype_is_signed, NULL, "a signed dtype", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyMethodDef dtype_methods[] = {
    {"__reduce__", dtype_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject dtype_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.dtype",
    .tp_basicsize = sizeof(dtype_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor element type (tessera.float32, tessera.int64, ...).",
    .tp_repr = dtype_repr,
    .tp_getset = dtype_getset,
    .tp_methods = dtype_methods,
};

/* "float32" / "tessera.float32" / "torch.float32" / aliases -> dtype; TS_DTYPE_COUNT if unknown */
static ts_dtype dtype_from_name(const char *s) {
    static const struct {
        const char *name;
        ts_dtype dt;
    } aliases[] = {
        {"float", TS_F32},
        {"double", TS_F64},
        {"half", TS_F16},
        {"long", TS_I64},
        {"int", TS_I32},
        {"uint8", TS_U8},
        {"bool", TS_BOOL},
        {"short", TS_I16},
        {"cfloat", TS_C64},
        {"cdouble", TS_C128},
        /* the legacy tensor types' names: x.type("torch.LongTensor") */
        {"FloatTensor", TS_F32},
        {"DoubleTensor", TS_F64},
        {"HalfTensor", TS_F16},
        {"BFloat16Tensor", TS_BF16},
        {"LongTensor", TS_I64},
        {"IntTensor", TS_I32},
        {"ShortTensor", TS_I16},
        {"CharTensor", TS_I8},
        {"ByteTensor", TS_U8},
        {"BoolTensor", TS_BOOL},
    };
    const char *dot = strrchr(s, '.');
    if (dot) s = dot + 1;
    for (int dt = 1; dt < TS_DTYPE_COUNT; dt++)
        if (!strcmp(s, ts_dtype_name((ts_dtype)dt))) return (ts_dtype)dt;
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcmp(s, aliases[i].name)) return aliases[i].dt;
    return TS_DTYPE_COUNT;
}

/* a PyTorch dtype name Tessera has no storage for (tessera.float8_e4m3fn..., _dtype_info.py's
 * unsupported_dtype): it counts as a dtype where one is told from a device, then is refused */
static int is_unsupported_dtype(PyObject *o) {
    return strcmp(Py_TYPE(o)->tp_name, "unsupported_dtype") == 0;
}

int tsp_is_dtype(PyObject *o) { return Py_IS_TYPE(o, &dtype_type) || is_unsupported_dtype(o); }

int tsp_dtype_arg(PyObject *o, ts_dtype *out, const char *fn, const char *arg) {
    if (o == NULL || o == Py_None) return 0;
    if (Py_IS_TYPE(o, &dtype_type)) {
        *out = ((dtype_obj *)o)->dt;
        return 0;
    }
    if (is_unsupported_dtype(o)) {
        PyObject *msg = PyObject_GetAttrString(o, "_ts_unsupported");
        if (msg) PyErr_Format(PyExc_TypeError, "%s(): argument '%s': %S", fn, arg, msg);
        Py_XDECREF(msg);
        return -1;
    }
    /* Python's own types, as torch takes them: float -> float64, int -> int64, bool */
    if (o == (PyObject *)&PyFloat_Type) return *out = TS_F64, 0;
    if (o == (PyObject *)&PyLong_Type) return *out = TS_I64, 0;
    if (o == (PyObject *)&PyBool_Type) return *out = TS_BOOL, 0;
    if (PyType_Check(o)) { /* a legacy tensor type (tessera.LongTensor): its dtype */
        PyObject *d = PyObject_GetAttrString(o, "dtype");
        int is = d && Py_IS_TYPE(d, &dtype_type);
        if (is) *out = ((dtype_obj *)d)->dt;
        Py_XDECREF(d);
        PyErr_Clear();
        if (is) return 0;
    }
    if (PyUnicode_Check(o)) {
        ts_dtype dt = dtype_from_name(PyUnicode_AsUTF8(o));
        if (dt == TS_DTYPE_COUNT) {
            PyErr_Format(PyExc_ValueError, "%s(): argument '%s': unknown dtype '%U'", fn, arg, o);
            return -1;
        }
        *out = dt;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be tessera.dtype, not %.100s", fn, arg,
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* ------------------------------------------------------------------ device */
typedef struct {
    PyObject_HEAD ts_device d;
} device_obj;

static PyTypeObject device_type;

static const char *device_type_name(ts_device_type t) {
    return t == TS_CUDA ? "cuda" : t == TS_SIM ? "sim" : t == TS_META ? "meta" : "cpu";
}

PyObject *tsp_device_obj(ts_device d) {
    if (d.type == TS_DEVICE_DEFAULT) d = ts_default_device();
    device_obj *o = PyObject_New(device_obj, &device_type);
    if (o) o->d = d;
    return (PyObject *)o;
}

/* "cpu" / "cuda" / "cuda:1" / "sim:0" -> *out, or the library's parse error raised */
static int parse_device_string(PyObject *s, ts_device *out, const char *fn, const char *arg) {
    const char *str = PyUnicode_AsUTF8(s);
    if (!str) return -1;
    if (ts_device_parse(str, out) != TS_OK) {
        ts_error_clear();
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s': invalid device string '%s' (expected \"cpu\", \"cuda\", "
                     "\"cuda:N\", \"sim:N\" or \"meta\")",
                     fn, arg, str);
        return -1;
    }
    return 0;
}

int tsp_device_arg(PyObject *o, ts_device *out, const char *fn, const char *arg) {
    if (o == NULL || o == Py_None) {
        *out = (ts_device){TS_DEVICE_DEFAULT, 0};
        return 0;
    }
    if (Py_IS_TYPE(o, &device_type)) {
        *out = ((device_obj *)o)->d;
        return 0;
    }
    if (PyUnicode_Check(o)) return parse_device_string(o, out, fn, arg);
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        long i = PyLong_AsLong(o);
        if (i < 0 || i > 1 << 20) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s(): argument '%s': bad device index %ld", fn, arg,
                             i);
            return -1;
        }
        *out = ts_cuda((int)i);
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "%s(): argument '%s' must be tessera.device, str or int, not %.100s", fn, arg,
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* device("cuda:0"), device("cuda", 0), device(type="sim", index=1), device(other_device) */
static PyObject *device_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kw[] = {"type", "index", NULL};
    PyObject *what, *index = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:device", kw, &what, &index)) return NULL;
    ts_device d;
    if (tsp_device_arg(what, &d, "device", "type") < 0) return NULL;
    if (index != Py_None) {
        if (!PyUnicode_Check(what) || strchr(PyUnicode_AsUTF8(what), ':')) {
            PyErr_SetString(
                PyExc_ValueError,
                "device(): type (string) must not include an index when index is given");
            return NULL;
        }
        long i = PyLong_AsLong(index);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0 || ((d.type == TS_CPU || d.type == TS_META) && i != 0)) {
            PyErr_Format(PyExc_ValueError, "device(): bad index %ld for '%U'", i, what);
            return NULL;
        }
        d.index = (int)i;
    }
    device_obj *o = (device_obj *)type->tp_alloc(type, 0);
    if (o) o->d = d;
    return (PyObject *)o;
}

static bool has_index(ts_device d) { return d.type != TS_CPU && d.type != TS_META && d.index >= 0; }

static PyObject *device_str(PyObject *self) {
    ts_device d = ((device_obj *)self)->d;
    if (!has_index(d)) return PyUnicode_FromString(device_type_name(d.type));
    return PyUnicode_FromFormat("%s:%d", device_type_name(d.type), d.index);
}
static PyObject *device_repr(PyObject *self) {
    ts_device d = ((device_obj *)self)->d;
    if (!has_index(d)) return PyUnicode_FromFormat("device(type='%s')", device_type_name(d.type));
    return PyUnicode_FromFormat("device(type='%s', index=%d)", device_type_name(d.type), d.index);
}
static Py_hash_t device_hash(PyObject *self) {
    ts_device d = ((device_obj *)self)->d;
    Py_hash_t h = (Py_hash_t)d.type * 1000003 + (has_index(d) ? d.index : -1) + 7;
    return h == -1 ? -2 : h;
}
/* torch's rule: equal when type and index are (device("cuda") != device("cuda:0")); a string
 * compares as the device it names. */
static PyObject *device_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(a, &device_type)) Py_RETURN_NOTIMPLEMENTED;
    ts_device db;
    if (Py_IS_TYPE(b, &device_type))
        db = ((device_obj *)b)->d;
    else if (!PyUnicode_Check(b) || ts_device_parse(PyUnicode_AsUTF8(b), &db) != TS_OK) {
        ts_error_clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    ts_device da = ((device_obj *)a)->d;
    bool eq =
        da.type == db.type && (has_index(da) ? da.index : -1) == (has_index(db) ? db.index : -1);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}
static PyObject *device_get_type(PyObject *self, void *unused) {
    (void)unused;
    return PyUnicode_FromString(device_type_name(((device_obj *)self)->d.type));
}
static PyObject *device_get_index(PyObject *self, void *unused) {
    (void)unused;
    ts_device d = ((device_obj *)self)->d;
    if (!has_index(d)) Py_RETURN_NONE;
    return PyLong_FromLong(d.index);
}
/* `with tessera.device("sim:0"):` makes it the thread's default device (torch 2's habit) */
static PyObject *device_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_device_push(((device_obj *)self)->d);
    if (tsp_check()) return NULL;
    Py_INCREF(self);
    return self;
}
static PyObject *device_exit(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    ts_device_pop();
    if (tsp_check()) return NULL;
    Py_RETURN_FALSE;
}
static PyObject *device_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *s = device_str(self);
    if (!s) return NULL;
    PyObject *r = Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(self), s);
    return r;
}

static PyGetSetDef device_getset[] = {
    {"type", device_get_type, NULL, "\"cpu\", \"cuda\", \"sim\" or \"meta\"", NULL},
    {"index", device_get_index, NULL, "the device index, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyMethodDef device_methods[] = {
    {"__enter__", device_enter, METH_NOARGS, NULL},
    {"__exit__", device_exit, METH_VARARGS, NULL},
    {"__reduce__", device_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject device_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.device",
    .tp_basicsize = sizeof(device_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "device(type, index=None): \"cpu\", \"cuda:N\" or \"sim:N\", like torch.device.",
    .tp_new = device_new,
    .tp_repr = device_repr,
    .tp_str = device_str,
    .tp_hash = device_hash,
    .tp_richcompare = device_richcompare,
    .tp_getset = device_getset,
    .tp_methods = device_methods,
};

/* ------------------------------------------------------------------ init */
static int add_dtype(PyObject *m, ts_dtype dt, const char *alias) {
    if (!dtypes[dt]) {
        dtype_obj *o = PyObject_New(dtype_obj, &dtype_type);
        if (!o) return -1;
        o->dt = dt;
        dtypes[dt] = (PyObject *)o; /* kept for the process */
    }
    const char *name = alias ? alias : ts_dtype_name(dt);
    Py_INCREF(dtypes[dt]);
    if (PyModule_AddObject(m, name, dtypes[dt]) < 0) {
        Py_DECREF(dtypes[dt]);
        return -1;
    }
    return 0;
}

int tsp_init_dtypes(PyObject *m) {
    if (PyType_Ready(&dtype_type) < 0 || PyType_Ready(&device_type) < 0) return -1;
    Py_INCREF(&dtype_type);
    if (PyModule_AddObject(m, "dtype", (PyObject *)&dtype_type) < 0) return -1;
    Py_INCREF(&device_type);
    if (PyModule_AddObject(m, "device", (PyObject *)&device_type) < 0) return -1;
    for (int dt = 1; dt < TS_DTYPE_COUNT; dt++)
        if (add_dtype(m, (ts_dtype)dt, NULL) < 0) return -1;
    static const struct {
        const char *alias;
        ts_dtype dt;
    } aliases[] = {{"float", TS_F32}, {"double", TS_F64}, {"half", TS_F16},   {"long", TS_I64},
                   {"int", TS_I32},   {"short", TS_I16},  {"cfloat", TS_C64}, {"cdouble", TS_C128}};
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (add_dtype(m, aliases[i].dt, aliases[i].alias) < 0) return -1;
    return 0;
}
