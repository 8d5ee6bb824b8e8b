/* scheduler.c — torch.optim.lr_scheduler: step, multistep, cosine, linear, one-cycle and cosine
 * with warm restarts over a C optimizer's groups. The rates come from lr_rule.c's arithmetic (and
 * the warm restarts' below), which tessera.optim.lr_scheduler also calls. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"

typedef enum sched_kind {
    S_STEP,
    S_MULTISTEP,
    S_COSINE,
    S_LINEAR,
    S_ONECYCLE,
    S_WARMUP_COSINE,
    S_WARM_RESTARTS
} sched_kind;

struct ts_lr_scheduler {
    sched_kind kind;
    ts_optim *opt;
    int last_epoch;
    int n_groups;
    double *base_lrs; /* [n_groups] */
    /* StepLR, MultiStepLR, CosineAnnealingLR, LinearLR */
    ts_lr_rule rule;
    int64_t *milestones;
    /* OneCycleLR (per group, as torch keeps them on the groups) */
    int total_steps;
    double *initial_lr, *max_lr, *min_lr;
    /* warm-up + cosine (LambdaLR): warmup steps, total_steps, min_ratio */
    int warmup;
    double min_ratio;
    /* CosineAnnealingWarmRestarts */
    ts_warm_restarts wr;
};

static const double PI = 3.14159265358979323846;

/* CosineAnnealingWarmRestarts.get_lr for one base lr */
static double warm_restarts_lr(const ts_warm_restarts *w, double base) {
    return w->eta_min + (base - w->eta_min) * (1 + cos(PI * w->t_cur / w->t_i)) / 2;
}

/* CosineAnnealingWarmRestarts.step(epoch): T_cur, T_i and last_epoch for the next epoch (epoch
 * NULL) or for *epoch, as torch computes them */
ts_status ts_warm_restarts_step(ts_warm_restarts *w, const double *epoch, const double *base_lrs,
                                double *lrs, int n) {
    static const char op[] = "warm_restarts_step";
    if (!w) return tsi_error_set(TS_ERR_ARG, "%s: state is NULL", op);
    if (w->t_0 <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected positive T_0, got %lld", op,
                             (long long)w->t_0);
    if (w->t_mult < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: expected T_mult >= 1, got %lld", op,
                             (long long)w->t_mult);
    if (n < 0 || (n > 0 && (!base_lrs || !lrs)))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid learning-rate arrays (%d)", op, n);
    double e;
    if (!epoch && w->last_epoch < 0) {
        e = 0; /* the first step: epoch 0 (T_cur from -1 to 0 by the epoch form) */
        w->t_i = (double)w->t_0;
        w->t_cur = 0;
    } else if (!epoch) {
        e = (double)(w->last_epoch + 1);
        w->t_cur += 1;
        if (w->t_cur >= w->t_i) {
            w->t_cur = fmod(w->t_cur, w->t_i);
            w->t_i *= (double)w->t_mult;
        }
    } else {
        e = *epoch;
        if (!(e >= 0))
            return tsi_error_set(TS_ERR_ARG, "%s: expected non-negative epoch, got %g", op, e);
        const double t0 = (double)w->t_0, tm = (double)w->t_mult;
        if (e >= t0) {
            if (w->t_mult == 1) {
                w->t_cur = fmod(e, t0);
            } else {
                /* int(math.log(epoch / T_0 * (T_mult - 1) + 1, T_mult)) */
                double k = floor(log(e / t0 * (tm - 1) + 1) / log(tm));
                w->t_cur = e - t0 * (pow(tm, k) - 1) / (tm - 1);
                w->t_i = t0 * pow(tm, k);
            }
        } else {
            w->t_i = t0;
            w->t_cur = e;
        }
    }
    w->last_epoch = (int64_t)floor(e);
    return ts_warm_restarts_lrs(w, base_lrs, lrs, n);
}

ts_status ts_warm_restarts_lrs(const ts_warm_restarts *w, const double *base_lrs, double *lrs,
                               int n) {
    if (!w) return tsi_error_set(TS_ERR_ARG, "warm_restarts_lrs: state is NULL");
    if (n < 0 || (n > 0 && (!base_lrs || !lrs)))
        return tsi_error_set(TS_ERR_ARG, "warm_restarts_lrs: invalid learning-rate arrays (%d)", n);
    for (int g = 0; g < n; g++) lrs[g] = warm_restarts_lr(w, base_lrs[g]);
    return TS_OK;
}

/* get_lr() of torch's scheduler for group g, with last_epoch already advanced */
static double sched_lr(ts_lr_scheduler *s, int g) {
    tsi_optim_group *grp = &s->opt->groups[g];
    const double lr = grp->h.lr, base = s->base_lrs[g];
    const int e = s->last_epoch;
    switch (s->kind) {
    case S_STEP:
    case S_MULTISTEP:
    case S_COSINE:
    case S_LINEAR: {
        /* the constructor's step is torch's initial one (epoch 0, step count 1) */
        double out = lr;
        ts_lr_rule_step(&s->rule, e, (int64_t)e + 1, e == 0, &base, &lr, &out, 1);
        return out;
    }
    case S_WARMUP_COSINE:
        return base * ts_warmup_cosine_factor(e, s->warmup, s->total_steps, s->min_ratio);
    case S_WARM_RESTARTS:
        return warm_restarts_lr(&s->wr, base);
    case S_ONECYCLE: {
        const ts_onecycle c = {.total_steps = s->total_steps, .pct_start = 0.3};
        double lr_out = lr, mom_out = 0;
        ts_onecycle_at(&c, e, s->initial_lr[g], s->max_lr[g], s->min_lr[g], 0.95, 0.85, &lr_out,
                       &mom_out);
        /* cycle_momentum (torch's default): beta1 for the Adam family, momentum otherwise */
        if (grp->h.kind == TS_OPTIM_ADAM || grp->h.kind == TS_OPTIM_ADAMW ||
            grp->h.kind == TS_OPTIM_ADAMAX || grp->h.kind == TS_OPTIM_NADAM ||
            grp->h.kind == TS_OPTIM_RADAM)
            grp->h.beta1 = mom_out;
        else
            grp->h.momentum = mom_out;
        return lr_out;
    }
    }
    return lr;
}

static void sched_apply(ts_lr_scheduler *s) {
    int n = s->n_groups < s->opt->n_groups ? s->n_groups : s->opt->n_groups;
    /* torch computes every group's value before it sets any */
    double lrs[64], *v = n <= 64 ? lrs : malloc((size_t)n * sizeof *v);
    if (!v) {
        tsi_error_set(TS_ERR_OOM, "scheduler_step: out of host memory");
        return;
    }
    for (int g = 0; g < n; g++) v[g] = sched_lr(s, g);
    for (int g = 0; g < n; g++) s->opt->groups[g].h.lr = v[g];
    if (v != lrs) free(v);
    /* a capturable optimizer reads them on the device */
    for (int g = 0; g < n && !ts_error(); g++) tsi_optim_group_changed("scheduler_step", s->opt, g);
}

ts_status ts_scheduler_step(ts_lr_scheduler *s) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "scheduler_step: scheduler is NULL");
    if (s->kind == S_ONECYCLE && s->last_epoch + 1 > s->total_steps)
        return tsi_error_set(TS_ERR_STATE,
                             "scheduler_step: tried to step %d times; the one-cycle "
                             "schedule has %d total steps",
                             s->last_epoch + 2, s->total_steps);
    /* while capturing the schedule would be frozen in the graph: it steps between replays */
    if (tsi_optim_refuse_capturing("scheduler_step", s->opt, 0, s->opt->n_params,
                                   "a learning-rate schedule step (step it between replays: the "
                                   "replays read the rate from the device)"))
        return ts_error();
    if (s->kind == S_WARM_RESTARTS) {
        /* its own epoch arithmetic; the lrs are formed per group by sched_lr */
        double unused = 0.0; /* no groups: neither read nor written */
        if (ts_warm_restarts_step(&s->wr, NULL, &unused, &unused, 0)) return ts_error();
        s->last_epoch = (int)s->wr.last_epoch;
    } else {
        s->last_epoch++;
    }
    sched_apply(s);
    return ts_error(); /* sched_apply's out of memory (decision 0025: TS_OK only without one) */
}

int ts_scheduler_last_epoch(ts_lr_scheduler *s) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "scheduler_last_epoch: scheduler is NULL"), -1;
    return s->last_epoch;
}

void ts_scheduler_free(ts_lr_scheduler *s) {
    if (!s) return;
    free(s->base_lrs);
    free(s->milestones);
    free(s->initial_lr);
    free(s->max_lr);
    free(s->min_lr);
    free(s);
}

/* The common part of torch's _LRScheduler.__init__ (its first step is done by the caller once
 * the kind's fields are set). */
static ts_lr_scheduler *sched_new(const char *op, ts_optim *opt, sched_kind kind) {
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op), NULL;
    ts_lr_scheduler *s = calloc(1, sizeof *s);
    int n = opt->n_groups;
    if (s) s->base_lrs = malloc((size_t)n * sizeof *s->base_lrs);
    if (!s || !s->base_lrs) {
        ts_scheduler_free(s);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    s->kind = kind;
    s->opt = opt;
    s->n_groups = n;
    s->last_epoch = -1;
    return s;
}

double ts_warmup_cosine_factor(int64_t step, int64_t warmup, int64_t total, double min_ratio) {
    if (step < warmup) return (double)(step + 1) / (double)warmup;
    if (step >= total) return min_ratio;
    double progress = (double)(step - warmup) / (double)(total - warmup);
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + cos(PI * progress));
}

/* base_lrs from each group's initial_lr (set now unless a scheduler set it before), then the
 * initial step to last_epoch 0. */
static ts_lr_scheduler *sched_start(ts_lr_scheduler *s) {
    for (int g = 0; g < s->n_groups; g++) {
        tsi_optim_group *grp = &s->opt->groups[g];
        if (!grp->has_initial_lr) {
            grp->initial_lr = grp->h.lr;
            grp->has_initial_lr = true;
        }
        s->base_lrs[g] = grp->initial_lr;
    }
    ts_scheduler_step(s);
    return s;
}

ts_lr_scheduler *ts_step_lr(ts_optim *opt, int step_size, double gamma) {
    static const char op[] = "step_lr";
    if (step_size <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: step_size must be positive, got %d", op, step_size),
               NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_STEP);
    if (!s) return NULL;
    s->rule = (ts_lr_rule){.kind = TS_LR_STEP, .step_size = step_size, .gamma = gamma};
    return sched_start(s);
}

ts_lr_scheduler *ts_multistep_lr(ts_optim *opt, const int *milestones, int n, double gamma) {
    static const char op[] = "multistep_lr";
    if (n < 0 || (n > 0 && !milestones))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid milestone list (%d at %p)", op, n,
                             (const void *)milestones),
               NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_MULTISTEP);
    if (!s) return NULL;
    s->milestones = malloc((size_t)(n > 0 ? n : 1) * sizeof *s->milestones);
    if (!s->milestones) {
        ts_scheduler_free(s);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    for (int i = 0; i < n; i++) s->milestones[i] = milestones[i];
    s->rule = (ts_lr_rule){
        .kind = TS_LR_MULTISTEP, .milestones = s->milestones, .n_milestones = n, .gamma = gamma};
    return sched_start(s);
}

ts_lr_scheduler *ts_cosine_lr(ts_optim *opt, int t_max, double eta_min) {
    static const char op[] = "cosine_lr";
    if (t_max <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: T_max must be positive, got %d", op, t_max), NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_COSINE);
    if (!s) return NULL;
    s->rule = (ts_lr_rule){.kind = TS_LR_COSINE, .t_max = t_max, .eta_min = eta_min};
    return sched_start(s);
}

ts_lr_scheduler *ts_linear_lr(ts_optim *opt, double start_factor, double end_factor,
                              int total_iters) {
    static const char op[] = "linear_lr";
    if (!(start_factor > 0 && start_factor <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: starting multiplicative factor expected to be "
                             "greater than 0 and less or equal to 1, got %g",
                             op, start_factor),
               NULL;
    if (!(end_factor >= 0 && end_factor <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: ending multiplicative factor expected to be between "
                             "0 and 1, got %g",
                             op, end_factor),
               NULL;
    if (total_iters < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: total_iters must not be negative, got %d", op,
                             total_iters),
               NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_LINEAR);
    if (!s) return NULL;
    s->rule = (ts_lr_rule){.kind = TS_LR_LINEAR,
                           .factor = start_factor,
                           .end_factor = end_factor,
                           .total_iters = total_iters};
    return sched_start(s);
}

ts_lr_scheduler *ts_onecycle_lr(ts_optim *opt, double max_lr, int total_steps) {
    static const char op[] = "onecycle_lr";
    if (total_steps <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected a positive total_steps, got %d", op,
                             total_steps),
               NULL;
    if (!(max_lr >= 0)) return tsi_error_set(TS_ERR_ARG, "%s: invalid max_lr %g", op, max_lr), NULL;
    /* torch's cycle_momentum needs a momentum or a beta1 */
    if (opt && (opt->info == &tsi_adagrad_info || opt->info == &tsi_adadelta_info ||
                opt->info == &tsi_asgd_info || opt->info == &tsi_rprop_info))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: %s has no momentum or beta1 to cycle (PyTorch's "
                             "cycle_momentum needs one)",
                             op, opt->info->name),
               NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_ONECYCLE);
    if (!s) return NULL;
    int n = s->n_groups;
    s->initial_lr = malloc((size_t)n * sizeof(double));
    s->max_lr = malloc((size_t)n * sizeof(double));
    s->min_lr = malloc((size_t)n * sizeof(double));
    if (!s->initial_lr || !s->max_lr || !s->min_lr) {
        ts_scheduler_free(s);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    s->total_steps = total_steps;
    for (int g = 0; g < n; g++) {
        tsi_optim_group *grp = &opt->groups[g];
        s->initial_lr[g] = max_lr / 25.;
        s->max_lr[g] = max_lr;
        s->min_lr[g] = s->initial_lr[g] / 1e4;
        /* torch sets initial_lr outright (not setdefault) */
        grp->initial_lr = s->initial_lr[g];
        grp->has_initial_lr = true;
    }
    return sched_start(s);
}

ts_lr_scheduler *ts_warmup_cosine_lr(ts_optim *opt, int warmup_steps, int total_steps,
                                     double min_ratio) {
    static const char op[] = "warmup_cosine_lr";
    if (warmup_steps < 0 || total_steps <= warmup_steps)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected 0 <= warmup_steps < total_steps, got %d and %d", op,
                             warmup_steps, total_steps),
               NULL;
    if (!(min_ratio >= 0 && min_ratio <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: min_ratio must be in [0, 1], got %g", op, min_ratio),
               NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_WARMUP_COSINE);
    if (!s) return NULL;
    s->warmup = warmup_steps;
    s->total_steps = total_steps;
    s->min_ratio = min_ratio;
    return sched_start(s);
}

ts_lr_scheduler *ts_cosine_warm_restarts_lr_new(ts_optim *opt, int t_0, int t_mult,
                                                double eta_min) {
    static const char op[] = "cosine_warm_restarts_lr";
    if (t_0 <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected positive T_0, got %d", op, t_0), NULL;
    if (t_mult < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: expected T_mult >= 1, got %d", op, t_mult), NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_WARM_RESTARTS);
    if (!s) return NULL;
    s->wr = (ts_warm_restarts){.t_0 = t_0,
                               .t_mult = t_mult,
                               .eta_min = eta_min,
                               .t_i = t_0,
                               .t_cur = -1,
                               .last_epoch = -1};
    return sched_start(s);
}
