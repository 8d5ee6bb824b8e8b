/* onnx.c — tessera.onnx: an ONNX file as a module (_C._OnnxModel: the C library runs the graph;
 * its initializers are exposed as Parameters wrapping the SAME handles, as py-nn's CModule does)
 * and the export of any Module, written in Python or built in C, through the C library's tracing
 * exporter: a C module mirrors the Module's parameters under their state-dict names and its
 * forward calls the Python forward. */
#include "tsp.h"

#include "tessera/quant.h"

/* ------------------------------------------------------------------ _C._OnnxModel */

typedef struct {
    PyObject_HEAD ts_module *m;
} onnx_object;

static PyTypeObject onnx_type;

static void onnx_dealloc(onnx_object *self) {
    ts_module_free(self->m);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _onnx_load(path, device=None, optimize=False) */
static PyObject *py_onnx_load(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"f", "device", "optimize", NULL};
    PyObject *path, *devo = Py_None;
    int optimize = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|Op:load", kwlist, PyUnicode_FSConverter, &path,
                                     &devo, &optimize))
        return NULL;
    ts_onnx_opts o = {.optimize = optimize};
    if (tsp_device_arg(devo, &o.device, "load", "device") < 0) {
        Py_DECREF(path);
        return NULL;
    }
    ts_module *m;
    TSP_NOGIL(m = ts_onnx_load(PyBytes_AS_STRING(path), o););
    Py_DECREF(path);
    if (!m) return tsp_raise_pending();
    onnx_object *res = PyObject_New(onnx_object, &onnx_type);
    if (!res) {
        ts_module_free(m);
        return NULL;
    }
    res->m = m;
    return (PyObject *)res;
}

/* run(inputs, n_outputs=-1) -> [outputs] (every output when n_outputs < 0) */
static PyObject *onnx_run(onnx_object *self, PyObject *args) {
    PyObject *inputs;
    int n_out = -1;
    if (!PyArg_ParseTuple(args, "O|i:run", &inputs, &n_out)) return NULL;
    PyObject *seq = PySequence_Fast(inputs, "run(): inputs must be a sequence of Tensors");
    if (!seq) return NULL;
    int n_in = (int)PySequence_Fast_GET_SIZE(seq);
    int all_out = ts_onnx_num_outputs(self->m);
    if (n_out < 0 || n_out > all_out) n_out = all_out;
    ts_tensor **in = calloc((size_t)n_in + 1, sizeof *in),
              **out = calloc((size_t)n_out + 1, sizeof *out);
    PyObject *res = NULL;
    int ok = in && out ? 0 : (PyErr_NoMemory(), -1);
    for (int i = 0; ok == 0 && i < n_in; i++)
        if (!(in[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), "run", "inputs"))) ok = -1;
    if (ok == 0 && tsp_enter() == 0) {
        ts_status s;
        TSP_NOGIL(s = ts_onnx_run(self->m, n_in, in, n_out, out););
        res = s ? tsp_raise_pending() : PyList_New(n_out);
        for (int i = 0; i < n_out; i++) {
            PyObject *t = res ? tsp_wrap(out[i]) : (ts_release(out[i]), NULL);
            if (res && !t) Py_CLEAR(res);
            if (res) PyList_SET_ITEM(res, i, t);
        }
    }
    free(in);
    free(out);
    Py_DECREF(seq);
    return res;
}

static PyObject *onnx_forward(onnx_object *self, PyObject *x) {
    PyObject *args = Py_BuildValue("([O]i)", x, 1);
    PyObject *outs = args ? onnx_run(self, args) : NULL;
    Py_XDECREF(args);
    PyObject *y = outs ? Py_NewRef(PyList_GET_ITEM(outs, 0)) : NULL;
    Py_XDECREF(outs);
    return y;
}

static PyObject *onnx_train(onnx_object *self, PyObject *on) {
    int b = PyObject_IsTrue(on);
    if (b < 0) return NULL;
    ts_module_train(self->m, b);
    Py_RETURN_NONE;
}

/* named_tensors(buffers, cls): [(name, cls wrapping the model's own handle)] */
static PyObject *onnx_named_tensors(onnx_object *self, PyObject *args) {
    int buffers;
    PyTypeObject *cls;
    if (!PyArg_ParseTuple(args, "pO!:named_tensors", &buffers, &PyType_Type, &cls)) return NULL;
    if (!PyType_IsSubtype(cls, tsp_tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "named_tensors(): cls must be a subclass of Tensor");
        return NULL;
    }
    ts_tensor_list l =
        buffers ? ts_module_named_buffers(self->m) : ts_module_named_parameters(self->m);
    PyObject *res = tsp_check() ? NULL : PyList_New(l.n);
    for (int i = 0; res && i < l.n; i++) {
        PyObject *t = tsp_wrap_owned_as(cls, ts_retain(l.tensors[i]));
        PyObject *pair = t ? Py_BuildValue("(sN)", l.names[i], t) : NULL;
        if (!pair)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, pair);
    }
    ts_tensor_list_free(&l);
    return res;
}

/* the names of the graph's inputs (which=0) or outputs (1) */
static PyObject *onnx_names(onnx_object *self, void *which) {
    bool outputs = which != NULL;
    int n = outputs ? ts_onnx_num_outputs(self->m) : ts_onnx_num_inputs(self->m);
    PyObject *res = PyList_New(n > 0 ? n : 0);
    for (int i = 0; res && i < n; i++) {
        ts_onnx_value_info info;
        ts_status s = outputs ? ts_onnx_output_info(self->m, i, &info)
                              : ts_onnx_input_info(self->m, i, &info);
        PyObject *name = s ? tsp_raise_pending() : PyUnicode_FromString(info.name);
        if (!name)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, name);
    }
    return res;
}

static PyObject *onnx_repr(onnx_object *self) {
    char *s = ts_onnx_describe(self->m);
    if (!s) return tsp_raise_pending();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

/* place(...): ts_module_place splits the graph across devices (tessera.nn.utils.place) */
static PyObject *onnx_place(onnx_object *self, PyObject *args) { return tsp_place(self->m, args); }

static PyMethodDef onnx_methods[] = {
    {"run", (PyCFunction)onnx_run, METH_VARARGS, "run(inputs, n_outputs=-1) -> [outputs]"},
    {"forward", (PyCFunction)onnx_forward, METH_O, "forward(x): the first output"},
    {"train", (PyCFunction)onnx_train, METH_O, "train(mode)"},
    {"place", (PyCFunction)onnx_place, METH_VARARGS, "place(budgets, example, grads, out, dry)"},
    {"named_tensors", (PyCFunction)onnx_named_tensors, METH_VARARGS, "named_tensors(buffers, cls)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef onnx_getset[] = {
    {"input_names", (getter)onnx_names, NULL, "the graph's inputs", NULL},
    {"output_names", (getter)onnx_names, NULL, "the graph's outputs", (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject onnx_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._OnnxModel",
    .tp_basicsize = sizeof(onnx_object),
    .tp_dealloc = (destructor)onnx_dealloc,
    .tp_repr = (reprfunc)onnx_repr,
    .tp_methods = onnx_methods,
    .tp_getset = onnx_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An ONNX model loaded by the C library (tessera.onnx.load wraps it in a Module).",
};

/* ------------------------------------------------------------------ export */

/* the C module that stands for a Python Module during the trace */
typedef struct {
    ts_module base;
    PyObject *model; /* borrowed: the export call holds it */
} py_mirror;

/* Runs the Python forward (the export's trace records the C ops it calls). ts_forward's scope is
 * open; the Python code runs with it suspended (ts_scope_suspend), so what its ops return belongs
 * to Python's objects as everywhere else (the indexing and DLPack code release their
 * intermediates themselves: inside the scope that was a double free). The result is handed back
 * as a reference of the scope (ts_contiguous of a contiguous tensor is the tensor, retained into
 * the scope). */
static ts_tensor *mirror_forward(ts_module *self, ts_tensor *x) {
    PyGILState_STATE g = PyGILState_Ensure();
    const ts_scope_suspension outer = ts_scope_suspend();
    PyObject *xo = tsp_wrap(ts_retain(x));
    PyObject *yo = xo ? PyObject_CallOneArg(((py_mirror *)self)->model, xo) : NULL;
    ts_tensor *y = yo ? ts_retain(tsp_tensor_of(yo)) : NULL;
    if (!y && yo)
        PyErr_Format(PyExc_TypeError,
                     "onnx.export: the model's forward must return one Tensor, "
                     "not %.100s",
                     Py_TYPE(yo)->tp_name);
    Py_XDECREF(xo);
    Py_XDECREF(yo);
    ts_scope_resume(outer);
    /* quantized tensors are contiguous, and ts_contiguous does not take them: a same-shape
     * ts_quantized_reshape puts the result in the export's scope (the exporter writes no node) */
    const ts_dtype dt = y ? ts_dtype_of(y) : TS_F32;
    ts_tensor *out = !y ? NULL
                     : dt == TS_QUINT8 || dt == TS_QINT8 || dt == TS_QINT32
                         ? ts_quantized_reshape(y, ts_shape_of(y))
                         : ts_contiguous(y);
    ts_release(y);
    if (!out && !ts_error()) /* the Python exception stays set: tsp_check raises it */
        ts_error_set(TS_ERR_ARG, "onnx.export: the model's forward raised an exception");
    PyGILState_Release(g);
    return out;
}

static ts_tensor *no_forward(ts_module *self, ts_tensor *x) {
    (void)x;
    ts_error_set(TS_ERR_STATE, "onnx.export: %s is part of the traced model", self->type_name);
    return NULL;
}

/* the child of m at dotted path[0..len) (made when absent) */
static ts_module *mirror_path(ts_module *m, const char *path, size_t len) {
    for (const char *p = path, *end = path + len; m && p < end;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        ts_module *c = ts_module_child(m, name);
        ts_error_clear(); /* absent: made below */
        m = c ? c
              : ts_module_add(m, name, ts_module_alloc(sizeof(ts_module), "Module", no_forward));
        p += n + 1;
    }
    return m;
}

/* registers (name, Tensor) pairs as parameters (or buffers) of the mirror, sharing the handles */
static int mirror_tensors(ts_module *root, PyObject *pairs, bool buffers) {
    PyObject *seq = PySequence_Fast(pairs, "onnx.export: expected (name, Tensor) pairs");
    for (Py_ssize_t i = 0; seq && i < PySequence_Fast_GET_SIZE(seq); i++) {
        const char *name;
        PyObject *to;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sO", &name, &to)) break;
        ts_tensor *t = tsp_tensor_arg(to, "onnx.export", name);
        const char *dot = strrchr(name, '.');
        ts_module *parent = t ? mirror_path(root, name, dot ? (size_t)(dot - name) : 0) : NULL;
        const char *leaf = dot ? dot + 1 : name;
        if (!parent || !(buffers ? ts_module_buffer(parent, leaf, ts_retain(t))
                                 : ts_module_param(parent, leaf, ts_retain(t)))) {
            if (!PyErr_Occurred()) tsp_raise_pending();
            break;
        }
    }
    Py_XDECREF(seq);
    return PyErr_Occurred() ? -1 : 0;
}

/* NULL-terminated UTF-8 names of a list (None -> NULL); the strings are borrowed from it */
static int names_arg(PyObject *o, const char ***out) {
    *out = NULL;
    if (o == Py_None) return 0;
    Py_ssize_t n = PyList_Check(o) ? PyList_GET_SIZE(o) : -1;
    if (n < 0) {
        PyErr_SetString(PyExc_TypeError, "onnx.export: input_names / output_names must be lists");
        return -1;
    }
    *out = calloc((size_t)n + 1, sizeof **out);
    for (Py_ssize_t i = 0; *out && i < n; i++)
        if (!((*out)[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(o, i)))) return -1;
    return *out ? 0 : (PyErr_NoMemory(), -1);
}

/* _onnx_export(model, params, buffers, x, f, dynamic_batch, input_names, output_names, opset) */
static PyObject *py_onnx_export(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *model, *params, *buffers, *xo, *path, *in_names, *out_names;
    int dynamic, opset;
    if (!PyArg_ParseTuple(args, "OOOOO&pOOi:export", &model, &params, &buffers, &xo,
                          PyUnicode_FSConverter, &path, &dynamic, &in_names, &out_names, &opset))
        return NULL;
    ts_onnx_export_opts o = {.dynamic_batch = dynamic, .opset = opset};
    ts_tensor *x = tsp_tensor_arg(xo, "onnx.export", "args");
    py_mirror *m = x ? ts_module_alloc(sizeof *m, "Model", mirror_forward) : NULL;
    if (m) m->model = model;
    int rc = !m ? -1
             : mirror_tensors(&m->base, params, false) < 0 ||
                     mirror_tensors(&m->base, buffers, true) < 0 ||
                     names_arg(in_names, (const char ***)&o.input_names) < 0 ||
                     names_arg(out_names, (const char ***)&o.output_names) < 0
                 ? -1
                 : 0;
    if (!m && x) tsp_raise_pending();
    if (rc == 0) {
        ts_status s;
        TSP_NOGIL(s = ts_onnx_export(&m->base, 1, &x, PyBytes_AS_STRING(path), o););
        rc = s ? tsp_check() : 0;
        if (s && rc == 0) rc = (tsp_raise_pending(), -1);
    }
    free((void *)o.input_names);
    free((void *)o.output_names);
    if (m) ts_module_free(&m->base);
    Py_DECREF(path);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef onnx_functions[] = {
    {"_onnx_load", TSP_KW(py_onnx_load), NULL},
    {"_onnx_export", py_onnx_export, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_onnx(PyObject *m) {
    if (tsp_add_type(m, "_OnnxModel", &onnx_type) < 0) return -1;
    return PyModule_AddFunctions(m, onnx_functions);
}
