/* state_snapshot.h — a model's (and optimizer's, grad scaler's) state as host float64 values, to
 * check that a failed operation left it as it was, or exactly as a reference run made it. */
#ifndef TS_STATE_SNAPSHOT_H
#define TS_STATE_SNAPSHOT_H

#include <stdbool.h>

#include "tessera.h"

typedef struct ts_snapshot {
    int n;           /* named tensors */
    char **names;    /* "model.fc1.weight", "optim.state.0.exp_avg", "scaler.scale" */
    int64_t *offset; /* where each one's values start in vals; offset[n] = total */
    double *vals;
    bool failed; /* taking it failed (an error was pending or arose) */
} ts_snapshot;

/* Appends a list's tensors (name prefixed) to s. */
void ts_snapshot_add(ts_snapshot *s, const char *prefix, const ts_tensor_list *l);
/* model, optimizer and scaler state (each may be NULL) */
ts_snapshot ts_snapshot_take(ts_module *m, ts_optim *o, ts_grad_scaler *g);
/* m's state and its parameters' gradients (named "grad.<parameter>") */
ts_snapshot ts_snapshot_with_grads(ts_module *m);
/* Same names, same values (bit for bit: NaN equals NaN). */
bool ts_snapshot_equal(const ts_snapshot *a, const ts_snapshot *b);
/* The first difference, for failure messages ("" when equal). */
const char *ts_snapshot_diff(const ts_snapshot *a, const ts_snapshot *b);
void ts_snapshot_free(ts_snapshot *s);
/* CHECKs that got equals want, printing "  <what>: <first difference>" when not. */
void ts_snapshot_check(const char *what, const ts_snapshot *got, const ts_snapshot *want);

#endif /* TS_STATE_SNAPSHOT_H */
