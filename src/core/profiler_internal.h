/* profiler_internal.h — what profiler.c, profiler_collect.c and profiler_chrome.c share. */
#ifndef TS_CORE_PROFILER_INTERNAL_H
#define TS_CORE_PROFILER_INTERNAL_H

#include "core/profiler_hooks.h"
#include "tessera/profiler_inputs.h"

#define TSI_PROF_CHUNK      1024
#define TSI_PROF_MAX_CHUNKS 4096 /* 4M events a thread and session; later ones are dropped */

/* record_shapes: an op's inputs as JSON arrays (tessera/profiler_inputs.h) */
typedef struct tsi_prof_inputs {
    char dims[TS_PROF_INPUTS_LEN];
    char types[TS_PROF_INPUTS_LEN];
} tsi_prof_inputs;

typedef struct tsi_prof_chunk {
    ts_profile_event ev[TSI_PROF_CHUNK];
    tsi_prof_inputs *in; /* the inputs of ev[i]; allocated by the first event that has some */
} tsi_prof_chunk;

/* The device-time span of an op on a sim or cuda device (TS_PROF_KERNEL), read at the stop: on
 * cuda m0 and m1 are tsc_prof_mark events, on sim (whose kernels run in the calling thread) the
 * host times themselves. */
typedef struct tsi_prof_kmark {
    ts_profile_event ev; /* kind, name, device, stream, thread and correlation set */
    uint64_t m0, m1;
} tsi_prof_kmark;

/* One thread's buffer: written by its thread alone; the count is published with release. */
typedef struct tsi_prof_thread {
    struct tsi_prof_thread *next; /* the registry (profiler.c) */
    int id;
    uint64_t gen; /* the session it holds events of */
    atomic_size_t n;
    size_t n_chunks;
    int64_t dropped;
    atomic_bool dead;   /* its thread ended: freed at the next start */
    tsi_prof_kmark *km; /* device-time spans of this session, read and freed at its stop */
    size_t n_km, cap_km;
    tsi_prof_chunk *chunks[TSI_PROF_MAX_CHUNKS];
} tsi_prof_thread;

struct ts_profile {
    ts_profile_event *ev; /* sorted by t0, then outermost first */
    size_t n;
    int64_t t0_ns, t1_ns; /* the session's start and stop */
    int64_t dropped;
    tsi_prof_inputs *in; /* parallel to ev; NULL when no event has inputs */
};

/* Copies the events of the threads of session gen into a new profile (NULL: out of memory):
 * sorted, self times and flows resolved; with_flops: each op's flops and op_bytes. */
ts_profile *tsi_prof_collect(tsi_prof_thread *threads, uint64_t gen, int64_t t0, int64_t t1,
                             bool with_flops);

/* with_flops (profiler_flops.c): e's flops and op_bytes from its inputs (NULL: none recorded)
 * and its result's shape; 0 for events that are not ops and ops not counted. */
void tsi_prof_flops(ts_profile_event *e, const tsi_prof_inputs *in);

/* A mark on d's current stream now (profiler_kernel.c): the host time on sim, a timing event on
 * cuda (0: none, or another device type). */
uint64_t tsi_prof_kernel_mark(ts_device d, uint64_t gen, int64_t now);
/* A device-time span's host times (profiler_kernel.c): false when its marks cannot be read. Frees
 * its marks either way. */
bool tsi_prof_kernel_times(tsi_prof_kmark *k, uint64_t gen);
/* Frees the marks of spans that will not be read (a session's buffer dropped). */
void tsi_prof_kmarks_drop(tsi_prof_thread *t);

#endif /* TS_CORE_PROFILER_INTERNAL_H */
