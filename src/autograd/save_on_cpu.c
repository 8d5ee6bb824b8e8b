/* save_on_cpu.c — activation offload (tessera/saved_hooks.h's ts_save_on_cpu_begin): saved-tensor
 * hooks that copy each large saved tensor of a device to (pinned) host memory in the forward and
 * back in backward. The tensors one scope offloaded are numbered in the order they were saved;
 * backward needs them roughly in reverse, so unpacking number k also starts the asynchronous
 * copies of k-1 .. k-prefetch (ts_to_async from pinned memory: on a side engine, CUDA's copy or
 * the simulated link's). */
#include <pthread.h>
#include <stdlib.h>

#include "autograd/saved_hooks.h"
#include "backend/sim/sim_link.h"
#include "tessera/saved_hooks.h"

typedef struct item item;

/* one scope's offloaded tensors, in saving order; lives while the scope or any item does */
typedef struct group {
    atomic_int refs;
    ts_save_on_cpu_opts o;
    pthread_mutex_t mu;
    item **items; /* [n]; an entry is NULL once its item is freed */
    int n, cap;
} group;

struct item {
    ts_tensor *kept; /* saved as itself (small, on the cpu, a parameter) */
    ts_tensor *host; /* the host copy */
    ts_device dev;
    ts_tensor *back; /* on dev again: prefetched or unpacked */
    int index;       /* in the group; -1: not listed */
};

static struct {
    atomic_uint_fast64_t offloaded, offloaded_bytes, kept, restored, prefetched;
} stats;

static void group_release(group *g) {
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1) return;
    pthread_mutex_destroy(&g->mu);
    free(g->items);
    free(g);
}

static void group_free_ctx(void *ctx) { group_release(ctx); }

static void *pack(void *ctx, ts_tensor *t) {
    group *g = ctx;
    item *it = calloc(1, sizeof *it);
    if (!it) return NULL;
    it->index = -1;
    const size_t bytes = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
    const bool param = t->requires_grad && !t->grad_fn;
    if (tsi_device(t).type == TS_CPU || bytes < g->o.min_bytes || param || bytes == 0) {
        it->kept = ts_retain(t);
        atomic_fetch_add(&stats.kept, 1);
        return it;
    }
    const ts_status before = ts_error();
    ts_tensor *h = ts_to(t, ts_cpu()); /* scope-owned (the hooks' scope) */
    if (h && g->o.pin_memory) h = ts_pin_memory(h);
    pthread_mutex_lock(&g->mu);
    bool listed = false;
    if (h && g->n == g->cap) {
        int c = g->cap ? 2 * g->cap : 64;
        item **p = realloc(g->items, (size_t)c * sizeof *p);
        if (p) g->items = p, g->cap = c;
    }
    if (h && g->n < g->cap) {
        it->index = g->n;
        g->items[g->n++] = it;
        listed = true;
    }
    pthread_mutex_unlock(&g->mu);
    if (!h || !listed) { /* out of host memory: the tensor stays on its device */
        if (ts_error() != before) ts_error_clear();
        it->kept = ts_retain(t);
        atomic_fetch_add(&stats.kept, 1);
        return it;
    }
    it->host = ts_retain(h);
    it->dev = tsi_device(t);
    atomic_fetch_add(&stats.offloaded, 1);
    atomic_fetch_add(&stats.offloaded_bytes, bytes);
    atomic_fetch_add(&g->refs, 1);
    return it;
}

/* starts bringing item k back (under g->mu); false + error when it could not */
static bool bring_back(item *it, bool ahead) {
    if (it->back) return true;
    ts_tensor *d = ts_to_async(it->host, it->dev);
    if (!d) return false;
    it->back = ts_retain(d);
    atomic_fetch_add(&stats.restored, 1);
    if (ahead) atomic_fetch_add(&stats.prefetched, 1);
    return true;
}

static ts_tensor *unpack(void *ctx, void *handle) {
    group *g = ctx;
    item *it = handle;
    if (it->kept) return it->kept;
    pthread_mutex_lock(&g->mu);
    bool ok = bring_back(it, false);
    /* the ones saved just before: backward needs them next */
    const int depth = g->o.pin_memory && g->o.prefetch > 0 ? g->o.prefetch : 0;
    for (int k = it->index - 1; ok && k >= 0 && k >= it->index - depth; k--)
        if (g->items[k] && !bring_back(g->items[k], true)) {
            ts_error_clear(); /* a prefetch that fails is retried when needed */
            break;
        }
    pthread_mutex_unlock(&g->mu);
    if (!ok) return NULL;
    /* needed now: a copy still on a simulated link is waited for here, whatever reads it next */
    TSI_SIM_LINK_USE(it->back->storage->device, it->back->storage->uid);
    return it->back;
}

static void free_packed(void *ctx, void *handle) {
    group *g = ctx;
    item *it = handle;
    ts_release(it->kept);
    if (it->index >= 0) {
        pthread_mutex_lock(&g->mu);
        g->items[it->index] = NULL;
        pthread_mutex_unlock(&g->mu);
        ts_release(it->host);
        ts_release(it->back);
        group_release(g);
    }
    free(it);
}

ts_status ts_save_on_cpu_begin(ts_save_on_cpu_opts opts) {
    tsi_init();
    group *g = calloc(1, sizeof *g);
    if (!g) return tsi_error_set(TS_ERR_OOM, "save_on_cpu_begin: out of host memory");
    atomic_init(&g->refs, 1); /* the scope's: dropped by the hooks' ctx_free */
    pthread_mutex_init(&g->mu, NULL);
    g->o = opts;
    return ts_saved_tensors_hooks_push(pack, unpack, free_packed, g, group_free_ctx);
}

ts_status ts_save_on_cpu_end(void) {
    void *(*top_pack)(void *, ts_tensor *) = NULL;
    void *ctx = NULL;
    if (!tsi_saved_hooks_top(&top_pack, &ctx) || top_pack != pack)
        return tsi_error_set(TS_ERR_STATE,
                             "save_on_cpu_end: the innermost saved-tensor hooks are not a "
                             "save_on_cpu scope");
    return ts_saved_tensors_hooks_pop();
}

void ts_save_on_cpu_stats_get(ts_save_on_cpu_stats *out) {
    if (!out) return;
    out->offloaded = atomic_load(&stats.offloaded);
    out->offloaded_bytes = atomic_load(&stats.offloaded_bytes);
    out->kept = atomic_load(&stats.kept);
    out->restored = atomic_load(&stats.restored);
    out->prefetched = atomic_load(&stats.prefetched);
}

void ts_save_on_cpu_reset_stats(void) {
    atomic_store(&stats.offloaded, 0);
    atomic_store(&stats.offloaded_bytes, 0);
    atomic_store(&stats.kept, 0);
    atomic_store(&stats.restored, 0);
    atomic_store(&stats.prefetched, 0);
}
