/* special.c — torch.special's remaining functions (issue 52): front ends over the unary and
 * binary kernels (kernel_math_special.h's formulas), with PyTorch's derivatives recorded here
 * (derivatives.yaml's formulas, written with public ops) and "autograd is not implemented" where
 * PyTorch has none; mvlgamma composed. */
#include "tessera/special.h"

#include "autograd/autograd.h"
#include "ops/elementwise.h"

#define SQRT_2PI   2.50662827463100050242
#define TWO_SQRTPI 1.12837916709551257390 /* 2 / sqrt(pi) */

/* ------------------------------------------------------------------ one argument */
/* g times the derivative of u at x (y = u(x)); scope-owned */
static ts_tensor *unary_deriv(ts_unary_op u, ts_tensor *g, ts_tensor *x, ts_tensor *y) {
    switch (u) {
    case TS_U_NDTR: /* e^(-x^2/2) / sqrt(2 pi) */
        return ts_mul(g, ts_mul_scalar(ts_exp(ts_mul_scalar(ts_square(x), -0.5)), 1 / SQRT_2PI));
    case TS_U_NDTRI: /* sqrt(2 pi) e^(y^2/2) */
        return ts_mul(g, ts_mul_scalar(ts_exp(ts_mul_scalar(ts_square(y), 0.5)), SQRT_2PI));
    case TS_U_LOG_NDTR: /* e^(-(y + x^2/2)) / sqrt(2 pi) */
        return ts_mul(g, ts_mul_scalar(ts_exp(ts_neg(ts_add(y, ts_mul_scalar(ts_square(x), 0.5)))),
                                       1 / SQRT_2PI));
    case TS_U_ERFCX: /* 2 x y - 2 / sqrt(pi) */
        return ts_mul(g, ts_add_scalar(ts_mul_scalar(ts_mul(x, y), 2), -TWO_SQRTPI));
    case TS_U_ENTR: /* -(1 + log x) */
        return ts_mul(g, ts_neg(ts_add_scalar(ts_log(x), 1)));
    case TS_U_BESSEL_J0: /* -J1 */
        return ts_neg(ts_mul(g, ts_bessel_j1(x)));
    case TS_U_BESSEL_Y0: /* -Y1 */
        return ts_neg(ts_mul(g, ts_bessel_y1(x)));
    case TS_U_BESSEL_K0: /* -K1 */
        return ts_neg(ts_mul(g, ts_modified_bessel_k1(x)));
    case TS_U_BESSEL_J1: /* J0 - J1 / x, 1/2 at 0 */
        return ts_mul(g, ts_where(ts_eq_scalar(x, 0), ts_full_like(x, 0.5),
                                  ts_sub(ts_bessel_j0(x), ts_div(y, x))));
    case TS_U_BESSEL_Y1: /* Y0 - Y1 / x */
        return ts_mul(g, ts_sub(ts_bessel_y0(x), ts_div(y, x)));
    case TS_U_BESSEL_K1: /* -K0 - K1 / x */
        return ts_neg(ts_mul(g, ts_add(ts_modified_bessel_k0(x), ts_div(y, x))));
    default:
        return tsi_error_set(TS_ERR_STATE, "special: no derivative for op %d", (int)u), NULL;
    }
}

static void unary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    if (!grad_out[0] || !tsi_node_needs(n, 0)) return;
    ts_tensor *x = tsi_node_saved(n, 0), *y = tsi_node_saved(n, 1);
    if (!x || !y) return;
    grad_in[0] = unary_deriv((ts_unary_op)n->p[0], grad_out[0], x, y);
}

/* u(t): integers and bool in float32; gname NULL: no derivative (refused when one is needed) */
static ts_tensor *special_unary(const char *op, ts_unary_op u, ts_tensor *t, const char *gname) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_tensor *const ins[1] = {t};
    const bool graph = tsi_needs_graph(ins, 1);
    if (graph && !gname)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: autograd is not implemented (PyTorch has no derivative; "
                             "input: %s); detach the input",
                             op, tsi_desc(t)),
               NULL;
    ts_scope_begin();
    ts_tensor *x = tsi_is_float(t->dtype) ? t : ts_to_dtype(t, TS_F32), *y = NULL;
    if (x) {
        ts_no_grad_begin();
        y = tsi_unary_param(op, u, x, 0, 0, false, NULL, 0);
        ts_no_grad_end();
    }
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    if (y && graph) {
        ts_tensor *const saves[2] = {t, NULL};
        ts_node *n = tsi_record(gname, op, unary_backward, ins, 1, y, saves, 2);
        if (!n) return NULL; /* y belongs to the caller's scope */
        tsi_node_save_output(n, 1, y);
        n->p[0] = (double)u;
        n->flags |= TSI_NODE_TWICE; /* unary_deriv: public ops on g, x and y */
    }
    return y; /* ts_keep put it in the caller's scope */
}

#define FRONT_SPECIAL(NAME, U, GNAME)                                                              \
    ts_tensor *ts_##NAME(ts_tensor *t) { return special_unary(#NAME, U, t, GNAME); }
#define FRONT_PLAIN(NAME, U, GNAME)
#define FRONT_PLAIN_INPLACE(NAME, U, GNAME)
#define FRONT_OWN(NAME, U, GNAME)
/* unary_ops.def's SPECIAL rows, with their grad_fn names (NULL: no derivative) */
#define X(ID, name, front, dtype, grad_fn, ...) FRONT_##front(name, TS_U_##ID, grad_fn)
#include "backend/unary_ops.def"
#undef X
#undef FRONT_SPECIAL
#undef FRONT_PLAIN
#undef FRONT_PLAIN_INPLACE
#undef FRONT_OWN

/* ------------------------------------------------------------------ two arguments */
/* zeta and the incomplete gammas: the gradient of the second argument alone */
static void binary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in) {
    if (!grad_out[0] || !tsi_node_needs(n, 1)) return;
    ts_tensor *a = tsi_node_saved(n, 0), *b = tsi_node_saved(n, 1), *g = grad_out[0], *d = NULL;
    if (!a || !b) return;
    switch ((ts_binary_op)n->p[0]) {
    case TS_B_ZETA: /* d/dq zeta(x, q) = -x zeta(x + 1, q) */
        d = ts_neg(ts_mul(a, ts_zeta(ts_add_scalar(a, 1), b)));
        break;
    case TS_B_IGAMMA: /* d/dx P(a, x) = e^((a - 1) log x - x - lgamma(a)) */
    case TS_B_IGAMMAC:
        d = ts_exp(ts_sub(ts_sub(ts_mul(ts_add_scalar(a, -1), ts_log(b)), b), ts_lgamma(a)));
        if ((ts_binary_op)n->p[0] == TS_B_IGAMMAC) d = ts_neg(d);
        break;
    default:
        tsi_error_set(TS_ERR_STATE, "special: no derivative for op %d", (int)n->p[0]);
        return;
    }
    ts_tensor *gb = tsi_sum_to(ts_mul(g, d), n->in_shape[1]);
    if (gb && gb->dtype != n->in_dtype[1]) gb = ts_to_dtype(gb, n->in_dtype[1]);
    grad_in[1] = gb;
}

/* f(a, b) in the operands' result type (float32 for integers and bool); gname NULL: no
 * derivative; else the derivative of b alone (a requiring grad is refused) */
static ts_tensor *special_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                                 const char *an, const char *bn, const char *gname) {
    tsi_init();
    if (!tsi_check_input(op, a, an) || !tsi_check_input(op, b, bn)) return NULL;
    ts_tensor *const ins[2] = {a, b};
    const bool graph = tsi_needs_graph(ins, 2);
    if (graph && (!gname || (a->requires_grad && tsi_grad_mode())))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: autograd is not implemented for '%s' (PyTorch has no derivative; "
                             "%s: %s, %s: %s); detach it",
                             op, gname ? an : "its inputs", an, tsi_desc(a), bn, tsi_desc(b)),
               NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    ts_scope_begin();
    ts_tensor *x = a, *y = b, *out = NULL;
    if (!tsi_is_float(r)) {
        x = ts_to_dtype(a, TS_F32);
        y = ts_to_dtype(b, TS_F32);
    }
    if (x && y) {
        ts_no_grad_begin();
        out = tsi_binary_plain(op, bop, x, y);
        ts_no_grad_end();
    }
    out = out ? ts_keep(out) : NULL;
    ts_scope_end();
    if (out && graph) {
        ts_node *n = tsi_record(gname, op, binary_backward, ins, 2, out, ins, 2);
        if (!n) return NULL;
        n->p[0] = (double)bop;
        n->flags |= TSI_NODE_TWICE; /* public ops on g and the inputs (a needs no grad) */
    }
    return out; /* ts_keep put it in the caller's scope */
}

ts_tensor *ts_zeta(ts_tensor *x, ts_tensor *q) {
    return special_binary("zeta", TS_B_ZETA, x, q, "input", "other", "SpecialZetaBackward0");
}
ts_tensor *ts_igamma(ts_tensor *a, ts_tensor *x) {
    return special_binary("igamma", TS_B_IGAMMA, a, x, "input", "other", "IgammaBackward0");
}
ts_tensor *ts_igammac(ts_tensor *a, ts_tensor *x) {
    return special_binary("igammac", TS_B_IGAMMAC, a, x, "input", "other", "IgammacBackward0");
}

#define POLY(NAME, B)                                                                              \
    ts_tensor *ts_##NAME(ts_tensor *x, ts_tensor *n) {                                             \
        return special_binary(#NAME, B, x, n, "input", "n", NULL);                                 \
    }
POLY(chebyshev_polynomial_t, TS_B_CHEB_T)
POLY(chebyshev_polynomial_u, TS_B_CHEB_U)
POLY(chebyshev_polynomial_v, TS_B_CHEB_V)
POLY(chebyshev_polynomial_w, TS_B_CHEB_W)
POLY(shifted_chebyshev_polynomial_t, TS_B_SCHEB_T)
POLY(shifted_chebyshev_polynomial_u, TS_B_SCHEB_U)
POLY(shifted_chebyshev_polynomial_v, TS_B_SCHEB_V)
POLY(shifted_chebyshev_polynomial_w, TS_B_SCHEB_W)
POLY(hermite_polynomial_h, TS_B_HERMITE_H)
POLY(hermite_polynomial_he, TS_B_HERMITE_HE)
POLY(laguerre_polynomial_l, TS_B_LAGUERRE_L)
POLY(legendre_polynomial_p, TS_B_LEGENDRE_P)
#undef POLY

/* ------------------------------------------------------------------ mvlgamma */
/* sum_{i < p} lgamma(x - i/2) + p (p - 1) / 4 log(pi), composed (autograd through lgamma) */
ts_tensor *ts_mvlgamma(ts_tensor *t, int64_t p) {
    tsi_init();
    if (!tsi_check_input("mvlgamma", t, "input")) return NULL;
    if (p < 1 || p > 1000000)
        return tsi_error_set(TS_ERR_ARG,
                             "mvlgamma: p has to be greater than or equal to 1 (p = %lld)",
                             (long long)p),
               NULL;
    ts_scope_begin();
    ts_tensor *x = tsi_is_float(t->dtype) ? t : ts_to_dtype(t, TS_F32), *y = NULL;
    if (x && tsi_numel(x->shape) > 0) {
        /* PyTorch's check: NaN fails it too */
        const double bad = ts_item(
            ts_any(ts_logical_not(ts_gt_scalar(x, 0.5 * (double)(p - 1))), (ts_dims){0}, false));
        if (bad != 0) {
            if (!isnan(bad))
                tsi_error_set(TS_ERR_ARG,
                              "mvlgamma: All elements must be greater than (p-1)/2 (p = %lld, "
                              "input: %s)",
                              (long long)p, tsi_desc(t));
            x = NULL;
        }
    }
    if (x) {
        y = ts_lgamma(x);
        for (int64_t i = 1; y && i < p; i++)
            y = ts_add(y, ts_lgamma(ts_add_scalar(x, -0.5 * (double)i)));
        if (y) y = ts_add_scalar(y, 0.25 * (double)p * (double)(p - 1) * 1.14472988584940017414);
    }
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y; /* ts_keep put it in the caller's scope */
}
