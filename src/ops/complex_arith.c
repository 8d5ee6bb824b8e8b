/* complex_arith.c — add, sub, mul, div, neg, abs, sum and mean of complex tensors, composed of
 * real ops over the parts (ts_real / ts_imag views), so that every device runs them with its real
 * kernels and autograd differentiates them as PyTorch does (see complex.c). */
#include <math.h>

#include "autograd/autograd.h"
#include "ops/complex.h"
#include "ops/elementwise.h"
#include "tessera/complex.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* x's real and imaginary parts in the float dtype pd; *im NULL for a real x (zero) */
static void parts(ts_tensor *x, ts_dtype pd, ts_tensor **re, ts_tensor **im) {
    if (tsi_is_complex(x->dtype)) {
        if (x->dtype != tsi_complex_of(pd)) x = ts_to_dtype(x, tsi_complex_of(pd));
        *re = ts_real(x);
        *im = ts_imag(x);
    } else {
        *re = x->dtype == pd ? x : ts_to_dtype(x, pd);
        *im = NULL;
    }
}

/* complex from parts that broadcast (one operand is complex: im is never absent) */
ts_tensor *tsi_complex_combine(const char *op, ts_tensor *re, ts_tensor *im) {
    ts_shape s;
    if (!re || !im || !tsi_broadcast_shapes(op, re->shape, im->shape, &s)) return NULL;
    ts_tensor *y =
        ts_view_as_complex(ts_stack((ts_tensor *[]){ts_expand(re, s), ts_expand(im, s)}, 2, -1));
    if (y) y->is_view = false; /* the stacked pairs are its own: a plain result (in place too) */
    return y;
}

static ts_tensor *add_opt(ts_tensor *a, ts_tensor *b) { return !a ? b : !b ? a : ts_add(a, b); }
static ts_tensor *sub_opt(ts_tensor *a, ts_tensor *b) {
    return !b ? a : !a ? ts_neg(b) : ts_sub(a, b);
}
static ts_tensor *mul_opt(ts_tensor *a, ts_tensor *b) { return a && b ? ts_mul(a, b) : NULL; }

/* (ar + i ai) / (br + i bi), b scaled by |br| + |bi| first so that squares do not overflow */
static ts_tensor *divide(const char *op, ts_tensor *ar, ts_tensor *ai, ts_tensor *br,
                         ts_tensor *bi) {
    if (!bi) return tsi_complex_combine(op, ts_div(ar, br), ai ? ts_div(ai, br) : NULL);
    ts_tensor *s = ts_add(ts_abs(br), ts_abs(bi));
    ts_tensor *brs = ts_div(br, s), *bis = ts_div(bi, s);
    ts_tensor *den = ts_mul(ts_add(ts_mul(brs, brs), ts_mul(bis, bis)), s);
    ts_tensor *re = add_opt(ts_mul(ar, brs), mul_opt(ai, bis));
    ts_tensor *im = sub_opt(mul_opt(ai, brs), ts_mul(ar, bis));
    return tsi_complex_combine(op, ts_div(re, den), ts_div(im, den));
}

/* eq: both parts equal; ne: either differs (a real operand's imaginary part is 0) */
static ts_tensor *compare(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    const ts_dtype pd = tsi_complex_part(r);
    ts_scope_begin();
    ts_tensor *ar, *ai, *br, *bi;
    parts(ts_detach(a), pd, &ar, &ai);
    parts(ts_detach(b), pd, &br, &bi);
    if (ts_error()) return finish(NULL);
    const bool eq = bop == TS_B_EQ;
    ts_tensor *re = eq ? ts_eq(ar, br) : ts_ne(ar, br);
    ts_tensor *im = ai && bi ? (eq ? ts_eq(ai, bi) : ts_ne(ai, bi))
                    : ai     ? (eq ? ts_eq_scalar(ai, 0) : ts_ne_scalar(ai, 0))
                             : (eq ? ts_eq_scalar(bi, 0) : ts_ne_scalar(bi, 0));
    return finish(eq ? ts_logical_and(re, im) : ts_logical_or(re, im));
}

ts_tensor *tsi_complex_binary(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    tsi_init();
    if (bop == TS_B_POW) return tsi_complex_pow(op, a, b);
    if (bop == TS_B_EQ || bop == TS_B_NE) return compare(op, bop, a, b);
    if (bop != TS_B_ADD && bop != TS_B_SUB && bop != TS_B_MUL && bop != TS_B_DIV)
        return tsi_complex_refuse(op, tsi_is_complex(a->dtype) ? a->dtype : b->dtype,
                                  tsi_is_complex(a->dtype) ? a : b),
               NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b); /* a 0-dim float64 keeps complex64 */
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    if (tsi_complex_native_ok(bop, a, b)) return tsi_complex_binary_native(op, bop, a, b, r);
    const ts_dtype pd = tsi_complex_part(r);
    ts_scope_begin();
    ts_tensor *ar, *ai, *br, *bi;
    parts(a, pd, &ar, &ai);
    parts(b, pd, &br, &bi);
    if (ts_error()) return finish(NULL); /* parts() failing leaves the error */
    switch (bop) {
    case TS_B_ADD:
        return finish(tsi_complex_combine(op, ts_add(ar, br), add_opt(ai, bi)));
    case TS_B_SUB:
        return finish(tsi_complex_combine(op, ts_sub(ar, br), sub_opt(ai, bi)));
    case TS_B_MUL: /* (ar br - ai bi) + i (ar bi + ai br) */
        return finish(tsi_complex_combine(op, sub_opt(ts_mul(ar, br), mul_opt(ai, bi)),
                                          add_opt(mul_opt(ar, bi), mul_opt(ai, br))));
    default:
        return finish(divide(op, ar, ai, br, bi));
    }
}

ts_tensor *tsi_complex_unary(const char *op, ts_unary_op u, ts_tensor *t) {
    tsi_init();
    ts_scope_begin();
    switch (u) {
    case TS_U_NEG:
        return finish(ts_view_as_complex(ts_neg(ts_view_as_real(t))));
    case TS_U_ABS: /* the 2-norm of each pair: its gradient at 0 is 0, as PyTorch's */
        if (tsi_complex_abs_native_ok(t)) {
            ts_scope_end();
            return tsi_complex_abs_native(op, t);
        }
        return finish(
            ts_vector_norm(ts_view_as_real(t), 2.0, TS_DIMS(-1), false, TS_DTYPE_DEFAULT));
    default:
        ts_scope_end();
        return tsi_complex_math(op, u, t);
    }
}

ts_tensor *tsi_complex_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s) {
    tsi_init();
    if (bop == TS_B_POW) return tsi_complex_pow_scalar(op, a, s);
    if (bop == TS_B_RPOW) return tsi_complex_rpow_scalar(op, a, s);
    if (bop != TS_B_ADD && bop != TS_B_SUB && bop != TS_B_RSUB && bop != TS_B_MUL &&
        bop != TS_B_DIV && bop != TS_B_EQ && bop != TS_B_NE)
        return tsi_complex_refuse(op, a->dtype, a), NULL;
    /* the number as a 0-dim cpu tensor of the parts' dtype */
    ts_scope_begin();
    ts_tensor *st = ts_scalar(s, (ts_opts){.dtype = tsi_complex_part(a->dtype)});
    ts_tensor *y = !st                ? NULL
                   : bop == TS_B_RSUB ? tsi_complex_binary(op, TS_B_SUB, st, a)
                                      : tsi_complex_binary(op, bop, a, st);
    if (y && y->grad_fn && bop == TS_B_RSUB) y->grad_fn->name = "RsubBackward1"; /* PyTorch's */
    return finish(y);
}

ts_tensor *tsi_complex_reduce(const char *op, ts_reduce_op rop, ts_tensor *t, const int *dims,
                              int ndims, bool all, bool keepdim) {
    tsi_init();
    if (rop != TS_R_SUM && rop != TS_R_MEAN) return tsi_complex_refuse(op, t->dtype, t), NULL;
    const int nd = t->shape.ndim;
    ts_dims rd = {0};
    if (all) {
        for (int i = 0; i < nd; i++) rd.d[rd.n++] = i;
    } else {
        for (int i = 0; i < ndims; i++) {
            int d = tsi_wrap_dim(op, dims[i], nd);
            if (d < 0) return NULL;
            rd.d[rd.n++] = d;
        }
    }
    ts_scope_begin();
    if (rd.n == 0 || nd == 0) return finish(ts_clone(t)); /* a 0-dim tensor, or no dims */
    ts_tensor *vr = ts_view_as_real(t);
    ts_tensor *s = rop == TS_R_SUM ? ts_sum_dims(vr, rd, keepdim) : ts_mean_dims(vr, rd, keepdim);
    return finish(ts_view_as_complex(ts_contiguous(s)));
}
