/* tessera/profiler.h — where time and memory go: ops, backward nodes, user ranges, data-loader
 * waits and transfers recorded on the host clock, exported as Chrome trace-event JSON
 * (docs/PROFILING.md). */
#ifndef TESSERA_PROFILER_H
#define TESSERA_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ts_profiler_opts {
    bool record_shapes;  /* each op's result shape and dtype (see docs/PROFILING.md) */
    bool profile_memory; /* allocated bytes of the op's device after each op: counter events */
    bool with_stack;     /* accepted; stacks are not recorded */
    bool with_flops;     /* each op's floating-point operations and bytes moved, computed from its
                            inputs' shapes (implies recording them, as record_shapes does) */
} ts_profiler_opts;

/* Starts recording in every thread (opts NULL: all false). TS_ERR_STATE if already running. The
 * previous session's results (if not taken) are dropped. Off, an op costs one relaxed atomic
 * load; on, each thread appends to a buffer of its own (no lock per op). */
TS_API ts_status ts_profiler_start(const ts_profiler_opts *opts);
/* Stops and collects what every thread recorded (threads should have finished their ops). The
 * result stays as "the last profile" for ts_profiler_export_chrome / ts_profiler_take.
 * TS_ERR_STATE when not running. */
TS_API ts_status ts_profiler_stop(void);
TS_API bool ts_profiler_enabled(void);
/* User ranges (PyTorch's record_function): nest per thread; a pop without push is TS_ERR_STATE. */
TS_API void ts_profiler_range_push(const char *name);
TS_API ts_status ts_profiler_range_pop(void);

/* A collected profile. */
typedef struct ts_profile ts_profile;
TS_API ts_profile *
ts_profiler_take(void); /* the last profile, now owned by the caller; NULL if none */
TS_API void ts_profile_free(ts_profile *p); /* NULL-safe */
/* The last profile (ts_profiler_export_chrome) or p as Chrome trace-event JSON: Perfetto and
 * chrome://tracing open it. TS_ERR_STATE without a profile, TS_ERR_IO when the file fails. */
TS_API ts_status ts_profiler_export_chrome(const char *path);
TS_API ts_status ts_profile_export_chrome(const ts_profile *p, const char *path);

typedef enum ts_profile_kind {
    TS_PROF_OP = 0,     /* an op (its front end's name: "add", "matmul") */
    TS_PROF_BACKWARD,   /* an autograd node's backward ("AddBackward0") */
    TS_PROF_RANGE,      /* a user range */
    TS_PROF_WAIT,       /* a data-loader wait ("DataLoader.next") */
    TS_PROF_TRANSFER,   /* a copy between devices */
    TS_PROF_MEMORY,     /* a memory counter sample (t0 == t1) */
    TS_PROF_KERNEL,     /* an op's work on its device (sim, cuda): its stream's time from the op's
                           start to its end, on the device's clock mapped to the host's */
    TS_PROF_COLLECTIVE, /* a collective or point-to-point operation of a process group
                           ("all_reduce"): its bytes, rank and group size */
} ts_profile_kind;

typedef enum ts_transfer_kind { TS_XFER_H2D = 1, TS_XFER_D2H, TS_XFER_D2D } ts_transfer_kind;

/* One recorded event. Times are nanoseconds on CLOCK_MONOTONIC. */
typedef struct ts_profile_event {
    ts_profile_kind kind;
    char name[48];
    ts_device device;     /* an op's device; a transfer's destination */
    ts_device src_device; /* a transfer's source */
    int thread;           /* 0, 1, ... in the order threads first recorded */
    uint64_t stream;      /* the cuda stream id (0: the default stream, or not cuda) */
    int64_t t0_ns, t1_ns;
    int depth;       /* nesting level on its thread */
    int64_t self_ns; /* t1 - t0 minus the time of the events nested directly inside */
    uint64_t flow;   /* forward op -> its backward node: the same nonzero id on both */
    int64_t bytes;   /* a transfer's bytes; a memory sample's allocated bytes */
    ts_transfer_kind transfer;
    bool pinned;          /* a transfer from or to pinned host memory */
    char shape[64];       /* record_shapes: the result's "[2, 3] float32" */
    uint64_t correlation; /* an op and its TS_PROF_KERNEL span: the same nonzero id on both */
    int64_t flops;        /* with_flops: an op's floating-point operations (0: not counted) */
    int64_t op_bytes;     /* with_flops: the bytes an op reads and writes (its inputs and result) */
    int rank, world_size; /* a collective: the caller's rank in its group and the group's size */
} ts_profile_event;

/* The events in start-time order; n_out the count. Owned by p. */
TS_API const ts_profile_event *ts_profile_events(const ts_profile *p, size_t *n_out);

/* PyTorch's key_averages: one row per name (and per shape when by_shape), totals over calls.
 * Returns the number of rows (writes up to cap of them), -1 + TS_ERR_ARG on bad arguments. */
typedef struct ts_profile_stat {
    char name[48];
    char shape[64];
    ts_profile_kind kind;
    int64_t calls;
    int64_t total_ns, self_ns, max_ns;
    int64_t bytes; /* transfers and collectives: bytes moved in all */
    int64_t flops; /* with_flops: the ops' floating-point operations in all */
} ts_profile_stat;
TS_API int64_t ts_profile_key_averages(const ts_profile *p, bool by_shape, ts_profile_stat *out,
                                       int64_t cap);

#ifdef __cplusplus
}
#endif

/* record_shapes: each event's input shapes and dtypes */
#include "tessera/profiler_inputs.h"

#endif /* TESSERA_PROFILER_H */
