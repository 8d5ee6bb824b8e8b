/* autocast_cache.c — autocast's casts, and the per-thread cache of parameter casts that lives until
 * the thread's outermost autocast region ends (PyTorch's cached_cast, which imitates Apex). */
#include <pthread.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "ops/view_grad.h"

_Thread_local uint64_t tsi_autocast_cast_count;

/* One cached cast. The source is retained, so its address cannot be reused by another tensor
 * while the entry lives (PyTorch keeps a weak reference for the same reason). The storage and its
 * version tell whether the source was changed since (an optimizer step, ts_module_to): then the
 * cast is made again, where PyTorch would hand out the stale one. */
typedef struct cache_entry {
    ts_tensor *src; /* NULL: empty slot */
    ts_dtype dtype;
    ts_tensor *cast;
    const ts_storage *storage;
    uint64_t version;
} cache_entry;

/* Open addressing with linear probing; entries are only ever removed all at once. */
static _Thread_local cache_entry *slots;
static _Thread_local size_t cap, count;

/* Releases the cache of a thread that ends with entries (a worker that was handed a state with
 * tsi_autocast_state_set and never cleared it): nothing leaks. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static void on_thread_exit(void *unused) {
    (void)unused;
    tsi_autocast_cache_release();
}
static void make_exit_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

static size_t hash_of(const ts_tensor *t, ts_dtype dt) {
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull;
    return (size_t)((h >> 29) ^ (uint64_t)dt);
}

static cache_entry *find(const ts_tensor *t, ts_dtype dt) {
    if (!cap) return NULL;
    for (size_t i = hash_of(t, dt) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (!slots[i].src) return NULL;
        if (slots[i].src == t && slots[i].dtype == dt) return &slots[i];
    }
}

/* A free slot for a new entry (growing the table first when half full); NULL when out of memory. */
static cache_entry *slot_for(const ts_tensor *t, ts_dtype dt) {
    if (2 * (count + 1) > cap) {
        size_t ncap = cap ? 2 * cap : 64;
        cache_entry *ns = calloc(ncap, sizeof *ns);
        if (!ns) return NULL;
        for (size_t i = 0; i < cap; i++) {
            if (!slots[i].src) continue;
            size_t j = hash_of(slots[i].src, slots[i].dtype) & (ncap - 1);
            while (ns[j].src) j = (j + 1) & (ncap - 1);
            ns[j] = slots[i];
        }
        free(slots);
        slots = ns;
        if (!cap) {
            pthread_once(&exit_once, make_exit_key);
            pthread_setspecific(exit_key, &slots); /* any non-NULL value arms the destructor */
        }
        cap = ncap;
    }
    size_t i = hash_of(t, dt) & (cap - 1);
    while (slots[i].src) i = (i + 1) & (cap - 1);
    return &slots[i];
}

void tsi_autocast_cache_release(void) {
    /* take the table first: releasing a tensor never re-enters autocast, but stay safe */
    cache_entry *s = slots;
    size_t n = cap;
    slots = NULL;
    cap = count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].src) continue;
        ts_release(s[i].cast);
        ts_release(s[i].src);
    }
    free(s);
}

void ts_autocast_clear_cache(void) { tsi_autocast_cache_release(); }

int tsi_autocast_cache_size(void) { return (int)count; }

/* The cast with its ToCopyBackward0 node. force_graph: record it even with grad mode off. The
 * backward hands the gradient back as it is (the engine casts it to the source's dtype), which is
 * its own derivative: differentiable again, as ts_to_dtype's node is. */
static ts_tensor *cast_recorded(const char *op, ts_tensor *t, ts_dtype dt, bool force_graph) {
    ts_tensor *c = tsi_cast(op, t, dt);
    if (!c || c == t) return c;
    tsi_autocast_cast_count++;
    if (!t->requires_grad) return c;
    if (!force_graph) {
        ts_node *n = tsi_record("ToCopyBackward0", op, tsi_identity_backward, &t, 1, c, NULL, 0);
        if (n) n->flags |= TSI_NODE_TWICE;
        return c;
    }
    ts_node *n = tsi_node_new("ToCopyBackward0", op, tsi_identity_backward, &t, 1, 1, 0);
    if (n) {
        n->flags |= TSI_NODE_TWICE;
        tsi_node_set_output(n, c, 0);
        tsi_node_release(n); /* c owns it now */
    }
    return c;
}

/* PyTorch's can_try_cache: a float32 parameter (leaf that requires grad, not a view) cast to the
 * lower dtype of its device type, with the cache enabled. */
static bool cacheable(const ts_tensor *t, ts_dtype dt) {
    ts_dtype lower;
    const ts_device d = tsi_device(t);
    return t->dtype == TS_F32 && t->requires_grad && !t->grad_fn && !t->is_view &&
           tsi_autocast_active(d, &lower) && dt == lower && tsi_autocast_cache_enabled(d);
}

ts_tensor *tsi_autocast_cast(const char *op, ts_tensor *t, ts_dtype dt) {
    if (!t || t->dtype == dt) return ts_retain(t);
    if (!cacheable(t, dt)) return cast_recorded(op, t, dt, false);
    const uint64_t version = atomic_load(&t->storage->version);
    cache_entry *e = find(t, dt);
    if (e && e->storage == t->storage && e->version == version) return ts_retain(e->cast);
    ts_tensor *c = cast_recorded(op, t, dt, true);
    if (!c) return NULL;
    if (e) { /* the source changed since: replace the stale cast */
        ts_release(e->cast);
    } else {
        e = slot_for(t, dt);
        if (!e) return c; /* no memory for the entry: still a correct, uncached cast */
        e->src = ts_retain(t);
        e->dtype = dt;
        count++;
    }
    e->cast = ts_retain(c);
    e->storage = t->storage;
    e->version = version;
    return c;
}
