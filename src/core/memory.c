/* memory.c — one caching allocator per device (and one for pinned host memory), live-tensor
 * counts and the memory-statistics API. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/host_scratch.h"
#include "backend/cuda/cuda_bridge.h"
#include "backend/env_config.h"
#include "core/internal.h"
#include "core/pinned.h"

#define TSI_MAX_INDEX 64
#define TSI_TYPES     5 /* indexed by ts_device_type */

static _Atomic(ts_allocator *) allocators[TSI_TYPES][TSI_MAX_INDEX];
static _Atomic(ts_allocator *) pinned_allocator; /* page-locked host memory (CUDA) */
static atomic_int_fast64_t live[TSI_TYPES][TSI_MAX_INDEX];
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static bool slot_ok(ts_device d) {
    return d.type > TS_DEVICE_DEFAULT && d.type < TSI_TYPES && d.index >= 0 &&
           d.index < TSI_MAX_INDEX;
}

ts_allocator *tsi_allocator(ts_device d) {
    if (!slot_ok(d)) return NULL;
    ts_allocator *a = atomic_load_explicit(&allocators[d.type][d.index], memory_order_acquire);
    if (a) return a;
    pthread_mutex_lock(&create_lock);
    a = atomic_load(&allocators[d.type][d.index]);
    if (!a) {
        const ts_backend *be = tsi_backend_for(d.type);
        if (be) a = tsi_allocator_new(be, d.index);
        /* cuda work is asynchronous: blocks are reused in stream order */
        if (a && d.type == TS_CUDA) tsi_allocator_set_hooks(a, tsc_device_alloc_hooks());
        atomic_store_explicit(&allocators[d.type][d.index], a, memory_order_release);
    }
    pthread_mutex_unlock(&create_lock);
    return a;
}

/* The allocator of d if it exists (memory snapshots): NULL otherwise, never created. */
ts_allocator *tsi_allocator_peek(ts_device d) {
    return slot_ok(d) ? atomic_load_explicit(&allocators[d.type][d.index], memory_order_acquire)
                      : NULL;
}
ts_allocator *tsi_pinned_allocator_peek(void) { return atomic_load(&pinned_allocator); }

ts_allocator *tsi_cuda_allocator(int index) { return tsi_allocator(ts_cuda(index)); }

/* The pinned allocator exists once CUDA has a device; NULL otherwise ("pinned" is then a flag). */
static ts_allocator *pinned(void) {
    ts_allocator *a = atomic_load_explicit(&pinned_allocator, memory_order_acquire);
    if (a) return a;
    tsi_init();
    const ts_backend *be = tsc_pinned_backend();
    if (!be) return NULL;
    pthread_mutex_lock(&create_lock);
    a = atomic_load(&pinned_allocator);
    if (!a) {
        a = tsi_allocator_new(be, 0);
        /* a block an asynchronous copy still reads is not handed out again until it is done */
        if (a) tsi_allocator_set_hooks(a, tsc_pinned_alloc_hooks());
        atomic_store_explicit(&pinned_allocator, a, memory_order_release);
    }
    pthread_mutex_unlock(&create_lock);
    return a;
}

ts_allocator *tsi_pinned_allocator(void) { return pinned(); }

bool tsi_storage_pin(const char *op, ts_tensor *t) {
    ts_storage *s = t->storage;
    if (s->pinned) return true;
    ts_allocator *a = pinned();
    if (a) {
        char msg[TS_OOM_MSG_LEN];
        ts_block *b = tsi_allocator_alloc(a, s->nbytes, msg, sizeof msg);
        if (!b)
            return tsi_error_set(TS_ERR_OOM, "%s: out of pinned host memory: %s", op, msg), false;
        tsi_allocator_release(s->alloc, s->block);
        s->alloc = a;
        s->block = b;
        s->data = tsi_block_ptr(b);
    }
    s->pinned = true;
    return true;
}

void tsi_storage_record_stream(ts_tensor *t, uintptr_t stream) {
    ts_storage *s = t->storage;
    tsi_allocator_record_stream(s->alloc, s->block, stream);
}

ts_status ts_cuda_pinned_memory_stats(ts_mem_stats *out) {
    if (!out) return tsi_error_set(TS_ERR_ARG, "cuda_pinned_memory_stats: out is NULL");
    *out = (ts_mem_stats){0};
    ts_allocator *a = pinned();
    if (a) tsi_allocator_stats(a, out);
    return TS_OK;
}

void tsi_memory_drop_allocators(ts_device_type t) {
    pthread_mutex_lock(&create_lock);
    for (int i = 0; i < TSI_MAX_INDEX; i++) {
        ts_allocator *a = atomic_exchange(&allocators[t][i], NULL);
        if (a) tsi_allocator_destroy(a);
    }
    pthread_mutex_unlock(&create_lock);
}

/* Live-tensor counts. Each thread counts in a table of its own, with a plain load and store (its
 * only writer), instead of a locked add on shared counters for every tensor made and freed (6% of
 * a linear regression's step); readers sum the tables under a lock. A thread that ends folds its
 * table into `live`, which also takes the counts of threads without a table of their own (one
 * ending, or the key missing). A tensor made on one thread and freed on another counts +1 on the
 * first, -1 on the second: the sum is right. */
typedef struct live_table {
    atomic_int_fast64_t n[TSI_TYPES][TSI_MAX_INDEX];
    struct live_table *prev, *next;
    bool linked, closed;
} live_table;
static _Thread_local live_table my_live; /* in thread storage: nothing to allocate or fail */
static live_table *live_tables;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t live_key;
static pthread_once_t live_key_once = PTHREAD_ONCE_INIT;
static bool live_key_ok;

static void live_thread_exit(void *p) {
    live_table *t = p;
    pthread_mutex_lock(&live_lock);
    for (int k = 0; k < TSI_TYPES; k++)
        for (int i = 0; i < TSI_MAX_INDEX; i++)
            atomic_fetch_add_explicit(&live[k][i],
                                      atomic_load_explicit(&t->n[k][i], memory_order_relaxed),
                                      memory_order_relaxed);
    if (t->prev)
        t->prev->next = t->next;
    else
        live_tables = t->next;
    if (t->next) t->next->prev = t->prev;
    t->linked = false;
    t->closed = true;
    pthread_mutex_unlock(&live_lock);
}

static void live_key_init(void) {
    live_key_ok = pthread_key_create(&live_key, live_thread_exit) == 0;
}

static live_table *my_live_table(void) {
    live_table *t = &my_live;
    if (__builtin_expect(t->linked, 1)) return t;
    if (t->closed) return NULL;
    pthread_once(&live_key_once, live_key_init);
    if (!live_key_ok || pthread_setspecific(live_key, t) != 0) {
        t->closed = true;
        return NULL;
    }
    pthread_mutex_lock(&live_lock);
    t->prev = NULL;
    t->next = live_tables;
    if (live_tables) live_tables->prev = t;
    live_tables = t;
    t->linked = true;
    pthread_mutex_unlock(&live_lock);
    return t;
}

void tsi_live_tensors_add(ts_device d, int delta) {
    if (!slot_ok(d)) return;
    live_table *t = my_live_table();
    if (!t) {
        atomic_fetch_add_explicit(&live[d.type][d.index], delta, memory_order_relaxed);
        return;
    }
    atomic_int_fast64_t *c = &t->n[d.type][d.index];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

static int64_t live_sum(int type, int index) {
    pthread_mutex_lock(&live_lock);
    int64_t n = (int64_t)atomic_load(&live[type][index]);
    for (live_table *t = live_tables; t; t = t->next)
        n += (int64_t)atomic_load_explicit(&t->n[type][index], memory_order_relaxed);
    pthread_mutex_unlock(&live_lock);
    return n;
}

int64_t tsi_live_tensors(ts_device d) { return slot_ok(d) ? live_sum(d.type, d.index) : 0; }

static bool check_mem_device(const char *op, ts_device *d) {
    tsi_init();
    *d = tsi_resolve_device(*d);
    return tsi_check_device(op, *d);
}

ts_status ts_memory_stats(ts_device d, ts_mem_stats *out) {
    if (!out) return tsi_error_set(TS_ERR_ARG, "memory_stats: out is NULL");
    if (!check_mem_device("memory_stats", &d)) return ts_error();
    *out = (ts_mem_stats){0};
    ts_allocator *a = tsi_allocator(d);
    if (a) tsi_allocator_stats(a, out);
    out->live_tensors = tsi_live_tensors(d);
    return TS_OK;
}

ts_status ts_memory_reset_peak(ts_device d) {
    if (!check_mem_device("memory_reset_peak", &d)) return ts_error();
    ts_allocator *a = tsi_allocator(d);
    if (a) tsi_allocator_reset_peak(a);
    return TS_OK;
}

ts_status ts_empty_cache(ts_device d) {
    if (!check_mem_device("empty_cache", &d)) return ts_error();
    ts_allocator *a = tsi_allocator(d);
    if (a) tsi_allocator_empty_cache(a);
    /* the cpu's cache includes the page-locked one and the kernels' cached scratch buffers */
    ts_allocator *p = atomic_load_explicit(&pinned_allocator, memory_order_acquire);
    if (d.type == TS_CPU && p) tsi_allocator_empty_cache(p);
    if (d.type == TS_CPU) tsi_host_scratch_empty();
    return TS_OK;
}

ts_status ts_device_memory(ts_device d, size_t *free_bytes, size_t *total_bytes) {
    if (!check_mem_device("device_memory", &d)) return ts_error();
    const ts_backend *be = tsi_backend_for(d.type);
    size_t f = 0, t = 0;
    be->memory_info(be, d.index, &f, &t);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return TS_OK;
}

/* Debug builds report tensors still alive at exit (the user forgot a release or a scope). */
static void report_leaks(void) {
    for (int t = 1; t < TSI_TYPES; t++)
        for (int i = 0; i < TSI_MAX_INDEX; i++) {
            int64_t n = live_sum(t, i);
            if (n > 0)
                fprintf(stderr, "tessera: %lld tensor%s still alive at exit on %s\n", (long long)n,
                        n == 1 ? "" : "s", ts_device_str((ts_device){(ts_device_type)t, i}));
        }
}

void tsi_memory_init(void) {
#ifndef NDEBUG
    atexit(report_leaks);
#else
    if (tsi_env(TSI_ENV_REPORT_LEAKS)) atexit(report_leaks);
#endif
}
