/* autograd_function.c — custom autograd Functions (tessera.autograd.Function, whose Python side
 * is tessera/_autograd_function.py) over ts_custom_function_apply, and the graph's Python
 * surface: t.grad_fn as a Node with name() and next_functions ((node, input_nr) pairs; leaves as
 * AccumulateGrad nodes with .variable); Tensor.register_hook (leaves too) and
 * register_post_accumulate_grad_hook. A Function's backward (or a hook)
 * runs from the C engine's backward with the GIL taken and the C scopes suspended; an exception it
 * raises fails the pass and is raised again, as itself, out of .backward(). */
#include <stdlib.h>

#include "autograd_function.h"
#include "tensor_impl.h"
#include "tessera/custom_function.h"

/* ------------------------------------------------------------------ the exception of a pass */
static _Thread_local PyObject *exc_type, *exc_value, *exc_tb;

void tsp_function_exception_reset(void) {
    Py_CLEAR(exc_type);
    Py_CLEAR(exc_value);
    Py_CLEAR(exc_tb);
}

int tsp_function_exception_restore(int rc) {
    if (!exc_type) return rc;
    ts_error_clear();
    PyErr_Clear();
    PyErr_Restore(exc_type, exc_value, exc_tb); /* steals them */
    exc_type = exc_value = exc_tb = NULL;
    return -1;
}

/* keeps the first exception of the pass, and fails the pass with a C error that names it */
static ts_status stash_exception(const char *name) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    ts_status st =
        ts_error_set(TS_ERR_STATE, "%s: backward raised %s: %s", name,
                     type ? ((PyTypeObject *)type)->tp_name : "an exception", msg ? msg : "?");
    Py_XDECREF(text);
    PyErr_Clear();
    if (!exc_type) {
        exc_type = type, exc_value = value, exc_tb = tb;
    } else {
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    }
    return st;
}

/* ------------------------------------------------------------------ the backward bridge */
typedef struct py_fn {
    PyObject *backward; /* bridge(*grads) -> tuple: one Tensor or None per forward input */
    char name[96];
} py_fn;

static void py_fn_free(void *p) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(((py_fn *)p)->backward);
    PyGILState_Release(g);
    free(p);
}

static ts_status py_fn_backward(void *p, ts_tensor *const *go, int n_out, ts_tensor **gi,
                                int n_in) {
    py_fn *f = p;
    PyGILState_STATE gs = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    ts_status st = TS_OK;
    PyObject *args = PyTuple_New(n_out), *r = NULL, *seq = NULL;
    for (int i = 0; args && i < n_out; i++) {
        PyObject *w = go[i] ? tsp_wrap(ts_retain(go[i])) : Py_NewRef(Py_None);
        if (!w) {
            Py_CLEAR(args);
            break;
        }
        PyTuple_SET_ITEM(args, i, w);
    }
    if (args) r = PyObject_CallObject(f->backward, args);
    if (r) seq = PySequence_Fast(r, "Function backward bridge must return a sequence");
    if (seq && PySequence_Fast_GET_SIZE(seq) != n_in) {
        PyErr_Format(PyExc_RuntimeError, "%s: backward bridge returned %zd gradients for %d inputs",
                     f->name, PySequence_Fast_GET_SIZE(seq), n_in);
        Py_CLEAR(seq);
    }
    for (int j = 0; seq && j < n_in; j++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, j);
        if (o != Py_None && !tsp_tensor_of(o)) {
            PyErr_Format(PyExc_TypeError,
                         "%s: backward returned %.100s at position %d; "
                         "expected a Tensor or None",
                         f->name, Py_TYPE(o)->tp_name, j);
            Py_CLEAR(seq);
        }
    }
    if (!seq) st = stash_exception(f->name);
    ts_scope_resume(sus);
    /* inside the engine's scope again: aliases it owns carry the gradients past the objects
     * (recorded aliases under create_graph, where grad mode is on: the gradients' history) */
    for (int j = 0; seq && j < n_in; j++) {
        ts_tensor *t = tsp_tensor_of(PySequence_Fast_GET_ITEM(seq, j));
        if (t) gi[j] = ts_view_dtype(t, ts_dtype_of(t));
    }
    Py_XDECREF(seq);
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyGILState_Release(gs);
    return st != TS_OK ? st : ts_error();
}

/* _function_apply(name, bridge, inputs, outputs, flags, materialize_grads) -> list of Tensors:
 * inputs one Tensor or None per forward argument; outputs the forward's Tensors; flags one
 * TS_CUSTOM_OUT_* per output. */
static PyObject *f_function_apply(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *name;
    PyObject *bridge, *ins_o, *outs_o, *flags_o;
    int materialize;
    if (!PyArg_ParseTuple(args, "sOOOOp:_function_apply", &name, &bridge, &ins_o, &outs_o, &flags_o,
                          &materialize))
        return NULL;
    PyObject *ins = PySequence_Fast(ins_o, "_function_apply: inputs must be a sequence");
    PyObject *outs =
        ins ? PySequence_Fast(outs_o, "_function_apply: outputs must be a sequence") : NULL;
    PyObject *flg =
        outs ? PySequence_Fast(flags_o, "_function_apply: flags must be a sequence") : NULL;
    PyObject *result = NULL;
    ts_tensor **in = NULL, **out = NULL, **res = NULL;
    unsigned *flags = NULL;
    py_fn *f = NULL;
    if (!flg) goto done;
    const Py_ssize_t n_in = PySequence_Fast_GET_SIZE(ins), n_out = PySequence_Fast_GET_SIZE(outs);
    if (PySequence_Fast_GET_SIZE(flg) != n_out || n_in > INT32_MAX || n_out > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "_function_apply: one flag per output");
        goto done;
    }
    in = PyMem_Calloc((size_t)n_in + 1, sizeof *in);
    out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    res = PyMem_Calloc((size_t)n_out + 1, sizeof *res);
    flags = PyMem_Calloc((size_t)n_out + 1, sizeof *flags);
    f = malloc(sizeof *f);
    if (!in || !out || !res || !flags || !f) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(ins, i);
        if (o != Py_None && !(in[i] = tsp_tensor_arg(o, "_function_apply", "inputs"))) goto done;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        if (!(out[i] =
                  tsp_tensor_arg(PySequence_Fast_GET_ITEM(outs, i), "_function_apply", "outputs")))
            goto done;
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(flg, i));
        if (v == -1 && PyErr_Occurred()) goto done;
        flags[i] = (unsigned)v;
    }
    f->backward = Py_NewRef(bridge);
    PyOS_snprintf(f->name, sizeof f->name, "%s", name);
    ts_custom_function cf = {.name = name,
                             .backward = py_fn_backward,
                             .ctx = f,
                             .ctx_free = py_fn_free,
                             .output_flags = flags,
                             .keep_undefined_grads = !materialize};
    f = NULL; /* taken over */
    ts_status st = ts_custom_function_apply(&cf, in, (int)n_in, out, (int)n_out, res);
    if (st != TS_OK) {
        tsp_raise_pending();
        goto done;
    }
    if (!(result = PyList_New(n_out))) {
        for (Py_ssize_t i = 0; i < n_out; i++) tsp_drop(res[i]);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *w = tsp_wrap(res[i]);
        if (!w) {
            for (Py_ssize_t k = i + 1; k < n_out; k++) tsp_drop(res[k]);
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, w);
    }
done:
    free(f);
    PyMem_Free(in), PyMem_Free(out), PyMem_Free(res), PyMem_Free(flags);
    Py_XDECREF(ins), Py_XDECREF(outs), Py_XDECREF(flg);
    return result;
}

/* ------------------------------------------------------------------ tensor hooks */
static void py_hook_free(void *p) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)p);
    PyGILState_Release(g);
}

/* hook(grad) -> Tensor or None, called from the engine (ts_register_tensor_hook) */
static ts_tensor *py_hook_run(void *p, ts_tensor *grad) {
    PyGILState_STATE gs = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    PyObject *w = tsp_wrap(ts_retain(grad));
    PyObject *r = w ? PyObject_CallOneArg((PyObject *)p, w) : NULL;
    if (r && r != Py_None && !tsp_tensor_of(r)) {
        PyErr_Format(PyExc_TypeError,
                     "register_hook: the hook returned %.100s; expected a Tensor "
                     "or None",
                     Py_TYPE(r)->tp_name);
        Py_CLEAR(r);
    }
    if (!r) stash_exception("register_hook");
    ts_scope_resume(sus);
    ts_tensor *out = r && r != Py_None
                         ? ts_view_dtype(tsp_tensor_of(r), ts_dtype_of(tsp_tensor_of(r)))
                         : NULL; /* the engine's scope (a recorded alias under create_graph) */
    Py_XDECREF(r);
    Py_XDECREF(w);
    PyGILState_Release(gs);
    return out;
}

/* _tensor_register_hook(t, hook) -> handle id */
static PyObject *f_tensor_register_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *to, *hook;
    if (!PyArg_ParseTuple(args, "OO:_tensor_register_hook", &to, &hook)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "register_hook", "self");
    if (!t) return NULL;
    if (!PyCallable_Check(hook))
        return PyErr_Format(PyExc_TypeError, "register_hook: the hook must be callable, not %.100s",
                            Py_TYPE(hook)->tp_name);
    int id = ts_register_tensor_hook(t, py_hook_run, Py_NewRef(hook), py_hook_free);
    if (!id) return tsp_raise_pending();
    return PyLong_FromLong(id);
}

/* _tensor_remove_hook(t, id): False when t's node no longer has it */
static PyObject *f_tensor_remove_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *to;
    int id;
    if (!PyArg_ParseTuple(args, "Oi:_tensor_remove_hook", &to, &id)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "remove_hook", "self");
    if (!t) return NULL;
    ts_status st = ts_remove_tensor_hook(t, id);
    ts_error_clear();
    return PyBool_FromLong(st == TS_OK);
}

/* Tensor.register_hook(hook): tessera._autograd_function's handle around _tensor_register_hook */
PyObject *tsp_tensor_register_hook(PyObject *self, PyObject *hook) {
    PyObject *m = PyImport_ImportModule("tessera._autograd_function");
    PyObject *r = m ? PyObject_CallMethod(m, "_register_hook", "OO", self, hook) : NULL;
    Py_XDECREF(m);
    return r;
}

/* ------------------------------------------------------------------ post-accumulate-grad hooks */
/* hook(tensor) -> None after backward accumulated the leaf's .grad
 * (ts_register_post_accumulate_grad_hook). That C hook has no ctx_free: the state is owned by a
 * companion hook on the leaf's gradient that changes nothing (ts_register_tensor_hook frees its ctx
 * with the tensor or at its removal); the Tensor object is held weakly (it holds the hooks). */
typedef struct post_hook {
    PyObject *hook;
    PyObject *tensor; /* a weakref to the Tensor object the hook was registered on */
} post_hook;

static void post_hook_free(void *p) {
    post_hook *h = p;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(h->hook);
    Py_XDECREF(h->tensor);
    PyGILState_Release(g);
    PyMem_RawFree(h);
}

static ts_tensor *post_hook_keep(void *p, ts_tensor *grad) {
    (void)p, (void)grad;
    return NULL; /* the gradient as it is */
}

static void post_hook_run(ts_tensor *leaf, void *p) {
    if (ts_error() != TS_OK) return; /* the pass failed: no Python code runs for it */
    post_hook *h = p;
    PyGILState_STATE gs = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    PyObject *hook = Py_NewRef(h->hook); /* the hook may remove itself */
    PyObject *t = PyObject_CallNoArgs(h->tensor);
    if (t == Py_None) { /* the object is gone, the tensor is not (a module or the graph holds it) */
        Py_DECREF(t);
        t = tsp_wrap(ts_retain(leaf));
    }
    PyObject *r = t ? PyObject_CallOneArg(hook, t) : NULL;
    if (r && r != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "register_post_accumulate_grad_hook: the hook returned %.100s; expected None",
                     Py_TYPE(r)->tp_name);
        Py_CLEAR(r);
    }
    if (!r) stash_exception("register_post_accumulate_grad_hook");
    Py_XDECREF(r);
    Py_XDECREF(t);
    Py_DECREF(hook);
    ts_scope_resume(sus);
    PyGILState_Release(gs);
}

/* _tensor_register_post_hook(t, hook) -> (id, keeper id) */
static PyObject *f_tensor_register_post_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *to, *hook;
    if (!PyArg_ParseTuple(args, "OO:_tensor_register_post_hook", &to, &hook)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "register_post_accumulate_grad_hook", "self");
    if (!t) return NULL;
    if (!PyCallable_Check(hook))
        return PyErr_Format(PyExc_TypeError,
                            "register_post_accumulate_grad_hook: the hook must be callable, not "
                            "%.100s",
                            Py_TYPE(hook)->tp_name);
    post_hook *h = PyMem_RawMalloc(sizeof *h);
    if (!h) return PyErr_NoMemory();
    *h = (post_hook){.hook = Py_NewRef(hook), .tensor = PyWeakref_NewRef(to, NULL)};
    if (!h->tensor) {
        post_hook_free(h);
        return NULL;
    }
    int keep = ts_register_tensor_hook(t, post_hook_keep, h, post_hook_free); /* owns h */
    if (!keep) return tsp_raise_pending();
    int id = ts_register_post_accumulate_grad_hook(t, post_hook_run, h);
    if (!id) {
        tsp_raise_pending();
        ts_remove_tensor_hook(t, keep);
        ts_error_clear();
        return NULL;
    }
    return Py_BuildValue("ii", id, keep);
}

/* _tensor_remove_post_hook(t, id, keeper id): False when t no longer has it */
static PyObject *f_tensor_remove_post_hook(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *to;
    int id, keep;
    if (!PyArg_ParseTuple(args, "Oii:_tensor_remove_post_hook", &to, &id, &keep)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "remove_hook", "self");
    if (!t) return NULL;
    ts_status st = ts_remove_grad_hook(t, id);
    if (st == TS_OK) ts_remove_tensor_hook(t, keep); /* frees the state */
    ts_error_clear();
    return PyBool_FromLong(st == TS_OK);
}

/* Tensor.register_post_accumulate_grad_hook(hook): the handle of tessera._autograd_function */
PyObject *tsp_tensor_register_post_accumulate_grad_hook(PyObject *self, PyObject *hook) {
    PyObject *m = PyImport_ImportModule("tessera._autograd_function");
    PyObject *r =
        m ? PyObject_CallMethod(m, "_register_post_accumulate_grad_hook", "OO", self, hook) : NULL;
    Py_XDECREF(m);
    return r;
}

/* ------------------------------------------------------------------ Node objects */
typedef struct {
    PyObject_HEAD ts_node *node; /* retained */
} node_obj;

typedef struct {
    PyObject_HEAD PyObject *variable; /* the leaf Tensor */
} acc_obj;

static PyTypeObject node_type, acc_type;

static PyObject *node_wrap(ts_node *n) { /* takes n's reference */
    node_obj *o = PyObject_New(node_obj, &node_type);
    if (!o) return ts_node_release(n), NULL;
    o->node = n;
    return (PyObject *)o;
}

PyObject *tsp_grad_fn_of(ts_tensor *t) {
    ts_node *n = ts_grad_fn_node(t);
    if (!n) Py_RETURN_NONE;
    return node_wrap(n);
}

static void node_dealloc(PyObject *self) {
    ts_node_release(((node_obj *)self)->node);
    PyObject_Free(self);
}
static PyObject *node_repr(PyObject *self) {
    return PyUnicode_FromFormat("<%s object at %p>", ts_node_name(((node_obj *)self)->node),
                                (void *)((node_obj *)self)->node);
}
static PyObject *node_name(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyUnicode_FromString(ts_node_name(((node_obj *)self)->node));
}
static Py_hash_t node_hash(PyObject *self) {
    Py_hash_t h = (Py_hash_t)((uintptr_t)((node_obj *)self)->node >> 4);
    return h == -1 ? -2 : h;
}
static PyObject *node_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &node_type))
        Py_RETURN_NOTIMPLEMENTED;
    const bool eq = ((node_obj *)a)->node == ((node_obj *)b)->node;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* ((next_node_or_AccumulateGrad_or_None, input_nr), ...), one pair per forward input */
static PyObject *node_next_functions(PyObject *self, void *unused) {
    (void)unused;
    ts_node *n = ((node_obj *)self)->node;
    const int k = ts_node_num_inputs(n);
    PyObject *tup = PyTuple_New(k);
    for (int i = 0; tup && i < k; i++) {
        int nr = 0;
        ts_tensor *leaf = NULL;
        ts_node *next = ts_node_next(n, i, &nr, &leaf);
        PyObject *fn;
        if (next) {
            fn = node_wrap(next);
        } else if (leaf) {
            acc_obj *a = PyObject_New(acc_obj, &acc_type);
            fn = (PyObject *)a;
            if (a && !(a->variable = tsp_wrap_owned(ts_retain(leaf)))) Py_CLEAR(fn);
        } else {
            fn = Py_NewRef(Py_None);
        }
        PyObject *pair = fn ? Py_BuildValue("(Ni)", fn, nr) : NULL;
        if (!pair) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, pair);
    }
    return tup;
}

static PyMethodDef node_methods[] = {
    {"name", node_name, METH_NOARGS, "the backward op's name (\"AddBackward0\")"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef node_getset[] = {
    {"next_functions", node_next_functions, NULL,
     "((node, input_nr), ...): where each forward input's gradient goes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyTypeObject node_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.autograd.Node",
    .tp_basicsize = sizeof(node_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The autograd node that made a tensor (its grad_fn).",
    .tp_dealloc = node_dealloc,
    .tp_repr = node_repr,
    .tp_hash = node_hash,
    .tp_richcompare = node_richcompare,
    .tp_methods = node_methods,
    .tp_getset = node_getset,
};

static void acc_dealloc(PyObject *self) {
    Py_XDECREF(((acc_obj *)self)->variable);
    PyObject_Free(self);
}
static PyObject *acc_name(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyUnicode_FromString("torch::autograd::AccumulateGrad");
}
static PyObject *acc_next(PyObject *self, void *unused) {
    (void)self, (void)unused;
    return PyTuple_New(0);
}
static PyObject *acc_repr(PyObject *self) {
    return PyUnicode_FromFormat("<AccumulateGrad object at %p>", self);
}
static PyMethodDef acc_methods[] = {
    {"name", acc_name, METH_NOARGS, "\"torch::autograd::AccumulateGrad\""},
    {NULL, NULL, 0, NULL},
};
static PyObject *acc_variable(PyObject *self, void *unused) {
    (void)unused;
    return Py_NewRef(((acc_obj *)self)->variable);
}
static PyGetSetDef acc_getset[] = {
    {"variable", acc_variable, NULL, "the leaf tensor", NULL},
    {"next_functions", acc_next, NULL, "() (a leaf's gradient goes nowhere further)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyTypeObject acc_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera.autograd.AccumulateGrad",
    .tp_basicsize = sizeof(acc_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Where a leaf's gradient accumulates (into its .grad).",
    .tp_dealloc = acc_dealloc,
    .tp_repr = acc_repr,
    .tp_methods = acc_methods,
    .tp_getset = acc_getset,
};

static PyMethodDef functions[] = {
    {"_function_apply", f_function_apply, METH_VARARGS,
     "_function_apply(name, bridge, inputs, outputs, flags, materialize_grads)"},
    {"_tensor_register_hook", f_tensor_register_hook, METH_VARARGS,
     "_tensor_register_hook(t, hook) -> id"},
    {"_tensor_remove_hook", f_tensor_remove_hook, METH_VARARGS,
     "_tensor_remove_hook(t, id) -> removed"},
    {"_tensor_register_post_hook", f_tensor_register_post_hook, METH_VARARGS,
     "_tensor_register_post_hook(t, hook) -> (id, keeper id)"},
    {"_tensor_remove_post_hook", f_tensor_remove_post_hook, METH_VARARGS,
     "_tensor_remove_post_hook(t, id, keeper id) -> removed"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_autograd_function(PyObject *m) {
    if (PyType_Ready(&node_type) < 0 || PyType_Ready(&acc_type) < 0) return -1;
    return PyModule_AddFunctions(m, functions);
}
