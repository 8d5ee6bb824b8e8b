/* binary.c — tensor-tensor elementwise front ends with broadcasting and PyTorch's type promotion
 * (add, mul, eq, logical_and...), their in-place forms and add_alpha. */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "core/capture.h"
#include "ops/complex.h"
#include "ops/elementwise.h"

static inline bool dev_eq(ts_device a, ts_device b) {
    return a.type == b.type && a.index == b.index;
}

/* t's kernel view broadcast to s, written in place (the plain view when t already has shape s). */
static inline void kview_to(ts_kview *v, const ts_tensor *t, const ts_shape *s) {
    if (tsi_ew_shape_eq(&t->shape, s))
        tsi_kview_fill(v, t);
    else
        tsi_kview_fill_broadcast(v, t, s);
}

static bool f32_or_half(ts_dtype dt) { return dt == TS_F32 || dt == TS_F16 || dt == TS_BF16; }

/* The backend computes a float32 result from these operands without casting them first. */
static bool widens(const ts_backend *be, ts_dtype c, ts_dtype o, ts_dtype da, ts_dtype db) {
    return be->binary_widening && c == TS_F32 && o == TS_F32 && f32_or_half(da) &&
           f32_or_half(db) && (da != TS_F32 || db != TS_F32);
}

/* New tensor a op b of shape s and dtype o, computed in c. An operand that needs a cast and already
 * has the full shape is cast through the output, which saves a temporary. The views are built in
 * place and passed by pointer: on a small op, copying them costs as much as the arithmetic. */
static ts_tensor *binary_new(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                             ts_dtype c, ts_dtype o, ts_shape s) {
    ts_tensor *out = tsi_new_like(op, s, o, tsi_device(a), tsi_prefers_channels_last(a) ? a : b);
    if (!out || tsi_numel(s) == 0) return out;
    const ts_backend *be = tsi_be(out);
    const int idx = tsi_dev_index(out);
    ts_kview ko, ka, kb;
    tsi_kview_fill(&ko, out);
    kview_to(&ka, a, &s);
    kview_to(&kb, b, &s);
    const ts_kview *pa = &ka, *pb = &kb;
    ts_tensor *ta = NULL, *tb = NULL;
    if (widens(be, c, o, a->dtype, b->dtype)) { /* a half operand read as it is */
        be->binary_widening(be, idx, bop, &ko, pa, pb);
        return out;
    }
    if (a->dtype != c) {
        if (o == c && tsi_ew_shape_eq(&a->shape, &s)) {
            be->copy(be, idx, &ko, &ka);
            pa = &ko;
        } else {
            if (!(ta = tsi_cast(op, a, c))) goto fail;
            kview_to(&ka, ta, &s);
        }
    }
    if (b->dtype != c) {
        if (o == c && pa != &ko && tsi_ew_shape_eq(&b->shape, &s)) {
            be->copy(be, idx, &ko, &kb);
            pb = &ko;
        } else {
            if (!(tb = tsi_cast(op, b, c))) goto fail;
            kview_to(&kb, tb, &s);
        }
    }
    be->binary(be, idx, bop, &ko, pa, pb);
    ts_release(ta);
    ts_release(tb);
    return out;
fail:
    ts_release(ta);
    ts_release(out);
    return NULL;
}

/* dst op= b: straight into dst when it has the compute dtype and b does not partly overlap it. */
static ts_tensor *binary_inplace(const char *op, ts_binary_op bop, ts_tensor *dst, ts_tensor *b,
                                 ts_dtype c, ts_dtype o, ts_shape s) {
    const ts_backend *be = tsi_be(dst);
    const int idx = tsi_dev_index(dst);
    const bool any = tsi_numel(s) > 0;
    if (o == dst->dtype && c == dst->dtype) {
        ts_tensor *tb = NULL;
        const ts_tensor *cb = b;
        const bool widening = widens(be, c, o, dst->dtype, b->dtype);
        if (b->dtype != c && !widening) {
            if (!(tb = tsi_cast(op, b, c))) return NULL;
            cb = tb;
        }
        if (!tsi_ew_overlaps(dst, cb)) {
            if (any) {
                ts_kview kd, kb;
                tsi_kview_fill(&kd, dst);
                kview_to(&kb, cb, &s);
                (widening ? be->binary_widening : be->binary)(be, idx, bop, &kd, &kd, &kb);
            }
            ts_release(tb);
            tsi_bump_version(dst);
            return ts_retain(dst);
        }
        ts_release(tb);
    }
    ts_tensor *out = binary_new(op, bop, dst, b, c, o, s);
    if (!out) return NULL;
    if (any) {
        ts_kview kd = tsi_kview(dst), ko = tsi_kview(out);
        be->copy(be, idx, &kd, &ko);
    }
    ts_release(out);
    tsi_bump_version(dst);
    return ts_retain(dst);
}

/* Both operands on one device; r is their result type. */
static ts_tensor *binary_core(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                              ts_dtype r, ts_tensor *dst) {
    const ts_dtype c = tsi_ew_compute_dtype(bop, r);
    const ts_dtype o = tsi_ew_bool_out(bop) ? TS_BOOL : c;
    ts_shape s;
    if (tsi_ew_shape_eq(&a->shape, &b->shape))
        s = a->shape;
    else if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s))
        return NULL;
    if (dst && !tsi_ew_check_inplace(op, dst, o, &s)) return NULL;
    tsi_log_op(op, tsi_device(a));
    return dst ? binary_inplace(op, bop, dst, b, c, o, s) : binary_new(op, bop, a, b, c, o, s);
}

/* The op a 0-dim cpu operand turns into when it is read as a number (a op s); false when the
 * kernels have none. */
static bool scalar_form(ts_binary_op bop, bool scalar_is_a, ts_binary_op *out) {
    *out = bop;
    switch (bop) {
    case TS_B_ADD:
    case TS_B_MUL:
    case TS_B_MAX:
    case TS_B_MIN:
    case TS_B_EQ:
    case TS_B_NE:
        return true;
    case TS_B_FMOD:
        return !scalar_is_a;
    case TS_B_SUB:
        *out = scalar_is_a ? TS_B_RSUB : bop;
        return true;
    case TS_B_DIV:
        *out = scalar_is_a ? TS_B_RDIV : bop;
        return true;
    case TS_B_POW:
        *out = scalar_is_a ? TS_B_RPOW : bop;
        return true;
    case TS_B_LT:
        *out = scalar_is_a ? TS_B_GT : bop;
        return true;
    case TS_B_LE:
        *out = scalar_is_a ? TS_B_GE : bop;
        return true;
    case TS_B_GT:
        *out = scalar_is_a ? TS_B_LT : bop;
        return true;
    case TS_B_GE:
        *out = scalar_is_a ? TS_B_LE : bop;
        return true;
    default:
        return false;
    }
}

/* One operand is a 0-dim cpu tensor and the other lives on dev (PyTorch allows this): use its value
 * as a number when that is exact, else copy it over. */
static ts_tensor *binary_mixed(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                               ts_dtype r, ts_tensor *dst, ts_device dev, bool a_is_cpu) {
    ts_tensor *x = a_is_cpu ? a : b, *t = a_is_cpu ? b : a;
    ts_binary_op sop;
    if (scalar_form(bop, a_is_cpu, &sop)) {
        const double v = ts_item(x);
        if (tsi_is_float(x->dtype) || fabs(v) <= 9007199254740992.0)
            return tsi_ew_scalar(op, sop, t, v, r, dst);
    }
    ts_tensor *xd = tsi_to_device(op, x, dev);
    if (!xd) return NULL;
    ts_tensor *res = binary_core(op, bop, a_is_cpu ? xd : a, a_is_cpu ? b : xd, r, dst);
    ts_release(xd);
    return res;
}

/* Validates, promotes and dispatches; a new reference (not in a scope) or NULL. */
static ts_tensor *binary_run(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                             bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b")) return NULL;
    ts_tensor *const ts[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, ts, 2, true, &dev)) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    if (!tsi_ew_check_binary_dtypes(op, bop, a, b, r)) return NULL;
    const bool a_off = !dev_eq(tsi_device(a), dev), b_off = !dev_eq(tsi_device(b), dev);
    if (a_off || b_off) {
        if (inplace && a_off) { /* the destination decides the device: report the mismatch */
            tsi_same_device(op, ts, 2, false, &dev);
            return NULL;
        }
        return binary_mixed(op, bop, a, b, r, inplace ? a : NULL, dev, a_off);
    }
    return binary_core(op, bop, a, b, r, inplace ? a : NULL);
}

/* binary_run plus the autograd node when the graph needs one (in place: made before the op). */
static ts_tensor *binary_rec(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                             bool inplace) {
    ts_tensor *const ins[2] = {a, b};
    if (!a || !b || tsi_ew_bool_out(bop) || !tsi_needs_graph(ins, 2))
        return tsi_own(binary_run(op, bop, a, b, inplace));
    if (!inplace)
        return tsi_own(tsi_ew_record_binary(op, bop, a, b, binary_run(op, bop, a, b, false), 1));
    ts_node *n = tsi_ew_begin_binary(op, bop, a, b);
    return n ? tsi_own(tsi_ew_finish(n, binary_run(op, bop, a, b, true))) : NULL;
}

/* autocast's policy decides by name (pow runs in f32; the others promote by themselves) */
static ts_tensor *binary_op(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                            bool inplace) {
    if (tsi_complex_in(a, b) && a && b)
        return inplace ? tsi_complex_binary_(op, bop, a, b) : tsi_complex_binary(op, bop, a, b);
    ts_tensor *const ins[2] = {a, b};
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &a, &b);
    ts_tensor *y = tsi_autocast_exit(&ac, binary_rec(op, bop, a, b, inplace));
    return tsi_trace(op, ins, 2, y, NULL, 0, NULL, 0);
}

#define BINARY(NAME, BOP)                                                                          \
    ts_tensor *ts_##NAME(ts_tensor *a, ts_tensor *b) { return binary_op(#NAME, BOP, a, b, false); }
/* binary_ops.def's PLAIN and PLAIN_INPLACE rows */
#define FRONT_PLAIN(NAME, BOP)         BINARY(NAME, BOP)
#define FRONT_PLAIN_INPLACE(NAME, BOP) BINARY(NAME, BOP)
#define FRONT_BITWISE(NAME, BOP)
#define FRONT_OWN(NAME, BOP)
#define FRONT_SCALAR(NAME, BOP)
#define FRONT_KERNEL(NAME, BOP)
#define X(ID, name, front, ...) FRONT_##front(name, TS_B_##ID)
#include "backend/binary_ops.def"
#undef X
#undef FRONT_PLAIN
#undef FRONT_PLAIN_INPLACE
#undef BINARY

/* floor_divide has no gradient (PyTorch's is not differentiable) */
static ts_tensor *binary_nograd(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    ts_tensor *const ins[2] = {a, b};
    ts_tensor *y = tsi_own(binary_run(op, bop, a, b, false));
    return tsi_trace(op, ins, 2, y, NULL, 0, NULL, 0);
}
/* special.c's functions of two arguments: validated, promoted, run and traced without a
 * graph (the caller records its own node) */
ts_tensor *tsi_binary_plain(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b) {
    ts_tensor *const ins[2] = {a, b};
    ts_tensor *y = tsi_own(binary_run(op, bop, a, b, false));
    return tsi_trace(op, ins, 2, y, NULL, 0, NULL, 0);
}
ts_tensor *ts_floor_divide(ts_tensor *a, ts_tensor *b) {
    return binary_nograd("floor_divide", TS_B_FLOORDIV, a, b);
}

/* ------------------------------------------------------------------ compositions (issue 52) */
/* ldexp: a * 2^b in the operands' result type (float32 for integers), as torch.ldexp; 2^b through
 * exp2, exact for an integral b on the CPU and CUDA (CUDA's pow(2, b) was up to 2 ulp off) */
ts_tensor *ts_ldexp(ts_tensor *a, ts_tensor *b) {
    tsi_init();
    if (!tsi_check_input("ldexp", a, "input") || !tsi_check_input("ldexp", b, "other")) return NULL;
    ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion("ldexp", r, a->dtype, b->dtype)) return NULL;
    if (!tsi_is_float(r)) r = TS_F32;
    ts_scope_begin();
    ts_tensor *y = ts_keep(ts_mul(ts_to_dtype(a, r), ts_exp2(ts_to_dtype(b, r))));
    ts_scope_end();
    return y;
}

/* float_power: pow in float64 */
ts_tensor *ts_float_power(ts_tensor *a, ts_tensor *b) {
    tsi_init();
    if (!tsi_check_input("float_power", a, "input") ||
        !tsi_check_input("float_power", b, "exponent"))
        return NULL;
    ts_scope_begin();
    ts_tensor *y = ts_keep(ts_pow(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64)));
    ts_scope_end();
    return y;
}

/* signbit: the sign bit (-0 and -NaN included) of floats, x < 0 of integers; bool out */
ts_tensor *ts_signbit(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("signbit", t, "input")) return NULL;
    if (t->dtype == TS_BOOL) return ts_zeros_like(t);
    if (!tsi_is_float(t->dtype)) return ts_lt_scalar(t, 0);
    ts_scope_begin();
    ts_tensor *d = ts_detach(t);
    ts_tensor *y = ts_keep(ts_lt_scalar(ts_copysign(ts_ones_like(d), d), 0));
    ts_scope_end();
    return y;
}

/* ------------------------------------------------------------------ bitwise ops, rounding div */
/* Integer and bool operands only (shifts: integers), as PyTorch's kernels. */
static ts_tensor *bitwise_op(const char *op, ts_binary_op bop, ts_tensor *a, ts_tensor *b,
                             bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b")) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    const bool shift = bop == TS_B_LSHIFT || bop == TS_B_RSHIFT;
    if (tsi_is_float(r) || (shift && r == TS_BOOL))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for '%s': integer%s operands only (a: %s, b: %s)",
                             op, tsi_torch_scalar_name(r), shift ? "" : " or bool", tsi_desc(a),
                             tsi_desc(b)),
               NULL;
    if (bop == TS_B_RSHIFT && r == TS_U64 && tsi_device(a).type == TS_CUDA)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: uint64 right shifts are not implemented on CUDA (a: %s)", op,
                             tsi_desc(a)),
               NULL;
    return binary_op(op, bop, a, b, inplace);
}
#define BITWISE(NAME, BOP)                                                                         \
    ts_tensor *ts_##NAME(ts_tensor *a, ts_tensor *b) {                                             \
        return bitwise_op(#NAME, BOP, a, b, false);                                                \
    }                                                                                              \
    ts_tensor *ts_##NAME##_(ts_tensor *a, ts_tensor *b) {                                          \
        return bitwise_op(#NAME "_", BOP, a, b, true);                                             \
    }
/* binary_ops.def's BITWISE rows */
#undef FRONT_BITWISE
#define FRONT_BITWISE(NAME, BOP) BITWISE(NAME, BOP)
#define FRONT_PLAIN(NAME, BOP)
#define FRONT_PLAIN_INPLACE(NAME, BOP)
#define X(ID, name, front, ...) FRONT_##front(name, TS_B_##ID)
#include "backend/binary_ops.def"
#undef X
#undef FRONT_BITWISE
#define FRONT_BITWISE(NAME, BOP)
#undef BITWISE

/* ~t: logical not on bool, -1 - t (two's complement, wrapping) on integers */
ts_tensor *ts_bitwise_not(ts_tensor *t) {
    const char *op = "bitwise_not";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->dtype == TS_BOOL) return ts_logical_not(t);
    if (tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for '%s': integer or bool input only (input: %s)",
                             op, tsi_torch_scalar_name(t->dtype), tsi_desc(t)),
               NULL;
    return ts_rsub_scalar(t, -1);
}

/* Whether the integer tensor b holds a 0 (read on the host; a captured step reads nothing). */
static bool has_zero(ts_tensor *b) {
    if (tsi_numel(b->shape) == 0 || tsi_capturing_on(tsi_device(b))) return false;
    ts_scope_begin();
    ts_tensor *z = ts_eq_scalar(b, 0), *n = z ? ts_sum(z) : NULL;
    const bool any = n && ts_item(n) > 0;
    ts_scope_end();
    return any;
}

/* the zero gradient of a rounded quotient, for each input that wants one */
static void rounded_div_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    (void)go;
    for (int i = 0; i < 2; i++)
        if (tsi_node_needs(n, i))
            gi[i] = ts_zeros(n->in_shape[i],
                             (ts_opts){.dtype = n->in_dtype[i], .device = n->in_device[i]});
}

/* torch.div(a, b, rounding_mode=): trunc(a / b) or floor(a / b) in the result dtype (integers stay
 * integers and refuse a zero divisor, as PyTorch's ZeroDivisionError); a float result records the
 * gradient PyTorch gives, zero. */
ts_tensor *ts_div_rounding(ts_tensor *a, ts_tensor *b, ts_rounding_mode mode) {
    const char *op = "div";
    tsi_init();
    if (mode == TS_ROUNDING_NONE) return ts_div(a, b);
    if (mode != TS_ROUNDING_TRUNC && mode != TS_ROUNDING_FLOOR)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown rounding_mode %d", op, (int)mode), NULL;
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b")) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (r == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: rounding_mode='%s' is not implemented for 'Bool' (a: %s, b: %s)",
                             op, mode == TS_ROUNDING_TRUNC ? "trunc" : "floor", tsi_desc(a),
                             tsi_desc(b)),
               NULL;
    if (!tsi_is_float(r) && has_zero(b))
        return tsi_error_set(TS_ERR_ARG, "%s: ZeroDivisionError (integer division by zero; b: %s)",
                             op, tsi_desc(b)),
               NULL;
    if (ts_error() != TS_OK) return NULL;
    ts_tensor *const ins[2] = {a, b};
    const ts_binary_op bop = mode == TS_ROUNDING_TRUNC ? TS_B_DIVTRUNC : TS_B_FLOORDIV;
    ts_tensor *y = tsi_own(binary_run(op, bop, a, b, false));
    if (y && tsi_is_float(y->dtype) && tsi_needs_graph(ins, 2)) {
        ts_node *n = tsi_record("DivBackward1", op, rounded_div_backward, ins, 2, y, NULL, 0);
        if (n) n->flags |= TSI_NODE_TWICE; /* zeros: their own derivative */
    }
    return tsi_trace(op, ins, 2, y, NULL, 0, NULL, 0);
}

#define BINARY_INPLACE(NAME, BOP)                                                                  \
    ts_tensor *ts_##NAME##_(ts_tensor *a, ts_tensor *b) {                                          \
        return binary_op(#NAME "_", BOP, a, b, true);                                              \
    }
/* binary_ops.def's PLAIN_INPLACE rows */
#undef FRONT_PLAIN_INPLACE
#define FRONT_PLAIN_INPLACE(NAME, BOP) BINARY_INPLACE(NAME, BOP)
#define X(ID, name, front, ...)        FRONT_##front(name, TS_B_##ID)
#include "backend/binary_ops.def"
#undef X
#undef FRONT_PLAIN
#undef FRONT_PLAIN_INPLACE
#undef FRONT_BITWISE
#undef FRONT_OWN
#undef FRONT_SCALAR
#undef FRONT_KERNEL
#undef BINARY_INPLACE

ts_tensor *ts_add_alpha(ts_tensor *a, ts_tensor *b, double alpha) {
    const char *op = "add_alpha";
    tsi_init();
    if (a && b && tsi_complex_in(a, b)) { /* a + (alpha b) through the complex path */
        ts_scope_begin();
        ts_tensor *y = tsi_complex_binary(op, TS_B_ADD, a, ts_mul_scalar(b, alpha));
        y = y ? ts_keep(y) : NULL;
        ts_scope_end();
        return y;
    }
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b")) return NULL;
    ts_tensor *const ts[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, ts, 2, true, &dev)) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    if (!tsi_is_float(r) && !tsi_ew_integral(alpha))
        return tsi_error_set(
                   TS_ERR_ARG,
                   "%s: For integral input tensors, argument alpha must not be a floating "
                   "point number. (alpha %g, a: %s, b: %s)",
                   op, alpha, tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_tensor *out;
    if (alpha == 1) {
        out = binary_run(op, TS_B_ADD, a, b, false);
    } else {
        /* b * alpha in the result dtype keeps the promotion of (a, scaled) equal to that of (a, b)
         */
        ts_tensor *scaled = tsi_ew_scalar(op, TS_B_MUL, b, alpha, r, NULL);
        if (!scaled) return NULL;
        out = binary_run(op, TS_B_ADD, a, scaled, false);
        ts_release(scaled);
    }
    if (tsi_needs_graph(ts, 2)) out = tsi_ew_record_binary(op, TS_B_ADD, a, b, out, alpha);
    return tsi_own(tsi_trace(op, ts, 2, out, NULL, 0, &alpha, 1));
}
