/* weight_stream_internal.h — what weight_stream.c (the registry, the units' copies, the hooks)
 * and weight_stream_setup.c (ts_module_stream / ts_module_unstream) share. Not public. */
#ifndef TS_NN_WEIGHT_STREAM_INTERNAL_H
#define TS_NN_WEIGHT_STREAM_INTERNAL_H

#include "nn/module_internal.h"
#include "nn/placement_internal.h"
#include "tessera/weight_stream.h"

typedef struct entry {
    ts_module *m; /* the module whose slot it is */
    int slot;     /* in m's params (param) or buffers */
    bool param;
    ts_tensor *h;  /* the host tensor (the module's) */
    ts_tensor *d;  /* the device copy (one reference), or NULL */
    uint64_t dver; /* d's version when filled (a buffer changed in forward is copied back) */
    uint64_t hver; /* h's version when copied (backward refuses weights changed since) */
} entry;

typedef struct stream stream;

typedef struct sunit {
    stream *s; /* the unit hooks' context: the unit itself */
    int index;
    entry *e;
    int n, n_grad;   /* entries; of them, copies that take a gradient */
    int done;        /* gradient hooks run in this backward */
    bool resident;   /* the copies hold memory */
    bool swapped;    /* the slots hold the copies */
    bool prefetched; /* started ahead of its turn */
    bool keep;       /* copies kept for a backward (their memory freed in between) */
    bool recompute;  /* running again inside its backward (activation checkpointing) */
    size_t bytes;
    int *pre_h; /* on each of its modules (their order within the unit may vary: C leaves the
                   order of a call's arguments open, as in the GPT's tok_emb + pos_emb) */
    int post_h;
} sunit;

typedef struct host_tensor {
    ts_tensor *t;
    ts_device was; /* its device before streaming */
} host_tensor;

struct stream {
    ts_module *root;
    ts_device dev;
    ts_stream_opts o;
    sunit *u;
    int n;
    bool gpt;
    ts_module **mods;
    tsi_unit_span *spans;
    host_tensor *ht;
    int n_ht;
    int root_pre, root_post;
    void (*destroy)(ts_module *);
    uint64_t gen; /* the forward whose copies the units hold */
    int slot;     /* in the registry */
    int resident_units;
    size_t resident_bytes;
    ts_stream_stats st;
};

/* the registry of streamed models (at most TSI_WS_MAX of them) */
#define TSI_WS_MAX 64
stream *tsi_ws_find(const ts_module *m);
bool tsi_ws_register(stream *s); /* false: TS_ERR_STATE, the registry is full */
void tsi_ws_unregister(stream *s);
uint64_t tsi_ws_next_gen(void);

/* a unit's copies dropped (their memory with them, or freed when a graph holds them) */
void tsi_ws_drop(stream *s, sunit *u);
/* every unit's copies dropped (the slots hold the host tensors), a new forward generation */
void tsi_ws_reset(stream *s);

/* the hooks ts_module_stream installs: ctx is the stream (root) or the unit */
ts_status tsi_ws_root_pre(ts_module *m, ts_tensor *x, void *ctx);
ts_tensor *tsi_ws_root_post(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx);
ts_status tsi_ws_unit_pre(ts_module *m, ts_tensor *x, void *ctx);
ts_tensor *tsi_ws_unit_post(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx);

#endif /* TS_NN_WEIGHT_STREAM_INTERNAL_H */
