/* tessera/optim.h — optimizers, learning-rate schedulers and gradient clipping (via tessera.h). */
#ifndef TESSERA_OPTIM_H
#define TESSERA_OPTIM_H

typedef struct ts_optim ts_optim;

/* Zero is PyTorch's default for every field except lr (required, > 0). */
typedef struct ts_sgd_opts {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
} ts_sgd_opts;
typedef struct ts_adam_opts {
    double lr;           /* 0 -> 1e-3 */
    double beta1, beta2; /* 0 -> 0.9, 0.999 */
    double eps;          /* 0 -> 1e-8 */
    double weight_decay; /* literal value; AdamW: PyTorch's default is 0.01 — pass it */
    bool amsgrad, maximize;
} ts_adam_opts;
typedef struct ts_rmsprop_opts {
    double lr;    /* 0 -> 1e-2 */
    double alpha; /* 0 -> 0.99 */
    double eps;   /* 0 -> 1e-8 */
    double weight_decay, momentum;
    bool centered, maximize;
} ts_rmsprop_opts;

/* Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop: unlike the options above, every field
 * is literal (a zero is a zero, as in PyTorch); start from ts_<name>_defaults(), PyTorch's
 * defaults, and change what differs. Each follows torch.optim's update exactly; the state dict has
 * PyTorch's names (step, and NAdam's mu_product, ASGD's eta and mu, as f32 0-dim tensors). Their
 * steps cannot be captured (they take per-step scalars from the host). */
typedef struct ts_adagrad_opts {
    double lr, lr_decay, weight_decay, initial_accumulator_value, eps; /* 1e-2, 0, 0, 0, 1e-10 */
    bool maximize;
} ts_adagrad_opts;
typedef struct ts_adadelta_opts {
    double lr, rho, eps, weight_decay; /* 1.0, 0.9, 1e-6, 0 */
    bool maximize;
} ts_adadelta_opts;
typedef struct ts_adamax_opts {
    double lr, beta1, beta2, eps, weight_decay; /* 2e-3, 0.9, 0.999, 1e-8, 0 */
    bool maximize;
} ts_adamax_opts;
typedef struct ts_nadam_opts {
    double lr, beta1, beta2, eps, weight_decay, momentum_decay; /* 2e-3, .9, .999, 1e-8, 0, 4e-3 */
    bool decoupled_weight_decay, maximize;
} ts_nadam_opts;
typedef struct ts_radam_opts {
    double lr, beta1, beta2, eps, weight_decay; /* 1e-3, 0.9, 0.999, 1e-8, 0 */
    bool decoupled_weight_decay, maximize;
} ts_radam_opts;
typedef struct ts_asgd_opts {
    double lr, lambd, alpha, t0, weight_decay; /* 1e-2, 1e-4, 0.75, 1e6, 0 */
    bool maximize;
} ts_asgd_opts;
typedef struct ts_rprop_opts {
    double lr, etaminus, etaplus, step_size_min, step_size_max; /* 1e-2, 0.5, 1.2, 1e-6, 50 */
    bool maximize;
} ts_rprop_opts;
TS_API ts_adagrad_opts ts_adagrad_defaults(void);
TS_API ts_adadelta_opts ts_adadelta_defaults(void);
TS_API ts_adamax_opts ts_adamax_defaults(void);
TS_API ts_nadam_opts ts_nadam_defaults(void);
TS_API ts_radam_opts ts_radam_defaults(void);
TS_API ts_asgd_opts ts_asgd_defaults(void);
TS_API ts_rprop_opts ts_rprop_defaults(void);

/* Over every parameter of a module (one group), or over an explicit list. */
TS_API ts_optim *ts_sgd_new(ts_module *m, ts_sgd_opts o);
TS_API ts_optim *ts_sgd_new_params(ts_tensor *const *params, int n, ts_sgd_opts o);
TS_API ts_optim *ts_adam_new(ts_module *m, ts_adam_opts o);
TS_API ts_optim *ts_adam_new_params(ts_tensor *const *params, int n, ts_adam_opts o);
TS_API ts_optim *ts_adamw_new(ts_module *m, ts_adam_opts o);
TS_API ts_optim *ts_adamw_new_params(ts_tensor *const *params, int n, ts_adam_opts o);
/* AdamW over two groups, nanoGPT's rule: group 0 the parameters of 2 or more dims (weights,
 * embeddings) with o.weight_decay, group 1 the others (biases, norm weights) without decay (when a
 * module has only one kind, one group). */
TS_API ts_optim *ts_adamw_new_decay_groups(ts_module *m, ts_adam_opts o);
TS_API ts_optim *ts_rmsprop_new(ts_module *m, ts_rmsprop_opts o);
TS_API ts_optim *ts_rmsprop_new_params(ts_tensor *const *params, int n, ts_rmsprop_opts o);
TS_API ts_optim *ts_adagrad_new(ts_module *m, ts_adagrad_opts o);
TS_API ts_optim *ts_adagrad_new_params(ts_tensor *const *params, int n, ts_adagrad_opts o);
TS_API ts_optim *ts_adadelta_new(ts_module *m, ts_adadelta_opts o);
TS_API ts_optim *ts_adadelta_new_params(ts_tensor *const *params, int n, ts_adadelta_opts o);
TS_API ts_optim *ts_adamax_new(ts_module *m, ts_adamax_opts o);
TS_API ts_optim *ts_adamax_new_params(ts_tensor *const *params, int n, ts_adamax_opts o);
TS_API ts_optim *ts_nadam_new(ts_module *m, ts_nadam_opts o);
TS_API ts_optim *ts_nadam_new_params(ts_tensor *const *params, int n, ts_nadam_opts o);
TS_API ts_optim *ts_radam_new(ts_module *m, ts_radam_opts o);
TS_API ts_optim *ts_radam_new_params(ts_tensor *const *params, int n, ts_radam_opts o);
TS_API ts_optim *ts_asgd_new(ts_module *m, ts_asgd_opts o);
TS_API ts_optim *ts_asgd_new_params(ts_tensor *const *params, int n, ts_asgd_opts o);
TS_API ts_optim *ts_rprop_new(ts_module *m, ts_rprop_opts o);
TS_API ts_optim *ts_rprop_new_params(ts_tensor *const *params, int n, ts_rprop_opts o);
/* A further parameter group with its own learning rate (other options as the first group). */
TS_API ts_status ts_optim_add_param_group(ts_optim *opt, ts_tensor *const *params, int n,
                                          double lr);
/* The same with its own weight decay (PyTorch's add_param_group({"params": ..., "weight_decay":
 * wd})). */
TS_API ts_status ts_optim_add_param_group_wd(ts_optim *opt, ts_tensor *const *params, int n,
                                             double lr, double weight_decay);
TS_API int ts_optim_num_groups(ts_optim *opt); /* -1 on error */
TS_API double ts_optim_get_weight_decay(ts_optim *opt, int group);
TS_API double ts_optim_get_lr(ts_optim *opt, int group);
TS_API ts_status ts_optim_set_lr(ts_optim *opt, int group, double lr);
/* A group's momentum (SGD, RMSprop) or beta1 (Adam, AdamW, Adamax, NAdam, RAdam), which
 * PyTorch's OneCycleLR and CyclicLR cycle; TS_ERR_ARG (NAN from get) for the other kinds. */
TS_API double ts_optim_get_momentum(ts_optim *opt, int group);
TS_API ts_status ts_optim_set_momentum(ts_optim *opt, int group, double momentum);
TS_API ts_status ts_optim_zero_grad(ts_optim *opt); /* set_to_none, PyTorch 2's default */
/* All or nothing: every parameter steps, or (an error, out of memory included) none changes, nor
 * the state. While an error is pending on the thread it does nothing and returns that error: the
 * gradients of a forward or backward that failed are never applied. */
TS_API ts_status ts_optim_step(ts_optim *opt);
TS_API void ts_optim_free(ts_optim *opt);
/* State as named tensors: "state.<i>.<name>" (i = parameter index over all groups, PyTorch's
 * numbering; e.g. momentum_buffer, exp_avg, exp_avg_sq, step) and "param_groups.<g>.lr"; step and
 * lr are 0-dim f64 cpu tensors. The list holds copies (later steps do not change it); free it with
 * ts_tensor_list_free. Loading copies the state onto the parameters' devices and dtypes and
 * replaces all state; a bad key, shape or missing buffer, or running out of memory, changes
 * nothing. */
TS_API ts_tensor_list ts_optim_state_dict(ts_optim *opt);
TS_API ts_status ts_optim_load_state_dict(ts_optim *opt, const ts_tensor_list *sd);

/* Learning-rate schedulers: step once per epoch (or per batch for one-cycle / warm-up). They use
 * torch's recursive forms, so several may be chained on one optimizer; free them before it. */
typedef struct ts_lr_scheduler ts_lr_scheduler;
TS_API ts_lr_scheduler *ts_step_lr_new(ts_optim *opt, int step_size, double gamma);
TS_API ts_lr_scheduler *ts_multistep_lr_new(ts_optim *opt, const int *milestones, int n,
                                            double gamma);
TS_API ts_lr_scheduler *ts_cosine_lr_new(ts_optim *opt, int t_max, double eta_min);
/* LinearLR: factor goes from start_factor to end_factor over total_iters steps */
TS_API ts_lr_scheduler *ts_linear_lr_new(ts_optim *opt, double start_factor, double end_factor,
                                         int total_iters);
/* OneCycleLR with cosine annealing, pct_start 0.3, div_factor 25, final_div_factor 1e4; like
 * torch's default (cycle_momentum) it also cycles momentum (Adam: beta1) between 0.95 and 0.85.
 * Stepping past total_steps is TS_ERR_STATE. */
TS_API ts_lr_scheduler *ts_onecycle_lr_new(ts_optim *opt, double max_lr, int total_steps);
/* Linear warm-up then cosine decay, per step (PyTorch: LambdaLR with this factor of the base lr):
 * (step + 1) / warmup_steps while step < warmup_steps, then min_ratio + (1 - min_ratio) x
 * (1 + cos(pi (step - warmup_steps) / (total_steps - warmup_steps))) / 2, min_ratio from
 * total_steps on. ts_warmup_cosine_factor is that factor, for loops that set the lr themselves. */
TS_API ts_lr_scheduler *ts_warmup_cosine_lr_new(ts_optim *opt, int warmup_steps, int total_steps,
                                                double min_ratio);
TS_API double ts_warmup_cosine_factor(int64_t step, int64_t warmup, int64_t total,
                                      double min_ratio);
/* CosineAnnealingWarmRestarts: eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2, T_cur
 * counting epochs since the last restart, T_i (from T_0) multiplied by T_mult at each restart.
 * ts_warm_restarts_step is its arithmetic for callers that keep the schedule themselves (Python's
 * scheduler): it advances *w to the next epoch (epoch NULL) or to *epoch (a fractional epoch
 * as torch allows) and writes lrs[g] from base_lrs[g]. A new state is {t_0, t_mult, eta_min,
 * t_i = t_0, t_cur = -1, last_epoch = -1}; its first step goes to epoch 0. ts_warm_restarts_lrs
 * writes the rates of the state as it is (torch's get_lr). */
typedef struct ts_warm_restarts {
    int64_t t_0, t_mult;
    double eta_min;
    double t_i, t_cur;
    int64_t last_epoch;
} ts_warm_restarts;
TS_API ts_lr_scheduler *ts_cosine_warm_restarts_lr_new(ts_optim *opt, int t_0, int t_mult,
                                                       double eta_min);
TS_API ts_status ts_warm_restarts_step(ts_warm_restarts *w, const double *epoch,
                                       const double *base_lrs, double *lrs, int n);
TS_API ts_status ts_warm_restarts_lrs(const ts_warm_restarts *w, const double *base_lrs,
                                      double *lrs, int n);
/* The arithmetic of torch.optim.lr_scheduler's epoch schedules, once, for the C schedulers above
 * and for callers that keep the schedule themselves (tessera.optim.lr_scheduler). A rule names a
 * schedule and its constants; ts_lr_rule_step is torch's get_lr, the recursive ("chainable")
 * form: it writes out[g] from the groups' current rates lrs[g] at last_epoch `epoch` (already
 * advanced; `initial` for the step a scheduler's constructor takes; step_count: the steps taken,
 * that one included, which COSINE reads), and ts_lr_rule_closed_form is
 * torch's _get_closed_form_lr from base_lrs at `epoch` (step(epoch)). LAMBDA: base x factors[g];
 * MULTIPLICATIVE: lr x factors[g] (factors: the user functions' values at epoch). TS_ERR_ARG for a
 * bad constant (step_size, t_max or a closed form's total_iters <= 0, ...) or array. */
typedef enum ts_lr_kind {
    TS_LR_LAMBDA,
    TS_LR_MULTIPLICATIVE,
    TS_LR_STEP,        /* step_size, gamma */
    TS_LR_MULTISTEP,   /* milestones (any order; a repeated one counts twice), gamma */
    TS_LR_CONSTANT,    /* factor, total_iters */
    TS_LR_LINEAR,      /* factor (start_factor), end_factor, total_iters */
    TS_LR_EXPONENTIAL, /* gamma */
    TS_LR_POLYNOMIAL,  /* total_iters, power */
    TS_LR_COSINE       /* t_max, eta_min */
} ts_lr_kind;
typedef struct ts_lr_rule {
    ts_lr_kind kind;
    int64_t step_size, total_iters, t_max;
    double gamma, factor, end_factor, power, eta_min;
    const int64_t *milestones;
    int n_milestones;
    const double *factors; /* [n] for LAMBDA and MULTIPLICATIVE */
} ts_lr_rule;
TS_API ts_status ts_lr_rule_step(const ts_lr_rule *r, int64_t epoch, int64_t step_count,
                                 bool initial, const double *base_lrs, const double *lrs,
                                 double *out, int n);
TS_API ts_status ts_lr_rule_closed_form(const ts_lr_rule *r, int64_t epoch, const double *base_lrs,
                                        double *out, int n);
/* OneCycleLR at `step` for one group: phases initial -> max -> min (three_phase: initial -> max
 * -> initial -> min) ending at pct_start x total_steps - 1 (2 pct_start x total_steps - 2) and
 * total_steps - 1, annealed by cosine (or linearly: linear), the momentum going max -> base ->
 * max (three_phase: max -> base -> max -> max) the same way. TS_ERR_ARG past total_steps. */
typedef struct ts_onecycle {
    int64_t total_steps;
    double pct_start;
    bool three_phase, linear;
} ts_onecycle;
TS_API ts_status ts_onecycle_at(const ts_onecycle *c, int64_t step, double initial_lr,
                                double max_lr, double min_lr, double max_momentum,
                                double base_momentum, double *lr, double *momentum);
/* CyclicLR at last_epoch `epoch`: ts_cyclic_cycle is its cycle, floor(1 + epoch / total_size);
 * ts_cyclic_at writes lrs[g] = base + (max - base) x s x scale and, when base_moms is not NULL,
 * moms[g] = max_mom - (max_mom - base_mom) x s x scale, s the position's triangle factor and
 * scale the mode's (1; 1 / 2^(cycle - 1); gamma^epoch), or `scale` itself for TS_CYCLIC_CUSTOM
 * (a user's scale_fn at the cycle or the epoch). */
typedef enum ts_cyclic_mode {
    TS_CYCLIC_TRIANGULAR,
    TS_CYCLIC_TRIANGULAR2,
    TS_CYCLIC_EXP_RANGE,
    TS_CYCLIC_CUSTOM
} ts_cyclic_mode;
typedef struct ts_cyclic {
    double total_size, step_ratio, gamma;
    ts_cyclic_mode mode;
} ts_cyclic;
TS_API double ts_cyclic_cycle(const ts_cyclic *c, int64_t epoch); /* NAN on error */
/* the mode's scale_fn at x (the cycle, or the epoch for exp_range); NAN on error or for CUSTOM */
TS_API double ts_cyclic_scale(const ts_cyclic *c, double x);
TS_API ts_status ts_cyclic_at(const ts_cyclic *c, int64_t epoch, double scale,
                              const double *base_lrs, const double *max_lrs,
                              const double *base_moms, const double *max_moms, double *lrs,
                              double *moms, int n);
/* ReduceLROnPlateau.step(metric): the state's best, bad-epoch and cooldown counters advance, and
 * when the metric has not improved for more than patience epochs each lrs[g] becomes
 * max(lrs[g] x factor, min_lrs[g]) where that lowers it by more than eps. *reduced: whether it
 * did (NULL: not wanted). A new state has best = +inf (mode min) or -inf (max), counters 0. */
typedef struct ts_plateau {
    bool mode_max, threshold_abs;
    double factor, threshold, eps;
    int64_t patience, cooldown;
    double best;
    int64_t num_bad_epochs, cooldown_counter;
} ts_plateau;
TS_API ts_status ts_plateau_step(ts_plateau *p, double metric, const double *min_lrs, double *lrs,
                                 int n, bool *reduced);
/* TS_ERR_STATE past a one-cycle schedule's end or while a graph is captured */
TS_API ts_status ts_scheduler_step(ts_lr_scheduler *s);
TS_API int ts_scheduler_last_epoch(ts_lr_scheduler *s); /* -1 on error */
TS_API void ts_scheduler_free(ts_lr_scheduler *s);

/* torch.optim.LBFGS: each ts_lbfgs_step runs up to max_iter iterations of the two-loop recursion
 * over the last history_size update directions, with strong_wolfe PyTorch's strong-Wolfe line
 * search (c1 1e-4, c2 0.9), re-evaluating the model through the closure: it computes the loss at
 * the parameters' current values into *loss with their gradients set (backward), returning TS_OK
 * or an error status (its error set), which stops the step. max_eval <= 0 means max_iter * 5 / 4.
 * The parameters share one dtype and device; the flat vectors live there. *loss_out: the first
 * evaluation's loss (NULL: not wanted). The state (PyTorch's state[0]) can be read and loaded:
 * ts_lbfgs_get_state fills st with borrowed pointers valid until the next step or load;
 * ts_lbfgs_set_state copies (retains) them. */
typedef struct ts_lbfgs ts_lbfgs;
typedef struct ts_lbfgs_opts {
    double lr;
    int max_iter, max_eval;
    double tolerance_grad, tolerance_change;
    int history_size;
    bool strong_wolfe, maximize;
} ts_lbfgs_opts;
typedef ts_status (*ts_lbfgs_closure)(void *ctx, double *loss);
typedef struct ts_lbfgs_state {
    int64_t n_iter, func_evals;
    ts_tensor *d, *prev_flat_grad; /* NULL before the first iteration */
    double t, h_diag, prev_loss;
    int n_history; /* old_dirs[i], old_stps[i], ro[i], oldest first */
    ts_tensor *const *old_dirs, *const *old_stps;
    const double *ro;
} ts_lbfgs_state;
TS_API ts_lbfgs *ts_lbfgs_new(ts_tensor *const *params, int n, ts_lbfgs_opts opts);
TS_API ts_status ts_lbfgs_step(ts_lbfgs *o, ts_lbfgs_closure f, void *ctx, double *loss_out);
TS_API ts_status ts_lbfgs_get_state(ts_lbfgs *o, ts_lbfgs_state *st);
TS_API ts_status ts_lbfgs_set_state(ts_lbfgs *o, const ts_lbfgs_state *st);
TS_API void ts_lbfgs_free(ts_lbfgs *o);

/* torch.nn.utils.clip_grad_norm_: scales gradients in place by min(max_norm / (total + 1e-6), 1),
 * total being their norm before clipping (the norm of each gradient's norm). norm_type 0 -> 2;
 * INFINITY for the max norm. ts_clip_grad_norm returns total (NAN on error), read to the host.
 * The _tensor forms return it as a 0-d tensor on the first gradient's device (float64 when a
 * gradient is, else float32; NULL on error) and never read the device, so they can run inside a
 * captured step (docs/CAPTURE.md); ts_clip_grad_norm is ts_item of it. */
TS_API double ts_clip_grad_norm(ts_tensor *const *params, int n, double max_norm, double norm_type);
TS_API double ts_clip_grad_norm_module(ts_module *m, double max_norm);
TS_API ts_tensor *ts_clip_grad_norm_tensor(ts_tensor *const *params, int n, double max_norm,
                                           double norm_type);
TS_API ts_tensor *ts_clip_grad_norm_module_tensor(ts_module *m, double max_norm);

/* The 0.1 names of the constructors above, kept as aliases for the 0.x series and removed at
 * 1.0 (decision 0025: a constructor is ts_<type>_new). Each does what its new name does. */
TS_API ts_optim *ts_sgd(ts_module *m, ts_sgd_opts o);
TS_API ts_optim *ts_sgd_params(ts_tensor *const *params, int n, ts_sgd_opts o);
TS_API ts_optim *ts_adam(ts_module *m, ts_adam_opts o);
TS_API ts_optim *ts_adam_params(ts_tensor *const *params, int n, ts_adam_opts o);
TS_API ts_optim *ts_adamw(ts_module *m, ts_adam_opts o);
TS_API ts_optim *ts_adamw_params(ts_tensor *const *params, int n, ts_adam_opts o);
TS_API ts_optim *ts_rmsprop(ts_module *m, ts_rmsprop_opts o);
TS_API ts_optim *ts_rmsprop_params(ts_tensor *const *params, int n, ts_rmsprop_opts o);
TS_API ts_optim *ts_adagrad(ts_module *m, ts_adagrad_opts o);
TS_API ts_optim *ts_adagrad_params(ts_tensor *const *params, int n, ts_adagrad_opts o);
TS_API ts_optim *ts_adadelta(ts_module *m, ts_adadelta_opts o);
TS_API ts_optim *ts_adadelta_params(ts_tensor *const *params, int n, ts_adadelta_opts o);
TS_API ts_optim *ts_adamax(ts_module *m, ts_adamax_opts o);
TS_API ts_optim *ts_adamax_params(ts_tensor *const *params, int n, ts_adamax_opts o);
TS_API ts_optim *ts_nadam(ts_module *m, ts_nadam_opts o);
TS_API ts_optim *ts_nadam_params(ts_tensor *const *params, int n, ts_nadam_opts o);
TS_API ts_optim *ts_radam(ts_module *m, ts_radam_opts o);
TS_API ts_optim *ts_radam_params(ts_tensor *const *params, int n, ts_radam_opts o);
TS_API ts_optim *ts_asgd(ts_module *m, ts_asgd_opts o);
TS_API ts_optim *ts_asgd_params(ts_tensor *const *params, int n, ts_asgd_opts o);
TS_API ts_optim *ts_rprop(ts_module *m, ts_rprop_opts o);
TS_API ts_optim *ts_rprop_params(ts_tensor *const *params, int n, ts_rprop_opts o);
TS_API ts_optim *ts_adamw_decay_groups(ts_module *m, ts_adam_opts o);
TS_API ts_lr_scheduler *ts_step_lr(ts_optim *opt, int step_size, double gamma);
TS_API ts_lr_scheduler *ts_multistep_lr(ts_optim *opt, const int *milestones, int n, double gamma);
TS_API ts_lr_scheduler *ts_cosine_lr(ts_optim *opt, int t_max, double eta_min);
TS_API ts_lr_scheduler *ts_linear_lr(ts_optim *opt, double start_factor, double end_factor,
                                     int total_iters);
TS_API ts_lr_scheduler *ts_onecycle_lr(ts_optim *opt, double max_lr, int total_steps);
TS_API ts_lr_scheduler *ts_warmup_cosine_lr(ts_optim *opt, int warmup_steps, int total_steps,
                                            double min_ratio);

#endif /* TESSERA_OPTIM_H */
