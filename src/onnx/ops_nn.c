/* ops_nn.c — ONNX's nn operators on Tessera's differentiable ops: Gemm, MatMul, the softmax
 * family, the normalizations, and the table of the whole family (convolution and pooling, Resize,
 * the recurrent layers and Einsum live in ops_nn_*.c). */
#include <math.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "ops/pad_resample.h"

/* ------------------------------------------------------------------ shared helpers */
ts_shape tso_nn_along(int ndim, int dim, int64_t len) {
    ts_shape s = {.ndim = ndim};
    for (int i = 0; i < ndim; i++) s.dims[i] = i == dim ? len : 1;
    return s;
}

ts_tensor *tso_nn_arange(int64_t start, int64_t count, int64_t step, ts_device dev) {
    return ts_arange((double)start, (double)(start + count * step), (double)step,
                     (ts_opts){.dtype = TS_I64, .device = dev});
}

/* an axis attribute in [-rank, rank) made non-negative; -1 and the error when out of range */
static int norm_axis(const tso_node *n, int64_t axis, int rank) {
    if (axis < -rank || axis >= (rank ? rank : 1))
        return tso_fail(n, TS_ERR_ARG, "axis %lld is out of range for rank %d", (long long)axis,
                        rank),
               -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

/* the dims from..rank-1 */
static ts_dims dims_from(int from, int rank) {
    ts_dims d = {.n = rank - from};
    for (int i = from; i < rank; i++) d.d[i - from] = i;
    return d;
}

/* ------------------------------------------------------------------ Gemm, MatMul */
static TSO_NN_RUN(run_gemm) {
    (void)c;
    ts_tensor *a = in[0], *b = in[1], *cc = tso_nn_opt(n, in, 2);
    if (ts_ndim(a) != 2 || ts_ndim(b) != 2)
        return tso_fail(n, TS_ERR_SHAPE, "A and B must be matrices, got %s and %s", tsi_desc(a),
                        tsi_desc(b));
    double alpha = tso_attr_float(n, "alpha", 1.0f), beta = tso_attr_float(n, "beta", 1.0f);
    ts_dtype dt = ts_dtype_of(a);
    if (tso_attr_int(n, "transA", 0)) a = ts_t(a);
    if (tso_attr_int(n, "transB", 0)) b = ts_t(b);
    ts_tensor *y = ts_matmul(a, b);
    if (y && alpha != 1) y = ts_mul_scalar(y, alpha);
    /* beta 0 drops C (NaN or inf in it included), as ONNX's reference */
    if (y && cc && beta != 0) y = ts_add(y, beta == 1 ? cc : ts_mul_scalar(cc, beta));
    if (y && ts_dtype_of(y) != dt) y = ts_to_dtype(y, dt);
    TSO_DONE(y);
}

static TSO_NN_RUN(run_matmul) {
    (void)c;
    if (ts_dtype_of(in[0]) != ts_dtype_of(in[1]))
        return tso_fail(n, TS_ERR_DTYPE, "operands of different types: %s and %s", tsi_desc(in[0]),
                        tsi_desc(in[1]));
    TSO_DONE(ts_matmul(in[0], in[1]));
}

/* ------------------------------------------------------------------ softmax family */
typedef ts_tensor *(*axis_fn)(ts_tensor *x, int axis);

static ts_tensor *hardmax(ts_tensor *x, int axis) {
    ts_tensor *arg = ts_argmax_dim(x, axis, true);
    int nd = ts_ndim(x);
    ts_tensor *pos = tso_nn_arange(0, ts_size(x, axis), 1, ts_device_of(x));
    pos = ts_reshape(pos, tso_nn_along(nd, axis, ts_size(x, axis)));
    return ts_to_dtype(ts_eq(pos, arg), ts_dtype_of(x));
}

/* before opset 13 the input is seen as a matrix [prod(dims[:axis]), prod(dims[axis:])] and the
 * operator runs along its rows */
static bool run_coerced(const tso_node *n, ts_tensor *x, ts_tensor **out, axis_fn f) {
    int rank = ts_ndim(x);
    int axis = norm_axis(n, tso_attr_int(n, "axis", 1), rank);
    if (axis < 0) return false;
    int64_t rows = 1;
    for (int i = 0; i < axis; i++) rows *= ts_size(x, i);
    int64_t cols = rows ? ts_numel(x) / rows : 0;
    ts_tensor *y = f(ts_reshape(x, TS_SHAPE(rows, cols)), 1);
    TSO_DONE(y ? ts_reshape(y, ts_shape_of(x)) : NULL);
}

static bool run_along(const tso_node *n, ts_tensor *x, ts_tensor **out, axis_fn f) {
    int axis = norm_axis(n, tso_attr_int(n, "axis", -1), ts_ndim(x));
    if (axis < 0) return false;
    TSO_DONE(f(x, axis));
}

static ts_tensor *softmax(ts_tensor *x, int axis) { return ts_softmax(x, axis); }
static ts_tensor *log_softmax(ts_tensor *x, int axis) { return ts_log_softmax(x, axis); }

#define AXIS_OP(name, f)                                                                           \
    static TSO_NN_RUN(name##1) {                                                                   \
        (void)c;                                                                                   \
        return run_coerced(n, in[0], out, f);                                                      \
    }                                                                                              \
    static TSO_NN_RUN(name##13) {                                                                  \
        (void)c;                                                                                   \
        return run_along(n, in[0], out, f);                                                        \
    }
AXIS_OP(run_softmax, softmax)
AXIS_OP(run_log_softmax, log_softmax)
AXIS_OP(run_hardmax, hardmax)

/* ------------------------------------------------------------------ normalizations */
/* (x - mean) / sqrt(var + eps) * scale + bias; the statistics and the affine parameters already
 * shaped to broadcast against x (scale, bias may be NULL) */
static ts_tensor *normalize(ts_tensor *x, ts_tensor *mean, ts_tensor *var, ts_tensor *scale,
                            ts_tensor *bias, double eps) {
    ts_tensor *y = ts_mul(ts_sub(x, mean), ts_rsqrt(ts_add_scalar(var, eps)));
    if (y && scale) y = ts_mul(y, scale);
    if (y && bias) y = ts_add(y, bias);
    return y;
}

/* a per-channel parameter [C] (or per-activation [C, D1, ...]) of x's type, shaped to broadcast
 * against x [N, C, D1, ...] */
static ts_tensor *channel_param(ts_tensor *p, ts_tensor *x, bool per_activation) {
    if (!p) return NULL;
    if (ts_dtype_of(p) != ts_dtype_of(x)) p = ts_to_dtype(p, ts_dtype_of(x));
    if (!per_activation) return ts_reshape(p, tso_nn_along(ts_ndim(x), 1, ts_numel(p)));
    ts_shape s = ts_shape_of(x);
    s.dims[0] = 1;
    return ts_reshape(p, s);
}

/* which BatchNormalization outputs past Y may be asked for: the running statistics from opset 14
 * (training_mode); the training outputs of opsets 7 to 13 (saved mean and variance whose meaning
 * the spec leaves to the backend) are refused */
static TSO_NN_CHECK(check_batch_norm) {
    if (n->opset < 14)
        for (int i = 1; i < n->n_out; i++)
            if (n->out[i] >= 0)
                return tso_fail(n, TS_ERR_UNSUPPORTED,
                                "the training outputs (mean, var, saved_mean, saved_var) of opset "
                                "%d are not supported",
                                n->opset);
    if (n->opset >= 14 && !tso_attr_int(n, "training_mode", 0) && n->n_out > 1)
        for (int i = 1; i < n->n_out; i++)
            if (n->out[i] >= 0)
                return tso_fail(n, TS_ERR_FORMAT,
                                "running_mean / running_var need training_mode=1");
    return true;
}

/* training: batch statistics (the variance without correction) normalise x, and the running
 * statistics move toward them: running * momentum + batch * (1 - momentum) */
static bool batch_norm_training(const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                                double eps, double momentum, bool fused) {
    ts_tensor *x = in[0];
    ts_dims d = dims_from(1, ts_ndim(x));
    d.d[0] = 0; /* every dim but the channels: 0, 2, 3, ... */
    const bool stats = tso_nn_wants(n, 1) || tso_nn_wants(n, 2);
    ts_tensor *mean = NULL, *var = NULL;
    if (stats || !fused) mean = ts_mean_dims(x, d, true), var = ts_var_dims(x, d, true, 0);
    if (fused) { /* ts_batch_norm in training, without running statistics: the norm selector's */
        ts_shape s = ts_shape_of(x);
        ts_tensor *x3 = s.ndim > 4 ? ts_reshape(x, TS_SHAPE(s.dims[0], s.dims[1], -1)) : x;
        /* no running statistics here (updated below): the momentum is unused; ONNX's momentum
         * weighs the running value, PyTorch's the batch's */
        ts_tensor *y = ts_batch_norm(x3, NULL, NULL, in[1], in[2], true, 1 - momentum, eps);
        out[0] = y && s.ndim > 4 ? ts_reshape(y, s) : y;
    } else {
        out[0] = normalize(x, mean, var, channel_param(in[1], x, false),
                           channel_param(in[2], x, false), eps);
    }
    for (int i = 1; i <= 2 && out[0]; i++) {
        if (!tso_nn_wants(n, i)) continue;
        ts_tensor *batch = ts_reshape(i == 1 ? mean : var, ts_shape_of(in[2 + i]));
        ts_tensor *run = ts_mul_scalar(in[2 + i], momentum);
        out[i] = batch ? ts_add(run, ts_mul_scalar(ts_to_dtype(batch, ts_dtype_of(in[2 + i])),
                                                   1 - momentum))
                       : NULL;
        if (!out[i]) return tso_fail_pending(n);
    }
    return out[0] || tso_fail_pending(n);
}

static TSO_NN_RUN(run_batch_norm) {
    (void)c;
    ts_tensor *x = in[0];
    if (ts_ndim(x) < 2)
        return tso_fail(n, TS_ERR_SHAPE, "expected an input [N, C, ...], got %s", tsi_desc(x));
    double eps = tso_attr_float(n, "epsilon", 1e-5f);
    double momentum = tso_attr_float(n, "momentum", 0.9f);
    bool training = n->opset >= 14  ? tso_attr_int(n, "training_mode", 0) != 0
                    : n->opset <= 6 ? tso_attr_int(n, "is_test", 0) == 0
                                    : false;
    bool per_act = n->opset < 9 && tso_attr_int(n, "spatial", 1) == 0;
    ts_dtype dt = ts_dtype_of(x);
    bool same = true;
    for (int i = 1; i < 5; i++) same &= ts_dtype_of(in[i]) == dt && ts_ndim(in[i]) == 1;
    if (training) { /* the fused kernel takes scale and bias of x's dtype, two values a channel
                       or more (PyTorch refuses one; ONNX normalises it to the bias) */
        bool fused = eps > 0 && ts_size(x, 1) > 0 && ts_numel(x) >= 2 * ts_size(x, 1);
        for (int i = 1; i < 3; i++) fused &= ts_dtype_of(in[i]) == dt && ts_ndim(in[i]) == 1;
        return batch_norm_training(n, in, out, eps, momentum, fused);
    }
    if (!per_act && same && eps > 0 && ts_ndim(x) >= 2) {
        /* Tessera's fused kernel: [N, C], [N, C, L] or [N, C, H, W] */
        ts_shape s = ts_shape_of(x);
        ts_tensor *x3 = s.ndim > 4 ? ts_reshape(x, TS_SHAPE(s.dims[0], s.dims[1], -1)) : x;
        /* inference: the running statistics are read, never moved (momentum unused) */
        ts_tensor *y = ts_batch_norm(x3, in[3], in[4], in[1], in[2], false, 1 - momentum, eps);
        TSO_DONE(y && s.ndim > 4 ? ts_reshape(y, s) : y);
    }
    TSO_DONE(normalize(x, channel_param(in[3], x, per_act), channel_param(in[4], x, per_act),
                       channel_param(in[1], x, per_act), channel_param(in[2], x, per_act), eps));
}

static TSO_NN_RUN(run_instance_norm) {
    (void)c;
    ts_tensor *x = in[0];
    if (ts_ndim(x) < 3)
        return tso_fail(n, TS_ERR_SHAPE, "expected an input [N, C, D1, ...], got %s", tsi_desc(x));
    ts_dims d = dims_from(2, ts_ndim(x));
    ts_tensor *mean = ts_mean_dims(x, d, true), *var = ts_var_dims(x, d, true, 0);
    TSO_DONE(normalize(x, mean, var, channel_param(in[1], x, false), channel_param(in[2], x, false),
                       tso_attr_float(n, "epsilon", 1e-5f)));
}

static TSO_NN_CHECK(check_layer_norm) {
    ts_dtype st = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "stash_type", 1));
    if (!ts_dtype_is_floating(st) || st == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "stash_type %lld is not a floating type Tessera has",
                        (long long)tso_attr_int(n, "stash_type", 1));
    return true;
}

/* LayerNormalization (opset 17): the dims from axis on normalised in the stash type; Mean and
 * InvStdDev (optional) keep the normalised dims as ones */
static TSO_NN_RUN(run_layer_norm) {
    (void)c;
    ts_tensor *x = in[0], *scale = in[1], *bias = tso_nn_opt(n, in, 2);
    int rank = ts_ndim(x);
    int axis = norm_axis(n, tso_attr_int(n, "axis", -1), rank);
    if (axis < 0) return false;
    double eps = tso_attr_float(n, "epsilon", 1e-5f);
    ts_dtype dt = ts_dtype_of(x),
             st = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "stash_type", 1));
    ts_shape ns = {.ndim = rank - axis};
    for (int i = axis; i < rank; i++) ns.dims[i - axis] = ts_size(x, i);
    bool stats = tso_nn_wants(n, 1) || tso_nn_wants(n, 2);
    if (!stats && st == dt && eps > 0 && tsi_shape_equal(ts_shape_of(scale), ns) &&
        (!bias || tsi_shape_equal(ts_shape_of(bias), ns)) && ts_dtype_of(scale) == dt &&
        (!bias || ts_dtype_of(bias) == dt))
        TSO_DONE(ts_layer_norm(x, ns, scale, bias, eps)); /* Tessera's fused kernel */
    ts_dims d = dims_from(axis, rank);
    ts_tensor *xs = st == dt ? x : ts_to_dtype(x, st);
    ts_tensor *mean = ts_mean_dims(xs, d, true);
    ts_tensor *dev = ts_sub(xs, mean);
    ts_tensor *inv = ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_mul(dev, dev), d, true), eps));
    ts_tensor *y = ts_mul(dev, inv);
    if (y && st != dt) y = ts_to_dtype(y, dt);
    if (y) y = ts_mul(y, scale);
    if (y && bias) y = ts_add(y, bias);
    out[0] = y;
    if (tso_nn_wants(n, 1)) out[1] = mean;
    if (tso_nn_wants(n, 2)) out[2] = inv;
    return (out[0] && (!tso_nn_wants(n, 1) || out[1]) && (!tso_nn_wants(n, 2) || out[2])) ||
           tso_fail_pending(n);
}

static TSO_NN_CHECK(check_lrn) {
    if (tso_attr_int(n, "size", 0) < 1)
        return tso_fail(n, TS_ERR_FORMAT, "size must be a positive integer");
    return true;
}

/* LRN: x / (bias + alpha / size * sum of x^2 over the channels c - (size-1)/2 .. c + size/2)^beta
 */
static TSO_NN_RUN(run_lrn) {
    (void)c;
    ts_tensor *x = in[0];
    if (ts_ndim(x) < 3)
        return tso_fail(n, TS_ERR_SHAPE, "expected an input [N, C, D1, ...], got %s", tsi_desc(x));
    int64_t size = tso_attr_int(n, "size", 1), ch = ts_size(x, 1);
    double alpha = tso_attr_float(n, "alpha", 1e-4f), beta = tso_attr_float(n, "beta", 0.75f);
    double bias = tso_attr_float(n, "bias", 1.0f);
    ts_tensor *sq = tsi_pad_constant_dim(ts_mul(x, x), 1, (size - 1) / 2, size / 2, 0);
    ts_tensor *sum = NULL;
    for (int64_t j = 0; sq && j < size; j++) {
        ts_tensor *part = ts_narrow(sq, 1, j, ch);
        sum = !part ? NULL : sum ? ts_add(sum, part) : part;
        if (!sum) break;
    }
    ts_tensor *den =
        sum ? ts_pow_scalar(ts_add_scalar(ts_mul_scalar(sum, alpha / (double)size), bias), beta)
            : NULL;
    TSO_DONE(den ? ts_div(x, den) : NULL);
}

/* MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over axes (default
 * 0, 2, 3), ONNX's function body */
static TSO_NN_RUN(run_mvn) {
    (void)c;
    ts_tensor *x = in[0];
    int rank = ts_ndim(x);
    const int64_t *ax;
    int na = tso_attr_ints(n, "axes", &ax);
    const int64_t def[3] = {0, 2, 3};
    if (na < 0) ax = def, na = 3;
    if (na > rank) return tso_fail(n, TS_ERR_ARG, "%d axes for rank %d", na, rank);
    ts_dims d = {.n = na};
    for (int i = 0; i < na; i++)
        if ((d.d[i] = norm_axis(n, ax[i], rank)) < 0) return false;
    ts_tensor *mean = ts_mean_dims(x, d, true);
    ts_tensor *var = ts_sub(ts_mean_dims(ts_mul(x, x), d, true), ts_mul(mean, mean));
    TSO_DONE(ts_div(ts_sub(x, mean), ts_add_scalar(ts_sqrt(var), 1e-9)));
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_nn[] = {
    {"Gemm", 1, run_gemm, NULL, false},
    {"MatMul", 1, run_matmul, NULL, false},
    {"Softmax", 1, run_softmax1, NULL, false},
    {"Softmax", 13, run_softmax13, NULL, false},
    {"LogSoftmax", 1, run_log_softmax1, NULL, false},
    {"LogSoftmax", 13, run_log_softmax13, NULL, false},
    {"Hardmax", 1, run_hardmax1, NULL, false},
    {"Hardmax", 13, run_hardmax13, NULL, false},
    {"BatchNormalization", 1, run_batch_norm, check_batch_norm, false},
    {"InstanceNormalization", 1, run_instance_norm, NULL, false},
    {"LayerNormalization", 17, run_layer_norm, check_layer_norm, false},
    {"LRN", 1, run_lrn, check_lrn, false},
    {"MeanVarianceNormalization", 9, run_mvn, NULL, false},
    {"Conv", 1, tso_nn_run_conv, tso_nn_check_conv, false},
    {"ConvTranspose", 1, tso_nn_run_conv_transpose, tso_nn_check_conv_transpose, false},
    {"MaxPool", 1, tso_nn_run_max_pool, tso_nn_check_max_pool, false},
    {"AveragePool", 1, tso_nn_run_avg_pool, tso_nn_check_avg_pool, false},
    {"LpPool", 1, tso_nn_run_lp_pool, tso_nn_check_lp_pool, false},
    {"GlobalAveragePool", 1, tso_nn_run_global_avg_pool, NULL, false},
    {"GlobalMaxPool", 1, tso_nn_run_global_max_pool, NULL, false},
    {"GlobalLpPool", 1, tso_nn_run_global_lp_pool, NULL, false},
    {"Resize", 10, tso_nn_run_resize10, tso_nn_check_resize, false},
    {"Resize", 11, tso_nn_run_resize11, tso_nn_check_resize, false},
    {"Upsample", 7, tso_nn_run_upsample7, tso_nn_check_upsample, false},
    {"Upsample", 9, tso_nn_run_upsample9, tso_nn_check_upsample, false},
    {"RNN", 1, tso_nn_run_recurrent, tso_nn_check_rnn, false},
    {"GRU", 1, tso_nn_run_recurrent, tso_nn_check_rnn, false},
    {"LSTM", 1, tso_nn_run_recurrent, tso_nn_check_rnn, false},
    {"Einsum", 12, tso_nn_run_einsum, tso_nn_check_einsum, false},
    {NULL, 0, NULL, NULL, false},
};
