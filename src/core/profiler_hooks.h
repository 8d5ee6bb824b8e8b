/* profiler_hooks.h — the library's calls into the profiler (profiler.c). Each hook site first
 * loads tsi_placement_on (one relaxed load: the flag is on while the placement log or the profiler
 * is), then asks tsi_prof_active(). Off, nothing else runs. */
#ifndef TS_CORE_PROFILER_HOOKS_H
#define TS_CORE_PROFILER_HOOKS_H

#include "core/internal.h"
#include "tessera/profiler.h"

extern atomic_bool tsi_prof_on;
static inline bool tsi_prof_active(void) {
    return atomic_load_explicit(&tsi_placement_on, memory_order_relaxed) &&
           atomic_load_explicit(&tsi_prof_on, memory_order_relaxed);
}
/* device.c: tsi_placement_on = the placement log is on || the profiler is. */
void tsi_placement_refresh(void);

int64_t tsi_prof_now(void); /* ns, CLOCK_MONOTONIC */
/* An op starts (tsi_log_op); it ends at the tsi_own that hands out its result at the scope depth
 * where it started, or when the span around it ends. */
void tsi_prof_op_begin(const char *op, ts_device d);
void tsi_prof_own(const ts_tensor *t);
/* record_shapes: tsi_check_input saw input t of op; the next tsi_prof_op_begin of the same op
 * name takes the inputs seen since the last op began or handed out a result (error.c). An error
 * drops them (tsi_prof_inputs_drop). */
void tsi_prof_input(const char *op, const ts_tensor *t);
void tsi_prof_inputs_drop(void);
/* tsi_same_device's list (NULL entries skipped) replaces what was seen of op so far */
void tsi_prof_input_list(const char *op, ts_tensor *const *ts, int n);
/* An op whose checks run other ops (their results clear what was seen of it) names its inputs
 * again right before its tsi_log_op. */
static inline void tsi_prof_inputs_at(const char *op, ts_tensor *const *ts, int n) {
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed))
        tsi_prof_input_list(op, ts, n);
}
/* The end of an op that hands out no tensor (an optimizer step, the grad scaler's). */
void tsi_prof_op_end(void);
#define TSI_PROF_OP_END()                                                                          \
    do {                                                                                           \
        if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed)) tsi_prof_op_end();      \
    } while (0)
/* A node was recorded: the innermost open op is its forward (the flow's start). */
void tsi_prof_node(const void *node);
/* Explicit spans (backward nodes, user ranges, loader waits): begin returns a token for end, -1
 * when nothing was opened. node: a backward node (the flow's end), else NULL. */
int tsi_prof_span_begin(ts_profile_kind kind, const char *name, ts_device d, const void *node);
void tsi_prof_span_end(int token);
/* A finished copy of bytes from src to dst that started at t0 (tsi_prof_now). */
void tsi_prof_transfer(ts_device dst, ts_device src, size_t bytes, bool pinned, int64_t t0);
/* A collective or point-to-point operation that finished now (src/dist/comm_thread.c, in the thread
 * where it completed): e's name, device, t0_ns (its submission), bytes, rank and world_size set;
 * the shape is t's (NULL: none). Dropped when it was submitted before this session started. */
void tsi_prof_collective(const ts_profile_event *e, const ts_tensor *t);

#endif /* TS_CORE_PROFILER_HOOKS_H */
