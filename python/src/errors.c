/* errors.c — the C library's sticky errors become Python exceptions: tessera.TesseraError (a
 * RuntimeError carrying .status) and one subclass per status, plus Ctrl-C at op entry. */
#include "tsp.h"

PyObject *tsp_error_type;

/* One subclass per ts_status (index = status); extra bases make `except MemoryError` etc. work. */
static PyObject *status_types[TS_ERR_DIST + 1];

typedef struct status_class {
    ts_status status;
    const char *name; /* "tessera.DeviceError" */
    PyObject **extra_base;
} status_class;

static int add_class(PyObject *m, const status_class *c) {
    PyObject *bases = c->extra_base ? PyTuple_Pack(2, tsp_error_type, *c->extra_base)
                                    : PyTuple_Pack(1, tsp_error_type);
    if (!bases) return -1;
    PyObject *type = PyErr_NewException(c->name, bases, NULL);
    Py_DECREF(bases);
    if (!type) return -1;
    status_types[c->status] = type;
    Py_INCREF(type); /* the module's reference; status_types keeps its own for the process */
    if (PyModule_AddObject(m, strrchr(c->name, '.') + 1, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

/* Raises exc_type(msg) with .status set to the status name. */
static void raise_status(ts_status s, const char *msg) {
    PyObject *type = s > TS_OK && s <= TS_ERR_DIST ? status_types[s] : tsp_error_type;
    PyObject *exc = PyObject_CallFunction(type, "s", msg);
    if (!exc) return;
    PyObject *name = PyUnicode_FromString(ts_status_string(s));
    if (name) {
        PyObject_SetAttrString(exc, "status", name);
        Py_DECREF(name);
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

int tsp_check(void) {
    ts_status s = ts_error();
    if (s == TS_OK) return 0;
    if (PyErr_Occurred()) { /* a Python exception (from a callback) explains it better */
        ts_error_clear();
        return -1;
    }
    raise_status(s, ts_error_message());
    ts_error_clear();
    return -1;
}

PyObject *tsp_raise_pending(void) {
    if (tsp_check() == 0 && !PyErr_Occurred())
        PyErr_SetString(tsp_error_type, "tessera: an operation failed without a message");
    return NULL;
}

int tsp_enter(void) { return PyErr_CheckSignals(); }

int tsp_init_errors(PyObject *m) {
    tsp_error_type = PyErr_NewExceptionWithDoc(
        "tessera.TesseraError",
        "An error reported by Tessera's C library; .status names it (\"TS_ERR_DEVICE\" ...).",
        PyExc_RuntimeError, NULL);
    if (!tsp_error_type) return -1;
    if (PyObject_SetAttrString(tsp_error_type, "status", Py_None) < 0) return -1;
    Py_INCREF(tsp_error_type);
    if (PyModule_AddObject(m, "TesseraError", tsp_error_type) < 0) {
        Py_DECREF(tsp_error_type);
        return -1;
    }
    const status_class classes[] = {
        {TS_ERR_DEVICE, "tessera.DeviceError", NULL},
        {TS_ERR_SHAPE, "tessera.ShapeError", NULL},
        {TS_ERR_DTYPE, "tessera.DtypeError", NULL},
        {TS_ERR_ARG, "tessera.ArgumentError", &PyExc_ValueError},
        {TS_ERR_OOM, "tessera.OutOfMemoryError", &PyExc_MemoryError},
        {TS_ERR_IO, "tessera.FileError", &PyExc_OSError},
        {TS_ERR_FORMAT, "tessera.FormatError", NULL},
        {TS_ERR_CUDA, "tessera.CudaError", NULL},
        {TS_ERR_UNSUPPORTED, "tessera.UnsupportedError", NULL},
        {TS_ERR_STATE, "tessera.StateError", NULL},
        {TS_ERR_DIST, "tessera.DistributedError", NULL},
    };
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (add_class(m, &classes[i]) < 0) return -1;
    return 0;
}
