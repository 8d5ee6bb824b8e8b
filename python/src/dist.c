/* dist.c — tessera.distributed over the C library's process group (MPI for cpu and sim tensors,
 * NCCL for cuda): init, rank and size, the collectives (GIL released while they wait), and
 * _C._GradSync, the gradient averaging behind the Python DistributedDataParallel (the ONNX part,
 * onnx.c, is set up from here). */
#include "tsp.h"

/* ------------------------------------------------------------------ process group */

/* "mpi", "nccl", "gloo" (torch's cpu backend: MPI here) or None (automatic) */
static int backend_arg(PyObject *o, ts_dist_backend *out) {
    const char *s = o == Py_None ? "" : PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "init_process_group(): argument 'backend' must be str, "
                         "not %.100s",
                         Py_TYPE(o)->tp_name);
        return -1;
    }
    if (!*s)
        *out = TS_DIST_AUTO;
    else if (strcmp(s, "mpi") == 0 || strcmp(s, "gloo") == 0)
        *out = TS_DIST_MPI;
    else if (strcmp(s, "nccl") == 0)
        *out = TS_DIST_NCCL;
    else {
        PyErr_Format(PyExc_ValueError,
                     "init_process_group(): unknown backend '%s' (mpi, nccl, "
                     "gloo or None)",
                     s);
        return -1;
    }
    return 0;
}

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"backend", "timeout", NULL};
    PyObject *backend = Py_None;
    double timeout = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Od:_dist_init", kwlist, &backend, &timeout))
        return NULL;
    ts_dist_opts o = {.timeout_s = timeout};
    if (backend_arg(backend, &o.backend) < 0) return NULL;
    ts_status s;
    TSP_NOGIL(s = ts_dist_init(o););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* fn() with the GIL released (it waits for the other ranks) */
static PyObject *wait_for_ranks(ts_status (*fn)(void)) {
    ts_status s;
    TSP_NOGIL(s = fn(););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *py_finalize(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return wait_for_ranks(ts_dist_finalize);
}

static PyObject *py_barrier(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return wait_for_ranks(ts_dist_barrier);
}

/* (rank, world size, local rank, local world size, initialized, available, description) */
static PyObject *py_dist_info(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("(iiiiNNs)", ts_dist_rank(), ts_dist_world_size(), ts_dist_local_rank(),
                         ts_dist_local_world_size(), PyBool_FromLong(ts_dist_is_initialized()),
                         PyBool_FromLong(ts_dist_is_available()), ts_dist_describe());
}

/* ------------------------------------------------------------------ collectives */

typedef enum { C_ALL_REDUCE, C_BROADCAST, C_REDUCE, C_SEND, C_RECV } coll_kind;

static const char *const coll_names[] = {"all_reduce", "broadcast", "reduce", "send", "recv"};

/* one collective on one tensor: peer is src / dst (world rank), op a ts_dist_reduce_op */
static ts_status run_coll(coll_kind k, ts_tensor *t, int peer, int op, int tag) {
    switch (k) {
    case C_ALL_REDUCE:
        return ts_dist_all_reduce(t, (ts_dist_reduce_op)op, NULL);
    case C_BROADCAST:
        return ts_dist_broadcast(t, peer, NULL);
    case C_REDUCE:
        return ts_dist_reduce(t, peer, (ts_dist_reduce_op)op, NULL);
    case C_SEND:
        return ts_dist_send(t, peer, tag, NULL);
    case C_RECV:
        return ts_dist_recv(t, peer, tag, NULL);
    }
    return TS_ERR_ARG;
}

/* _collective(kind, tensor, peer=0, op=0, tag=0): in place on tensor; None */
static PyObject *py_collective(PyObject *self, PyObject *args) {
    (void)self;
    int kind, peer = 0, op = 0, tag = 0;
    PyObject *to;
    if (!PyArg_ParseTuple(args, "iO|iii:_collective", &kind, &to, &peer, &op, &tag)) return NULL;
    if (kind < C_ALL_REDUCE || kind > C_RECV) {
        PyErr_SetString(PyExc_ValueError, "_collective: unknown kind");
        return NULL;
    }
    ts_tensor *t = tsp_tensor_arg(to, coll_names[kind], "tensor");
    if (!t || tsp_enter() < 0) return NULL;
    ts_status s;
    TSP_NOGIL(s = run_coll((coll_kind)kind, t, peer, op, tag););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* _gather_scatter(all_gather: bool, out, in, op=0): all_gather_into_tensor / reduce_scatter_tensor
 */
static PyObject *py_gather_scatter(PyObject *self, PyObject *args) {
    (void)self;
    int gather, op = 0;
    PyObject *oo, *io;
    if (!PyArg_ParseTuple(args, "pOO|i:_gather_scatter", &gather, &oo, &io, &op)) return NULL;
    const char *fn = gather ? "all_gather_into_tensor" : "reduce_scatter_tensor";
    ts_tensor *out = tsp_tensor_arg(oo, fn, "output_tensor");
    ts_tensor *in = out ? tsp_tensor_arg(io, fn, "input_tensor") : NULL;
    if (!in) return NULL;
    ts_status s;
    if (gather)
        TSP_NOGIL(s = ts_dist_all_gather(out, in, NULL););
    else
        TSP_NOGIL(s = ts_dist_reduce_scatter(out, in, (ts_dist_reduce_op)op, NULL););
    if (s) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* _sync_batch_norm(x, running_mean, running_var, weight, bias, momentum, eps): SyncBatchNorm's
 * training step over the world (ts_sync_batch_norm); None for an absent optional tensor */
static PyObject *py_sync_batch_norm(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "running_mean", "running_var", "weight", "bias"};
    PyObject *o[5];
    ts_tensor *t[5] = {0}, *y;
    double momentum, eps;
    if (!PyArg_ParseTuple(args, "OOOOOdd:_sync_batch_norm", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &momentum, &eps))
        return NULL;
    for (int i = 0; i < 5; i++)
        if ((i == 0 || o[i] != Py_None) &&
            !(t[i] = tsp_tensor_arg(o[i], "sync_batch_norm", names[i])))
            return NULL;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_sync_batch_norm(t[0], t[1], t[2], t[3], t[4], momentum, eps, NULL));
    return tsp_wrap(y);
}

/* ------------------------------------------------------------------ _C._GradSync
 * DDP for modules written in Python: a post-accumulate-grad hook on every parameter counts the
 * gradients of a backward pass; when the last one is in, every gradient is all-reduced and
 * averaged (the C hooks run on backward's thread without the GIL and touch no Python object). */

typedef struct {
    PyObject_HEAD int n;
    ts_tensor **params; /* retained */
    int *hooks;
    int ready;
    bool no_sync;
    ts_status failed; /* the status of the last reduction (raised by .check()) */
} gsync_object;

static void gsync_reduce(gsync_object *g) {
    for (int i = 0; i < g->n && !ts_error(); i++) {
        ts_tensor *grad = ts_grad(g->params[i]);
        if (grad) ts_dist_all_reduce(grad, TS_DIST_AVG, NULL);
    }
    g->failed = ts_error();
}

static void gsync_hook(ts_tensor *leaf, void *ctx) {
    (void)leaf;
    gsync_object *g = ctx;
    if (ts_error()) { /* the pass failed: DDP abandons the iteration */
        g->ready = 0;
        return;
    }
    if (++g->ready < g->n) return;
    g->ready = 0;
    if (!g->no_sync) gsync_reduce(g);
}

static void gsync_clear(gsync_object *g) {
    for (int i = 0; i < g->n; i++) {
        if (g->hooks && g->hooks[i]) ts_remove_grad_hook(g->params[i], g->hooks[i]);
        ts_release(g->params[i]);
    }
    ts_error_clear(); /* removing hooks of a finished pass cannot fail in a way Python can act on */
    free(g->params);
    free(g->hooks);
    g->params = NULL, g->hooks = NULL, g->n = 0;
}

static void gsync_dealloc(gsync_object *self) {
    gsync_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* the parameters' tensors, retained, into g; -1 with an exception */
static int gsync_take(gsync_object *g, PyObject *params) {
    PyObject *seq = PySequence_Fast(params, "DistributedDataParallel: parameters must be a list");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    g->params = calloc(n ? (size_t)n : 1, sizeof *g->params);
    g->hooks = calloc(n ? (size_t)n : 1, sizeof *g->hooks);
    int rc = g->params && g->hooks ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        ts_tensor *t = tsp_tensor_arg(PySequence_Fast_GET_ITEM(seq, i), "DistributedDataParallel",
                                      "parameters");
        if (!t)
            rc = -1;
        else
            g->params[g->n++] = ts_retain(t);
    }
    Py_DECREF(seq);
    return rc;
}

static PyObject *gsync_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"parameters", NULL};
    PyObject *params;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:_GradSync", kwlist, &params)) return NULL;
    gsync_object *g = (gsync_object *)type->tp_alloc(type, 0);
    if (!g) return NULL;
    if (gsync_take(g, params) < 0) {
        Py_DECREF(g);
        return NULL;
    }
    for (int i = 0; i < g->n; i++)
        if (!(g->hooks[i] = ts_register_post_accumulate_grad_hook(g->params[i], gsync_hook, g))) {
            Py_DECREF(g);
            return tsp_raise_pending();
        }
    return (PyObject *)g;
}

/* raises the error of the last reduction (a hook cannot raise inside backward) */
static PyObject *gsync_check(gsync_object *self, PyObject *unused) {
    (void)unused;
    if (!self->failed) Py_RETURN_NONE;
    self->failed = TS_OK;
    PyErr_SetString(tsp_error_type, "DistributedDataParallel: the gradient all-reduce of the last "
                                    "backward failed (see the message printed by the rank)");
    return NULL;
}

static PyObject *gsync_get_no_sync(gsync_object *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->no_sync);
}

static int gsync_set_no_sync(gsync_object *self, PyObject *v, void *closure) {
    (void)closure;
    int on = v ? PyObject_IsTrue(v) : 0;
    if (on < 0) return -1;
    self->no_sync = on;
    return 0;
}

static PyMethodDef gsync_methods[] = {
    {"check", (PyCFunction)gsync_check, METH_NOARGS, "raise the last reduction's error"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef gsync_getset[] = {
    {"no_sync", (getter)gsync_get_no_sync, (setter)gsync_set_no_sync,
     "while true, backward accumulates without reducing", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject gsync_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C._GradSync",
    .tp_basicsize = sizeof(gsync_object),
    .tp_dealloc = (destructor)gsync_dealloc,
    .tp_methods = gsync_methods,
    .tp_getset = gsync_getset,
    .tp_new = gsync_new,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Averages the parameters' gradients over the ranks at the end of each backward.",
};

static PyMethodDef dist_methods[] = {
    {"_dist_init", TSP_KW(py_init), NULL},
    {"_dist_finalize", py_finalize, METH_NOARGS, NULL},
    {"_dist_barrier", py_barrier, METH_NOARGS, NULL},
    {"_dist_info", py_dist_info, METH_NOARGS, NULL},
    {"_collective", py_collective, METH_VARARGS, NULL},
    {"_gather_scatter", py_gather_scatter, METH_VARARGS, NULL},
    {"_sync_batch_norm", py_sync_batch_norm, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_dist(PyObject *m) {
    if (tsp_add_type(m, "_GradSync", &gsync_type) < 0 || tsp_init_onnx(m) < 0) return -1;
    return PyModule_AddFunctions(m, dist_methods);
}
