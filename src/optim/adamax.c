/* adamax.c — torch.optim.Adamax, NAdam (momentum_decay, decoupled_weight_decay) and RAdam
 * (decoupled_weight_decay): Adam's relatives. The per-tensor scalars torch computes in Python are
 * computed here (coefs); the per-element math is backend/optim_math_adaptive.h. */
#include <math.h>

#include "optim/optim_check.h"

static bool two_moments_used(const ts_optim_hparams *h, int slot) {
    (void)h;
    return slot < 2;
}

static bool adam_like_checks(const char *op, double lr, double b1, double b2, double eps,
                             double wd) {
    return tsi_optim_check_nonneg(op, "learning rate", lr) &&
           tsi_optim_check_nonneg(op, "epsilon", eps) && tsi_optim_check_beta(op, 0, b1) &&
           tsi_optim_check_beta(op, 1, b2) && tsi_optim_check_nonneg(op, "weight_decay", wd);
}

/* ------------------------------------------------------------------ Adamax */
/* clr = lr / (1 - beta1^step), applied as -clr */
static void adamax_coefs(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                         double *aux_next) {
    (void)aux, (void)aux_next;
    coef[0] = -(h->lr / (1 - pow(h->beta1, step)));
}

const tsi_optim_kind_info tsi_adamax_info = {
    .name = "Adamax",
    .slot_names = {"exp_avg", "exp_inf", NULL},
    .has_step = true,
    .slot_used = two_moments_used,
    .f32_scalars = true,
    .coefs = adamax_coefs,
};

ts_adamax_opts ts_adamax_defaults(void) {
    return (ts_adamax_opts){.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

static bool adamax_hparams(const char *op, ts_adamax_opts o, ts_optim_hparams *h) {
    if (!adam_like_checks(op, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay)) return false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_ADAMAX,
                            .lr = o.lr,
                            .beta1 = o.beta1,
                            .beta2 = o.beta2,
                            .eps = o.eps,
                            .weight_decay = o.weight_decay,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_adamax(ts_module *m, ts_adamax_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adamax_hparams("adamax", o, &h)) return NULL;
    return tsi_optim_new_module("adamax", &tsi_adamax_info, h, m);
}

ts_optim *ts_adamax_params(ts_tensor *const *params, int n, ts_adamax_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adamax_hparams("adamax", o, &h)) return NULL;
    return tsi_optim_new("adamax", &tsi_adamax_info, h, params, n);
}

/* ------------------------------------------------------------------ NAdam */
static void nadam_init_aux(const ts_optim_hparams *h, double *aux) {
    (void)h;
    aux[0] = 1.0; /* mu_product */
}

/* torch's Python scalars: mu, mu_next, mu_product (a float32 tensor: mu_product *= mu rounds) and
 * the two addcdiv values */
static void nadam_coefs(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                        double *aux_next) {
    const double b1 = h->beta1, md = h->momentum_decay, lr = h->lr;
    const double mu = b1 * (1.0 - 0.5 * pow(0.96, step * md));
    const double mu_next = b1 * (1.0 - 0.5 * pow(0.96, (step + 1) * md));
    const double mp = (double)((float)aux[0] * (float)mu);
    const double mp_next = mp * mu_next;
    coef[0] = -lr * (1.0 - mu) / (1.0 - mp);
    coef[1] = (-lr * mu_next) / (1.0 - mp_next);
    coef[2] = 1 - pow(h->beta2, step); /* bias_correction2 */
    coef[3] = 0;
    aux_next[0] = mp;
    aux_next[1] = 0;
}

const tsi_optim_kind_info tsi_nadam_info = {
    .name = "NAdam",
    .slot_names = {"exp_avg", "exp_avg_sq", NULL},
    .has_step = true,
    .slot_used = two_moments_used,
    .aux_names = {"mu_product", NULL},
    .f32_scalars = true,
    .init_aux = nadam_init_aux,
    .coefs = nadam_coefs,
};

ts_nadam_opts ts_nadam_defaults(void) {
    return (ts_nadam_opts){
        .lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .momentum_decay = 4e-3};
}

static bool nadam_hparams(const char *op, ts_nadam_opts o, ts_optim_hparams *h) {
    if (!adam_like_checks(op, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay) ||
        !tsi_optim_check_nonneg(op, "momentum_decay", o.momentum_decay))
        return false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_NADAM,
                            .lr = o.lr,
                            .beta1 = o.beta1,
                            .beta2 = o.beta2,
                            .eps = o.eps,
                            .weight_decay = o.weight_decay,
                            .momentum_decay = o.momentum_decay,
                            .decoupled = o.decoupled_weight_decay,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_nadam(ts_module *m, ts_nadam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!nadam_hparams("nadam", o, &h)) return NULL;
    return tsi_optim_new_module("nadam", &tsi_nadam_info, h, m);
}

ts_optim *ts_nadam_params(ts_tensor *const *params, int n, ts_nadam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!nadam_hparams("nadam", o, &h)) return NULL;
    return tsi_optim_new("nadam", &tsi_nadam_info, h, params, n);
}

/* ------------------------------------------------------------------ RAdam */
/* bias_correction1, the rectification (rho_t > 5) and sqrt(bias_correction2), as torch's Python */
static void radam_coefs(const ts_optim_hparams *h, double step, const double *aux, double *coef,
                        double *aux_next) {
    (void)aux, (void)aux_next;
    const double b2 = h->beta2;
    const double bc1 = 1 - pow(h->beta1, step), bc2 = 1 - pow(b2, step);
    const double rho_inf = 2 / (1 - b2) - 1;
    const double rho_t = rho_inf - 2 * step * pow(b2, step) / bc2;
    coef[0] = bc1;
    coef[1] = coef[2] = coef[3] = 0;
    if (rho_t > 5.0) {
        coef[1] =
            pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5);
        coef[2] = pow(bc2, 0.5);
        coef[3] = 1;
    }
}

const tsi_optim_kind_info tsi_radam_info = {
    .name = "RAdam",
    .slot_names = {"exp_avg", "exp_avg_sq", NULL},
    .has_step = true,
    .slot_used = two_moments_used,
    .f32_scalars = true,
    .coefs = radam_coefs,
};

ts_radam_opts ts_radam_defaults(void) {
    return (ts_radam_opts){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

static bool radam_hparams(const char *op, ts_radam_opts o, ts_optim_hparams *h) {
    if (!adam_like_checks(op, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay)) return false;
    *h = (ts_optim_hparams){.kind = TS_OPTIM_RADAM,
                            .lr = o.lr,
                            .beta1 = o.beta1,
                            .beta2 = o.beta2,
                            .eps = o.eps,
                            .weight_decay = o.weight_decay,
                            .decoupled = o.decoupled_weight_decay,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_radam(ts_module *m, ts_radam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!radam_hparams("radam", o, &h)) return NULL;
    return tsi_optim_new_module("radam", &tsi_radam_info, h, m);
}

ts_optim *ts_radam_params(ts_tensor *const *params, int n, ts_radam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!radam_hparams("radam", o, &h)) return NULL;
    return tsi_optim_new("radam", &tsi_radam_info, h, params, n);
}
