/* profiler_collect.c — a stopped session's events: gathered from the thread buffers, sorted, self
 * times and forward -> backward flows resolved; key averages. */
#include <stdlib.h>
#include <string.h>

#include "core/profiler_internal.h"

static int by_thread_time(const void *pa, const void *pb) {
    const ts_profile_event *a = pa, *b = pb;
    if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
    if (a->t0_ns != b->t0_ns) return a->t0_ns < b->t0_ns ? -1 : 1;
    if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
    return a->t1_ns > b->t1_ns ? -1 : a->t1_ns < b->t1_ns;
}

static int by_time(const void *pa, const void *pb) {
    const ts_profile_event *a = pa, *b = pb;
    if (a->t0_ns != b->t0_ns) return a->t0_ns < b->t0_ns ? -1 : 1;
    if (a->thread != b->thread) return a->thread < b->thread ? -1 : 1;
    return a->depth < b->depth ? -1 : a->depth > b->depth;
}

/* self = duration minus the durations of the events directly inside (same thread) */
static bool self_times(ts_profile_event *ev, size_t n) {
    size_t *stack = malloc((n ? n : 1) * sizeof *stack), top = 0;
    if (!stack) return false;
    for (size_t i = 0; i < n; i++) {
        ts_profile_event *e = &ev[i];
        e->self_ns = e->t1_ns - e->t0_ns;
        if (e->kind == TS_PROF_MEMORY) continue;
        while (top > 0) {
            ts_profile_event *p = &ev[stack[top - 1]];
            if (p->thread == e->thread && e->t0_ns >= p->t0_ns && e->t1_ns <= p->t1_ns) break;
            top--;
        }
        if (top > 0) ev[stack[top - 1]].self_ns -= e->t1_ns - e->t0_ns;
        stack[top++] = i;
    }
    free(stack);
    return true;
}

/* A node's address marks its forward op and its backward; addresses are reused once a node is
 * freed, so each backward pairs with the latest unpaired forward of its address, and each pair
 * gets an id of its own. Unpaired ends get none. */
static bool resolve_flows(ts_profile_event *ev, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint64_t *keys = calloc(cap, sizeof *keys);
    size_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    uint64_t next_id = 1;
    for (size_t i = 0; i < n; i++) {
        ts_profile_event *e = &ev[i];
        uint64_t k = e->flow;
        if (!k || (e->kind != TS_PROF_OP && e->kind != TS_PROF_BACKWARD)) {
            e->flow = 0;
            continue;
        }
        e->flow = 0;
        size_t h = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
        while (keys[h] && keys[h] != k) h = (h + 1) & (cap - 1);
        if (e->kind == TS_PROF_OP) {
            keys[h] = k; /* the latest forward of this address */
            vals[h] = i;
        } else if (keys[h] == k && vals[h] != SIZE_MAX) {
            ev[vals[h]].flow = e->flow = next_id++;
            vals[h] = SIZE_MAX; /* paired */
        }
    }
    free(keys);
    free(vals);
    return true;
}

ts_profile *tsi_prof_collect(tsi_prof_thread *threads, uint64_t gen, int64_t t0, int64_t t1) {
    size_t total = 0;
    int64_t dropped = 0;
    for (tsi_prof_thread *t = threads; t; t = t->next)
        if (t->gen == gen) total += atomic_load_explicit(&t->n, memory_order_acquire);
    ts_profile *p = calloc(1, sizeof *p);
    ts_profile_event *ev = malloc((total ? total : 1) * sizeof *ev);
    if (!p || !ev) {
        free(p);
        free(ev);
        return NULL;
    }
    size_t k = 0;
    for (tsi_prof_thread *t = threads; t; t = t->next) {
        if (t->gen != gen) continue;
        size_t n = atomic_load_explicit(&t->n, memory_order_acquire);
        for (size_t i = 0; i < n && k < total; i++)
            ev[k++] = t->chunks[i / TSI_PROF_CHUNK]->ev[i % TSI_PROF_CHUNK];
        dropped += t->dropped;
    }
    qsort(ev, k, sizeof *ev, by_thread_time);
    if (!self_times(ev, k) || (qsort(ev, k, sizeof *ev, by_time), !resolve_flows(ev, k))) {
        free(ev);
        free(p);
        return NULL;
    }
    *p = (ts_profile){.ev = ev, .n = k, .t0_ns = t0, .t1_ns = t1, .dropped = dropped};
    return p;
}

void ts_profile_free(ts_profile *p) {
    if (!p) return;
    free(p->ev);
    free(p);
}

const ts_profile_event *ts_profile_events(const ts_profile *p, size_t *n_out) {
    if (n_out) *n_out = p ? p->n : 0;
    if (!p) tsi_error_set(TS_ERR_ARG, "profile_events: profile is NULL");
    return p ? p->ev : NULL;
}

int64_t ts_profile_key_averages(const ts_profile *p, bool by_shape, ts_profile_stat *out,
                                int64_t cap) {
    if (!p || cap < 0 || (cap > 0 && !out))
        return tsi_error_set(TS_ERR_ARG, "profile_key_averages: %s",
                             !p ? "profile is NULL" : "bad output buffer"),
               -1;
    /* rows in order of first appearance; a linear search per distinct key is fine for the few
     * hundred names of a step, and a hash would only matter for many more */
    ts_profile_stat *rows = NULL;
    int64_t n = 0, cap_rows = 0;
    for (size_t i = 0; i < p->n; i++) {
        const ts_profile_event *e = &p->ev[i];
        if (e->kind == TS_PROF_MEMORY) continue;
        int64_t r = 0;
        for (; r < n; r++)
            if (rows[r].kind == e->kind && !strcmp(rows[r].name, e->name) &&
                (!by_shape || !strcmp(rows[r].shape, e->shape)))
                break;
        if (r == n) {
            if (n == cap_rows) {
                int64_t c = cap_rows ? 2 * cap_rows : 64;
                ts_profile_stat *g = realloc(rows, (size_t)c * sizeof *g);
                if (!g) {
                    free(rows);
                    return tsi_error_set(TS_ERR_OOM, "profile_key_averages: out of host memory"),
                           -1;
                }
                rows = g;
                cap_rows = c;
            }
            memset(&rows[n], 0, sizeof rows[n]);
            memcpy(rows[n].name, e->name, sizeof rows[n].name);
            if (by_shape) memcpy(rows[n].shape, e->shape, sizeof rows[n].shape);
            rows[n].kind = e->kind;
            n++;
        }
        int64_t d = e->t1_ns - e->t0_ns;
        rows[r].calls++;
        rows[r].total_ns += d;
        rows[r].self_ns += e->self_ns;
        if (d > rows[r].max_ns) rows[r].max_ns = d;
        rows[r].bytes += e->bytes;
    }
    if (n > 0 && cap > 0) memcpy(out, rows, (size_t)(n < cap ? n : cap) * sizeof *out);
    free(rows);
    return n;
}
