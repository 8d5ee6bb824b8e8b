/* fsdp_internal.h — sharded data parallel's state, shared by the wrapper (fsdp.c: construction,
 * the public calls) and the units (fsdp_unit.c: gather, reshard, reduce per unit). */
#ifndef TS_DIST_FSDP_INTERNAL_H
#define TS_DIST_FSDP_INTERNAL_H

#include "dist/dist_internal.h"

struct fsdp_module;

typedef struct fsdp_param {
    struct fsdp_unit *u; /* the hook's way back */
    ts_tensor *p;        /* borrowed: the wrapped module owns it; a slice of u->flat's storage */
    char *name;          /* "blocks.0.linear1.weight" (owned) */
    int64_t offset;      /* in the flat buffer, elements */
    int hook;            /* post-accumulate-grad hook handle */
} fsdp_param;

typedef struct fsdp_unit {
    struct fsdp_module *f;
    int index;               /* 0: the root unit; then the named units in forward order */
    char *name;              /* "blocks.0"; "" for the root (owned) */
    ts_module *m;            /* the unit's module (the wrapped module for the root) */
    int pre_hook, post_hook; /* forward hooks on m (0 for the root: the wrapper's forward) */
    fsdp_param *params;
    int n_params;
    int64_t numel, padded, shard_n; /* parameters' elements; padded to W x shard_n */
    ts_tensor *flat;  /* [padded] the gathered parameters, in the parameters' dtype (param_dtype
                       * under mixed precision; owned; memory freed when resharded) */
    ts_tensor *shard; /* [shard_n] this rank's block in the model's dtype (owned): what gathers
                       * send and reductions land in; the optimizer's leaf unless decay_groups */
    /* what the optimizer steps: the shard itself, or (decay_groups) its decaying part [0, split)
     * and the rest, leaves aliasing its storage (owned) */
    ts_tensor *leaf[2];
    int n_leaves;
    int64_t split;      /* decay_groups: the shard's elements that decay */
    int64_t decay_n;    /* decay_groups: the unit's elements that decay (first in flat) */
    ts_tensor *grad;    /* [padded] full gradient while backward accumulates it (owned) or NULL */
    ts_tensor *acc;     /* no_sync under mixed precision: gradients so far, in reduce_dtype */
    ts_tensor *reduced; /* [shard_n] or, stage 1, [padded]: the reduction in flight (owned) */
    ts_dist_work *gather_work, *reduce_work;
    bool is_root;
    bool gathered; /* flat holds the parameters of shard version gathered_version */
    uint64_t gathered_version;
    uint64_t gather_from, flat_version; /* the gather in flight: shard's and flat's versions */
    bool grad_consumed; /* grad was reduced: the next backward starts it from zeros */
    int ready;          /* parameters whose gradient this backward has accumulated */
    bool done;          /* every parameter's gradient arrived in this backward */
} fsdp_unit;

typedef struct fsdp_module {
    ts_module base;
    ts_module *module; /* child "module" */
    ts_fsdp_opts o;    /* stage resolved; param_dtype, reduce_dtype as given (0: none) */
    int world, rank;   /* in the group */
    fsdp_unit *units;  /* [0] the root unit */
    int n_units;
    bool no_sync;
    int done_units;          /* units whose gradients this backward has completed */
    fsdp_unit *last_reduced; /* whose reduction is in flight, delivered when the next starts */
    ts_fsdp_stats stats;
} fsdp_module;

/* The dtype gradients are reduced in: reduce_dtype, else the parameters' (flat's) dtype. */
static inline ts_dtype tsi_fsdp_reduce_dtype(const fsdp_unit *u) {
    return u->f->o.reduce_dtype ? u->f->o.reduce_dtype : u->flat->dtype;
}

/* fsdp.c: m as an FSDP module, or NULL with TS_ERR_ARG naming op */
fsdp_module *tsi_fsdp_of(const char *op, ts_module *m);

/* fsdp_unit.c */
/* A unit whose params (offsets set) are known is built in two steps, with the ranks' agreement
 * between them (fsdp.c), so that a rank that failed the first does not leave the others waiting
 * in the broadcast of the second. Flatten (this rank alone): the flat buffer and the shard, the
 * parameters copied into the flat buffer. Shard: the group's first rank's values broadcast, this
 * rank's block into the shard, each parameter made a slice of the flat buffer, the gradient and
 * forward hooks registered, and (stage 3) resharded. On failure tsi_fsdp_unit_free cleans up. */
bool tsi_fsdp_unit_flatten(fsdp_unit *u);
bool tsi_fsdp_unit_shard(fsdp_unit *u);
void tsi_fsdp_unit_free(fsdp_unit *u);
/* Forward: gather (waiting for a prefetch) and start the next unit's gather; after it, arm the
 * backward (pre-backward hook on the output) and reshard. */
bool tsi_fsdp_unit_pre_forward(fsdp_unit *u);
ts_tensor *tsi_fsdp_unit_post_forward(fsdp_unit *u, ts_tensor *y);
bool tsi_fsdp_unit_ensure_gathered(fsdp_unit *u);
/* Waits for every collective still in flight (a prefetch nobody used, an abandoned backward). */
void tsi_fsdp_wait_all(fsdp_module *f);
/* Before a forward: the last backward must have completed every unit it started. */
bool tsi_fsdp_check_prior(fsdp_module *f);

/* Every rank of the group says whether it succeeded, and with what error. Returns true when all
 * did; otherwise false with, on every rank, an error naming the first rank that failed (a rank's
 * own error is kept as it was). A pending error on entry counts as this rank's failure.
 * (tsi_dist_agree over the module's group) */
static inline bool tsi_fsdp_agree(fsdp_module *f, const char *op, bool ok) {
    return tsi_dist_agree(op, ok, f->o.group);
}

#endif /* TS_DIST_FSDP_INTERNAL_H */
