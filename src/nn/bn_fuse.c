/* bn_fuse.c — torch.nn.utils.fusion's fuse_conv_bn_weights and fuse_linear_bn_weights: the
 * public form of the eval path's batch-norm fold (bn_fold.h), for code that rewrites its model. */
#include "nn/bn_fold.h"

#include "core/internal.h"

/* t (NULL allowed when optional) is a floating vector of o elements (or 1 when one_ok) on w's
 * device; false with the error set */
static bool stat_ok(const char *op, const char *name, ts_tensor *t, ts_tensor *w, int64_t o,
                    bool optional, bool one_ok) {
    if (!t) {
        if (optional) return true;
        return tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, name), false;
    }
    if (!tsi_check_input(op, t, name)) return false;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: %s (%s) is not floating point", op, name,
                             tsi_desc(t)),
               false;
    if (ts_ndim(t) != 1 || (ts_numel(t) != o && !(one_ok && ts_numel(t) == 1)))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: %s (%s) must have one value per output channel (%lld)", op, name,
                             tsi_desc(t), (long long)o),
               false;
    if (!tsi_device_eq(ts_device_of(t), ts_device_of(w)))
        return tsi_error_set(TS_ERR_DEVICE, "%s: %s (%s) is not on the weight's device (%s)", op,
                             name, tsi_desc(t), tsi_desc(w)),
               false;
    return true;
}

/* [1] broadcast to [o] (the linear form's single-feature batch norm) */
static ts_tensor *widen(ts_tensor *t, int64_t o) {
    return t && ts_numel(t) == 1 && o != 1 ? ts_contiguous(ts_expand(t, TS_SHAPE(o))) : t;
}

/* the fold of w2 ([O, ...]) into the caller's scope: *w_out reshaped to w2's shape (transposed
 * back when transpose), *b_out; b's dtype for the bias */
static ts_status fuse(const char *op, ts_tensor *w, ts_tensor *b, ts_tensor *mean, ts_tensor *var,
                      double eps, ts_tensor *gamma, ts_tensor *beta, bool transpose, bool linear,
                      ts_tensor **w_out, ts_tensor **b_out) {
    tsi_init();
    if (!w_out || !b_out) return tsi_error_set(TS_ERR_ARG, "%s: w_out or b_out is NULL", op);
    *w_out = *b_out = NULL;
    if (!tsi_check_input(op, w, "weight")) return ts_error();
    if (!tsi_is_float(w->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: weight (%s) is not floating point", op,
                             tsi_desc(w));
    if (linear ? ts_ndim(w) != 2 : ts_ndim(w) < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: weight (%s) must be %s", op, tsi_desc(w),
                             linear ? "[out_features, in_features]" : "[O, I/groups, ...]");
    if (eps != eps) return tsi_error_set(TS_ERR_ARG, "%s: eps is NaN", op);
    const int64_t o = ts_size(w, transpose ? 1 : 0);
    if (!stat_ok(op, "bias", b, w, o, true, false) ||
        !stat_ok(op, "running_mean", mean, w, o, false, linear) ||
        !stat_ok(op, "running_var", var, w, o, false, linear) ||
        !stat_ok(op, "bn weight", gamma, w, o, true, linear) ||
        !stat_ok(op, "bn bias", beta, w, o, true, linear))
        return ts_error();
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *w2 = transpose ? ts_contiguous(ts_transpose(w, 0, 1)) : w;
    tsi_bn_fold_src src = {.w = w2,
                           .b = b,
                           .scale = widen(gamma, o),
                           .shift = widen(beta, o),
                           .mean = widen(mean, o),
                           .var = widen(var, o),
                           .eps = eps,
                           .dtype = TS_F64};
    ts_tensor *fw = NULL, *fb = NULL;
    tsi_bn_fold_result r = ts_error() ? TSI_BN_FOLD_FAILED : tsi_bn_fold(&src, &fw, &fb);
    if (r == TSI_BN_FOLD_NOT_FINITE)
        tsi_error_set(TS_ERR_ARG,
                      "%s: the folded scale gamma / sqrt(running_var + eps) or bias is not finite "
                      "(a running_var of -eps or less, or a non-finite statistic)",
                      op);
    if (r == TSI_BN_FOLD_DONE) {
        ts_tensor *wo = ts_to_dtype(fw, w->dtype);
        if (transpose) wo = ts_contiguous(ts_transpose(wo, 0, 1));
        ts_tensor *bo = ts_to_dtype(fb, b ? b->dtype : w->dtype);
        if (!ts_error()) *w_out = ts_keep(wo);
        if (!ts_error()) *b_out = ts_keep(bo);
    }
    ts_release(fw), ts_release(fb);
    ts_no_grad_end();
    ts_scope_end();
    if (ts_error()) *w_out = *b_out = NULL; /* kept ones go with the caller's scope */
    return ts_error();
}

ts_status ts_fuse_conv_bn_weights(ts_tensor *w, ts_tensor *b, ts_tensor *mean, ts_tensor *var,
                                  double eps, ts_tensor *gamma, ts_tensor *beta, bool transpose,
                                  ts_tensor **w_out, ts_tensor **b_out) {
    return fuse("fuse_conv_bn_weights", w, b, mean, var, eps, gamma, beta, transpose, false, w_out,
                b_out);
}

ts_status ts_fuse_linear_bn_weights(ts_tensor *w, ts_tensor *b, ts_tensor *mean, ts_tensor *var,
                                    double eps, ts_tensor *gamma, ts_tensor *beta,
                                    ts_tensor **w_out, ts_tensor **b_out) {
    return fuse("fuse_linear_bn_weights", w, b, mean, var, eps, gamma, beta, false, true, w_out,
                b_out);
}
