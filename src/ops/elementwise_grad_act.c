/* elementwise_grad_act.c — the names and backward formulas of issue 52's activation kernels
 * (activation.c, kernel_math_act.h): PyTorch's derivatives.yaml and its CPU backward kernels,
 * the kink points included (each comparison as PyTorch writes it, so a NaN input takes the same
 * branch), written with public ops. Every one saves its input (a clone of it in place). */
#include <string.h>

#include "backend/kernel_math.h" /* TS_SELU_ALPHA, TS_SELU_SCALE */
#include "ops/elementwise_grad.h"

/* every activation of kernel_math_act.h has its name and backward here (backend.h's TS_U_COUNT) */
_Static_assert(TS_U_COUNT == 82, "a ts_unary_op was added or removed: an activation needs its "
                                 "case in both switches here; then update the count");

bool tsi_ew_act_is(ts_unary_op u) { return u >= TS_U_ELU && u <= TS_U_SOFTSIGN; }

const char *tsi_ew_act_name(const char *op, ts_unary_op u) {
    const size_t len = strlen(op);
    const bool inplace = len > 0 && op[len - 1] == '_'; /* elu_, celu_, selu_, threshold_ */
    switch (u) {
    case TS_U_ELU:
        if (strncmp(op, "celu", 4) == 0) return inplace ? "CeluBackward1" : "CeluBackward0";
        return inplace ? "EluBackward1" : "EluBackward0";
    case TS_U_SELU: /* selu is elu with its constants */
        return inplace ? "EluBackward1" : "EluBackward0";
    case TS_U_HARDTANH:
        return "HardtanhBackward0";
    case TS_U_HARDSHRINK:
        return "HardshrinkBackward0";
    case TS_U_SOFTSHRINK:
        return "SoftshrinkBackward0";
    case TS_U_THRESHOLD:
        return inplace ? "ThresholdBackward1" : "ThresholdBackward0";
    case TS_U_LOGSIGMOID:
        return "LogSigmoidBackward0";
    case TS_U_MISH:
        return "MishBackward0";
    case TS_U_HARDSIGMOID:
        return "HardsigmoidBackward0";
    case TS_U_HARDSWISH:
        return "HardswishBackward0";
    case TS_U_LEAKY_RELU:
        return inplace ? "LeakyReluBackward1" : "LeakyReluBackward0";
    default:
        return NULL;
    }
}

/* g where keep, else 0 */
static ts_tensor *pass_where(ts_tensor *keep, ts_tensor *g) {
    return ts_where(keep, g, tsi_ew_grad_zero(g));
}

/* The zero of a gradient that is 0 where x is past a kink. Under create_graph, a zero with x's
 * history and derivative 0 (PyTorch's hardtanh_backward, threshold_backward, hardshrink_backward
 * and softshrink_backward are differentiable in x, their derivative zeros_like: a second-order
 * gradient of x is zeros, not None): |sign(x)| 0, +0 wherever x is not NaN, and these kinks never
 * select a NaN x. Otherwise a plain 0-dim zero. */
static ts_tensor *kink_zero(ts_tensor *g, ts_tensor *x) {
    if (!tsi_create_graph_active()) return tsi_ew_grad_zero(g);
    ts_tensor *z = ts_mul_scalar(ts_abs(ts_sign(x)), 0);
    return z && z->dtype != g->dtype ? ts_to_dtype(z, g->dtype) : z;
}

/* g where x is outside [-l, l] (hardshrink_backward and softshrink's) */
static ts_tensor *shrink_grad(ts_tensor *g, ts_tensor *x, double l) {
    ts_tensor *inside = ts_logical_and(ts_ge_scalar(x, -l), ts_le_scalar(x, l));
    return ts_where(inside, kink_zero(g, x), g);
}

/* elu_backward (is_result false): x <= 0 ? g * in_scale * neg * e^(x in_scale) : g * pos */
static ts_tensor *elu_grad(ts_tensor *g, ts_tensor *x, double neg, double in_scale, double pos) {
    ts_tensor *e = ts_mul_scalar(ts_exp(ts_mul_scalar(x, in_scale)), in_scale * neg);
    return ts_where(ts_le_scalar(x, 0), ts_mul(g, e), pos == 1 ? g : ts_mul_scalar(g, pos));
}

ts_tensor *tsi_ew_act_backward(ts_unary_op u, ts_tensor *g, ts_tensor *x, double p0, double p1) {
    switch (u) {
    case TS_U_ELU:
        return elu_grad(g, x, p0, p1, 1);
    case TS_U_SELU:
        return elu_grad(g, x, TS_SELU_ALPHA * TS_SELU_SCALE, 1, TS_SELU_SCALE);
    case TS_U_HARDTANH: /* 0 at and beyond the bounds; NaN passes g */
        return ts_where(ts_logical_or(ts_le_scalar(x, p0), ts_ge_scalar(x, p1)), kink_zero(g, x),
                        g);
    case TS_U_HARDSHRINK:
    case TS_U_SOFTSHRINK:
        return shrink_grad(g, x, p0);
    case TS_U_THRESHOLD: /* threshold_backward: 0 where x <= threshold */
        return ts_where(ts_le_scalar(x, p0), kink_zero(g, x), g);
    case TS_U_LOGSIGMOID: /* sigmoid(-x), PyTorch's z / (1 + z) forms on either side */
        return ts_mul(g, ts_sigmoid(ts_neg(x)));
    case TS_U_MISH: { /* t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) unthresholded */
        ts_tensor *t = ts_tanh(ts_log1p(ts_exp(x)));
        ts_tensor *d = ts_add(t, ts_mul(ts_mul(x, ts_sigmoid(x)), ts_rsub_scalar(ts_square(t), 1)));
        return ts_mul(g, d);
    }
    case TS_U_HARDSIGMOID: /* g / 6 on (-3, 3), else 0 (NaN: 0) */
        return pass_where(ts_logical_and(ts_gt_scalar(x, -3), ts_lt_scalar(x, 3)),
                          ts_div_scalar(g, 6));
    case TS_U_HARDSWISH: { /* x <= -3: 0; x < 3: g (x / 3 + 1/2); else (and NaN) g */
        ts_tensor *mid = ts_mul(g, ts_add_scalar(ts_div_scalar(x, 3), 0.5));
        ts_tensor *r = ts_where(ts_lt_scalar(x, 3), mid, g);
        return ts_where(ts_le_scalar(x, -3), tsi_ew_grad_zero(g), r);
    }
    case TS_U_LEAKY_RELU: { /* leaky_relu_backward: x > 0 ? g : g * slope (0 and NaN: slope) */
        ts_tensor *pos = ts_gt_scalar(x, 0);
        /* under create_graph x's history joins with derivative 0 (PyTorch's self: zeros_like),
         * through the branch that only a number x takes */
        ts_tensor *gp = tsi_create_graph_active() ? ts_add(g, kink_zero(g, x)) : g;
        return ts_where(pos, gp, ts_mul_scalar(g, p0));
    }
    case TS_U_SOFTSIGN: { /* 1 / (1 + |x|)^2 (PyTorch's composition gives the same function) */
        ts_tensor *d = ts_add_scalar(ts_abs(x), 1);
        return ts_div(g, ts_mul(d, d));
    }
    default:
        return NULL;
    }
}
