/* profiler.c — recording: per-thread event buffers (no lock per event), the open-span stack of
 * each thread, and start / stop. Collection and the queries: profiler_collect.c; the Chrome trace:
 * profiler_chrome.c. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_bridge.h"
#include "core/profiler_internal.h"

atomic_bool tsi_prof_on;
static ts_profiler_opts prof_opts;
static atomic_uint_fast64_t prof_gen;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static tsi_prof_thread *reg_head;
static int reg_next_id;
static pthread_key_t reg_key;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static ts_profile *last_profile;
static _Atomic int64_t session_t0; /* read by tsi_prof_collective in any thread */
static atomic_uint_fast64_t next_correlation = 1;

#define MAX_OPEN 64
typedef struct open_span {
    ts_profile_event ev;
    int scope_depth;
    bool explicit_span; /* closed by tsi_prof_span_end, not by tsi_own */
    const void *node;   /* a backward node, or the forward node an op recorded */
    bool has_in;        /* open_in[its index] holds its inputs */
    bool marked;        /* its device time is measured: m0 marked where it started */
    uint64_t m0;
} open_span;
static _Thread_local tsi_prof_thread *me;
static _Thread_local open_span open_stack[MAX_OPEN];
static _Thread_local int n_open, n_lost_open;
static _Thread_local bool busy; /* the profiler's own calls into the library record nothing */
/* the session's options, read once a session (after its gen: ts_profiler_start writes them
 * before it publishes the gen) */
static _Thread_local ts_profiler_opts my_opts;
/* record_shapes: the inputs of the open spans (MAX_OPEN, allocated on first use), and those
 * tsi_check_input saw for the op about to begin (pend_on: some, of op pend_op; the lists lack
 * their "]") */
static _Thread_local tsi_prof_inputs *open_in;
static _Thread_local bool pend_on;
static _Thread_local char pend_op[48];
static _Thread_local tsi_prof_inputs pend;
static _Thread_local int pend_n;
static _Thread_local size_t pend_ld, pend_lt; /* strlen of pend.dims, pend.types */
static _Thread_local bool pend_full;

int64_t tsi_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* runs in the ending thread: its buffer is freed at the next start, its open_in now */
static void thread_gone(void *p) {
    free(open_in);
    open_in = NULL;
    /* its device marks are read at the stop like the others' (the buffer stays until then) */
    atomic_store(&((tsi_prof_thread *)p)->dead, true);
}
static void reg_init(void) { pthread_key_create(&reg_key, thread_gone); }

/* This thread's buffer for the current session (reset on first use in a session). */
static tsi_prof_thread *thread_buf(void) {
    uint64_t gen = atomic_load_explicit(&prof_gen, memory_order_acquire);
    if (me && me->gen == gen) return me;
    pthread_once(&reg_once, reg_init);
    if (!me) {
        tsi_prof_thread *t = calloc(1, sizeof *t);
        if (!t) return NULL;
        pthread_mutex_lock(&reg_mu);
        t->id = reg_next_id++;
        t->next = reg_head;
        reg_head = t;
        pthread_mutex_unlock(&reg_mu);
        pthread_setspecific(reg_key, t);
        me = t;
        n_open = n_lost_open = 0;
    }
    /* a new session: what this thread recorded before was collected (or dropped) at its stop */
    pthread_mutex_lock(&reg_mu);
    atomic_store_explicit(&me->n, 0, memory_order_relaxed);
    tsi_prof_kmarks_drop(me);
    me->gen = gen;
    my_opts = prof_opts;
    pthread_mutex_unlock(&reg_mu);
    n_open = n_lost_open = 0;
    return me;
}

static void append(const ts_profile_event *e, const tsi_prof_inputs *in) {
    tsi_prof_thread *t = thread_buf();
    if (!t) return;
    size_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
    size_t ci = n / TSI_PROF_CHUNK;
    if (ci >= t->n_chunks) {
        if (ci >= TSI_PROF_MAX_CHUNKS) {
            t->dropped++;
            return;
        }
        tsi_prof_chunk *c = malloc(sizeof *c);
        if (!c) {
            t->dropped++;
            return;
        }
        c->in = NULL;
        t->chunks[t->n_chunks++] = c;
    }
    tsi_prof_chunk *c = t->chunks[ci];
    c->ev[n % TSI_PROF_CHUNK] = *e;
    c->ev[n % TSI_PROF_CHUNK].thread = t->id;
    if (in && !c->in) c->in = calloc(TSI_PROF_CHUNK, sizeof *c->in); /* NULL: none kept */
    if (c->in) { /* the chunk may hold a former session's inputs */
        tsi_prof_inputs *slot = &c->in[n % TSI_PROF_CHUNK];
        if (in)
            *slot = *in;
        else
            slot->dims[0] = slot->types[0] = '\0';
    }
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
}

static void memory_sample(ts_device d, int64_t at) {
    if (!my_opts.profile_memory || d.type == TS_DEVICE_DEFAULT) return;
    ts_mem_stats st;
    ts_status pending = ts_error();
    if (ts_memory_stats(d, &st) != TS_OK) {
        if (pending == TS_OK) ts_error_clear();
        return;
    }
    ts_profile_event e = {.kind = TS_PROF_MEMORY,
                          .device = d,
                          .t0_ns = at,
                          .t1_ns = at,
                          .bytes = (int64_t)st.allocated};
    snprintf(e.name, sizeof e.name, "allocated");
    append(&e, NULL);
}

static open_span *push(ts_profile_kind kind, const char *name, ts_device d, bool explicit_span) {
    if (!thread_buf()) return NULL;
    if (n_open == MAX_OPEN) {
        n_lost_open++;
        return NULL;
    }
    open_span *s = &open_stack[n_open];
    memset(s, 0, sizeof *s);
    s->ev.kind = kind;
    snprintf(s->ev.name, sizeof s->ev.name, "%s", name ? name : "?");
    s->ev.device = d;
    s->ev.depth = n_open;
    if (d.type == TS_CUDA) s->ev.stream = (uint64_t)tsc_current_stream_id(d.index);
    s->scope_depth = ts_scope_depth();
    s->explicit_span = explicit_span;
    n_open++;
    s->ev.t0_ns = tsi_prof_now();
    /* an op on a sim or cuda device that no other op encloses: its device time is marked */
    bool outermost = kind == TS_PROF_OP && (d.type == TS_SIM || d.type == TS_CUDA);
    for (int i = 0; outermost && i < n_open - 1; i++)
        outermost = open_stack[i].ev.kind != TS_PROF_OP;
    if (outermost && (s->m0 = tsi_prof_kernel_mark(d, me->gen, s->ev.t0_ns)) != 0) {
        s->marked = true;
        s->ev.correlation = atomic_fetch_add_explicit(&next_correlation, 1, memory_order_relaxed);
    }
    return s;
}

/* The device-time span of an op that ends now (its end marked), kept for the stop. */
static void kernel_span(const open_span *s, int64_t at) {
    const uint64_t m1 = tsi_prof_kernel_mark(s->ev.device, me->gen, at);
    if (me->n_km == me->cap_km) {
        size_t cap = me->cap_km ? 2 * me->cap_km : 256;
        tsi_prof_kmark *g = realloc(me->km, cap * sizeof *g);
        if (!g) {
            if (s->ev.device.type == TS_CUDA) tsc_prof_mark_free(s->m0), tsc_prof_mark_free(m1);
            me->dropped++;
            return;
        }
        me->km = g, me->cap_km = cap;
    }
    tsi_prof_kmark *k = &me->km[me->n_km++];
    memset(k, 0, sizeof *k);
    k->ev.kind = TS_PROF_KERNEL;
    memcpy(k->ev.name, s->ev.name, sizeof k->ev.name);
    k->ev.device = s->ev.device;
    k->ev.stream = s->ev.stream;
    k->ev.thread = me->id;
    k->ev.correlation = s->ev.correlation;
    k->m0 = s->m0, k->m1 = m1;
}

static void close_top(int64_t at) {
    open_span *s = &open_stack[--n_open];
    s->ev.t1_ns = at;
    if (s->marked) kernel_span(s, at);
    append(&s->ev, s->has_in ? &open_in[n_open] : NULL);
    if (s->ev.kind == TS_PROF_OP || s->ev.kind == TS_PROF_BACKWARD) memory_sample(s->ev.device, at);
}

/* n in decimal at p (no terminator): its length. snprintf costs most of record_shapes. */
static size_t put_i64(char *p, int64_t n) {
    char tmp[24];
    size_t k = 0;
    uint64_t u = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
    do tmp[k++] = (char)('0' + u % 10);
    while (u /= 10);
    size_t len = 0;
    if (n < 0) p[len++] = '-';
    while (k) p[len++] = tmp[--k];
    return len;
}

/* "[2, 3] float32" */
static void shape_of(char shape[64], const ts_tensor *t) {
    char *p = shape, *end = p + 64;
    p += snprintf(p, (size_t)(end - p), "[");
    for (int i = 0; i < t->shape.ndim && p < end; i++)
        p += snprintf(p, (size_t)(end - p), "%s%lld", i ? ", " : "", (long long)t->shape.dims[i]);
    if (p < end) snprintf(p, (size_t)(end - p), "] %s", ts_dtype_name(t->dtype));
}

void tsi_prof_input(const char *op, const ts_tensor *t) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed) || !thread_buf() ||
        !my_opts.record_shapes)
        return;
    if (!op) return;
    if (!pend_on || strncmp(pend_op, op, sizeof pend_op - 1)) {
        pend_on = true;
        snprintf(pend_op, sizeof pend_op, "%s", op);
        pend_n = 0;
        pend_full = false;
        memcpy(pend.dims, "[", 2);
        memcpy(pend.types, "[", 2);
        pend_ld = pend_lt = 1;
    }
    if (pend_full) return;
    /* the entry: at most ", [" + 8 dims of 20 digits and ", " + "]" (180 < its size) */
    char dims[TS_PROF_INPUTS_LEN], type[48];
    size_t nd = 0, nt = 0;
    if (pend_n) dims[nd++] = ',', dims[nd++] = ' ', type[nt++] = ',', type[nt++] = ' ';
    dims[nd++] = '[';
    for (int i = 0; i < t->shape.ndim && i < TS_MAX_DIMS; i++) {
        if (i) dims[nd++] = ',', dims[nd++] = ' ';
        nd += put_i64(dims + nd, t->shape.dims[i]);
    }
    dims[nd++] = ']';
    const char *name = ts_dtype_name(t->dtype);
    size_t ln = strlen(name);
    if (ln > sizeof type - 6) ln = sizeof type - 6;
    type[nt++] = '"';
    memcpy(type + nt, name, ln);
    nt += ln;
    type[nt++] = '"';
    /* room for the entry, then `, "..."]` and the terminator */
    const size_t tail = sizeof ", \"...\"]";
    if (pend_ld + nd + tail > sizeof pend.dims || pend_lt + nt + tail > sizeof pend.types) {
        const char *more = pend_n ? ", \"...\"" : "\"...\"";
        size_t lm = strlen(more);
        memcpy(pend.dims + pend_ld, more, lm + 1);
        memcpy(pend.types + pend_lt, more, lm + 1);
        pend_ld += lm;
        pend_lt += lm;
        pend_full = true;
        return;
    }
    memcpy(pend.dims + pend_ld, dims, nd);
    pend.dims[pend_ld += nd] = '\0';
    memcpy(pend.types + pend_lt, type, nt);
    pend.types[pend_lt += nt] = '\0';
    pend_n++;
}

void tsi_prof_inputs_drop(void) { pend_on = false; }

void tsi_prof_input_list(const char *op, ts_tensor *const *ts, int n) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed)) return;
    pend_on = false;
    for (int i = 0; ts && i < n; i++)
        if (ts[i]) tsi_prof_input(op, ts[i]);
}

void tsi_prof_op_begin(const char *op, ts_device d) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed)) return;
    busy = true;
    const bool seen = pend_on && op && !strncmp(pend_op, op, sizeof pend_op - 1);
    pend_on = false;
    open_span *s = push(TS_PROF_OP, op, tsi_resolve_device(d), false);
    if (s && seen && my_opts.record_shapes &&
        (open_in || (open_in = malloc(MAX_OPEN * sizeof *open_in)))) {
        tsi_prof_inputs *in = &open_in[n_open - 1];
        /* tsi_prof_input left room for the "]" */
        memcpy(in->dims, pend.dims, pend_ld);
        memcpy(in->dims + pend_ld, "]", 2);
        memcpy(in->types, pend.types, pend_lt);
        memcpy(in->types + pend_lt, "]", 2);
        s->has_in = true;
    }
    busy = false;
}

void tsi_prof_own(const ts_tensor *t) {
    pend_on = false; /* inputs seen before a result was handed out belong to no later op */
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed) || !me ||
        me->gen != atomic_load_explicit(&prof_gen, memory_order_relaxed))
        return;
    int depth = ts_scope_depth();
    int64_t now = -1;
    bool first = true;
    busy = true;
    while (n_open > 0) {
        open_span *s = &open_stack[n_open - 1];
        if (s->explicit_span || s->scope_depth < depth) break;
        if (now < 0) now = tsi_prof_now();
        if (first && t && my_opts.record_shapes) shape_of(s->ev.shape, t);
        first = false;
        close_top(now);
    }
    busy = false;
}

void tsi_prof_op_end(void) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed) || n_open == 0 || !me ||
        me->gen != atomic_load_explicit(&prof_gen, memory_order_relaxed))
        return;
    open_span *s = &open_stack[n_open - 1];
    if (s->explicit_span || s->ev.kind != TS_PROF_OP || s->scope_depth < ts_scope_depth()) return;
    busy = true;
    close_top(tsi_prof_now());
    busy = false;
}

void tsi_prof_node(const void *node) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed)) return;
    for (int i = n_open; i-- > 0;) {
        if (open_stack[i].ev.kind != TS_PROF_OP) break;
        if (open_stack[i].node) break; /* the op already made its node: this one is a helper's */
        open_stack[i].node = node;
        open_stack[i].ev.flow = (uint64_t)(uintptr_t)node;
        break;
    }
}

int tsi_prof_span_begin(ts_profile_kind kind, const char *name, ts_device d, const void *node) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed)) return -1;
    busy = true;
    open_span *s = push(kind, name, d, true);
    busy = false;
    if (!s) return -1;
    s->node = node;
    s->ev.flow = (uint64_t)(uintptr_t)node;
    return n_open - 1;
}

void tsi_prof_span_end(int token) {
    if (token < 0 || token >= n_open || !me ||
        me->gen != atomic_load_explicit(&prof_gen, memory_order_relaxed))
        return;
    busy = true;
    int64_t now = tsi_prof_now();
    /* ops inside it that handed out no result (in-place ops, optimizer steps) end with it */
    while (n_open > token) close_top(now);
    busy = false;
}

void tsi_prof_transfer(ts_device dst, ts_device src, size_t bytes, bool pinned, int64_t t0) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed)) return;
    busy = true;
    ts_profile_event e = {.kind = TS_PROF_TRANSFER,
                          .device = dst,
                          .src_device = src,
                          .t0_ns = t0,
                          .t1_ns = tsi_prof_now(),
                          .depth = n_open,
                          .bytes = (int64_t)bytes,
                          .pinned = pinned};
    e.transfer = src.type == TS_CPU ? TS_XFER_H2D : dst.type == TS_CPU ? TS_XFER_D2H : TS_XFER_D2D;
    snprintf(e.name, sizeof e.name, "%s",
             e.transfer == TS_XFER_H2D   ? "Memcpy HtoD"
             : e.transfer == TS_XFER_D2H ? "Memcpy DtoH"
                                         : "Memcpy DtoD");
    ts_device on = dst.type == TS_CPU ? src : dst;
    if (on.type == TS_CUDA) e.stream = (uint64_t)tsc_current_stream_id(on.index);
    append(&e, NULL);
    busy = false;
}

void tsi_prof_collective(const ts_profile_event *e, const ts_tensor *t) {
    if (busy || !atomic_load_explicit(&tsi_prof_on, memory_order_relaxed) || !thread_buf()) return;
    if (e->t0_ns < session_t0) return; /* submitted before this session */
    busy = true;
    ts_profile_event c = *e;
    c.kind = TS_PROF_COLLECTIVE;
    c.t1_ns = tsi_prof_now();
    c.depth = n_open;
    if (t) shape_of(c.shape, t);
    append(&c, NULL);
    busy = false;
}

/* ------------------------------------------------------------------ the public calls */
static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;

ts_status ts_profiler_start(const ts_profiler_opts *opts) {
    tsi_init();
    pthread_mutex_lock(&ctl_mu);
    if (atomic_load(&tsi_prof_on)) {
        pthread_mutex_unlock(&ctl_mu);
        return tsi_error_set(TS_ERR_STATE, "profiler_start: the profiler is already running");
    }
    ts_profile_free(last_profile);
    last_profile = NULL;
    /* buffers of threads that ended since the last session go now */
    pthread_mutex_lock(&reg_mu);
    for (tsi_prof_thread **pp = &reg_head; *pp;) {
        tsi_prof_thread *t = *pp;
        if (atomic_load(&t->dead)) {
            *pp = t->next;
            for (size_t i = 0; i < t->n_chunks; i++) {
                free(t->chunks[i]->in);
                free(t->chunks[i]);
            }
            tsi_prof_kmarks_drop(t);
            free(t->km);
            free(t);
        } else {
            pp = &t->next;
        }
    }
    pthread_mutex_unlock(&reg_mu);
    pthread_mutex_lock(&reg_mu);
    prof_opts = opts ? *opts : (ts_profiler_opts){0};
    prof_opts.record_shapes |= prof_opts.with_flops; /* the flops come from the inputs' shapes */
    pthread_mutex_unlock(&reg_mu);
    session_t0 = tsi_prof_now();
    atomic_fetch_add(&prof_gen, 1);
    atomic_store(&tsi_prof_on, true);
    tsi_placement_refresh();
    pthread_mutex_unlock(&ctl_mu);
    return TS_OK;
}

ts_status ts_profiler_stop(void) {
    pthread_mutex_lock(&ctl_mu);
    if (!atomic_load(&tsi_prof_on)) {
        pthread_mutex_unlock(&ctl_mu);
        return tsi_error_set(TS_ERR_STATE, "profiler_stop: the profiler is not running");
    }
    atomic_store(&tsi_prof_on, false);
    tsi_placement_refresh();
    uint64_t gen = atomic_load(&prof_gen);
    pthread_mutex_lock(&reg_mu);
    ts_profile *p =
        tsi_prof_collect(reg_head, gen, session_t0, tsi_prof_now(), prof_opts.with_flops);
    pthread_mutex_unlock(&reg_mu);
    /* this thread's spans still open (a range around the stop) are not recorded */
    for (int i = 0; me && i < n_open; i++)
        if (open_stack[i].marked && open_stack[i].ev.device.type == TS_CUDA)
            tsc_prof_mark_free(open_stack[i].m0);
    if (me) n_open = 0;
    last_profile = p;
    pthread_mutex_unlock(&ctl_mu);
    if (!p) return tsi_error_set(TS_ERR_OOM, "profiler_stop: out of host memory collecting events");
    return TS_OK;
}

bool ts_profiler_enabled(void) { return atomic_load(&tsi_prof_on); }

ts_profile *ts_profiler_take(void) {
    pthread_mutex_lock(&ctl_mu);
    ts_profile *p = last_profile;
    last_profile = NULL;
    pthread_mutex_unlock(&ctl_mu);
    return p;
}

ts_status ts_profiler_export_chrome(const char *path) {
    pthread_mutex_lock(&ctl_mu);
    ts_status st =
        last_profile ? ts_profile_export_chrome(last_profile, path)
                     : tsi_error_set(TS_ERR_STATE, "profiler_export_chrome: no profile (start and "
                                                   "stop the profiler first)");
    pthread_mutex_unlock(&ctl_mu);
    return st;
}

/* A user range: the thread's stack of range tokens. */
static _Thread_local int range_tokens[MAX_OPEN];
static _Thread_local int n_ranges;

void ts_profiler_range_push(const char *name) {
    int tok = tsi_prof_span_begin(TS_PROF_RANGE, name, ts_cpu(), NULL);
    if (n_ranges < MAX_OPEN) range_tokens[n_ranges] = tok;
    n_ranges++;
}

ts_status ts_profiler_range_pop(void) {
    if (n_ranges == 0) return tsi_error_set(TS_ERR_STATE, "profiler_range_pop: no range is open");
    n_ranges--;
    if (n_ranges < MAX_OPEN) tsi_prof_span_end(range_tokens[n_ranges]);
    return TS_OK;
}
