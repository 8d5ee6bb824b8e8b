/* cuda_nccl.h — NCCL collectives for data parallel (plain C; implemented in cuda_nccl.cu, which
 * compiles to nothing without TS_HAVE_NCCL: call these only under
 * #if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)).
 *
 * Every call names its device set (CUDA device indices, devices[0] is the root, rank r is
 * devices[r]) and works on raw contiguous buffers: buffer (r, i) is bufs[r * n_tensors + i], on
 * devices[r], counts[i] elements of dtypes[i]. The operations of one call form one NCCL group, each
 * rank's on the calling thread's current stream of its device (tsc_stream): they are queued there
 * and the call returns without waiting, so later work on those streams sees the results. A
 * communicator per device set is made on first use (ncclCommInitAll) and cached for the life of
 * the process: it is never destroyed, since tearing NCCL down from an atexit handler can race the
 * CUDA runtime's own shutdown (PyTorch's cache likewise skips the destroy once the driver is
 * gone). Failures record TS_ERR_CUDA "<op>: <the NCCL call> failed: <NCCL's message>" and return
 * false; what was queued before the failure may still run. */
#ifndef TS_CUDA_NCCL_H
#define TS_CUDA_NCCL_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the sums and copies here can carry this dtype: nccl_dtype.h's map (floats, bf16 with
 * NCCL >= 2.10, the integers), bool excepted (a sum of bools is no bool). */
bool tsc_nccl_supports(ts_dtype dt);

/* Buffer (0, i) is copied into buffer (r, i) for every r >= 1 (ncclBroadcast from rank 0). */
bool tsc_nccl_broadcast(const char *op, const int *devices, int n_devices, void *const *bufs,
                        const int64_t *counts, const ts_dtype *dtypes, int n_tensors);

/* sums[i] (on devices[0]) = the sum over r of buffer (r, i) (ncclReduce, ncclSum, root rank 0).
 * sums[i] may be buffer (0, i) itself (NCCL reduces in place then). */
bool tsc_nccl_reduce_sum(const char *op, const int *devices, int n_devices, void *const *bufs,
                         void *const *sums, const int64_t *counts, const ts_dtype *dtypes,
                         int n_tensors);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_NCCL_H */
