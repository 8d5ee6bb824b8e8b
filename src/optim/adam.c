/* adam.c — torch.optim.Adam and AdamW (decoupled weight decay), with amsgrad and maximize. */
#include <stdlib.h>

#include "optim/optim_internal.h"

static bool adam_slot_used(const ts_optim_hparams *h, int slot) {
    return slot < 2 || (slot == 2 && h->amsgrad);
}

const tsi_optim_kind_info tsi_adam_info = {
    .name = "Adam",
    .slot_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .has_step = true,
    .slot_used = adam_slot_used,
};

const tsi_optim_kind_info tsi_adamw_info = {
    .name = "AdamW",
    .slot_names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    .has_step = true,
    .slot_used = adam_slot_used,
};

/* Zero fields take torch's defaults (weight_decay excepted: it is literal); then torch's checks. */
static bool adam_hparams(const char *op, ts_optim_kind kind, ts_adam_opts o, ts_optim_hparams *h) {
    double lr = o.lr == 0 ? 1e-3 : o.lr, b1 = o.beta1 == 0 ? 0.9 : o.beta1;
    double b2 = o.beta2 == 0 ? 0.999 : o.beta2, eps = o.eps == 0 ? 1e-8 : o.eps;
    if (!(lr >= 0)) return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g", op, lr), false;
    if (!(eps >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid epsilon value %g", op, eps), false;
    if (!(b1 >= 0 && b1 < 1))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid beta parameter at index 0: %g", op, b1),
               false;
    if (!(b2 >= 0 && b2 < 1))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid beta parameter at index 1: %g", op, b2),
               false;
    if (!(o.weight_decay >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid weight_decay value %g", op, o.weight_decay),
               false;
    *h = (ts_optim_hparams){.kind = kind,
                            .lr = lr,
                            .beta1 = b1,
                            .beta2 = b2,
                            .eps = eps,
                            .weight_decay = o.weight_decay,
                            .amsgrad = o.amsgrad,
                            .maximize = o.maximize};
    return true;
}

ts_optim *ts_adam(ts_module *m, ts_adam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adam_hparams("adam", TS_OPTIM_ADAM, o, &h)) return NULL;
    return tsi_optim_new_module("adam", &tsi_adam_info, h, m);
}

ts_optim *ts_adam_params(ts_tensor *const *params, int n, ts_adam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adam_hparams("adam", TS_OPTIM_ADAM, o, &h)) return NULL;
    return tsi_optim_new("adam", &tsi_adam_info, h, params, n);
}

ts_optim *ts_adamw(ts_module *m, ts_adam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adam_hparams("adamw", TS_OPTIM_ADAMW, o, &h)) return NULL;
    return tsi_optim_new_module("adamw", &tsi_adamw_info, h, m);
}

ts_optim *ts_adamw_params(ts_tensor *const *params, int n, ts_adam_opts o) {
    ts_optim_hparams h;
    tsi_init();
    if (!adam_hparams("adamw", TS_OPTIM_ADAMW, o, &h)) return NULL;
    return tsi_optim_new("adamw", &tsi_adamw_info, h, params, n);
}

/* nanoGPT's configure_optimizers: matrices (and embeddings) decay, vectors (biases, norm weights)
 * do not. */
ts_optim *ts_adamw_decay_groups(ts_module *m, ts_adam_opts o) {
    static const char op[] = "adamw_decay_groups";
    ts_optim_hparams h;
    tsi_init();
    if (!adam_hparams(op, TS_OPTIM_ADAMW, o, &h)) return NULL;
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op), NULL;
    ts_tensor_list l = ts_module_named_parameters(m);
    ts_tensor **decay = malloc((size_t)(l.n ? l.n : 1) * sizeof *decay);
    ts_tensor **keep = malloc((size_t)(l.n ? l.n : 1) * sizeof *keep);
    ts_optim *opt = NULL;
    if (!decay || !keep) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    } else {
        int nd = 0, nk = 0;
        for (int i = 0; i < l.n; i++) {
            if (l.tensors[i]->shape.ndim >= 2)
                decay[nd++] = l.tensors[i];
            else
                keep[nk++] = l.tensors[i];
        }
        if (!nd) { /* no matrix: one group without decay */
            h.weight_decay = 0;
            opt = tsi_optim_new(op, &tsi_adamw_info, h, keep, nk);
        } else {
            opt = tsi_optim_new(op, &tsi_adamw_info, h, decay, nd);
            if (opt && nk && ts_optim_add_param_group_wd(opt, keep, nk, h.lr, 0)) {
                ts_optim_free(opt);
                opt = NULL;
            }
        }
    }
    free(decay);
    free(keep);
    ts_tensor_list_free(&l);
    return opt;
}
