/* cuda_prof_mark.cu — the profiler's device-time marks (cuda_bridge.h): a CUDA event with timing,
 * recorded on the calling thread's current stream of a device, and the time between two once the
 * stream has passed them. Failures here are the profiler's: they record no mark and set no error
 * (the runtime's error state is cleared), so profiling never changes what a program sees. */
#include <new>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_internal.h"

namespace {
struct prof_mark {
    cudaEvent_t ev;
};
} // namespace

extern "C" uint64_t tsc_prof_mark(int device) {
    int was = -1;
    if (cudaGetDevice(&was) != cudaSuccess) return (void)cudaGetLastError(), 0;
    cudaStream_t st = tsc_stream(device);
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    prof_mark *m = nullptr;
    /* no marks inside a capture: its events would time the recording, not the replay */
    if (cudaSetDevice(device) == cudaSuccess && cudaStreamIsCapturing(st, &cap) == cudaSuccess &&
        cap == cudaStreamCaptureStatusNone && (m = new (std::nothrow) prof_mark{}) != nullptr) {
        if (cudaEventCreateWithFlags(&m->ev, cudaEventDefault) != cudaSuccess) {
            delete m;
            m = nullptr;
        } else if (cudaEventRecord(m->ev, st) != cudaSuccess) {
            (void)cudaEventDestroy(m->ev);
            delete m;
            m = nullptr;
        }
    }
    (void)cudaGetLastError();
    (void)cudaSetDevice(was);
    return (uint64_t)(uintptr_t)m;
}

extern "C" int64_t tsc_prof_elapsed_ns(uint64_t from, uint64_t to) {
    prof_mark *a = (prof_mark *)(uintptr_t)from, *b = (prof_mark *)(uintptr_t)to;
    float ms = 0;
    if (!a || !b || cudaEventSynchronize(b->ev) != cudaSuccess ||
        cudaEventElapsedTime(&ms, a->ev, b->ev) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (int64_t)((double)ms * 1e6);
}

extern "C" void tsc_prof_mark_free(uint64_t mark) {
    prof_mark *m = (prof_mark *)(uintptr_t)mark;
    if (!m) return;
    (void)cudaEventDestroy(m->ev);
    (void)cudaGetLastError();
    delete m;
}
