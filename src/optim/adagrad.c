/* adagrad.c — torch.optim.Adagrad (lr_decay, initial_accumulator_value) and Adadelta: the
 * accumulating optimizers. The per-element math is backend/optim_math_adaptive.h. */
#include "optim/optim_check.h"

/* ------------------------------------------------------------------ Adagrad */
static bool adagrad_slot_used(const ts_optim_hparams *h, int slot) {
    (void)h;
    return slot == 0;
}

static double adagrad_slot_init(const ts_optim_hparams *h, int slot) {
    return slot == 0 ? h->initial_accumulator_value : 0.0;
}

/* clr = lr / (1 + (step - 1) lr_decay), applied as -clr */
static void adagrad_coefs(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                          double *aux_next) {
    (void)aux, (void)aux_next;
    coef[0] = -(h->lr / (1 + (step - 1) * h->lr_decay));
}

const tsi_optim_kind_info tsi_adagrad_info = {
    .name = "Adagrad",
    .slot_names = {"sum", NULL, NULL},
    .has_step = true,
    .slot_used = adagrad_slot_used,
    .f32_scalars = true,
    .slot_init = adagrad_slot_init,
    .coefs = adagrad_coefs,
};

ts_adagrad_opts ts_adagrad_defaults(void) { return (ts_adagrad_opts){.lr = 1e-2, .eps = 1e-10}; }

static bool adagrad_hparams(const char *op, ts_adagrad_opts o, ts_optim_hparams *h) {
    if (!tsi_optim_check_nonneg(op, "learning rate", o.lr) ||
        !tsi_optim_check_nonneg(op, "lr_decay", o.lr_decay) ||
        !tsi_optim_check_nonneg(op, "weight_decay", o.weight_decay) ||
        !tsi_optim_check_nonneg(op, "initial_accumulator_value", o.initial_accumulator_value) ||
        !tsi_optim_check_nonneg(op, "epsilon", o.eps))
        return false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_ADAGRAD,
                            .lr = o.lr,
                            .lr_decay = o.lr_decay,
                            .weight_decay = o.weight_decay,
                            .initial_accumulator_value = o.initial_accumulator_value,
                            .eps = o.eps,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_adagrad(ts_module *m, ts_adagrad_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adagrad_hparams("adagrad", o, &h)) return NULL;
    return tsi_optim_new_module("adagrad", &tsi_adagrad_info, h, m);
}

ts_optim *ts_adagrad_params(ts_tensor *const *params, int n, ts_adagrad_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adagrad_hparams("adagrad", o, &h)) return NULL;
    return tsi_optim_new("adagrad", &tsi_adagrad_info, h, params, n);
}

/* ------------------------------------------------------------------ Adadelta */
static bool adadelta_slot_used(const ts_optim_hparams *h, int slot) {
    (void)h;
    return slot < 2;
}

const tsi_optim_kind_info tsi_adadelta_info = {
    .name = "Adadelta",
    .slot_names = {"square_avg", "acc_delta", NULL},
    .has_step = true,
    .slot_used = adadelta_slot_used,
    .f32_scalars = true,
    .coefs = tsi_optim_no_coefs,
};

ts_adadelta_opts ts_adadelta_defaults(void) {
    return (ts_adadelta_opts){.lr = 1.0, .rho = 0.9, .eps = 1e-6};
}

static bool adadelta_hparams(const char *op, ts_adadelta_opts o, ts_optim_hparams *h) {
    if (!tsi_optim_check_nonneg(op, "learning rate", o.lr) ||
        !tsi_optim_check_nonneg(op, "epsilon", o.eps) ||
        !tsi_optim_check_nonneg(op, "weight_decay", o.weight_decay))
        return false;
    if (!(o.rho >= 0 && o.rho <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid rho value %g (in [0, 1])", op, o.rho), false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_ADADELTA,
                            .lr = o.lr,
                            .rho = o.rho,
                            .eps = o.eps,
                            .weight_decay = o.weight_decay,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_adadelta(ts_module *m, ts_adadelta_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adadelta_hparams("adadelta", o, &h)) return NULL;
    return tsi_optim_new_module("adadelta", &tsi_adadelta_info, h, m);
}

ts_optim *ts_adadelta_params(ts_tensor *const *params, int n, ts_adadelta_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adadelta_hparams("adadelta", o, &h)) return NULL;
    return tsi_optim_new("adadelta", &tsi_adadelta_info, h, params, n);
}
