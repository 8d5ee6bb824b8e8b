/* optim_lbfgs.c — _C.CLBFGS: torch.optim.LBFGS's step over the C optimizer (ts_lbfgs_*), the
 * Python closure called back from C. tessera.optim.LBFGS drives it. */
#include "nn_impl.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    PyObject_HEAD ts_lbfgs *o;
    PyObject *params; /* the Python Parameters (kept alive with their handles) */
} clbfgs;

static PyTypeObject clbfgs_type;

/* _C.CLBFGS(params, lr, max_iter, max_eval, tolerance_grad, tolerance_change, history_size,
 * strong_wolfe, maximize) */
static PyObject *clbfgs_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)kw;
    PyObject *params;
    ts_lbfgs_opts o = {0};
    int sw, mx;
    if (!PyArg_ParseTuple(args, "Odiiddipp:LBFGS", &params, &o.lr, &o.max_iter, &o.max_eval,
                          &o.tolerance_grad, &o.tolerance_change, &o.history_size, &sw, &mx))
        return NULL;
    o.strong_wolfe = sw, o.maximize = mx;
    PyObject *fast = PySequence_Fast(params, "LBFGS: params must be a sequence of Tensors");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    ts_tensor **h = PyMem_Calloc(n ? (size_t)n : 1, sizeof *h);
    if (!h) return Py_DECREF(fast), PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(h[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(fast, i), "LBFGS", "params")))
            return PyMem_Free(h), Py_DECREF(fast), NULL;
    ts_lbfgs *c = ts_lbfgs_new(h, (int)n, o);
    PyMem_Free(h);
    if (!c) return Py_DECREF(fast), tsp_raise_pending();
    clbfgs *self = (clbfgs *)type->tp_alloc(type, 0);
    if (!self) return ts_lbfgs_free(c), Py_DECREF(fast), NULL;
    self->o = c;
    self->params = fast;
    return (PyObject *)self;
}

static int clbfgs_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((clbfgs *)self)->params);
    return 0;
}

static int clbfgs_clear(PyObject *self) {
    Py_CLEAR(((clbfgs *)self)->params);
    return 0;
}

static void clbfgs_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    ts_lbfgs_free(((clbfgs *)self)->o);
    clbfgs_clear(self);
    Py_TYPE(self)->tp_free(self);
}

typedef struct {
    PyObject *closure;
    PyObject *first; /* the first call's result (LBFGS.step returns it) */
} closure_ctx;

/* the C step's closure: calls the Python one (outside the C scopes: what it makes is Python's) */
static ts_status call_closure(void *vctx, double *loss) {
    closure_ctx *c = vctx;
    ts_scope_suspension s = ts_scope_suspend();
    PyObject *r = PyObject_CallNoArgs(c->closure);
    PyObject *f = r ? PyNumber_Float(r) : NULL;
    ts_scope_resume(s);
    if (!f) {
        Py_XDECREF(r);
        return ts_error_set(TS_ERR_ARG, "LBFGS.step: the closure raised");
    }
    *loss = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
    if (!c->first)
        c->first = r;
    else
        Py_DECREF(r);
    return TS_OK;
}

/* step(closure) -> the closure's first result */
static PyObject *clbfgs_step(PyObject *self, PyObject *closure) {
    if (closure == Py_None || !PyCallable_Check(closure))
        return PyErr_SetString(PyExc_RuntimeError, "LBFGS.step requires a closure that "
                                                   "reevaluates the model and returns the loss"),
               NULL;
    if (tsp_enter() < 0) return NULL;
    closure_ctx c = {closure, NULL};
    /* the GIL stays held: the closure is Python */
    ts_status st = ts_lbfgs_step(((clbfgs *)self)->o, call_closure, &c, NULL);
    if (PyErr_Occurred()) { /* the closure's own exception */
        ts_error_clear();
        Py_XDECREF(c.first);
        return NULL;
    }
    if (st) return Py_XDECREF(c.first), tsp_raise_pending();
    return c.first;
}

static PyObject *wrap_borrowed(ts_tensor *t) {
    if (!t) Py_RETURN_NONE;
    return tsp_wrap(ts_retain(t));
}

/* get_state() -> PyTorch's state[0] as a dict ({} before the first step) */
static PyObject *clbfgs_get_state(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_lbfgs_state st;
    if (ts_lbfgs_get_state(((clbfgs *)self)->o, &st)) return tsp_raise_pending();
    if (st.func_evals == 0) return PyDict_New();
    PyObject *dirs = PyList_New(st.n_history), *stps = PyList_New(st.n_history),
             *ro = PyList_New(st.n_history);
    for (int i = 0; dirs && stps && ro && i < st.n_history; i++) {
        PyObject *a = wrap_borrowed(st.old_dirs[i]), *b = wrap_borrowed(st.old_stps[i]),
                 *r = PyFloat_FromDouble(st.ro[i]);
        if (!a || !b || !r) {
            Py_XDECREF(a), Py_XDECREF(b), Py_XDECREF(r);
            Py_CLEAR(dirs);
            break;
        }
        PyList_SET_ITEM(dirs, i, a), PyList_SET_ITEM(stps, i, b), PyList_SET_ITEM(ro, i, r);
    }
    PyObject *d = dirs && stps && ro ? wrap_borrowed(st.d) : NULL;
    PyObject *pg = d ? wrap_borrowed(st.prev_flat_grad) : NULL;
    PyObject *out =
        pg ? Py_BuildValue("{s:L,s:L,s:N,s:d,s:N,s:N,s:N,s:d,s:N,s:d}", "func_evals",
                           (long long)st.func_evals, "n_iter", (long long)st.n_iter, "d", d, "t",
                           st.t, "old_dirs", dirs, "old_stps", stps, "ro", ro, "H_diag", st.h_diag,
                           "prev_flat_grad", pg, "prev_loss", st.prev_loss)
           : NULL;
    if (!out) Py_XDECREF(d), Py_XDECREF(pg), Py_XDECREF(dirs), Py_XDECREF(stps), Py_XDECREF(ro);
    return out;
}

static int get_num(PyObject *dict, const char *key, double *out) {
    PyObject *v = PyDict_GetItemString(dict, key); /* borrowed */
    if (!v) return PyErr_Format(PyExc_KeyError, "LBFGS.load_state_dict: state lacks '%s'", key), -1;
    *out = PyFloat_AsDouble(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int get_tensor(PyObject *dict, const char *key, ts_tensor **out) {
    PyObject *v = PyDict_GetItemString(dict, key);
    *out = NULL;
    if (!v || v == Py_None) return 0;
    return (*out = tsp_tensor_arg(v, "LBFGS.load_state_dict", key)) ? 0 : -1;
}

/* set_state(dict): the state get_state gave ({}: a fresh optimizer) */
static PyObject *clbfgs_set_state(PyObject *self, PyObject *dict) {
    if (!PyDict_Check(dict))
        return PyErr_SetString(PyExc_TypeError, "LBFGS.load_state_dict: state must be a dict"),
               NULL;
    ts_lbfgs_state st = {0};
    double n_iter = 0, evals = 0, t = 0, h = 1, prev = 0;
    ts_tensor *d = NULL, *pg = NULL, **dirs = NULL, **stps = NULL;
    double *ro = NULL;
    PyObject *ld = NULL, *ls = NULL, *lr = NULL, *res = NULL;
    if (PyDict_Size(dict) > 0) {
        if (get_num(dict, "func_evals", &evals) || get_num(dict, "n_iter", &n_iter) ||
            get_num(dict, "t", &t) || get_num(dict, "H_diag", &h) ||
            get_num(dict, "prev_loss", &prev) || get_tensor(dict, "d", &d) ||
            get_tensor(dict, "prev_flat_grad", &pg))
            return NULL;
        PyObject *a = PyDict_GetItemString(dict, "old_dirs"),
                 *b = PyDict_GetItemString(dict, "old_stps"), *c = PyDict_GetItemString(dict, "ro");
        if (!a || !b || !c)
            return PyErr_SetString(PyExc_KeyError,
                                   "LBFGS.load_state_dict: state lacks old_dirs, old_stps or ro"),
                   NULL;
        ld = PySequence_Fast(a, "old_dirs: a list");
        ls = ld ? PySequence_Fast(b, "old_stps: a list") : NULL;
        lr = ls ? PySequence_Fast(c, "ro: a list") : NULL;
        if (!lr) goto done;
        Py_ssize_t k = PySequence_Fast_GET_SIZE(ld);
        if (PySequence_Fast_GET_SIZE(ls) != k || PySequence_Fast_GET_SIZE(lr) != k) {
            PyErr_SetString(PyExc_ValueError,
                            "LBFGS.load_state_dict: old_dirs, old_stps and ro differ in length");
            goto done;
        }
        dirs = PyMem_Calloc((size_t)k + 1, sizeof *dirs);
        stps = PyMem_Calloc((size_t)k + 1, sizeof *stps);
        ro = PyMem_Calloc((size_t)k + 1, sizeof *ro);
        if (!dirs || !stps || !ro) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            dirs[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(ld, i), "LBFGS", "old_dirs");
            stps[i] = dirs[i] ? tsp_tensor_arg(PySequence_Fast_GET_ITEM(ls, i), "LBFGS", "old_stps")
                              : NULL;
            ro[i] = stps[i] ? PyFloat_AsDouble(PySequence_Fast_GET_ITEM(lr, i)) : -1;
            if (PyErr_Occurred()) goto done;
        }
        st.n_history = (int)k;
    }
    st.n_iter = (int64_t)n_iter, st.func_evals = (int64_t)evals;
    st.t = t, st.h_diag = h, st.prev_loss = prev;
    st.d = d, st.prev_flat_grad = pg;
    st.old_dirs = dirs, st.old_stps = stps, st.ro = ro;
    if (ts_lbfgs_set_state(((clbfgs *)self)->o, &st))
        tsp_raise_pending();
    else
        res = Py_NewRef(Py_None);
done:
    PyMem_Free(dirs), PyMem_Free(stps), PyMem_Free(ro);
    Py_XDECREF(ld), Py_XDECREF(ls), Py_XDECREF(lr);
    return res;
}

static PyMethodDef clbfgs_methods[] = {
    {"step", clbfgs_step, METH_O, "step(closure) -> the closure's first result"},
    {"get_state", clbfgs_get_state, METH_NOARGS, "PyTorch's state[0] ({} before a step)"},
    {"set_state", clbfgs_set_state, METH_O, "loads a state get_state gave"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject clbfgs_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C.CLBFGS",
    .tp_basicsize = sizeof(clbfgs),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "torch.optim.LBFGS's state and step (ts_lbfgs)",
    .tp_new = clbfgs_new,
    .tp_dealloc = clbfgs_dealloc,
    .tp_traverse = clbfgs_traverse,
    .tp_clear = clbfgs_clear,
    .tp_methods = clbfgs_methods,
};

int tsp_init_lbfgs(PyObject *m) { return tsp_add_type(m, "CLBFGS", &clbfgs_type); }
