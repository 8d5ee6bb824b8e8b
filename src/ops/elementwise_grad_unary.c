/* elementwise_grad_unary.c — backward of the unary elementwise ops and clamp (PyTorch's
 * derivatives.yaml formulas): public ops, and the backend's fused kernels for the activations. */
#include <string.h>

#include "ops/elementwise_grad.h"

_Static_assert(TS_U_COUNT == 82,
               "a ts_unary_op was added or removed: give it what it saves and its "
               "backward in the two switches here (an activation: "
               "elementwise_grad_act.c); then update the count");

/* unary_ops.def's grad_fn column */
static const char *const grad_names[] = {
#define X(ID, name, front, dtype, grad_fn, ...) grad_fn,
#include "backend/unary_ops.def"
#undef X
};
_Static_assert(sizeof grad_names / sizeof *grad_names == TS_U_COUNT, "one grad_fn per unary op");

const char *tsi_ew_unary_name(const char *op, ts_unary_op u) {
    if (u == TS_U_CLAMP) { /* torch.clamp (either bound optional) is ClampBackward1 */
        if (strcmp(op, "clamp_min") == 0) return "ClampMinBackward0";
        if (strcmp(op, "clamp_max") == 0) return "ClampMaxBackward0";
        return "ClampBackward1";
    }
    if ((unsigned)u < TS_U_COUNT && grad_names[u]) return grad_names[u];
    return tsi_ew_act_name(op, u);
}

/* Where the formula can use the output (PyTorch's choice), it does: no extra memory for the input
 * and in-place forms need no clone. */
unsigned tsi_ew_unary_saves(ts_unary_op u) {
    switch (u) {
    case TS_U_EXP:
    case TS_U_SQRT:
    case TS_U_RSQRT:
    case TS_U_TAN:
    case TS_U_TANH:
    case TS_U_SIGMOID:
    case TS_U_RELU:
    case TS_U_RECIPROCAL:
    case TS_U_EXPM1:
    case TS_U_EXP2:
    case TS_U_ERFINV:
        return TSI_EW_SAVE_OUT;
    case TS_U_I0E:
    case TS_U_I1:
    case TS_U_I1E:
        return TSI_EW_SAVE_A | TSI_EW_SAVE_OUT;
    case TS_U_ABS:
    case TS_U_LOG:
    case TS_U_LOG1P:
    case TS_U_SIN:
    case TS_U_COS:
    case TS_U_ASIN:
    case TS_U_ACOS:
    case TS_U_ATAN:
    case TS_U_SINH:
    case TS_U_COSH:
    case TS_U_ASINH:
    case TS_U_ACOSH:
    case TS_U_ATANH:
    case TS_U_ERF:
    case TS_U_GELU:
    case TS_U_SILU:
    case TS_U_SOFTPLUS:
    case TS_U_SQUARE:
    case TS_U_CLAMP:
    case TS_U_LOG2:
    case TS_U_LOG10:
    case TS_U_ERFC:
    case TS_U_LGAMMA:
    case TS_U_DIGAMMA:
    case TS_U_POLYGAMMA:
    case TS_U_I0:
    case TS_U_SINC:
    case TS_U_LOGIT:
    case TS_U_NAN_TO_NUM:
    case TS_U_NEGINF_TO:
    case TS_U_NAN_TO_NUM_SYM:
        return TSI_EW_SAVE_A;
    default:
        return tsi_ew_act_is(u) ? TSI_EW_SAVE_A : 0;
    }
}

/* The fused activation backwards as public ops (kernel_math.h's formulas), for create_graph: they
 * record the gradient's own graph. */
static ts_tensor *composite_grad(ts_binary_op bop, ts_tensor *g, ts_tensor *v) {
    switch (bop) {
    case TS_B_TANH_BWD: /* v = y: 1 - y^2 */
        return ts_mul(g, ts_rsub_scalar(ts_square(v), 1));
    case TS_B_SIGMOID_BWD: /* v = y: y (1 - y) */
        return ts_mul(g, ts_mul(v, ts_rsub_scalar(v, 1)));
    case TS_B_RELU_BWD: /* v = y: 0 where y <= 0 (there y is 0: y * 0 keeps PyTorch's link to
                         * y, whose derivative is 0), else g (NaN included) */
        return ts_where(ts_le_scalar(v, 0), ts_mul_scalar(v, 0), g);
    case TS_B_GELU_BWD: { /* v = x: Phi(x) + x phi(x) */
        ts_tensor *cdf =
            ts_mul_scalar(ts_add_scalar(ts_erf(ts_mul_scalar(v, 0.70710678118654752440)), 1), 0.5);
        ts_tensor *pdf =
            ts_mul_scalar(ts_exp(ts_mul_scalar(ts_square(v), -0.5)), 0.39894228040143267794);
        return ts_mul(g, ts_add(cdf, ts_mul(v, pdf)));
    }
    case TS_B_SILU_BWD: { /* v = x: s (1 + x (1 - s)) */
        ts_tensor *sg = ts_sigmoid(v);
        return ts_mul(g, ts_mul(sg, ts_add_scalar(ts_mul(v, ts_rsub_scalar(sg, 1)), 1)));
    }
    default:
        return tsi_error_set(TS_ERR_UNSUPPORTED, "backward: no composite form of %d", (int)bop),
               NULL;
    }
}

/* bop(g, v) in one pass of the device's binary kernel: the fused activation backwards
 * (TS_B_*_BWD, kernel_math.h) instead of a chain of public ops, each a pass and a temporary. g
 * joins v's dtype and device when it arrives otherwise. Under create_graph, the same formulas as
 * public ops. */
static ts_tensor *fused_grad(const char *op, ts_binary_op bop, ts_tensor *g, ts_tensor *v) {
    if (tsi_create_graph_active()) return composite_grad(bop, g, v);
    ts_tensor *gd = NULL, *gc = NULL, *out = NULL;
    if (!(gd = tsi_to_device(op, g, tsi_device(v))) || !(gc = tsi_cast(op, gd, v->dtype)))
        goto done;
    ts_shape s = v->shape;
    if (!tsi_ew_shape_eq(&gc->shape, &s) && !tsi_broadcast_shapes(op, gc->shape, v->shape, &s))
        goto done;
    ts_tensor *like = tsi_prefers_channels_last(gc) ? gc : v;
    if (!(out = tsi_new_like(op, s, v->dtype, tsi_device(v), like)) || tsi_numel(s) == 0) goto done;
    ts_kview ko, kg, kv;
    tsi_kview_fill(&ko, out);
    if (tsi_ew_shape_eq(&gc->shape, &s))
        tsi_kview_fill(&kg, gc);
    else
        tsi_kview_fill_broadcast(&kg, gc, &s);
    if (tsi_ew_shape_eq(&v->shape, &s))
        tsi_kview_fill(&kv, v);
    else
        tsi_kview_fill_broadcast(&kv, v, &s);
    tsi_be(v)->binary(tsi_be(v), tsi_dev_index(v), bop, &ko, &kg, &kv);
done:
    ts_release(gc);
    ts_release(gd);
    return tsi_own(out);
}

/* g where lo <= x <= hi (inclusive; a NAN bound is absent), else 0: PyTorch's clamp_backward. */
static ts_tensor *clamp_grad(ts_tensor *g, ts_tensor *x, double lo, double hi) {
    ts_tensor *keep = NULL;
    if (!isnan(lo)) keep = ts_ge_scalar(x, lo);
    if (!isnan(hi)) {
        ts_tensor *below = ts_le_scalar(x, hi);
        keep = keep ? ts_logical_and(keep, below) : below;
    }
    return ts_where(keep, g, tsi_ew_grad_zero(g));
}

/* long: one case per unary op, each its derivative in a line or two; split by family it would
 * need a second dispatch on the same enum */
void tsi_ew_unary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *x = NULL, *y = NULL, *r = NULL;
    if (!g || !tsi_node_needs(n, 0)) return;
    const ts_unary_op u = (ts_unary_op)n->ip[0];
    const unsigned saves = tsi_ew_unary_saves(u);
    if ((saves & TSI_EW_SAVE_A) && !(x = tsi_node_saved(n, TSI_EW_SLOT_A))) return;
    if ((saves & TSI_EW_SAVE_OUT) && !(y = tsi_node_saved(n, TSI_EW_SLOT_OUT))) return;
    switch (u) {
    case TS_U_NEG:
        r = ts_neg(g);
        break;
    case TS_U_ABS: /* sign(x): 0 at 0 */
        r = ts_mul(g, ts_sign(x));
        break;
    case TS_U_EXP:
        r = ts_mul(g, y);
        break;
    case TS_U_LOG:
        r = ts_div(g, x);
        break;
    case TS_U_LOG1P:
        r = ts_div(g, ts_add_scalar(x, 1));
        break;
    case TS_U_SQRT:
        r = ts_div(g, ts_mul_scalar(y, 2));
        break;
    case TS_U_RSQRT: /* -0.5 g y^3 */
        r = ts_mul(g, ts_mul_scalar(ts_mul(y, ts_mul(y, y)), -0.5));
        break;
    case TS_U_SIN:
        r = ts_mul(g, ts_cos(x));
        break;
    case TS_U_COS:
        r = ts_mul(g, ts_neg(ts_sin(x)));
        break;
    case TS_U_TAN: /* 1 + y^2 */
        r = ts_mul(g, ts_add_scalar(ts_square(y), 1));
        break;
    case TS_U_ASIN: /* 1 / sqrt(1 - x^2) */
        r = ts_mul(g, ts_rsqrt(ts_rsub_scalar(ts_square(x), 1)));
        break;
    case TS_U_ACOS: /* -1 / sqrt(1 - x^2) */
        r = ts_mul(g, ts_neg(ts_rsqrt(ts_rsub_scalar(ts_square(x), 1))));
        break;
    case TS_U_ATAN: /* 1 / (1 + x^2) */
        r = ts_div(g, ts_add_scalar(ts_square(x), 1));
        break;
    case TS_U_SINH:
        r = ts_mul(g, ts_cosh(x));
        break;
    case TS_U_COSH:
        r = ts_mul(g, ts_sinh(x));
        break;
    case TS_U_ASINH: /* 1 / sqrt(x^2 + 1) */
        r = ts_mul(g, ts_rsqrt(ts_add_scalar(ts_square(x), 1)));
        break;
    case TS_U_ACOSH: /* 1 / sqrt(x^2 - 1) */
        r = ts_mul(g, ts_rsqrt(ts_sub_scalar(ts_square(x), 1)));
        break;
    case TS_U_ATANH: /* 1 / (1 - x^2) */
        r = ts_div(g, ts_rsub_scalar(ts_square(x), 1));
        break;
    case TS_U_ERF: /* 2 / sqrt(pi) e^(-x^2) */
        r = ts_mul(g, ts_mul_scalar(ts_exp(ts_neg(ts_square(x))), 1.12837916709551257390));
        break;
    case TS_U_TANH:
        r = fused_grad("tanh_backward", TS_B_TANH_BWD, g, y);
        break;
    case TS_U_SIGMOID:
        r = fused_grad("sigmoid_backward", TS_B_SIGMOID_BWD, g, y);
        break;
    case TS_U_RELU: /* 0 at 0 (threshold_backward on the result) */
        r = fused_grad("threshold_backward", TS_B_RELU_BWD, g, y);
        break;
    case TS_U_GELU:
        r = fused_grad("gelu_backward", TS_B_GELU_BWD, g, x);
        break;
    case TS_U_SILU:
        r = fused_grad("silu_backward", TS_B_SILU_BWD, g, x);
        break;
    case TS_U_SOFTPLUS: /* beta 1, threshold 20: linear above the threshold */
        r = ts_where(ts_gt_scalar(x, 20), g, ts_mul(g, ts_sigmoid(x)));
        break;
    case TS_U_SIGN:
    case TS_U_FLOOR:
    case TS_U_CEIL:
    case TS_U_ROUND:
        r = ts_zeros_like(g);
        break;
    case TS_U_RECIPROCAL: /* -g y^2 */
        r = ts_mul(g, ts_neg(ts_mul(y, y)));
        break;
    case TS_U_SQUARE:
        r = ts_mul(g, ts_mul_scalar(x, 2));
        break;
    case TS_U_CLAMP:
        r = clamp_grad(g, x, n->p[0], n->p[1]);
        break;
    /* issue 52: PyTorch's derivatives.yaml */
    case TS_U_EXPM1: /* y + 1 */
        r = ts_mul(g, ts_add_scalar(y, 1));
        break;
    case TS_U_EXP2: /* y ln 2 */
        r = ts_mul(g, ts_mul_scalar(y, 0.69314718055994530942));
        break;
    case TS_U_LOG2:
        r = ts_div(g, ts_mul_scalar(x, 0.69314718055994530942));
        break;
    case TS_U_LOG10:
        r = ts_div(g, ts_mul_scalar(x, 2.30258509299404568402));
        break;
    case TS_U_ERFC: /* -2 / sqrt(pi) e^(-x^2) */
        r = ts_mul(g, ts_mul_scalar(ts_exp(ts_neg(ts_square(x))), -1.12837916709551257390));
        break;
    case TS_U_LGAMMA:
        r = ts_mul(g, ts_digamma(x));
        break;
    case TS_U_DIGAMMA:
        r = ts_mul(g, ts_polygamma(1, x));
        break;
    case TS_U_POLYGAMMA:
        r = ts_mul(g, ts_polygamma((int)n->p[0] + 1, x));
        break;
    case TS_U_ERFINV: /* sqrt(pi) / 2 e^(y^2) */
        r = ts_mul(g, ts_mul_scalar(ts_exp(ts_square(y)), 0.88622692545275801365));
        break;
    case TS_U_I0:
        r = ts_mul(g, ts_i1(x));
        break;
    case TS_U_I0E: /* i1e(x) - sgn(x) y */
        r = ts_mul(g, ts_sub(ts_i1e(x), ts_mul(ts_sign(x), y)));
        break;
    case TS_U_I1: /* i0(x) - y / x, 1/2 at 0 */
        r = ts_mul(g, ts_where(ts_eq_scalar(x, 0), ts_full_like(tsi_ew_grad_zero(g), 0.5),
                               ts_sub(ts_i0(x), ts_div(y, x))));
        break;
    case TS_U_I1E: /* i0e(x) - y (sgn(x) + 1 / x), 1/2 at 0 */
        r = ts_mul(g, ts_where(ts_eq_scalar(x, 0), ts_full_like(tsi_ew_grad_zero(g), 0.5),
                               ts_sub(ts_i0e(x), ts_mul(y, ts_add(ts_sign(x), ts_reciprocal(x))))));
        break;
    case TS_U_SINC: { /* (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0 */
        ts_tensor *px = ts_mul_scalar(x, 3.14159265358979323846);
        ts_tensor *d = ts_div(ts_sub(ts_mul(px, ts_cos(px)), ts_sin(px)), ts_mul(px, x));
        r = ts_mul(g, ts_where(ts_eq_scalar(x, 0), tsi_ew_grad_zero(g), d));
        break;
    }
    case TS_U_FRAC:
        r = g;
        break;
    case TS_U_TRUNC:
        r = ts_zeros_like(g);
        break;
    case TS_U_DEG2RAD:
        r = ts_mul_scalar(g, 3.14159265358979323846 / 180);
        break;
    case TS_U_RAD2DEG:
        r = ts_mul_scalar(g, 180 / 3.14159265358979323846);
        break;
    case TS_U_LOGIT: { /* g / (x (1 - x)); 0 outside [eps, 1 - eps], NaN outside [0, 1] */
        const double eps = n->p[0];
        ts_tensor *d = ts_div(g, ts_mul(x, ts_rsub_scalar(x, 1)));
        const double lo = eps < 0 ? 0 : eps, hi = eps < 0 ? 1 : 1 - eps;
        ts_tensor *out = ts_logical_or(ts_lt_scalar(x, lo), ts_gt_scalar(x, hi));
        r = ts_where(out, ts_full_like(tsi_ew_grad_zero(g), eps < 0 ? NAN : 0), d);
        break;
    }
    case TS_U_NAN_TO_NUM: /* g where x is neither NaN nor +inf */
        r = ts_where(ts_logical_and(ts_eq(x, x), ts_ne_scalar(x, INFINITY)), g,
                     tsi_ew_grad_zero(g));
        break;
    case TS_U_NEGINF_TO:
        r = ts_where(ts_eq_scalar(x, -INFINITY), tsi_ew_grad_zero(g), g);
        break;
    case TS_U_NAN_TO_NUM_SYM: /* g where x is finite */
        r = ts_where(ts_isfinite(x), g, tsi_ew_grad_zero(g));
        break;
    default: /* issue 52's activations */
        if (!tsi_ew_act_is(u)) return;
        r = tsi_ew_act_backward(u, g, x, n->p[0], n->p[1]);
        break;
    }
    grad_in[0] = tsi_ew_grad_fit(n, 0, r);
}
