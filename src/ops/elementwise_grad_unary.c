/* elementwise_grad_unary.c — backward of the unary elementwise ops and clamp (PyTorch's
 * derivatives.yaml formulas), computed with public ops. */
#include <string.h>

#include "ops/elementwise_grad.h"

const char *tsi_ew_unary_name(const char *op, ts_unary_op u) {
    switch (u) {
    case TS_U_NEG:
        return "NegBackward0";
    case TS_U_ABS:
        return "AbsBackward0";
    case TS_U_EXP:
        return "ExpBackward0";
    case TS_U_LOG:
        return "LogBackward0";
    case TS_U_LOG1P:
        return "Log1PBackward0";
    case TS_U_SQRT:
        return "SqrtBackward0";
    case TS_U_RSQRT:
        return "RsqrtBackward0";
    case TS_U_SIN:
        return "SinBackward0";
    case TS_U_COS:
        return "CosBackward0";
    case TS_U_TANH:
        return "TanhBackward0";
    case TS_U_SIGMOID:
        return "SigmoidBackward0";
    case TS_U_RELU:
        return "ReluBackward0";
    case TS_U_GELU:
        return "GeluBackward0";
    case TS_U_SILU:
        return "SiluBackward0";
    case TS_U_SOFTPLUS:
        return "SoftplusBackward0";
    case TS_U_SIGN:
        return "SignBackward0";
    case TS_U_FLOOR:
        return "FloorBackward0";
    case TS_U_CEIL:
        return "CeilBackward0";
    case TS_U_ROUND:
        return "RoundBackward0";
    case TS_U_RECIPROCAL:
        return "ReciprocalBackward0";
    case TS_U_SQUARE: /* torch.square is pow(x, 2) */
        return "PowBackward0";
    case TS_U_CLAMP: /* torch.clamp (either bound optional) is ClampBackward1 */
        if (strcmp(op, "clamp_min") == 0) return "ClampMinBackward0";
        if (strcmp(op, "clamp_max") == 0) return "ClampMaxBackward0";
        return "ClampBackward1";
    default:
        return NULL;
    }
}

/* Where the formula can use the output (PyTorch's choice), it does: no extra memory for the input
 * and in-place forms need no clone. */
unsigned tsi_ew_unary_saves(ts_unary_op u) {
    switch (u) {
    case TS_U_EXP:
    case TS_U_SQRT:
    case TS_U_RSQRT:
    case TS_U_TANH:
    case TS_U_SIGMOID:
    case TS_U_RELU:
    case TS_U_RECIPROCAL:
        return TSI_EW_SAVE_OUT;
    case TS_U_ABS:
    case TS_U_LOG:
    case TS_U_LOG1P:
    case TS_U_SIN:
    case TS_U_COS:
    case TS_U_GELU:
    case TS_U_SILU:
    case TS_U_SOFTPLUS:
    case TS_U_SQUARE:
    case TS_U_CLAMP:
        return TSI_EW_SAVE_A;
    default:
        return 0;
    }
}

/* g * (Phi(x) + x * phi(x)), PyTorch's GeluBackward (erf form). No op gives erf, so this runs on
 * the host: one pass over contiguous f32/f64 data on cpu (other devices copy there and back). */
static ts_tensor *gelu_grad(ts_tensor *g, ts_tensor *x) {
    const ts_dtype hd = g->dtype == TS_F64 ? TS_F64 : TS_F32;
    const ts_device cpu = ts_cpu();
    ts_tensor *gh = ts_contiguous(ts_to_dtype(ts_to(g, cpu), hd));
    ts_tensor *xh = ts_contiguous(ts_to_dtype(ts_to(x, cpu), hd));
    ts_tensor *r = gh && xh ? ts_empty(g->shape, (ts_opts){.dtype = hd, .device = cpu}) : NULL;
    if (!r) return NULL;
    const int64_t n = tsi_numel(r->shape);
    const double k_beta = 0.3989422804014327,
                 k_sqrt1_2 = 0.7071067811865476; /* 1/sqrt(2pi), 1/sqrt(2) */
    if (hd == TS_F64) {
        const double *pg = (const double *)gh->storage->data + gh->offset;
        const double *px = (const double *)xh->storage->data + xh->offset;
        double *pr = (double *)r->storage->data + r->offset;
        for (int64_t i = 0; i < n; i++) {
            const double v = px[i];
            const double cdf = 0.5 * (1.0 + erf(v * k_sqrt1_2));
            pr[i] = pg[i] * (cdf + v * k_beta * exp(-0.5 * v * v));
        }
    } else {
        const float *pg = (const float *)gh->storage->data + gh->offset;
        const float *px = (const float *)xh->storage->data + xh->offset;
        float *pr = (float *)r->storage->data + r->offset;
        for (int64_t i = 0; i < n; i++) {
            const double v = px[i];
            const double cdf = 0.5 * (1.0 + erf(v * k_sqrt1_2));
            pr[i] = (float)(pg[i] * (cdf + v * k_beta * exp(-0.5 * v * v)));
        }
    }
    return ts_to_dtype(ts_to(r, tsi_device(g)), g->dtype);
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

void tsi_ew_unary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *x = NULL, *y = NULL, *r = NULL, *s;
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
    case TS_U_TANH:
        r = ts_mul(g, ts_rsub_scalar(ts_mul(y, y), 1));
        break;
    case TS_U_SIGMOID:
        r = ts_mul(g, ts_mul(y, ts_rsub_scalar(y, 1)));
        break;
    case TS_U_RELU: /* 0 at 0 (threshold_backward on the result) */
        r = ts_where(ts_gt_scalar(y, 0), g, tsi_ew_grad_zero(g));
        break;
    case TS_U_GELU:
        r = gelu_grad(g, x);
        break;
    case TS_U_SILU: /* s (1 + x (1 - s)) */
        s = ts_sigmoid(x);
        r = ts_mul(g, ts_mul(s, ts_add_scalar(ts_mul(x, ts_rsub_scalar(s, 1)), 1)));
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
    default:
        return;
    }
    grad_in[0] = tsi_ew_grad_fit(n, 0, r);
}
