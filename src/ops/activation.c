/* activation.c — issue 52's activations (torch.nn.functional's elu, celu, selu, leaky_relu,
 * hardtanh, relu6, hardshrink, softshrink, threshold, logsigmoid, mish, hardsigmoid, hardswish and
 * their in-place forms: one unary kernel op each, kernel_math_act.h; tanhshrink, softsign, glu,
 * prelu, softmin: compositions of differentiable ops, as PyTorch composes or derives them).
 * PyTorch's argument checks and messages; the gradients are elementwise_grad_act.c's. */
#include "amp/autocast.h"
#include "ops/elementwise.h"

/* the kernel op u with numbers p0, p1, traced with the user's numbers */
static ts_tensor *act(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1,
                      bool inplace, const double *nums, int n_nums) {
    return tsi_unary_param(op, u, t, p0, p1, inplace, nums, n_nums);
}

/* ------------------------------------------------------------------ the elu family */
ts_tensor *ts_elu(ts_tensor *t, double alpha) {
    return act("elu", TS_U_ELU, t, alpha, 1, false, &alpha, 1);
}
ts_tensor *ts_elu_(ts_tensor *t, double alpha) {
    return act("elu_", TS_U_ELU, t, alpha, 1, true, &alpha, 1);
}

/* celu(x, alpha) = elu with the input scaled by 1 / alpha */
static ts_tensor *celu_op(const char *op, ts_tensor *t, double alpha, bool inplace) {
    tsi_init();
    if (alpha == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: ZeroDivisionError: alpha cannot be 0 for CELU", op),
               NULL;
    return act(op, TS_U_ELU, t, alpha, 1 / alpha, inplace, &alpha, 1);
}
ts_tensor *ts_celu(ts_tensor *t, double alpha) { return celu_op("celu", t, alpha, false); }
ts_tensor *ts_celu_(ts_tensor *t, double alpha) { return celu_op("celu_", t, alpha, true); }

ts_tensor *ts_selu(ts_tensor *t) { return act("selu", TS_U_SELU, t, 0, 0, false, NULL, 0); }
ts_tensor *ts_selu_(ts_tensor *t) { return act("selu_", TS_U_SELU, t, 0, 0, true, NULL, 0); }

/* ------------------------------------------------------------------ leaky_relu */
/* x > 0 ? x : x * negative_slope, floating dtypes (PyTorch has no integer kernel); the gradient
 * takes the slope at 0 (PyTorch's leaky_relu_backward) */
ts_tensor *ts_leaky_relu(ts_tensor *t, double negative_slope) {
    return act("leaky_relu", TS_U_LEAKY_RELU, t, negative_slope, 0, false, &negative_slope, 1);
}
ts_tensor *ts_leaky_relu_(ts_tensor *t, double negative_slope) {
    return act("leaky_relu_", TS_U_LEAKY_RELU, t, negative_slope, 0, true, &negative_slope, 1);
}

/* ------------------------------------------------------------------ hardtanh, relu6, threshold */
/* Integer tensors (PyTorch takes them): the numbers become the dtype's integers, as c10's
 * Scalar::to<T>, refused when they do not fit. */
static bool int_fits(ts_dtype d, double v) {
    switch (d) {
    case TS_I8:
        return v >= -128.0 && v <= 127.0;
    case TS_I16:
        return v >= -32768.0 && v <= 32767.0;
    case TS_I32:
        return v >= -2147483648.0 && v <= 2147483647.0;
    case TS_I64:
        return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case TS_U8:
        return v >= 0.0 && v <= 255.0;
    case TS_U16:
        return v >= 0.0 && v <= 65535.0;
    case TS_U32:
        return v >= 0.0 && v <= 4294967295.0;
    case TS_U64:
        return v >= 0.0 && v < 18446744073709551616.0;
    default:
        return false;
    }
}

static bool not_bool(const char *op, const char *torch_name, ts_tensor *t) {
    if (t->dtype != TS_BOOL) return true;
    return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s\" not implemented for 'Bool' (input: %s)", op,
                         torch_name, tsi_desc(t)),
           false;
}

static ts_tensor *hardtanh_op(const char *op, ts_tensor *t, double lo, double hi, bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (lo > hi)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: min_val cannot be greater than max_val (min_val %g, max_val %g)",
                             op, lo, hi),
               NULL;
    if (t->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Bool inputs not supported for hardtanh (input: %s)",
                             op, tsi_desc(t)),
               NULL;
    const double nums[2] = {lo, hi};
    if (tsi_is_float(t->dtype)) return act(op, TS_U_HARDTANH, t, lo, hi, inplace, nums, 2);
    /* integers: clamp to the bounds as integers (c10 truncates; an unsigned dtype saturates a
     * negative bound at 0, as PyTorch's kernel sees it); no gradient to record */
    const double l = trunc(lo), h = trunc(hi);
    return inplace ? ts_clamp_(t, l, h) : ts_clamp(t, l, h);
}
ts_tensor *ts_hardtanh(ts_tensor *t, double min_val, double max_val) {
    return hardtanh_op("hardtanh", t, min_val, max_val, false);
}
ts_tensor *ts_hardtanh_(ts_tensor *t, double min_val, double max_val) {
    return hardtanh_op("hardtanh_", t, min_val, max_val, true);
}
ts_tensor *ts_relu6(ts_tensor *t) { return hardtanh_op("relu6", t, 0, 6, false); }
ts_tensor *ts_relu6_(ts_tensor *t) { return hardtanh_op("relu6_", t, 0, 6, true); }

static ts_tensor *threshold_op(const char *op, ts_tensor *t, double th, double v, bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !not_bool(op, "threshold_cpu", t)) return NULL;
    const double nums[2] = {th, v};
    if (tsi_is_float(t->dtype)) return act(op, TS_U_THRESHOLD, t, th, v, inplace, nums, 2);
    const double ti = trunc(th), vi = trunc(v);
    if (!int_fits(t->dtype, ti) || !int_fits(t->dtype, vi))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: value cannot be converted to type %s without overflow "
                             "(threshold %g, value %g, input: %s)",
                             op, ts_dtype_name(t->dtype), th, v, tsi_desc(t)),
               NULL;
    ts_scope_begin();
    ts_tensor *mask = ts_le_scalar(t, ti);
    ts_tensor *y = inplace ? ts_masked_fill_(t, mask, vi) : ts_masked_fill(t, mask, vi);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}
ts_tensor *ts_threshold(ts_tensor *t, double threshold, double value) {
    return threshold_op("threshold", t, threshold, value, false);
}
ts_tensor *ts_threshold_(ts_tensor *t, double threshold, double value) {
    return threshold_op("threshold_", t, threshold, value, true);
}

/* ------------------------------------------------------------------ shrinks */
ts_tensor *ts_hardshrink(ts_tensor *t, double lambd) {
    return act("hardshrink", TS_U_HARDSHRINK, t, lambd, 0, false, &lambd, 1);
}

/* the largest finite value of a float dtype (softshrink's bound on lambd) */
static double float_max(ts_dtype d) {
    switch (d) {
    case TS_F16:
        return 65504.0;
    case TS_BF16:
    case TS_F32:
        return 3.40282346638528859811704183484516925440e38;
    default:
        return 1.79769313486231570815e308;
    }
}

ts_tensor *ts_softshrink(ts_tensor *t, double lambd) {
    tsi_init();
    if (!tsi_check_input("softshrink", t, "input")) return NULL;
    const double m = float_max(t->dtype);
    if (tsi_is_float(t->dtype) && !(lambd >= 0 && lambd <= m))
        return tsi_error_set(TS_ERR_ARG,
                             "softshrink: lambda must be in range [0, %g] for input dtype %s, but "
                             "found %g",
                             m, tsi_torch_scalar_name(t->dtype), lambd),
               NULL;
    return act("softshrink", TS_U_SOFTSHRINK, t, lambd, 0, false, &lambd, 1);
}

/* ------------------------------------------------------------------ smooth ones */
ts_tensor *ts_logsigmoid(ts_tensor *t) {
    return act("logsigmoid", TS_U_LOGSIGMOID, t, 0, 0, false, NULL, 0);
}
ts_tensor *ts_mish(ts_tensor *t) { return act("mish", TS_U_MISH, t, 0, 0, false, NULL, 0); }
ts_tensor *ts_mish_(ts_tensor *t) { return act("mish_", TS_U_MISH, t, 0, 0, true, NULL, 0); }
ts_tensor *ts_hardsigmoid(ts_tensor *t) {
    return act("hardsigmoid", TS_U_HARDSIGMOID, t, 0, 0, false, NULL, 0);
}
ts_tensor *ts_hardsigmoid_(ts_tensor *t) {
    return act("hardsigmoid_", TS_U_HARDSIGMOID, t, 0, 0, true, NULL, 0);
}
ts_tensor *ts_hardswish(ts_tensor *t) {
    return act("hardswish", TS_U_HARDSWISH, t, 0, 0, false, NULL, 0);
}
ts_tensor *ts_hardswish_(ts_tensor *t) {
    return act("hardswish_", TS_U_HARDSWISH, t, 0, 0, true, NULL, 0);
}

/* ------------------------------------------------------------------ compositions */
/* x - tanh(x): PyTorch's own composition (integers give float32) */
ts_tensor *ts_tanhshrink(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("tanhshrink", t, "input") || !not_bool("tanhshrink", "sub", t))
        return NULL;
    ts_scope_begin();
    ts_tensor *y = ts_keep(ts_sub(t, ts_tanh(t)));
    ts_scope_end();
    return y;
}

/* softsign: one kernel (TS_U_SOFTSIGN); integers give float32, bool is refused as abs refuses it */
ts_tensor *ts_softsign(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("softsign", t, "input") || !not_bool("softsign", "abs_cpu", t))
        return NULL;
    return act("softsign", TS_U_SOFTSIGN, t, 0, 0, false, NULL, 0);
}

static bool float_input(const char *op, const char *torch_name, ts_tensor *t) {
    if (tsi_is_float(t->dtype)) return true;
    return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s\" not implemented for '%s' (input: %s)", op,
                         torch_name, tsi_torch_scalar_name(t->dtype), tsi_desc(t)),
           false;
}

/* glu: the first half of dim times the sigmoid of the second */
ts_tensor *ts_glu(ts_tensor *t, int dim) {
    tsi_init();
    if (!tsi_check_input("glu", t, "input")) return NULL;
    if (t->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "glu: glu does not support scalars because halving size must be even"),
               NULL;
    const int d = tsi_wrap_dim("glu", dim, t->shape.ndim);
    if (d < 0 || !float_input("glu", "glu_cpu", t)) return NULL;
    const int64_t n = t->shape.dims[d];
    if (n % 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "glu: Halving dimension must be even, but dimension %d is size %lld",
                             d, (long long)n),
               NULL;
    ts_scope_begin();
    ts_tensor *a = ts_narrow(t, d, 0, n / 2), *b = ts_narrow(t, d, n / 2, n / 2);
    ts_tensor *y = ts_keep(ts_mul(a, ts_sigmoid(b)));
    ts_scope_end();
    return y;
}

/* prelu: x > 0 ? x : w x, w one slope or one per channel (dim 1; a 0-/1-dim input has one) */
static ts_tensor *prelu_body(ts_tensor *t, ts_tensor *w) {
    tsi_init();
    if (!tsi_check_input("prelu", t, "input") || !tsi_check_input("prelu", w, "weight") ||
        !float_input("prelu", "prelu_cpu", t))
        return NULL;
    if (w->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "prelu: Type promoting not supported. Got %s and %s (input: %s, "
                             "weight: %s)",
                             tsi_torch_scalar_name(t->dtype), tsi_torch_scalar_name(w->dtype),
                             tsi_desc(t), tsi_desc(w)),
               NULL;
    ts_tensor *const both[2] = {t, w};
    ts_device dev;
    if (!tsi_same_device("prelu", both, 2, true, &dev)) return NULL;
    if (w->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim "
                             "= %d",
                             w->shape.ndim),
               NULL;
    const int64_t nw = tsi_numel(w->shape), c = t->shape.ndim >= 2 ? t->shape.dims[1] : 1;
    if (nw != 1 && nw != c)
        return tsi_error_set(TS_ERR_SHAPE,
                             "prelu: Mismatch of parameter numbers and input channel size. Found "
                             "parameter numbers = %lld and channel size = %lld.",
                             (long long)nw, (long long)c),
               NULL;
    ts_shape ws = {0}; /* one slope: 0-dim, so a 0-dim input stays 0-dim */
    if (nw != 1 || (w->shape.ndim == 1 && t->shape.ndim >= 2)) {
        ws.ndim = t->shape.ndim - 1; /* [C, 1, ..., 1] against dims 1.. */
        ws.dims[0] = nw;
        for (int i = 1; i < ws.ndim; i++) ws.dims[i] = 1;
    }
    ts_scope_begin();
    ts_tensor *wr = ts_reshape(w, ws);
    ts_tensor *y = ts_keep(ts_where(ts_gt_scalar(t, 0), t, ts_mul(wr, t)));
    ts_scope_end();
    return y;
}

/* prelu is on PyTorch's lower_precision_fp lists (CUDA's and the CPU's) */
ts_tensor *ts_prelu(ts_tensor *t, ts_tensor *w) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "prelu", &t, &w);
    return tsi_autocast_exit(&ac, prelu_body(t, w));
}

/* softmin = softmax of -x */
ts_tensor *ts_softmin(ts_tensor *t, int dim) {
    tsi_init();
    if (!tsi_check_input("softmin", t, "input")) return NULL;
    ts_scope_begin();
    ts_tensor *y = ts_keep(ts_softmax(ts_neg(t), dim));
    ts_scope_end();
    return y;
}
