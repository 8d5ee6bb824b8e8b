/* grad_scaler.c — PyTorch's GradScaler: the object, scale(), update() and the scale accessors.
 * unscale_() and step() are in grad_scaler_step.c, the state dict in grad_scaler_state.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/grad_scaler_internal.h"
#include "core/profiler_hooks.h"

/* ------------------------------------------------------------------ object */
ts_grad_scaler *ts_grad_scaler_new(ts_grad_scaler_opts o) {
    static const char op[] = "grad_scaler_new";
    tsi_init();
    double init = o.init_scale == 0 ? 65536.0 : o.init_scale;
    double growth = o.growth_factor == 0 ? 2.0 : o.growth_factor;
    double backoff = o.backoff_factor == 0 ? 0.5 : o.backoff_factor;
    int interval = o.growth_interval == 0 ? 2000 : o.growth_interval;
    if (!o.disabled) { /* PyTorch checks the factors of an enabled scaler only */
        if (!(growth > 1.0) || isinf(growth))
            return tsi_error_set(TS_ERR_ARG, "%s: the growth factor must be > 1.0 (got %g)", op,
                                 growth),
                   NULL;
        if (!(backoff > 0.0 && backoff < 1.0))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: the backoff factor must be < 1.0 and > 0 (got %g)", op,
                                 backoff),
                   NULL;
        if (!(init > 0.0 && init <= FLT_MAX))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: the initial scale must be positive and finite in float32 "
                                 "(got %g)",
                                 op, init),
                   NULL;
        if (interval < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: the growth interval must be positive (got %d)",
                                 op, interval),
                   NULL;
    }
    ts_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    s->enabled = !o.disabled;
    s->init_scale = init;
    s->growth_factor = growth;
    s->backoff_factor = backoff;
    s->growth_interval = interval;
    return s;
}

void tsi_gs_states_reset(ts_grad_scaler *s) {
    for (int i = 0; i < s->n_states; i++) {
        tsi_gs_optim_state *st = &s->states[i];
        for (int k = 0; k < st->n_found; k++) ts_release(st->found_inf[k]);
        free(st->found_inf);
    }
    s->n_states = 0;
}

ts_status ts_grad_scaler_set_process_group(ts_grad_scaler *s, ts_dist_group *group) {
    if (!s) return tsi_error_set(TS_ERR_ARG, "grad_scaler_set_process_group: scaler is NULL");
    s->group = group;
    return TS_OK;
}

void ts_grad_scaler_free(ts_grad_scaler *s) {
    if (!s) return;
    tsi_gs_states_reset(s);
    free(s->states);
    ts_release(s->scale);
    ts_release(s->growth_tracker);
    free(s);
}

tsi_gs_optim_state *tsi_gs_state_for(const char *op, ts_grad_scaler *s, const ts_optim *opt) {
    for (int i = 0; i < s->n_states; i++)
        if (s->states[i].opt == opt) return &s->states[i];
    if (s->n_states == s->cap_states) {
        int cap = s->cap_states ? s->cap_states * 2 : 4;
        tsi_gs_optim_state *ns = realloc(s->states, (size_t)cap * sizeof *ns);
        if (!ns) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
        s->states = ns;
        s->cap_states = cap;
    }
    tsi_gs_optim_state *st = &s->states[s->n_states++];
    memset(st, 0, sizeof *st);
    st->opt = opt;
    st->stage = TSI_GS_READY;
    return st;
}

bool tsi_gs_check_scale(const char *op, ts_grad_scaler *s) {
    if (s->scale && s->growth_tracker) return true;
    return tsi_error_set(TS_ERR_STATE,
                         "%s: the scale is not set up yet; this may indicate your program did not "
                         "use ts_grad_scaler_scale(loss) earlier in the iteration",
                         op),
           false;
}

void tsi_gs_fill(ts_tensor *t, double v) {
    ts_kview k = tsi_kview(t);
    tsi_be(t)->fill(tsi_be(t), tsi_dev_index(t), &k, v);
    tsi_bump_version(t);
}

/* A one-element tensor of dt on dev holding v; caller-held. */
static ts_tensor *one_element(const char *op, ts_dtype dt, ts_device dev, double v) {
    ts_tensor *t = tsi_new(op, TS_SHAPE(1), dt, dev);
    if (t) tsi_gs_fill(t, v);
    return t;
}

/* ------------------------------------------------------------------ scale */
ts_tensor *ts_grad_scaler_scale(ts_grad_scaler *s, ts_tensor *loss) {
    static const char op[] = "grad_scaler_scale";
    tsi_init();
    if (!tsi_check_input(op, loss, "loss")) return NULL;
    if (!s) return tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op), NULL;
    if (!s->enabled) return tsi_own(ts_retain(loss)); /* PyTorch returns the outputs as they are */
    if (!s->scale) { /* lazily, on the device of the first loss (PyTorch) */
        ts_device dev = tsi_device(loss);
        ts_tensor *sc = one_element(op, TS_F32, dev, s->init_scale);
        ts_tensor *gt = sc ? one_element(op, TS_I32, dev, s->init_growth_tracker) : NULL;
        if (!gt) {
            ts_release(sc);
            return NULL;
        }
        s->scale = sc;
        s->growth_tracker = gt;
    }
    /* loss * scale, differentiable: backward then carries the scale into every gradient */
    ts_scope_begin();
    ts_tensor *out = ts_mul(loss, ts_to(s->scale, tsi_device(loss)));
    ts_retain(out);
    ts_scope_end();
    return tsi_own(out);
}

/* ------------------------------------------------------------------ update */
ts_status ts_grad_scaler_update(ts_grad_scaler *s) {
    static const char op[] = "grad_scaler_update";
    tsi_init();
    if (!s) return tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op);
    if (!s->enabled) return TS_OK;
    if (ts_error()) { /* the iteration failed: the scale stays, and the iteration ends (so the */
        tsi_gs_states_reset(s); /* next one can unscale and step after ts_error_clear) */
        return ts_error();
    }
    if (!tsi_gs_check_scale(op, s)) return ts_error();
    int n_found = 0;
    for (int i = 0; i < s->n_states; i++) n_found += s->states[i].n_found;
    if (n_found == 0)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: no inf checks were recorded prior to update() (call "
                             "ts_grad_scaler_step or ts_grad_scaler_unscale_ on an optimizer with "
                             "gradients first)",
                             op);
    const ts_backend *be = tsi_be(s->scale);
    if (!be->amp_update_scale)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no scale update kernel on %s", op,
                             ts_device_str(tsi_device(s->scale)));
    /* every optimizer's found_inf of every device, summed on the scale's device */
    ts_device dev = tsi_device(s->scale);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *combined = NULL;
    bool ok = true;
    for (int i = 0; ok && i < s->n_states; i++)
        for (int k = 0; ok && k < s->states[i].n_found; k++) {
            ts_tensor *f = ts_to(s->states[i].found_inf[k], dev);
            combined = combined ? ts_add(combined, f) : f;
            ok = combined != NULL;
        }
    if (ok) {
        ts_kview ks = tsi_kview(s->scale), kt = tsi_kview(s->growth_tracker),
                 kf = tsi_kview(combined);
        tsi_log_op(op, dev);
        be->amp_update_scale(be, dev.index, &ks, &kt, &kf, s->growth_factor, s->backoff_factor,
                             s->growth_interval);
        TSI_PROF_OP_END();
        tsi_bump_version(s->scale);
        tsi_bump_version(s->growth_tracker);
    }
    ts_no_grad_end();
    ts_scope_end();
    if (!ok) return ts_error() ? ts_error() : TS_ERR_OOM;
    tsi_gs_states_reset(s); /* the next iteration starts from READY */
    return TS_OK;
}

ts_status ts_grad_scaler_set_scale(ts_grad_scaler *s, double new_scale) {
    static const char op[] = "grad_scaler_set_scale";
    tsi_init();
    if (!s) return tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op);
    if (!s->enabled) return TS_OK;
    if (!tsi_gs_check_scale(op, s)) return ts_error();
    if (!(new_scale > 0 && new_scale <= FLT_MAX))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: the new scale must be positive and finite in float32 (got %g)",
                             op, new_scale);
    /* update(new_scale): take the user's scale, forget this iteration's inf checks */
    tsi_gs_fill(s->scale, new_scale);
    tsi_gs_states_reset(s);
    return TS_OK;
}

/* ------------------------------------------------------------------ accessors */
double ts_grad_scaler_get_scale(ts_grad_scaler *s) {
    tsi_init();
    if (!s) return tsi_error_set(TS_ERR_ARG, "grad_scaler_get_scale: scaler is NULL"), NAN;
    if (!s->enabled) return 1.0;
    return s->scale ? ts_item(s->scale) : s->init_scale;
}

int ts_grad_scaler_growth_tracker(ts_grad_scaler *s) {
    tsi_init();
    if (!s) return tsi_error_set(TS_ERR_ARG, "grad_scaler_growth_tracker: scaler is NULL"), -1;
    if (!s->enabled) return 0;
    return s->growth_tracker ? (int)ts_item(s->growth_tracker) : s->init_growth_tracker;
}
