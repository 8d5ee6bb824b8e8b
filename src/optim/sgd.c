/* sgd.c — torch.optim.SGD: momentum, dampening, nesterov, weight decay, maximize. */
#include "optim/optim_internal.h"

static bool sgd_slot_used(const ts_optim_hparams *h, int slot) {
    return slot == 0 && h->momentum != 0;
}

const tsi_optim_kind_info tsi_sgd_info = {
    .name = "SGD",
    .slot_names = {"momentum_buffer", NULL, NULL},
    .has_step = false,
    .slot_used = sgd_slot_used,
};

/* torch.optim.SGD's checks; lr is required here (no default) */
static bool sgd_hparams(const char *op, ts_sgd_opts o, ts_optim_hparams *h) {
    if (!(o.lr > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g (lr is required, > 0)", op,
                             o.lr),
               false;
    if (!(o.momentum >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid momentum value %g", op, o.momentum), false;
    if (!(o.weight_decay >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid weight_decay value %g", op, o.weight_decay),
               false;
    if (o.dampening != o.dampening)
        return tsi_error_set(TS_ERR_ARG, "%s: invalid dampening value %g", op, o.dampening), false;
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: nesterov momentum requires a momentum and zero "
                             "dampening (momentum %g, dampening %g)",
                             op, o.momentum, o.dampening),
               false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_SGD,
                            .lr = o.lr,
                            .momentum = o.momentum,
                            .dampening = o.dampening,
                            .weight_decay = o.weight_decay,
                            .nesterov = o.nesterov,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_sgd(ts_module *m, ts_sgd_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!sgd_hparams("sgd", o, &h)) return NULL;
    return tsi_optim_new_module("sgd", &tsi_sgd_info, h, m);
}

ts_optim *ts_sgd_params(ts_tensor *const *params, int n, ts_sgd_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!sgd_hparams("sgd", o, &h)) return NULL;
    return tsi_optim_new("sgd", &tsi_sgd_info, h, params, n);
}
