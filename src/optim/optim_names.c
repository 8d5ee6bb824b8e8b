/* optim_names.c — the conventional names (ts_..._new, decision 0025) of the constructors of
 * optimizers and learning-rate schedulers; the 0.1 names they forward to stay exported until 1.0.
 */
#include "tessera.h"

ts_optim *ts_sgd_new(ts_module *m, ts_sgd_opts o) { return ts_sgd(m, o); }
ts_optim *ts_sgd_new_params(ts_tensor *const *params, int n, ts_sgd_opts o) {
    return ts_sgd_params(params, n, o);
}
ts_optim *ts_adam_new(ts_module *m, ts_adam_opts o) { return ts_adam(m, o); }
ts_optim *ts_adam_new_params(ts_tensor *const *params, int n, ts_adam_opts o) {
    return ts_adam_params(params, n, o);
}
ts_optim *ts_adamw_new(ts_module *m, ts_adam_opts o) { return ts_adamw(m, o); }
ts_optim *ts_adamw_new_params(ts_tensor *const *params, int n, ts_adam_opts o) {
    return ts_adamw_params(params, n, o);
}
ts_optim *ts_rmsprop_new(ts_module *m, ts_rmsprop_opts o) { return ts_rmsprop(m, o); }
ts_optim *ts_rmsprop_new_params(ts_tensor *const *params, int n, ts_rmsprop_opts o) {
    return ts_rmsprop_params(params, n, o);
}
ts_optim *ts_adagrad_new(ts_module *m, ts_adagrad_opts o) { return ts_adagrad(m, o); }
ts_optim *ts_adagrad_new_params(ts_tensor *const *params, int n, ts_adagrad_opts o) {
    return ts_adagrad_params(params, n, o);
}
ts_optim *ts_adadelta_new(ts_module *m, ts_adadelta_opts o) { return ts_adadelta(m, o); }
ts_optim *ts_adadelta_new_params(ts_tensor *const *params, int n, ts_adadelta_opts o) {
    return ts_adadelta_params(params, n, o);
}
ts_optim *ts_adamax_new(ts_module *m, ts_adamax_opts o) { return ts_adamax(m, o); }
ts_optim *ts_adamax_new_params(ts_tensor *const *params, int n, ts_adamax_opts o) {
    return ts_adamax_params(params, n, o);
}
ts_optim *ts_nadam_new(ts_module *m, ts_nadam_opts o) { return ts_nadam(m, o); }
ts_optim *ts_nadam_new_params(ts_tensor *const *params, int n, ts_nadam_opts o) {
    return ts_nadam_params(params, n, o);
}
ts_optim *ts_radam_new(ts_module *m, ts_radam_opts o) { return ts_radam(m, o); }
ts_optim *ts_radam_new_params(ts_tensor *const *params, int n, ts_radam_opts o) {
    return ts_radam_params(params, n, o);
}
ts_optim *ts_asgd_new(ts_module *m, ts_asgd_opts o) { return ts_asgd(m, o); }
ts_optim *ts_asgd_new_params(ts_tensor *const *params, int n, ts_asgd_opts o) {
    return ts_asgd_params(params, n, o);
}
ts_optim *ts_rprop_new(ts_module *m, ts_rprop_opts o) { return ts_rprop(m, o); }
ts_optim *ts_rprop_new_params(ts_tensor *const *params, int n, ts_rprop_opts o) {
    return ts_rprop_params(params, n, o);
}
ts_optim *ts_adamw_new_decay_groups(ts_module *m, ts_adam_opts o) {
    return ts_adamw_decay_groups(m, o);
}
ts_lr_scheduler *ts_step_lr_new(ts_optim *opt, int step_size, double gamma) {
    return ts_step_lr(opt, step_size, gamma);
}
ts_lr_scheduler *ts_multistep_lr_new(ts_optim *opt, const int *milestones, int n, double gamma) {
    return ts_multistep_lr(opt, milestones, n, gamma);
}
ts_lr_scheduler *ts_cosine_lr_new(ts_optim *opt, int t_max, double eta_min) {
    return ts_cosine_lr(opt, t_max, eta_min);
}
ts_lr_scheduler *ts_linear_lr_new(ts_optim *opt, double start_factor, double end_factor,
                                  int total_iters) {
    return ts_linear_lr(opt, start_factor, end_factor, total_iters);
}
ts_lr_scheduler *ts_onecycle_lr_new(ts_optim *opt, double max_lr, int total_steps) {
    return ts_onecycle_lr(opt, max_lr, total_steps);
}
ts_lr_scheduler *ts_warmup_cosine_lr_new(ts_optim *opt, int warmup_steps, int total_steps,
                                         double min_ratio) {
    return ts_warmup_cosine_lr(opt, warmup_steps, total_steps, min_ratio);
}
