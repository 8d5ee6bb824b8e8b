/* capture.c — captured steps (include/tessera/graph.h, docs/CAPTURE.md): the thread's capture, the
 * list of recorded kernel calls and its replay, and the graph's hold on its memory. The recording
 * backend itself is capture_record.c. */
#include "core/capture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/internal.h"

/* A block the graph holds. IN_USE: a live storage's (allocated during the capture); FREE: kept
 * for the graph with no storage on it, reusable by a later allocation of the same capture (the
 * replay runs the calls in the order they were recorded, so a block released at point k of the
 * step and taken again after it is used as the eager step used it); CONST: values copied from the
 * host at capture, which each replay copies again (never reused, given back with the graph);
 * GONE: given back. */
typedef enum { HELD_IN_USE, HELD_FREE, HELD_CONST, HELD_GONE } held_state;
typedef struct held_block {
    ts_allocator *alloc;
    ts_block *block;
    size_t size;
    held_state state;
} held_block;

struct tsi_capture_pool {
    atomic_int refs;         /* the graph (while it lives) + each storage allocated in it */
    atomic_bool graph_alive; /* false once ts_graph_free ran: blocks go back as they come */
    atomic_bool broken;      /* a block went back for want of room to keep it: no replay */
    ts_device dev;
    pthread_mutex_t lock; /* storages may be released on any thread */
    held_block *blocks;   /* slots never move nor shrink while the pool lives */
    size_t n, cap;
    size_t reused; /* allocations served from FREE blocks during the capture */
};

typedef struct recorded_call {
    tsi_replay_fn run;
    int index;
    void *args;
} recorded_call;

struct ts_graph {
    ts_device dev;
    const ts_backend *real;
    tsi_capture_pool *pool;
    recorded_call *calls;
    int64_t n, cap;
    ts_storage *
        *written;       /* storages the step changes in place (held): versions bumped per replay */
    void *device_graph; /* the backend's graph of the calls (graph_build), NULL: run the list */
    int64_t n_written, cap_written;
    bool ready;           /* the capture ended cleanly */
    uint64_t rng_span;    /* Philox counters the recorded draws use, from 0 */
    uint64_t replay_seed; /* during a replay: the generator's seed and the span's base */
    uint64_t replay_base;
};

_Thread_local ts_graph *tsi_capture_graph;
static _Thread_local ts_graph *replaying; /* the graph this thread replays now */

/* ------------------------------------------------------------------ the pool */
static void pool_give_back(tsi_capture_pool *p) { /* FREE and CONST; IN_USE ones wait */
    for (size_t i = 0; i < p->n; i++)
        if (p->blocks[i].state == HELD_FREE || p->blocks[i].state == HELD_CONST) {
            tsi_allocator_release(p->blocks[i].alloc, p->blocks[i].block);
            p->blocks[i].state = HELD_GONE;
        }
}

static void pool_drop(tsi_capture_pool *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    pool_give_back(p);
    free(p->blocks);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* a new slot (lock held): -1 when the list cannot grow */
static int64_t pool_append(tsi_capture_pool *p, ts_allocator *a, ts_block *b, held_state st) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        held_block *nb = realloc(p->blocks, cap * sizeof *nb);
        if (!nb) return -1;
        p->blocks = nb, p->cap = cap;
    }
    p->blocks[p->n] = (held_block){a, b, tsi_block_size(b), st};
    return (int64_t)p->n++;
}

/* the capture's pool on dev, NULL when this thread does not capture there */
static tsi_capture_pool *capture_pool_on(ts_device dev) {
    ts_graph *g = tsi_capture_graph;
    return g && tsi_device_eq(g->dev, dev) ? g->pool : NULL;
}

bool tsi_capture_pool_alloc(const char *op, ts_device dev, ts_allocator *a, size_t nbytes,
                            tsi_capture_pool **pool, int64_t *slot, ts_block **block) {
    tsi_capture_pool *p = capture_pool_on(dev);
    *pool = NULL, *slot = -1, *block = NULL;
    if (!p) return true;
    pthread_mutex_lock(&p->lock);
    /* best fit among the blocks released earlier in the capture, at most twice the request (a
     * small tensor does not pin a large block, as the caching allocator's own rounding) */
    int64_t best = -1;
    for (size_t i = 0; i < p->n; i++) {
        const held_block *h = &p->blocks[i];
        if (h->state != HELD_FREE || h->alloc != a || h->size < nbytes || h->size / 2 > nbytes)
            continue;
        if (best < 0 || h->size < p->blocks[best].size) best = (int64_t)i;
    }
    if (best >= 0) {
        p->blocks[best].state = HELD_IN_USE;
        p->reused++;
        *block = p->blocks[best].block;
        *slot = best;
    }
    pthread_mutex_unlock(&p->lock);
    if (best < 0) { /* a new block, noted before anyone uses it */
        char msg[TS_OOM_MSG_LEN];
        ts_block *b = tsi_allocator_alloc(a, nbytes, msg, sizeof msg);
        if (!b) {
            tsi_error_set(TS_ERR_OOM, "%s: out of memory on %s: %s", op, ts_device_str(dev), msg);
            return false;
        }
        pthread_mutex_lock(&p->lock);
        *slot = pool_append(p, a, b, HELD_IN_USE);
        pthread_mutex_unlock(&p->lock);
        if (*slot < 0) {
            tsi_allocator_release(a, b);
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory noting the capture's block", op);
            return false;
        }
        *block = b;
    }
    atomic_fetch_add(&p->refs, 1);
    *pool = p;
    return true;
}

bool tsi_capture_pool_take(tsi_capture_pool *pool, int64_t slot, ts_device dev, ts_allocator *a,
                           ts_block *b) {
    tsi_capture_pool *p = pool ? pool : capture_pool_on(dev);
    if (!p) return false; /* memory from before the capture, released while it records: */
    bool taken = false;   /* the graph's now, as its recorded calls may still use it */
    pthread_mutex_lock(&p->lock);
    if (slot >= 0) { /* the storage's own slot: FREE while the graph lives, else given back */
        bool alive = atomic_load(&p->graph_alive);
        p->blocks[slot].state = alive ? HELD_FREE : HELD_GONE;
        taken = alive;
    } else if (atomic_load(&p->graph_alive)) {
        /* no room for the record: the block goes back to the allocator (not leaked), and as a
         * replay would write memory now anyone's, the graph can no longer be replayed */
        if (pool_append(p, a, b, HELD_FREE) >= 0)
            taken = true;
        else
            atomic_store(&p->broken, true);
    }
    pthread_mutex_unlock(&p->lock);
    /* while its capture lasts, that breaks the capture (ts_graph_capture_end reports it) */
    ts_graph *g = tsi_capture_graph;
    if (atomic_load(&p->broken) && g && g->pool == p && !ts_error())
        tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory keeping the graph's blocks");
    if (pool) pool_drop(pool);
    return taken;
}

size_t tsi_capture_pool_reused(const ts_graph *g) { return g ? g->pool->reused : 0; }

void *tsi_capture_const(size_t nbytes) {
    ts_graph *g = tsi_capture_graph;
    if (!g) return NULL;
    tsi_capture_pool *p = g->pool;
    ts_allocator *a = tsi_allocator(g->dev);
    char msg[TS_OOM_MSG_LEN] = "no allocator";
    ts_block *b = a ? tsi_allocator_alloc(a, nbytes ? nbytes : 1, msg, sizeof msg) : NULL;
    if (!b) {
        if (!ts_error())
            tsi_error_set(TS_ERR_OOM,
                          "graph capture: out of memory on %s for a value copied from the host: %s",
                          ts_device_str(g->dev), msg);
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    const int64_t slot = pool_append(p, a, b, HELD_CONST);
    pthread_mutex_unlock(&p->lock);
    if (slot < 0) {
        tsi_allocator_release(a, b);
        if (!ts_error())
            tsi_error_set(TS_ERR_OOM,
                          "graph capture: out of host memory noting the capture's block");
        return NULL;
    }
    return tsi_block_ptr(b);
}

/* ------------------------------------------------------------------ capture */
void tsi_capture_note_write(ts_storage *s) {
    ts_graph *g = tsi_capture_graph;
    if (!g || !tsi_device_eq(g->dev, s->device)) return; /* other devices run now, eagerly */
    for (int64_t i = g->n_written - 1; i >= 0; i--)
        if (g->written[i] == s) return;
    if (g->n_written == g->cap_written) {
        int64_t cap = g->cap_written ? 2 * g->cap_written : 64;
        ts_storage **w = realloc(g->written, (size_t)cap * sizeof *w);
        if (!w) {
            if (!ts_error())
                tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory noting a write");
            return;
        }
        g->written = w, g->cap_written = cap;
    }
    tsi_storage_retain(s);
    g->written[g->n_written++] = s;
}

bool tsi_capturing_on(ts_device dev) {
    return tsi_capture_graph && tsi_device_eq(tsi_capture_graph->dev, dev);
}

const ts_backend *tsi_capture_redirect(const ts_backend *real, ts_device dev) {
    ts_graph *g = tsi_capture_graph;
    if (!g || !real || !tsi_device_eq(g->dev, dev)) return real;
    return tsi_capture_backend_of(real);
}

ts_graph *tsi_capture_pause(void) {
    ts_graph *g = tsi_capture_graph;
    tsi_capture_graph = NULL;
    return g;
}

void tsi_capture_resume(ts_graph *g) { tsi_capture_graph = g; }

bool tsi_capture_rng_reserve(ts_device dev, uint64_t n, uint64_t *offset) {
    ts_graph *g = tsi_capture_graph;
    if (!g || !tsi_device_eq(g->dev, dev)) return false;
    *offset = g->rng_span;
    g->rng_span += (n + 3) & ~(uint64_t)3; /* blocks of 4, as the generator's */
    return true;
}

void tsi_capture_rng_at(uint64_t rel, uint64_t *seed, uint64_t *offset) {
    *seed = replaying ? replaying->replay_seed : 0;
    *offset = (replaying ? replaying->replay_base : 0) + rel;
}

void tsi_capture_refuse(const char *op, const char *what) {
    ts_graph *g = tsi_capture_graph;
    if (ts_error()) return;
    tsi_error_set(TS_ERR_STATE,
                  "%s: %s while capturing on %s; the capture is broken (read values after "
                  "ts_graph_replay, copy new inputs in before it)",
                  op, what, g ? ts_device_str(g->dev) : "a device");
}

bool tsi_capture_append(tsi_replay_fn run, int index, void *args) {
    ts_graph *g = tsi_capture_graph;
    if (!g) {
        free(args);
        return false;
    }
    if (g->n == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 256;
        recorded_call *nc = realloc(g->calls, (size_t)cap * sizeof *nc);
        if (!nc) {
            free(args);
            if (!ts_error()) tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory");
            return false;
        }
        g->calls = nc;
        g->cap = cap;
    }
    g->calls[g->n++] = (recorded_call){run, index, args};
    return true;
}

ts_graph *ts_graph_capture_begin(ts_device dev, ts_graph_opts o) {
    tsi_init();
    if (ts_error()) return NULL;
    if (o.reserved)
        return tsi_error_set(TS_ERR_ARG, "graph_capture_begin: opts.reserved must be 0"), NULL;
    if (tsi_capture_graph)
        return tsi_error_set(TS_ERR_STATE,
                             "graph_capture_begin: this thread is already capturing on %s",
                             ts_device_str(tsi_capture_graph->dev)),
               NULL;
    dev = tsi_resolve_device(dev);
    if (!tsi_check_device("graph_capture_begin", dev)) return NULL;
    ts_graph *g = calloc(1, sizeof *g);
    tsi_capture_pool *p = calloc(1, sizeof *p);
    if (!g || !p || pthread_mutex_init(&p->lock, NULL)) {
        free(g);
        free(p);
        return tsi_error_set(TS_ERR_OOM, "graph_capture_begin: out of host memory"), NULL;
    }
    atomic_init(&p->refs, 1);
    atomic_init(&p->graph_alive, true);
    atomic_init(&p->broken, false);
    p->dev = dev;
    g->dev = dev;
    g->real = tsi_backend_for(dev.type);
    g->pool = p;
    tsi_capture_graph = g;
    return g;
}

/* the recorded calls in order, on the real backend */
static void run_calls(void *ctx) {
    const ts_graph *g = ctx;
    for (int64_t i = 0; i < g->n && !ts_error(); i++) {
        const recorded_call *c = &g->calls[i];
        c->run(g->real, c->index, c->args);
    }
}

ts_status ts_graph_capture_end(void) {
    ts_graph *g = tsi_capture_graph;
    if (!g)
        return ts_error() ? ts_error()
                          : tsi_error_set(TS_ERR_STATE, "graph_capture_end: not capturing");
    tsi_capture_graph = NULL;
    if (!ts_error() && g->n > 0 && g->real->graph_build) {
        /* the device's own graph of the calls (CUDA: a stream capture of them): the recorded
         * draws pass their offsets relative to the graph, to which each launch adds its base */
        ts_graph *outer = replaying;
        replaying = g;
        g->replay_seed = g->replay_base = 0;
        g->device_graph = g->real->graph_build(g->real, g->dev.index, run_calls, g);
        replaying = outer;
        if (!g->device_graph && !ts_error())
            tsi_error_set(TS_ERR_STATE, "graph_capture_end: the %s backend built no graph",
                          g->real->name);
    }
    g->ready = !ts_error();
    return ts_error();
}

ts_status ts_graph_replay(ts_graph *g) {
    if (ts_error()) return ts_error();
    if (!g) return tsi_error_set(TS_ERR_ARG, "graph_replay: graph is NULL");
    if (g == tsi_capture_graph)
        return tsi_error_set(TS_ERR_STATE, "graph_replay: the graph is still being captured");
    if (!g->ready)
        return tsi_error_set(TS_ERR_STATE,
                             "graph_replay: the capture of this graph failed; free it and capture "
                             "again");
    if (atomic_load(&g->pool->broken))
        return tsi_error_set(TS_ERR_OOM,
                             "graph_replay: a block of the graph went back to the allocator for "
                             "want of host memory to keep it; free the graph and capture again");
    /* this replay's random numbers: the next rng_span counters of the generator, as the eager
     * step would have reserved them */
    if (g->rng_span) tsi_rng_reserve(g->rng_span, &g->replay_seed, &g->replay_base);
    if (g->device_graph) {
        g->real->graph_launch(g->real, g->dev.index, g->device_graph, g->replay_seed,
                              g->replay_base);
    } else {
        ts_graph *outer = replaying;
        replaying = g;
        run_calls(g);
        replaying = outer;
    }
    /* what the eager step changed in place has a new version, so caches keyed on it (oneDNN's
     * reordered weights, the eval path's folded convolutions) do not serve the old values */
    for (int64_t i = 0; i < g->n_written; i++) atomic_fetch_add(&g->written[i]->version, 1);
    return ts_error();
}

void ts_graph_free(ts_graph *g) {
    if (!g) return;
    if (g == tsi_capture_graph) tsi_capture_graph = NULL; /* freed mid-capture: abandoned */
    /* waits for its launches in flight before the memory below goes back */
    if (g->device_graph) g->real->graph_destroy(g->real, g->dev.index, g->device_graph);
    for (int64_t i = 0; i < g->n; i++) free(g->calls[i].args);
    free(g->calls);
    for (int64_t i = 0; i < g->n_written; i++) tsi_storage_release(g->written[i]);
    free(g->written);
    tsi_capture_pool *p = g->pool;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->graph_alive, false);
    pool_give_back(p);
    pthread_mutex_unlock(&p->lock);
    pool_drop(p);
    free(g);
}

int64_t ts_graph_kernel_count(const ts_graph *g) { return g ? g->n : 0; }

bool ts_graph_is_capturing(void) { return tsi_capture_graph != NULL; }
