/* optim_check.h — the option checks the optimizers share (torch.optim's ValueErrors). */
#ifndef TS_OPTIM_CHECK_H
#define TS_OPTIM_CHECK_H

#include "optim/optim_internal.h"

/* v >= 0 (NaN fails), or the error "<op>: invalid <what> value <v>". */
static inline bool tsi_optim_check_nonneg(const char *op, const char *what, double v) {
    if (v >= 0) return true;
    return tsi_error_set(TS_ERR_ARG, "%s: invalid %s value %g", op, what, v), false;
}

/* 0 <= beta < 1, or the error naming its index. */
static inline bool tsi_optim_check_beta(const char *op, int index, double b) {
    if (b >= 0 && b < 1) return true;
    return tsi_error_set(TS_ERR_ARG, "%s: invalid beta parameter at index %d: %g", op, index, b),
           false;
}

/* The coefs of a kind without per-step scalars (Adadelta, Rprop): all zero. */
static inline void tsi_optim_no_coefs(const ts_optim_hparams *h, double step, const double *aux,
                                      double *coef, double *aux_next) {
    (void)h, (void)step, (void)aux, (void)aux_next;
    for (int k = 0; k < TS_OPTIM_COEFS; k++) coef[k] = 0;
}

#endif /* TS_OPTIM_CHECK_H */
