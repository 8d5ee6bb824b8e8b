/* profiler_collect.c — a stopped session's events: gathered from the thread buffers, sorted, self
 * times and forward -> backward flows resolved; key averages. */
#include <stdio.h>
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
/* Self times: each span's time less that of the spans directly inside it. And the FLOPs of an
 * op inside an op that counts its own are zeroed: they are part of the outer op's (conv3d's
 * conv2d, a composition's matmul), so the totals count each product once. */
static bool nest(ts_profile_event *ev, size_t n) {
    size_t *stack = malloc((n ? n : 1) * sizeof *stack), top = 0;
    bool *counted = malloc((n ? n : 1) * sizeof *counted); /* the span or one around it counts */
    if (!stack || !counted) {
        free(stack);
        free(counted);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        ts_profile_event *e = &ev[i];
        e->self_ns = e->t1_ns - e->t0_ns;
        /* counters, and device time (its own track: not inside the host's spans) */
        if (e->kind == TS_PROF_MEMORY || e->kind == TS_PROF_KERNEL) continue;
        while (top > 0) {
            ts_profile_event *p = &ev[stack[top - 1]];
            if (p->thread == e->thread && e->t0_ns >= p->t0_ns && e->t1_ns <= p->t1_ns) break;
            top--;
        }
        if (top > 0) ev[stack[top - 1]].self_ns -= e->t1_ns - e->t0_ns;
        if (top > 0 && counted[top - 1]) e->flops = 0;
        counted[top] = e->flops > 0 || (top > 0 && counted[top - 1]);
        stack[top++] = i;
    }
    free(stack);
    free(counted);
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

/* an event and where its inputs are (gathered order), sorted together */
typedef struct rec {
    ts_profile_event ev; /* first: the comparators take a rec as its event */
    size_t src;
} rec;

/* the recs' events into ev (contiguous, for self_times and resolve_flows) */
static void events_of(const rec *r, size_t n, ts_profile_event *ev) {
    for (size_t i = 0; i < n; i++) ev[i] = r[i].ev;
}

ts_profile *tsi_prof_collect(tsi_prof_thread *threads, uint64_t gen, int64_t t0, int64_t t1,
                             bool with_flops) {
    size_t total = 0;
    int64_t dropped = 0;
    bool any_in = false;
    for (tsi_prof_thread *t = threads; t; t = t->next) {
        if (t->gen != gen) continue;
        size_t n = atomic_load_explicit(&t->n, memory_order_acquire);
        total += n + t->n_km;
        for (size_t c = 0; c * TSI_PROF_CHUNK < n; c++) any_in |= t->chunks[c]->in != NULL;
    }
    const size_t cnt = total ? total : 1;
    ts_profile *p = calloc(1, sizeof *p);
    ts_profile_event *ev = malloc(cnt * sizeof *ev);
    rec *r = malloc(cnt * sizeof *r);
    tsi_prof_inputs *gin = any_in ? calloc(cnt, sizeof *gin) : NULL,
                    *in = any_in ? malloc(cnt * sizeof *in) : NULL;
    if (!p || !ev || !r || (any_in && (!gin || !in))) goto fail;
    size_t k = 0;
    for (tsi_prof_thread *t = threads; t; t = t->next) {
        if (t->gen != gen) continue;
        size_t n = atomic_load_explicit(&t->n, memory_order_acquire);
        for (size_t i = 0; i < n && k < total; i++, k++) {
            const tsi_prof_chunk *c = t->chunks[i / TSI_PROF_CHUNK];
            r[k] = (rec){c->ev[i % TSI_PROF_CHUNK], k};
            if (gin && c->in) gin[k] = c->in[i % TSI_PROF_CHUNK];
        }
        dropped += t->dropped;
        for (size_t i = 0; i < t->n_km && k < total; i++) {
            if (!tsi_prof_kernel_times(&t->km[i], gen)) {
                dropped++;
                continue;
            }
            r[k] = (rec){t->km[i].ev, k};
            k++;
        }
        t->n_km = 0;
    }
    qsort(r, k, sizeof *r, by_thread_time);
    events_of(r, k, ev);
    for (size_t i = 0; with_flops && i < k; i++)
        tsi_prof_flops(&ev[i], gin ? &gin[r[i].src] : NULL);
    if (!nest(ev, k)) goto fail;
    for (size_t i = 0; i < k; i++) {
        r[i].ev.self_ns = ev[i].self_ns;
        r[i].ev.flops = ev[i].flops, r[i].ev.op_bytes = ev[i].op_bytes;
    }
    qsort(r, k, sizeof *r, by_time);
    events_of(r, k, ev);
    for (size_t i = 0; in && i < k; i++) in[i] = gin[r[i].src];
    if (!resolve_flows(ev, k)) goto fail;
    free(r);
    free(gin);
    *p = (ts_profile){.ev = ev, .n = k, .t0_ns = t0, .t1_ns = t1, .dropped = dropped, .in = in};
    return p;
fail:
    free(p);
    free(ev);
    free(r);
    free(gin);
    free(in);
    return NULL;
}

void ts_profile_free(ts_profile *p) {
    if (!p) return;
    free(p->ev);
    free(p->in);
    free(p);
}

const char *ts_profile_event_input_dims(const ts_profile *p, size_t i) {
    return p && p->in && i < p->n ? p->in[i].dims : "";
}

const char *ts_profile_event_input_types(const ts_profile *p, size_t i) {
    return p && p->in && i < p->n ? p->in[i].types : "";
}

const ts_profile_event *ts_profile_events(const ts_profile *p, size_t *n_out) {
    if (n_out) *n_out = p ? p->n : 0;
    if (!p) tsi_error_set(TS_ERR_ARG, "profile_events: profile is NULL");
    return p ? p->ev : NULL;
}

/* the rows grouped by kind and name, and by the result's shape (KEY_SHAPE) or the input dims
 * (KEY_INPUTS); *rows_out (malloc'd, the caller frees) in order of first appearance */
enum { KEY_NAME, KEY_SHAPE, KEY_INPUTS };
static int64_t key_averages(const ts_profile *p, int key, ts_profile_input_stat **rows_out) {
    /* rows in order of first appearance; a linear search per distinct key is fine for the few
     * hundred names of a step, and a hash would only matter for many more */
    ts_profile_input_stat *rows = NULL;
    int64_t n = 0, cap_rows = 0;
    for (size_t i = 0; i < p->n; i++) {
        const ts_profile_event *e = &p->ev[i];
        if (e->kind == TS_PROF_MEMORY) continue;
        const char *dims = key == KEY_INPUTS ? ts_profile_event_input_dims(p, i) : "";
        int64_t r = 0;
        for (; r < n; r++)
            if (rows[r].stat.kind == e->kind && !strcmp(rows[r].stat.name, e->name) &&
                (key != KEY_SHAPE || !strcmp(rows[r].stat.shape, e->shape)) &&
                (key != KEY_INPUTS || !strcmp(rows[r].input_dims, dims)))
                break;
        if (r == n) {
            if (n == cap_rows) {
                int64_t c = cap_rows ? 2 * cap_rows : 64;
                ts_profile_input_stat *g = realloc(rows, (size_t)c * sizeof *g);
                if (!g) {
                    free(rows);
                    return tsi_error_set(TS_ERR_OOM, "profile_key_averages: out of host memory"),
                           -1;
                }
                rows = g;
                cap_rows = c;
            }
            memset(&rows[n], 0, sizeof rows[n]);
            memcpy(rows[n].stat.name, e->name, sizeof rows[n].stat.name);
            if (key == KEY_SHAPE) memcpy(rows[n].stat.shape, e->shape, sizeof rows[n].stat.shape);
            snprintf(rows[n].input_dims, sizeof rows[n].input_dims, "%s", dims);
            rows[n].stat.kind = e->kind;
            n++;
        }
        ts_profile_stat *st = &rows[r].stat;
        int64_t d = e->t1_ns - e->t0_ns;
        st->calls++;
        st->total_ns += d;
        st->self_ns += e->self_ns;
        if (d > st->max_ns) st->max_ns = d;
        st->bytes += e->bytes;
        st->flops += e->flops;
    }
    *rows_out = rows;
    return n;
}

int64_t ts_profile_key_averages(const ts_profile *p, bool by_shape, ts_profile_stat *out,
                                int64_t cap) {
    if (!p || cap < 0 || (cap > 0 && !out))
        return tsi_error_set(TS_ERR_ARG, "profile_key_averages: %s",
                             !p ? "profile is NULL" : "bad output buffer"),
               -1;
    ts_profile_input_stat *rows = NULL;
    int64_t n = key_averages(p, by_shape ? KEY_SHAPE : KEY_NAME, &rows);
    for (int64_t i = 0; i < n && i < cap; i++) out[i] = rows[i].stat;
    free(rows);
    return n;
}

int64_t ts_profile_key_averages_by_input(const ts_profile *p, ts_profile_input_stat *out,
                                         int64_t cap) {
    if (!p || cap < 0 || (cap > 0 && !out))
        return tsi_error_set(TS_ERR_ARG, "profile_key_averages_by_input: %s",
                             !p ? "profile is NULL" : "bad output buffer"),
               -1;
    ts_profile_input_stat *rows = NULL;
    int64_t n = key_averages(p, KEY_INPUTS, &rows);
    if (n > 0 && cap > 0) memcpy(out, rows, (size_t)(n < cap ? n : cap) * sizeof *out);
    free(rows);
    return n;
}
