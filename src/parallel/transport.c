/* transport.c — chooses how a data-parallel group's tensors travel: NCCL collectives when every
 * device is a CUDA device and Tessera was built with NCCL, device copies otherwise (as
 * torch.cuda.comm, which takes NCCL whenever it is there and the tensors allow it). */
#include "parallel/transport.h"

#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)
#include "backend/cuda/cuda_nccl.h"

/* Only when NCCL can take all of it: the dtypes it carries (tsc_nccl_supports: floats and
 * integers, not bool), every device a CUDA device. Anything else (a sim device in the set, bool or
 * complex tensors) copies. */
static bool use_nccl(ts_tensor *const *ts, int n_ts, const ts_device *devices, int n_devices) {
    if (n_devices < 2) return false;
    for (int r = 0; r < n_devices; r++)
        if (devices[r].type != TS_CUDA) return false;
    for (int k = 0; k < n_ts; k++)
        if (ts[k] && !tsc_nccl_supports(ts[k]->dtype)) return false;
    return true;
}
#endif

bool tsi_transport_broadcast(const char *op, ts_tensor *const *src, int n_tensors,
                             const ts_device *devices, int n_devices, ts_tensor **dst) {
#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)
    if (use_nccl(src, n_tensors, devices, n_devices))
        return tsi_nccl_broadcast(op, src, n_tensors, devices, n_devices, dst);
#endif
    return tsi_copy_broadcast(op, src, n_tensors, devices, n_devices, dst);
}

bool tsi_transport_reduce_add(const char *op, ts_tensor *const *ins, int n_tensors,
                              const ts_device *devices, int n_devices, ts_tensor **out) {
#if defined(TS_HAVE_CUDA) && defined(TS_HAVE_NCCL)
    if (use_nccl(ins, n_tensors * n_devices, devices, n_devices))
        return tsi_nccl_reduce_add(op, ins, n_tensors, devices, n_devices, out);
#endif
    return tsi_copy_reduce_add(op, ins, n_tensors, devices, n_devices, out);
}
