/* grad_scaler_state.c — GradScaler.state_dict / load_state_dict with PyTorch's keys. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "amp/grad_scaler_internal.h"

enum { K_SCALE, K_GROWTH, K_BACKOFF, K_INTERVAL, K_TRACKER, K_COUNT };
static const char *const key_names[K_COUNT] = {"scale", "growth_factor", "backoff_factor",
                                               "growth_interval", "_growth_tracker"};

/* A caller-held 0-dim f64 cpu tensor holding v. */
static ts_tensor *f64_scalar(const char *op, double v) {
    ts_tensor *t = tsi_new(op, TS_SHAPE(), TS_F64, ts_cpu());
    if (t) *(double *)(t->storage->data + t->offset * (int64_t)sizeof(double)) = v;
    return t;
}

ts_tensor_list ts_grad_scaler_state_dict(ts_grad_scaler *s) {
    static const char op[] = "grad_scaler_state_dict";
    ts_tensor_list l = {0};
    tsi_init();
    if (!s) {
        tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op);
        return l;
    }
    if (!s->enabled) return l; /* PyTorch: {} from a disabled scaler */
    double v[K_COUNT] = {ts_grad_scaler_get_scale(s), s->growth_factor, s->backoff_factor,
                         s->growth_interval, ts_grad_scaler_growth_tracker(s)};
    for (int k = 0; k < K_COUNT; k++) {
        ts_tensor *t = f64_scalar(op, v[k]);
        ts_status st = t ? ts_tensor_list_add(&l, key_names[k], t) : TS_ERR_OOM;
        ts_release(t);
        if (st) {
            if (t) tsi_error_set(st, "%s: could not add %s", op, key_names[k]);
            ts_tensor_list_free(&l);
            break;
        }
    }
    return l;
}

/* The value of one entry: a one-element tensor of a real dtype (any device). */
static bool entry_value(const char *op, const char *key, ts_tensor *t, double *v) {
    if (!tsi_check_input(op, t, key)) return false;
    if (tsi_numel(t->shape) != 1 || t->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_ARG, "%s: '%s' must hold one number, got %s", op, key,
                             tsi_desc(t)),
               false;
    *v = ts_item(t);
    return true;
}

static bool is_integer(double v, double lo, double hi) {
    return v >= lo && v <= hi && v == floor(v);
}

/* Checks the five values together (the tracker must be below the interval, as update keeps it). */
static bool check_values(const char *op, const double *v) {
    const char *bad = NULL;
    if (!(v[K_SCALE] > 0 && v[K_SCALE] <= FLT_MAX))
        bad = "scale must be positive and finite in float32";
    else if (!(v[K_GROWTH] > 1) || isinf(v[K_GROWTH]))
        bad = "growth_factor must be > 1.0";
    else if (!(v[K_BACKOFF] > 0 && v[K_BACKOFF] < 1))
        bad = "backoff_factor must be < 1.0 and > 0";
    else if (!is_integer(v[K_INTERVAL], 1, INT_MAX))
        bad = "growth_interval must be a positive integer";
    else if (!is_integer(v[K_TRACKER], 0, v[K_INTERVAL] - 1))
        bad = "_growth_tracker must be an integer in [0, growth_interval)";
    if (!bad) return true;
    return tsi_error_set(TS_ERR_ARG,
                         "%s: %s (scale %g, growth_factor %g, backoff_factor %g, "
                         "growth_interval %g, _growth_tracker %g)",
                         op, bad, v[K_SCALE], v[K_GROWTH], v[K_BACKOFF], v[K_INTERVAL],
                         v[K_TRACKER]),
           false;
}

bool tsi_gs_load_stage(const char *op, const ts_grad_scaler *s, const ts_tensor_list *sd,
                       tsi_gs_staged *out) {
    *out = (tsi_gs_staged){0};
    if (!s) return tsi_error_set(TS_ERR_ARG, "%s: scaler is NULL", op), false;
    if (!sd) return tsi_error_set(TS_ERR_ARG, "%s: state dict is NULL", op), false;
    if (!s->enabled) return true; /* PyTorch ignores the dict */
    if (sd->n == 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: the source state dict is empty, possibly because it was saved "
                             "from a disabled instance of GradScaler",
                             op),
               false;
    /* everything is checked before anything changes */
    double *v = out->v;
    bool seen[K_COUNT] = {false};
    for (int i = 0; i < sd->n; i++) {
        int k = 0;
        while (k < K_COUNT && strcmp(sd->names[i], key_names[k]) != 0) k++;
        if (k == K_COUNT)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: unexpected key \"%.200s\" (a GradScaler state holds scale, "
                                 "growth_factor, backoff_factor, growth_interval and "
                                 "_growth_tracker)",
                                 op, sd->names[i]),
                   false;
        if (!entry_value(op, key_names[k], sd->tensors[i], &v[k])) return false;
        seen[k] = true;
    }
    for (int k = 0; k < K_COUNT; k++)
        if (!seen[k])
            return tsi_error_set(TS_ERR_ARG, "%s: missing key \"%s\"", op, key_names[k]), false;
    if (!check_values(op, v)) return false;
    out->apply = true;
    return true;
}

void tsi_gs_load_commit(ts_grad_scaler *s, const tsi_gs_staged *st) {
    if (!st->apply) return;
    const double *v = st->v;
    s->init_scale = v[K_SCALE];
    s->growth_factor = v[K_GROWTH];
    s->backoff_factor = v[K_BACKOFF];
    s->growth_interval = (int)v[K_INTERVAL];
    s->init_growth_tracker = (int)v[K_TRACKER];
    if (s->scale) tsi_gs_fill(s->scale, v[K_SCALE]);
    if (s->growth_tracker) tsi_gs_fill(s->growth_tracker, v[K_TRACKER]);
}

ts_status ts_grad_scaler_load_state_dict(ts_grad_scaler *s, const ts_tensor_list *sd) {
    static const char op[] = "grad_scaler_load_state_dict";
    tsi_init();
    tsi_gs_staged st;
    if (!tsi_gs_load_stage(op, s, sd, &st)) return ts_error();
    tsi_gs_load_commit(s, &st);
    return TS_OK;
}
