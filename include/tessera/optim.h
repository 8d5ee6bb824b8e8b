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
/* TS_ERR_STATE past a one-cycle schedule's end or while a graph is captured */
TS_API ts_status ts_scheduler_step(ts_lr_scheduler *s);
TS_API int ts_scheduler_last_epoch(ts_lr_scheduler *s); /* -1 on error */
TS_API void ts_scheduler_free(ts_lr_scheduler *s);

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
