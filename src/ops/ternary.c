/* ternary.c — addcmul, addcdiv and lerp (tensor and scalar weight): one pass of the backend's
 * ternary kernel where it can, else composed from the binary ops (every device, gradients as
 * PyTorch's). */
#include <math.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/compose.h"
#include "ops/elementwise.h"

static bool check2(const char *op, ts_tensor *a, const char *na, ts_tensor *b, const char *nb) {
    tsi_init();
    bool ok = tsi_check_input(op, a, na);
    return tsi_check_input(op, b, nb) && ok;
}

/* ------------------------------------------------------------------ one pass where it can
 * addcmul, addcdiv and lerp run the backend's ternary kernel in one pass when no gradient is
 * recorded, no ONNX trace runs, the three operands share one floating dtype and one device, and
 * the backend has the kernel; otherwise (and for every gradient) they are composed from the
 * binary ops below, which give the same values (the same formula, term for term). NULL with no
 * error set: not taken. */
static ts_tensor *fused3(const char *op, ts_ternary_op top, ts_tensor *a, ts_tensor *b,
                         ts_tensor *c, double pv) {
    ts_tensor *const ins[3] = {a, b, c};
    const int n = c ? 3 : 2;
    if (tsi_trace_active || tsi_needs_graph(ins, n) || !tsi_is_float(a->dtype)) return NULL;
    const ts_device dev = tsi_device(a);
    for (int i = 1; i < n; i++) {
        const ts_device d = tsi_device(ins[i]);
        if (ins[i]->dtype != a->dtype || d.type != dev.type || d.index != dev.index) return NULL;
    }
    const ts_backend *be = tsi_be(a);
    if (!be->ternary) return NULL;
    ts_shape ab, s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &ab) ||
        !tsi_broadcast_shapes(op, ab, c ? c->shape : ab, &s))
        return NULL; /* error set: the caller returns it */
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, s, a->dtype, dev);
    if (out && tsi_numel(s) > 0) {
        const ts_kview ko = tsi_kview(out), ka = tsi_ew_kview_to(a, &s),
                       kb = tsi_ew_kview_to(b, &s), kc = c ? tsi_ew_kview_to(c, &s) : kb;
        be->ternary(be, tsi_dev_index(out), top, &ko, &ka, &kb, &kc, pv);
    }
    return tsi_own(out);
}

/* ------------------------------------------------------------------ addcmul, addcdiv */
static ts_tensor *addc(const char *op, ts_tensor *t, ts_tensor *a, ts_tensor *b, double value,
                       bool div) {
    tsi_init();
    bool ok = tsi_check_input(op, t, "input");
    ok = tsi_check_input(op, a, "tensor1") && ok;
    if (!(tsi_check_input(op, b, "tensor2") && ok)) return NULL;
    ts_tensor *const ins[3] = {t, a, b};
    ts_device dev;
    if (!tsi_same_device(op, ins, 3, true, &dev)) return NULL;
    if (div && !tsi_is_float(a->dtype) && !tsi_is_float(b->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Integer division with addcdiv is no longer supported (%s and "
                             "%s); convert the tensors to a floating dtype",
                             op, tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_dtype ab = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, ab, a->dtype, b->dtype)) return NULL;
    ts_tensor *y = fused3(op, div ? TS_T_ADDCDIV : TS_T_ADDCMUL, t, a, b, value);
    if (y || ts_error() != TS_OK) return y;
    /* an integer result takes value converted to its type (PyTorch's Scalar::to: truncated) */
    if (!tsi_is_float(ab) && !tsi_is_float(t->dtype)) value = trunc(value);
    ts_scope_begin();
    /* PyTorch's order: input + value * tensor1 op tensor2, in the operands' common dtype */
    ts_tensor *x = a->dtype == ab ? a : ts_to_dtype(a, ab);
    if (value != 1) x = ts_mul_scalar(x, value);
    x = div ? ts_div(x, b) : ts_mul(x, b);
    return finish(ts_add(t, x));
}

ts_tensor *ts_addcmul(ts_tensor *t, ts_tensor *a, ts_tensor *b, double value) {
    return addc("addcmul", t, a, b, value, false);
}
ts_tensor *ts_addcdiv(ts_tensor *t, ts_tensor *a, ts_tensor *b, double value) {
    return addc("addcdiv", t, a, b, value, true);
}

/* ------------------------------------------------------------------ lerp */
static bool lerp_check(const char *op, ts_tensor *s, ts_tensor *e, ts_tensor *w) {
    if (!check2(op, s, "input", e, "end") || (w && !tsi_check_input(op, w, "weight"))) return false;
    ts_tensor *const ins[3] = {s, e, w};
    ts_device dev;
    if (!tsi_same_device(op, ins, w ? 3 : 2, true, &dev)) return false;
    ts_tensor *bad = e->dtype != s->dtype ? e : w && w->dtype != s->dtype ? w : NULL;
    if (bad) {
        tsi_error_set(TS_ERR_DTYPE, "%s: expected dtype %s for `%s` but got dtype %s", op,
                      ts_dtype_name(s->dtype), bad == e ? "end" : "weight",
                      ts_dtype_name(bad->dtype));
        return false;
    }
    if (!tsi_is_float(s->dtype)) {
        tsi_error_set(TS_ERR_DTYPE, "%s: \"lerp_kernel\" not implemented for '%s'", op,
                      tsi_torch_scalar_name(s->dtype));
        return false;
    }
    return true;
}

ts_tensor *ts_lerp(ts_tensor *start, ts_tensor *end, ts_tensor *weight) {
    const char *op = "lerp";
    if (!lerp_check(op, start, end, weight)) return NULL;
    ts_tensor *y = fused3(op, TS_T_LERP, start, end, weight, 0);
    if (y || ts_error() != TS_OK) return y;
    ts_scope_begin();
    /* |w| < 0.5: start + w * (end - start); else end - (end - start) * (1 - w) */
    ts_tensor *d = ts_sub(end, start);
    ts_tensor *lo = ts_add(start, ts_mul(weight, d));
    ts_tensor *hi = ts_sub(end, ts_mul(d, ts_rsub_scalar(weight, 1)));
    ts_tensor *small = ts_lt_scalar(ts_abs(ts_detach(weight)), 0.5);
    return finish(ts_where(small, lo, hi));
}

ts_tensor *ts_lerp_scalar(ts_tensor *start, ts_tensor *end, double weight) {
    const char *op = "lerp";
    if (!lerp_check(op, start, end, NULL)) return NULL;
    ts_tensor *y = fused3(op, TS_T_LERP_SCALAR, start, end, NULL, weight);
    if (y || ts_error() != TS_OK) return y;
    ts_scope_begin();
    ts_tensor *d = ts_sub(end, start);
    if (fabs(weight) < 0.5)
        y = ts_add(start, ts_mul_scalar(d, weight));
    else
        y = ts_sub(end, ts_mul_scalar(d, 1 - weight));
    /* the result must span both operands' shapes even where weight is 0 or 1 */
    return finish(y);
}
