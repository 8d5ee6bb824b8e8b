/* scheduler.c — torch.optim.lr_scheduler: step, multistep, cosine, linear and one-cycle. */
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
    S_WARMUP_COSINE
} sched_kind;

struct ts_lr_scheduler {
    sched_kind kind;
    ts_optim *opt;
    int last_epoch;
    int n_groups;
    double *base_lrs; /* [n_groups] */
    /* StepLR, MultiStepLR */
    int step_size;
    double gamma;
    int *milestones;
    int n_milestones;
    /* CosineAnnealingLR */
    int t_max;
    double eta_min;
    /* LinearLR */
    double start_factor, end_factor;
    int total_iters;
    /* OneCycleLR (per group, as torch keeps them on the groups) */
    int total_steps;
    double *initial_lr, *max_lr, *min_lr;
    double phase1_end; /* float(pct_start * total_steps) - 1 */
    /* warm-up + cosine (LambdaLR): warmup steps, total_steps, min_ratio */
    int warmup;
    double min_ratio;
};

static const double PI = 3.14159265358979323846;

/* OneCycleLR's cos annealing from start to end as pct goes from 0 to 1 */
static double anneal_cos(double start, double end, double pct) {
    double cos_out = cos(PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* get_lr() of torch's scheduler for group g, with last_epoch already advanced */
static double sched_lr(ts_lr_scheduler *s, int g) {
    tsi_optim_group *grp = &s->opt->groups[g];
    const double lr = grp->h.lr, base = s->base_lrs[g];
    const int e = s->last_epoch;
    switch (s->kind) {
    case S_STEP:
        return e == 0 || e % s->step_size != 0 ? lr : lr * s->gamma;
    case S_MULTISTEP: {
        int hits = 0;
        for (int i = 0; i < s->n_milestones; i++) hits += s->milestones[i] == e;
        return hits == 0 ? lr : lr * pow(s->gamma, hits);
    }
    case S_COSINE: {
        const int t = s->t_max;
        const double eta = s->eta_min;
        if (e == 0) return lr;
        if ((e - 1 - t) % (2 * t) == 0) return lr + (base - eta) * (1 - cos(PI / t)) / 2;
        return (1 + cos(PI * e / t)) / (1 + cos(PI * (e - 1) / t)) * (lr - eta) + eta;
    }
    case S_LINEAR: {
        const double sf = s->start_factor, ef = s->end_factor;
        if (e == 0) return lr * sf;
        if (e > s->total_iters) return lr;
        return lr * (1. + (ef - sf) / (s->total_iters * sf + (e - 1) * (ef - sf)));
    }
    case S_WARMUP_COSINE:
        return base * ts_warmup_cosine_factor(e, s->warmup, s->total_steps, s->min_ratio);
    case S_ONECYCLE: {
        /* phases: initial -> max until phase1_end, then max -> min until total_steps - 1 */
        const double end1 = s->phase1_end, end2 = s->total_steps - 1;
        double pct, lr_out, mom_out;
        const bool first = e <= end1;
        if (first) {
            pct = e / end1;
            lr_out = anneal_cos(s->initial_lr[g], s->max_lr[g], pct);
            mom_out = anneal_cos(0.95, 0.85, pct);
        } else {
            pct = (e - end1) / (end2 - end1);
            lr_out = anneal_cos(s->max_lr[g], s->min_lr[g], pct);
            mom_out = anneal_cos(0.85, 0.95, pct);
        }
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
    s->last_epoch++;
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
    s->step_size = step_size;
    s->gamma = gamma;
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
    if (n > 0) memcpy(s->milestones, milestones, (size_t)n * sizeof *milestones);
    s->n_milestones = n;
    s->gamma = gamma;
    return sched_start(s);
}

ts_lr_scheduler *ts_cosine_lr(ts_optim *opt, int t_max, double eta_min) {
    static const char op[] = "cosine_lr";
    if (t_max <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: T_max must be positive, got %d", op, t_max), NULL;
    ts_lr_scheduler *s = sched_new(op, opt, S_COSINE);
    if (!s) return NULL;
    s->t_max = t_max;
    s->eta_min = eta_min;
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
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->total_iters = total_iters;
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
    s->phase1_end = (double)(0.3 * total_steps) - 1;
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
