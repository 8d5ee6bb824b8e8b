/* parallel_internal.h — the pieces of data parallel (torch.nn.parallel's replicate and
 * parallel_apply); scatter and gather are public (tessera/parallel.h). */
#ifndef TS_PARALLEL_INTERNAL_H
#define TS_PARALLEL_INTERNAL_H

#include "nn/module_internal.h"

/* More devices than this in one DataParallel is TS_ERR_ARG (sim devices stop at 64 too). */
#define TSI_DP_MAX_DEVICES 64

/* torch.nn.parallel's Broadcast: copies[(r - 1) * n_params + i] gets a new reference to a copy of
 * params[i] (on devices[0]) on devices[r], r = 1 .. n_devices - 1, moved by the transport
 * (transport.h) in one coalesced operation. With grad mode on and some params requiring grad, ONE
 * node "BroadcastBackward" becomes the grad_fn of every copy of a parameter that requires grad; its
 * backward sums the copies' gradients onto devices[0] (ReduceAddCoalesced), one gradient per
 * parameter. The devices must be distinct. False with an error set and every copy NULL on
 * failure. */
bool tsi_broadcast_coalesced(ts_tensor *const *params, int n_params, const ts_device *devices,
                             int n_devices, ts_tensor **copies);

/* replicas[0] = m itself (its tensors must be on devices[0]); replicas[i] for i >= 1 is a copy of
 * m's tree whose parameters are tsi_broadcast_coalesced copies on devices[i] (differentiable when
 * grad mode is on, so backward sums every replica's gradient into the original parameters) and
 * whose buffers are plain detached copies. Returns false (nothing left allocated) with an error set
 * on failure. Free with tsi_replicas_free. */
bool tsi_replicate(ts_module *m, const ts_device *devices, int n, ts_module **replicas);
void tsi_replicas_free(ts_module **replicas, int n); /* replicas[1..n-1] */

/* Runs ts_forward(modules[i], inputs[i]) for every i, each in a thread of its own (n == 1: in the
 * calling thread), with the caller's grad mode, autocast state and OpenMP thread count, and
 * devices[i] pushed as the default device. outputs[i] get references the caller owns. When a
 * replica fails, the first failing one's error is raised in the caller as
 * "DataParallel: in replica i on device d: <its message>" with its code, every output is released
 * and false returned. */
bool tsi_parallel_apply(ts_module *const *modules, ts_tensor *const *inputs,
                        const ts_device *devices, int n, ts_tensor **outputs);

#endif /* TS_PARALLEL_INTERNAL_H */
