/* elementwise_grad_binary.c — backward of the binary elementwise ops (tensor-tensor and with a
 * number), where and masked_fill (PyTorch's derivatives.yaml formulas), computed with public ops.
 */
#include "ops/elementwise_grad.h"

_Static_assert(TS_B_COUNT == 55,
               "a ts_binary_op was added or removed: give it what it saves and its "
               "derivative here; then update the count");

/* binary_ops.def's grad_fn column */
static const char *const grad_names[] = {
#define X(ID, name, front, dtype, grad_fn, ...) grad_fn,
#include "backend/binary_ops.def"
#undef X
};
_Static_assert(sizeof grad_names / sizeof *grad_names == TS_B_COUNT, "one grad_fn per binary op");

const char *tsi_ew_binary_name(ts_binary_op bop) {
    return (unsigned)bop < TS_B_COUNT ? grad_names[bop] : NULL;
}

/* Like PyTorch, an operand is saved only when the other one's gradient needs it. */
unsigned tsi_ew_binary_saves(ts_binary_op bop, bool need_a, bool need_b) {
    switch (bop) {
    case TS_B_MUL:
        return (need_b ? TSI_EW_SAVE_A : 0) | (need_a ? TSI_EW_SAVE_B : 0);
    case TS_B_DIV:
        return TSI_EW_SAVE_B | (need_b ? TSI_EW_SAVE_A : 0);
    case TS_B_POW:
        return TSI_EW_SAVE_A | TSI_EW_SAVE_B | (need_b ? TSI_EW_SAVE_OUT : 0);
    case TS_B_MAX:
    case TS_B_MIN:
        return TSI_EW_SAVE_A | TSI_EW_SAVE_B;
    case TS_B_FMOD:
    case TS_B_REM:
        return need_b ? TSI_EW_SAVE_A | TSI_EW_SAVE_B : 0;
    case TS_B_XLOGY:
    case TS_B_XLOG1PY:
    case TS_B_ATAN2:
    case TS_B_LOGADDEXP:
    case TS_B_LOGADDEXP2:
        return TSI_EW_SAVE_A | TSI_EW_SAVE_B;
    case TS_B_HYPOT:
        return TSI_EW_SAVE_A | TSI_EW_SAVE_B | TSI_EW_SAVE_OUT;
    case TS_B_COPYSIGN:
        return need_a ? TSI_EW_SAVE_A | TSI_EW_SAVE_OUT : 0;
    default:
        return 0;
    }
}

/* The names PyTorch gives `x + 2`, `2 - x`, `x ** 2`, `2 ** x` (the number is wrapped into a
 * tensor, so most are the tensor overload's); fmod with a number keeps its own. */
const char *tsi_ew_scalar_name(ts_binary_op bop) {
    switch (bop) {
    case TS_B_RSUB:
        return "RsubBackward1";
    case TS_B_POW:
        return "PowBackward0";
    case TS_B_RPOW:
        return "PowBackward1";
    case TS_B_FMOD:
        return "FmodBackward0";
    default:
        return tsi_ew_binary_name(bop);
    }
}

unsigned tsi_ew_scalar_saves(ts_binary_op bop, double s) {
    switch (bop) {
    case TS_B_POW:
        return s != 0 ? TSI_EW_SAVE_A : 0;
    case TS_B_RPOW:
        return TSI_EW_SAVE_OUT | (s == 0 ? TSI_EW_SAVE_A : 0);
    case TS_B_MAX:
    case TS_B_MIN:
        return TSI_EW_SAVE_A;
    default:
        return 0;
    }
}

/* Fetches the saved tensors `saves` names; false (error set by the engine) when one is gone or was
 * modified in place. */
static bool fetch(ts_node *n, unsigned saves, ts_tensor **a, ts_tensor **b, ts_tensor **out) {
    if ((saves & TSI_EW_SAVE_A) && !(*a = tsi_node_saved(n, TSI_EW_SLOT_A))) return false;
    if ((saves & TSI_EW_SAVE_B) && !(*b = tsi_node_saved(n, TSI_EW_SLOT_B))) return false;
    if ((saves & TSI_EW_SAVE_OUT) && !(*out = tsi_node_saved(n, TSI_EW_SLOT_OUT))) return false;
    return true;
}

/* maximum / minimum: ties split the gradient in halves. */
static ts_tensor *tie_split(ts_tensor *g, ts_tensor *tie) {
    return ts_where(tie, ts_mul_scalar(g, 0.5), g);
}

void tsi_ew_binary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *a = NULL, *b = NULL, *out = NULL, *ga = NULL, *gb = NULL, *t;
    if (!g) return;
    const ts_binary_op bop = (ts_binary_op)n->ip[0];
    const bool na = tsi_node_needs(n, 0), nb = tsi_node_needs(n, 1);
    if (!fetch(n, tsi_ew_binary_saves(bop, na, nb), &a, &b, &out)) return;
    switch (bop) {
    case TS_B_ADD: /* p[0] is add_alpha's alpha (1 for add) */
        ga = g;
        gb = !nb || n->p[0] == 1 ? g : ts_mul_scalar(g, n->p[0]);
        break;
    case TS_B_SUB:
        ga = g;
        gb = nb ? ts_neg(g) : NULL;
        break;
    case TS_B_MUL:
        ga = na ? ts_mul(g, b) : NULL;
        gb = nb ? ts_mul(g, a) : NULL;
        break;
    case TS_B_DIV: /* b: -g (a / b) / b */
        ga = na ? ts_div(g, b) : NULL;
        gb = nb ? ts_mul(ts_neg(g), ts_div(ts_div(a, b), b)) : NULL;
        break;
    case TS_B_POW:
        /* a: 0 where b == 0 (0 * a^-1 would be NaN at a == 0); b: g out log(a), 0 where a == 0
         * and b >= 0 (the limit, where log gives -inf) */
        if (na)
            ga = ts_where(ts_eq_scalar(b, 0), tsi_ew_grad_zero(g),
                          ts_mul(g, ts_mul(b, ts_pow(a, ts_sub_scalar(b, 1)))));
        if (nb) {
            t = ts_logical_and(ts_eq_scalar(a, 0), ts_ge_scalar(b, 0));
            gb = ts_mul(g, ts_where(t, tsi_ew_grad_zero(g), ts_mul(out, ts_log(a))));
        }
        break;
    case TS_B_MAX:
    case TS_B_MIN: /* torch: where(a == b, g / 2, g).masked_fill_(a loses, 0), same for b */
        t = tie_split(g, ts_eq(a, b));
        if (na) ga = ts_masked_fill(t, bop == TS_B_MAX ? ts_lt(a, b) : ts_gt(a, b), 0);
        if (nb) gb = ts_masked_fill(t, bop == TS_B_MAX ? ts_gt(a, b) : ts_lt(a, b), 0);
        break;
    case TS_B_FMOD: /* b: -g trunc(a / b); trunc(q) = q - fmod(q, 1) exactly */
        ga = g;
        if (nb) {
            t = ts_div(a, b);
            gb = ts_mul(ts_neg(g), ts_sub(t, ts_fmod_scalar(t, 1)));
        }
        break;
    /* issue 52 (PyTorch's derivatives.yaml) */
    case TS_B_REM: /* b: -g floor(a / b) */
        ga = g;
        if (nb) gb = ts_mul(ts_neg(g), ts_floor_divide(a, b));
        break;
    case TS_B_XLOGY: /* a: g xlogy(a != 0, b); b: g a / b */
        if (na) ga = ts_mul(g, ts_xlogy(ts_ne_scalar(a, 0), b));
        if (nb) gb = ts_mul(g, ts_div(a, b));
        break;
    case TS_B_XLOG1PY: /* a: g xlog1py(a != 0, b); b: g a / (b + 1) */
        if (na) ga = ts_mul(g, ts_xlog1py(ts_ne_scalar(a, 0), b));
        if (nb) gb = ts_mul(g, ts_div(a, ts_add_scalar(b, 1)));
        break;
    case TS_B_HYPOT: /* g a / out, g b / out */
        if (na) ga = ts_mul(g, ts_div(a, out));
        if (nb) gb = ts_mul(g, ts_div(b, out));
        break;
    case TS_B_COPYSIGN: /* a: g out / a, 0 where a == 0; b: 0 */
        if (na) ga = ts_mul(g, ts_where(ts_eq_scalar(a, 0), tsi_ew_grad_zero(g), ts_div(out, a)));
        if (nb) gb = ts_zeros_like(g);
        break;
    case TS_B_ATAN2: /* g b / (a^2 + b^2), -g a / (a^2 + b^2) */
        t = ts_reciprocal(ts_add(ts_square(a), ts_square(b)));
        if (na) ga = ts_mul(g, ts_mul(b, t));
        if (nb) gb = ts_mul(g, ts_mul(ts_neg(a), t));
        break;
    case TS_B_LOGADDEXP: /* g / (1 + e^(b - a)), g / (1 + e^(a - b)) */
        if (na) ga = ts_div(g, ts_add_scalar(ts_exp(ts_sub(b, a)), 1));
        if (nb) gb = ts_div(g, ts_add_scalar(ts_exp(ts_sub(a, b)), 1));
        break;
    case TS_B_LOGADDEXP2: /* g / (1 + 2^(b - a)), g / (1 + 2^(a - b)) */
        if (na) ga = ts_div(g, ts_add_scalar(ts_exp2(ts_sub(b, a)), 1));
        if (nb) gb = ts_div(g, ts_add_scalar(ts_exp2(ts_sub(a, b)), 1));
        break;
    case TS_B_NEXTAFTER: /* PyTorch 2's derivatives.yaml: self: grad, other: zeros */
        if (na) ga = g;
        if (nb) gb = ts_zeros_like(g);
        break;
    default:
        return;
    }
    if (na) grad_in[0] = tsi_ew_grad_fit(n, 0, ga);
    if (nb) grad_in[1] = tsi_ew_grad_fit(n, 1, gb);
}

void tsi_ew_scalar_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *a = NULL, *none = NULL, *out = NULL, *r = NULL, *t;
    if (!g || !tsi_node_needs(n, 0)) return;
    const ts_binary_op bop = (ts_binary_op)n->ip[0];
    const double s = n->p[0];
    if (!fetch(n, tsi_ew_scalar_saves(bop, s), &a, &none, &out)) return;
    switch (bop) {
    case TS_B_ADD:
    case TS_B_SUB:
    case TS_B_FMOD:
        r = g;
        break;
    case TS_B_RSUB:
        r = ts_neg(g);
        break;
    case TS_B_MUL:
        r = ts_mul_scalar(g, s);
        break;
    case TS_B_DIV:
        r = ts_div_scalar(g, s);
        break;
    case TS_B_POW: /* a ** s: s a^(s-1), and exactly 0 for s == 0 */
        r = s == 0 ? ts_zeros_like(g) : ts_mul(g, ts_mul_scalar(ts_pow_scalar(a, s - 1), s));
        break;
    case TS_B_RPOW: /* s ** a: out log(s), 0 where s == 0 and a >= 0 */
        t = ts_mul_scalar(out, log(s));
        if (s == 0) t = ts_where(ts_ge_scalar(a, 0), tsi_ew_grad_zero(g), t);
        r = ts_mul(g, t);
        break;
    case TS_B_MAX:
    case TS_B_MIN:
        t = tie_split(g, ts_eq_scalar(a, s));
        r = ts_masked_fill(t, bop == TS_B_MAX ? ts_lt_scalar(a, s) : ts_gt_scalar(a, s), 0);
        break;
    default:
        return;
    }
    grad_in[0] = tsi_ew_grad_fit(n, 0, r);
}

void tsi_ew_where_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *cond;
    if (!g || !(cond = tsi_node_saved(n, TSI_EW_SLOT_B))) return;
    ts_tensor *zero = tsi_ew_grad_zero(g);
    if (tsi_node_needs(n, 0)) grad_in[0] = tsi_ew_grad_fit(n, 0, ts_where(cond, g, zero));
    if (tsi_node_needs(n, 1)) grad_in[1] = tsi_ew_grad_fit(n, 1, ts_where(cond, zero, g));
}

void tsi_ew_masked_fill_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    ts_tensor *g = grad_out[0], *mask;
    if (!g || !tsi_node_needs(n, 0) || !(mask = tsi_node_saved(n, TSI_EW_SLOT_B))) return;
    grad_in[0] = tsi_ew_grad_fit(n, 0, ts_masked_fill(g, mask, 0));
}
