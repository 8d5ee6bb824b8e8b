/* saved_hooks.c — tessera.autograd.graph's saved_tensors_hooks and save_on_cpu
 * (include/tessera/saved_hooks.h), and tessera.sim's simulated host link
 * (include/tessera/sim_link.h). */
#include "tessera/saved_hooks.h"

#include "tessera/sim_link.h"
#include "tsp.h"

/* A Python exception from a hook becomes the pending Tessera error (the hook runs inside a C op).
 */
static void error_from_python(const char *what) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    ts_error_set(TS_ERR_STATE, "saved_tensors_hooks: %s raised %s: %s", what,
                 type ? ((PyTypeObject *)type)->tp_name : "an exception", msg ? msg : "?");
    Py_XDECREF(text);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    PyErr_Clear();
}

/* ctx: a (pack, unpack) tuple; a handle: pack's result (a new reference) */
static void *py_pack(void *ctx, ts_tensor *t) {
    PyGILState_STATE g = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    PyObject *w = tsp_wrap_owned(ts_retain(t));
    PyObject *r = w ? PyObject_CallOneArg(PyTuple_GET_ITEM((PyObject *)ctx, 0), w) : NULL;
    Py_XDECREF(w);
    ts_scope_resume(sus);
    if (!r) error_from_python("pack_hook");
    PyGILState_Release(g);
    return r;
}

static ts_tensor *py_unpack(void *ctx, void *handle) {
    PyGILState_STATE g = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM((PyObject *)ctx, 1), handle);
    ts_scope_resume(sus);
    ts_tensor *out = NULL;
    if (!r) {
        error_from_python("unpack_hook");
    } else if (!tsp_tensor_of(r)) {
        ts_error_set(TS_ERR_ARG, "saved_tensors_hooks: unpack_hook must return a Tensor, not %s",
                     Py_TYPE(r)->tp_name);
    } else {
        /* a view owned by the library's scope: r may be the only holder of the tensor */
        out = ts_detach(tsp_tensor_of(r));
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return out;
}

static void py_free_handle(void *ctx, void *handle) {
    (void)ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)handle);
    PyGILState_Release(g);
}

static void py_free_ctx(void *ctx) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

/* _saved_hooks_push(pack_hook, unpack_hook) */
static PyObject *f_push(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *pack, *unpack;
    if (!PyArg_ParseTuple(args, "OO:saved_tensors_hooks", &pack, &unpack)) return NULL;
    if (!PyCallable_Check(pack) || !PyCallable_Check(unpack))
        return PyErr_Format(PyExc_TypeError,
                            "saved_tensors_hooks: pack_hook and unpack_hook must be callable");
    PyObject *ctx = PyTuple_Pack(2, pack, unpack);
    if (!ctx) return NULL;
    if (ts_saved_tensors_hooks_push(py_pack, py_unpack, py_free_handle, ctx, py_free_ctx) != TS_OK)
        return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *f_pop(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    if (ts_saved_tensors_hooks_pop() != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* _save_on_cpu_begin(pin_memory, min_bytes, prefetch) */
static PyObject *f_save_on_cpu_begin(PyObject *mod, PyObject *args) {
    (void)mod;
    int pin = 0, prefetch = 0;
    unsigned long long min_bytes = 0;
    if (!PyArg_ParseTuple(args, "pKi:save_on_cpu", &pin, &min_bytes, &prefetch)) return NULL;
    ts_save_on_cpu_opts o = {
        .min_bytes = (size_t)min_bytes, .pin_memory = pin, .prefetch = prefetch};
    if (ts_save_on_cpu_begin(o) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *f_save_on_cpu_end(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    if (ts_save_on_cpu_end() != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *f_save_on_cpu_stats(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    ts_save_on_cpu_stats s;
    ts_save_on_cpu_stats_get(&s);
    return Py_BuildValue("{sKsKsKsKsK}", "offloaded", (unsigned long long)s.offloaded,
                         "offloaded_bytes", (unsigned long long)s.offloaded_bytes, "kept",
                         (unsigned long long)s.kept, "restored", (unsigned long long)s.restored,
                         "prefetched", (unsigned long long)s.prefetched);
}

/* _sim_set_link(spec) or _sim_set_link(bandwidth, latency) */
static PyObject *f_sim_set_link(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *spec = NULL;
    double bw = 0, lat = 0;
    ts_status st;
    if (PyArg_ParseTuple(args, "z:set_link", &spec)) {
        st = ts_sim_set_link_str(spec, "set_link");
    } else {
        PyErr_Clear();
        if (!PyArg_ParseTuple(args, "dd:set_link", &bw, &lat)) return NULL;
        st = ts_sim_set_link(bw, lat);
    }
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *f_sim_link(PyObject *mod, PyObject *noargs) {
    (void)mod, (void)noargs;
    double bw = 0, lat = 0;
    if (!ts_sim_link_get(&bw, &lat)) Py_RETURN_NONE;
    return Py_BuildValue("(dd)", bw, lat);
}

static PyObject *f_sim_link_stats(PyObject *mod, PyObject *arg) {
    (void)mod;
    int i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    ts_sim_link_stats s;
    if (ts_sim_link_stats_get(i, &s) != TS_OK) return tsp_raise_pending();
    return Py_BuildValue("{sKsKsKsKsKsLsL}", "bytes_h2d", (unsigned long long)s.bytes_h2d,
                         "bytes_d2h", (unsigned long long)s.bytes_d2h, "copies_h2d",
                         (unsigned long long)s.copies_h2d, "copies_d2h",
                         (unsigned long long)s.copies_d2h, "async_copies",
                         (unsigned long long)s.async_copies, "busy_ns", (long long)s.busy_ns,
                         "wait_ns", (long long)s.wait_ns);
}

static PyObject *f_sim_link_reset(PyObject *mod, PyObject *arg) {
    (void)mod;
    int i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (ts_sim_link_reset_stats(i) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *f_sim_link_wait(PyObject *mod, PyObject *arg) {
    (void)mod;
    int i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_sim_link_wait(i);
    Py_END_ALLOW_THREADS if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"_saved_hooks_push", f_push, METH_VARARGS, "_saved_hooks_push(pack_hook, unpack_hook)"},
    {"_saved_hooks_pop", f_pop, METH_NOARGS, NULL},
    {"_save_on_cpu_begin", f_save_on_cpu_begin, METH_VARARGS,
     "_save_on_cpu_begin(pin_memory, min_bytes, prefetch)"},
    {"_save_on_cpu_end", f_save_on_cpu_end, METH_NOARGS, NULL},
    {"_save_on_cpu_stats", f_save_on_cpu_stats, METH_NOARGS, NULL},
    {"_sim_set_link", f_sim_set_link, METH_VARARGS, "_sim_set_link(spec | bandwidth, latency)"},
    {"_sim_link", f_sim_link, METH_NOARGS, NULL},
    {"_sim_link_stats", f_sim_link_stats, METH_O, NULL},
    {"_sim_link_reset_stats", f_sim_link_reset, METH_O, NULL},
    {"_sim_link_wait", f_sim_link_wait, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_saved_hooks(PyObject *m) { return PyModule_AddFunctions(m, functions); }
