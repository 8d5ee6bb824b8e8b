/* optim.c — the optimizer object: parameter groups, learning rates, zero_grad, the fused step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/profiler_hooks.h"
#include "optim/optim_internal.h"

/* ------------------------------------------------------------------ construction */
static bool grow_params(ts_optim *o, int need) {
    if (need <= o->cap_params) return true;
    int cap = o->cap_params ? o->cap_params : 8;
    while (cap < need) cap *= 2;
    tsi_optim_param *np = realloc(o->params, (size_t)cap * sizeof *np);
    if (!np) return false;
    o->params = np;
    o->cap_params = cap;
    return true;
}

static bool grow_groups(ts_optim *o) {
    if (o->n_groups < o->cap_groups) return true;
    int cap = o->cap_groups ? o->cap_groups * 2 : 2;
    tsi_optim_group *ng = realloc(o->groups, (size_t)cap * sizeof *ng);
    if (!ng) return false;
    o->groups = ng;
    o->cap_groups = cap;
    return true;
}

/* The scratch a step uses, sized for `need` parameters: a step then never allocates it. */
static bool grow_scratch(ts_optim *o, int need) {
    if (o->scratch_cap >= need) return true;
    int cap = o->cap_params;
    ts_kview *kv = malloc((size_t)(2 + TS_OPTIM_SLOTS) * (size_t)cap * sizeof *kv);
    double *steps = malloc((size_t)cap * sizeof *steps);
    bool *fresh = malloc((size_t)cap * sizeof *fresh);
    int *sel = malloc((size_t)cap * sizeof *sel);
    ts_tensor **copies = calloc(2 * (size_t)cap, sizeof *copies);
    ts_kview *skv = malloc((size_t)cap * sizeof *skv);
    double *coef = malloc((size_t)TS_OPTIM_COEFS * (size_t)cap * sizeof *coef);
    double *aux_next = malloc((size_t)TS_OPTIM_AUX * (size_t)cap * sizeof *aux_next);
    ts_kview *mkv = malloc((size_t)cap * sizeof *mkv);
    if (!kv || !steps || !fresh || !sel || !copies || !skv || !coef || !aux_next || !mkv) {
        free(kv), free(steps), free(fresh), free(sel), free(copies), free(skv);
        free(coef), free(aux_next), free(mkv);
        return false;
    }
    free(o->kv), free(o->steps), free(o->fresh), free(o->sel), free(o->copies), free(o->skv);
    free(o->coef), free(o->aux_next), free(o->mkv);
    o->kv = kv, o->steps = steps, o->fresh = fresh, o->sel = sel, o->copies = copies;
    o->skv = skv, o->coef = coef, o->aux_next = aux_next, o->mkv = mkv;
    o->scratch_cap = cap;
    return true;
}

/* Parameters must be float leaves, each in one group only (torch's rules). */
static bool check_params(const char *op, ts_optim *o, ts_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid parameter list (%d tensors at %p)", op, n,
                             (const void *)params),
               false;
    if (n == 0) return tsi_error_set(TS_ERR_ARG, "%s: got an empty parameter list", op), false;
    for (int i = 0; i < n; i++) {
        ts_tensor *t = params[i];
        if (!tsi_check_input(op, t, "a parameter")) return false;
        if (!tsi_is_float(t->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: parameter %d (%s) is not floating point", op, i,
                                 tsi_desc(t)),
                   false;
        if (t->grad_fn)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: can't optimize a non-leaf tensor (parameter %d, "
                                 "%s, comes from %s)",
                                 op, i, tsi_desc(t), t->grad_fn->name),
                   false;
        for (int j = 0; j < i; j++)
            if (params[j] == t)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: parameter %d appears twice in the list (also "
                                     "at %d)",
                                     op, i, j),
                       false;
        for (int j = 0; o && j < o->n_params; j++)
            if (o->params[j].p == t)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: parameter %d is already in a parameter group "
                                     "of this optimizer (index %d)",
                                     op, i, j),
                       false;
    }
    return true;
}

/* Appends a group (params already checked). */
static bool add_group(const char *op, ts_optim *o, ts_tensor *const *params, int n,
                      ts_optim_hparams h) {
    /* everything the group needs first: a failure leaves the optimizer as it was */
    if (!grow_groups(o) || !grow_params(o, o->n_params + n) || !grow_scratch(o, o->n_params + n))
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    tsi_optim_group *g = &o->groups[o->n_groups];
    memset(g, 0, sizeof *g);
    g->h = h;
    g->first = o->n_params;
    g->n = n;
    for (int i = 0; i < n; i++) {
        tsi_optim_param *pp = &o->params[o->n_params + i];
        memset(pp, 0, sizeof *pp);
        pp->p = ts_retain(params[i]);
    }
    o->n_params += n;
    o->n_groups++;
    return true;
}

/* Every hyperparameter finite. PyTorch lets an infinite momentum, decay or learning rate
 * through; they only make NaN weights, so they are refused here. */
static bool hparams_finite(const char *op, const ts_optim_hparams *h) {
    const char *names[] = {"learning rate",
                           "momentum",
                           "dampening",
                           "weight_decay",
                           "beta1",
                           "beta2",
                           "epsilon",
                           "alpha",
                           "lr_decay",
                           "rho",
                           "momentum_decay",
                           "lambd",
                           "initial_accumulator_value",
                           "etaminus",
                           "etaplus"};
    const double v[] = {h->lr,
                        h->momentum,
                        h->dampening,
                        h->weight_decay,
                        h->beta1,
                        h->beta2,
                        h->eps,
                        h->alpha,
                        h->lr_decay,
                        h->rho,
                        h->momentum_decay,
                        h->lambd,
                        h->initial_accumulator_value,
                        h->etaminus,
                        h->etaplus};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (!isfinite(v[i]))
            return tsi_error_set(TS_ERR_ARG, "%s: invalid %s value %g (must be finite)", op,
                                 names[i], v[i]),
                   false;
    return true;
}

ts_optim *tsi_optim_new(const char *op, const tsi_optim_kind_info *info, ts_optim_hparams h,
                        ts_tensor *const *params, int n) {
    tsi_init();
    if (!hparams_finite(op, &h) || !check_params(op, NULL, params, n)) return NULL;
    ts_optim *o = calloc(1, sizeof *o);
    if (!o) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    o->info = info;
    o->defaults = h;
    if (!add_group(op, o, params, n, h)) {
        ts_optim_free(o);
        return NULL;
    }
    return o;
}

ts_optim *tsi_optim_new_module(const char *op, const tsi_optim_kind_info *info, ts_optim_hparams h,
                               ts_module *m) {
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op), NULL;
    if (!hparams_finite(op, &h)) return NULL;
    ts_tensor_list l = ts_module_named_parameters(m);
    ts_optim *o = tsi_optim_new(op, info, h, l.tensors, l.n);
    ts_tensor_list_free(&l);
    return o;
}

ts_status ts_optim_add_param_group(ts_optim *opt, ts_tensor *const *params, int n, double lr) {
    static const char op[] = "optim_add_param_group";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (!(lr >= 0)) return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g", op, lr);
    if (!check_params(op, opt, params, n)) return ts_error();
    ts_optim_hparams h = opt->defaults;
    h.lr = lr;
    return add_group(op, opt, params, n, h) ? TS_OK : ts_error();
}

ts_status ts_optim_add_param_group_wd(ts_optim *opt, ts_tensor *const *params, int n, double lr,
                                      double weight_decay) {
    static const char op[] = "optim_add_param_group";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (!(lr >= 0)) return tsi_error_set(TS_ERR_ARG, "%s: invalid learning rate %g", op, lr);
    if (!(weight_decay >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid weight_decay value %g", op, weight_decay);
    if (!check_params(op, opt, params, n)) return ts_error();
    ts_optim_hparams h = opt->defaults;
    h.lr = lr;
    h.weight_decay = weight_decay;
    return add_group(op, opt, params, n, h) ? TS_OK : ts_error();
}

void tsi_optim_param_clear(tsi_optim_param *pp) {
    for (int k = 0; k < TS_OPTIM_SLOTS; k++) {
        ts_release(pp->state[k]);
        pp->state[k] = NULL;
        pp->fresh[k] = false;
    }
    tsi_optim_param_set_steps(pp, 0);
    for (int k = 0; k < TS_OPTIM_AUX; k++) pp->aux[k] = 0;
    pp->has_state = false;
}

void ts_optim_free(ts_optim *opt) {
    if (!opt) return;
    tsi_optim_offload_free(opt);
    for (int i = 0; i < opt->n_params; i++) {
        tsi_optim_param_clear(&opt->params[i]);
        ts_release(opt->params[i].scalars);
        tsi_optim_master_drop(&opt->params[i]);
        ts_release(opt->params[i].p);
    }
    free(opt->params);
    free(opt->groups);
    free(opt->kv), free(opt->steps), free(opt->fresh), free(opt->sel), free(opt->copies);
    free(opt->skv), free(opt->coef), free(opt->aux_next), free(opt->mkv);
    free(opt);
}

/* ------------------------------------------------------------------ groups, lr, zero_grad */
int ts_optim_num_groups(ts_optim *opt) {
    if (!opt) return tsi_error_set(TS_ERR_ARG, "optim_num_groups: optimizer is NULL"), -1;
    return opt->n_groups;
}

static bool check_group(const char *op, ts_optim *opt, int group) {
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op), false;
    if (group < 0 || group >= opt->n_groups)
        return tsi_error_set(TS_ERR_ARG, "%s: group %d out of range (the optimizer has %d)", op,
                             group, opt->n_groups),
               false;
    return true;
}

double ts_optim_get_lr(ts_optim *opt, int group) {
    if (!check_group("optim_get_lr", opt, group)) return NAN;
    return opt->groups[group].h.lr;
}

ts_status ts_optim_set_lr(ts_optim *opt, int group, double lr) {
    if (!check_group("optim_set_lr", opt, group)) return ts_error();
    if (!(lr >= 0)) return tsi_error_set(TS_ERR_ARG, "optim_set_lr: invalid learning rate %g", lr);
    const double old = opt->groups[group].h.lr;
    opt->groups[group].h.lr = lr;
    if (tsi_optim_group_changed("optim_set_lr", opt, group)) {
        opt->groups[group].h.lr = old; /* refused while capturing: nothing changes */
        return ts_error();
    }
    return TS_OK;
}

/* the hyper-parameter a momentum schedule moves: momentum or beta1; NULL for the other kinds */
static double *momentum_of(ts_optim_hparams *h) {
    switch (h->kind) {
    case TS_OPTIM_SGD:
    case TS_OPTIM_RMSPROP:
        return &h->momentum;
    case TS_OPTIM_ADAM:
    case TS_OPTIM_ADAMW:
    case TS_OPTIM_ADAMAX:
    case TS_OPTIM_NADAM:
    case TS_OPTIM_RADAM:
        return &h->beta1;
    default:
        return NULL;
    }
}

double ts_optim_get_momentum(ts_optim *opt, int group) {
    static const char op[] = "optim_get_momentum";
    if (!check_group(op, opt, group)) return NAN;
    const double *m = momentum_of(&opt->groups[group].h);
    if (!m)
        return tsi_error_set(TS_ERR_ARG, "%s: %s has no momentum or beta1", op, opt->info->name),
               NAN;
    return *m;
}

ts_status ts_optim_set_momentum(ts_optim *opt, int group, double momentum) {
    static const char op[] = "optim_set_momentum";
    if (!check_group(op, opt, group)) return ts_error();
    ts_optim_hparams *h = &opt->groups[group].h;
    double *m = momentum_of(h);
    if (!m)
        return tsi_error_set(TS_ERR_ARG, "%s: %s has no momentum or beta1", op, opt->info->name);
    const bool beta = m == &h->beta1;
    if (beta ? !(momentum >= 0 && momentum < 1) : !(momentum >= 0 && isfinite(momentum)))
        return tsi_error_set(TS_ERR_ARG, "%s: invalid %s value %g", op, beta ? "beta1" : "momentum",
                             momentum);
    const double old = *m;
    *m = momentum;
    if (tsi_optim_group_changed(op, opt, group)) {
        *m = old; /* refused while capturing: nothing changes */
        return ts_error();
    }
    return TS_OK;
}

double ts_optim_get_weight_decay(ts_optim *opt, int group) {
    if (!check_group("optim_get_weight_decay", opt, group)) return NAN;
    return opt->groups[group].h.weight_decay;
}

ts_status ts_optim_zero_grad(ts_optim *opt) {
    if (!opt) return tsi_error_set(TS_ERR_ARG, "optim_zero_grad: optimizer is NULL");
    ts_status st = TS_OK;
    for (int i = 0; i < opt->n_params; i++)
        if (opt->params[i].p->grad) {
            const ts_status s = ts_set_grad(opt->params[i].p, NULL);
            if (st == TS_OK) st = s;
        }
    return st;
}

/* ------------------------------------------------------------------ step */
/* Creates the slots the options use and moves existing state to the parameter's device and to its
 * state dtype (after the model moved, after a load, after master weights were turned on or off). */
static bool prepare_state(const char *op, ts_optim *o, const ts_optim_hparams *h,
                          tsi_optim_param *pp) {
    ts_tensor *p = pp->p;
    const ts_dtype sdt = tsi_optim_state_dtype(o, pp);
    for (int k = 0; k < TS_OPTIM_SLOTS; k++) {
        ts_tensor *s = pp->state[k];
        if (s && tsi_device_eq(tsi_device(s), tsi_device(p)) && s->dtype == sdt &&
            tsi_is_contiguous(s))
            continue;
        if (s) {
            ts_tensor *a = tsi_to_device(op, s, tsi_device(p));
            ts_tensor *b = a ? tsi_cast(op, a, sdt) : NULL;
            ts_tensor *c = b ? tsi_contiguous(op, b) : NULL;
            ts_release(a), ts_release(b);
            if (!c) return false;
            ts_release(s);
            pp->state[k] = c;
            continue;
        }
        if (!o->info->slot_used(h, k)) continue;
        s = tsi_new(op, p->shape, sdt, tsi_device(p));
        if (!s) return false;
        /* SGD's buffer starts as the first gradient: no need to clear it */
        pp->fresh[k] = h->kind == TS_OPTIM_SGD;
        const double init = o->info->slot_init ? o->info->slot_init(h, k) : 0.0;
        if (init != 0 && tsi_numel(s->shape) > 0) {
            const ts_kview kv = tsi_kview(s);
            tsi_be(s)->fill(tsi_be(s), tsi_dev_index(s), &kv, init);
        } else if (!pp->fresh[k] && tsi_numel(s->shape) > 0) {
            tsi_be(s)->memset_zero(tsi_be(s), tsi_dev_index(s), s->storage->data,
                                   (size_t)tsi_numel(s->shape) * tsi_dtype_size(s->dtype));
        }
        pp->state[k] = s;
    }
    /* a parameter's scalar state before its first step (PyTorch's _init_group) */
    if (!pp->has_state && o->info->init_aux) o->info->init_aux(h, pp->aux);
    return true;
}

/* One backend call over the parameters sel[0..n) (one device, one dtype, all contiguous). */
static void run_batch(const char *op, ts_optim *o, const ts_optim_hparams *h, const int *sel,
                      int n) {
    const int cap = o->scratch_cap;
    ts_kview *kp = o->kv, *kg = o->kv + cap;
    struct ts_optim_step_args args = {.h = *h, .n = n, .param = kp, .grad = kg};
    for (int k = 0; k < TS_OPTIM_SLOTS; k++)
        args.state[k] = o->info->slot_used(h, k) ? o->kv + (size_t)(2 + k) * (size_t)cap : NULL;
    args.step = o->steps;
    args.fresh = o->fresh;
    args.skip_if = o->skip_if;
    /* a capturable optimizer's scalars: every parameter of the batch has them (one device) */
    if (o->params[sel[0]].scalars) args.scalars = o->skv;
    if (o->info->coefs) args.coef = o->coef;
    /* float32 masters: every parameter of the batch has one (one dtype, f16 or bf16) or none */
    if (o->params[sel[0]].master) args.master = o->mkv;
    for (int j = 0; j < n; j++) {
        tsi_optim_param *pp = &o->params[sel[j]];
        kp[j] = tsi_kview(pp->p);
        if (args.master) o->mkv[j] = tsi_kview(pp->master);
        kg[j] = tsi_kview(pp->p->grad);
        for (int k = 0; k < TS_OPTIM_SLOTS; k++)
            if (args.state[k])
                o->kv[(size_t)(2 + k) * (size_t)cap + (size_t)j] = tsi_kview(pp->state[k]);
        o->steps[j] = pp->step + 1;
        o->fresh[j] = pp->fresh[0];
        if (o->info->coefs)
            o->info->coefs(h, o->steps[j], pp->aux, o->coef + (size_t)j * TS_OPTIM_COEFS,
                           o->aux_next + (size_t)j * TS_OPTIM_AUX);
        if (args.scalars) o->skv[j] = tsi_kview(pp->scalars);
    }
    ts_tensor *p0 = o->params[sel[0]].p;
    tsi_log_op(op, tsi_device(p0));
    tsi_be(p0)->optim_step(tsi_be(p0), tsi_dev_index(p0), &args);
    TSI_PROF_OP_END();
    if (ts_error()) return; /* refused (a capture's rule) or failed: the host state stays */
    for (int j = 0; j < n; j++) {
        tsi_optim_param *pp = &o->params[sel[j]];
        pp->step += 1; /* unused once the count lives on the device */
        pp->has_state = true;
        for (int k = 0; k < TS_OPTIM_SLOTS; k++) pp->fresh[k] = false;
        if (o->info->coefs)
            for (int k = 0; k < TS_OPTIM_AUX; k++)
                pp->aux[k] = o->aux_next[(size_t)j * TS_OPTIM_AUX + (size_t)k];
        tsi_bump_version(pp->p);
        if (pp->master) tsi_bump_version(pp->master);
    }
}

/* A parameter or gradient that is not contiguous is stepped through contiguous copies, made for
 * every such parameter before anything is updated (into copies[2 i], copies[2 i + 1]). */
static bool make_copies(const char *op, ts_optim *o) {
    for (int i = 0; i < o->n_params; i++) {
        ts_tensor *p = o->params[i].p, *g = p->grad;
        if (!g || (tsi_is_contiguous(p) && tsi_is_contiguous(g))) continue;
        ts_tensor *pc = tsi_new(op, p->shape, p->dtype, tsi_device(p));
        ts_tensor *gc = pc ? tsi_contiguous(op, g) : NULL;
        if (!gc) {
            ts_release(pc);
            return false;
        }
        o->copies[2 * i] = pc;
        o->copies[2 * i + 1] = gc;
    }
    return true;
}

static void drop_copies(ts_optim *o) {
    for (int i = 0; i < 2 * o->n_params; i++) {
        ts_release(o->copies[i]);
        o->copies[i] = NULL;
    }
}

/* Steps parameter idx through its copies (make_copies): no allocation. */
static void run_strided(const char *op, ts_optim *o, const ts_optim_hparams *h, int idx) {
    tsi_optim_param *pp = &o->params[idx];
    ts_tensor *p = pp->p, *pc = o->copies[2 * idx], *gc = o->copies[2 * idx + 1];
    ts_kview kp = tsi_kview(p), kpc = tsi_kview(pc);
    tsi_be(p)->copy(tsi_be(p), tsi_dev_index(p), &kpc, &kp);
    /* stand the copies in for the parameter and its grad during the call */
    ts_tensor *saved_grad = pc->grad;
    pc->grad = gc;
    pp->p = pc;
    run_batch(op, o, h, &idx, 1);
    pp->p = p;
    pc->grad = saved_grad;
    kpc = tsi_kview(pc);
    tsi_be(p)->copy(tsi_be(p), tsi_dev_index(p), &kp, &kpc);
    tsi_bump_version(p);
}

/* All or nothing: everything that can fail (checks, state, copies) happens before the first
 * parameter changes, and a step is refused while an error is pending on the thread (a forward or
 * backward that failed left gradients that must not be applied). */
ts_status ts_optim_step(ts_optim *opt) { return tsi_optim_step_unless(opt, NULL); }

ts_status tsi_optim_step_unless(ts_optim *opt, const ts_kview *skip_if) {
    static const char op[] = "optim_step";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (ts_error()) return ts_error();
    if (opt->offload && !opt->offload_busy) return tsi_optim_offload_step(op, opt, skip_if);
    /* the kinds with host coefficients take them from the host's step counts at every step */
    if (opt->info->coefs) {
        char what[160];
        snprintf(what, sizeof what,
                 "a step of %s (its per-step scalars come from the host; SGD, Adam, AdamW and "
                 "RMSprop steps can be captured)",
                 opt->info->name);
        if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params, what)) return ts_error();
    }
    for (int i = 0; i < opt->n_params; i++) {
        ts_tensor *p = opt->params[i].p, *g = p->grad;
        if (!g) continue;
        if (!tsi_device_eq(tsi_device(g), tsi_device(p)) || g->dtype != p->dtype ||
            !tsi_shape_equal(g->shape, p->shape))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: the gradient of parameter %d (%s) does not "
                                 "match it (%s)",
                                 op, i, tsi_desc(g), tsi_desc(p));
        if (!tsi_be(p)->optim_step)
            return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no fused optimizer step on %s", op,
                                 ts_device_str(tsi_device(p)));
    }
    /* masters first: the state's dtype follows them */
    for (int i = 0; i < opt->n_params; i++)
        if (!tsi_optim_master_prepare(op, opt, &opt->params[i])) return ts_error();
    for (int gi = 0; gi < opt->n_groups; gi++) {
        const tsi_optim_group *g = &opt->groups[gi];
        for (int i = g->first; i < g->first + g->n; i++)
            if (opt->params[i].p->grad &&
                (!prepare_state(op, opt, &g->h, &opt->params[i]) ||
                 !tsi_optim_scalars_prepare(op, opt, &g->h, &opt->params[i])))
                return ts_error();
    }
    if (!make_copies(op, opt)) {
        drop_copies(opt);
        return ts_error();
    }
    opt->skip_if = skip_if;
    for (int gi = 0; gi < opt->n_groups; gi++) {
        const tsi_optim_group *g = &opt->groups[gi];
        int *sel = opt->sel, m = 0;
        for (int i = g->first; i < g->first + g->n; i++) {
            ts_tensor *p = opt->params[i].p;
            if (!p->grad) continue; /* torch skips parameters without a gradient */
            if (opt->copies[2 * i])
                run_strided(op, opt, &g->h, i);
            else
                sel[m++] = i;
        }
        /* one call per (device, dtype): move the matching ones to the front, run them, repeat */
        while (m > 0) {
            ts_tensor *p0 = opt->params[sel[0]].p;
            int k = 0;
            for (int j = 0; j < m; j++) {
                ts_tensor *p = opt->params[sel[j]].p;
                if (p->dtype == p0->dtype && tsi_device_eq(tsi_device(p), tsi_device(p0))) {
                    int t = sel[k];
                    sel[k++] = sel[j];
                    sel[j] = t;
                }
            }
            run_batch(op, opt, &g->h, sel, k);
            sel += k;
            m -= k;
        }
    }
    opt->skip_if = NULL;
    drop_copies(opt);
    /* parameters and masters agree again (after every write: parameters may share a storage) */
    for (int i = 0; i < opt->n_params; i++)
        if (opt->params[i].master) tsi_optim_master_synced(&opt->params[i]);
    return TS_OK;
}

/* ------------------------------------------------------------------ helpers */
ts_tensor *tsi_optim_scalar(const char *op, double v) { return tsi_optim_scalar_dt(op, v, TS_F64); }

ts_tensor *tsi_optim_scalar_dt(const char *op, double v, ts_dtype dt) {
    ts_tensor *t = tsi_new(op, TS_SHAPE(), dt, ts_cpu());
    if (!t) return NULL;
    if (dt == TS_F32)
        *(float *)(t->storage->data + t->offset * (int64_t)sizeof(float)) = (float)v;
    else
        *(double *)(t->storage->data + t->offset * (int64_t)sizeof(double)) = v;
    return t;
}

double tsi_optim_f32(double v) { return (double)(float)v; }
