/* trace.h — the op trace that ONNX export records while one forward runs (thread-local): each op
 * front end calls tsi_trace where it returns its result, next to its autograd recording. */
#ifndef TS_AUTOGRAD_TRACE_H
#define TS_AUTOGRAD_TRACE_H

#include "core/internal.h"

#define TSI_TRACE_MAX_I 16 /* integer attributes of one record */
#define TSI_TRACE_MAX_F 4  /* floating attributes of one record */

/* One op as it ran: its inputs and output as value ids (tsi_trace_value), its attributes. */
typedef struct tsi_trace_rec {
    const char *op; /* the front end's name ("add", "relu_", "conv2d"); a static string */
    int n_in;
    int *in; /* value ids; -1 for an absent optional input (a NULL bias) */
    int out;
    int n_i, n_f;
    int64_t i[TSI_TRACE_MAX_I];
    double f[TSI_TRACE_MAX_F];
    int stale_in; /* an input whose storage an in-place op changed after it was made, or -1 */
} tsi_trace_rec;

/* A tensor as one op saw it: a traced op's output (producer >= 0) or a tensor from outside the
 * trace (producer -1: a named tensor, or a constant snapshotted when first seen). */
typedef struct tsi_trace_value {
    ts_tensor *t;     /* retained: as the op saw it (a constant: a copy taken when first seen) */
    ts_tensor *key;   /* retained: the tensor itself (so that its address is not reused) */
    int producer;     /* record index, or -1 */
    int named;        /* index into the names given to tsi_trace_begin, or -1 */
    uint64_t version; /* the storage's version when the value was made */
    const char *untraced; /* an outside tensor some op without a trace produced (its autograd
                             node's op name), which can't be a constant; NULL otherwise */
} tsi_trace_value;

typedef struct tsi_tracer {
    tsi_trace_rec *recs;
    int n_recs, cap_recs;
    tsi_trace_value *vals;
    int n_vals, cap_vals;
    /* tensor -> its current value (open addressing; a tensor changed in place gets a new value) */
    ts_tensor **keys;
    int *slots;
    int cap_map;
    ts_tensor *const *named; /* the tensors with names (graph inputs, parameters, buffers) */
    int n_named;
    bool failed; /* an allocation failed while recording: the error is pending */
} tsi_tracer;

extern _Thread_local tsi_tracer *tsi_trace_active;

/* Starts recording this thread's ops into tr (zeroed by the caller); named[0..n_named-1] are the
 * tensors outside the trace that have names (the others a trace meets are constants). */
void tsi_trace_begin(tsi_tracer *tr, ts_tensor *const *named, int n_named);
/* Stops recording; false (error pending) when recording failed. The trace stays readable until
 * tsi_trace_free. */
bool tsi_trace_end(tsi_tracer *tr);
void tsi_trace_free(tsi_tracer *tr);
/* The value t holds now (-1 when the trace never met it). */
int tsi_trace_lookup(const tsi_tracer *tr, const ts_tensor *t);

void tsi_trace_record(const char *op, ts_tensor *const *ins, int n_in, ts_tensor *out,
                      const int64_t *ip, int n_i, const double *fp, int n_f);
/* The hook: records op(ins) -> out with its attributes when a trace is on; returns out. */
static inline ts_tensor *tsi_trace(const char *op, ts_tensor *const *ins, int n_in, ts_tensor *out,
                                   const int64_t *ip, int n_i, const double *fp, int n_f) {
    if (__builtin_expect(tsi_trace_active != NULL, 0) && out)
        tsi_trace_record(op, ins, n_in, out, ip, n_i, fp, n_f);
    return out;
}

#endif /* TS_AUTOGRAD_TRACE_H */
