/* io.c — tessera.save / tessera.load (safetensors), the thread's default-device stack behind
 * tessera.device_scope, memory statistics and the CPU thread count. */
#include "tsp.h"

#include "tessera/pt.h"

/* The metadata key that marks a file holding one Tensor (tessera.save(tensor, path)), so load
 * gives back a Tensor rather than a dict. */
#define IO_KIND_KEY   "tessera.object"
#define IO_ONE_TENSOR "tensor"

/* ------------------------------------------------------------------ helpers of tsp.h */

PyObject *tsp_wrap_owned_as(PyTypeObject *type, ts_tensor *t) {
    bool scoped = ts_scope_depth() > 0;
    PyObject *o = tsp_wrap_as(type, t);
    if (scoped) ts_release(t);
    return o;
}

PyObject *tsp_wrap_owned(ts_tensor *t) { return tsp_wrap_owned_as(tsp_tensor_type, t); }

int tsp_add_type(PyObject *m, const char *name, PyTypeObject *type) {
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ save */

/* Adds obj's (name, Tensor) pairs to l; -1 with TypeError naming the offending key. */
static int collect_mapping(PyObject *obj, ts_tensor_list *l) {
    PyObject *items = PyMapping_Items(obj);
    if (!items) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(items); i++) {
        PyObject *key = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        PyObject *value = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        if (!PyUnicode_Check(key)) {
            PyErr_Format(PyExc_TypeError, "save(): the keys of 'obj' must be str, not %.100s",
                         Py_TYPE(key)->tp_name);
            rc = -1;
        } else if (!tsp_tensor_of(value)) {
            PyErr_Format(PyExc_TypeError, "save(): obj[%R] must be Tensor, not %.100s", key,
                         Py_TYPE(value)->tp_name);
            rc = -1;
        } else {
            const char *name = PyUnicode_AsUTF8(key);
            rc = !name || ts_tensor_list_add(l, name, tsp_tensor_of(value)) ? -1 : 0;
            if (name && rc) tsp_check();
        }
    }
    Py_DECREF(items);
    return rc;
}

static PyObject *py_save(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"obj", "f", NULL};
    PyObject *obj, *path;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&:save", kwlist, &obj, PyUnicode_FSConverter,
                                     &path))
        return NULL;
    ts_tensor_list list = {0};
    const char *meta[2] = {IO_KIND_KEY, IO_ONE_TENSOR};
    int n_meta = 0, rc = 0;
    if (tsp_tensor_of(obj)) {
        n_meta = 1;
        rc = ts_tensor_list_add(&list, IO_ONE_TENSOR, tsp_tensor_of(obj)) ? tsp_check() : 0;
    } else if (PyMapping_Check(obj) && !PyUnicode_Check(obj) && !PySequence_Check(obj)) {
        rc = collect_mapping(obj, &list);
    } else {
        PyErr_Format(PyExc_TypeError,
                     "save(): argument 'obj' must be a Tensor or a dict of str to Tensor (a "
                     "state_dict), not %.100s",
                     Py_TYPE(obj)->tp_name);
        rc = -1;
    }
    if (rc == 0) {
        const char *p = PyBytes_AS_STRING(path);
        ts_status s;
        TSP_NOGIL(s = ts_safetensors_save(p, &list, n_meta ? meta : NULL, n_meta););
        rc = s ? tsp_check() : 0;
    }
    ts_tensor_list_free(&list);
    Py_DECREF(path);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ load */

/* A dict name -> Tensor of l's tensors (each Tensor takes its own reference). */
static PyObject *list_to_dict(const ts_tensor_list *l) {
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < l->n; i++) {
        PyObject *t = tsp_wrap_owned(ts_retain(l->tensors[i]));
        if (!t || PyDict_SetItemString(d, l->names[i], t) < 0) Py_CLEAR(d);
        Py_XDECREF(t);
    }
    return d;
}

/* true when the file was written by save(tensor, path) */
static bool holds_one_tensor(const char *path, const ts_tensor_list *l) {
    if (l->n != 1 || strcmp(l->names[0], IO_ONE_TENSOR) != 0) return false;
    char *kind = ts_safetensors_metadata(path, IO_KIND_KEY);
    bool one = kind && strcmp(kind, IO_ONE_TENSOR) == 0;
    free(kind);
    ts_error_clear(); /* a file without metadata is an ordinary state_dict */
    return one;
}

static PyObject *py_load(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"f", "map_location", "weights_only", NULL};
    PyObject *path, *loc = Py_None, *weights_only = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|OO:load", kwlist, PyUnicode_FSConverter, &path,
                                     &loc, &weights_only))
        return NULL;
    ts_device dev = ts_cpu(); /* safetensors records no device: None means the cpu */
    if (loc != Py_None && tsp_device_arg(loc, &dev, "load", "map_location") < 0) {
        Py_DECREF(path);
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(path);
    ts_tensor_list l = {0};
    ts_status s;
    TSP_NOGIL(s = ts_safetensors_load(p, dev, &l););
    PyObject *res = NULL;
    if (s)
        tsp_check();
    else if (holds_one_tensor(p, &l))
        res = tsp_wrap_owned(ts_retain(l.tensors[0]));
    else
        res = list_to_dict(&l);
    ts_tensor_list_free(&l);
    Py_DECREF(path);
    return res;
}

/* _load_pt_c(f, map_location=None): a PyTorch checkpoint through the C reader (ts_load_pt) as a
 * flat dict of its tensors ("model.fc.weight"), for tests that check it against tessera.load */
static PyObject *py_load_pt_c(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"f", "map_location", NULL};
    PyObject *path, *loc = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O:_load_pt_c", kwlist, PyUnicode_FSConverter,
                                     &path, &loc))
        return NULL;
    ts_device dev = ts_cpu();
    if (loc != Py_None && tsp_device_arg(loc, &dev, "_load_pt_c", "map_location") < 0) {
        Py_DECREF(path);
        return NULL;
    }
    ts_tensor_list l = {0};
    ts_status s;
    TSP_NOGIL(s = ts_load_pt(PyBytes_AS_STRING(path), dev, &l););
    PyObject *res = s ? (tsp_check(), NULL) : list_to_dict(&l);
    ts_tensor_list_free(&l);
    Py_DECREF(path);
    return res;
}

/* ------------------------------------------------------------------ device scopes */

static PyObject *py_device_push(PyObject *self, PyObject *arg) {
    (void)self;
    ts_device d;
    if (tsp_device_arg(arg, &d, "device_scope", "device") < 0) return NULL;
    if (arg != Py_None && !ts_device_is_available(d)) {
        PyErr_Format(tsp_error_type, "device_scope: %s is not available (%d cuda, %d sim devices)",
                     ts_device_str(d), ts_device_count(TS_CUDA), ts_device_count(TS_SIM));
        return NULL;
    }
    ts_device_push(d);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_device_pop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_device_pop();
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_default_device(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return tsp_device_obj(ts_default_device());
}

/* ------------------------------------------------------------------ memory */

/* The device argument of the memory functions: None is the thread's default device. */
static int mem_device(PyObject *args, PyObject *kw, const char *fn, ts_device *d) {
    static char *kwlist[] = {"device", NULL};
    PyObject *o = Py_None;
    char fmt[64];
    snprintf(fmt, sizeof fmt, "|O:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &o)) return -1;
    return tsp_device_arg(o, d, fn, "device");
}

/* Adds key: value (an unsigned count) to d; -1 on failure. */
static int put_u64(PyObject *d, const char *key, unsigned long long value) {
    PyObject *v = PyLong_FromUnsignedLongLong(value);
    int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

/* torch.cuda.memory_stats's keys where Tessera's allocator has the same figure */
static PyObject *py_memory_stats(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    ts_device dev;
    ts_mem_stats st;
    if (mem_device(args, kw, "memory_stats", &dev) < 0) return NULL;
    if (ts_memory_stats(dev, &st)) return tsp_raise_pending();
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    if (put_u64(d, "allocated_bytes.all.current", st.allocated) < 0 ||
        put_u64(d, "allocated_bytes.all.peak", st.peak_allocated) < 0 ||
        put_u64(d, "reserved_bytes.all.current", st.reserved) < 0 ||
        put_u64(d, "reserved_bytes.all.peak", st.peak_reserved) < 0 ||
        put_u64(d, "allocation.all.allocated", st.alloc_count) < 0 ||
        put_u64(d, "num_ooms", st.oom_count) < 0 ||
        put_u64(d, "live_tensors", (unsigned long long)st.live_tensors) < 0)
        Py_CLEAR(d);
    return d;
}

static PyObject *py_reset_peak(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    ts_device dev;
    if (mem_device(args, kw, "reset_peak_memory_stats", &dev) < 0) return NULL;
    if (ts_memory_reset_peak(dev)) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    ts_device dev;
    ts_status s;
    if (mem_device(args, kw, "empty_cache", &dev) < 0) return NULL;
    TSP_NOGIL(s = ts_empty_cache(dev););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* (free, total) bytes, as torch.cuda.mem_get_info */
static PyObject *py_mem_get_info(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    ts_device dev;
    size_t free_b, total_b;
    if (mem_device(args, kw, "mem_get_info", &dev) < 0) return NULL;
    if (ts_device_memory(dev, &free_b, &total_b)) return tsp_raise_pending();
    return Py_BuildValue("(KK)", (unsigned long long)free_b, (unsigned long long)total_b);
}

/* ------------------------------------------------------------------ devices, threads */

static PyObject *py_cuda_is_available(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(ts_cuda_is_available());
}

/* device_count("cuda" | "sim") */
static PyObject *py_device_count(PyObject *self, PyObject *arg) {
    (void)self;
    const char *kind = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!kind) {
        PyErr_SetString(PyExc_TypeError, "_device_count(): argument must be \"cuda\" or \"sim\"");
        return NULL;
    }
    ts_device_type t = strcmp(kind, "sim") == 0   ? TS_SIM
                       : strcmp(kind, "cpu") == 0 ? TS_CPU
                                                  : TS_CUDA;
    return PyLong_FromLong(ts_device_count(t));
}

/* _sim_configure(count, capacity_bytes=0): simulated devices sim:0..count-1 */
static PyObject *py_sim_configure(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"count", "capacity_bytes", NULL};
    int count;
    unsigned long long cap = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|K:configure", kwlist, &count, &cap)) return NULL;
    if (ts_sim_configure(count, (size_t)cap)) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLong(ts_get_num_threads());
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "set_num_threads(): argument 'int' must be int, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (n < 1 || n > 4096) {
        PyErr_Format(PyExc_ValueError,
                     "set_num_threads(): expected a positive number of threads, "
                     "got %ld",
                     n);
        return NULL;
    }
    ts_set_num_threads((int)n);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef io_methods[] = {
    {"save", TSP_KW(py_save),
     "save(obj, f): writes a Tensor or a dict of str to Tensor (a state_dict) as safetensors."},
    {"load", TSP_KW(py_load),
     "load(f, map_location=None): a safetensors file as a dict of Tensors (on the cpu, or on "
     "map_location)."},
    {"_load_pt_c", TSP_KW(py_load_pt_c),
     "_load_pt_c(f, map_location=None): a PyTorch checkpoint read by the C reader (ts_load_pt) "
     "as a flat dict of its tensors."},
    {"memory_stats", TSP_KW(py_memory_stats),
     "memory_stats(device=None): the allocator's figures for any device (cpu, cuda, sim)."},
    {"_reset_peak_memory_stats", TSP_KW(py_reset_peak), NULL},
    {"_empty_cache", TSP_KW(py_empty_cache), NULL},
    {"_mem_get_info", TSP_KW(py_mem_get_info), NULL},
    {"_device_push", py_device_push, METH_O, NULL},
    {"_device_pop", py_device_pop, METH_NOARGS, NULL},
    {"_default_device", py_default_device, METH_NOARGS, NULL},
    {"_cuda_is_available", py_cuda_is_available, METH_NOARGS, NULL},
    {"_device_count", py_device_count, METH_O, NULL},
    {"_sim_configure", TSP_KW(py_sim_configure), NULL},
    {"_get_num_threads", py_get_num_threads, METH_NOARGS, NULL},
    {"_set_num_threads", py_set_num_threads, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_io(PyObject *m) { return PyModule_AddFunctions(m, io_methods); }
