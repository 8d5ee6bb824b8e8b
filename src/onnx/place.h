/* place.h — an imported graph split across devices by memory budget (place.c: ts_module_place on
 * an ONNX model, whose units are the top-level graph's nodes), as run.c runs it. */
#ifndef TSO_PLACE_H
#define TSO_PLACE_H

#include "onnx/onnx_internal.h"

/* A placement of m's top-level graph: each node runs on devs[node_dev[k]]; its inputs are moved
 * there (ts_to, once per value and device in a run); the graph's outputs end on `out`. */
typedef struct tso_place {
    int n_nodes, n_values, n_devs;
    ts_device *devs;          /* the devices the nodes use, in the order the plan fills them */
    unsigned short *node_dev; /* per node: an index into devs */
    ts_device out;            /* where the outputs are returned */
    /* per value and device (v * n_devs + d): a constant's copy on a device whose nodes read it
     * (owned; made at placement, so constants are not copied per run) */
    ts_tensor **copies;
} tso_place;

/* ts_onnx_load: makes ts_module_place hand ONNX models to place.c (once is enough; idempotent) */
void tso_place_register(void);
void tso_place_free(tso_place *p); /* NULL-safe */
/* The blocked-layout mode (tso_blocked_mode) of a placed run: the devices' common mode, 0 (the
 * plain nodes) when they differ, so no value crosses a device in a layout the next one lacks */
int tso_place_mode(const tso_model *m, const tso_place *p, ts_tensor *const *inputs, int n_inputs);
/* t (a tensor or a container) on d, differentiable (ts_to); a channels_last tensor stays
 * channels_last. Owned by the current scope; NULL with the error set. */
ts_tensor *tso_place_move(ts_tensor *t, ts_device d);

#endif /* TSO_PLACE_H */
