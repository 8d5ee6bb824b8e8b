/* sweep_model.h — the small model, batch and training step the allocation-failure sweeps
 * (test_fault_*.c) share. */
#ifndef TS_SWEEP_MODEL_H
#define TS_SWEEP_MODEL_H

#include <stdbool.h>

#include "state_snapshot.h"
#include "tessera.h"

/* Linear(6, 8) - ReLU - Linear(8, 3) on dev, initialised from seed 5. */
ts_module *sweep_mlp_new(ts_device dev);
/* x [5, 6] and y [5] (3 classes) on dev, from seed 11; the caller owns both. */
void sweep_batch_new(ts_device dev, ts_tensor **x, ts_tensor **y);
/* DESIGN's loop body, checked once at the end: zero_grad, cross-entropy, backward, step. */
bool sweep_train_step(ts_module *m, ts_optim *o, ts_tensor *x, ts_tensor *y);

/* A model, its optimizer and a batch (owned): the state a training sweep steps. The functions
 * take void * to serve as ts_sweep_case callbacks. */
typedef struct sweep_trainee {
    ts_module *m;
    ts_optim *o;
    ts_tensor *x, *y;
} sweep_trainee;
ts_snapshot sweep_trainee_snap(void *t); /* model and optimizer state */
bool sweep_trainee_step(void *t);        /* sweep_train_step on its model and batch */
void sweep_trainee_free(void *t);        /* everything, and t itself (calloc'ed) */

#endif /* TS_SWEEP_MODEL_H */
