/* save_on_cpu.c — activation offload (tessera/saved_hooks.h's ts_save_on_cpu_begin): saved-tensor
 * hooks that copy each large saved tensor of a device to (pinned) host memory in the forward and
 * back in backward. The tensors one scope offloaded are numbered in the order they were saved;
 * backward needs them roughly in reverse, so unpacking number k also starts the asynchronous
 * copies of k-1 .. k-prefetch (ts_to_async from pinned memory: on a side engine, CUDA's copy or
 * the simulated link's). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/saved_hooks.h"
#include "core/pinned.h"
#include "tessera/saved_hooks.h"

typedef struct item item;
typedef struct copy copy;

/* one scope's offloaded tensors, in saving order; lives while the scope or any item does */
typedef struct group {
    atomic_int refs;
    ts_save_on_cpu_opts o;
    pthread_mutex_t mu;
    item **items; /* [n]; an entry is NULL once its item is freed */
    int n, cap;
    copy *copies; /* the live host copies, to share among views of one storage */
} group;

/* The host copy of a run of a device storage's elements [base, base + len), made once for every
 * saved view of the storage at one version: each saved tensor comes back as a view with its own
 * strides, offset and (within 64 bytes) alignment, so backward's kernels take the paths they take
 * without offload and give the same bits (a contiguous copy would turn a channels_last activation
 * or a transposed operand into another layout, and another summation order). */
struct copy {
    copy *next;
    uint64_t uid, version; /* the device storage's, when copied */
    int64_t base, len;     /* in elements of dtype */
    ts_dtype dtype;
    ts_device dev;
    ts_tensor *host; /* [len] on the host (pinned with pin_memory) */
    ts_tensor *back; /* [len] on dev again: prefetched or unpacked */
    int refs;        /* items using it (under the group's lock) */
};

struct item {
    ts_tensor *kept; /* saved as itself (small, on the cpu, a parameter) */
    copy *c;         /* else the host copy it is a view of */
    ts_shape shape;
    int64_t strides[TS_MAX_DIMS], offset; /* offset from c->base */
    ts_tensor *back;                      /* the view on dev again */
    int index;                            /* in the group; -1: not listed */
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

/* The elements of t's storage to copy: all of it when it is at most 4x t (the views of one
 * activation then share one copy), else t's own span, widened down to a 64-byte boundary. false:
 * no span in whole elements (a storage viewed with another dtype's size). */
static bool span_of(const ts_tensor *t, int64_t *base, int64_t *len) {
    const int64_t es = (int64_t)tsi_dtype_size(t->dtype);
    const int64_t all = (int64_t)(t->storage->nbytes / (size_t)es);
    if (t->storage->nbytes % (size_t)es || !t->storage->data) return false;
    int64_t hi = t->offset + 1;
    for (int i = 0; i < t->shape.ndim; i++) hi += (t->shape.dims[i] - 1) * t->strides[i];
    if (hi > all) return false;
    const int64_t numel = tsi_numel(t->shape);
    if (all <= 4 * numel) {
        *base = 0, *len = all;
        return true;
    }
    const int64_t line = 64 % es ? 1 : 64 / es;
    *base = t->offset - t->offset % line;
    *len = hi - *base;
    return true;
}

/* the copy holding t's elements (under g->mu): a live one of the same storage and version, or a
 * new one; NULL + error (out of memory) */
static copy *copy_for(group *g, ts_tensor *t) {
    int64_t base, len;
    if (!span_of(t, &base, &len)) {
        tsi_error_set(TS_ERR_UNSUPPORTED, "save_on_cpu: no whole elements of the tensor's dtype in "
                                          "its storage, or no memory");
        return NULL;
    }
    const ts_storage *st = t->storage;
    const uint64_t version = atomic_load(&t->storage->version);
    int64_t hi = t->offset + 1;
    for (int i = 0; i < t->shape.ndim; i++) hi += (t->shape.dims[i] - 1) * t->strides[i];
    for (copy *c = g->copies; c; c = c->next)
        if (c->uid == st->uid && c->version == version && c->dtype == t->dtype &&
            c->base <= t->offset && hi <= c->base + c->len) {
            c->refs++;
            return c;
        }
    copy *c = calloc(1, sizeof *c);
    if (!c) return tsi_error_set(TS_ERR_OOM, "save_on_cpu: out of host memory"), NULL;
    ts_tensor *whole = tsi_view_of(t, (ts_shape){.ndim = 1, .dims = {len}}, (int64_t[]){1}, base);
    ts_tensor *h = whole ? ts_to(whole, ts_cpu()) : NULL; /* scope-owned (the hooks' scope) */
    ts_release(whole);
    if (h && g->o.pin_memory) h = ts_pin_memory(h);
    if (!h) {
        free(c);
        return NULL;
    }
    *c = (copy){.next = g->copies,
                .uid = st->uid,
                .version = version,
                .base = base,
                .len = len,
                .dtype = t->dtype,
                .dev = tsi_device(t),
                .host = ts_retain(h),
                .refs = 1};
    g->copies = c;
    atomic_fetch_add(&stats.offloaded, 1);
    atomic_fetch_add(&stats.offloaded_bytes, (uint64_t)len * tsi_dtype_size(t->dtype));
    return c;
}

/* drops one item's use of c (under g->mu) */
static void copy_drop(group *g, copy *c) {
    if (--c->refs) return;
    for (copy **p = &g->copies; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    ts_release(c->host);
    ts_release(c->back);
    free(c);
}

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
    pthread_mutex_lock(&g->mu);
    copy *c = copy_for(g, t);
    bool listed = false;
    if (c && g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        item **p = realloc(g->items, (size_t)cap * sizeof *p);
        if (p) g->items = p, g->cap = cap;
    }
    if (c && g->n < g->cap) {
        it->index = g->n;
        g->items[g->n++] = it;
        listed = true;
    } else if (c) {
        copy_drop(g, c);
    }
    pthread_mutex_unlock(&g->mu);
    if (!listed) { /* out of host memory: the tensor stays on its device */
        if (ts_error() != before) ts_error_clear();
        it->kept = ts_retain(t);
        atomic_fetch_add(&stats.kept, 1);
        return it;
    }
    it->c = c;
    it->shape = t->shape;
    memcpy(it->strides, t->strides, sizeof it->strides);
    it->offset = t->offset - c->base;
    atomic_fetch_add(&g->refs, 1);
    return it;
}

/* starts bringing a copy back (under g->mu); false + error when it could not */
static bool bring_back(copy *c, bool ahead) {
    if (c->back) return true;
    ts_tensor *d = ts_to_async(c->host, c->dev);
    if (!d) return false;
    c->back = ts_retain(d);
    atomic_fetch_add(&stats.restored, 1);
    if (ahead) atomic_fetch_add(&stats.prefetched, 1);
    return true;
}

static ts_tensor *unpack(void *ctx, void *handle) {
    group *g = ctx;
    item *it = handle;
    if (it->kept) return it->kept;
    pthread_mutex_lock(&g->mu);
    bool ok = bring_back(it->c, false);
    if (ok && !it->back) {
        it->back = tsi_view_of(it->c->back, it->shape, it->strides, it->offset);
        if (!it->back) ok = false;
    }
    /* the ones saved just before: backward needs them next */
    const int depth = g->o.pin_memory && g->o.prefetch > 0 ? g->o.prefetch : 0;
    for (int k = it->index - 1; ok && k >= 0 && k >= it->index - depth; k--)
        if (g->items[k] && !bring_back(g->items[k]->c, true)) {
            ts_error_clear(); /* a prefetch that fails is retried when needed */
            break;
        }
    pthread_mutex_unlock(&g->mu);
    if (!ok) return NULL;
    /* needed now: a copy still on a simulated link is waited for here, whatever reads it next */
    tsi_copy_link_wait(it->back->storage->device, it->back);
    return it->back;
}

static void free_packed(void *ctx, void *handle) {
    group *g = ctx;
    item *it = handle;
    ts_release(it->kept);
    if (it->index >= 0) {
        ts_release(it->back);
        pthread_mutex_lock(&g->mu);
        g->items[it->index] = NULL;
        copy_drop(g, it->c);
        pthread_mutex_unlock(&g->mu);
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
