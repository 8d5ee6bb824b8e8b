/* elementwise.c — checks shared by the elementwise front ends (in-place rules, PyTorch's dtype
 * errors, overlap). */
#include <stdio.h>

#include "ops/elementwise.h"

/* First and one-past-last byte a view can touch (strides are never negative). */
static void byte_span(const ts_tensor *t, uintptr_t *lo, uintptr_t *hi) {
    size_t es = tsi_dtype_size(t->dtype);
    int64_t last = 0;
    for (int i = 0; i < t->shape.ndim; i++) last += (t->shape.dims[i] - 1) * t->strides[i];
    *lo = (uintptr_t)(t->storage->data + t->offset * (int64_t)es);
    *hi = *lo + (uintptr_t)(last * (int64_t)es) + es;
}

bool tsi_ew_overlaps(const ts_tensor *a, const ts_tensor *b) {
    if (a->storage != b->storage || tsi_ew_same_view(a, b)) return false;
    if (tsi_numel(a->shape) == 0 || tsi_numel(b->shape) == 0) return false;
    uintptr_t alo, ahi, blo, bhi;
    byte_span(a, &alo, &ahi);
    byte_span(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

ts_tensor *tsi_ew_clone(const char *op, ts_tensor *x) {
    ts_tensor *c = tsi_new_like(op, x->shape, x->dtype, tsi_device(x), x);
    if (c && tsi_numel(x->shape) > 0) {
        ts_kview kc = tsi_kview(c), kx = tsi_kview(x);
        tsi_be(x)->copy(tsi_be(x), tsi_dev_index(x), &kc, &kx);
    }
    return c;
}

bool tsi_ew_check_inplace(const char *op, ts_tensor *dst, ts_dtype result, const ts_shape *bshape) {
    if (!tsi_check_inplace(op, dst)) return false; /* leaves that require grad (grad mode on) */
    if (!tsi_check_no_self_overlap(op, dst)) return false;
    if (!tsi_ew_can_cast(result, dst->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: result type %s can't be cast to the desired output type %s "
                             "(output %s)",
                             op, tsi_torch_scalar_name(result), tsi_torch_scalar_name(dst->dtype),
                             tsi_desc(dst)),
               false;
    if (bshape && !tsi_ew_shape_eq(bshape, &dst->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: output with shape %s doesn't match the broadcast shape %s", op,
                             tsi_shape_str(dst->shape), tsi_shape_str(*bshape)),
               false;
    return true;
}

/* "(a: float32 [3] on cpu, b: bool [3] on cpu)" or "(a: bool [3] on cpu)" */
static const char *operands_str(const ts_tensor *a, const ts_tensor *b) {
    char *buf = tsi_fmt_buf();
    if (b)
        snprintf(buf, TSI_FMT_BUF_LEN, "(a: %s, b: %s)", tsi_desc(a), tsi_desc(b));
    else
        snprintf(buf, TSI_FMT_BUF_LEN, "(a: %s)", tsi_desc(a));
    return buf;
}

const unsigned char tsi_ew_binary_rules[TS_B_COUNT] = {
#define X(ID, name, front, dtype, ...) TSI_BR_##dtype,
#include "backend/binary_ops.def"
#undef X
};

bool tsi_ew_check_binary_dtypes(const char *op, ts_binary_op bop, const ts_tensor *a,
                                const ts_tensor *b, ts_dtype r) {
    switch ((tsi_ew_binary_rule)tsi_ew_binary_rules[bop]) {
    case TSI_BR_SUB:
        if (a->dtype == TS_BOOL && b && b->dtype == TS_BOOL)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: Subtraction, the `-` operator, with two bool tensors is not "
                                 "supported. Use the `^` or `logical_xor()` operator instead. %s",
                                 op, operands_str(a, b)),
                   false;
        if (a->dtype == TS_BOOL || (b && b->dtype == TS_BOOL))
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: Subtraction, the `-` operator, with a bool tensor is not "
                                 "supported. If you are trying to invert a mask, use the `~` or "
                                 "`logical_not()` operator instead. %s",
                                 op, operands_str(a, b)),
                   false;
        return true;
    case TSI_BR_NO_BOOL:
        if (r == TS_BOOL)
            return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for 'Bool' %s", op,
                                 operands_str(a, b)),
                   false;
        return true;
    case TSI_BR_FLOAT_ONLY: /* hypot, nextafter, logaddexp: PyTorch has them for floats only */
        if (!tsi_is_float(r))
            return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for '%s' %s", op,
                                 tsi_torch_scalar_name(r), operands_str(a, b)),
                   false;
        return true;
    default:
        return true;
    }
}
