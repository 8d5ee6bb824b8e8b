/* loss_pointwise.c — the elementwise losses reduced (kl_div, huber, poisson_nll, gaussian_nll),
 * composed from differentiable ops as PyTorch's aten/src/ATen/native/Loss*.cpp and
 * torch/nn/functional.py compute them: every device, autograd for free. The ops on PyTorch's
 * autocast fp32 list run in float32 under autocast (gaussian_nll and multilabel_soft_margin are
 * Python composites there, not listed). */
#include <math.h>

#include "amp/autocast.h"
#include "nn/loss_checks.h"

#define PI_ 3.14159265358979323846

/* ------------------------------------------------------------------------------------ kl_div */
static ts_tensor *kl_div_body(ts_tensor *in, ts_tensor *tg, ts_reduction r, bool batchmean,
                              bool log_target) {
    ts_tensor *loss =
        log_target ? ts_mul(ts_exp(tg), ts_sub(tg, in)) : ts_sub(ts_xlogy(tg, tg), ts_mul(tg, in));
    if (!batchmean) return tsi_loss_reduce(loss, r);
    ts_tensor *s = ts_sum(loss);
    return in->shape.ndim ? ts_div_scalar(s, (double)in->shape.dims[0]) : s;
}

static ts_tensor *kl_div_op(ts_tensor *input, ts_tensor *target, ts_reduction r, bool batchmean,
                            bool log_target) {
    tsi_init();
    if (!pointwise2("kl_div", input, target, batchmean ? TS_REDUCTION_SUM : r)) return NULL;
    LOSS_BODY(kl_div_body(input, target, r, batchmean, log_target));
}

ts_tensor *ts_kl_div(ts_tensor *input, ts_tensor *target, ts_reduction r, bool batchmean,
                     bool log_target) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "kl_div", &input, &target);
    return tsi_autocast_exit(&ac, kl_div_op(input, target, r, batchmean, log_target));
}

/* -------------------------------------------------------------------------------- huber_loss */
static ts_tensor *huber_body(ts_tensor *in, ts_tensor *tg, ts_reduction r, double delta,
                             ts_tensor *w) {
    /* with m = min(z, delta): m (z - m / 2) is z^2 / 2 below delta and delta (z - delta / 2)
     * above, with PyTorch's gradient on both sides */
    /* the result has the input's dtype, promoted with the weight's (PyTorch 2.15: a float64
     * target does not widen a float32 input's loss); computed in the wider and rounded once */
    ts_tensor *z = ts_abs(ts_sub(in, tg));
    ts_tensor *m = ts_clamp_max(z, delta);
    ts_tensor *loss = ts_to_dtype(ts_mul(m, ts_add_alpha(z, m, -0.5)), in->dtype);
    if (w) loss = ts_mul(loss, w);
    return tsi_loss_reduce(loss, r);
}

static ts_tensor *huber_loss_op(ts_tensor *input, ts_tensor *target, ts_reduction r, double delta,
                                ts_tensor *weight) {
    const char *op = "huber_loss";
    tsi_init();
    ts_tensor *ts[3] = {input, target, weight};
    static const char *const names[3] = {"input", "target", "weight"};
    if (!check_all(op, ts, names, 3, 2, r) || !need_float(op, input, "input") ||
        !broadcastable(op, input, target))
        return NULL;
    if (!(delta > 0))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: huber_loss does not support non-positive values for delta.", op),
               NULL;
    if (weight && !tsi_shape_equal(weight->shape, input->shape))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Weights and input must have the same size (weight %s, input %s)",
                             op, tsi_shape_str(weight->shape), tsi_shape_str(input->shape)),
               NULL;
    LOSS_BODY(huber_body(input, target, r, delta, weight));
}

ts_tensor *ts_huber_loss(ts_tensor *input, ts_tensor *target, ts_reduction r, double delta,
                         ts_tensor *weight) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "huber_loss", &input, &target, &weight);
    return tsi_autocast_exit(&ac, huber_loss_op(input, target, r, delta, weight));
}

/* ------------------------------------------------------------------------ poisson_nll_loss */
static ts_tensor *poisson_body(ts_tensor *in, ts_tensor *tg, bool log_input, bool full, double eps,
                               ts_reduction r) {
    ts_tensor *loss = log_input ? ts_sub(ts_exp(in), ts_mul(tg, in))
                                : ts_sub(in, ts_mul(tg, ts_log(ts_add_scalar(in, eps))));
    if (full) {
        /* Stirling: t log t - t + log(2 pi t) / 2, only where t > 1 */
        ts_tensor *st = ts_add(ts_sub(ts_mul(tg, ts_log(tg)), tg),
                               ts_mul_scalar(ts_log(ts_mul_scalar(tg, 2 * PI_)), 0.5));
        loss = ts_add(loss, ts_masked_fill(st, ts_le_scalar(tg, 1), 0));
    }
    return tsi_loss_reduce(loss, r);
}

static ts_tensor *poisson_nll_loss_op(ts_tensor *input, ts_tensor *target, bool log_input,
                                      bool full, double eps, ts_reduction r) {
    tsi_init();
    if (!pointwise2("poisson_nll_loss", input, target, r)) return NULL;
    LOSS_BODY(poisson_body(input, target, log_input, full, eps, r));
}

ts_tensor *ts_poisson_nll_loss(ts_tensor *input, ts_tensor *target, bool log_input, bool full,
                               double eps, ts_reduction r) {
    tsi_ac_frame ac; /* autocast: float32 */
    TSI_AUTOCAST_ENTER(&ac, "poisson_nll_loss", &input, &target);
    return tsi_autocast_exit(&ac, poisson_nll_loss_op(input, target, log_input, full, eps, r));
}

/* ------------------------------------------------------------------------ gaussian_nll_loss */
static ts_tensor *gaussian_body(ts_tensor *in, ts_tensor *tg, ts_tensor *var, bool unsq, bool full,
                                double eps, ts_reduction r) {
    if (unsq) var = ts_unsqueeze(var, -1);
    /* clamped at eps, the gradient passing as if unclamped (PyTorch clamps a clone under
     * no_grad): var + detach(clamp(var) - var), exact where var >= eps */
    ts_tensor *v = ts_add(var, ts_detach(ts_sub(ts_clamp_min(var, eps), var)));
    ts_tensor *d = ts_sub(in, tg);
    ts_tensor *loss = ts_mul_scalar(ts_add(ts_log(v), ts_div(ts_mul(d, d), v)), 0.5);
    if (full) loss = ts_add_scalar(loss, 0.5 * log(2 * PI_));
    return tsi_loss_reduce(loss, r);
}

ts_tensor *ts_gaussian_nll_loss(ts_tensor *input, ts_tensor *target, ts_tensor *var, bool full,
                                double eps, ts_reduction r) {
    const char *op = "gaussian_nll_loss";
    tsi_init();
    ts_tensor *ts[3] = {input, target, var};
    static const char *const names[3] = {"input", "target", "var"};
    if (!check_all(op, ts, names, 3, 3, r) || !need_float(op, input, "input") ||
        !need_float(op, var, "var") || !broadcastable(op, input, target))
        return NULL;
    ts_shape is = input->shape, vs = var->shape;
    bool unsq = false;
    if (!tsi_shape_equal(is, vs)) {
        bool lead = is.ndim >= 1; /* input.size()[:-1] == var.size() */
        if (lead && vs.ndim == is.ndim - 1) {
            for (int i = 0; i < vs.ndim; i++) lead = lead && vs.dims[i] == is.dims[i];
        } else
            lead = false;
        /* or the same ndim, the var sizes where the two differ summing to 1 (one dim of 1) */
        int64_t odd = 0;
        for (int i = 0; vs.ndim == is.ndim && i < is.ndim; i++)
            if (vs.dims[i] != is.dims[i]) odd += vs.dims[i];
        bool last1 = vs.ndim == is.ndim && odd == 1;
        if (lead)
            unsq = true;
        else if (!last1)
            return tsi_error_set(TS_ERR_SHAPE, "%s: var is of incorrect size (var %s, input %s)",
                                 op, tsi_shape_str(vs), tsi_shape_str(is)),
                   NULL;
    }
    ts_scope_begin(); /* a meta var has no values to check */
    double nneg = ts_device_of(var).type == TS_META
                      ? 0
                      : ts_item(ts_sum(ts_to_dtype(ts_lt_scalar(var, 0), TS_I64)));
    ts_scope_end();
    if (isnan(nneg)) return NULL;
    if (nneg > 0) return tsi_error_set(TS_ERR_ARG, "%s: var has negative entry/entries", op), NULL;
    LOSS_BODY(gaussian_body(input, target, var, unsq, full, eps, r));
}
