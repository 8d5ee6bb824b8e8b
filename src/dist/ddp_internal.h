/* ddp_internal.h — DistributedDataParallel's state, shared by the module (ddp.c) and the reducer
 * (ddp_reducer.c): PyTorch's torch/csrc/distributed/c10d/reducer.cpp in miniature. */
#ifndef TS_DIST_DDP_INTERNAL_H
#define TS_DIST_DDP_INTERNAL_H

#include "dist/dist_internal.h"

typedef struct ddp_param {
    struct ddp_module *d; /* the hooks' way back */
    ts_tensor *p;         /* borrowed: the wrapped module owns it */
    const char *name; /* "fc1.weight" (owned) */
    int bucket;
    int64_t offset, numel; /* in the bucket, elements */
    ts_tensor *slot;       /* view of the bucket with p's shape (owned) */
    int hook;              /* handle of the post-accumulate-grad hook */
    bool ready, used;
    bool scaled; /* this iteration's slot already holds gradient / world */
} ddp_param;

typedef struct ddp_bucket {
    ts_tensor *buf; /* flat, the parameters' dtype and device (owned) */
    int *params;    /* indices into ddp->params */
    int n_params, pending;
    ts_dist_work *work;
} ddp_bucket;

typedef struct ddp_module {
    ts_module base;
    ts_module *module; /* child "module" */
    ts_ddp_opts o;
    int world; /* the group's size */
    int root;  /* world rank of the group's first member: broadcasts come from it */
    ddp_param *params;
    int n_params;
    ddp_bucket *buckets;
    int n_buckets;
    /* the iteration's reduction */
    bool no_sync;     /* inside ts_ddp_no_sync_begin/end */
    bool overlap;     /* launch buckets during backward (else all at its end) */
    bool expect;      /* the last forward asked its backward to reduce */
    bool started;     /* a hook of that backward has fired */
    int next_bucket;  /* buckets launch in order: every rank issues the same collectives */
    int full_buckets; /* without overlap: how many are complete */
    double wait_s, comm_s;
    ts_ddp_stats stats;
} ddp_module;

/* ddp_reducer.c */
/* Groups the parameters into buckets (reverse registration order, first_bucket_mb then
 * bucket_cap_mb per bucket and per dtype/device, as compute_bucket_assignment_by_size) and
 * registers the hooks. false with an error set on failure. */
bool tsi_ddp_build_buckets(ddp_module *d);
void tsi_ddp_free_buckets(ddp_module *d);
/* Before a forward whose backward should reduce: checks the last iteration finished (PyTorch's
 * error naming the parameters that got no gradient otherwise); rebuilds the buckets when the
 * parameters changed device or dtype. */
bool tsi_ddp_prepare_forward(ddp_module *d);
/* After it: arms the hooks; with find_unused_parameters marks the parameters the output's graph
 * does not reach. */
bool tsi_ddp_prepare_backward(ddp_module *d, ts_tensor *out);

#endif /* TS_DIST_DDP_INTERNAL_H */
