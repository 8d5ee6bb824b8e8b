/* complex_math.c — the transcendental functions of complex tensors (exp, log, log2, log10, sqrt,
 * rsqrt, reciprocal, sin, cos, tan, sinh, cosh, tanh, sigmoid, sgn, square) and pow, composed of
 * real ops over the parts as complex_arith.c's arithmetic is (decision 0023): every device runs
 * them with its real kernels and autograd differentiates the composition, which is PyTorch's
 * convention (the gradient of z = x + iy is dL/dx + i dL/dy).
 *
 * The formulas are C99's (Annex G) principal branches: log(z) = log|z| + i atan2(y, x), with |z|
 * by hypot (no overflow in the squares); sqrt by Kahan's csqrt (the sign of a zero imaginary part
 * picks the side of the cut at the negative reals: sqrt(-4 - 0i) = -2i); tanh by Kahan's form
 * (no overflow of sinh and cosh, exact +-1 past |x| = 22); tan(z) = -i tanh(iz); sigmoid from
 * the exponential of -|Re z| (no overflow). Where a branch is picked with ts_where, the other
 * branch is fed a harmless input, so that its gradient is zero rather than NaN. square and
 * reciprocal (and rsqrt's last step) are the native product z * z and quotient 1 / z
 * (complex_native.c), PyTorch's own formulas. */
#include <math.h>
#include <string.h>

#include "ops/complex.h"
#include "ops/elementwise.h"
#include "tessera/complex.h"

typedef struct cpair {
    ts_tensor *re, *im;
} cpair;

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* a 0-dim constant of like's dtype on like's device */
static ts_tensor *cst(ts_tensor *like, double v) {
    return like ? ts_scalar(v, (ts_opts){.dtype = ts_dtype_of(like), .device = ts_device_of(like)})
                : NULL;
}

static cpair split(ts_tensor *t) { return (cpair){ts_real(t), ts_imag(t)}; }
static ts_tensor *join(const char *op, cpair p) { return tsi_complex_combine(op, p.re, p.im); }

/* e^x (cos y + i sin y); exp(+inf + 0i) = +inf + 0i (C99) rather than inf * sin(0) = NaN */
static cpair c_exp(cpair z) {
    ts_tensor *ex = ts_exp(z.re);
    ts_tensor *im = ts_mul(ex, ts_sin(z.im));
    ts_tensor *inf0 =
        ts_logical_and(ts_eq_scalar(ts_detach(z.im), 0), ts_eq_scalar(ts_detach(ex), INFINITY));
    return (cpair){ts_mul(ex, ts_cos(z.im)), ts_where(inf0, z.im, im)};
}

/* log|z| + i atan2(y, x) */
static cpair c_log(cpair z) { return (cpair){ts_log(ts_hypot(z.re, z.im)), ts_atan2(z.im, z.re)}; }

/* Kahan's csqrt: t = sqrt((|x| + |z|) / 2); x >= 0: (t, y / 2t), else (|y| / 2t, copysign(t, y)).
 * |y| and copysign(t, y) as y and t times the detached sign of y (-0 included): their gradients
 * are the one-sided ones of the side the value lies on (PyTorch's on the cut). */
static cpair c_sqrt(cpair z) {
    ts_tensor *x = z.re, *y = z.im;
    ts_tensor *one = cst(x, 1.0);
    ts_tensor *sy = ts_copysign(one, ts_detach(y));
    ts_tensor *h = ts_hypot(x, y);
    ts_tensor *t = ts_sqrt(ts_add(ts_mul_scalar(ts_abs(x), 0.5), ts_mul_scalar(h, 0.5)));
    /* t is 0 only at z = 0, where y / 2t must read y / 2 = +-0 */
    ts_tensor *zero = ts_eq_scalar(ts_detach(t), 0);
    ts_tensor *t2 = ts_mul_scalar(ts_where(zero, one, t), 2.0);
    ts_tensor *pos = ts_ge_scalar(ts_detach(x), 0);
    ts_tensor *re = ts_where(pos, t, ts_div(ts_mul(y, sy), t2));
    ts_tensor *im = ts_where(pos, ts_div(y, t2), ts_mul(t, sy));
    return (cpair){re, im};
}

/* Kahan's tanh: with t = tan(y), b = 1 + t^2, s = sinh(x), r = sqrt(1 + s^2):
 * tanh(z) = (b r s + i t) / (1 + b s^2); past |x| = 22 (1 - tanh|x| < 2^-63): sign(x) +
 * i 4 sin(y) cos(y) e^(-2|x|). The first form reads x = 0 where |x| > 22 (no overflow). */
#define TANH_BIG 22.0
static cpair c_tanh(cpair z) {
    ts_tensor *x = z.re, *y = z.im;
    ts_tensor *big = ts_gt_scalar(ts_abs(ts_detach(x)), TANH_BIG);
    ts_tensor *xs = ts_where(big, cst(x, 0.0), x);
    ts_tensor *t = ts_tan(y), *s = ts_sinh(xs);
    ts_tensor *b = ts_add_scalar(ts_mul(t, t), 1.0);
    ts_tensor *r = ts_sqrt(ts_add_scalar(ts_mul(s, s), 1.0));
    ts_tensor *den = ts_add_scalar(ts_mul(b, ts_mul(s, s)), 1.0);
    ts_tensor *re = ts_div(ts_mul(ts_mul(b, r), s), den), *im = ts_div(t, den);
    ts_tensor *far_re = ts_copysign(cst(x, 1.0), ts_detach(x));
    ts_tensor *far_im = ts_mul(ts_mul_scalar(ts_mul(ts_sin(y), ts_cos(y)), 4.0),
                               ts_exp(ts_mul_scalar(ts_abs(x), -2.0)));
    return (cpair){ts_where(big, far_re, re), ts_where(big, far_im, im)};
}

/* tan(x + iy) = -i tanh(-y + ix) */
static cpair c_tan(cpair z) {
    cpair w = c_tanh((cpair){ts_neg(z.im), z.re});
    return (cpair){w.im, ts_neg(w.re)};
}

/* complex a / b through complex_arith.c's scaled division */
static cpair c_div(const char *op, cpair a, cpair b) {
    return split(tsi_complex_binary(op, TS_B_DIV, join(op, a), join(op, b)));
}

/* 1 / z as the native quotient (kernel_math_complex.h's Smith division): 1 / 0 = inf + NaN i, as
 * PyTorch's reciprocal */
static ts_tensor *c_reciprocal(const char *op, ts_tensor *z) {
    ts_tensor *one = z ? ts_scalar(1.0, (ts_opts){.dtype = tsi_complex_part(z->dtype)}) : NULL;
    return one ? tsi_complex_binary(op, TS_B_DIV, one, z) : NULL;
}

/* 1 / (1 + e^-z) for Re z >= 0, e^z / (1 + e^z) below: the exponential of -|Re z| never
 * overflows */
static cpair c_sigmoid(const char *op, cpair z) {
    ts_tensor *x = z.re;
    ts_tensor *pos = ts_ge_scalar(ts_detach(x), 0);
    ts_tensor *sgn = ts_where(pos, cst(x, -1.0), cst(x, 1.0));
    cpair e = c_exp((cpair){ts_mul(z.re, sgn), ts_mul(z.im, sgn)});
    cpair num = {ts_where(pos, cst(x, 1.0), e.re), ts_where(pos, cst(x, 0.0), e.im)};
    return c_div(op, num, (cpair){ts_add_scalar(e.re, 1.0), e.im});
}

/* z / |z|, 0 at 0 (with a zero gradient there, as PyTorch's sgn) */
static cpair c_sgn(ts_tensor *t, cpair z) {
    ts_tensor *a = ts_abs(t);
    ts_tensor *zero = ts_eq_scalar(ts_detach(a), 0);
    ts_tensor *d = ts_where(zero, cst(a, 1.0), a), *zr = cst(a, 0.0);
    return (cpair){ts_div(ts_where(zero, zr, z.re), d), ts_div(ts_where(zero, zr, z.im), d)};
}

static cpair c_mul(cpair a, cpair b) {
    return (cpair){ts_sub(ts_mul(a.re, b.re), ts_mul(a.im, b.im)),
                   ts_add(ts_mul(a.re, b.im), ts_mul(a.im, b.re))};
}
static cpair c_scale(cpair a, double s) {
    return (cpair){ts_mul_scalar(a.re, s), ts_mul_scalar(a.im, s)};
}

ts_tensor *tsi_complex_math(const char *op, ts_unary_op u, ts_tensor *t) {
    tsi_init();
    ts_scope_begin();
    cpair z = split(t), r = {0};
    if (ts_error()) return finish(NULL);
    switch (u) {
    case TS_U_EXP:
        r = c_exp(z);
        break;
    case TS_U_LOG:
        r = c_log(z);
        break;
    case TS_U_LOG2:
        r = c_scale(c_log(z), 1.0 / 0.69314718055994530942);
        break;
    case TS_U_LOG10:
        r = c_scale(c_log(z), 1.0 / 2.30258509299404568402);
        break;
    case TS_U_SQRT:
        r = c_sqrt(z);
        break;
    case TS_U_RSQRT:
        return finish(c_reciprocal(op, join(op, c_sqrt(z))));
    case TS_U_RECIPROCAL:
        return finish(c_reciprocal(op, t));
    case TS_U_SIN: /* sin x cosh y + i cos x sinh y */
        r = (cpair){ts_mul(ts_sin(z.re), ts_cosh(z.im)), ts_mul(ts_cos(z.re), ts_sinh(z.im))};
        break;
    case TS_U_COS: /* cos x cosh y - i sin x sinh y */
        r = (cpair){ts_mul(ts_cos(z.re), ts_cosh(z.im)),
                    ts_neg(ts_mul(ts_sin(z.re), ts_sinh(z.im)))};
        break;
    case TS_U_SINH: /* sinh x cos y + i cosh x sin y */
        r = (cpair){ts_mul(ts_sinh(z.re), ts_cos(z.im)), ts_mul(ts_cosh(z.re), ts_sin(z.im))};
        break;
    case TS_U_COSH: /* cosh x cos y + i sinh x sin y */
        r = (cpair){ts_mul(ts_cosh(z.re), ts_cos(z.im)), ts_mul(ts_sinh(z.re), ts_sin(z.im))};
        break;
    case TS_U_TANH:
        r = c_tanh(z);
        break;
    case TS_U_TAN:
        r = c_tan(z);
        break;
    case TS_U_SIGMOID:
        r = c_sigmoid(op, z);
        break;
    case TS_U_SQUARE: /* z z as the native product (PyTorch's pow(z, 2) is its z * z) */
        return finish(tsi_complex_binary(op, TS_B_MUL, t, t));
    case TS_U_SIGN:
        if (strcmp(op, "sgn") == 0 || strcmp(op, "sgn_") == 0) {
            r = c_sgn(t, z);
            break;
        }
        ts_scope_end();
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Unlike NumPy, torch.sign is not intended to support complex "
                             "numbers. Please use torch.sgn instead. (input: %s)",
                             op, tsi_desc(t)),
               NULL;
    default:
        ts_scope_end();
        return tsi_complex_refuse(op, t->dtype, t), NULL;
    }
    return finish(join(op, r));
}

/* ------------------------------------------------------------------ pow */
/* a^b = exp(b log a) on the principal branch; 0^b is 0 (1 for b = 0; inf + NaN i for a real
 * b < 0), as PyTorch's std::pow. a or b complex (the other complex or real). */
ts_tensor *tsi_complex_pow(const char *op, ts_tensor *a, ts_tensor *b) {
    tsi_init();
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    ts_tensor *const ab[2] = {a, b};
    ts_device dev; /* a 0-dim cpu operand joins the other's device */
    if (!tsi_same_device(op, ab, 2, true, &dev)) return NULL;
    ts_scope_begin();
    ts_tensor *ca = ts_to(ts_to_dtype(a, r), dev), *cb = ts_to(ts_to_dtype(b, r), dev);
    if (!ca || !cb) return finish(NULL);
    cpair x = split(ca), e = split(cb);
    ts_shape s;
    if (!x.re || !e.re || !tsi_broadcast_shapes(op, x.re->shape, e.re->shape, &s))
        return finish(NULL);
    ts_tensor *zero =
        ts_logical_and(ts_eq_scalar(ts_detach(x.re), 0), ts_eq_scalar(ts_detach(x.im), 0));
    ts_tensor *ezero =
        ts_logical_and(ts_eq_scalar(ts_detach(e.re), 0), ts_eq_scalar(ts_detach(e.im), 0));
    /* log of 1 where a = 0: the other branch's gradient stays finite */
    ts_tensor *one = cst(x.re, 1.0), *zr = cst(x.re, 0.0);
    cpair safe = {ts_where(zero, one, x.re), ts_where(zero, zr, x.im)};
    cpair p = c_exp(c_mul(e, c_log(safe)));
    /* 0^b: 1 for b = 0; inf + NaN i for a real b < 0; else 0 */
    ts_tensor *neg =
        ts_logical_and(ts_lt_scalar(ts_detach(e.re), 0), ts_eq_scalar(ts_detach(e.im), 0));
    ts_tensor *zre = ts_where(ezero, one, ts_where(neg, cst(x.re, INFINITY), zr));
    ts_tensor *zim = ts_where(neg, cst(x.re, NAN), zr);
    return finish(join(op, (cpair){ts_where(zero, zre, p.re), ts_where(zero, zim, p.im)}));
}

/* a^s for a number s: 0 -> 1, 1 -> a, 2 -> a a, 0.5 -> sqrt, -0.5 -> rsqrt, -1 -> 1 / a (as
 * PyTorch's special cases), else exp(s log a) */
ts_tensor *tsi_complex_pow_scalar(const char *op, ts_tensor *a, double s) {
    tsi_init();
    if (s == 0) return ts_ones_like(a);
    if (s == 1) return ts_clone(a);
    if (s == 2) return tsi_complex_math(op, TS_U_SQUARE, a);
    if (s == 0.5) return tsi_complex_math(op, TS_U_SQRT, a);
    if (s == -0.5) return tsi_complex_math(op, TS_U_RSQRT, a);
    if (s == -1) return tsi_complex_math(op, TS_U_RECIPROCAL, a);
    ts_scope_begin();
    ts_tensor *e = ts_scalar(s, (ts_opts){.dtype = tsi_complex_part(a->dtype)});
    return finish(e ? tsi_complex_pow(op, a, e) : NULL);
}

/* s^a for a number s and a complex a: exp(a log s) */
ts_tensor *tsi_complex_rpow_scalar(const char *op, ts_tensor *a, double s) {
    tsi_init();
    ts_scope_begin();
    ts_tensor *b = ts_scalar(s, (ts_opts){.dtype = tsi_complex_part(a->dtype)});
    return finish(b ? tsi_complex_pow(op, b, a) : NULL);
}
