/* loss_focal.c — torchvision.ops.sigmoid_focal_loss (RetinaNet), in torchvision's order of
 * operations (focal_loss.py):
 *   p = sigmoid(x), ce = binary_cross_entropy_with_logits(x, t), p_t = p t + (1 - p)(1 - t),
 *   loss = ce (1 - p_t)^gamma, times alpha t + (1 - alpha)(1 - t) when alpha >= 0,
 * reduced by r. Composed of public ops (ce is ts_bce_with_logits: softplus-based, its relative
 * precision kept for large logits; its result dtype is the target's, PyTorch's rule), so
 * differentiable on every device. */
#include <math.h>

#include "nn/functional_internal.h"

static const char *OP = "sigmoid_focal_loss";

static bool focal_check(ts_tensor *x, ts_tensor *t, ts_reduction r, double gamma) {
    if (!tsi_check_input(OP, x, "inputs") || !tsi_check_input(OP, t, "targets")) return false;
    ts_tensor *both[2] = {x, t};
    ts_device dev;
    if (!tsi_same_device(OP, both, 2, false, &dev) || !tsi_check_reduction(OP, r)) return false;
    if (!tsi_shape_equal(x->shape, t->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Target size (%s) must be the same as input size (%s)", OP,
                             tsi_shape_str(t->shape), tsi_shape_str(x->shape)),
               false;
    for (int i = 0; i < 2; i++)
        if (!tsi_is_float(both[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", OP,
                                 i ? "targets" : "inputs", tsi_desc(both[i])),
                   false;
    if (!isfinite(gamma))
        return tsi_error_set(TS_ERR_ARG, "%s: gamma must be finite, got %g", OP, gamma), false;
    return true;
}

ts_tensor *ts_sigmoid_focal_loss(ts_tensor *inputs, ts_tensor *targets, double alpha, double gamma,
                                 ts_reduction r) {
    tsi_init();
    if (!focal_check(inputs, targets, r, gamma)) return NULL;
    ts_scope_begin();
    ts_tensor *p = ts_sigmoid(inputs);
    ts_tensor *ce =
        ts_bce_with_logits(inputs, targets, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    ts_tensor *p_t =
        ts_add(ts_mul(p, targets), ts_mul(ts_rsub_scalar(p, 1), ts_rsub_scalar(targets, 1)));
    ts_tensor *loss = ts_mul(ce, ts_pow_scalar(ts_rsub_scalar(p_t, 1), gamma));
    if (alpha >= 0) {
        ts_tensor *alpha_t = ts_add(ts_mul_scalar(targets, alpha),
                                    ts_mul_scalar(ts_rsub_scalar(targets, 1), 1 - alpha));
        loss = ts_mul(alpha_t, loss);
    }
    ts_tensor *y = loss ? tsi_loss_reduce(loss, r) : NULL;
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
