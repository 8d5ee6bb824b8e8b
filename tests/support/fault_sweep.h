/* fault_sweep.h — SQLite-style allocation-failure sweeps: run a scenario once for every
 * allocation it makes, failing that one allocation (ts_fault_alloc_set), and check each time that
 * the failure is reported clearly, leaks nothing and leaves a defined state, and that the
 * scenario succeeds once the error is cleared. */
#ifndef TS_FAULT_SWEEP_H
#define TS_FAULT_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "state_snapshot.h"

typedef struct ts_sweep_case {
    const char *name;
    /* Builds the state the scenario runs on (no fault armed); NULL: a failure (reported). */
    void *(*setup)(void);
    /* The operations under test, with a fault armed. Returns whether they report success (their
     * statuses and ts_error() == TS_OK). Must not CHECK: a failure is expected. */
    bool (*run)(void *st);
    void (*teardown)(void *st);
    /* Optional: the state that must change wholly or not at all. The sweep takes it after setup
     * ("before") and after a fault-free run ("after") once, and after each run requires "after"
     * when the run succeeded (also when a failure was absorbed: a fallback, a cache), "before"
     * when it failed (unless any_state_on_error: gradients of a failed backward, say). */
    ts_snapshot (*snap)(void *st);
    bool any_state_on_error;
    /* Optional: further checks after a run. ok: the run reported success. After a failure run is
     * called again (after ts_error_clear) and must finish the scenario; check sees that too. */
    void (*check)(void *st, bool ok);
} ts_sweep_case;

typedef struct ts_sweep_stats {
    int64_t allocations; /* allocations of one fault-free run (the points swept) */
    int sites;           /* distinct allocation call sites they come from */
    int errors;          /* points that ended in an error */
    int oom;             /* ... of them TS_ERR_OOM */
    int absorbed;        /* points where the scenario succeeded anyway */
} ts_sweep_stats;

/* Sweeps N = 1, 2, ... until a run makes fewer than N allocations (at most max_points). Prints a
 * one-line summary "sweep <name>: N allocations from S sites, E errors (O OOM), A absorbed". */
ts_sweep_stats ts_fault_sweep(const ts_sweep_case *c, int max_points);

/* Live tensors on cpu and every sim device. */
int64_t ts_sweep_live_tensors(void);

#endif /* TS_FAULT_SWEEP_H */
