/* cuda_device.h — the runtime part's own helpers, shared by its .cu files (not by the kernels). */
#ifndef TS_CUDA_DEVICE_H
#define TS_CUDA_DEVICE_H

#include "backend/cuda/cuda_internal.h"

/* Start-up: counts the devices and reads their properties; 0 keeps the reason for messages. */
int tsc_runtime_probe(void);

/* Public API guards: TS_ERR_DEVICE "<op>: CUDA is not available (no CUDA device: ...)" unless a
 * device exists; tsc_api_device also resolves -1 to the thread's current device and range-checks
 * it ("<op>: invalid device cuda:5 (2 CUDA devices)"). */
bool tsc_api_available(const char *op);
bool tsc_api_device(const char *op, int *device);

/* A stream as the public API and the caching allocator see it. Streams are pooled and never
 * destroyed, so a pointer to one stays a valid allocator stream id for the life of the process. */
struct ts_cuda_stream {
    cudaStream_t handle; /* cudaStreamLegacy for a device's default stream */
    int device;
    bool is_default;
    bool pooled;               /* freed: waiting in the pool (a second free is caught) */
    unsigned gen;              /* bumped by every free: a thread's slot set before is stale */
    ts_cuda_stream *next_free; /* pool link while free */
};

/* Start-up: the default stream objects of devices 0..count-1. */
void tsc_streams_init(int count);

/* The calling thread's current stream object on `index` (its default stream unless set). */
ts_cuda_stream *tsc_stream_obj(int index);

#endif /* TS_CUDA_DEVICE_H */
