/* nn_cmodule.c — _C.CModule: a module the C library builds (GPT, ResNets, MultiheadAttention,
 * TransformerEncoderLayer), owned by one Python object and freed with it. Its parameters are
 * exposed as Python Parameters wrapping the SAME ts_tensor handles (named_tensors), so the C
 * forward, the Python state_dict and the optimizers see one set of weights; Module.to moves those
 * handles in place (ts_tensor_move_), which the C module sees too. */
#include "nn_impl.h"

#include <stdlib.h>

#include "tensor_impl.h"
#include "tessera/placement.h"
#include "tessera/weight_stream.h"

typedef struct {
    PyObject_HEAD ts_module *m;
} cmodule;

static PyTypeObject cmodule_type;

static ts_module *M(PyObject *self) { return ((cmodule *)self)->m; }

/* a new CModule owning m (NULL or an error pending: m freed, the error raised) */
static PyObject *cmodule_wrap(ts_module *m) {
    if (!m || ts_error() != TS_OK) {
        ts_module_free(m);
        return tsp_raise_pending();
    }
    cmodule *o = PyObject_New(cmodule, &cmodule_type);
    if (!o) {
        ts_module_free(m);
        return NULL;
    }
    o->m = m;
    return (PyObject *)o;
}

static void cmodule_dealloc(PyObject *self) {
    ts_module_free(M(self));
    PyObject_Free(self);
}

static PyObject *cmodule_repr(PyObject *self) {
    char *s = ts_module_repr(M(self));
    if (!s) return tsp_raise_pending();
    PyObject *r = PyUnicode_FromString(s);
    free(s);
    return r;
}

/* ------------------------------------------------------------------ methods */
static PyObject *cm_forward(PyObject *self, PyObject *xo) {
    ts_tensor *x = tsp_tensor_arg(xo, "forward", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_forward(M(self), x));
    return tsp_wrap(y);
}

static PyObject *cm_train(PyObject *self, PyObject *on) {
    int b = PyObject_IsTrue(on);
    if (b < 0) return NULL;
    ts_module_train(M(self), b);
    Py_RETURN_NONE;
}

/* the (name, tensor) pairs of l as a list; tensors as instances of cls (borrowing l's handles) */
static PyObject *pairs_of(ts_tensor_list *l, PyTypeObject *cls) {
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < l->n; i++) {
        PyObject *t = tsp_wrap_as(cls, ts_retain(l->tensors[i]));
        PyObject *pair = t ? Py_BuildValue("(sN)", l->names[i], t) : NULL;
        if (!pair || PyList_Append(out, pair) < 0) Py_CLEAR(out);
        Py_XDECREF(pair);
    }
    return out;
}

/* named_tensors(buffers, cls): PyTorch's names and order, the parameters as cls (nn.Parameter) */
static PyObject *cm_named_tensors(PyObject *self, PyObject *args) {
    int buffers;
    PyObject *cls;
    if (!PyArg_ParseTuple(args, "pO:named_tensors", &buffers, &cls)) return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, tsp_tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "named_tensors(): cls must be a subclass of Tensor");
        return NULL;
    }
    ts_tensor_list l =
        buffers ? ts_module_named_buffers(M(self)) : ts_module_named_parameters(M(self));
    PyObject *r = tsp_check() ? NULL : pairs_of(&l, (PyTypeObject *)cls);
    ts_tensor_list_free(&l);
    return r;
}

/* mha(query, key, value, key_padding_mask, attn_mask, is_causal, need_weights) -> (out, w|None) */
static PyObject *cm_mha(PyObject *self, PyObject *args) {
    PyObject *o[5];
    int causal, need;
    if (!PyArg_ParseTuple(args, "OOOOOpp:MultiheadAttention.forward", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &causal, &need))
        return NULL;
    static const char *const names[] = {"query", "key", "value", "key_padding_mask", "attn_mask"};
    ts_tensor *t[5], *y, *w = NULL;
    for (int i = 0; i < 5; i++)
        if (i < 3 ? !(t[i] = tsp_tensor_arg(o[i], "MultiheadAttention.forward", names[i]))
                  : tspn_opt_tensor(o[i], &t[i], "MultiheadAttention.forward", names[i]) < 0)
            return NULL;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_multihead_attention(M(self), t[0], t[1], t[2], t[3], t[4], causal, need,
                                         need ? &w : NULL));
    PyObject *yo = tsp_wrap(y);
    if (!yo) return ts_release(w), NULL;
    PyObject *wo = w ? tsp_wrap(w) : Py_NewRef(Py_None);
    return wo ? Py_BuildValue("(NN)", yo, wo) : (Py_DECREF(yo), NULL);
}

/* encoder_layer(src, src_mask, is_causal, src_key_padding_mask) */
static PyObject *cm_encoder_layer(PyObject *self, PyObject *args) {
    PyObject *so, *mo, *ko;
    int causal;
    ts_tensor *src, *mask, *kpm, *y;
    if (!PyArg_ParseTuple(args, "OOpO:TransformerEncoderLayer.forward", &so, &mo, &causal, &ko))
        return NULL;
    if (!(src = tsp_tensor_arg(so, "TransformerEncoderLayer.forward", "src")) ||
        tspn_opt_tensor(mo, &mask, "TransformerEncoderLayer.forward", "src_mask") < 0 ||
        tspn_opt_tensor(ko, &kpm, "TransformerEncoderLayer.forward", "src_key_padding_mask") < 0 ||
        tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = ts_transformer_encoder_layer(M(self), src, mask, causal, kpm));
    return tsp_wrap(y);
}

/* generate(idx, max_new_tokens, temperature, top_k, greedy): the GPT's sampling loop */
static PyObject *cm_generate(PyObject *self, PyObject *args) {
    PyObject *io;
    long long n, top_k;
    ts_sample_opts o = {0};
    int greedy;
    if (!PyArg_ParseTuple(args, "OLdLp:generate", &io, &n, &o.temperature, &top_k, &greedy))
        return NULL;
    o.top_k = top_k, o.greedy = greedy;
    ts_tensor *idx = tsp_tensor_arg(io, "generate", "idx"), *y;
    if (!idx || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_gpt_generate(M(self), idx, n, o));
    return tsp_wrap(y);
}

/* checkpoint_blocks(every, sublayers): the GPT's activation checkpointing, whole blocks or by
 * sublayer (ts_gpt_checkpoint_blocks / ts_gpt_checkpoint_sublayers) */
static PyObject *cm_checkpoint_blocks(PyObject *self, PyObject *args) {
    int every, sublayers;
    if (!PyArg_ParseTuple(args, "ip:checkpoint_blocks", &every, &sublayers)) return NULL;
    if (tsp_enter() < 0) return NULL;
    ts_status st = sublayers ? ts_gpt_checkpoint_sublayers(M(self), every)
                             : ts_gpt_checkpoint_blocks(M(self), every);
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

/* rnn(input, h0, c0, lengths) -> (output, h_n, c_n|None): RNN / LSTM / GRU forward */
static PyObject *cm_rnn(PyObject *self, PyObject *args) {
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO:rnn", &o[0], &o[1], &o[2], &o[3])) return NULL;
    static const char *const names[] = {"input", "h0", "c0", "lengths"};
    ts_tensor *t[4], *y, *hn = NULL, *cn = NULL;
    for (int i = 0; i < 4; i++)
        if (i == 0 ? !(t[i] = tsp_tensor_arg(o[i], "RNN.forward", names[i]))
                   : tspn_opt_tensor(o[i], &t[i], "RNN.forward", names[i]) < 0)
            return NULL;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_rnn_forward(M(self), t[0], t[1], t[2], t[3], &hn, &cn));
    PyObject *yo = tsp_wrap(y);
    if (!yo) return ts_release(hn), ts_release(cn), NULL;
    PyObject *ho = tsp_wrap(hn);
    if (!ho) return ts_release(cn), Py_DECREF(yo), NULL;
    PyObject *co = cn ? tsp_wrap(cn) : Py_NewRef(Py_None);
    return co ? Py_BuildValue("(NNN)", yo, ho, co) : (Py_DECREF(yo), Py_DECREF(ho), NULL);
}

/* rnn_cell(input, hx, cx) -> (h, c|None): RNNCell / LSTMCell / GRUCell forward */
static PyObject *cm_rnn_cell(PyObject *self, PyObject *args) {
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO:rnn_cell", &o[0], &o[1], &o[2])) return NULL;
    static const char *const names[] = {"input", "hx", "cx"};
    ts_tensor *t[3], *h, *c = NULL;
    for (int i = 0; i < 3; i++)
        if (i == 0 ? !(t[i] = tsp_tensor_arg(o[i], "RNNCell.forward", names[i]))
                   : tspn_opt_tensor(o[i], &t[i], "RNNCell.forward", names[i]) < 0)
            return NULL;
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(h = ts_rnn_cell_forward(M(self), t[0], t[1], t[2], &c));
    PyObject *ho = tsp_wrap(h);
    if (!ho) return ts_release(c), NULL;
    PyObject *co = c ? tsp_wrap(c) : Py_NewRef(Py_None);
    return co ? Py_BuildValue("(NN)", ho, co) : (Py_DECREF(ho), NULL);
}

/* place(budgets, example_input, with_grads, output_device, dry_run[, overrides]) -> the plan's
 * text (ts_module_place_str; tessera.nn.utils.place); tsp.h */
PyObject *tsp_place(ts_module *m, PyObject *args) {
    const char *budgets;
    PyObject *ex, *outd;
    const char *overrides = NULL;
    int with_grads, dry;
    if (!PyArg_ParseTuple(args, "sOpOp|z", &budgets, &ex, &with_grads, &outd, &dry, &overrides))
        return NULL;
    ts_place_opts o = {.with_grads = with_grads, .dry_run = dry, .overrides = overrides};
    if (ex != Py_None && !(o.example_input = tsp_tensor_arg(ex, "place", "example_input")))
        return NULL;
    if (outd != Py_None && tsp_device_arg(outd, &o.output_device, "place", "output_device") < 0)
        return NULL;
    if (tsp_enter() < 0) return NULL;
    ts_place_plan plan;
    ts_status st;
    TSP_NOGIL(st = ts_module_place_str(m, budgets, o, &plan));
    if (st != TS_OK) return tsp_raise_pending();
    char *text = ts_place_plan_str(&plan);
    ts_place_plan_free(&plan);
    if (!text) return tsp_raise_pending();
    PyObject *r = PyUnicode_FromString(text);
    free(text);
    return r;
}

static PyObject *cm_place(PyObject *self, PyObject *args) { return tsp_place(M(self), args); }

/* stream(device, prefetch): ts_module_stream; unstream(): ts_module_unstream; stream_stats() -> a
 * dict of ts_stream_stats's counters (tessera.nn.utils.stream) */
static PyObject *cm_stream(PyObject *self, PyObject *args) {
    PyObject *devo;
    int prefetch;
    if (!PyArg_ParseTuple(args, "Oi", &devo, &prefetch)) return NULL;
    ts_device dev;
    if (tsp_device_arg(devo, &dev, "stream", "device") < 0 || tsp_enter() < 0) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_module_stream(M(self), dev, (ts_stream_opts){.prefetch = prefetch}));
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *cm_unstream(PyObject *self, PyObject *unused) {
    if (tsp_enter() < 0) return NULL;
    ts_status st;
    TSP_NOGIL(st = ts_module_unstream(M(self)));
    if (st != TS_OK) return tsp_raise_pending();
    Py_RETURN_NONE;
}

static PyObject *cm_stream_stats(PyObject *self, PyObject *unused) {
    if (!ts_module_is_streamed(M(self))) Py_RETURN_NONE;
    ts_stream_stats s;
    if (ts_module_stream_stats(M(self), &s) != TS_OK) return tsp_raise_pending();
    return Py_BuildValue(
        "{s:i,s:K,s:K,s:K,s:K,s:K,s:i,s:n,s:K}", "units", s.units, "copies",
        (unsigned long long)s.copies, "bytes", (unsigned long long)s.bytes, "unit_fetches",
        (unsigned long long)s.unit_fetches, "prefetched", (unsigned long long)s.prefetched,
        "backward_fetches", (unsigned long long)s.backward_fetches, "max_resident_units",
        s.max_resident_units, "max_resident_bytes", (Py_ssize_t)s.max_resident_bytes,
        "cache_flushes", (unsigned long long)s.cache_flushes);
}

static PyMethodDef cmodule_methods[] = {
    {"forward", cm_forward, METH_O, "forward(x): ts_forward"},
    {"train", cm_train, METH_O, "train(mode): sets the C module's training flag (recursive)"},
    {"named_tensors", FN(cm_named_tensors), METH_VARARGS, "named_tensors(buffers, cls)"},
    {"mha", FN(cm_mha), METH_VARARGS, NULL},
    {"encoder_layer", FN(cm_encoder_layer), METH_VARARGS, NULL},
    {"generate", FN(cm_generate), METH_VARARGS, NULL},
    {"checkpoint_blocks", FN(cm_checkpoint_blocks), METH_VARARGS, NULL},
    {"rnn", FN(cm_rnn), METH_VARARGS, NULL},
    {"rnn_cell", FN(cm_rnn_cell), METH_VARARGS, NULL},
    {"place", FN(cm_place), METH_VARARGS, "place(budgets, example, grads, out, dry): plan text"},
    {"stream", FN(cm_stream), METH_VARARGS, "stream(device, prefetch): ts_module_stream"},
    {"unstream", cm_unstream, METH_NOARGS, "unstream(): ts_module_unstream"},
    {"stream_stats", cm_stream_stats, METH_NOARGS, "stream_stats() -> dict, None unstreamed"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject cmodule_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tessera._C.CModule",
    .tp_basicsize = sizeof(cmodule),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A module built by Tessera's C library (made by the _nn_* factories).",
    .tp_dealloc = cmodule_dealloc,
    .tp_repr = cmodule_repr,
    .tp_methods = cmodule_methods,
};

/* ------------------------------------------------------------------ factories */
/* _nn_gpt(vocab_size, context, n_layer, n_head, n_embd, dropout) */
static PyObject *nn_gpt(PyObject *self, PyObject *args) {
    (void)self;
    long long v, c, l, h, e;
    double p;
    if (!PyArg_ParseTuple(args, "LLLLLd:GPT", &v, &c, &l, &h, &e, &p)) return NULL;
    ts_module *m;
    TSP_NOGIL(m = ts_gpt_new((ts_gpt_config){v, c, l, h, e, p}));
    return cmodule_wrap(m);
}

/* _nn_resnet(depth, cifar, num_classes, in_channels, width, cifar_stem, zero_init_residual):
 * depth 18/34/50 torchvision's, or a CIFAR ResNet (6n + 2) when cifar */
static PyObject *nn_resnet(PyObject *self, PyObject *args) {
    (void)self;
    int depth, cifar, stem, zero;
    long long nc, ic, w;
    if (!PyArg_ParseTuple(args, "ipLLLpp:resnet", &depth, &cifar, &nc, &ic, &w, &stem, &zero))
        return NULL;
    ts_resnet_config c = {.num_classes = nc,
                          .in_channels = ic,
                          .width = w,
                          .cifar_stem = stem,
                          .zero_init_residual = zero};
    ts_module *m = NULL;
    if (!cifar && depth != 18 && depth != 34 && depth != 50)
        return PyErr_Format(PyExc_ValueError, "resnet: depth %d is not 18, 34 or 50", depth);
    TSP_NOGIL(m = cifar         ? ts_resnet_cifar_new(depth, c)
                  : depth == 18 ? ts_resnet18_new(c)
                  : depth == 34 ? ts_resnet34_new(c)
                                : ts_resnet50_new(c));
    return cmodule_wrap(m);
}

/* _nn_mha(embed_dim, num_heads, dropout, bias, batch_first) */
static PyObject *nn_mha(PyObject *self, PyObject *args) {
    (void)self;
    long long e, h;
    double p;
    int bias, bf;
    if (!PyArg_ParseTuple(args, "LLdpp:MultiheadAttention", &e, &h, &p, &bias, &bf)) return NULL;
    ts_module *m;
    TSP_NOGIL(m = ts_multihead_attention_new(
                  e, h, (ts_mha_opts){.dropout = p, .no_bias = !bias, .batch_first = bf}));
    return cmodule_wrap(m);
}

/* _nn_encoder_layer(d_model, nhead, dim_feedforward, dropout, activation (0 relu, 1 gelu, 2 gelu
 * tanh), layer_norm_eps, batch_first, norm_first, bias) */
static PyObject *nn_encoder_layer(PyObject *self, PyObject *args) {
    (void)self;
    long long d, h, ff;
    double p, eps;
    int act, bf, nf, bias;
    if (!PyArg_ParseTuple(args, "LLLdidppp:TransformerEncoderLayer", &d, &h, &ff, &p, &act, &eps,
                          &bf, &nf, &bias))
        return NULL;
    ts_transformer_opts o = {.dim_feedforward = ff,
                             .has_dropout = true,
                             .dropout = p,
                             .activation = (ts_activation)act,
                             .layer_norm_eps = eps,
                             .batch_first = bf,
                             .norm_first = nf,
                             .no_bias = !bias};
    ts_module *m;
    TSP_NOGIL(m = ts_transformer_encoder_layer_new(d, h, o));
    return cmodule_wrap(m);
}

/* _nn_rnn(kind (0 RNN, 1 LSTM, 2 GRU), cell, input_size, hidden_size, num_layers, relu, bias,
 * batch_first, dropout, bidirectional, proj_size) */
static PyObject *nn_rnn(PyObject *self, PyObject *args) {
    (void)self;
    int kind, cell, relu, bias, bf, bidir;
    long long in, hid, layers, proj;
    double p;
    if (!PyArg_ParseTuple(args, "ipLLLpppdpL:RNN", &kind, &cell, &in, &hid, &layers, &relu, &bias,
                          &bf, &p, &bidir, &proj))
        return NULL;
    if (kind < 0 || kind > 2) return PyErr_Format(PyExc_ValueError, "_nn_rnn: bad kind %d", kind);
    ts_rnn_opts o = {.num_layers = layers,
                     .nonlinearity = relu ? TS_RNN_RELU : TS_RNN_TANH,
                     .no_bias = !bias,
                     .batch_first = bf,
                     .dropout = p,
                     .bidirectional = bidir,
                     .proj_size = proj};
    typedef ts_module *(*ctor)(int64_t, int64_t, ts_rnn_opts);
    static const ctor layers_[] = {ts_rnn_new, ts_lstm_new, ts_gru_new},
                      cells[] = {ts_rnn_cell_new, ts_lstm_cell_new, ts_gru_cell_new};
    ts_module *m;
    TSP_NOGIL(m = (cell ? cells : layers_)[kind](in, hid, o));
    return cmodule_wrap(m);
}

static PyMethodDef factories[] = {
    {"_nn_gpt", FN(nn_gpt), METH_VARARGS, NULL},
    {"_nn_resnet", FN(nn_resnet), METH_VARARGS, NULL},
    {"_nn_mha", FN(nn_mha), METH_VARARGS, NULL},
    {"_nn_encoder_layer", FN(nn_encoder_layer), METH_VARARGS, NULL},
    {"_nn_rnn", FN(nn_rnn), METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int tsp_init_cmodule(PyObject *m) {
    if (PyType_Ready(&cmodule_type) < 0) return -1;
    if (PyModule_AddObjectRef(m, "CModule", (PyObject *)&cmodule_type) < 0) return -1;
    return PyModule_AddFunctions(m, factories);
}
