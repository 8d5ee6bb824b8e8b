/* cuda_bridge.h — the seam between the C core and the CUDA backend: plain C declarations that both
 * sides include. The CUDA side implements the tsc_* functions (C linkage, .cu files); in a build
 * without CUDA, src/core/cuda_stub.c implements them, so the core calls them unconditionally. */
#ifndef TS_CUDA_BRIDGE_H
#define TS_CUDA_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- implemented by the CUDA backend (or cuda_stub.c) */

/* Start-up (from tsi_init): asks the runtime for devices and registers the "cuda" backend when
 * there is at least one. Returns the device count; with none, tsc_unavailable_reason says why. */
int tsc_backend_init(void);
/* Why cuda:N is not available: "Tessera was built without CUDA support", "no CUDA device: ...",
 * "no CUDA driver is installed: ..." (both: nothing to run on), or "CUDA failed to start: <the
 * runtime's message> [<its error name>]" (a driver answered with an error: too old, broken...). */
const char *tsc_unavailable_reason(void);
/* True in the last case: the machine has a CUDA driver, but CUDA could not start. */
bool tsc_start_failed(void);
/* The calling thread's current CUDA device (ts_cuda_set_device; 0 until set). */
int tsc_current_device(void);

/* The caching allocator's stream hooks for cuda:N allocators; NULL without CUDA. */
const ts_alloc_hooks *tsc_device_alloc_hooks(void);
/* Page-locked host memory (cudaHostAlloc, portable across devices) as a raw-memory backend for a
 * caching allocator, and its hooks; NULL without CUDA or without a device. */
const ts_backend *tsc_pinned_backend(void);
const ts_alloc_hooks *tsc_pinned_alloc_hooks(void);
/* The allocator's id of the calling thread's current stream on `device`. */
uintptr_t tsc_current_stream_id(int device);
/* A use of a pinned block by the work queued so far on the current stream of `device` (an
 * asynchronous copy from or to it): an event recorded now, as an id for the pinned allocator's
 * tsi_allocator_record_stream, so that the block's reuse waits for that copy alone. 0 when no event
 * could be recorded: then this has waited for the stream instead. */
uintptr_t tsc_pinned_use_record(int device);
/* The device the CUDA runtime has current for the calling thread (cudaGetDevice), -1 without
 * CUDA: the backend's helpers that may run on any thread must leave it as they found it. */
int tsc_runtime_device(void);
/* cuDNN convolution calls run and declined (CUDNN_STATUS_NOT_SUPPORTED) since start-up, for the
 * tests; -1 each in a build without cuDNN. */
void tsc_cudnn_counters(long long *runs, long long *declined);
/* channels_last convolution passes (cuda_conv_nhwc.cu) run by cuDNN on the NHWC data as it lies,
 * and through NCHW copies, since start-up, for the tests; -1 each without CUDA. */
void tsc_conv_nhwc_counters(long long *native, long long *copied);
/* Test hooks of the tensor-core attention (cuda_sdpa_tc.cu): tsc_sdpa_tc_force(1 or 0) switches
 * it on or off for the process, -1 back to TS_CUDA_SDPA_TC's setting (off when "0");
 * tsc_sdpa_tc_runs counts the forward and backward passes it has run, -1 without CUDA. */
void tsc_sdpa_tc_force(int mode);
long long tsc_sdpa_tc_runs(void);
/* Host -> device copy queued on the current stream of `device`, returning at once: the source must
 * be page-locked and stay untouched until the copy ran (the pinned allocator sees to that when
 * the caller records the stream on the source block). False + TS_ERR_CUDA on failure. */
bool tsc_copy_h2d_async(int device, void *dst, const void *src, size_t n);
/* Device -> host copy queued on the current stream of `device`, returning at once: dst must be
 * page-locked, and the host reads it only after the copy ran: record the use
 * (tsc_pinned_use_record, also for tsi_storage_record_stream on dst's block) and wait for it with
 * tsc_pinned_alloc_hooks()->stream_wait(device, use, 0). False + TS_ERR_CUDA on failure. */
bool tsc_copy_d2h_async(int device, void *dst, const void *src, size_t n);
/* The profiler's device-time marks (cuda_prof_mark.cu): tsc_prof_mark records a timing event on
 * the current stream of `device` now and returns it as a nonzero id (0: none could be recorded,
 * or the stream is being captured); tsc_prof_elapsed_ns waits until the stream has passed `to`
 * and returns the nanoseconds from `from` to it (-1: unknown); tsc_prof_mark_free releases one
 * (0 allowed). None of them sets an error. */
uint64_t tsc_prof_mark(int device);
int64_t tsc_prof_elapsed_ns(uint64_t from, uint64_t to);
void tsc_prof_mark_free(uint64_t mark);

/* ---- implemented by the C core for the CUDA backend */

/* library start-up (idempotent; src/core/init.c) */
void tsi_init_once(void);
/* the caching allocator of cuda:index (src/core/memory.c) */
ts_allocator *tsi_cuda_allocator(int index);
/* the page-locked host allocator (src/core/memory.c); NULL without a CUDA device */
ts_allocator *tsi_pinned_allocator(void);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_BRIDGE_H */
