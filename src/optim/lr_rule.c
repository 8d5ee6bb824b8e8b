/* lr_rule.c — the arithmetic of torch.optim.lr_scheduler's schedules, once: the epoch rules
 * (recursive and closed forms), OneCycleLR, CyclicLR and ReduceLROnPlateau. The C schedulers
 * (scheduler.c) and tessera.optim.lr_scheduler both call these, with torch's operation order so
 * the rates match PyTorch's to the last bit. */
#include <math.h>

#include "optim/optim_internal.h"

static const double PI = 3.14159265358979323846;

static ts_status check_rule(const char *op, const ts_lr_rule *r, bool closed, const double *base,
                            const double *lrs, const double *out, int n) {
    if (!r) return tsi_error_set(TS_ERR_ARG, "%s: rule is NULL", op);
    if (n < 0 || (n > 0 && (!base || !out || (!closed && !lrs))))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid learning-rate arrays (%d)", op, n);
    switch (r->kind) {
    case TS_LR_LAMBDA:
    case TS_LR_MULTIPLICATIVE:
        if (closed)
            return tsi_error_set(TS_ERR_ARG, "%s: a lambda schedule has no closed form", op);
        if (n > 0 && !r->factors) return tsi_error_set(TS_ERR_ARG, "%s: factors is NULL", op);
        break;
    case TS_LR_STEP:
        if (r->step_size <= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: step_size must be positive, got %lld", op,
                                 (long long)r->step_size);
        break;
    case TS_LR_MULTISTEP:
        if (r->n_milestones < 0 || (r->n_milestones > 0 && !r->milestones))
            return tsi_error_set(TS_ERR_ARG, "%s: invalid milestones (%d)", op, r->n_milestones);
        break;
    case TS_LR_CONSTANT:
    case TS_LR_LINEAR:
    case TS_LR_POLYNOMIAL:
        if (r->total_iters < 0 || (closed && r->total_iters == 0))
            return tsi_error_set(TS_ERR_ARG, "%s: total_iters must be %s, got %lld", op,
                                 closed ? "positive" : "non-negative", (long long)r->total_iters);
        if (r->kind == TS_LR_CONSTANT && !(r->factor >= 0 && r->factor <= 1))
            return tsi_error_set(TS_ERR_ARG, "%s: factor must be in [0, 1], got %g", op, r->factor);
        break;
    case TS_LR_EXPONENTIAL:
        break;
    case TS_LR_COSINE:
        if (r->t_max <= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: T_max must be positive, got %lld", op,
                                 (long long)r->t_max);
        break;
    default:
        return tsi_error_set(TS_ERR_ARG, "%s: unknown schedule kind %d", op, (int)r->kind);
    }
    return TS_OK;
}

static int milestone_hits(const ts_lr_rule *r, int64_t epoch, bool up_to) {
    int hits = 0;
    for (int i = 0; i < r->n_milestones; i++)
        hits += up_to ? r->milestones[i] <= epoch : r->milestones[i] == epoch;
    return hits;
}

static double cosine_closed(const ts_lr_rule *r, int64_t e, double base) {
    return r->eta_min + (base - r->eta_min) * (1 + cos(PI * (double)e / (double)r->t_max)) / 2;
}

/* torch's get_lr for one group (lr: its current rate) */
static double rule_step(const ts_lr_rule *r, int64_t e, int64_t step_count, bool initial,
                        double base, double lr, int g) {
    switch (r->kind) {
    case TS_LR_LAMBDA:
        return base * r->factors[g];
    case TS_LR_MULTIPLICATIVE:
        return initial ? lr : lr * r->factors[g];
    case TS_LR_STEP:
        return e == 0 || e % r->step_size != 0 ? lr : lr * r->gamma;
    case TS_LR_MULTISTEP: {
        int hits = milestone_hits(r, e, false);
        return hits == 0 ? lr : lr * pow(r->gamma, hits);
    }
    case TS_LR_CONSTANT:
        if (e == 0) return lr * r->factor;
        if (e != r->total_iters) return lr;
        return lr * (1.0 / r->factor);
    case TS_LR_LINEAR: {
        const double s = r->factor, f = r->end_factor;
        if (e == 0) return lr * s;
        if (initial || e > r->total_iters) return lr;
        return lr * (1.0 + (f - s) / ((double)r->total_iters * s + (double)(e - 1) * (f - s)));
    }
    case TS_LR_EXPONENTIAL:
        return initial ? lr : lr * r->gamma;
    case TS_LR_POLYNOMIAL: {
        if (initial || e > r->total_iters) return lr;
        const double n = (double)r->total_iters;
        return lr * pow((1.0 - (double)e / n) / (1.0 - (double)(e - 1) / n), r->power);
    }
    case TS_LR_COSINE: {
        const double t = (double)r->t_max, eta = r->eta_min;
        if (initial) return lr;
        if (step_count == 1 && e > 0) /* torch multiplies in this order here */
            return eta + (base - eta) * (1 + cos((double)e * PI / t)) / 2;
        if ((e - 1 - r->t_max) % (2 * r->t_max) == 0)
            return lr + (base - eta) * (1 - cos(PI / t)) / 2;
        return (1 + cos(PI * (double)e / t)) / (1 + cos(PI * (double)(e - 1) / t)) * (lr - eta) +
               eta;
    }
    }
    return lr;
}

ts_status ts_lr_rule_step(const ts_lr_rule *r, int64_t epoch, int64_t step_count, bool initial,
                          const double *base_lrs, const double *lrs, double *out, int n) {
    if (check_rule("lr_rule_step", r, false, base_lrs, lrs, out, n)) return ts_error();
    /* out[g] reads only lrs[g]: out may be lrs */
    for (int g = 0; g < n; g++)
        out[g] = rule_step(r, epoch, step_count, initial, base_lrs[g], lrs[g], g);
    return TS_OK;
}

static double rule_closed(const ts_lr_rule *r, int64_t e, double base) {
    switch (r->kind) {
    case TS_LR_STEP: {
        /* Python's floor division */
        int64_t q = e / r->step_size;
        if (e % r->step_size != 0 && e < 0) q--;
        return base * pow(r->gamma, (double)q);
    }
    case TS_LR_MULTISTEP:
        return base * pow(r->gamma, milestone_hits(r, e, true));
    case TS_LR_CONSTANT:
        return base * (r->factor + (double)(e >= r->total_iters) * (1 - r->factor));
    case TS_LR_LINEAR: {
        const int64_t m = e < r->total_iters ? e : r->total_iters;
        return base *
               (r->factor + (r->end_factor - r->factor) * (double)m / (double)r->total_iters);
    }
    case TS_LR_EXPONENTIAL:
        return base * pow(r->gamma, (double)e);
    case TS_LR_POLYNOMIAL: {
        const int64_t m = e < r->total_iters ? e : r->total_iters;
        return base * pow(1.0 - (double)m / (double)r->total_iters, r->power);
    }
    case TS_LR_COSINE:
        return cosine_closed(r, e, base);
    default:
        return NAN; /* refused by check_rule */
    }
}

ts_status ts_lr_rule_closed_form(const ts_lr_rule *r, int64_t epoch, const double *base_lrs,
                                 double *out, int n) {
    if (check_rule("lr_rule_closed_form", r, true, base_lrs, NULL, out, n)) return ts_error();
    for (int g = 0; g < n; g++) out[g] = rule_closed(r, epoch, base_lrs[g]);
    return TS_OK;
}

/* OneCycleLR's _anneal_func */
static double anneal(bool linear, double start, double end, double pct) {
    if (linear) return (end - start) * pct + start;
    double cos_out = cos(PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

ts_status ts_onecycle_at(const ts_onecycle *c, int64_t step, double initial_lr, double max_lr,
                         double min_lr, double max_momentum, double base_momentum, double *lr,
                         double *momentum) {
    static const char op[] = "onecycle_at";
    if (!c) return tsi_error_set(TS_ERR_ARG, "%s: schedule is NULL", op);
    if (!lr) return tsi_error_set(TS_ERR_ARG, "%s: lr is NULL", op);
    if (c->total_steps <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: expected a positive total_steps, got %lld", op,
                             (long long)c->total_steps);
    if (!(c->pct_start >= 0 && c->pct_start <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: expected pct_start in [0, 1], got %g", op,
                             c->pct_start);
    if (step > c->total_steps)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Tried to step %lld times. The specified number of total steps "
                             "is %lld",
                             op, (long long)step, (long long)c->total_steps);
    const double t = (double)c->total_steps;
    /* the phases: end step, start and end lr, start and end momentum */
    const double phase1_end = c->pct_start * t - 1;
    double ends[3], lr0[3], lr1[3], m0[3], m1[3];
    int n = c->three_phase ? 3 : 2;
    ends[0] = phase1_end, lr0[0] = initial_lr, lr1[0] = max_lr;
    m0[0] = max_momentum, m1[0] = base_momentum;
    if (c->three_phase) {
        ends[1] = 2 * c->pct_start * t - 2, lr0[1] = max_lr, lr1[1] = initial_lr;
        m0[1] = base_momentum, m1[1] = max_momentum;
        ends[2] = t - 1, lr0[2] = initial_lr, lr1[2] = min_lr;
        m0[2] = max_momentum, m1[2] = max_momentum;
    } else {
        ends[1] = t - 1, lr0[1] = max_lr, lr1[1] = min_lr;
        m0[1] = base_momentum, m1[1] = max_momentum;
    }
    double start = 0;
    for (int i = 0; i < n; i++) {
        if ((double)step <= ends[i] || i == n - 1) {
            double pct = ((double)step - start) / (ends[i] - start);
            *lr = anneal(c->linear, lr0[i], lr1[i], pct);
            if (momentum) *momentum = anneal(c->linear, m0[i], m1[i], pct);
            break;
        }
        start = ends[i];
    }
    return TS_OK;
}

static ts_status check_cyclic(const char *op, const ts_cyclic *c) {
    if (!c) return tsi_error_set(TS_ERR_ARG, "%s: schedule is NULL", op);
    if (!(c->total_size > 0))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: step_size_up + step_size_down must be positive, got %g", op,
                             c->total_size);
    if ((unsigned)c->mode > TS_CYCLIC_CUSTOM)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown mode %d", op, (int)c->mode);
    return TS_OK;
}

static double cyclic_scale(ts_cyclic_mode mode, double gamma, double x) {
    switch (mode) {
    case TS_CYCLIC_TRIANGULAR:
        return 1.0;
    case TS_CYCLIC_TRIANGULAR2:
        return 1 / pow(2.0, x - 1);
    case TS_CYCLIC_EXP_RANGE:
        return pow(gamma, x);
    default:
        return NAN;
    }
}

double ts_cyclic_scale(const ts_cyclic *c, double x) {
    if (check_cyclic("cyclic_scale", c)) return NAN;
    if (c->mode == TS_CYCLIC_CUSTOM)
        return tsi_error_set(TS_ERR_ARG, "cyclic_scale: a custom mode's scale is the caller's"),
               NAN;
    return cyclic_scale(c->mode, c->gamma, x);
}

double ts_cyclic_cycle(const ts_cyclic *c, int64_t epoch) {
    if (check_cyclic("cyclic_cycle", c)) return NAN;
    return floor(1 + (double)epoch / c->total_size);
}

ts_status ts_cyclic_at(const ts_cyclic *c, int64_t epoch, double scale, const double *base_lrs,
                       const double *max_lrs, const double *base_moms, const double *max_moms,
                       double *lrs, double *moms, int n) {
    static const char op[] = "cyclic_at";
    if (check_cyclic(op, c)) return ts_error();
    if (n < 0 || (n > 0 && (!base_lrs || !max_lrs || !lrs)) ||
        (n > 0 && base_moms && (!max_moms || !moms)))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid arrays (%d)", op, n);
    const double e = (double)epoch;
    const double cycle = floor(1 + e / c->total_size);
    const double x = 1.0 + e / c->total_size - cycle;
    const double s = x <= c->step_ratio ? x / c->step_ratio : (x - 1) / (c->step_ratio - 1);
    if (c->mode != TS_CYCLIC_CUSTOM)
        scale = cyclic_scale(c->mode, c->gamma, c->mode == TS_CYCLIC_EXP_RANGE ? e : cycle);
    for (int g = 0; g < n; g++) {
        lrs[g] = base_lrs[g] + (max_lrs[g] - base_lrs[g]) * s * scale;
        if (base_moms) moms[g] = max_moms[g] - (max_moms[g] - base_moms[g]) * s * scale;
    }
    return TS_OK;
}

static bool plateau_better(const ts_plateau *p, double a) {
    if (!p->mode_max && !p->threshold_abs) return a < p->best * (1.0 - p->threshold);
    if (!p->mode_max) return a < p->best - p->threshold;
    if (!p->threshold_abs) return a > p->best * (p->threshold + 1.0);
    return a > p->best + p->threshold;
}

ts_status ts_plateau_step(ts_plateau *p, double metric, const double *min_lrs, double *lrs, int n,
                          bool *reduced) {
    static const char op[] = "plateau_step";
    if (!p) return tsi_error_set(TS_ERR_ARG, "%s: state is NULL", op);
    if (n < 0 || (n > 0 && (!min_lrs || !lrs)))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid learning-rate arrays (%d)", op, n);
    if (!(p->factor < 1.0)) return tsi_error_set(TS_ERR_ARG, "%s: factor should be < 1.0", op);
    if (reduced) *reduced = false;
    if (plateau_better(p, metric)) {
        p->best = metric;
        p->num_bad_epochs = 0;
    } else {
        p->num_bad_epochs++;
    }
    if (p->cooldown_counter > 0) {
        p->cooldown_counter--;
        p->num_bad_epochs = 0;
    }
    if (p->num_bad_epochs > p->patience) {
        for (int g = 0; g < n; g++) {
            double old = lrs[g], v = old * p->factor;
            double nw = v > min_lrs[g] ? v : min_lrs[g];
            if (old - nw > p->eps) lrs[g] = nw;
        }
        if (reduced) *reduced = true;
        p->cooldown_counter = p->cooldown;
        p->num_bad_epochs = 0;
    }
    return TS_OK;
}
