/* alloc.c — PyTorch's caching allocator scheme (pools, best fit, split/merge) over any backend. */
#include "backend/alloc.h"
#include "backend/fault_alloc.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* PyTorch's constants (c10/cuda/CUDACachingAllocator.cpp). */
#define MIN_BLOCK    ((size_t)512)
#define SMALL_SIZE   MIB        /* largest request served by the small pool */
#define SMALL_BUFFER (2 * MIB)  /* small-pool segment */
#define LARGE_BUFFER (20 * MIB) /* large-pool segment for requests below MIN_LARGE */
#define MIN_LARGE    (10 * MIB)
#define ROUND_LARGE  (2 * MIB)
#define SLAB_BLOCKS  64
#define POOL_SMALL   0
#define POOL_LARGE   1
/* Past this, rounding would overflow; such a request cannot succeed anyway. */
#define MAX_REQUEST (SIZE_MAX / 2)
/* Streams remembered per block; a block used by more makes its next user wait for the device. */
#define MAX_STREAMS 4

/* A block is a piece of one segment. Blocks of a segment form an address-ordered doubly linked
 * list, so merging on release needs no search; the segment's raw pointer is its head block's ptr.
 * Free blocks also live in their pool's treap keyed by (size, ptr): best fit in O(log n). */
struct ts_block {
    char *ptr;
    size_t size;
    ts_block *prev, *next;  /* neighbours in the segment */
    ts_block *left, *right; /* treap children while free; `right` links the struct free list */
    uint32_t prio;
    uint8_t pool;
    bool allocated;
    uintptr_t owner;       /* while free: its stream pool (free_owner), the treap's first key */
    uint8_t nstreams;      /* streams that used the memory since its last stream-ordered reuse */
    bool streams_overflow; /* more than MAX_STREAMS of them */
    uintptr_t streams[MAX_STREAMS];
    ts_block *seg_prev, *seg_next; /* a segment's head block: the allocator's list of segments */
    void **frames;                 /* while allocated with history recording on: its backtrace */
    int nframes;
    struct alloc_ctx *ctx; /* and the allocating thread's context then (a binding's stack) */
};

typedef struct slab {
    struct slab *next;
    ts_block blocks[SLAB_BLOCKS];
} slab;

struct ts_allocator {
    pthread_mutex_t mu;
    const ts_backend *be;
    int index;
    ts_block *free_tree[2]; /* per pool */
    ts_block *spare;        /* recycled block structs, so the fast path never mallocs */
    slab *slabs;
    uint32_t rng;
    size_t allocated, peak_allocated, reserved, peak_reserved;
    uint64_t alloc_count, oom_count;
    const ts_alloc_hooks *hooks; /* NULL: host memory, nothing to order (cpu, sim) */
    ts_block *segments;          /* head blocks of every segment, newest first */
};

static atomic_bool record_history;
static void (*_Atomic oom_hook)(void);

/* A thread's allocation context (tsi_allocator_set_context): immutable text shared by the
 * blocks allocated under it, freed with the last of them. */
typedef struct alloc_ctx {
    atomic_int refs;
    char text[];
} alloc_ctx;
static _Thread_local alloc_ctx *thread_ctx;

static alloc_ctx *ctx_ref(alloc_ctx *c) {
    if (c) atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}
static void ctx_unref(alloc_ctx *c) {
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) free(c);
}

bool tsi_allocator_set_context(const char *text) {
    ctx_unref(thread_ctx);
    thread_ctx = NULL;
    if (!text) return true;
    size_t n = strlen(text);
    alloc_ctx *c = malloc(sizeof *c + n + 1);
    if (!c) return false;
    atomic_init(&c->refs, 1);
    memcpy(c->text, text, n + 1);
    thread_ctx = c;
    return true;
}

void tsi_allocator_set_oom_hook(void (*fn)(void)) { atomic_store(&oom_hook, fn); }

void tsi_allocator_record_history(bool on) { atomic_store(&record_history, on); }
bool tsi_allocator_recording_history(void) { return atomic_load(&record_history); }

/* ------------------------------------------------------------------ treap of free blocks
 * Keyed by (owner, size, address), as PyTorch's block pools are by (stream, size, address): the
 * blocks of one stream pool are one range of the tree, best fit within it one descent. */
static inline bool key_less(const ts_block *a, const ts_block *b) {
    if (a->owner != b->owner) return a->owner < b->owner;
    return a->size < b->size || (a->size == b->size && (uintptr_t)a->ptr < (uintptr_t)b->ptr);
}

/* Splits t into keys < k (into *l) and keys > k (into *r); k itself is never in t. */
static void treap_split(ts_block *t, const ts_block *k, ts_block **l, ts_block **r) {
    while (t) {
        if (key_less(t, k)) {
            *l = t;
            l = &t->right;
            t = t->right;
        } else {
            *r = t;
            r = &t->left;
            t = t->left;
        }
    }
    *l = *r = NULL;
}

/* Every key of l is below every key of r. */
static ts_block *treap_merge(ts_block *l, ts_block *r) {
    ts_block *root = NULL, **p = &root;
    while (l && r) {
        if (l->prio > r->prio) {
            *p = l;
            p = &l->right;
            l = l->right;
        } else {
            *p = r;
            p = &r->left;
            r = r->left;
        }
    }
    *p = l ? l : r;
    return root;
}

static void treap_insert(ts_block **root, ts_block *n) {
    ts_block **p = root;
    while (*p && (*p)->prio >= n->prio) p = key_less(n, *p) ? &(*p)->left : &(*p)->right;
    treap_split(*p, n, &n->left, &n->right);
    *p = n;
}

static void treap_remove(ts_block **root, ts_block *n) {
    ts_block **p = root;
    while (*p != n) p = key_less(n, *p) ? &(*p)->left : &(*p)->right;
    *p = treap_merge(n->left, n->right);
}

/* The first block with key >= (owner, size, 0): of `owner`'s pool the smallest free block with
 * size >= size, among equal sizes the lowest address (PyTorch's order); or a later pool's block. */
static ts_block *treap_lower_bound(ts_block *t, uintptr_t owner, size_t size) {
    ts_block *best = NULL;
    while (t) {
        if (t->owner > owner || (t->owner == owner && t->size >= size)) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

/* `owner`'s best fit for size, or NULL */
static ts_block *pool_best_fit(ts_block *t, uintptr_t owner, size_t size) {
    ts_block *b = treap_lower_bound(t, owner, size);
    return b && b->owner == owner ? b : NULL;
}

/* ------------------------------------------------------------------ block structs */
static ts_block *block_new(ts_allocator *a) {
    if (!a->spare) {
        slab *s = malloc(sizeof *s);
        if (!s) return NULL;
        s->next = a->slabs;
        a->slabs = s;
        for (int i = 0; i < SLAB_BLOCKS; i++) {
            s->blocks[i].right = a->spare;
            a->spare = &s->blocks[i];
        }
    }
    ts_block *b = a->spare;
    a->spare = b->right;
    /* xorshift32: treap priorities only need to look random */
    uint32_t x = a->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    a->rng = x;
    b->prio = x;
    b->left = b->right = NULL;
    return b;
}

static inline void block_recycle(ts_allocator *a, ts_block *b) {
    b->right = a->spare;
    a->spare = b;
}

/* The stream pool a free block joins. With per-stream pools (the hooks' stream_pools): the stream
 * it was allocated on (the first of its history), OWNER_MANY when too many streams used it, and 0
 * (no pool: anyone may take it at no cost) for fresh memory and after a device wait. */
#define OWNER_MANY UINTPTR_MAX /* never a stream id */
static uintptr_t free_owner(const ts_allocator *a, const ts_block *b) {
    if (!a->hooks || !a->hooks->stream_pools) return 0;
    if (b->streams_overflow) return OWNER_MANY;
    return b->nstreams ? b->streams[0] : 0;
}

static inline void free_insert(ts_allocator *a, ts_block *b) {
    b->owner = free_owner(a, b);
    b->left = b->right = NULL;
    treap_insert(&a->free_tree[b->pool], b);
}

/* ------------------------------------------------------------------ streams */
/* True when waiting for x also covers use y (the hooks' `covers`; without it only x == y). */
static bool covers(const ts_allocator *a, uintptr_t x, uintptr_t y) {
    return x == y || (a->hooks && a->hooks->covers && a->hooks->covers(a->index, x, y));
}

static void streams_add(const ts_allocator *a, ts_block *b, uintptr_t stream) {
    if (stream == 0) return; /* the host: its work is already done */
    for (int i = 0; i < b->nstreams; i++)
        if (covers(a, b->streams[i], stream)) return;
    int kept = 0; /* the uses the new one supersedes go */
    for (int i = 0; i < b->nstreams; i++)
        if (!covers(a, stream, b->streams[i])) b->streams[kept++] = b->streams[i];
    b->nstreams = (uint8_t)kept;
    if (b->nstreams < MAX_STREAMS)
        b->streams[b->nstreams++] = stream;
    else
        b->streams_overflow = true;
}

static void streams_merge(const ts_allocator *a, ts_block *into, const ts_block *from) {
    for (int i = 0; i < from->nstreams; i++) streams_add(a, into, from->streams[i]);
    into->streams_overflow |= from->streams_overflow;
}

static void streams_reset(const ts_allocator *a, ts_block *b, uintptr_t stream) {
    b->nstreams = 0;
    b->streams_overflow = false;
    streams_add(a, b, stream);
}

/* Every pending use in y's history is covered by one in x's. */
static bool history_covers(const ts_allocator *a, const ts_block *x, const ts_block *y) {
    if (y->streams_overflow && !x->streams_overflow) return false;
    for (int i = 0; i < y->nstreams; i++) {
        bool found = false;
        for (int j = 0; j < x->nstreams && !found; j++)
            found = covers(a, x->streams[j], y->streams[i]);
        if (!found) return false;
    }
    return true;
}

/* Free neighbours merge when no stream's queued work would pass to the other's memory: the same
 * history, or one of them unused. As PyTorch keeps a pool per stream: memory a side stream freed
 * never joins the default stream's, where the next copy would have to wait for the side stream's
 * whole queue (seen on an H100: a pinned copy stalled behind a side stream's matrix products). */
static bool histories_merge(const ts_allocator *a, const ts_block *x, const ts_block *y) {
    if (!a->hooks) return true;
    if ((x->nstreams == 0 && !x->streams_overflow) || (y->nstreams == 0 && !y->streams_overflow))
        return true;
    return history_covers(a, x, y) && history_covers(a, y, x);
}

/* b takes in its free next neighbour n (already out of the free tree): memory, links, history. */
static void absorb_next(ts_allocator *a, ts_block *b) {
    ts_block *n = b->next;
    streams_merge(a, b, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    block_recycle(a, n);
}

/* The waits that must come before b's memory is handed to `cur` (whatever the earlier users
 * queued), taken from b under the lock and done after it is dropped: a host wait (pinned memory)
 * must not stall every other allocation, and b is already out of the free tree. */
typedef struct reuse_waits {
    uintptr_t cur;
    uint8_t n;
    bool device; /* too many users remembered: wait for the whole device */
    uintptr_t from[MAX_STREAMS];
} reuse_waits;

static reuse_waits streams_take(const ts_allocator *a, ts_block *b, uintptr_t cur) {
    reuse_waits w = {.cur = cur, .device = b->streams_overflow};
    for (int i = 0; i < b->nstreams && !w.device; i++)
        if (b->streams[i] != cur) w.from[w.n++] = b->streams[i];
    streams_reset(a, b, cur);
    return w;
}

static void streams_wait(const ts_allocator *a, const reuse_waits *w) {
    if (w->device) {
        a->hooks->device_wait(a->index);
        return;
    }
    for (int i = 0; i < w->n; i++) a->hooks->stream_wait(a->index, w->from[i], w->cur);
}

/* The free block for `size` on stream `cur`: the best fit among cur's own blocks (no wait), else
 * among blocks no stream has pending work on, else (rather than more memory) the best fit of
 * another stream's pool, whose reuse makes cur wait for that stream. Preferring its own pool keeps
 * a stream from waiting for another's queue while memory of its own is free (seen on an H100:
 * copies on the default stream stalled behind a side stream's matrix products, because they were
 * handed blocks that stream had freed long before). Without stream pools there is one pool, 0. */
static ts_block *find_free(const ts_allocator *a, ts_block *tree, uintptr_t cur, size_t size) {
    ts_block *b = cur ? pool_best_fit(tree, cur, size) : NULL;
    if (!b) b = pool_best_fit(tree, 0, size);
    if (b || !a->hooks || !a->hooks->stream_pools) return b;
    /* each other pool's best fit (a descent per pool: streams are few); the smallest wins */
    for (ts_block *first = treap_lower_bound(tree, 1, 0); first;
         first = first->owner == OWNER_MANY ? NULL : treap_lower_bound(tree, first->owner + 1, 0)) {
        if (first->owner == cur) continue;
        ts_block *c = pool_best_fit(tree, first->owner, size);
        if (c && (!b || c->size < b->size)) b = c;
    }
    return b;
}

/* ------------------------------------------------------------------ sizes */
static inline size_t round_size(size_t n) {
    return n < MIN_BLOCK ? MIN_BLOCK : (n + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1);
}

static inline size_t segment_size(size_t rounded) {
    if (rounded <= SMALL_SIZE) return SMALL_BUFFER;
    if (rounded < MIN_LARGE) return LARGE_BUFFER;
    return (rounded + ROUND_LARGE - 1) & ~(ROUND_LARGE - 1);
}

void tsi_format_bytes(size_t n, char *buf, size_t len) {
    if (!buf || len == 0) return;
    if (n < KIB)
        snprintf(buf, len, "%zu B", n);
    else if (n < MIB)
        snprintf(buf, len, "%.2f KiB", (double)n / (double)KIB);
    else if (n < MIB * KIB)
        snprintf(buf, len, "%.2f MiB", (double)n / (double)MIB);
    else
        snprintf(buf, len, "%.2f GiB", (double)n / (double)(MIB * KIB));
}

/* ------------------------------------------------------------------ segments */
/* Collects the free blocks that span a whole segment into a list linked through `next` (NULL for
 * such blocks, and not a treap link, so the tree stays intact for the removals that follow). */
static void collect_whole(ts_block *t, ts_block **list) {
    while (t) {
        collect_whole(t->left, list);
        if (!t->prev && !t->next) {
            t->next = *list; /* each node is visited once, so its changed `next` is never read */
            *list = t;
        }
        t = t->right;
    }
}

/* A free block whose next neighbour is free too (kept apart by their histories), or NULL. */
static ts_block *find_split_free(ts_block *t) {
    while (t) {
        if (t->next && !t->next->allocated) return t;
        ts_block *l = find_split_free(t->left);
        if (l) return l;
        t = t->right;
    }
    return NULL;
}

/* After a wait for the whole device no history matters: neighbours kept apart merge, so that
 * segments free as a whole can go back to the driver. */
static void merge_all_free(ts_allocator *a) {
    for (int pool = 0; pool < 2; pool++) {
        ts_block **tree = &a->free_tree[pool];
        ts_block *b;
        while ((b = find_split_free(*tree)) != NULL) {
            treap_remove(tree, b);
            treap_remove(tree, b->next);
            absorb_next(a, b);
            b->nstreams = 0; /* the device wait covered every use */
            b->streams_overflow = false;
            free_insert(a, b);
        }
    }
}

static void release_cached(ts_allocator *a) {
    /* the driver may not take memory back while queued work still uses it */
    if (a->hooks && (a->free_tree[POOL_SMALL] || a->free_tree[POOL_LARGE])) {
        a->hooks->device_wait(a->index);
        merge_all_free(a);
    }
    for (int pool = 0; pool < 2; pool++) {
        ts_block *list = NULL;
        collect_whole(a->free_tree[pool], &list);
        while (list) {
            ts_block *b = list;
            list = b->next;
            treap_remove(&a->free_tree[pool], b);
            if (b->seg_prev)
                b->seg_prev->seg_next = b->seg_next;
            else
                a->segments = b->seg_next;
            if (b->seg_next) b->seg_next->seg_prev = b->seg_prev;
            a->be->raw_free(a->be, a->index, b->ptr, b->size);
            a->reserved -= b->size;
            block_recycle(a, b);
        }
    }
}

static ts_block *new_segment(ts_allocator *a, size_t size, int pool) {
    ts_block *b = block_new(a);
    if (!b) return NULL;
    void *p = a->be->raw_alloc(a->be, a->index, size);
    if (!p) {
        block_recycle(a, b);
        return NULL;
    }
    b->ptr = p;
    b->size = size;
    b->prev = b->next = NULL;
    b->pool = (uint8_t)pool;
    b->allocated = false;
    b->nstreams = 0; /* fresh memory: no queued work uses it */
    b->streams_overflow = false;
    b->frames = NULL;
    b->nframes = 0;
    b->ctx = NULL;
    b->seg_prev = NULL;
    b->seg_next = a->segments;
    if (a->segments) a->segments->seg_prev = b;
    a->segments = b;
    a->reserved += size;
    if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
    return b;
}

static size_t largest_free(const ts_block *t) {
    size_t m = 0;
    for (; t; t = t->right) {
        size_t l = largest_free(t->left);
        m = l > m ? l : m;
        m = t->size > m ? t->size : m;
    }
    return m;
}

/* PyTorch's message and more: what was asked, the device's capacity and free memory, what tensors
 * hold, what the cache holds unused and its largest free block (fragmentation). */
static void format_oom(ts_allocator *a, size_t nbytes, char *msg, size_t msg_len) {
    if (!msg || msg_len == 0) return;
    char req[32], alloc[32], cache[32], cap[32], fre[32], big[32], device[128];
    size_t free_b = 0, total_b = 0;
    if (a->be->memory_info) a->be->memory_info(a->be, a->index, &free_b, &total_b);
    size_t lf0 = largest_free(a->free_tree[POOL_SMALL]),
           lf1 = largest_free(a->free_tree[POOL_LARGE]);
    tsi_format_bytes(nbytes, req, sizeof req);
    tsi_format_bytes(a->allocated, alloc, sizeof alloc);
    tsi_format_bytes(a->reserved - a->allocated, cache, sizeof cache);
    tsi_format_bytes(lf0 > lf1 ? lf0 : lf1, big, sizeof big);
    if (total_b) {
        tsi_format_bytes(total_b, cap, sizeof cap);
        tsi_format_bytes(free_b, fre, sizeof fre);
        snprintf(device, sizeof device, "the device has a total capacity of %s of which %s is free",
                 cap, fre);
    } else {
        snprintf(device, sizeof device, "the device's capacity is unlimited");
    }
    snprintf(msg, msg_len,
             "tried to allocate %s; %s. Of the allocated memory %s is allocated by tensors, and %s "
             "is reserved by the caching allocator but unallocated (largest free cached block "
             "%s). If reserved but unallocated memory is large, ts_empty_cache() returns it",
             req, device, alloc, cache, big);
}

/* ------------------------------------------------------------------ public */
ts_allocator *tsi_allocator_new(const ts_backend *be, int index) {
    if (!be || !be->raw_alloc || !be->raw_free) return NULL;
    ts_allocator *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        return NULL;
    }
    a->be = be;
    a->index = index;
    a->rng = 0x9E3779B9u ^ (uint32_t)index;
    return a;
}

void tsi_allocator_destroy(ts_allocator *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    release_cached(a);
    pthread_mutex_unlock(&a->mu);
    for (slab *s = a->slabs, *n; s; s = n) {
        n = s->next;
        free(s);
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

ts_block *tsi_allocator_alloc(ts_allocator *a, size_t nbytes, char *msg, size_t msg_len) {
    /* TS_FAULT_ALLOC: every request counts, served from the cache or not */
    bool injected = tsi_fault_alloc_hit((tsi_fault_site)tsi_allocator_alloc);
    void **frames = NULL;
    int nframes = 0;
    alloc_ctx *ctx = NULL;
    if (atomic_load_explicit(&record_history, memory_order_relaxed)) {
        /* the backtrace without this function's own frame: the stack starts at its caller */
        void *fr[TS_ALLOC_HISTORY_DEPTH + 1];
        nframes = backtrace(fr, TS_ALLOC_HISTORY_DEPTH + 1) - 1;
        frames = nframes > 0 ? malloc((size_t)nframes * sizeof *frames) : NULL;
        if (frames)
            memcpy(frames, fr + 1, (size_t)nframes * sizeof *frames);
        else
            nframes = 0;
        ctx = ctx_ref(thread_ctx);
    }
    pthread_mutex_lock(&a->mu);
    if (nbytes > MAX_REQUEST || injected) goto oom;
    size_t size = round_size(nbytes);
    int pool = size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
    uintptr_t cur = a->hooks ? a->hooks->current_stream(a->index) : 0;

    ts_block *b = find_free(a, a->free_tree[pool], cur, size);
    if (b) {
        treap_remove(&a->free_tree[pool], b);
    } else {
        size_t seg = segment_size(size);
        b = new_segment(a, seg, pool);
        /* A device smaller than a 20 MiB segment (a small sim device) may still hold the request
         * itself; PyTorch never meets this on a real GPU. Tried before flushing the cache. */
        if (!b && seg > size) b = new_segment(a, size, pool);
        if (!b) {
            release_cached(a);
            b = new_segment(a, seg, pool);
            if (!b && seg > size) b = new_segment(a, size, pool);
        }
        if (!b) goto oom;
    }

    size_t rest = b->size - size;
    if (pool == POOL_SMALL ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {
        ts_block *r = block_new(a);
        if (r) { /* no struct for the remainder: hand out the whole block instead */
            r->ptr = b->ptr + size;
            r->size = rest;
            r->pool = b->pool;
            r->allocated = false;
            r->prev = b;
            r->next = b->next;
            r->nstreams = b->nstreams; /* the remainder keeps its history */
            r->streams_overflow = b->streams_overflow;
            r->frames = NULL;
            r->nframes = 0;
            r->ctx = NULL;
            memcpy(r->streams, b->streams, sizeof r->streams);
            if (b->next) b->next->prev = r;
            b->next = r;
            b->size = size;
            free_insert(a, r);
        }
    }
    reuse_waits waits = {0};
    if (a->hooks) waits = streams_take(a, b, cur);
    b->allocated = true;
    b->frames = frames;
    b->nframes = nframes;
    b->ctx = ctx;
    a->allocated += b->size;
    if (a->allocated > a->peak_allocated) a->peak_allocated = a->allocated;
    a->alloc_count++;
    pthread_mutex_unlock(&a->mu);
    if (a->hooks) streams_wait(a, &waits);
    return b;

oom:
    a->oom_count++;
    format_oom(a, nbytes, msg, msg_len);
    pthread_mutex_unlock(&a->mu);
    free(frames);
    ctx_unref(ctx);
    void (*hook)(void) = atomic_load(&oom_hook);
    if (hook) hook();
    if (injected && msg && msg_len > 0) {
        size_t used = strlen(msg);
        snprintf(msg + used, msg_len - used, " (failure injected by TS_FAULT_ALLOC)");
    }
    return NULL;
}

void tsi_allocator_release(ts_allocator *a, ts_block *b) {
    if (!b) return;
    /* the releasing thread's stream may have used the block last (outside the lock: a TLS read) */
    uintptr_t cur = a->hooks ? a->hooks->current_stream(a->index) : 0;
    pthread_mutex_lock(&a->mu);
    void **frames = b->frames;
    alloc_ctx *ctx = b->ctx;
    b->frames = NULL;
    b->nframes = 0;
    b->ctx = NULL;
    b->allocated = false;
    a->allocated -= b->size;
    streams_add(a, b, cur);
    ts_block **tree = &a->free_tree[b->pool];
    ts_block *n = b->next;
    if (n && !n->allocated && histories_merge(a, b, n)) {
        treap_remove(tree, n);
        absorb_next(a, b);
    }
    ts_block *p = b->prev;
    if (p && !p->allocated && histories_merge(a, p, b)) {
        treap_remove(tree, p);
        absorb_next(a, p);
        b = p;
    }
    free_insert(a, b);
    pthread_mutex_unlock(&a->mu);
    free(frames);
    ctx_unref(ctx);
}

void *tsi_block_ptr(const ts_block *b) { return b ? b->ptr : NULL; }
size_t tsi_block_size(const ts_block *b) { return b ? b->size : 0; }

void tsi_allocator_stats(ts_allocator *a, ts_mem_stats *out) {
    pthread_mutex_lock(&a->mu);
    memset(out, 0, sizeof *out);
    out->allocated = a->allocated;
    out->peak_allocated = a->peak_allocated;
    out->reserved = a->reserved;
    out->peak_reserved = a->peak_reserved;
    out->alloc_count = a->alloc_count;
    out->oom_count = a->oom_count;
    pthread_mutex_unlock(&a->mu);
}

void tsi_allocator_reset_peak(ts_allocator *a) {
    pthread_mutex_lock(&a->mu);
    a->peak_allocated = a->allocated;
    a->peak_reserved = a->reserved;
    pthread_mutex_unlock(&a->mu);
}

void tsi_allocator_empty_cache(ts_allocator *a) {
    pthread_mutex_lock(&a->mu);
    release_cached(a);
    pthread_mutex_unlock(&a->mu);
}

void tsi_allocator_set_hooks(ts_allocator *a, const ts_alloc_hooks *h) {
    if (a) a->hooks = h && h->current_stream && h->stream_wait && h->device_wait ? h : NULL;
}

void tsi_allocator_record_stream(ts_allocator *a, ts_block *b, uintptr_t stream) {
    if (!a || !b || !a->hooks) return;
    pthread_mutex_lock(&a->mu);
    streams_add(a, b, stream);
    pthread_mutex_unlock(&a->mu);
}

void tsi_allocator_walk(ts_allocator *a, ts_alloc_walk_fn fn, void *ctx) {
    if (!a || !fn) return;
    pthread_mutex_lock(&a->mu);
    for (const ts_block *seg = a->segments; seg; seg = seg->seg_next) {
        size_t total = 0;
        for (const ts_block *b = seg; b; b = b->next) total += b->size;
        for (const ts_block *b = seg; b; b = b->next) {
            ts_alloc_block_info info = {
                .segment = seg->ptr,
                .segment_size = total,
                .small_pool = seg->pool == POOL_SMALL,
                .first_in_segment = b == seg,
                .ptr = b->ptr,
                .size = b->size,
                .allocated = b->allocated,
                .frames = (void *const *)b->frames,
                .nframes = b->nframes,
                .context = b->ctx ? b->ctx->text : NULL,
            };
            fn(ctx, &info);
        }
    }
    pthread_mutex_unlock(&a->mu);
}
