/* nn.c — tessera._C's functional layers, losses and init functions (the _nn_* functions that
 * tessera.nn.functional and tessera.nn.init wrap with PyTorch's signatures). The Python layer
 * parses PyTorch's argument forms (tuples, defaults, reduction names) and passes plain values
 * here, so each function below is one C call. Modules built in C: nn_cmodule.c. */
#include "nn_impl.h"

#include "tensor_impl.h"

/* ------------------------------------------------------------------ shared helpers */
/* None -> NULL (no error), a Tensor -> its handle; anything else: TypeError, -1 */
int tspn_opt_tensor(PyObject *o, ts_tensor **out, const char *fn, const char *arg) {
    *out = NULL;
    if (o == Py_None) return 0;
    *out = tsp_tensor_arg(o, fn, arg);
    return *out ? 0 : -1;
}

/* the tensor arguments o[0..n-1] (None allowed where optional[i]) into t[] */
static int tensor_args(PyObject *const *o, ts_tensor **t, int n, const char *fn,
                       const char *const *names, unsigned optional_mask) {
    for (int i = 0; i < n; i++) {
        if (optional_mask & (1u << i)) {
            if (tspn_opt_tensor(o[i], &t[i], fn, names[i]) < 0) return -1;
        } else if (!(t[i] = tsp_tensor_arg(o[i], fn, names[i])))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ activations, softmax */
typedef ts_tensor *(*unary_fn)(ts_tensor *);
static const unary_fn activations[] = {ts_relu, ts_gelu, ts_gelu_tanh, ts_sigmoid,
                                       ts_tanh, ts_silu, ts_softplus};

/* their in-place forms (NULL: none, as in PyTorch) */
static const unary_fn activations_inplace[] = {ts_relu_, NULL,     NULL, ts_sigmoid_,
                                               ts_tanh_, ts_silu_, NULL};
_Static_assert(sizeof activations / sizeof *activations ==
                   sizeof activations_inplace / sizeof *activations_inplace,
               "one in-place entry (or NULL) per activation");

/* _nn_act(kind, x[, inplace]): kind indexes `activations` (functional.py names them); inplace
 * writes into x and returns it */
static PyObject *nn_act(PyObject *self, PyObject *args) {
    (void)self;
    int kind, inplace = 0;
    PyObject *xo;
    if (!PyArg_ParseTuple(args, "iO|p:_nn_act", &kind, &xo, &inplace)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "activation", "input");
    if (!x) return NULL;
    if (kind < 0 || kind >= (int)(sizeof activations / sizeof *activations))
        return PyErr_Format(PyExc_ValueError, "_nn_act: unknown activation %d", kind);
    if (!inplace) return tsp_unary(activations[kind], x);
    if (!activations_inplace[kind])
        return PyErr_Format(PyExc_ValueError, "_nn_act: activation %d has no in-place form", kind);
    ts_tensor *r;
    if (tsp_enter()) return NULL;
    TSP_NOGIL(r = activations_inplace[kind](x));
    return tsp_inplace_result(xo, r);
}

/* _nn_softmax(log, x, dim) */
static PyObject *nn_softmax(PyObject *self, PyObject *args) {
    (void)self;
    int log, dim;
    PyObject *xo;
    if (!PyArg_ParseTuple(args, "pOi:softmax", &log, &xo, &dim)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "softmax", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = log ? ts_log_softmax(x, dim) : ts_softmax(x, dim));
    return tsp_wrap(y);
}

/* ------------------------------------------------------------------ layers */
static PyObject *nn_linear(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "weight", "bias"};
    PyObject *o[3];
    ts_tensor *t[3], *y;
    if (!PyArg_ParseTuple(args, "OOO:linear", &o[0], &o[1], &o[2])) return NULL;
    if (tensor_args(o, t, 3, "linear", names, 4u) < 0 || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_linear(t[0], t[1], t[2]));
    return tsp_wrap(y);
}

/* _nn_pool2d(avg, x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode, exclude_pad,
 * divisor_override=0, return_indices=False): max pooling with return_indices gives the pair
 * (output, indices) */
static PyObject *nn_pool2d(PyObject *self, PyObject *args) {
    (void)self;
    int avg, ceil, excl, with_idx = 0;
    PyObject *xo;
    ts_pool2d_opts p = {0};
    if (!PyArg_ParseTuple(args, "pO(ii)(ii)(ii)(ii)pp|ip:pool2d", &avg, &xo, &p.kernel[0],
                          &p.kernel[1], &p.stride[0], &p.stride[1], &p.padding[0], &p.padding[1],
                          &p.dilation[0], &p.dilation[1], &ceil, &excl, &p.divisor_override,
                          &with_idx))
        return NULL;
    p.ceil_mode = ceil, p.exclude_pad = excl;
    ts_tensor *x = tsp_tensor_arg(xo, avg ? "avg_pool2d" : "max_pool2d", "input"), *y, *idx = NULL;
    if (!x || tsp_enter() < 0) return NULL;
    if (!avg && with_idx) {
        TSP_NOGIL(y = ts_max_pool2d_with_indices(x, p, &idx));
        PyObject *yo = tsp_wrap(y);
        if (!yo) return tsp_drop(idx), NULL;
        PyObject *io = tsp_wrap(idx);
        return io ? Py_BuildValue("(NN)", yo, io) : (Py_DECREF(yo), NULL);
    }
    TSP_NOGIL(y = avg ? ts_avg_pool2d(x, p) : ts_max_pool2d(x, p));
    return tsp_wrap(y);
}

/* _nn_max_pool2d_backward(grad_output, x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode,
 * indices): aten.max_pool2d_with_indices_backward */
static PyObject *nn_max_pool2d_backward(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"grad_output", "self", "indices"};
    int ceil;
    PyObject *o[3];
    ts_tensor *t[3], *y;
    ts_pool2d_opts p = {0};
    if (!PyArg_ParseTuple(args, "OO(ii)(ii)(ii)(ii)pO:max_pool2d_with_indices_backward", &o[0],
                          &o[1], &p.kernel[0], &p.kernel[1], &p.stride[0], &p.stride[1],
                          &p.padding[0], &p.padding[1], &p.dilation[0], &p.dilation[1], &ceil,
                          &o[2]))
        return NULL;
    p.ceil_mode = ceil;
    if (tensor_args(o, t, 3, "max_pool2d_with_indices_backward", names, 0u) < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = ts_max_pool2d_backward(t[0], t[1], p, t[2]));
    return tsp_wrap(y);
}

static PyObject *nn_adaptive_avg_pool2d(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long oh, ow;
    if (!PyArg_ParseTuple(args, "O(LL):adaptive_avg_pool2d", &xo, &oh, &ow)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "adaptive_avg_pool2d", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_adaptive_avg_pool2d(x, oh, ow));
    return tsp_wrap(y);
}

static PyObject *nn_dropout(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    double p;
    int training, inplace = 0;
    if (!PyArg_ParseTuple(args, "Odp|p:dropout", &xo, &p, &training, &inplace)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "dropout", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = inplace ? ts_dropout_(x, p, training) : ts_dropout(x, p, training));
    return tsp_result(xo, y, inplace || (y && y == x)); /* x itself: input itself, as PyTorch */
}

/* _nn_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) */
static PyObject *nn_batch_norm(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "running_mean", "running_var", "weight", "bias"};
    PyObject *o[5];
    ts_tensor *t[5], *y;
    int training;
    double momentum, eps;
    if (!PyArg_ParseTuple(args, "OOOOOpdd:batch_norm", &o[0], &o[1], &o[2], &o[3], &o[4], &training,
                          &momentum, &eps))
        return NULL;
    if (tensor_args(o, t, 5, "batch_norm", names, 0x1eu) < 0 || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_batch_norm(t[0], t[1], t[2], t[3], t[4], training, momentum, eps));
    return tsp_wrap(y);
}

/* _nn_layer_norm(rms, x, normalized_shape, weight, bias, eps): layer_norm or rms_norm (no bias) */
static PyObject *nn_layer_norm(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "weight", "bias"};
    PyObject *o[3], *so;
    ts_tensor *t[3], *y;
    int rms;
    double eps;
    ts_shape s;
    if (!PyArg_ParseTuple(args, "pOOOOd:layer_norm", &rms, &o[0], &so, &o[1], &o[2], &eps))
        return NULL;
    if (tensor_args(o, t, 3, "layer_norm", names, 6u) < 0 ||
        tsp_shape_arg(so, &s, "layer_norm", "normalized_shape") < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(y = rms ? ts_rms_norm(t[0], s, t[1], eps) : ts_layer_norm(t[0], s, t[1], t[2], eps));
    return tsp_wrap(y);
}

/* _nn_embedding(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0):
 * ts_embedding_ex (a negative padding_idx counts from the end; max_norm renorms the rows used of
 * weight in place first) */
static PyObject *nn_embedding(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "weight"};
    PyObject *o[2], *po = Py_None, *mo = Py_None;
    ts_tensor *t[2], *y;
    ts_embedding_opts e = {.norm_type = 2.0};
    if (!PyArg_ParseTuple(args, "OO|OOd:embedding", &o[0], &o[1], &po, &mo, &e.norm_type))
        return NULL;
    if (po != Py_None) {
        e.has_padding_idx = true;
        e.padding_idx = PyLong_AsLongLong(po);
        if (e.padding_idx == -1 && PyErr_Occurred()) return NULL;
    }
    if (mo != Py_None) {
        e.has_max_norm = true;
        e.max_norm = PyFloat_AsDouble(mo);
        if (e.max_norm == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (tensor_args(o, t, 2, "embedding", names, 0u) < 0 || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_embedding_ex(t[1], t[0], e));
    return tsp_wrap(y);
}

/* _nn_feature_dropout(x, p, training, unbatched, inplace): in place, x itself comes back */
static PyObject *nn_feature_dropout(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    double p;
    int training, unbatched, inplace;
    ts_tensor *y;
    if (!PyArg_ParseTuple(args, "Odppp:feature_dropout", &xo, &p, &training, &unbatched, &inplace))
        return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "feature_dropout", "input");
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = inplace ? ts_feature_dropout_(x, p, training, unbatched)
                          : ts_feature_dropout(x, p, training, unbatched));
    return tsp_result(xo, y, inplace || (y && y == x)); /* x itself: input itself, as PyTorch */
}

/* _nn_rrelu(x, lower, upper, training, inplace): in place, x itself comes back */
static PyObject *nn_rrelu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    double lo, hi;
    int training, inplace;
    ts_tensor *y;
    if (!PyArg_ParseTuple(args, "Oddpp:rrelu", &xo, &lo, &hi, &training, &inplace)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "rrelu", "input");
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = inplace ? ts_rrelu_(x, lo, hi, training) : ts_rrelu(x, lo, hi, training));
    return tsp_result(xo, y, inplace);
}

/* _nn_bilinear(input1, input2, weight, bias or None) */
static PyObject *nn_bilinear(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input1", "input2", "weight", "bias"};
    PyObject *o[4];
    ts_tensor *t[4], *y;
    if (!PyArg_ParseTuple(args, "OOOO:bilinear", &o[0], &o[1], &o[2], &o[3])) return NULL;
    if (tensor_args(o, t, 4, "bilinear", names, 8u) < 0 || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_bilinear(t[0], t[1], t[2], t[3]));
    return tsp_wrap(y);
}

/* _nn_embedding_bag(indices, weight, offsets, mode, per_sample_weights, padding_idx,
 * include_last_offset, max_norm=None, norm_type=2.0): ts_embedding_bag_ex, padding_idx None or
 * a row (negative from the end) */
static PyObject *nn_embedding_bag(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "weight", "offsets", "per_sample_weights"};
    PyObject *o[4], *po, *mo = Py_None;
    ts_tensor *t[4], *y;
    int mode, last;
    ts_embedding_opts e = {.norm_type = 2.0};
    if (!PyArg_ParseTuple(args, "OOOiOOp|Od:embedding_bag", &o[0], &o[1], &o[2], &mode, &o[3], &po,
                          &last, &mo, &e.norm_type))
        return NULL;
    if (po != Py_None) {
        e.has_padding_idx = true;
        e.padding_idx = PyLong_AsLongLong(po);
        if (e.padding_idx == -1 && PyErr_Occurred()) return NULL;
    }
    if (mo != Py_None) {
        e.has_max_norm = true;
        e.max_norm = PyFloat_AsDouble(mo);
        if (e.max_norm == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (tensor_args(o, t, 4, "embedding_bag", names, 12u) < 0 || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_embedding_bag_ex(t[1], t[0], t[2], mode, t[3], last, e));
    return tsp_wrap(y);
}

/* _nn_sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa=False) */
static PyObject *nn_sdpa(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"query", "key", "value", "attn_mask"};
    PyObject *o[4];
    ts_tensor *t[4], *y;
    double p, scale;
    int causal, gqa = 0;
    if (!PyArg_ParseTuple(args, "OOOOdpd|p:scaled_dot_product_attention", &o[0], &o[1], &o[2],
                          &o[3], &p, &causal, &scale, &gqa))
        return NULL;
    if (tensor_args(o, t, 4, "scaled_dot_product_attention", names, 8u) < 0 || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(
        y = ts_scaled_dot_product_attention_ex(t[0], t[1], t[2], t[3], p, causal, scale, gqa));
    return tsp_wrap(y);
}

/* _nn_mha_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
 * bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
 * key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
 * k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal): F.
 * multi_head_attention_forward's order -> (attn_output, attn_weights or None)
 * (ts_multi_head_attention_forward) */
static PyObject *nn_mha_forward(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {
        "query",     "key",           "value",           "in_proj_weight", "in_proj_bias",
        "bias_k",    "bias_v",        "out_proj_weight", "out_proj_bias",  "key_padding_mask",
        "attn_mask", "q_proj_weight", "k_proj_weight",   "v_proj_weight",  "static_k",
        "static_v"};
    PyObject *o[16];
    ts_tensor *t[16], *y, *w = NULL;
    ts_mha_forward_args a = {0};
    int zero_attn, training, need, separate, average, causal;
    long long edim, heads;
    if (!PyArg_ParseTuple(args, "OOOLLOOOOpdOOpOpOpOOOOOpp:multi_head_attention_forward", &o[0],
                          &o[1], &o[2], &edim, &heads, &o[3], &o[4], &o[5], &o[6], &zero_attn,
                          &a.dropout_p, &o[7], &o[8], &training, &o[9], &need, &o[10], &separate,
                          &o[11], &o[12], &o[13], &o[14], &o[15], &average, &causal))
        return NULL;
    if (tensor_args(o, t, 16, "multi_head_attention_forward", names, 0xFFF8u) < 0 ||
        tsp_enter() < 0)
        return NULL;
    a.embed_dim_to_check = edim, a.num_heads = heads;
    a.in_proj_weight = t[3], a.in_proj_bias = t[4], a.bias_k = t[5], a.bias_v = t[6];
    a.add_zero_attn = zero_attn, a.out_proj_weight = t[7], a.out_proj_bias = t[8];
    a.training = training, a.key_padding_mask = t[9], a.need_weights = need, a.attn_mask = t[10];
    a.use_separate_proj_weight = separate, a.q_proj_weight = t[11], a.k_proj_weight = t[12];
    a.v_proj_weight = t[13], a.static_k = t[14], a.static_v = t[15];
    a.average_attn_weights = average, a.is_causal = causal;
    TSP_NOGIL(y = ts_multi_head_attention_forward(t[0], t[1], t[2], &a, need ? &w : NULL));
    PyObject *yo = tsp_wrap(y);
    if (!yo) return ts_release(w), NULL;
    PyObject *wo = w ? tsp_wrap(w) : Py_NewRef(Py_None);
    return wo ? Py_BuildValue("(NN)", yo, wo) : (Py_DECREF(yo), NULL);
}

static PyObject *nn_one_hot(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo;
    long long n;
    if (!PyArg_ParseTuple(args, "OL:one_hot", &xo, &n)) return NULL;
    ts_tensor *x = tsp_tensor_arg(xo, "one_hot", "input"), *y;
    if (!x || tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_one_hot(x, n));
    return tsp_wrap(y);
}

/* ------------------------------------------------------------------ losses */
enum { L_CROSS_ENTROPY, L_NLL, L_MSE, L_L1, L_SMOOTH_L1, L_BCE_LOGITS, L_BCE, L_COUNT };

static ts_tensor *run_loss(int kind, ts_tensor *x, ts_tensor *y, ts_loss_opts o) {
    switch (kind) {
    case L_CROSS_ENTROPY:
        return ts_cross_entropy_ex(x, y, o);
    case L_NLL:
        return ts_nll_loss(x, y, o);
    case L_MSE:
        return ts_mse_loss_ex(x, y, o);
    case L_L1:
        return ts_l1_loss(x, y, o);
    case L_SMOOTH_L1:
        return ts_smooth_l1_loss_beta(x, y, o.reduction, o.beta);
    case L_BCE:
        return ts_binary_cross_entropy(x, y, o);
    default:
        return ts_bce_with_logits(x, y, o);
    }
}

/* _nn_loss(kind, input, target, reduction (0 mean, 1 sum, 2 none), weight, ignore_index or None,
 * label_smoothing, beta, pos_weight) */
static PyObject *nn_loss(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "target", "weight", "pos_weight"};
    PyObject *o[4], *ignore;
    ts_tensor *t[4], *y;
    int kind, reduction;
    ts_loss_opts lo = {0};
    if (!PyArg_ParseTuple(args, "iOOiOOddO:loss", &kind, &o[0], &o[1], &reduction, &o[2], &ignore,
                          &lo.label_smoothing, &lo.beta, &o[3]))
        return NULL;
    if (kind < 0 || kind >= L_COUNT || reduction < 0 || reduction > 2)
        return PyErr_Format(PyExc_ValueError, "_nn_loss: bad kind %d or reduction %d", kind,
                            reduction);
    if (tensor_args(o, t, 4, "loss", names, 12u) < 0) return NULL;
    if (ignore != Py_None) {
        lo.has_ignore_index = true;
        if (tsp_int_arg(ignore, &lo.ignore_index, "loss", "ignore_index") < 0) return NULL;
    }
    lo.reduction = (ts_reduction)reduction, lo.weight = t[2], lo.pos_weight = t[3];
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = run_loss(kind, t[0], t[1], lo));
    return tsp_wrap(y);
}

/* _nn_linear_cross_entropy(input, linear_weight, target, linear_bias, weight, reduction,
 * ignore_index (None: -100), label_smoothing, chunk_rows) */
static PyObject *nn_linear_cross_entropy(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const names[] = {"input", "linear_weight", "target", "linear_bias",
                                        "weight"};
    PyObject *o[5], *ignore;
    ts_tensor *t[5], *y;
    int reduction;
    long long chunk;
    ts_loss_opts lo = {0};
    if (!PyArg_ParseTuple(args, "OOOOOiOdL:linear_cross_entropy", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &reduction, &ignore, &lo.label_smoothing, &chunk))
        return NULL;
    if (reduction < 0 || reduction > 2)
        return PyErr_Format(PyExc_ValueError, "linear_cross_entropy: bad reduction %d", reduction);
    if (tensor_args(o, t, 5, "linear_cross_entropy", names, 24u) < 0) return NULL;
    if (ignore != Py_None) {
        lo.has_ignore_index = true;
        if (tsp_int_arg(ignore, &lo.ignore_index, "linear_cross_entropy", "ignore_index") < 0)
            return NULL;
    }
    lo.reduction = (ts_reduction)reduction, lo.weight = t[4];
    if (tsp_enter() < 0) return NULL;
    TSP_NOGIL(y = ts_linear_cross_entropy(t[0], t[1], t[3], t[2], lo, (int64_t)chunk));
    return tsp_wrap(y);
}

/* ------------------------------------------------------------------ init (in place) */
enum {
    I_KAIMING_UNIFORM,
    I_KAIMING_NORMAL,
    I_UNIFORM,
    I_NORMAL,
    I_XAVIER_UNIFORM,
    I_ZEROS,
    I_ONES,
    I_CONSTANT
};

/* constant_: a fill without a graph (and without drawing random numbers) */
static ts_tensor *constant_(ts_tensor *t, double v) {
    ts_no_grad_begin();
    ts_scope_begin(); /* owns the reference the in-place op returns */
    ts_tensor *r = ts_fill_(t, v);
    ts_scope_end();
    ts_no_grad_end();
    return r ? t : NULL;
}

static ts_tensor *run_init(int kind, ts_tensor *t, double a, double b, int fan_out) {
    switch (kind) {
    case I_KAIMING_UNIFORM:
        return ts_init_kaiming_uniform_(t, a);
    case I_KAIMING_NORMAL:
        return ts_init_kaiming_normal_(t, a, fan_out ? TS_FAN_OUT : TS_FAN_IN);
    case I_UNIFORM:
        return ts_init_uniform_(t, a, b);
    case I_NORMAL:
        return ts_init_normal_(t, a, b);
    case I_XAVIER_UNIFORM:
        return ts_init_xavier_uniform_(t, a);
    case I_ZEROS:
        return ts_init_zeros_(t);
    case I_ONES:
        return ts_init_ones_(t);
    case I_CONSTANT:
        return constant_(t, a);
    default:
        return ts_error_set(TS_ERR_ARG, "init: unknown kind %d", kind), NULL;
    }
}

/* _nn_init(kind, tensor, a, b, fan_out) -> tensor (the same object, filled in place) */
static PyObject *nn_init(PyObject *self, PyObject *args) {
    (void)self;
    int kind, fan_out;
    PyObject *to;
    double a, b;
    if (!PyArg_ParseTuple(args, "iOddp:init", &kind, &to, &a, &b, &fan_out)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "init", "tensor"), *r;
    if (!t || tsp_enter() < 0) return NULL;
    TSP_NOGIL(r = run_init(kind, t, a, b, fan_out));
    if (!r || tsp_check()) return tsp_raise_pending();
    return Py_NewRef(to);
}

/* ------------------------------------------------------------------ in-place moves */
/* _nn_move_(tensor, device, dtype): Module.to's per-tensor step — the handle stays (so a C module
 * or a C optimizer holding it sees the move), as PyTorch's `p.data = p.data.to(...)` */
static PyObject *nn_move_(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *to, *devo, *dto;
    if (!PyArg_ParseTuple(args, "OOO:_move_", &to, &devo, &dto)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "Module.to", "tensor");
    ts_device d = {0};
    ts_dtype dt = TS_DTYPE_DEFAULT;
    if (!t || (devo != Py_None && tsp_device_arg(devo, &d, "Module.to", "device") < 0) ||
        (dto != Py_None && tsp_dtype_arg(dto, &dt, "Module.to", "dtype") < 0) || tsp_enter() < 0)
        return NULL;
    ts_status s = TS_OK;
    TSP_NOGIL(if (devo != Py_None) s = ts_tensor_move_(t, d);
              if (s == TS_OK && dto != Py_None) s = ts_tensor_cast_(t, dt););
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* _nn_assign_(dst, src): load_state_dict's copy, without a graph, from any device and dtype */
static PyObject *nn_assign_(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *d, *s;
    if (!PyArg_ParseTuple(args, "OO:load_state_dict", &d, &s)) return NULL;
    ts_tensor *dst = tsp_tensor_arg(d, "load_state_dict", "param"), *src, *r = NULL;
    if (!dst || !(src = tsp_tensor_arg(s, "load_state_dict", "input_param")) || tsp_enter() < 0)
        return NULL;
    TSP_NOGIL(ts_scope_begin(); ts_no_grad_begin();
              r = ts_copy_(dst, ts_to(src, ts_device_of(dst))); ts_no_grad_end(); ts_scope_end(););
    (void)r;
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* _nn_add_(t, v): t += v in place without a graph (num_batches_tracked) */
static PyObject *nn_add_(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *to;
    double v;
    if (!PyArg_ParseTuple(args, "Od:_nn_add_", &to, &v)) return NULL;
    ts_tensor *t = tsp_tensor_arg(to, "_nn_add_", "tensor");
    if (!t) return NULL;
    ts_scope_begin();
    ts_no_grad_begin();
    ts_add_scalar_(t, v);
    ts_no_grad_end();
    ts_scope_end();
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

/* _nn_zero_grad(params, set_to_none): Module/Optimizer.zero_grad over the Tensors of a list */
static PyObject *nn_zero_grad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *seq;
    int none;
    if (!PyArg_ParseTuple(args, "Op:zero_grad", &seq, &none)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "zero_grad(): params must be a sequence");
    if (!fast) return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        ts_tensor *t = tsp_tensor_arg(PySequence_Fast_GET_ITEM(fast, i), "zero_grad", "params");
        if (!t) return Py_DECREF(fast), NULL;
        ts_tensor *g = ts_grad(t);
        if (!g) continue;
        if (none)
            ts_set_grad(t, NULL);
        else {
            ts_scope_begin();
            ts_zero_(g);
            ts_scope_end();
        }
    }
    Py_DECREF(fast);
    if (tsp_check()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef nn_functions[] = {
    {"_nn_act", FN(nn_act), METH_VARARGS, "_nn_act(kind, x): an activation"},
    {"_nn_softmax", FN(nn_softmax), METH_VARARGS, "_nn_softmax(log, x, dim)"},
    {"_nn_linear", FN(nn_linear), METH_VARARGS, "_nn_linear(x, w, b)"},
    {"_nn_pool2d", FN(nn_pool2d), METH_VARARGS, "_nn_pool2d(avg, x, k, s, p, d, ceil, excl)"},
    {"_nn_adaptive_avg_pool2d", FN(nn_adaptive_avg_pool2d), METH_VARARGS, NULL},
    {"_nn_max_pool2d_backward", FN(nn_max_pool2d_backward), METH_VARARGS,
     "_nn_max_pool2d_backward(grad_output, x, k, s, p, d, ceil, indices)"},
    {"_nn_dropout", FN(nn_dropout), METH_VARARGS, "_nn_dropout(x, p, training, inplace=False)"},
    {"_nn_batch_norm", FN(nn_batch_norm), METH_VARARGS, NULL},
    {"_nn_layer_norm", FN(nn_layer_norm), METH_VARARGS, NULL},
    {"_nn_embedding", FN(nn_embedding), METH_VARARGS,
     "_nn_embedding(indices, weight, padding_idx=None, max_norm=None, norm_type=2.0)"},
    {"_nn_feature_dropout", FN(nn_feature_dropout), METH_VARARGS,
     "_nn_feature_dropout(x, p, training, unbatched, inplace)"},
    {"_nn_rrelu", FN(nn_rrelu), METH_VARARGS, "_nn_rrelu(x, lower, upper, training, inplace)"},
    {"_nn_bilinear", FN(nn_bilinear), METH_VARARGS, "_nn_bilinear(input1, input2, weight, bias)"},
    {"_nn_embedding_bag", FN(nn_embedding_bag), METH_VARARGS,
     "_nn_embedding_bag(indices, weight, offsets, mode, per_sample_weights, padding_idx, "
     "include_last_offset, max_norm=None, norm_type=2.0)"},
    {"_nn_sdpa", FN(nn_sdpa), METH_VARARGS, NULL},
    {"_nn_mha_forward", FN(nn_mha_forward), METH_VARARGS, NULL},
    {"_nn_one_hot", FN(nn_one_hot), METH_VARARGS, NULL},
    {"_nn_loss", FN(nn_loss), METH_VARARGS, NULL},
    {"_nn_linear_cross_entropy", FN(nn_linear_cross_entropy), METH_VARARGS,
     "_nn_linear_cross_entropy(input, linear_weight, target, linear_bias, weight, reduction, "
     "ignore_index, label_smoothing, chunk_rows)"},
    {"_nn_init", FN(nn_init), METH_VARARGS, NULL},
    {"_nn_move_", FN(nn_move_), METH_VARARGS, "_nn_move_(t, device, dtype): in place"},
    {"_nn_assign_", FN(nn_assign_), METH_VARARGS, "_nn_assign_(dst, src): copy, no graph"},
    {"_nn_add_", FN(nn_add_), METH_VARARGS, "_nn_add_(t, v): t += v, no graph"},
    {"_nn_zero_grad", FN(nn_zero_grad), METH_VARARGS, "_nn_zero_grad(params, set_to_none)"},
    {NULL, NULL, 0, NULL},
};

int tsp_init_nn(PyObject *m) {
    if (PyModule_AddFunctions(m, nn_functions) < 0 || tsp_init_nn_resample(m) < 0 ||
        tsp_init_nn_loss_kinds(m) < 0 || tsp_init_nn_activation(m) < 0 || tsp_init_nn_conv(m) < 0 ||
        tsp_init_nn_pool_norm(m) < 0 || tsp_init_nn_fusion(m) < 0 || tsp_init_nn_init(m) < 0)
        return -1;
    return tsp_init_cmodule(m);
}
