/* ddp_reducer.c — DDP's reducer: gradient buckets, the hook that marks a parameter's gradient
 * ready, each bucket all-reduced (averaged) as soon as it is full while backward goes on, and the
 * end of the iteration (waiting, copying back). PyTorch's reducer.cpp, without bucket rebuilding.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "dist/ddp_internal.h"
#include "dist/dist_impl.h"

static const char *OP = "DistributedDataParallel";

static void grad_ready_hook(ts_tensor *leaf, void *ctx);

/* ------------------------------------------------------------------ buckets */
typedef struct open_bucket {
    ts_dtype dtype;
    ts_device dev;
    int limit_index; /* 0: the first bucket's limit, then bucket_cap */
    size_t bytes;
    int n, cap;
    int *params;
} open_bucket;

static bool push_int(int **v, int *n, int *cap, int x) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 8;
        int *nv = realloc(*v, (size_t)c * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

/* Closes an open bucket into d->buckets (its parameter list moves there). */
static bool close_bucket(ddp_module *d, open_bucket *ob) {
    ddp_bucket *nb = realloc(d->buckets, (size_t)(d->n_buckets + 1) * sizeof *nb);
    if (!nb) return false;
    d->buckets = nb;
    nb[d->n_buckets++] = (ddp_bucket){.params = ob->params, .n_params = ob->n};
    ob->params = NULL;
    ob->n = ob->cap = 0;
    ob->bytes = 0;
    ob->limit_index = 1;
    return true;
}

/* compute_bucket_assignment_by_size: parameters in reverse order, one open bucket per dtype and
 * device, a bucket closes when it holds at least its limit. */
static bool assign(ddp_module *d) {
    size_t limits[2] = {(size_t)(d->o.first_bucket_mb * 1048576.0),
                        (size_t)(d->o.bucket_cap_mb * 1048576.0)};
    open_bucket open[8];
    int n_open = 0;
    bool ok = true;
    for (int i = d->n_params - 1; ok && i >= 0; i--) {
        ts_tensor *p = d->params[i].p;
        d->params[i].bucket = -1;
        if (!p->requires_grad) continue;
        ts_device dev = tsi_device(p);
        int k = 0;
        while (k < n_open && !(open[k].dtype == p->dtype && tsi_device_eq(open[k].dev, dev))) k++;
        if (k == n_open) {
            if (n_open == 8) {
                ok = tsi_error_set(TS_ERR_UNSUPPORTED,
                                   "%s: parameters of more than 8 dtype/device kinds", OP) == TS_OK;
                break;
            }
            open[n_open++] = (open_bucket){.dtype = p->dtype, .dev = dev};
        }
        open_bucket *ob = &open[k];
        ok = push_int(&ob->params, &ob->n, &ob->cap, i);
        ob->bytes += (size_t)tsi_numel(p->shape) * tsi_dtype_size(p->dtype);
        if (ok && ob->bytes >= limits[ob->limit_index]) ok = close_bucket(d, ob);
    }
    for (int k = 0; k < n_open; k++) {
        if (ok && open[k].n) ok = close_bucket(d, &open[k]);
        free(open[k].params);
    }
    if (!ok && !ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    return ok;
}

/* The flat buffer of a bucket and each parameter's view of it. */
static bool materialise(ddp_module *d, int b) {
    ddp_bucket *bk = &d->buckets[b];
    int64_t total = 0;
    for (int j = 0; j < bk->n_params; j++) {
        ddp_param *pp = &d->params[bk->params[j]];
        pp->bucket = b;
        pp->offset = total;
        pp->numel = tsi_numel(pp->p->shape);
        total += pp->numel;
    }
    ts_tensor *p0 = d->params[bk->params[0]].p;
    bk->buf = tsi_new(OP, TS_SHAPE(total), p0->dtype, tsi_device(p0));
    if (!bk->buf) return false;
    ts_scope_begin();
    ts_no_grad_begin();
    ts_zero_(bk->buf);
    for (int j = 0; j < bk->n_params; j++) {
        ddp_param *pp = &d->params[bk->params[j]];
        pp->slot = ts_retain(ts_view(ts_narrow(bk->buf, 0, pp->offset, pp->numel), pp->p->shape));
    }
    ts_no_grad_end();
    ts_scope_end();
    return !ts_error();
}

bool tsi_ddp_build_buckets(ddp_module *d) {
    if (!assign(d)) return false;
    for (int b = 0; b < d->n_buckets; b++)
        if (!materialise(d, b)) return false;
    for (int i = 0; i < d->n_params; i++) {
        ddp_param *pp = &d->params[i];
        if (pp->bucket < 0) continue;
        pp->hook = ts_register_post_accumulate_grad_hook(pp->p, grad_ready_hook, pp);
        if (!pp->hook) return false;
    }
    d->stats.buckets = d->n_buckets;
    d->stats.bucket_bytes_max = 0;
    for (int b = 0; b < d->n_buckets; b++) {
        size_t bytes = ts_nbytes(d->buckets[b].buf);
        if (bytes > d->stats.bucket_bytes_max) d->stats.bucket_bytes_max = bytes;
    }
    return true;
}

void tsi_ddp_free_buckets(ddp_module *d) {
    for (int b = 0; b < d->n_buckets; b++) {
        if (d->buckets[b].work) ts_dist_wait(d->buckets[b].work);
        ts_release(d->buckets[b].buf);
        free(d->buckets[b].params);
    }
    free(d->buckets);
    d->buckets = NULL;
    d->n_buckets = 0;
    for (int i = 0; i < d->n_params; i++) {
        ddp_param *pp = &d->params[i];
        if (pp->hook) ts_remove_grad_hook(pp->p, pp->hook);
        /* a gradient that is a view of a bucket keeps the bucket's storage alive by itself */
        ts_release(pp->slot);
        pp->slot = NULL;
        pp->hook = 0;
        pp->bucket = -1;
    }
    d->expect = d->started = false;
}

/* ------------------------------------------------------------------ the iteration */
static bool buckets_match_params(ddp_module *d) {
    for (int i = 0; i < d->n_params; i++) {
        ddp_param *pp = &d->params[i];
        if (pp->bucket < 0) {
            if (pp->p->requires_grad) return false;
            continue;
        }
        ts_tensor *buf = d->buckets[pp->bucket].buf;
        if (!pp->p->requires_grad || pp->p->dtype != buf->dtype ||
            !tsi_device_eq(tsi_device(pp->p), tsi_device(buf)))
            return false;
    }
    return true;
}

bool tsi_ddp_prepare_forward(ddp_module *d) {
    if (d->expect && d->started) {
        /* PyTorch's ensure_prior_reduction_finished */
        char list[512] = "", names[1024] = "";
        size_t nl = 0, nn = 0;
        for (int i = 0; i < d->n_params; i++) {
            ddp_param *pp = &d->params[i];
            if (pp->bucket < 0 || pp->ready) continue;
            int w = snprintf(list + nl, sizeof list - nl, "%s%d", nl ? " " : "", i);
            if (w > 0 && nl + (size_t)w < sizeof list) nl += (size_t)w;
            w = snprintf(names + nn, sizeof names - nn, "%s%s", nn ? " " : "", pp->name);
            if (w > 0 && nn + (size_t)w < sizeof names) nn += (size_t)w;
        }
        tsi_error_set(TS_ERR_STATE,
                      "%s: Expected to have finished reduction in the prior iteration before "
                      "starting a new one. This error indicates that your module has parameters "
                      "that were not used in producing loss. You can enable unused parameter "
                      "detection by passing find_unused_parameters = true to ts_ddp, and by making "
                      "sure all forward function outputs participate in calculating loss. "
                      "Parameter indices which did not receive grad for rank %d: %s (%s)",
                      OP, ts_dist_rank(), list, names);
        return false;
    }
    d->expect = d->started = false;
    if (!buckets_match_params(d)) { /* moved to another device or dtype since construction */
        tsi_ddp_free_buckets(d);
        if (!tsi_ddp_build_buckets(d)) return false;
    }
    return true;
}

/* ---- find_unused_parameters: which leaves does the output's graph reach? */
typedef struct ptr_set {
    const void **v;
    size_t cap, n;
} ptr_set;

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

/* 1: inserted, 0: already there, -1: out of memory */
static int set_add(ptr_set *s, const void *p) {
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        const void **v = calloc(cap, sizeof *v);
        if (!v) return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i]) {
                size_t h = ptr_hash(s->v[i], cap);
                while (v[h]) h = (h + 1) & (cap - 1);
                v[h] = s->v[i];
            }
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    size_t h = ptr_hash(p, s->cap);
    while (s->v[h]) {
        if (s->v[h] == p) return 0;
        h = (h + 1) & (s->cap - 1);
    }
    s->v[h] = p;
    s->n++;
    return 1;
}

static bool set_has(const ptr_set *s, const void *p) {
    if (!s->cap) return false;
    size_t h = ptr_hash(p, s->cap);
    while (s->v[h]) {
        if (s->v[h] == p) return true;
        h = (h + 1) & (s->cap - 1);
    }
    return false;
}

static bool mark_used(ddp_module *d, ts_tensor *out) {
    ptr_set nodes = {0}, leaves = {0};
    ts_node **stack = NULL;
    int n = 0, cap = 0;
    bool ok = true;
    if (out->grad_fn) {
        cap = 64;
        stack = malloc((size_t)cap * sizeof *stack);
        ok = stack && set_add(&nodes, out->grad_fn) >= 0;
        if (ok) stack[n++] = out->grad_fn;
    } else {
        ok = set_add(&leaves, out) >= 0;
    }
    while (ok && n) {
        ts_node *node = stack[--n];
        for (int i = 0; ok && i < node->n_in; i++) {
            tsi_edge *e = &node->next[i];
            if (e->leaf) ok = set_add(&leaves, e->leaf) >= 0;
            if (!e->fn) continue;
            int added = set_add(&nodes, e->fn);
            if (added < 0) ok = false;
            if (added <= 0) continue;
            if (n == cap) {
                ts_node **s2 = realloc(stack, (size_t)(2 * cap) * sizeof *s2);
                if (!s2) {
                    ok = false;
                    break;
                }
                stack = s2;
                cap *= 2;
            }
            stack[n++] = e->fn;
        }
    }
    for (int i = 0; ok && i < d->n_params; i++)
        d->params[i].used = set_has(&leaves, d->params[i].p);
    free(stack);
    free(nodes.v);
    free(leaves.v);
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory walking the graph", OP);
    return ok;
}

bool tsi_ddp_prepare_backward(ddp_module *d, ts_tensor *out) {
    for (int i = 0; i < d->n_params; i++) {
        d->params[i].ready = false;
        d->params[i].used = true;
    }
    for (int b = 0; b < d->n_buckets; b++) d->buckets[b].pending = d->buckets[b].n_params;
    d->next_bucket = d->full_buckets = 0;
    d->wait_s = d->comm_s = 0;
    if (d->o.find_unused_parameters && !mark_used(d, out)) return false;
    d->expect = true;
    d->started = false;
    return true;
}

/* ---- reduction */
/* slot = g / world in one pass over memory (tsi_dist_divide_by_world); a plain copy when the world
 * is one. Falls back to a copy (divided at launch) when g is not of the slot's dtype and device. */
static bool copy_scaled(ddp_module *d, ddp_param *pp, ts_tensor *g) {
    ts_tensor *slot = pp->slot;
    if (d->world == 1 || g->dtype != slot->dtype ||
        !tsi_device_eq(tsi_device(g), tsi_device(slot)) ||
        !tsi_shape_equal(g->shape, slot->shape)) {
        if (!ts_copy_(slot, g)) return false;
        pp->scaled = d->world == 1;
        return true;
    }
    tsi_dist_divide_by_world(slot, g, d->world);
    pp->scaled = true;
    return true;
}

static bool launch(ddp_module *d, int b) {
    ddp_bucket *bk = &d->buckets[b];
    if (d->world == 1) return true;
    /* slots whose gradient accumulated in place (bucket views) still need the division */
    for (int j = 0; j < bk->n_params; j++) {
        ddp_param *pp = &d->params[bk->params[j]];
        if (!pp->scaled) tsi_dist_divide_by_world(pp->slot, pp->slot, d->world);
    }
    bk->work = tsi_dist_all_reduce_unchecked(bk->buf, TS_DIST_SUM, d->o.group);
    return bk->work != NULL;
}

/* Gives a parameter its bucket's averaged gradient. */
static bool copy_back(ddp_module *d, ddp_param *pp) {
    ts_tensor *g = pp->p->grad;
    if (g && g->storage == pp->slot->storage && g->offset == pp->slot->offset) return true;
    if (!g) {
        /* unused here (find_unused_parameters): the other ranks' average still applies */
        ts_tensor *c = d->o.gradient_as_bucket_view ? pp->slot : ts_clone(pp->slot);
        return c && ts_set_grad(pp->p, c) == TS_OK;
    }
    return ts_copy_(g, pp->slot) != NULL;
}

/* Every bucket has been launched: wait for them and give each parameter its averaged gradient. */
static bool finalize(ddp_module *d) {
    bool ok = true;
    /* bucket by bucket: a finished bucket's gradients are copied back while the next one is still
     * being reduced */
    for (int b = 0; b < d->n_buckets; b++) {
        ddp_bucket *bk = &d->buckets[b];
        if (bk->work) {
            double busy = 0, t0 = tsd_now();
            if (tsi_dist_wait_busy(bk->work, &busy) != TS_OK) ok = false;
            d->wait_s += tsd_now() - t0;
            d->comm_s += busy;
            bk->work = NULL;
        }
        for (int j = 0; ok && j < bk->n_params; j++) ok = copy_back(d, &d->params[bk->params[j]]);
    }
    d->stats.comm_s = d->comm_s;
    d->stats.wait_s = d->wait_s;
    d->expect = d->started = false;
    return ok;
}

static bool mark_ready(ddp_module *d, ddp_param *pp) {
    if (pp->ready)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: Expected to mark a variable ready only once. Parameter %s was "
                             "marked ready twice in one iteration: it is used in several "
                             "forward passes or backward ran twice through part of the graph",
                             OP, pp->name),
               false;
    pp->ready = true;
    ts_tensor *g = pp->p->grad;
    pp->scaled = false;
    if (!g) {
        if (!ts_zero_(pp->slot)) return false;
        pp->scaled = true;
    } else if (!(g->storage == pp->slot->storage && g->offset == pp->slot->offset)) {
        if (!copy_scaled(d, pp, g)) return false;
        if (d->o.gradient_as_bucket_view && ts_set_grad(pp->p, pp->slot) != TS_OK) return false;
    }
    ddp_bucket *bk = &d->buckets[pp->bucket];
    if (--bk->pending > 0) return true;
    if (!d->overlap && ++d->full_buckets < d->n_buckets) return true; /* all at the end */
    while (d->next_bucket < d->n_buckets && d->buckets[d->next_bucket].pending == 0)
        if (!launch(d, d->next_bucket++)) return false;
    return d->next_bucket < d->n_buckets || finalize(d);
}

/* The backward failed (the engine runs the hooks it still owed with the error pending): this
 * rank's iteration is over. Buckets already launched are waited for (every rank launches them);
 * the next forward starts afresh, as after ts_error_clear() a retried step should. */
static void abandon(ddp_module *d) {
    for (int b = 0; b < d->n_buckets; b++)
        if (d->buckets[b].work) {
            tsi_dist_wait_busy(d->buckets[b].work, &(double){0});
            d->buckets[b].work = NULL;
        }
    d->expect = d->started = false;
}

static void grad_ready_hook(ts_tensor *leaf, void *ctx) {
    ddp_param *pp = ctx;
    ddp_module *d = pp->d;
    (void)leaf;
    if (d->expect && ts_error()) abandon(d);
    if (!d->expect || ts_error()) return;
    ts_scope_begin();
    bool ok = true;
    if (!d->started) {
        d->started = true;
        /* parameters the forward did not reach get no hook call: ready now, as zeros */
        if (d->o.find_unused_parameters)
            for (int i = 0; ok && i < d->n_params; i++) {
                ddp_param *u = &d->params[i];
                if (!u->used && u->bucket >= 0 && u != pp) ok = mark_ready(d, u);
            }
    }
    if (ok) mark_ready(d, pp);
    ts_scope_end();
}
