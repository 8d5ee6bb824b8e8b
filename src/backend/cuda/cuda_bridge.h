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
/* "Tessera was built without CUDA support", or "no CUDA device: <the runtime's message>". */
const char *tsc_unavailable_reason(void);
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
/* Host -> device copy queued on the current stream of `device`, returning at once: the source must
 * be page-locked and stay untouched until the copy ran (the pinned allocator sees to that when
 * the caller records the stream on the source block). False + TS_ERR_CUDA on failure. */
bool tsc_copy_h2d_async(int device, void *dst, const void *src, size_t n);

/* ---- implemented by the C core for the CUDA backend */

/* library start-up (idempotent; src/core/init.c) */
void tsi_init_once(void);
/* the caching allocator of cuda:index (src/core/memory.c) */
ts_allocator *tsi_cuda_allocator(int index);

#ifdef __cplusplus
}
#endif

#endif /* TS_CUDA_BRIDGE_H */
