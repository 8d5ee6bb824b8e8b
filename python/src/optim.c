/* optim.c — _C.COptimizer: one C optimizer (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax,
 * NAdam, RAdam, ASGD, Rprop) over the handles of the Python Parameters, with its groups' learning
 * rates, state dict and gradient clipping. tessera.optim's classes (PyTorch's param_groups,
 * schedulers) are thin Python over it. */
#include "nn_impl.h"
#include "tessera/optim_master.h"
#include "tessera/optim_offload.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    PyObject_HEAD ts_optim *o;
    PyObject *params; /* the Python Parameters (kept alive with their handles) */
} coptim;

static PyTypeObject coptim_type;

static ts_optim *O(PyObject *self) { return ((coptim *)self)->o; }

/* The handles of a sequence of Tensors into a PyMem array (*n of them); NULL with TypeError */
static ts_tensor **handles(PyObject *seq, int *n, const char *fn) {
    PyObject *fast = PySequence_Fast(seq, "optimizer: params must be a sequence of Tensors");
    if (!fast) return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    ts_tensor **h = PyMem_Calloc(len ? (size_t)len : 1, sizeof *h);
    for (Py_ssize_t i = 0; h && i < len; i++)
        if (!(h[i] = tsp_tensor_arg(PySequence_Fast_GET_ITEM(fast, i), fn, "params")))
            PyMem_Free(h), h = NULL;
    if (!h && !PyErr_Occurred()) PyErr_NoMemory();
    *n = (int)len;
    Py_DECREF(fast);
    return h;
}

enum {
    K_SGD,
    K_ADAM,
    K_ADAMW,
    K_RMSPROP,
    K_ADAGRAD,
    K_ADADELTA,
    K_ADAMAX,
    K_NADAM,
    K_RADAM,
    K_ASGD,
    K_RPROP
};
#define MAX_HP 8

/* h[0..n) with hyper-parameters hp (PyTorch's order per kind, see tessera/optim/optimizer.py) */
static ts_optim *make(int kind, ts_tensor **h, int n, const double *hp, int f1, int f2) {
    switch (kind) {
    case K_SGD:
        return ts_sgd_new_params(h, n, (ts_sgd_opts){hp[0], hp[1], hp[2], hp[3], f1, f2});
    case K_ADAM:
    case K_ADAMW: {
        ts_adam_opts o = {hp[0], hp[1], hp[2], hp[3], hp[4], f1, f2};
        return kind == K_ADAM ? ts_adam_new_params(h, n, o) : ts_adamw_new_params(h, n, o);
    }
    case K_RMSPROP:
        return ts_rmsprop_new_params(h, n,
                                     (ts_rmsprop_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f1, f2});
    case K_ADAGRAD:
        return ts_adagrad_new_params(h, n,
                                     (ts_adagrad_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f2});
    case K_ADADELTA:
        return ts_adadelta_new_params(h, n, (ts_adadelta_opts){hp[0], hp[1], hp[2], hp[3], f2});
    case K_ADAMAX:
        return ts_adamax_new_params(h, n, (ts_adamax_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f2});
    case K_NADAM:
        return ts_nadam_new_params(
            h, n, (ts_nadam_opts){hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], f1, f2});
    case K_RADAM:
        return ts_radam_new_params(h, n,
                                   (ts_radam_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f1, f2});
    case K_ASGD:
        return ts_asgd_new_params(h, n, (ts_asgd_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f2});
    case K_RPROP:
        return ts_rprop_new_params(h, n, (ts_rprop_opts){hp[0], hp[1], hp[2], hp[3], hp[4], f2});
    default:
        return ts_error_set(TS_ERR_ARG, "optimizer: unknown kind %d", kind), NULL;
    }
}

/* _optim_new(kind, params, (hp0, hp1, ...), flag1, flag2): SGD (lr, momentum, dampening,
 * weight_decay; nesterov, maximize), Adam/AdamW (lr, beta1, beta2, eps, weight_decay; amsgrad,
 * maximize), RMSprop (lr, alpha, eps, weight_decay, momentum; centered, maximize); the options of
 * the ts_<kind>_opts structs in their order for the others (flag1 decoupled_weight_decay for
 * NAdam and RAdam, flag2 maximize), missing ones zero */
static PyObject *optim_new(PyObject *self, PyObject *args) {
    (void)self;
    int kind, f1, f2, n;
    PyObject *params, *hpseq;
    double hp[MAX_HP] = {0};
    if (!PyArg_ParseTuple(args, "iOOpp:optimizer", &kind, &params, &hpseq, &f1, &f2)) return NULL;
    PyObject *hpf = PySequence_Fast(hpseq, "optimizer: options must be a tuple of floats");
    if (!hpf) return NULL;
    if (PySequence_Fast_GET_SIZE(hpf) > MAX_HP) {
        Py_DECREF(hpf);
        return PyErr_Format(PyExc_ValueError, "optimizer: more than %d options", MAX_HP);
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(hpf); i++) {
        hp[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(hpf, i));
        if (hp[i] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(hpf);
            return NULL;
        }
    }
    Py_DECREF(hpf);
    ts_tensor **h = handles(params, &n, "optimizer");
    if (!h) return NULL;
    ts_optim *o = make(kind, h, n, hp, f1, f2);
    PyMem_Free(h);
    if (!o || tsp_check()) return ts_optim_free(o), tsp_raise_pending();
    coptim *r = PyObject_GC_New(coptim, &coptim_type);
    if (!r) return ts_optim_free(o), NULL;
    r->o = o;
    r->params = PySequence_List(params);
    PyObject_GC_Track(r);
    if (!r->params) Py_CLEAR(r);
    return (PyObject *)r;
}

static int coptim_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((coptim *)self)->params);
    return 0;
}
static int coptim_clear(PyObject *self) {
    Py_CLEAR(((coptim *)self)->params);
    return 0;
}
static void coptim_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    ts_optim_free(O(self));
    coptim_clear(self);
    PyObject_GC_Del(self);
}

ts_optim *tspo_optim_of(PyObject *o, const char *fn) {
    if (PyObject_TypeCheck(o, &coptim_type)) return O(o);
    PyErr_Format(PyExc_TypeError, "%s(): argument 'optimizer' must be a tessera optimizer, not %s",
                 fn, Py_TYPE(o)->tp_name);
    return NULL;
}

/* ------------------------------------------------------------------ methods */
static PyObject *co_step(PyObject *self, PyObject *unused) {
    (void)unused;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(ts_optim_step(O(self)););
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *co_zero_grad(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_optim_zero_grad(O(self));
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* add_param_group(params, lr, weight_decay) */
static PyObject *co_add_group(PyObject *self, PyObject *args) {
    PyObject *params;
    double lr, wd;
    int n;
    if (!PyArg_ParseTuple(args, "Odd:add_param_group", &params, &lr, &wd)) return NULL;
    ts_tensor **h = handles(params, &n, "add_param_group");
    if (!h) return NULL;
    ts_optim_add_param_group_wd(O(self), h, n, lr, wd);
    PyMem_Free(h);
    if (tsp_check()) return NULL;
    PyObject *more = PySequence_List(params);
    if (!more) return NULL;
    PyObject *all = PySequence_Concat(((coptim *)self)->params, more);
    Py_DECREF(more);
    if (!all) return NULL;
    Py_SETREF(((coptim *)self)->params, all);
    Py_RETURN_NONE;
}

static PyObject *co_get_lr(PyObject *self, PyObject *args) {
    int g;
    if (!PyArg_ParseTuple(args, "i:get_lr", &g)) return NULL;
    double lr = ts_optim_get_lr(O(self), g);
    if (tsp_check()) return NULL;
    return PyFloat_FromDouble(lr);
}

static PyObject *co_set_lr(PyObject *self, PyObject *args) {
    int g;
    double lr;
    if (!PyArg_ParseTuple(args, "id:set_lr", &g, &lr)) return NULL;
    ts_optim_set_lr(O(self), g, lr);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *co_set_momentum(PyObject *self, PyObject *args) {
    int g;
    double m;
    if (!PyArg_ParseTuple(args, "id:set_momentum", &g, &m)) return NULL;
    ts_optim_set_momentum(O(self), g, m);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* {name: Tensor} of a C tensor list (the tensors move into the dict's Tensors) */
PyObject *tspo_dict_of_list(ts_tensor_list *l) {
    PyObject *d = tsp_check() ? NULL : PyDict_New();
    for (int i = 0; d && i < l->n; i++) {
        PyObject *t = tsp_wrap(ts_retain(l->tensors[i]));
        if (!t || PyDict_SetItemString(d, l->names[i], t) < 0) Py_CLEAR(d);
        Py_XDECREF(t);
    }
    ts_tensor_list_free(l);
    return d;
}

/* a {name: Tensor} dict into a C tensor list (0), or -1 with an exception (l freed) */
int tspo_list_of_dict(PyObject *d, ts_tensor_list *l, const char *fn) {
    *l = (ts_tensor_list){0};
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "%s(): state_dict must be a dict", fn);
        return -1;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        ts_tensor *t = name ? tsp_tensor_arg(v, fn, name) : NULL;
        if (!name && !PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s(): state_dict keys must be str", fn);
        if (!t || ts_tensor_list_add(l, name, t) != TS_OK) {
            ts_tensor_list_free(l);
            if (!PyErr_Occurred() && !tsp_check()) PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static PyObject *co_state_dict(PyObject *self, PyObject *unused) {
    (void)unused;
    ts_tensor_list l = ts_optim_state_dict(O(self));
    return tspo_dict_of_list(&l);
}

static PyObject *co_load_state_dict(PyObject *self, PyObject *d) {
    ts_tensor_list l;
    if (tspo_list_of_dict(d, &l, "load_state_dict") < 0) return NULL;
    TSP_NOGIL(ts_optim_load_state_dict(O(self), &l););
    ts_tensor_list_free(&l);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* offload(): ts_optim_offload (master weights and state on the host) */
static PyObject *co_offload(PyObject *self, PyObject *unused) {
    (void)unused;
    if (tsp_enter() < 0) return NULL;
    ts_optim_offload(O(self));
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *co_is_offloaded(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_optim_is_offloaded(O(self)));
}

/* set_master_weights(on): ts_optim_set_master_weights (float32 masters of f16/bf16 parameters) */
static PyObject *co_set_master_weights(PyObject *self, PyObject *on) {
    const int v = PyObject_IsTrue(on);
    if (v < 0 || tsp_enter() < 0) return NULL;
    ts_optim_set_master_weights(O(self), v != 0);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *co_master_weights(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(ts_optim_master_weights(O(self)));
}

static PyMethodDef coptim_methods[] = {
    {"step", co_step, METH_NOARGS, "one step of every parameter (all or nothing)"},
    {"zero_grad", co_zero_grad, METH_NOARGS, "sets every gradient to None"},
    {"add_param_group", FN(co_add_group), METH_VARARGS, "add_param_group(params, lr, wd)"},
    {"get_lr", FN(co_get_lr), METH_VARARGS, NULL},
    {"set_lr", FN(co_set_lr), METH_VARARGS, NULL},
    {"set_momentum", FN(co_set_momentum), METH_VARARGS, "a group's momentum or beta1"},
    {"state_dict", co_state_dict, METH_NOARGS, "{'state.<i>.<name>': Tensor, ...}"},
    {"load_state_dict", co_load_state_dict, METH_O, NULL},
    {"offload", co_offload, METH_NOARGS, "master weights and state on the host"},
    {"is_offloaded", co_is_offloaded, METH_NOARGS, NULL},
    {"set_master_weights", co_set_master_weights, METH_O, "float32 masters of f16/bf16 params"},
    {"master_weights", co_master_weights, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject coptim_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C.COptimizer",
    .tp_basicsize = sizeof(coptim),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A C optimizer over Parameters (made by _optim_new).",
    .tp_dealloc = coptim_dealloc,
    .tp_traverse = coptim_traverse,
    .tp_clear = coptim_clear,
    .tp_methods = coptim_methods,
};

/* _optim_clip_grad_norm(params, max_norm, norm_type) -> the total norm before clipping, a 0-d
 * Tensor on the first gradient's device (no host read: torch's clip_grad_norm_) */
static PyObject *clip_grad_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *params;
    double max_norm, norm_type;
    int n;
    if (!PyArg_ParseTuple(args, "Odd:clip_grad_norm_", &params, &max_norm, &norm_type)) return NULL;
    ts_tensor **h = handles(params, &n, "clip_grad_norm_");
    if (!h || tsp_enter() < 0) return PyMem_Free(h), NULL;
    ts_tensor *r;
    TSP_NOGIL(r = ts_clip_grad_norm_tensor(h, n, max_norm, norm_type));
    PyMem_Free(h);
    return tsp_wrap(r);
}

/* a Python int while integral (torch's T_i and T_cur stay ints unless an epoch is fractional) */
static PyObject *num(double v) {
    return v == floor(v) && fabs(v) < 9e15 ? PyLong_FromDouble(v) : PyFloat_FromDouble(v);
}

/* _lr_warm_restarts(T_0, T_mult, eta_min, T_i, T_cur, last_epoch, epoch, base_lrs, advance) ->
 * (T_i, T_cur, last_epoch, lrs): CosineAnnealingWarmRestarts's step to epoch (None: the next)
 * when advance, else the rates of the state as it is (get_lr) */
static PyObject *lr_warm_restarts(PyObject *self, PyObject *args) {
    (void)self;
    ts_warm_restarts w;
    long long t0, tm, last;
    PyObject *epoch, *bases;
    int advance;
    if (!PyArg_ParseTuple(args, "LLdddLOOp:CosineAnnealingWarmRestarts", &t0, &tm, &w.eta_min,
                          &w.t_i, &w.t_cur, &last, &epoch, &bases, &advance))
        return NULL;
    w.t_0 = t0, w.t_mult = tm, w.last_epoch = last;
    double e = 0;
    if (epoch != Py_None && (e = PyFloat_AsDouble(epoch)) == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n;
    double *b = tsp_doubles(bases, &n, "base_lrs: a sequence of floats"),
           *lrs = b ? PyMem_Calloc((size_t)n + 1, sizeof *lrs) : NULL;
    if (!lrs) return PyMem_Free(b), PyErr_Occurred() ? NULL : PyErr_NoMemory();
    ts_status st = advance ? ts_warm_restarts_step(&w, epoch == Py_None ? NULL : &e, b, lrs, (int)n)
                           : ts_warm_restarts_lrs(&w, b, lrs, (int)n);
    PyObject *out = st ? tsp_raise_pending()
                       : Py_BuildValue("NNLN", num(w.t_i), num(w.t_cur), (long long)w.last_epoch,
                                       tsp_doubles_list(lrs, n));
    PyMem_Free(b), PyMem_Free(lrs);
    return out;
}

static PyMethodDef optim_functions[] = {
    {"_optim_new", FN(optim_new), METH_VARARGS, NULL},
    {"_optim_clip_grad_norm", FN(clip_grad_norm), METH_VARARGS, NULL},
    {"_lr_warm_restarts", FN(lr_warm_restarts), METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_optim(PyObject *m) {
    if (PyType_Ready(&coptim_type) < 0) return -1;
    if (PyModule_AddObjectRef(m, "COptimizer", (PyObject *)&coptim_type) < 0) return -1;
    if (tsp_init_lbfgs(m) < 0) return -1;
    if (tsp_init_lr_schedule(m) < 0) return -1;
    return PyModule_AddFunctions(m, optim_functions);
}
