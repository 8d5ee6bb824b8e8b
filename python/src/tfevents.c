/* tfevents.c — tessera.utils.tensorboard's event files (ts_event_file): _event_file_create(path,
 * wall_time) -> handle, _event_file_write(handle, event: bytes), _event_file_flush(handle),
 * _event_file_close(handle). The caller encodes each Event; C frames it (length, CRC-32Cs). */
#include "tsp.h"

static const char CAPSULE_NAME[] = "tessera._C.event_file";

/* The capsule holds a box so that close can empty it: a closed handle raises, never dangles. */
typedef struct event_box {
    ts_event_file *ef;
} event_box;

static void box_destroy(PyObject *cap) {
    event_box *box = PyCapsule_GetPointer(cap, CAPSULE_NAME);
    if (!box) {
        PyErr_Clear();
        return;
    }
    ts_event_file_close(box->ef); /* a failure here has nobody to report to */
    ts_error_clear();
    PyMem_Free(box);
}

static event_box *box_of(PyObject *cap, const char *fn) {
    event_box *box =
        PyCapsule_IsValid(cap, CAPSULE_NAME) ? PyCapsule_GetPointer(cap, CAPSULE_NAME) : NULL;
    if (!box) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'handle' must be an event file handle", fn);
        return NULL;
    }
    if (!box->ef) {
        PyErr_Format(PyExc_ValueError, "%s(): the event file is closed", fn);
        return NULL;
    }
    return box;
}

static PyObject *py_event_file_create(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path;
    double wall_time;
    if (!PyArg_ParseTuple(args, "O&d:_event_file_create", PyUnicode_FSConverter, &path, &wall_time))
        return NULL;
    ts_event_file *ef;
    TSP_NOGIL(ef = ts_event_file_open(PyBytes_AS_STRING(path), wall_time););
    Py_DECREF(path);
    if (!ef) return tsp_raise_pending();
    event_box *box = PyMem_Malloc(sizeof *box);
    if (!box) {
        ts_event_file_close(ef);
        return PyErr_NoMemory();
    }
    box->ef = ef;
    PyObject *cap = PyCapsule_New(box, CAPSULE_NAME, box_destroy);
    if (!cap) {
        ts_event_file_close(ef);
        PyMem_Free(box);
    }
    return cap;
}

static PyObject *py_event_file_write(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "Oy*:_event_file_write", &cap, &buf)) return NULL;
    event_box *box = box_of(cap, "_event_file_write");
    ts_status s = box ? ts_event_file_write(box->ef, buf.buf, (size_t)buf.len) : TS_OK;
    PyBuffer_Release(&buf);
    if (!box) return NULL;
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_event_file_flush(PyObject *self, PyObject *cap) {
    (void)self;
    event_box *box = box_of(cap, "_event_file_flush");
    if (!box) return NULL;
    if (ts_event_file_flush(box->ef)) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_event_file_close(PyObject *self, PyObject *cap) {
    (void)self;
    if (!PyCapsule_IsValid(cap, CAPSULE_NAME))
        return PyErr_Format(PyExc_TypeError,
                            "_event_file_close(): argument 'handle' must be an event file handle");
    event_box *box = PyCapsule_GetPointer(cap, CAPSULE_NAME);
    ts_event_file *ef = box->ef;
    box->ef = NULL; /* closing twice is a no-op */
    if (ts_event_file_close(ef)) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyMethodDef tfevents_methods[] = {
    {"_event_file_create", py_event_file_create, METH_VARARGS,
     "_event_file_create(path, wall_time): a new TensorBoard event file (path must not exist) "
     "holding its file_version record; returns a handle."},
    {"_event_file_write", py_event_file_write, METH_VARARGS,
     "_event_file_write(handle, event): appends one record framing the serialized Event bytes."},
    {"_event_file_flush", py_event_file_flush, METH_O,
     "_event_file_flush(handle): writes the pending records to the file."},
    {"_event_file_close", py_event_file_close, METH_O,
     "_event_file_close(handle): flushes and closes; closing twice does nothing."},
    {NULL, NULL, 0, NULL},
};

int tsp_init_tfevents(PyObject *m) { return PyModule_AddFunctions(m, tfevents_methods); }
