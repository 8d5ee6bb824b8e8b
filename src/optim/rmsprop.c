/* rmsprop.c — torch.optim.RMSprop: alpha, eps, centered, momentum, weight decay, maximize. */
#include "optim/optim_internal.h"

static bool rmsprop_slot_used(const ts_optim_hparams *h, int slot) {
    return slot == 0 || (slot == 1 && h->momentum > 0) || (slot == 2 && h->centered);
}

const tsi_optim_kind_info tsi_rmsprop_info = {
    .name = "RMSprop",
    .slot_names = {"square_avg", "momentum_buffer", "grad_avg"},
    .has_step = true,
    .slot_used = rmsprop_slot_used,
};

/* Zero fields take torch's defaults (lr, alpha, eps); then torch's checks. */
static bool rmsprop_hparams(const char *op, ts_rmsprop_opts o, ts_optim_hparams *h) {
    double lr = o.lr == 0 ? 1e-2 : o.lr, alpha = o.alpha == 0 ? 0.99 : o.alpha;
    double eps = o.eps == 0 ? 1e-8 : o.eps;
    if (!(lr >= 0)) return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g", op, lr), false;
    if (!(eps >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid epsilon value %g", op, eps), false;
    if (!(o.momentum >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid momentum value %g", op, o.momentum), false;
    if (!(o.weight_decay >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid weight_decay value %g", op, o.weight_decay),
               false;
    /* PyTorch checks alpha >= 0 only; above 1 the square average goes negative (NaN steps) */
    if (!(alpha >= 0 && alpha <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid alpha value %g (a decay rate in [0, 1])", op,
                             alpha),
               false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_RMSPROP,
                            .lr = lr,
                            .alpha = alpha,
                            .eps = eps,
                            .momentum = o.momentum,
                            .weight_decay = o.weight_decay,
                            .centered = o.centered,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_rmsprop(ts_module *m, ts_rmsprop_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!rmsprop_hparams("rmsprop", o, &h)) return NULL;
    return tsi_optim_new_module("rmsprop", &tsi_rmsprop_info, h, m);
}

ts_optim *ts_rmsprop_params(ts_tensor *const *params, int n, ts_rmsprop_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!rmsprop_hparams("rmsprop", o, &h)) return NULL;
    return tsi_optim_new("rmsprop", &tsi_rmsprop_info, h, params, n);
}
