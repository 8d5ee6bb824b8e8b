/* autograd.c — the Tensor's autograd attributes (requires_grad, grad, grad_fn, is_leaf) and
 * methods (backward, detach, requires_grad_), and the grad-mode primitives that tessera.no_grad /
 * enable_grad (autograd.py) are built on. The C core's grad mode is a thread-local nesting count.
 */
#include "autograd_function.h"
#include "tensor_impl.h"

#define T TSP_T

/* ------------------------------------------------------------------ attributes */
static PyObject *get_requires_grad(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_requires_grad(T(self)));
}
static int set_requires_grad(PyObject *self, PyObject *value, void *unused) {
    (void)unused;
    bool on;
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "requires_grad cannot be deleted");
        return -1;
    }
    if (tsp_bool_arg(value, false, &on, "requires_grad", "value") < 0) return -1;
    if (!ts_is_leaf(T(self)) && !on) {
        PyErr_SetString(tsp_error_type,
                        "you can only change requires_grad flags of leaf variables (use "
                        "detach())");
        return -1;
    }
    ts_set_requires_grad(T(self), on);
    return tsp_check();
}
static PyObject *get_grad(PyObject *self, void *unused) {
    (void)unused;
    ts_tensor *g = ts_grad(T(self));
    if (!g) Py_RETURN_NONE;
    return tsp_wrap(ts_scope_depth() > 0 ? g : ts_retain(g)); /* wrap adds its own in a scope */
}
static int set_grad(PyObject *self, PyObject *value, void *unused) {
    (void)unused;
    ts_tensor *g = NULL;
    if (value && value != Py_None && !(g = tsp_tensor_arg(value, "Tensor.grad", "value")))
        return -1;
    ts_set_grad(T(self), g);
    return tsp_check();
}
static PyObject *get_grad_fn(PyObject *self, void *unused) {
    (void)unused;
    return tsp_grad_fn_of(T(self)); /* autograd_function.c: a Node with next_functions */
}
static PyObject *get_is_leaf(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(ts_is_leaf(T(self)));
}
static PyObject *get_version(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromUnsignedLongLong(ts_version(T(self)));
}
/* retains_grad: True on a non-leaf after retain_grad() (the hooks are kept by
 * tessera._retain_grad, which answers) */
static PyObject *get_retains_grad(PyObject *self, void *unused) {
    (void)unused;
    PyObject *mod = PyImport_ImportModule("tessera._retain_grad");
    if (!mod) return NULL;
    PyObject *r = PyObject_CallMethod(mod, "_retains_grad", "O", self);
    Py_DECREF(mod);
    return r;
}

PyGetSetDef tsp_autograd_getset[] = {
    {"requires_grad", get_requires_grad, set_requires_grad, "record ops for backward", NULL},
    {"grad", get_grad, set_grad, "the accumulated gradient (None until backward)", NULL},
    {"grad_fn", get_grad_fn, NULL, "the node that made this tensor (None for leaves)", NULL},
    {"is_leaf", get_is_leaf, NULL, "made by the user, not by a recorded op", NULL},
    {"_version", get_version, NULL, "bumped by every in-place op on the storage", NULL},
    {"retains_grad", get_retains_grad, NULL, "a non-leaf whose .grad is kept (retain_grad())",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------------ methods */
static PyObject *m_requires_grad_(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kw) {
    static const char *const names[] = {"requires_grad"};
    PyObject *a[1];
    if (tsp_parse(args, nargs, kw, "requires_grad_", names, 1, 0, a) < 0) return NULL;
    if (set_requires_grad(self, a[0] ? a[0] : Py_True, NULL) < 0) return NULL;
    return Py_NewRef(self);
}

/* Runs backward from t (grad NULL: t must have one element). */
static int run_backward(ts_tensor *t, ts_tensor *grad, bool retain_graph) {
    if (!grad && ts_numel(t) != 1) {
        PyErr_SetString(tsp_error_type, "grad can be implicitly created only for scalar outputs");
        return -1;
    }
    if (tsp_enter()) return -1;
    tsp_function_exception_reset();
    TSP_NOGIL(ts_backward_ex(t, grad, (ts_backward_opts){.retain_graph = retain_graph}));
    /* a custom Function's backward that raised: its exception, not the C error */
    return tsp_function_exception_restore(tsp_check());
}

/* A sequence of tensors (or one tensor) as a borrowed array (PyMem); n; -1 with an exception.
 * none_ok: None entries allowed (grad_outputs). *holder keeps the sequence alive. */
static Py_ssize_t tensor_list(PyObject *o, const char *fn, const char *arg, bool none_ok,
                              PyObject **holder, ts_tensor ***out) {
    *holder = NULL;
    *out = NULL;
    if (PyObject_TypeCheck(o, tsp_tensor_type))
        o = *holder = PyTuple_Pack(1, o);
    else
        o = *holder = PySequence_Fast(o, "expected a tensor or a sequence of tensors");
    if (!o) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    ts_tensor **v = PyMem_Calloc(n ? (size_t)n : 1, sizeof *v);
    if (!v) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(o, i);
        if (none_ok && x == Py_None) continue;
        if (!(v[i] = tsp_tensor_arg(x, fn, arg))) {
            PyMem_Free(v);
            return -1;
        }
    }
    *out = v;
    return n;
}

/* ts_autograd_grad without the GIL; a custom Function's exception raised as itself */
static int run_grad(ts_tensor **outs, ts_tensor **gos, int n, ts_tensor **ins, int n_in,
                    ts_grad_opts o, ts_tensor **grads) {
    if (tsp_enter()) return -1;
    tsp_function_exception_reset();
    ts_status st;
    TSP_NOGIL(st = ts_autograd_grad(outs, gos, n, ins, n_in, o, grads));
    (void)st;
    return tsp_function_exception_restore(tsp_check());
}

/* _grad(outputs, grad_outputs, inputs, retain_graph, create_graph, allow_unused, accumulate):
 * torch.autograd.grad (a tuple, None for an unused input) and backward(inputs=, create_graph=)
 * (accumulate: None). grad_outputs None: ones; inputs None or () with accumulate: every leaf. */
static PyObject *f_grad(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 7)
        return PyErr_Format(PyExc_TypeError, "_grad() takes 7 arguments (%zd given)", nargs);
    bool retain, create, unused, acc;
    if (tsp_bool_arg(args[3], false, &retain, "grad", "retain_graph") < 0 ||
        tsp_bool_arg(args[4], false, &create, "grad", "create_graph") < 0 ||
        tsp_bool_arg(args[5], false, &unused, "grad", "allow_unused") < 0 ||
        tsp_bool_arg(args[6], false, &acc, "grad", "accumulate") < 0)
        return NULL;
    PyObject *h_out = NULL, *h_go = NULL, *h_in = NULL, *result = NULL;
    ts_tensor **outs = NULL, **gos = NULL, **ins = NULL, **grads = NULL;
    Py_ssize_t n = tensor_list(args[0], "grad", "outputs", false, &h_out, &outs), n_go = 0,
               n_in = 0;
    if (n < 0) goto done;
    if (args[1] != Py_None &&
        (n_go = tensor_list(args[1], "grad", "grad_outputs", true, &h_go, &gos)) < 0)
        goto done;
    if (args[1] != Py_None && n_go != n) {
        PyErr_Format(PyExc_RuntimeError, "grad(): got %zd tensors and %zd gradients", n, n_go);
        goto done;
    }
    if (args[2] != Py_None &&
        (n_in = tensor_list(args[2], "grad", "inputs", false, &h_in, &ins)) < 0)
        goto done;
    if (n > INT_MAX || n_in > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "grad(): too many tensors");
        goto done;
    }
    if (!acc && !(grads = PyMem_Calloc(n_in ? (size_t)n_in : 1, sizeof *grads))) {
        PyErr_NoMemory();
        goto done;
    }
    ts_grad_opts o = {
        .retain_graph = retain, .create_graph = create, .allow_unused = unused, .accumulate = acc};
    if (run_grad(outs, gos, (int)n, ins, (int)n_in, o, grads) < 0) goto done;
    if (acc) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (!(result = PyTuple_New(n_in))) goto done;
    for (Py_ssize_t k = 0; k < n_in; k++) {
        PyObject *g = grads[k] ? tsp_wrap(grads[k]) : Py_NewRef(Py_None);
        grads[k] = NULL;
        if (!g) {
            for (Py_ssize_t j = k + 1; j < n_in; j++) ts_release(grads[j]);
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, k, g);
    }
done:
    PyMem_Free(outs), PyMem_Free(gos), PyMem_Free(ins), PyMem_Free(grads);
    Py_XDECREF(h_out), Py_XDECREF(h_go), Py_XDECREF(h_in);
    return result;
}

/* backward(gradient=None, retain_graph=None, create_graph=False, inputs=None) */
static PyObject *m_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kw) {
    static const char *const names[] = {"gradient", "retain_graph", "create_graph", "inputs"};
    PyObject *a[4];
    ts_tensor *g = NULL;
    bool retain, create;
    if (tsp_parse(args, nargs, kw, "backward", names, 4, 0, a) < 0 ||
        (a[0] && a[0] != Py_None && !(g = tsp_tensor_arg(a[0], "backward", "gradient"))) ||
        tsp_bool_arg(a[2], false, &create, "backward", "create_graph") < 0 ||
        tsp_bool_arg(a[1], create, &retain, "backward", "retain_graph") < 0)
        return NULL;
    if (!create && (!a[3] || a[3] == Py_None)) {
        if (run_backward(T(self), g, retain) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (!g && ts_numel(T(self)) != 1) {
        PyErr_SetString(tsp_error_type, "grad can be implicitly created only for scalar outputs");
        return NULL;
    }
    PyObject *h_in = NULL;
    ts_tensor **ins = NULL, *t = T(self);
    Py_ssize_t n_in = 0;
    if (a[3] && a[3] != Py_None) {
        if ((n_in = tensor_list(a[3], "backward", "inputs", false, &h_in, &ins)) < 0) return NULL;
        if (n_in == 0) {
            Py_XDECREF(h_in), PyMem_Free(ins);
            PyErr_SetString(tsp_error_type, "backward(): 'inputs' argument to backward() cannot "
                                            "be empty.");
            return NULL;
        }
    }
    ts_grad_opts o = {.retain_graph = retain, .create_graph = create, .accumulate = true};
    int rc = n_in > INT_MAX ? (PyErr_SetString(PyExc_ValueError, "too many inputs"), -1)
                            : run_grad(&t, &g, 1, ins, (int)n_in, o, NULL);
    Py_XDECREF(h_in), PyMem_Free(ins);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* _set_twice_differentiable(t, flag): t's node's backward can (not) be differentiated again */
static PyObject *f_set_twice_differentiable(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *to;
    int flag;
    if (!PyArg_ParseTuple(args, "Op:_set_twice_differentiable", &to, &flag)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "_set_twice_differentiable", "tensor");
    if (!t) return NULL;
    ts_node *n = ts_grad_fn_node(t);
    ts_node_set_twice_differentiable(n, flag != 0);
    ts_node_release(n);
    Py_RETURN_NONE;
}

static PyObject *m_detach(PyObject *self, PyObject *unused) {
    (void)unused;
    return tsp_wrap(ts_detach(T(self)));
}
/* detach_(): this object now holds a detached view of its storage (other holders of the old
 * tensor, e.g. the graph, keep theirs) */
static PyObject *m_detach_(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_tensor *d = ts_detach(T(self)), *old = T(self);
    if (!d || tsp_check()) return tsp_drop(d), tsp_raise_pending();
    T(self) = tsp_own(d);
    ts_release(old); /* the object's own reference */
    return Py_NewRef(self);
}

PyMethodDef tsp_autograd_methods[] = {
    {"requires_grad_", FN(m_requires_grad_), FAST, "requires_grad_(requires_grad=True)"},
    {"backward", FN(m_backward), FAST,
     "backward(gradient=None, retain_graph=None): accumulate gradients into the leaves' .grad"},
    {"detach", m_detach, METH_NOARGS, "the same storage, out of the graph"},
    {"register_hook", tsp_tensor_register_hook, METH_O,
     "register_hook(hook): hook(grad) -> new grad or None, when this tensor's gradient is known"},
    {"register_post_accumulate_grad_hook", tsp_tensor_register_post_accumulate_grad_hook, METH_O,
     "register_post_accumulate_grad_hook(hook): hook(tensor) -> None, after backward accumulated "
     "this leaf's .grad"},
    {"detach_", m_detach_, METH_NOARGS, "detach in place"},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ module functions */
/* _backward(tensors, grad_tensors, retain_graph): one backward pass per output; the graph is kept
 * between them (every pass but the last) */
static PyObject *f_backward(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "_backward() takes 3 arguments (%zd given)", nargs);
    PyObject *outs = PySequence_Fast(args[0], "backward(): tensors must be a sequence");
    if (!outs) return NULL;
    PyObject *grads = PySequence_Fast(args[1], "backward(): grad_tensors must be a sequence");
    Py_ssize_t n = PySequence_Fast_GET_SIZE(outs);
    bool retain;
    int rc = grads ? tsp_bool_arg(args[2], false, &retain, "backward", "retain_graph") : -1;
    if (rc == 0 && PySequence_Fast_GET_SIZE(grads) != n) {
        PyErr_SetString(PyExc_ValueError, "backward(): one grad_tensors entry per output");
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        PyObject *go = PySequence_Fast_GET_ITEM(grads, i);
        ts_tensor *t = tsp_tensor_arg(PySequence_Fast_GET_ITEM(outs, i), "backward", "tensors");
        ts_tensor *g = go == Py_None ? NULL : tsp_tensor_arg(go, "backward", "grad_tensors");
        if (!t || (go != Py_None && !g))
            rc = -1;
        else
            rc = run_backward(t, g, retain || i + 1 < n);
    }
    Py_DECREF(outs);
    Py_XDECREF(grads);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *f_is_grad_enabled(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    return PyBool_FromLong(ts_grad_enabled());
}
/* _grad_disable(): one more no-grad level (undone by _grad_restore_disable) */
static PyObject *f_grad_disable(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    ts_no_grad_begin();
    Py_RETURN_NONE;
}
static PyObject *f_grad_restore_disable(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    ts_no_grad_end();
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}
/* _grad_enable() -> n: leaves every no-grad level of this thread (n of them), so that
 * enable_grad works inside no_grad; _grad_restore_enable(n) re-enters them */
static PyObject *f_grad_enable(PyObject *mod, PyObject *unused) {
    (void)mod, (void)unused;
    long n = 0;
    while (!ts_grad_enabled() && n < 1000000) ts_no_grad_end(), n++;
    if (tsp_check()) return NULL;
    return PyLong_FromLong(n);
}
static PyObject *f_grad_restore_enable(PyObject *mod, PyObject *count) {
    (void)mod;
    long n = PyLong_AsLong(count);
    if (n == -1 && PyErr_Occurred()) return NULL;
    while (n-- > 0) ts_no_grad_begin();
    Py_RETURN_NONE;
}
static PyObject *f_set_detect_anomaly(PyObject *mod, PyObject *on) {
    (void)mod;
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    ts_detect_anomaly(v);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ activation checkpointing
 * tessera.utils.checkpoint runs the function itself between _checkpoint_begin(recompute, inputs)
 * and _checkpoint_end(frame); the C core calls recompute(*detached_inputs) when a backward needs
 * the dropped intermediates (src/autograd/checkpoint.c). */
#define TSP_CKPT_CAPSULE "tessera.checkpoint_frame"

typedef struct py_ckpt {
    PyObject *fn;
} py_ckpt;

static void py_ckpt_free(void *p) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(((py_ckpt *)p)->fn);
    PyGILState_Release(g);
    free(p);
}

/* the recomputation: fn(*inputs) with the GIL held and the C scopes suspended, result dropped */
static ts_status py_ckpt_run(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)out, (void)n_out;
    PyGILState_STATE g = PyGILState_Ensure();
    ts_scope_suspension sus = ts_scope_suspend();
    ts_status st = TS_OK;
    PyObject *args = PyTuple_New(n_in);
    for (int i = 0; args && i < n_in; i++) {
        PyObject *w = in[i] ? tsp_wrap(ts_retain(in[i])) : Py_NewRef(Py_None);
        if (!w) {
            Py_CLEAR(args);
            break;
        }
        PyTuple_SET_ITEM(args, i, w);
    }
    PyObject *r = args ? PyObject_CallObject(((py_ckpt *)p)->fn, args) : NULL;
    if (!r) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
        st = ts_error_set(TS_ERR_STATE, "checkpoint: the recomputation raised %s: %s",
                          type ? ((PyTypeObject *)type)->tp_name : "an exception", msg ? msg : "?");
        Py_XDECREF(text);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    Py_XDECREF(args);
    ts_scope_resume(sus);
    PyGILState_Release(g);
    return st;
}

/* _checkpoint_begin(recompute, inputs) -> frame */
static PyObject *f_checkpoint_begin(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *fn, *seq;
    if (!PyArg_ParseTuple(args, "OO:_checkpoint_begin", &fn, &seq)) return NULL;
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "checkpoint: the function must be callable, not %s",
                            Py_TYPE(fn)->tp_name);
    PyObject *tup = PySequence_Tuple(seq);
    if (!tup) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(tup);
    ts_tensor **in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    py_ckpt *c = malloc(sizeof *c);
    if (!in || !c) {
        PyMem_Free(in), free(c), Py_DECREF(tup);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(in[i] = tsp_tensor_arg(PyTuple_GET_ITEM(tup, i), "checkpoint", "inputs"))) {
            PyMem_Free(in), free(c), Py_DECREF(tup);
            return NULL;
        }
    c->fn = Py_NewRef(fn);
    ts_checkpoint_frame *f = ts_checkpoint_begin(py_ckpt_run, c, py_ckpt_free, in, (int)n, 0);
    PyMem_Free(in);
    Py_DECREF(tup);
    if (!f) return tsp_raise_pending();
    return PyCapsule_New(f, TSP_CKPT_CAPSULE, NULL);
}

/* _checkpoint_end(frame): closes it (once) */
static PyObject *f_checkpoint_end(PyObject *mod, PyObject *cap) {
    (void)mod;
    ts_checkpoint_frame *f = PyCapsule_GetPointer(cap, TSP_CKPT_CAPSULE);
    if (!f) return NULL;
    if (PyCapsule_SetName(cap, TSP_CKPT_CAPSULE ".closed") < 0) return NULL;
    if (ts_checkpoint_end(f) != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyMethodDef functions[] = {
    {"_checkpoint_begin", f_checkpoint_begin, METH_VARARGS, "_checkpoint_begin(recompute, inputs)"},
    {"_checkpoint_end", f_checkpoint_end, METH_O, "_checkpoint_end(frame)"},
    {"_backward", FN(f_backward), METH_FASTCALL, "_backward(tensors, grad_tensors, retain_graph)"},
    {"_grad", FN(f_grad), METH_FASTCALL,
     "_grad(outputs, grad_outputs, inputs, retain_graph, create_graph, allow_unused, accumulate)"},
    {"_set_twice_differentiable", f_set_twice_differentiable, METH_VARARGS, NULL},
    {"is_grad_enabled", f_is_grad_enabled, METH_NOARGS, "gradient recording is on (this thread)"},
    {"_grad_disable", f_grad_disable, METH_NOARGS, NULL},
    {"_grad_restore_disable", f_grad_restore_disable, METH_NOARGS, NULL},
    {"_grad_enable", f_grad_enable, METH_NOARGS, NULL},
    {"_grad_restore_enable", f_grad_restore_enable, METH_O, NULL},
    {"_set_detect_anomaly", f_set_detect_anomaly, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_autograd(PyObject *m) {
    if (tsp_init_autograd_function(m) < 0) return -1;
    return PyModule_AddFunctions(m, functions);
}
