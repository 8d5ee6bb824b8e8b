/* capture_record.c — the recording backend: while a thread captures on a device, tsi_be hands its
 * kernel calls to this stand-in, which records each call (its views, scalars and parameter
 * structs copied) for ts_graph_replay to run on the real backend, and refuses what a capture cannot
 * hold: host reads and synchronisation. Random draws take the replay's counters; the optimizer
 * step reads its scalars from the device. Queries (device_count, memory, sdpa_supports...) and raw
 * memory go straight to the real backend. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/capture_record.h"

/* ------------------------------------------------------------------ helpers */
void *tsi_capture_args_new(size_t size) {
    void *a = calloc(1, size);
    if (!a && !ts_error()) tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory");
    return a;
}

/* ------------------------------------------------------------------ memory */
typedef struct d2d_args {
    int src_index;
    void *dst;
    const void *src;
    size_t n;
} d2d_args;
static void run_d2d(const ts_backend *be, int index, const void *p) {
    const d2d_args *a = p;
    be->copy_d2d(be, index, a->dst, a->src_index, a->src, a->n);
}

/* Host values (ts_from_data, the scalars ops make) go to a block the graph holds, now and once;
 * each replay copies them from there on the device, so a device graph reads no host memory. */
static void rec_h2d(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    if (!n) return;
    const ts_backend *real = tsi_capture_real_of(be);
    void *kept = tsi_capture_const(n);
    if (!kept) return;
    real->copy_h2d(real, index, kept, src, n);
    d2d_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return;
    *a = (d2d_args){index, dst, kept, n};
    RECORD(run_d2d, index, a);
}

static void rec_d2h(const ts_backend *be, int index, void *dst, const void *src, size_t n) {
    (void)be, (void)index, (void)dst, (void)src, (void)n;
    tsi_capture_refuse("copy to host", "a host read");
}

static void rec_sync(const ts_backend *be, int index) {
    (void)be, (void)index;
    tsi_capture_refuse("synchronize", "a device synchronisation");
}

static void rec_d2d(const ts_backend *be, int dst_index, void *dst, int src_index, const void *src,
                    size_t n) {
    (void)be;
    d2d_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return;
    *a = (d2d_args){src_index, dst, src, n};
    RECORD(run_d2d, dst_index, a);
}

typedef struct zero_args {
    void *p;
    size_t n;
} zero_args;
static void run_zero(const ts_backend *be, int index, const void *p) {
    const zero_args *a = p;
    be->memset_zero(be, index, a->p, a->n);
}
static void rec_zero(const ts_backend *be, int index, void *p, size_t n) {
    (void)be;
    zero_args *a = tsi_capture_args_new(sizeof *a);
    if (!a) return;
    *a = (zero_args){p, n};
    RECORD(run_zero, index, a);
}

/* ------------------------------------------------------------------ the stand-ins */
enum { MAX_BACKENDS = 8 };
typedef struct stand_in {
    ts_backend rec;
    const ts_backend *real;
} stand_in;
static stand_in *_Atomic stand_ins[MAX_BACKENDS];
static pthread_mutex_t stand_in_lock = PTHREAD_MUTEX_INITIALIZER;

const ts_backend *tsi_capture_real_of(const ts_backend *rec) {
    return ((const stand_in *)(const void *)rec)->real;
}

static void install_recorders(ts_backend *b, const ts_backend *real) {
    *b = *real; /* queries, raw memory and ctx as the real one's */
    b->copy_h2d = rec_h2d;
    b->copy_d2h = rec_d2h;
    b->copy_d2d = rec_d2d;
    b->memset_zero = rec_zero;
    b->synchronize = rec_sync;
    tsi_capture_install_ops(b, real);
    tsi_capture_install_layers(b, real);
}

const ts_backend *tsi_capture_backend_of(const ts_backend *real) {
    const int t = (int)real->type;
    if (t < 0 || t >= MAX_BACKENDS) return real;
    stand_in *s = atomic_load(&stand_ins[t]);
    if (s) return &s->rec;
    pthread_mutex_lock(&stand_in_lock);
    s = atomic_load(&stand_ins[t]);
    if (!s && (s = malloc(sizeof *s))) {
        install_recorders(&s->rec, real);
        s->real = real;
        atomic_store(&stand_ins[t], s);
    }
    pthread_mutex_unlock(&stand_in_lock);
    if (s) return &s->rec;
    /* no stand-in: the capture breaks (the ops see the error pending and stop) */
    if (!ts_error()) tsi_error_set(TS_ERR_OOM, "graph capture: out of host memory");
    return real;
}
