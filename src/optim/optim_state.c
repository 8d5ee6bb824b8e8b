/* optim_state.c — optimizer state to and from named tensors (PyTorch's state_dict numbering). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim_internal.h"
#include "optim/optim_load.h"

static bool add_entry(const char *op, ts_tensor_list *l, const char *name, ts_tensor *t) {
    if (!t) return false;
    ts_status s = ts_tensor_list_add(l, name, t);
    ts_release(t);
    if (s != TS_OK) tsi_error_set(s, "%s: could not add %s", op, name);
    return s == TS_OK;
}

ts_tensor_list ts_optim_state_dict(ts_optim *opt) {
    static const char op[] = "optim_state_dict";
    ts_tensor_list l = {0};
    tsi_init();
    if (!opt) {
        tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
        return l;
    }
    if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params, "a host read of the state")) return l;
    char name[96];
    bool ok = true;
    for (int i = 0; ok && i < opt->n_params; i++) {
        tsi_optim_param *pp = &opt->params[i];
        if (pp->master) { /* float32 master weights (optim_master.c): a snapshot too */
            snprintf(name, sizeof name, "state.%d.master_weight", i);
            ok = add_entry(op, &l, name,
                           tsi_private_copy(op, pp->master, tsi_device(pp->master), TS_F32));
        }
        if (!ok || !pp->has_state) continue;
        const ts_dtype sdt = opt->info->f32_scalars ? TS_F32 : TS_F64;
        if (opt->info->has_step) {
            snprintf(name, sizeof name, "state.%d.step", i);
            ok = add_entry(op, &l, name, tsi_optim_scalar_dt(op, tsi_optim_param_steps(pp), sdt));
        }
        for (int k = 0; ok && k < TS_OPTIM_AUX; k++) {
            if (!opt->info->aux_names[k]) continue;
            snprintf(name, sizeof name, "state.%d.%s", i, opt->info->aux_names[k]);
            ok = add_entry(op, &l, name, tsi_optim_scalar_dt(op, pp->aux[k], sdt));
        }
        for (int k = 0; ok && k < TS_OPTIM_SLOTS; k++) {
            ts_tensor *s = pp->state[k];
            if (!s || pp->fresh[k]) continue;
            snprintf(name, sizeof name, "state.%d.%s", i, opt->info->slot_names[k]);
            /* a snapshot: later steps must not change a saved state */
            ok = add_entry(op, &l, name, tsi_private_copy(op, s, tsi_device(s), s->dtype));
        }
    }
    for (int g = 0; ok && g < opt->n_groups; g++) {
        snprintf(name, sizeof name, "param_groups.%d.lr", g);
        ok = add_entry(op, &l, name, tsi_optim_scalar(op, opt->groups[g].h.lr));
    }
    if (!ok) ts_tensor_list_free(&l);
    return l;
}

/* "<prefix><index>.<rest>": the index (decimal digits only) and the rest; false otherwise. */
static bool parse_key(const char *key, const char *prefix, int *index, const char **rest) {
    size_t n = strlen(prefix);
    if (strncmp(key, prefix, n) != 0 || !isdigit((unsigned char)key[n])) return false;
    char *end;
    long v = strtol(key + n, &end, 10);
    if (*end != '.' || v > 1000000000L) return false;
    *index = (int)v;
    *rest = end + 1;
    return true;
}

typedef struct staged_state {
    ts_tensor *src[TS_OPTIM_SLOTS]; /* borrowed from the dict */
    ts_tensor *copy[TS_OPTIM_SLOTS];
    ts_tensor *master_src, *master; /* "master_weight": borrowed, and its f32 copy */
    double step;
    double aux[TS_OPTIM_AUX];
    bool any, has_step, has_aux[TS_OPTIM_AUX];
} staged_state;

/* Checks one entry and notes it in st / lrs. */
static bool stage_entry(const char *op, ts_optim *opt, const char *key, ts_tensor *t,
                        staged_state *st, double *lrs) {
    int idx;
    const char *rest;
    if (!tsi_check_input(op, t, key)) return false;
    if (parse_key(key, "param_groups.", &idx, &rest) && strcmp(rest, "lr") == 0) {
        if (idx >= opt->n_groups)
            return tsi_error_set(TS_ERR_ARG, "%s: %s: group %d out of range (the optimizer has %d)",
                                 op, key, idx, opt->n_groups),
                   false;
        double lr = tsi_numel(t->shape) == 1 ? ts_item(t) : NAN;
        if (!(lr >= 0))
            return tsi_error_set(TS_ERR_ARG, "%s: %s is not a valid learning rate (%s)", op, key,
                                 tsi_desc(t)),
                   false;
        lrs[idx] = lr;
        return true;
    }
    if (!parse_key(key, "state.", &idx, &rest))
        return tsi_error_set(TS_ERR_ARG, "%s: unexpected key \"%s\"", op, key), false;
    if (idx >= opt->n_params)
        return tsi_error_set(TS_ERR_ARG, "%s: %s: parameter %d out of range (the optimizer has %d)",
                             op, key, idx, opt->n_params),
               false;
    staged_state *s = &st[idx];
    ts_tensor *p = opt->params[idx].p;
    if (opt->info->has_step && strcmp(rest, "step") == 0) {
        double v = tsi_numel(t->shape) == 1 ? ts_item(t) : NAN;
        if (!(v >= 0))
            return tsi_error_set(TS_ERR_ARG, "%s: %s is not a valid step count (%s)", op, key,
                                 tsi_desc(t)),
                   false;
        s->step = v;
        s->has_step = s->any = true;
        return true;
    }
    for (int k = 0; k < TS_OPTIM_AUX; k++) {
        const char *an = opt->info->aux_names[k];
        if (!an || strcmp(rest, an) != 0) continue;
        double v = tsi_numel(t->shape) == 1 ? ts_item(t) : NAN;
        if (!isfinite(v))
            return tsi_error_set(TS_ERR_ARG, "%s: %s is not a finite scalar (%s)", op, key,
                                 tsi_desc(t)),
                   false;
        s->aux[k] = v;
        s->has_aux[k] = s->any = true;
        return true;
    }
    if (strcmp(rest, "master_weight") == 0) { /* float32 master weights: not state proper */
        if (!tsi_is_float(t->dtype) || tsi_numel(t->shape) != tsi_numel(p->shape))
            return tsi_error_set(TS_ERR_SHAPE, "%s: %s is %s but parameter %d is %s", op, key,
                                 tsi_desc(t), idx, tsi_desc(p)),
                   false;
        s->master_src = t;
        return true;
    }
    for (int k = 0; k < TS_OPTIM_SLOTS; k++) {
        const char *sn = opt->info->slot_names[k];
        if (!sn || strcmp(rest, sn) != 0) continue;
        if (!tsi_is_float(t->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: %s is %s, expected a floating dtype", op, key,
                                 tsi_desc(t)),
                   false;
        if (t->shape.ndim != p->shape.ndim || tsi_numel(t->shape) != tsi_numel(p->shape) ||
            memcmp(t->shape.dims, p->shape.dims, sizeof(int64_t) * (size_t)p->shape.ndim) != 0)
            return tsi_error_set(TS_ERR_SHAPE, "%s: %s has shape %s but parameter %d has %s", op,
                                 key, tsi_shape_str(t->shape), idx, tsi_shape_str(p->shape)),
                   false;
        s->src[k] = t;
        s->any = true;
        return true;
    }
    return tsi_error_set(TS_ERR_ARG, "%s: unexpected key \"%s\" (%s keeps no state of that name)",
                         op, key, opt->info->name),
           false;
}

/* Every parameter with state has all the state its group's options use. */
static bool check_complete(const char *op, ts_optim *opt, const staged_state *st) {
    for (int g = 0; g < opt->n_groups; g++) {
        const tsi_optim_group *grp = &opt->groups[g];
        for (int i = grp->first; i < grp->first + grp->n; i++) {
            if (!st[i].any) continue;
            if (opt->info->has_step && !st[i].has_step)
                return tsi_error_set(TS_ERR_ARG, "%s: state.%d.step is missing", op, i), false;
            for (int k = 0; k < TS_OPTIM_AUX; k++)
                if (opt->info->aux_names[k] && !st[i].has_aux[k])
                    return tsi_error_set(TS_ERR_ARG, "%s: state.%d.%s is missing", op, i,
                                         opt->info->aux_names[k]),
                           false;
            for (int k = 0; k < TS_OPTIM_SLOTS; k++)
                if (opt->info->slot_used(&grp->h, k) && !st[i].src[k])
                    return tsi_error_set(TS_ERR_ARG, "%s: state.%d.%s is missing", op, i,
                                         opt->info->slot_names[k]),
                           false;
        }
    }
    return true;
}

struct tsi_optim_staged {
    ts_optim *opt;
    staged_state *st;
    double *lrs;
};

void tsi_optim_load_drop(tsi_optim_staged *g) {
    if (!g) return;
    for (int i = 0; g->st && i < g->opt->n_params; i++) {
        for (int k = 0; k < TS_OPTIM_SLOTS; k++) ts_release(g->st[i].copy[k]);
        ts_release(g->st[i].master);
    }
    free(g->st);
    free(g->lrs);
    free(g);
}

tsi_optim_staged *tsi_optim_load_stage(const char *op, ts_optim *opt, const ts_tensor_list *sd) {
    tsi_optim_staged *g = calloc(1, sizeof *g);
    if (!g) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    g->opt = opt;
    g->st = calloc((size_t)opt->n_params, sizeof *g->st);
    g->lrs = malloc((size_t)opt->n_groups * sizeof *g->lrs);
    if ((!g->st && opt->n_params) || (!g->lrs && opt->n_groups)) {
        tsi_optim_load_drop(g);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    }
    staged_state *st = g->st;
    for (int i = 0; i < opt->n_groups; i++) g->lrs[i] = NAN;
    bool ok = true;
    for (int e = 0; ok && e < sd->n; e++)
        ok = stage_entry(op, opt, sd->names[e] ? sd->names[e] : "(null)", sd->tensors[e], st,
                         g->lrs);
    ok = ok && check_complete(op, opt, st);
    /* copies onto the parameters' devices and dtypes before anything changes */
    for (int i = 0; ok && i < opt->n_params; i++) {
        ts_tensor *p = opt->params[i].p;
        /* f32 with master weights, the parameter's dtype otherwise */
        const ts_dtype sdt = tsi_optim_state_dtype(opt, &opt->params[i]);
        for (int k = 0; ok && k < TS_OPTIM_SLOTS; k++)
            if (st[i].src[k])
                ok = (st[i].copy[k] = tsi_private_copy(op, st[i].src[k], tsi_device(p), sdt)) !=
                     NULL;
        /* a master for a parameter that takes one; ignored otherwise */
        if (ok && st[i].master_src && tsi_optim_master_wanted(opt, &opt->params[i]))
            ok = (st[i].master = tsi_private_copy(op, st[i].master_src, tsi_device(p), TS_F32)) !=
                 NULL;
    }
    if (!ok) {
        tsi_optim_load_drop(g);
        return NULL;
    }
    return g;
}

void tsi_optim_load_commit(tsi_optim_staged *g) {
    ts_optim *opt = g->opt;
    staged_state *st = g->st;
    for (int i = 0; i < opt->n_params; i++) {
        tsi_optim_param *pp = &opt->params[i];
        tsi_optim_param_clear(pp); /* torch replaces the state wholesale */
        /* the loaded master, or none: the next step makes it from the parameter */
        tsi_optim_master_drop(pp);
        if (st[i].master) {
            /* its numel checked; the kernel reads it flat */
            pp->master = st[i].master;
            st[i].master = NULL;
            tsi_optim_master_synced(pp);
        }
        if (!st[i].any) continue;
        for (int k = 0; k < TS_OPTIM_SLOTS; k++) {
            pp->state[k] = st[i].copy[k];
            st[i].copy[k] = NULL;
        }
        tsi_optim_param_set_steps(pp, st[i].step);
        for (int k = 0; k < TS_OPTIM_AUX; k++) pp->aux[k] = st[i].aux[k];
        pp->has_state = true;
    }
    for (int k = 0; k < opt->n_groups; k++) {
        if (g->lrs[k] == g->lrs[k]) opt->groups[k].h.lr = g->lrs[k];
        tsi_optim_group_changed("optim_load_state_dict", opt, k);
    }
    tsi_optim_load_drop(g);
}

ts_status ts_optim_load_state_dict(ts_optim *opt, const ts_tensor_list *sd) {
    static const char op[] = "optim_load_state_dict";
    tsi_init();
    if (!opt) return tsi_error_set(TS_ERR_ARG, "%s: optimizer is NULL", op);
    if (!sd) return tsi_error_set(TS_ERR_ARG, "%s: state dict is NULL", op);
    if (tsi_optim_refuse_capturing(op, opt, 0, opt->n_params, "a load of the state"))
        return ts_error();
    /* an offloaded optimizer's state is staged on the host, in float32, as its masters */
    if (opt->offload && !tsi_optim_offload_enter(op, opt)) return ts_error();
    tsi_optim_staged *g = tsi_optim_load_stage(op, opt, sd);
    if (opt->offload) tsi_optim_offload_leave(opt);
    if (!g) return ts_error();
    tsi_optim_load_commit(g);
    return TS_OK;
}
