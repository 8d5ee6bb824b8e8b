/* dist_internal.h — what the distributed layer's parts share (internal): the process group below
 * DDP's reducer, raw forms of the collectives without the cross-rank shape check. */
#ifndef TS_DIST_INTERNAL_H
#define TS_DIST_INTERNAL_H

#include "core/internal.h"

/* An all-reduce of a contiguous tensor without the per-call check that every rank passes the same
 * shape (DDP checks its buckets once, at construction). Work runs in the group's communication
 * thread in the order calls are made; ts_dist_wait finishes it. */
ts_dist_work *tsi_dist_all_reduce_unchecked(ts_tensor *t, ts_dist_reduce_op op, ts_dist_group *g);
/* All-gather and reduce-scatter of the same kind (FSDP's flat parameters and gradients, whose
 * sizes every rank derived from a model checked once, at construction). */
ts_dist_work *tsi_dist_all_gather_unchecked(ts_tensor *out, ts_tensor *in, ts_dist_group *g);
ts_dist_work *tsi_dist_reduce_scatter_unchecked(ts_tensor *out, ts_tensor *in, ts_dist_reduce_op op,
                                                ts_dist_group *g);
/* average.c: dst = src / world (in place when dst is src; a copy when world is 1): the one
 * definition of averaging across a group (DDP, FSDP, AVG collectives). dst and src have one
 * shape, dtype and device. */
void tsi_dist_divide_by_world(ts_tensor *dst, ts_tensor *src, int world);
/* same_model.c: the group a wrapper (DDP, FSDP) runs on: its size, or 0 with the error set
 * (TS_ERR_ARG naming op when this process is not a member, or the pending one). */
int tsi_dist_wrap_group(const char *op, ts_dist_group *g);
/* m when its forward is `forward` (the wrapper's: DDP, FSDP), else NULL with TS_ERR_ARG "<op>:
 * module is NULL" / "<op>: <type> is not a <what>" (an error already pending stays). */
ts_module *tsi_dist_wrapper_of(const char *op, ts_module *m, ts_forward_fn forward,
                               const char *what);
/* same_model.c: PyTorch's _verify_param_shape_across_processes. Every rank must hold n
 * parameters of the same shapes and dtypes in the same order; every rank sees every description,
 * so all reach the same verdict. `who` names the wrapper in the message ("DDP", "FSDP"). */
bool tsi_dist_verify_same_params(const char *op, const char *who, ts_tensor *const *params,
                                 const char *const *names, int n, ts_dist_group *g);
/* Broadcast without the shape check (module states, after DDP checked them). */
ts_status tsi_dist_broadcast_unchecked(ts_tensor *t, int src_world_rank, ts_dist_group *g);
/* Every member contributes n bytes; out receives group-size * n bytes in group-rank order. */
ts_status tsi_dist_all_gather_bytes(const void *in, size_t n, void *out, ts_dist_group *g);
/* agree.c: every member of g says whether it succeeded (ok false, or an error pending on entry:
 * failed). True when all did; otherwise false on every rank with an error: a failed rank keeps its
 * own; the others get the first failed member's code and message, as "<op>: rank R failed: <its
 * message>", or with op NULL its message verbatim (a message that names the rank itself). Makes no
 * allocation that could fail once the group started, so a rank that ran out of memory still
 * takes part; a broken group fails at once with its error. */
bool tsi_dist_agree(const char *op, bool ok, ts_dist_group *g);
/* Whether this machine has a core beyond the compute threads of its `local_ranks` ranks (each
 * ts_get_num_threads() threads): what the communication threads need to overlap without taking a
 * core from compute (DDP's overlap AUTO; MPI's idle waits spin or yield, process_group.c). */
bool tsi_dist_core_spare(int local_ranks);
/* The world rank of the group's member r (r in [0, size)). */
int tsi_dist_group_world_rank(ts_dist_group *g, int r);
/* Seconds the communication thread spent executing this work item (0 until it finished: call it
 * once ts_dist_test said true, before ts_dist_wait frees the item; or use tsi_dist_wait_busy). */
double tsi_dist_work_busy_s(ts_dist_work *w);
/* ts_dist_wait that also reports the item's busy seconds (NULL-safe like ts_dist_wait; *busy_s
 * gets 0 when the item failed or w is NULL). */
ts_status tsi_dist_wait_busy(ts_dist_work *w, double *busy_s);

#endif /* TS_DIST_INTERNAL_H */
