/* fsdp_unit.c — one FSDP unit through a step: its flat buffer and shard, the all-gather before its
 * forward (and, resharded, before its backward), the next unit's gather started early, the
 * gradient hooks, the reduction of its flat gradient into the shard's .grad, and resharding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/pinned.h"
#include "dist/fsdp_internal.h"
#include "nn/module_internal.h"

static const char *OP = "FullyShardedDataParallel";

/* ------------------------------------------------------------------ gather and reshard */
static bool needs_gather(const fsdp_unit *u) {
    return !u->gathered || u->gathered_version != ts_version(u->shard);
}

/* Stage 3 frees the gathered memory; the flat tensor, and the parameters that are slices of it,
 * stay (their data pointer is NULL until the next gather). */
static void reshard(fsdp_unit *u) {
    if (u->f->o.stage < 3 || u->gather_work) return;
    tsi_storage_free_data(u->flat->storage);
    u->gathered = false;
}

static bool launch_gather(fsdp_unit *u) {
    if (u->gather_work || !needs_gather(u)) return true;
    if (!tsi_storage_alloc_data(OP, u->flat->storage)) return false;
    u->flat_version = ts_version(u->flat);
    u->gather_from = ts_version(u->shard);
    /* mixed precision: the shard rounded to the parameters' dtype is what goes out (the work
     * holds it until done) */
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *src = u->shard;
    /* cpu_offload: the shard crosses to the parameters' device first */
    if (tsi_device(src).type != tsi_device(u->flat).type ||
        tsi_device(src).index != tsi_device(u->flat).index)
        src = ts_to(src, tsi_device(u->flat));
    if (src && u->flat->dtype != src->dtype) src = ts_to_dtype(src, u->flat->dtype);
    ts_no_grad_end();
    u->gather_work = src ? tsi_dist_all_gather_unchecked(u->flat, src, u->f->o.group) : NULL;
    ts_scope_end();
    u->f->stats.all_gathers++;
    u->f->stats.gather_bytes += (size_t)u->shard_n * tsi_dtype_size(u->flat->dtype);
    return u->gather_work != NULL;
}

static bool finish_gather(fsdp_unit *u) {
    if (!u->gather_work) return true;
    ts_dist_work *w = u->gather_work;
    u->gather_work = NULL;
    if (ts_dist_wait(w) != TS_OK) return false;
    /* The same shard as the last gather: the same values are back. Backward's saved tensors (views
     * of the flat buffer, noted at its forward's version) must not see an in-place change. */
    if (u->gather_from == u->gathered_version)
        atomic_store(&u->flat->storage->version, u->flat_version);
    u->gathered = true;
    u->gathered_version = u->gather_from;
    return true;
}

/* A gather still in flight may predate an optimizer step (a prefetch nobody used): finish it
 * first, then gather again if the shard moved on since. */
bool tsi_fsdp_unit_ensure_gathered(fsdp_unit *u) {
    return finish_gather(u) && launch_gather(u) && finish_gather(u);
}

void tsi_fsdp_wait_all(fsdp_module *f) {
    for (int i = 0; i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        if (u->gather_work) finish_gather(u);
        if (u->reduce_work) {
            ts_dist_wait(u->reduce_work);
            u->reduce_work = NULL;
        }
    }
}

/* ------------------------------------------------------------------ gradients */
static bool is_slot(const fsdp_unit *u, const ts_tensor *g) {
    return g && u->grad && g->storage == u->grad->storage;
}

/* The unit's flat gradient for this backward, and every parameter's .grad a slice of it, so the
 * engine accumulates straight into it. A gradient a parameter already holds elsewhere (it got one
 * before this ran) is added in. */
static bool prepare_grad(fsdp_unit *u) {
    if (!u->grad) {
        ts_tensor *flat = u->flat;
        u->grad = tsi_new(OP, flat->shape, flat->dtype, tsi_device(flat));
        if (!u->grad || !ts_zero_(u->grad)) return false;
    } else if (u->grad_consumed && !ts_zero_(u->grad)) {
        return false;
    }
    u->grad_consumed = false;
    for (int i = 0; i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        ts_tensor *p = pp->p;
        if (is_slot(u, p->grad)) continue;
        ts_tensor *old = ts_retain(p->grad);
        ts_tensor *slot = tsi_view_of(u->grad, p->shape, p->strides, pp->offset);
        bool ok = slot && ts_set_grad(p, slot) == TS_OK && (!old || ts_add_(slot, old));
        ts_release(slot);
        ts_release(old);
        if (!ok) return false;
    }
    return true;
}

/* Mixed precision under no_sync: this backward's gradient (param_dtype) is added to the unit's
 * accumulator in reduce_dtype, and the flat gradient starts the next backward from zeros. */
static bool accumulate(fsdp_unit *u) {
    ts_tensor *g = ts_to_dtype(u->grad, tsi_fsdp_reduce_dtype(u)); /* a new tensor */
    bool ok = g && (u->acc ? ts_add_(u->acc, g) != NULL : (u->acc = ts_retain(g)) != NULL);
    if (ok) u->grad_consumed = true;
    return ok;
}

/* The full gradient in reduce_dtype (the flat gradient itself when that is its dtype), with what
 * no_sync accumulated added; caller-held. */
static ts_tensor *to_reduce(fsdp_unit *u) {
    ts_dtype rdt = tsi_fsdp_reduce_dtype(u);
    if (rdt == u->grad->dtype && !u->acc) return ts_retain(u->grad);
    ts_tensor *g = ts_retain(ts_to_dtype(u->grad, rdt));
    if (g == u->grad) { /* same dtype: not in place into the parameters' .grad slots */
        ts_release(g);
        g = ts_retain(ts_clone(u->grad));
    }
    if (g && u->acc && !ts_add_(g, u->acc)) {
        ts_release(g);
        return NULL;
    }
    ts_release(u->acc);
    u->acc = NULL;
    return g;
}

static bool launch_reduce(fsdp_unit *u) {
    fsdp_module *f = u->f;
    ts_tensor *g = to_reduce(u);
    /* DDP's arithmetic: each rank's gradient / W, then summed */
    if (!g) return false;
    tsi_dist_divide_by_world(g, g, f->world);
    f->stats.reduce_bytes += (size_t)u->padded * tsi_dtype_size(g->dtype);
    if (f->o.stage == 1) {
        u->reduce_work = tsi_dist_all_reduce_unchecked(g, TS_DIST_SUM, f->o.group);
        f->stats.all_reduces++;
        u->reduced = g; /* the full average; the parameters' .grad when it is the flat gradient */
    } else {
        u->reduced = tsi_new(OP, u->shard->shape, g->dtype, tsi_device(g));
        u->reduce_work =
            u->reduced ? tsi_dist_reduce_scatter_unchecked(u->reduced, g, TS_DIST_SUM, f->o.group)
                       : NULL;
        ts_release(g);
        f->stats.reduce_scatters++;
        /* the work holds the flat gradient until it is done: the full gradient goes now */
        for (int i = 0; i < u->n_params; i++) ts_set_grad(u->params[i].p, NULL);
        ts_release(u->grad);
        u->grad = NULL;
    }
    u->grad_consumed = true;
    return u->reduce_work != NULL;
}

/* This rank's part of a reduced gradient, added to the shard's .grad (set when it has none). */
static bool deliver(fsdp_unit *u) {
    fsdp_module *f = u->f;
    if (!u->reduce_work) return true;
    ts_dist_work *w = u->reduce_work;
    u->reduce_work = NULL;
    if (ts_dist_wait(w) != TS_OK) return false;
    ts_tensor *r = u->reduced;
    bool ok = true;
    /* stage 1 under mixed precision: the parameters' .grad gets the average too (rounded) */
    if (f->o.stage == 1 && r != u->grad) ok = ts_copy_(u->grad, r) != NULL;
    ts_tensor *mine =
        f->o.stage == 1 ? ts_narrow(r, 0, (int64_t)f->rank * u->shard_n, u->shard_n) : r;
    /* in the shard's dtype, one copy of its own (stage 1's is a block of the full gradient) */
    if (mine && (mine->dtype != u->shard->dtype || f->o.stage == 1))
        mine = mine->dtype != u->shard->dtype ? ts_to_dtype(mine, u->shard->dtype) : ts_clone(mine);
    /* on the shard's device: the host with cpu_offload */
    if (mine && f->o.cpu_offload) mine = ts_to(mine, tsi_device(u->shard));
    ok = ok && mine != NULL;
    /* each leaf its part: the shard, or its decaying and non-decaying parts */
    for (int k = 0; ok && k < u->n_leaves; k++) {
        ts_tensor *leaf = u->leaf[k];
        ts_tensor *part =
            u->n_leaves == 1 ? mine : ts_narrow(mine, 0, k ? u->split : 0, ts_numel(leaf));
        if (part && !leaf->grad)
            ok = ts_set_grad(leaf, part) == TS_OK;
        else
            ok = part && ts_add_(leaf->grad, part) != NULL;
    }
    ts_release(u->reduced);
    u->reduced = NULL;
    return ok;
}

static void reset_pass(fsdp_module *f) {
    f->last_reduced = NULL;
    for (int i = 0; i < f->n_units; i++) {
        f->units[i].ready = 0;
        f->units[i].done = false;
    }
    f->done_units = 0;
}

/* Every unit's gradients have arrived: wait for the reductions in launch order and hand out the
 * shards' parts. */
static bool finish_backward(fsdp_module *f) {
    bool ok = true;
    for (int i = 0; i < f->n_units; i++)
        if (!deliver(&f->units[i])) ok = false;
    reset_pass(f);
    return ok;
}

/* The backward failed (the engine runs the hooks it still owed with the error pending, or a hook
 * failed itself): what was launched is waited for (every rank launched it), the partial gradients
 * are dropped (the next backward starts every unit's from zeros). */
static void abandon(fsdp_module *f) {
    tsi_fsdp_wait_all(f);
    for (int i = 0; i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        ts_release(u->reduced);
        ts_release(u->acc);
        u->reduced = u->acc = NULL;
        u->grad_consumed = true;
    }
    reset_pass(f);
}

static bool unit_done(fsdp_unit *u) {
    fsdp_module *f = u->f;
    u->done = true;
    f->done_units++;
    /* The reduction launched before this one is finished first (FSDP2 waits for the previous
     * reduce-scatter the same way): a work item holds its unit's full flat gradient until it is
     * waited for, so at most two units' full gradients live at once, not every unit's. */
    if (f->last_reduced && !deliver(f->last_reduced)) return false;
    f->last_reduced = NULL;
    if (!f->no_sync) {
        if (!launch_reduce(u)) return false;
        f->last_reduced = u;
    } else if (tsi_fsdp_reduce_dtype(u) != u->grad->dtype && !accumulate(u)) {
        return false;
    }
    reshard(u);
    return f->done_units < f->n_units || finish_backward(f);
}

static void grad_hook(ts_tensor *leaf, void *ctx) {
    fsdp_param *pp = ctx;
    fsdp_unit *u = pp->u;
    (void)leaf;
    if (ts_error()) { /* the pass failed: every partial gradient is dropped */
        abandon(u->f);
        return;
    }
    ts_scope_begin();
    /* a gradient that arrived outside the unit's backward (the pre-backward hook did not run for
     * it): into the flat gradient it goes */
    bool ok = is_slot(u, pp->p->grad) || prepare_grad(u);
    if (ok && ++u->ready == u->n_params) ok = unit_done(u);
    /* failed here (the engine fails the pass, but this may have been its last hook): the same */
    if (!ok) abandon(u->f);
    ts_scope_end();
}

/* ------------------------------------------------------------------ forward and backward */
static void pre_backward(void *ctx) {
    fsdp_unit *u = ctx;
    fsdp_module *f = u->f;
    if (ts_error() || !tsi_fsdp_unit_ensure_gathered(u) || !prepare_grad(u)) return;
    /* backward runs the units in reverse: the root's backward starts first, then the last unit's;
     * the first unit prefetches nothing (the root's backward is already under way) */
    int prev = u->is_root ? f->n_units - 1 : u->index - 1;
    if (!f->o.no_prefetch && prev >= 0 && prev != u->index && !f->units[prev].is_root)
        launch_gather(&f->units[prev]);
}

/* A parameter that no longer lives in the flat buffer (ts_module_to / ts_module_to_dtype, or a
 * ts_module_param replacing it, after ts_fsdp) would silently stop training. */
static bool params_in_place(fsdp_unit *u) {
    for (int i = 0; i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        if (pp->p->storage != u->flat->storage || pp->p->dtype != u->flat->dtype)
            return tsi_error_set(
                       TS_ERR_STATE,
                       "%s: parameter %s left unit '%s''s flat buffer after ts_fsdp (moved "
                       "to another device or dtype, or replaced): move or convert the "
                       "model before wrapping it",
                       OP, pp->name, u->is_root ? "<root>" : u->name),
                   false;
    }
    return true;
}

bool tsi_fsdp_unit_pre_forward(fsdp_unit *u) {
    fsdp_module *f = u->f;
    if (!params_in_place(u) || !tsi_fsdp_unit_ensure_gathered(u)) return false;
    if (!f->o.no_prefetch && u->index + 1 < f->n_units)
        return launch_gather(&f->units[u->index + 1]);
    return true;
}

ts_tensor *tsi_fsdp_unit_post_forward(fsdp_unit *u, ts_tensor *y) {
    fsdp_module *f = u->f;
    if (y && ts_grad_enabled() && ts_requires_grad(y))
        y = tsi_pre_backward_hook(y, pre_backward, u);
    if (y && !u->is_root && !f->o.no_reshard_after_forward) reshard(u);
    return y;
}

bool tsi_fsdp_check_prior(fsdp_module *f) {
    if (f->done_units == 0) {
        bool any = false;
        for (int i = 0; i < f->n_units; i++) any = any || f->units[i].ready;
        if (!any) return true;
    }
    char list[512] = "";
    size_t n = 0;
    for (int i = 0; i < f->n_units; i++) {
        fsdp_unit *u = &f->units[i];
        if (u->done) continue;
        int w = snprintf(list + n, sizeof list - n, "%s'%s' (%d of %d)", n ? ", " : "",
                         u->is_root ? "<root>" : u->name, u->ready, u->n_params);
        if (w > 0 && n + (size_t)w < sizeof list) n += (size_t)w;
    }
    abandon(f);
    return tsi_error_set(TS_ERR_STATE,
                         "%s: the previous backward did not bring every parameter of every unit "
                         "its gradient, so its reduction never finished; units still waiting "
                         "(parameters with a gradient of all): %s. Every parameter of a unit must "
                         "take part in the loss",
                         OP, list),
           false;
}

/* ------------------------------------------------------------------ life cycle */
static ts_status unit_pre_hook(ts_module *m, ts_tensor *x, void *ctx) {
    (void)m, (void)x;
    return tsi_fsdp_unit_pre_forward(ctx) ? TS_OK : ts_error();
}

static ts_tensor *unit_post_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    return tsi_fsdp_unit_post_forward(ctx, y);
}

/* Mixed precision: the gathered buffer in param_dtype, filled with the parameters rounded (what
 * a gather of the shards brings), in place of the full-precision one the shard was cut from. */
static bool mixed_precision_flat(fsdp_unit *u) {
    ts_dtype pdt = u->f->o.param_dtype;
    if (!pdt || pdt == u->flat->dtype) return true;
    ts_tensor *lp = tsi_new(OP, u->flat->shape, pdt, tsi_device(u->flat));
    ts_scope_begin();
    ts_no_grad_begin();
    bool ok = lp && ts_copy_(lp, u->flat) != NULL;
    ts_no_grad_end();
    ts_scope_end();
    if (!ok) {
        ts_release(lp);
        return false;
    }
    ts_release(u->flat);
    u->flat = lp;
    return true;
}

/* The optimizer's leaves: the shard, or (decay_groups) views of its decaying part [0, split) and
 * of the rest. */
static bool make_leaves(fsdp_unit *u) {
    fsdp_module *f = u->f;
    u->shard->requires_grad = true;
    if (!f->o.decay_groups) {
        u->leaf[0] = u->shard;
        u->n_leaves = 1;
        return true;
    }
    int64_t split = u->decay_n - (int64_t)f->rank * u->shard_n;
    u->split = split < 0 ? 0 : split > u->shard_n ? u->shard_n : split;
    u->shard->requires_grad = false; /* the leaves are stepped, not the shard */
    for (int k = 0; k < 2; k++) {
        int64_t off = k ? u->split : 0, n = k ? u->shard_n - u->split : u->split;
        int64_t one = 1;
        ts_tensor *t = tsi_view_of(u->shard, TS_SHAPE(n), &one, u->shard->offset + off);
        if (!t) return false;
        t->requires_grad = true;
        u->leaf[u->n_leaves++] = t;
    }
    return true;
}

bool tsi_fsdp_unit_flatten(fsdp_unit *u) {
    ts_tensor *p0 = u->params[0].p;
    const bool offload = u->f->o.cpu_offload && tsi_device(p0).type != TS_CPU;
    u->flat = tsi_new(OP, TS_SHAPE(u->padded), p0->dtype, tsi_device(p0));
    u->shard = tsi_new(OP, TS_SHAPE(u->shard_n), p0->dtype, offload ? ts_cpu() : tsi_device(p0));
    if (!u->flat || !u->shard || (offload && !tsi_storage_pin(OP, u->shard))) return false;
    bool ok = tsi_scope_open();
    if (!ok) return false;
    ts_no_grad_begin();
    ok = ts_zero_(u->flat) != NULL;
    for (int i = 0; ok && i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        ok = ts_copy_(ts_narrow(u->flat, 0, pp->offset, tsi_numel(pp->p->shape)),
                      ts_reshape(pp->p, TS_SHAPE(-1))) != NULL;
    }
    ts_no_grad_end();
    ts_scope_end();
    return ok;
}

bool tsi_fsdp_unit_shard(fsdp_unit *u) {
    fsdp_module *f = u->f;
    bool ok = true;
    /* the group's first rank's values, everywhere (as DDP's _sync_module_states) */
    if (f->world > 1)
        ok = tsi_dist_broadcast_unchecked(u->flat, tsi_dist_group_world_rank(f->o.group, 0),
                                          f->o.group) == TS_OK;
    if (ok && tsi_device(u->shard).type != tsi_device(u->flat).type) { /* cpu_offload */
        ts_scope_begin();
        ts_no_grad_begin();
        ok = ts_copy_(u->shard, ts_narrow(u->flat, 0, (int64_t)f->rank * u->shard_n, u->shard_n)) !=
             NULL;
        ts_no_grad_end();
        ts_scope_end();
    } else if (ok) {
        ts_kview d = tsi_kview(u->shard), s = tsi_kview(u->flat);
        s.shape[0] = u->shard_n;
        s.data += (size_t)f->rank * (size_t)u->shard_n * tsi_dtype_size(u->flat->dtype);
        if (u->shard_n) tsi_be(u->shard)->copy(tsi_be(u->shard), tsi_dev_index(u->shard), &d, &s);
    }
    ok = ok && mixed_precision_flat(u) && make_leaves(u);
    for (int i = 0; ok && i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        ok = ts_set_grad(pp->p, NULL) == TS_OK;
        if (ok) tsi_tensor_alias_storage(pp->p, u->flat, pp->offset);
        pp->p->dtype = u->flat->dtype; /* param_dtype from now on */
    }
    for (int i = 0; ok && i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        pp->hook = ts_register_post_accumulate_grad_hook(pp->p, grad_hook, pp);
        ok = pp->hook > 0;
    }
    if (ok && !u->is_root) {
        u->pre_hook = ts_module_register_forward_pre_hook(u->m, unit_pre_hook, u);
        u->post_hook = u->pre_hook ? ts_module_register_forward_hook(u->m, unit_post_hook, u) : 0;
        ok = u->post_hook > 0;
    }
    if (!ok) return false;
    u->gathered = true;
    u->gathered_version = ts_version(u->shard);
    u->grad_consumed = true;
    reshard(u);
    return true;
}

void tsi_fsdp_unit_free(fsdp_unit *u) {
    if (u->gather_work) ts_dist_wait(u->gather_work);
    if (u->reduce_work) ts_dist_wait(u->reduce_work);
    u->gather_work = u->reduce_work = NULL;
    for (int i = 0; u->params && i < u->n_params; i++) {
        fsdp_param *pp = &u->params[i];
        if (pp->hook) ts_remove_grad_hook(pp->p, pp->hook);
        if (is_slot(u, pp->p->grad)) ts_set_grad(pp->p, NULL);
        free(pp->name);
    }
    if (u->pre_hook) ts_module_remove_forward_hook(u->m, u->pre_hook);
    if (u->post_hook) ts_module_remove_forward_hook(u->m, u->post_hook);
    free(u->params);
    free(u->name);
    ts_release(u->flat);
    ts_release(u->grad);
    ts_release(u->acc);
    ts_release(u->reduced);
    for (int k = 0; k < u->n_leaves; k++)
        if (u->leaf[k] != u->shard) ts_release(u->leaf[k]);
    ts_release(u->shard);
    memset(u, 0, sizeof *u);
}
