/* loss.c — the regression losses (mse, l1, smooth_l1) and binary_cross_entropy_with_logits,
 * composed from differentiable primitives. */
#include "amp/autocast.h"
#include "nn/functional_internal.h"

/* input and target on one device, broadcastable (PyTorch warns when the shapes differ and
 * broadcasts), of a floating result dtype. */
static bool pointwise_check(const char *op, ts_tensor *in, ts_tensor *tg, ts_reduction r) {
    if (!tsi_check_input(op, in, "input") || !tsi_check_input(op, tg, "target")) return false;
    ts_tensor *all[2] = {in, tg};
    ts_device dev;
    ts_shape bs;
    if (!tsi_same_device(op, all, 2, true, &dev) || !tsi_check_reduction(op, r) ||
        !tsi_broadcast_shapes(op, in->shape, tg->shape, &bs))
        return false;
    if (!tsi_is_float(ts_promote_types(in->dtype, tg->dtype)))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected floating point input or target, got %s and %s", op,
                             tsi_desc(in), tsi_desc(tg)),
               false;
    return true;
}

static ts_tensor *mse_loss_op(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    const char *op = "mse_loss";
    tsi_init();
    if (!pointwise_check(op, input, target, o.reduction)) return NULL;
    ts_scope_begin();
    ts_tensor *d = ts_sub(input, target);
    ts_tensor *y = tsi_loss_reduce(tsi_nn_mul_into(d, d), o.reduction);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_mse_loss_ex(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "mse_loss", &input, &target);
    return tsi_autocast_exit(&ac, mse_loss_op(input, target, o));
}

ts_tensor *ts_mse_loss(ts_tensor *input, ts_tensor *target) {
    return ts_mse_loss_ex(input, target, (ts_loss_opts){0});
}

/* |input - target|, in place on the difference when no graph is recorded */
static ts_tensor *abs_diff(ts_tensor *input, ts_tensor *target) {
    ts_tensor *d = ts_sub(input, target);
    ts_tensor *both[2] = {input, target};
    return tsi_needs_graph(both, 2) ? ts_abs(d) : ts_abs_(d);
}

static ts_tensor *l1_loss_op(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    const char *op = "l1_loss";
    tsi_init();
    if (!pointwise_check(op, input, target, o.reduction)) return NULL;
    ts_scope_begin();
    ts_tensor *y = tsi_loss_reduce(abs_diff(input, target), o.reduction);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_l1_loss(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "l1_loss", &input, &target);
    return tsi_autocast_exit(&ac, l1_loss_op(input, target, o));
}

/* PyTorch's smooth_l1_loss: beta 0 is the L1 loss, a negative beta an error */
static ts_tensor *smooth_l1_loss_op(ts_tensor *input, ts_tensor *target, ts_reduction r,
                                    double beta) {
    const char *op = "smooth_l1_loss";
    tsi_init();
    if (!pointwise_check(op, input, target, r)) return NULL;
    if (!(beta >= 0))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: smooth_l1_loss does not support negative values for "
                             "beta (got %g).",
                             op, beta),
               NULL;
    if (beta == 0) return l1_loss_op(input, target, (ts_loss_opts){.reduction = r});
    ts_scope_begin();
    /* with m = min(z, beta): m * (z - m / 2) / beta is z^2 / (2 beta) below beta and
     * z - beta / 2 above, with the right gradient on both sides, in four passes and no mask */
    ts_tensor *z = abs_diff(input, target);
    ts_tensor *m = ts_clamp_max(z, beta);
    ts_tensor *y = tsi_loss_reduce(ts_mul(m, ts_add_alpha(z, m, -0.5)), r);
    if (beta != 1) y = ts_div_scalar(y, beta);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_smooth_l1_loss(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "smooth_l1_loss", &input, &target);
    return tsi_autocast_exit(
        &ac, smooth_l1_loss_op(input, target, o.reduction, o.beta == 0 ? 1.0 : o.beta));
}

ts_tensor *ts_smooth_l1_loss_beta(ts_tensor *input, ts_tensor *target, ts_reduction reduction,
                                  double beta) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "smooth_l1_loss", &input, &target);
    return tsi_autocast_exit(&ac, smooth_l1_loss_op(input, target, reduction, beta));
}

static bool bce_check(const char *op, ts_tensor *x, ts_tensor *y, ts_loss_opts o) {
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, y, "target")) return false;
    ts_tensor *all[4] = {x, y, o.weight, o.pos_weight};
    ts_device dev;
    if (!tsi_same_device(op, all, 4, false, &dev) || !tsi_check_reduction(op, o.reduction))
        return false;
    bool same = x->shape.ndim == y->shape.ndim;
    for (int i = 0; same && i < x->shape.ndim; i++) same = x->shape.dims[i] == y->shape.dims[i];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Target size (%s) must be the same as input size (%s)", op,
                             tsi_shape_str(y->shape), tsi_shape_str(x->shape)),
               false;
    ts_tensor *ts[4] = {x, y, o.weight, o.pos_weight};
    const char *names[4] = {"input", "target", "weight", "pos_weight"};
    for (int i = 0; i < 4; i++) {
        if (!ts[i]) continue;
        if (!tsi_is_float(ts[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", op,
                                 names[i], tsi_desc(ts[i])),
                   false;
        ts_shape bs;
        if (i >= 2 &&
            (!tsi_broadcast_shapes(op, x->shape, ts[i]->shape, &bs) || bs.ndim != x->shape.ndim))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: %s %s does not broadcast to the input's shape %s", op,
                                 names[i], tsi_shape_str(ts[i]->shape), tsi_shape_str(x->shape)),
                   false;
    }
    return true;
}

static ts_tensor *bce_with_logits_op(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    const char *op = "binary_cross_entropy_with_logits";
    tsi_init();
    if (!bce_check(op, input, target, o)) return NULL;
    ts_scope_begin();
    /* The result has the target's dtype, whatever the others' are (PyTorch 2.15: its kernel
     * writes into (1 - target) in place; float64 logits with a float32 target give float32).
     * The elements and their reduction are computed in the widest dtype of the operands and
     * the result rounded once to it: the input's gradient then carries no rounding to the
     * narrow dtype (PyTorch's backward computes (sigmoid(x) - t) g / n in the input's dtype),
     * and the reduced value is the wide one rounded. */
    const ts_dtype out_dt = target->dtype;
    ts_dtype wide = ts_promote_types(input->dtype, target->dtype);
    if (o.weight) wide = ts_promote_types(wide, o.weight->dtype);
    if (o.pos_weight) wide = ts_promote_types(wide, o.pos_weight->dtype);
    ts_tensor *x = ts_to_dtype(input, wide), *t = ts_to_dtype(target, wide);
    ts_tensor *w = o.weight ? ts_to_dtype(o.weight, wide) : NULL;
    ts_tensor *pw = o.pos_weight ? ts_to_dtype(o.pos_weight, wide) : NULL;
    /* (1 - y) x + lw log(1 + e^-x), lw = 1 + (pos_weight - 1) y; -logsigmoid(x) is
     * log(1 + e^-x) without overflow and with its relative precision for large |x|, and its
     * derivative sigmoid(-x) exact there (softplus's threshold 20 made it 1 for x < -20: an
     * error of e^-20 = 2e-9 in the float64 gradient) */
    ts_tensor *sp = ts_neg(ts_logsigmoid(x));
    if (pw) sp = ts_mul(ts_add_scalar(ts_mul(ts_sub_scalar(pw, 1), t), 1), sp);
    ts_tensor *loss = ts_add(ts_mul(ts_rsub_scalar(t, 1), x), sp);
    if (w) loss = ts_mul(loss, w);
    ts_tensor *y = ts_to_dtype(tsi_loss_reduce(loss, o.reduction), out_dt);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *ts_bce_with_logits(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac; /* autocast: float32, the weights too */
    TSI_AUTOCAST_ENTER(&ac, "binary_cross_entropy_with_logits", &input, &target, &o.weight,
                       &o.pos_weight);
    return tsi_autocast_exit(&ac, bce_with_logits_op(input, target, o));
}
