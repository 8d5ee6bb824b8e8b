/* profiler.c — the primitives tessera.profiler (python/tessera/profiler.py) is built on: start and
 * stop the C profiler (tessera/profiler.h), user ranges, and a collected profile as a capsule with
 * its events, key averages and Chrome trace. */
#include <tessera/profiler.h>
#include <tessera/profiler_inputs.h>

#include "tsp.h"

#define CAPSULE "tessera.profile"

static void capsule_free(PyObject *cap) { ts_profile_free(PyCapsule_GetPointer(cap, CAPSULE)); }

static ts_profile *profile_arg(PyObject *cap) {
    ts_profile *p = PyCapsule_GetPointer(cap, CAPSULE);
    if (!p && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "expected a tessera profile");
    return p;
}

static PyObject *py_start(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *names[] = {"record_shapes", "profile_memory", "with_stack", "with_flops", NULL};
    int shapes = 0, memory = 0, stack = 0, flops = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|pppp:_profiler_start", names, &shapes, &memory,
                                     &stack, &flops))
        return NULL;
    ts_profiler_opts o = {.record_shapes = shapes,
                          .profile_memory = memory,
                          .with_stack = stack,
                          .with_flops = flops};
    if (ts_profiler_start(&o) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* stops and returns the profile (a capsule) */
static PyObject *py_stop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (ts_profiler_stop() != TS_OK) return tsp_raise_pending();
    ts_profile *p = ts_profiler_take();
    if (!p) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(p, CAPSULE, capsule_free);
    if (!cap) ts_profile_free(p);
    return cap;
}

static PyObject *py_enabled(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(ts_profiler_enabled());
}

static PyObject *py_range_push(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    ts_profiler_range_push(name);
    Py_RETURN_NONE;
}

static PyObject *py_range_pop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (ts_profiler_range_pop() != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static const char *kind_name(ts_profile_kind k) {
    static const char *names[] = {"op",       "backward", "range",  "wait",
                                  "transfer", "memory",   "kernel", "collective"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

static const char *transfer_name(ts_transfer_kind k) {
    return k == TS_XFER_H2D ? "HtoD" : k == TS_XFER_D2H ? "DtoH" : k == TS_XFER_D2D ? "DtoD" : "";
}

/* a list of dicts, one per event, in start-time order */
static PyObject *py_events(PyObject *self, PyObject *cap) {
    (void)self;
    ts_profile *p = profile_arg(cap);
    if (!p) return NULL;
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const ts_profile_event *e = &ev[i];
        PyObject *d = Py_BuildValue(
            "{s:s,s:s,s:s,s:s,s:i,s:K,s:L,s:L,s:L,s:i,s:L,s:s,s:K,s:s,s:O,s:K,s:L,s:L}", "kind",
            kind_name(e->kind), "name", e->name, "device", ts_device_str(e->device), "src_device",
            e->kind == TS_PROF_TRANSFER ? ts_device_str(e->src_device) : "", "thread", e->thread,
            "stream", (unsigned long long)e->stream, "t0_ns", (long long)e->t0_ns, "t1_ns",
            (long long)e->t1_ns, "self_ns", (long long)e->self_ns, "depth", e->depth, "bytes",
            (long long)e->bytes, "shape", e->shape, "flow", (unsigned long long)e->flow, "transfer",
            transfer_name(e->transfer), "pinned", e->pinned ? Py_True : Py_False, "correlation",
            (unsigned long long)e->correlation, "flops", (long long)e->flops, "op_bytes",
            (long long)e->op_bytes);
        PyObject *dims = d ? PyUnicode_FromString(ts_profile_event_input_dims(p, i)) : NULL;
        PyObject *types = dims ? PyUnicode_FromString(ts_profile_event_input_types(p, i)) : NULL;
        if (!types || PyDict_SetItemString(d, "input_dims", dims) < 0 ||
            PyDict_SetItemString(d, "input_types", types) < 0) {
            Py_XDECREF(dims);
            Py_XDECREF(types);
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(dims);
        Py_DECREF(types);
        /* a collective's rank in its group and the group's size (0 for other events) */
        PyObject *rank = PyLong_FromLong(e->rank), *world = PyLong_FromLong(e->world_size);
        int bad = !rank || !world || PyDict_SetItemString(d, "rank", rank) < 0 ||
                  PyDict_SetItemString(d, "world_size", world) < 0;
        Py_XDECREF(rank);
        Py_XDECREF(world);
        if (bad) {
            Py_DECREF(d);
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, d);
    }
    return list;
}

/* one key_averages row: (name, shape or input dims, kind, calls, total_ns, self_ns, max_ns, bytes,
 * flops) */
static PyObject *stat_row(const ts_profile_stat *r, const char *shape) {
    return Py_BuildValue("(sssLLLLLL)", r->name, shape, kind_name(r->kind), (long long)r->calls,
                         (long long)r->total_ns, (long long)r->self_ns, (long long)r->max_ns,
                         (long long)r->bytes, (long long)r->flops);
}

/* a list of (name, shape, kind, calls, total_ns, self_ns, max_ns, bytes, flops) */
static PyObject *py_key_averages(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int by_shape = 0;
    if (!PyArg_ParseTuple(args, "O|p:_profile_key_averages", &cap, &by_shape)) return NULL;
    ts_profile *p = profile_arg(cap);
    if (!p) return NULL;
    int64_t n = ts_profile_key_averages(p, by_shape, NULL, 0);
    if (n < 0) return tsp_raise_pending();
    ts_profile_stat *rows = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *rows);
    if (!rows) return PyErr_NoMemory();
    n = ts_profile_key_averages(p, by_shape, rows, n);
    PyObject *list = n < 0 ? (tsp_raise_pending(), NULL) : PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        const ts_profile_stat *r = &rows[i];
        PyObject *t = stat_row(r, r->shape);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    PyMem_Free(rows);
    return list;
}

/* the same grouped by input dims: (name, input dims, kind, calls, total_ns, self_ns, max_ns,
 * bytes, flops) */
static PyObject *py_key_averages_by_input(PyObject *self, PyObject *cap) {
    (void)self;
    ts_profile *p = profile_arg(cap);
    if (!p) return NULL;
    int64_t n = ts_profile_key_averages_by_input(p, NULL, 0);
    if (n < 0) return tsp_raise_pending();
    ts_profile_input_stat *rows = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *rows);
    if (!rows) return PyErr_NoMemory();
    n = ts_profile_key_averages_by_input(p, rows, n);
    PyObject *list = n < 0 ? (tsp_raise_pending(), NULL) : PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        const ts_profile_stat *r = &rows[i].stat;
        PyObject *t = stat_row(r, rows[i].input_dims);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    PyMem_Free(rows);
    return list;
}

static PyObject *py_export_chrome(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *path;
    if (!PyArg_ParseTuple(args, "OO&:_profile_export_chrome", &cap, PyUnicode_FSConverter, &path))
        return NULL;
    ts_profile *p = profile_arg(cap);
    ts_status st = p ? ts_profile_export_chrome(p, PyBytes_AS_STRING(path)) : TS_ERR_ARG;
    Py_DECREF(path);
    if (!p) return NULL;
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyMethodDef profiler_methods[] = {
    {"_profiler_start", TSP_KW(py_start),
     "_profiler_start(record_shapes=False, profile_memory=False, with_stack=False, "
     "with_flops=False)"},
    {"_profiler_stop", py_stop, METH_NOARGS, "_profiler_stop(): the collected profile"},
    {"_profiler_enabled", py_enabled, METH_NOARGS, NULL},
    {"_profiler_range_push", py_range_push, METH_O, NULL},
    {"_profiler_range_pop", py_range_pop, METH_NOARGS, NULL},
    {"_profile_events", py_events, METH_O, NULL},
    {"_profile_key_averages", py_key_averages, METH_VARARGS, NULL},
    {"_profile_key_averages_by_input", py_key_averages_by_input, METH_O, NULL},
    {"_profile_export_chrome", py_export_chrome, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_profiler(PyObject *m) { return PyModule_AddFunctions(m, profiler_methods); }
