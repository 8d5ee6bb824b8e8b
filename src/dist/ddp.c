/* ddp.c — the DistributedDataParallel module: construction (same model on every rank, states
 * broadcast from the first rank), forward (buffers broadcast, the reducer armed), no_sync. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/env_config.h"
#include "dist/ddp_internal.h"
#include "nn/module_internal.h"

static const char *OP = "DistributedDataParallel";

/* ------------------------------------------------------------------ model check across ranks */
static bool verify_same_model(ddp_module *d) {
    int n = d->n_params;
    ts_tensor **ps = malloc((size_t)(n ? n : 1) * sizeof *ps);
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    bool ok = ps && names;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    for (int i = 0; ok && i < n; i++) {
        ps[i] = d->params[i].p;
        names[i] = d->params[i].name;
    }
    ok = ok && tsi_dist_verify_same_params(OP, "DDP", ps, names, n, d->o.group);
    free(ps);
    free(names);
    return ok;
}

/* ------------------------------------------------------------------ broadcasts */
static bool broadcast_list(ddp_module *d, ts_tensor_list *l) {
    for (int i = 0; i < l->n; i++)
        if (tsi_dist_broadcast_unchecked(l->tensors[i], d->root, d->o.group) != TS_OK) return false;
    return true;
}

/* _sync_module_states: parameters and buffers from the first rank, once */
static bool sync_module_states(ddp_module *d) {
    if (d->world == 1) return true;
    ts_tensor_list sd = ts_module_state_dict(d->module);
    ts_no_grad_begin();
    bool ok = !ts_error() && broadcast_list(d, &sd);
    ts_no_grad_end();
    ts_tensor_list_free(&sd);
    return ok;
}

/* broadcast_buffers: before every forward, the first rank's buffers (running statistics) */
static bool sync_buffers(ddp_module *d) {
    if (d->world == 1 || d->o.no_broadcast_buffers) return true;
    ts_tensor_list b = ts_module_named_buffers(d->module);
    ts_no_grad_begin();
    bool ok = !ts_error() && broadcast_list(d, &b);
    ts_no_grad_end();
    ts_tensor_list_free(&b);
    return ok;
}

/* ------------------------------------------------------------------ forward */
static ts_tensor *ddp_forward(ts_module *self, ts_tensor *x) {
    ddp_module *d = (ddp_module *)self;
    bool sync = ts_grad_enabled() && !d->no_sync;
    if (sync && !tsi_ddp_prepare_forward(d)) return NULL;
    if (!sync) d->expect = false;
    if (!sync_buffers(d)) return NULL;
    ts_tensor *y = ts_forward(d->module, x);
    if (y && sync && !tsi_ddp_prepare_backward(d, y)) return NULL;
    return y;
}

/* ------------------------------------------------------------------ life cycle */
static void ddp_destroy(ts_module *self) {
    ddp_module *d = (ddp_module *)self;
    tsi_ddp_free_buckets(d);
    for (int i = 0; i < d->n_params; i++) free((char *)d->params[i].name);
    free(d->params);
    d->params = NULL;
    d->n_params = 0;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    return c ? memcpy(c, s, n) : NULL;
}

static bool collect_params(ddp_module *d) {
    ts_tensor_list l = ts_module_named_parameters(d->module);
    if (ts_error()) {
        ts_tensor_list_free(&l);
        return false;
    }
    d->params = calloc((size_t)(l.n ? l.n : 1), sizeof *d->params);
    bool ok = d->params != NULL;
    for (int i = 0; ok && i < l.n; i++) {
        d->params[i] =
            (ddp_param){.d = d, .p = l.tensors[i], .name = dup_str(l.names[i]), .hook = 0};
        d->n_params = i + 1;
        ok = d->params[i].name != NULL;
    }
    ts_tensor_list_free(&l); /* the module keeps its own references */
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    return ok;
}

/* Overlap needs a core for the communication thread: while a collective waits for a slower rank,
 * MPI spins. */
static bool choose_overlap(int opt) {
    if (tsi_env(TSI_ENV_DDP_OVERLAP)) return tsi_env_on(TSI_ENV_DDP_OVERLAP);
    if (opt != TS_DDP_OVERLAP_AUTO) return opt == TS_DDP_OVERLAP_ON;
    return tsi_dist_core_spare(ts_dist_local_world_size());
}

ts_module *ts_ddp(ts_module *module, ts_ddp_opts o) {
    tsi_init();
    if (!module) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", OP);
        return NULL;
    }
    if (module->impl->parent)
        return tsi_error_set(TS_ERR_ARG, "%s: %s already belongs to %s", OP, module->type_name,
                             module->impl->parent->type_name),
               NULL;
    if (o.bucket_cap_mb < 0 || o.first_bucket_mb < 0 || (unsigned)o.overlap > TS_DDP_OVERLAP_OFF) {
        ts_module_free(module);
        return tsi_error_set(TS_ERR_ARG,
                             "%s: bucket sizes must not be negative (%g, %g MiB), overlap is "
                             "AUTO, ON or OFF (%d)",
                             OP, o.bucket_cap_mb, o.first_bucket_mb, (int)o.overlap),
               NULL;
    }
    const int world = tsi_dist_wrap_group(OP, o.group);
    if (!world) {
        ts_module_free(module);
        return NULL;
    }
    ddp_module *d = ts_module_alloc(sizeof *d, OP, ddp_forward);
    if (!d) {
        ts_module_free(module);
        return NULL;
    }
    d->base.destroy = ddp_destroy;
    d->o = o;
    if (d->o.bucket_cap_mb == 0) d->o.bucket_cap_mb = 25;
    if (d->o.first_bucket_mb == 0) d->o.first_bucket_mb = 1;
    d->world = world;
    d->root = tsi_dist_group_world_rank(o.group, 0);
    d->overlap = choose_overlap(o.overlap);
    d->stats.overlap = d->overlap;
    d->module = ts_module_add(&d->base, "module", module); /* frees module on failure */
    bool ok = d->module && collect_params(d) && verify_same_model(d) && sync_module_states(d) &&
              tsi_ddp_build_buckets(d);
    if (!ok) {
        ts_module_free(&d->base);
        return NULL;
    }
    return &d->base;
}

static ddp_module *as_ddp(const char *op, ts_module *m) {
    return (ddp_module *)tsi_dist_wrapper_of(op, m, ddp_forward, "DistributedDataParallel");
}

ts_module *ts_ddp_module(ts_module *ddp) {
    ddp_module *d = as_ddp("ddp_module", ddp);
    return d ? d->module : NULL;
}

void ts_ddp_no_sync_begin(ts_module *ddp) {
    ddp_module *d = as_ddp("ddp_no_sync_begin", ddp);
    if (d) d->no_sync = true;
}

void ts_ddp_no_sync_end(ts_module *ddp) {
    ddp_module *d = as_ddp("ddp_no_sync_end", ddp);
    if (d) d->no_sync = false;
}

ts_status ts_ddp_get_stats(ts_module *ddp, ts_ddp_stats *out) {
    ddp_module *d = as_ddp("ddp_get_stats", ddp);
    if (!d) return ts_error();
    if (!out) return tsi_error_set(TS_ERR_ARG, "ddp_get_stats: out is NULL");
    *out = d->stats;
    return TS_OK;
}
