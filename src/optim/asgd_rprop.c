/* asgd_rprop.c — torch.optim.ASGD (averaged SGD: eta, mu, ax) and Rprop (etas, step_sizes). The
 * per-element math is backend/optim_math_adaptive.h. */
#include <math.h>

#include "optim/optim_check.h"

/* ------------------------------------------------------------------ ASGD */
static bool asgd_slot_used(const ts_optim_hparams *h, int slot) {
    (void)h;
    return slot == 0;
}

/* eta starts as the group's lr, mu as 1 (float32 tensors in torch) */
static void asgd_init_aux(const ts_optim_hparams *h, double *aux) {
    aux[0] = tsi_optim_f32(h->lr);
    aux[1] = 1.0;
}

/* this step's eta (decay 1 - lambd eta) and mu; the next ones from the step count */
static void asgd_coefs(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                       double *aux_next) {
    const double eta = aux[0], mu = aux[1];
    coef[0] = eta;
    coef[1] = 1 - h->lambd * eta;
    coef[2] = mu;
    coef[3] = 0;
    aux_next[0] = tsi_optim_f32(h->lr / pow(1 + h->lambd * h->lr * step, h->alpha));
    aux_next[1] = tsi_optim_f32(1 / fmax(1, step - h->t0));
}

const tsi_optim_kind_info tsi_asgd_info = {
    .name = "ASGD",
    .slot_names = {"ax", NULL, NULL},
    .has_step = true,
    .slot_used = asgd_slot_used,
    .aux_names = {"eta", "mu"},
    .f32_scalars = true,
    .init_aux = asgd_init_aux,
    .coefs = asgd_coefs,
};

ts_asgd_opts ts_asgd_defaults(void) {
    return (ts_asgd_opts){.lr = 1e-2, .lambd = 1e-4, .alpha = 0.75, .t0 = 1e6};
}

static bool asgd_hparams(const char *op, ts_asgd_opts o, ts_optim_hparams *h) {
    if (!tsi_optim_check_nonneg(op, "learning rate", o.lr) ||
        !tsi_optim_check_nonneg(op, "lambd", o.lambd) ||
        !tsi_optim_check_nonneg(op, "alpha", o.alpha) ||
        !tsi_optim_check_nonneg(op, "weight_decay", o.weight_decay))
        return false;
    if (o.t0 != o.t0) return tsi_error_set(TS_ERR_ARG, "%s: invalid t0 value %g", op, o.t0), false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_ASGD,
                            .lr = o.lr,
                            .lambd = o.lambd,
                            .alpha = o.alpha,
                            .t0 = o.t0,
                            .weight_decay = o.weight_decay,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_asgd(ts_module *m, ts_asgd_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!asgd_hparams("asgd", o, &h)) return NULL;
    return tsi_optim_new_module("asgd", &tsi_asgd_info, h, m);
}

ts_optim *ts_asgd_params(ts_tensor *const *params, int n, ts_asgd_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!asgd_hparams("asgd", o, &h)) return NULL;
    return tsi_optim_new("asgd", &tsi_asgd_info, h, params, n);
}

/* ------------------------------------------------------------------ Rprop */
static bool rprop_slot_used(const ts_optim_hparams *h, int slot) {
    (void)h;
    return slot < 2;
}

/* step_size starts as the group's lr (torch's full_like(grad, lr)); the lr is not read again */
static double rprop_slot_init(const ts_optim_hparams *h, int slot) {
    return slot == 1 ? h->lr : 0.0;
}

const tsi_optim_kind_info tsi_rprop_info = {
    .name = "Rprop",
    .slot_names = {"prev", "step_size", NULL},
    .has_step = true,
    .slot_used = rprop_slot_used,
    .f32_scalars = true,
    .slot_init = rprop_slot_init,
    .coefs = tsi_optim_no_coefs,
};

ts_rprop_opts ts_rprop_defaults(void) {
    return (ts_rprop_opts){
        .lr = 1e-2, .etaminus = 0.5, .etaplus = 1.2, .step_size_min = 1e-6, .step_size_max = 50};
}

static bool rprop_hparams(const char *op, ts_rprop_opts o, ts_optim_hparams *h) {
    if (!tsi_optim_check_nonneg(op, "learning rate", o.lr)) return false;
    if (!(0 < o.etaminus && o.etaminus < 1 && 1 < o.etaplus))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: invalid eta values: %g, %g (0 < etaminus < 1 < etaplus)", op,
                             o.etaminus, o.etaplus),
               false;
    if (o.step_size_min != o.step_size_min || o.step_size_max != o.step_size_max)
        return tsi_error_set(TS_ERR_ARG, "%s: invalid step_sizes: %g, %g", op, o.step_size_min,
                             o.step_size_max),
               false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_RPROP,
                            .lr = o.lr,
                            .etaminus = o.etaminus,
                            .etaplus = o.etaplus,
                            .step_size_min = o.step_size_min,
                            .step_size_max = o.step_size_max,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_rprop(ts_module *m, ts_rprop_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!rprop_hparams("rprop", o, &h)) return NULL;
    return tsi_optim_new_module("rprop", &tsi_rprop_info, h, m);
}

ts_optim *ts_rprop_params(ts_tensor *const *params, int n, ts_rprop_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!rprop_hparams("rprop", o, &h)) return NULL;
    return tsi_optim_new("rprop", &tsi_rprop_info, h, params, n);
}
