/* conv_dnnl_wcache.c — convolution weights rearranged for a kernel, kept across calls (see
 * conv_dnnl_wcache.h).
 *
 * Every oneDNN convolution wants its weight in a blocked layout (OIhw8i8o and the like) and we
 * keep OIHW, so each call reordered the whole weight: 11.7 M floats per ResNet-18 forward, most
 * of the time of a batch-1 inference of the late layers. The direct kernels (depthwise
 * convolutions) pack theirs too: 5.7% of a MobileNetV3 inference. A weight that does not change
 * between calls is rearranged once and kept here.
 *
 * An entry is named by the weight's storage uid (never reused, unlike an address: the caching
 * allocator hands freed memory out again), the storage's version (bumped by every in-place op,
 * so a weight changed in place misses, and its stale entry is dropped on the spot), the weight's
 * offset in that storage and the layout (the primitive's memory descriptor, the direct kernels'
 * packing). The front end names only weights
 * that are not being trained (backend.h). A weight is kept from the second call that asks for it:
 * one met once (a contiguous copy, a weight computed by an op at each call) would only evict the
 * useful ones.
 *
 * Bounded: least recently used entries go when the bytes pass the limit (256 MiB by default:
 * ResNet-50's convolution weights, the largest of the usual vision models, are 94 MiB, so two
 * such models stay cached, while a model far beyond it costs no more than the reorders it did
 * before; the buffers come from host_scratch.c's cached memory, so an entry evicted and filled
 * again faults no fresh pages) and past MAX_ENTRIES entries (the lookup is a scan). An entry in
 * use by a running call is only unlinked by eviction; the last reference frees it. Entries left at
 * exit stay reachable from the table (no leak under LSan). */
#include "backend/cpu/conv_dnnl_wcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/host_scratch.h"

#define DEFAULT_LIMIT ((size_t)256 << 20)
#define MAX_ENTRIES   512 /* more than any usual model's convolutions */
#define SEEN          512 /* weights asked for once, remembered for the second time */

struct tsi_wcache_entry {
    tsi_conv_weight_id id;
    size_t layout_len;
    unsigned char layout[TSI_WCACHE_LAYOUT_MAX];
    void *data;
    ts_block *block;
    size_t bytes;
    uint64_t stamp;
    int refs; /* the table's (while linked) and the running calls' */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tsi_wcache_entry *table[MAX_ENTRIES];
static int n_entries;
static size_t total_bytes, limit = DEFAULT_LIMIT;
static uint64_t clock_, hits, fills;
static tsi_conv_weight_id seen[SEEN];
static int seen_next;

static bool same_weight(const tsi_conv_weight_id *a, const tsi_conv_weight_id *b) {
    return a->uid == b->uid && a->offset == b->offset;
}

static void entry_free(tsi_wcache_entry *e) {
    tsi_host_scratch_put(e->block);
    free(e);
}

/* Drops a reference (lock held); true when it was the last: the caller frees e after unlocking. */
static bool unref(tsi_wcache_entry *e) { return --e->refs == 0; }

/* Unlinks table[i] (lock held); returns the entry when nothing else holds it (to free). */
static tsi_wcache_entry *unlink_at(int i) {
    tsi_wcache_entry *e = table[i];
    table[i] = table[--n_entries];
    table[n_entries] = NULL;
    total_bytes -= e->bytes;
    return unref(e) ? e : NULL;
}

/* Evicts least recently used entries until `need` more bytes and one more entry fit (lock held);
 * the entries to free go to out[] (at most MAX_ENTRIES), their count returned. */
static int evict_for(size_t need, tsi_wcache_entry **out) {
    int n_out = 0;
    while (n_entries > 0 && (total_bytes + need > limit || n_entries == MAX_ENTRIES)) {
        int lru = 0;
        for (int i = 1; i < n_entries; i++)
            if (table[i]->stamp < table[lru]->stamp) lru = i;
        tsi_wcache_entry *e = unlink_at(lru);
        if (e) out[n_out++] = e;
    }
    return n_out;
}

static void free_all(tsi_wcache_entry **v, int n) {
    for (int i = 0; i < n; i++) entry_free(v[i]);
}

static bool same_layout(const tsi_wcache_entry *e, const void *layout, size_t len) {
    return e->layout_len == len && !memcmp(e->layout, layout, len);
}

/* The entry for id and layout, referenced (lock held); an entry of an older version of the same
 * weight is unlinked on the way (*stale: to free, or NULL). */
static tsi_wcache_entry *find(const tsi_conv_weight_id *id, const void *layout, size_t len,
                              tsi_wcache_entry **stale) {
    *stale = NULL;
    for (int i = 0; i < n_entries; i++) {
        tsi_wcache_entry *e = table[i];
        if (!same_weight(&e->id, id) || !same_layout(e, layout, len)) continue;
        if (e->id.version != id->version) {
            *stale = unlink_at(i);
            return NULL;
        }
        e->stamp = ++clock_;
        e->refs++;
        return e;
    }
    return NULL;
}

/* Whether id was asked for before (lock held); remembers it when not. */
static bool seen_before(const tsi_conv_weight_id *id) {
    for (int i = 0; i < SEEN; i++)
        if (same_weight(&seen[i], id) && seen[i].version == id->version) return true;
    seen[seen_next] = *id;
    seen_next = (seen_next + 1) % SEEN;
    return false;
}

/* A new entry for id filled by fill, or NULL (no memory, fill failed, larger than the limit). */
static tsi_wcache_entry *entry_new(const tsi_conv_weight_id *id, const void *layout, size_t len,
                                   size_t bytes, tsi_wcache_fill_fn fill, void *ctx) {
    tsi_wcache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->id = *id, e->bytes = bytes, e->refs = 1;
    e->layout_len = len;
    memcpy(e->layout, layout, len);
    e->data = tsi_host_scratch_get(bytes, &e->block);
    if (!e->data || !fill(ctx, e->data)) {
        entry_free(e);
        return NULL;
    }
    return e;
}

/* Links e (one reference: the caller's) unless an equal entry got there first or it cannot fit;
 * returns the entry the caller should use, referenced. *drop: entries to free after unlocking. */
static tsi_wcache_entry *link(tsi_wcache_entry *e, tsi_wcache_entry **drop, int *n_drop) {
    tsi_wcache_entry *stale, *other = find(&e->id, e->layout, e->layout_len, &stale);
    if (stale) drop[(*n_drop)++] = stale;
    if (other) { /* another thread filled it meanwhile */
        drop[(*n_drop)++] = e;
        return other;
    }
    if (e->bytes > limit) return e; /* used once, freed on release */
    *n_drop += evict_for(e->bytes, drop + *n_drop);
    e->stamp = ++clock_;
    e->refs++;
    table[n_entries++] = e;
    total_bytes += e->bytes;
    fills++;
    return e;
}

const void *tsi_wcache_get(const tsi_conv_weight_id *id, const void *layout, size_t layout_len,
                           size_t bytes, tsi_wcache_fill_fn fill, void *ctx,
                           tsi_wcache_entry **ref) {
    *ref = NULL;
    if (!id || !id->uid || layout_len > TSI_WCACHE_LAYOUT_MAX) return NULL;
    tsi_wcache_entry *stale = NULL, *e;
    pthread_mutex_lock(&lock);
    const bool enabled = limit > 0;
    e = enabled ? find(id, layout, layout_len, &stale) : NULL;
    if (e) hits++;
    const bool admit = enabled && !e && seen_before(id);
    pthread_mutex_unlock(&lock);
    if (stale) entry_free(stale);
    if (admit) { /* filled outside the lock: a reorder of megabytes */
        tsi_wcache_entry *fresh = entry_new(id, layout, layout_len, bytes, fill, ctx);
        tsi_wcache_entry *drop[MAX_ENTRIES + 2];
        int n_drop = 0;
        pthread_mutex_lock(&lock);
        e = fresh ? link(fresh, drop, &n_drop) : NULL;
        pthread_mutex_unlock(&lock);
        free_all(drop, n_drop);
    }
    *ref = e;
    return e ? e->data : NULL;
}

void tsi_wcache_release(tsi_wcache_entry *ref) {
    if (!ref) return;
    pthread_mutex_lock(&lock);
    const bool last = unref(ref);
    pthread_mutex_unlock(&lock);
    if (last) entry_free(ref);
}

void tsi_dnnl_conv_wcache_stats(tsi_wcache_stats *out) {
    pthread_mutex_lock(&lock);
    *out = (tsi_wcache_stats){
        .hits = hits, .fills = fills, .bytes = total_bytes, .entries = n_entries};
    pthread_mutex_unlock(&lock);
}

size_t tsi_dnnl_conv_wcache_limit(size_t bytes) {
    tsi_wcache_entry *drop[MAX_ENTRIES];
    pthread_mutex_lock(&lock);
    const size_t old = limit;
    limit = bytes;
    const int n_drop = evict_for(0, drop);
    pthread_mutex_unlock(&lock);
    free_all(drop, n_drop);
    return old;
}
