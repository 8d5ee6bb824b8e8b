/* cuda_api.c — torch.cuda's device, stream and event calls over tessera/cuda.h (the Python
 * classes are python/tessera/cuda/streams.py), TF32, and set_default_device (a thread's base
 * default device under its device scopes). Every function works in a build without CUDA: the C
 * API reports no device and these raise its error, or the Python layer does not call them. */
#include "tsp.h"

#include <string.h>

static const char STREAM[] = "tessera.cuda.stream", EVENT[] = "tessera.cuda.event";

/* the C error raised; a RuntimeError if the C call failed without one */
static PyObject *fail(void) {
    if (!tsp_check()) PyErr_SetString(PyExc_RuntimeError, "tessera.cuda: the CUDA call failed");
    return NULL;
}
static int check_status(ts_status s) { return s == TS_OK ? 0 : (fail(), -1); }

static int device_index(PyObject *o, int *out, const char *fn) {
    if (o == NULL || o == Py_None) return *out = -1, 0;
    long i = PyLong_AsLong(o);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < -1 || i > 1 << 20) {
        PyErr_Format(PyExc_ValueError, "%s(): bad device index %ld", fn, i);
        return -1;
    }
    return *out = (int)i, 0;
}

/* ------------------------------------------------------------------ devices */
static PyObject *py_synchronize(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    if (device_index(arg, &d, "synchronize") < 0) return NULL;
    ts_status s;
    TSP_NOGIL(s = ts_cuda_synchronize(d));
    if (check_status(s) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_set_device(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    if (device_index(arg, &d, "set_device") < 0) return NULL;
    if (check_status(ts_cuda_set_device(d)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_current_device(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    int d = ts_cuda_current_device();
    if (d < 0) return fail();
    return PyLong_FromLong(d);
}

/* the device's properties as a dict (streams.py makes torch's _CudaDeviceProperties of it) */
static PyObject *py_properties(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    ts_cuda_props p;
    memset(&p, 0, sizeof p);
    if (device_index(arg, &d, "get_device_properties") < 0) return NULL;
    if (d < 0) d = ts_cuda_current_device();
    if (d < 0) return fail();
    if (check_status(ts_cuda_get_properties(d, &p)) < 0) return NULL;
    return Py_BuildValue(
        "{s:s,s:K,s:i,s:i,s:i,s:i,s:i,s:K,s:i,s:i,s:i}", "name", p.name, "total_memory",
        (unsigned long long)p.total_memory, "multi_processor_count", p.multiprocessor_count,
        "major", p.major, "minor", p.minor, "max_threads_per_block", p.max_threads_per_block,
        "warp_size", p.warp_size, "shared_memory_per_block",
        (unsigned long long)p.shared_memory_per_block, "L2_cache_size", p.l2_cache_size,
        "pci_bus_id", p.pci_bus_id, "pci_device_id", p.pci_device_id);
}

/* whether this library was built with CUDA: with no device, the stub's message says so */
static PyObject *py_is_built(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (ts_cuda_device_count() > 0) Py_RETURN_TRUE;
    bool built = true;
    if (ts_cuda_synchronize(-1) != TS_OK) built = !strstr(ts_error_message(), "built without CUDA");
    ts_error_clear();
    return PyBool_FromLong(built);
}

static PyObject *py_set_allow_tf32(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    ts_cuda_set_allow_tf32(on);
    Py_RETURN_NONE;
}

static PyObject *py_allow_tf32(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(ts_cuda_allow_tf32());
}

/* ------------------------------------------------------------------ streams */
static void stream_free(PyObject *cap) {
    ts_cuda_stream_free(PyCapsule_GetPointer(cap, STREAM));
    ts_error_clear();
}

/* a capsule over s; owned: freed (given back to the pool) with the capsule */
static PyObject *stream_capsule(ts_cuda_stream *s, bool owned) {
    if (!s) return fail();
    return PyCapsule_New(s, STREAM, owned ? stream_free : NULL);
}

static ts_cuda_stream *stream_of(PyObject *cap) {
    if (cap == Py_None) return NULL;
    ts_cuda_stream *s = PyCapsule_GetPointer(cap, STREAM);
    if (!s && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "tessera.cuda: expected a stream");
    return s;
}

static PyObject *py_stream_new(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    if (device_index(arg, &d, "Stream") < 0) return NULL;
    return stream_capsule(ts_cuda_stream_new(d), true);
}

static PyObject *py_stream_default(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    if (device_index(arg, &d, "default_stream") < 0) return NULL;
    return stream_capsule(ts_cuda_default_stream(d), false);
}

static PyObject *py_stream_current(PyObject *self, PyObject *arg) {
    (void)self;
    int d;
    if (device_index(arg, &d, "current_stream") < 0) return NULL;
    return stream_capsule(ts_cuda_current_stream(d), false);
}

/* set_stream(capsule or None): None puts every device of the thread back on its default */
static PyObject *py_set_stream(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_stream *s = stream_of(arg);
    if (!s && arg != Py_None) return NULL;
    if (check_status(ts_cuda_set_stream(s)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_stream_synchronize(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_stream *s = stream_of(arg);
    if (!s) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_cuda_stream_synchronize(s));
    if (check_status(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_stream_query(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_stream *s = stream_of(arg);
    if (!s) return NULL;
    bool done = ts_cuda_stream_query(s);
    if (tsp_check()) return NULL;
    return PyBool_FromLong(done);
}

static PyObject *py_stream_info(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_stream *s = stream_of(arg);
    if (!s) return NULL;
    return Py_BuildValue("(iK)", ts_cuda_stream_device(s),
                         (unsigned long long)(uintptr_t)ts_cuda_stream_handle(s));
}

/* ------------------------------------------------------------------ events */
static void event_free(PyObject *cap) { ts_cuda_event_free(PyCapsule_GetPointer(cap, EVENT)); }

static ts_cuda_event *event_of(PyObject *cap) { return PyCapsule_GetPointer(cap, EVENT); }

static PyObject *py_event_new(PyObject *self, PyObject *arg) {
    (void)self;
    int timing = PyObject_IsTrue(arg);
    if (timing < 0) return NULL;
    ts_cuda_event *e = ts_cuda_event_new(timing);
    if (!e) return fail();
    return PyCapsule_New(e, EVENT, event_free);
}

/* event_record(event, stream or None) */
static PyObject *py_event_record(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ev, *st;
    if (!PyArg_ParseTuple(args, "OO:_cuda_event_record", &ev, &st)) return NULL;
    ts_cuda_event *e = event_of(ev);
    ts_cuda_stream *s = stream_of(st);
    if (!e || (!s && st != Py_None)) return NULL;
    if (check_status(ts_cuda_event_record(e, s)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_event_synchronize(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_event *e = event_of(arg);
    if (!e) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_cuda_event_synchronize(e));
    if (check_status(st) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_event_query(PyObject *self, PyObject *arg) {
    (void)self;
    ts_cuda_event *e = event_of(arg);
    if (!e) return NULL;
    bool done = ts_cuda_event_query(e);
    if (tsp_check()) return NULL;
    return PyBool_FromLong(done);
}

static PyObject *py_event_elapsed(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:_cuda_event_elapsed", &a, &b)) return NULL;
    ts_cuda_event *ea = event_of(a), *eb = event_of(b);
    if (!ea || !eb) return NULL;
    float ms = 0;
    ts_status st;
    TSP_NOGIL(st = ts_cuda_event_elapsed_ms(ea, eb, &ms));
    if (check_status(st) < 0) return NULL;
    return PyFloat_FromDouble(ms);
}

/* stream_wait_event(stream, event) */
static PyObject *py_stream_wait_event(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *st, *ev;
    if (!PyArg_ParseTuple(args, "OO:_cuda_stream_wait_event", &st, &ev)) return NULL;
    ts_cuda_stream *s = stream_of(st);
    ts_cuda_event *e = s ? event_of(ev) : NULL;
    if (!e) return NULL;
    if (check_status(ts_cuda_stream_wait_event(s, e)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* record_stream(tensor, stream) */
static PyObject *py_record_stream(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *t, *st;
    if (!PyArg_ParseTuple(args, "OO:record_stream", &t, &st)) return NULL;
    ts_tensor *x = tsp_tensor_arg(t, "record_stream", "tensor");
    ts_cuda_stream *s = x ? stream_of(st) : NULL;
    if (!s) return NULL;
    if (check_status(ts_record_stream(x, s)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ set_default_device
 * torch.set_default_device(d): the thread's base default device, under every device scope open
 * (`with tessera.device(...)` still wins inside its block). The C core has one stack per thread:
 * the base is its bottom entry, replaced by taking the scopes above off and putting them back. */
#define STACK_MAX 64
static _Thread_local bool base_set; /* the bottom of this thread's stack is set_default_device's */

static PyObject *py_set_default_device(PyObject *self, PyObject *arg) {
    (void)self;
    ts_device d = {0}, above[STACK_MAX];
    if (arg != Py_None) {
        if (tsp_device_arg(arg, &d, "set_default_device", "device") < 0) return NULL;
        if (!ts_device_is_available(d)) {
            PyErr_Format(tsp_error_type,
                         "set_default_device: %s is not available (%d cuda, %d sim devices)",
                         ts_device_str(d), ts_device_count(TS_CUDA), ts_device_count(TS_SIM));
            return NULL;
        }
    }
    int n = 0;
    for (; n < STACK_MAX; n++) { /* every entry, top first, until the stack is empty */
        ts_device top = ts_default_device();
        ts_device_pop();
        if (ts_error() != TS_OK) {
            ts_error_clear();
            break;
        }
        above[n] = top;
    }
    if (base_set && n > 0) n--; /* the old base: dropped */
    base_set = arg != Py_None;
    if (base_set) ts_device_push(d);
    while (n > 0) ts_device_push(above[--n]);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"_cuda_synchronize", py_synchronize, METH_O, NULL},
    {"_cuda_set_device", py_set_device, METH_O, NULL},
    {"_cuda_current_device", py_current_device, METH_NOARGS, NULL},
    {"_cuda_get_device_properties", py_properties, METH_O, NULL},
    {"_cuda_is_built", py_is_built, METH_NOARGS, NULL},
    {"_cuda_set_allow_tf32", py_set_allow_tf32, METH_O, NULL},
    {"_cuda_allow_tf32", py_allow_tf32, METH_NOARGS, NULL},
    {"_cuda_stream_new", py_stream_new, METH_O, NULL},
    {"_cuda_stream_default", py_stream_default, METH_O, NULL},
    {"_cuda_stream_current", py_stream_current, METH_O, NULL},
    {"_cuda_set_stream", py_set_stream, METH_O, NULL},
    {"_cuda_stream_synchronize", py_stream_synchronize, METH_O, NULL},
    {"_cuda_stream_query", py_stream_query, METH_O, NULL},
    {"_cuda_stream_info", py_stream_info, METH_O, NULL},
    {"_cuda_stream_wait_event", py_stream_wait_event, METH_VARARGS, NULL},
    {"_cuda_event_new", py_event_new, METH_O, NULL},
    {"_cuda_event_record", py_event_record, METH_VARARGS, NULL},
    {"_cuda_event_synchronize", py_event_synchronize, METH_O, NULL},
    {"_cuda_event_query", py_event_query, METH_O, NULL},
    {"_cuda_event_elapsed", py_event_elapsed, METH_VARARGS, NULL},
    {"_cuda_record_stream", py_record_stream, METH_VARARGS, NULL},
    {"set_default_device", py_set_default_device, METH_O,
     "set_default_device(device): where factories put tensors made without device= (this "
     "thread; None: back to the cpu); device scopes still win inside their blocks"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_cuda(PyObject *m) { return PyModule_AddFunctions(m, functions); }
