/* transport.h — moving a set of tensors between the devices of a data-parallel group: one
 * broadcast (devices[0] to every other device) and one reduce-add (every device summed onto
 * devices[0]), torch.cuda.comm's broadcast_coalesced and reduce_add_coalesced. Plain device copies
 * plus adds in general (transport_copy.c); NCCL collectives when every device is a CUDA device and
 * the library was built with NCCL (transport.c chooses). Nothing here records autograd history:
 * broadcast.c builds the differentiable node on top. */
#ifndef TS_PARALLEL_TRANSPORT_H
#define TS_PARALLEL_TRANSPORT_H

#include "core/internal.h"

/* dst[(r - 1) * n_tensors + i] gets a new reference to a copy of src[i] (on devices[0]) on
 * devices[r], for r = 1 .. n_devices - 1: same shape and dtype, contiguous. Returns false with an
 * error set (naming op) and every dst entry NULL on failure. */
bool tsi_transport_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                             const ts_device *devices, int n_devices, ts_tensor **dst);

/* out[i] gets a new reference to sum_r ins[r * n_tensors + i] on devices[0], for r = 0 ..
 * n_devices - 1, where ins[r * n_tensors + i] lies on devices[r] (or is NULL: zeros). Every
 * non-NULL entry of one i has the same shape and dtype; out[i] is NULL when all of them are NULL.
 * The sum runs in device order, as torch.cuda.comm.reduce_add. Returns false with an error set and
 * every out entry NULL on failure. */
bool tsi_transport_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                              const ts_device *devices, int n_devices, ts_tensor **out);

/* The implementations transport.c chooses between (same contracts). */
bool tsi_copy_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                        const ts_device *devices, int n_devices, ts_tensor **dst);
bool tsi_copy_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                         const ts_device *devices, int n_devices, ts_tensor **out);
#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)
/* transport_nccl.c: false with an error set on failure, as above */
bool tsi_nccl_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                        const ts_device *devices, int n_devices, ts_tensor **dst);
bool tsi_nccl_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                         const ts_device *devices, int n_devices, ts_tensor **out);
#endif

#endif /* TS_PARALLEL_TRANSPORT_H */
