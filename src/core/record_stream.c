/* record_stream.c — ts_record_stream (PyTorch's Tensor.record_stream): a cuda tensor's memory is
 * also used by work on another stream, which its reuse must wait for. */
#include "backend/cuda/cuda_bridge.h"
#include "core/internal.h"
#include "core/pinned.h"

ts_status ts_record_stream(ts_tensor *t, ts_cuda_stream *stream) {
    static const char op[] = "record_stream";
    if (!t) return tsi_error_set(TS_ERR_ARG, "%s: tensor is NULL", op);
    if (!stream) return tsi_error_set(TS_ERR_ARG, "%s: stream is NULL", op);
    if (tsi_device(t).type != TS_CUDA)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: the tensor (%s) is not on a cuda device; streams order the "
                             "memory of cuda tensors only",
                             op, tsi_desc(t));
    /* a stream object is its own allocator stream id (cuda_bridge.h); one of another device is
     * fine: the allocator orders reuse across devices with an event */
    tsi_storage_record_stream(t, (uintptr_t)stream);
    return TS_OK;
}
