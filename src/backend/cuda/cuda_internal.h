/* cuda_internal.h — what the CUDA backend's files share (compiled by nvcc as C++; no C-only
 * headers such as core/internal.h here). Owned by the CUDA runtime part (cuda_backend.cu);
 * the compute kernels (reduce, matmul, conv, ...) use only what is declared here. */
#ifndef TS_CUDA_INTERNAL_H
#define TS_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h" /* inside: backend.h declares C functions with no linkage of its own */

#ifdef __cplusplus
}
#endif

#include "backend/kernel_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device indices go up to this (the core's per-device tables have as many slots). */
#define TSC_MAX_DEVICES 64

/* The sticky error of the calling thread (src/core/error.c): first error wins. */
ts_status tsi_error_set(ts_status code, const char *fmt, ...);

/* Records TS_ERR_CUDA "<what>: <cudaGetErrorString(e)> [<cudaGetErrorName(e)>] (cuda:<device>)"
 * unless e == cudaSuccess; returns e == cudaSuccess. Clears the runtime's last-error state. */
bool tsc_check(cudaError_t e, const char *what, int device);

/* Makes device `index` current for the calling thread (cheap when already current). */
bool tsc_set_device(int index);

/* The calling thread's current stream on device `index` (the legacy default stream unless the user
 * selected another one). Every kernel launches on it; host code synchronises only when it must. */
cudaStream_t tsc_stream(int index);

/* Scratch device memory for a kernel (workspaces: cuBLAS/cuDNN, two-pass reductions), from the
 * device's caching allocator, stream-ordered on tsc_stream(index). NULL + TS_ERR_OOM on failure. */
void *tsc_scratch_alloc(int index, size_t nbytes);
void tsc_scratch_free(int index, void *p);

/* Device memory for a table the host builds (tsc_copy_table_h2d's dst; freed with
 * tsc_scratch_free): scratch memory, except while a CUDA graph is built, when it is a block of the
 * graph's that no other kernel uses (the table is uploaded once and read by every launch). */
void *tsc_table_alloc(int index, size_t nbytes);

/* Copies a table the host built (the optimizer's and the grad scaler's tensor tables) to device
 * memory (from tsc_table_alloc), queued on tsc_stream(index). The bytes go through a pinned block
 * that is handed out again only after the copy's event, so the caller may free src at once and the
 * copy is truly asynchronous; without pinned memory the host waits for the copy. False +
 * TS_ERR_CUDA. */
bool tsc_copy_table_h2d(int index, void *dst, const void *src, size_t n, const char *what);

/* While this thread builds a captured step into a CUDA graph on device `index` (cuda_graph.cu):
 * tsc_graph_capturing is true; tsc_graph_counters gives the graph's Philox {seed, base} on the
 * device, which the random kernels add their (relative) offsets to (NULL when not building);
 * scratch memory and tables are the graph's (*handled true: the graph took the call). */
bool tsc_graph_capturing(int index);
const uint64_t *tsc_graph_counters(int index);
void *tsc_graph_scratch_alloc(int index, size_t nbytes, bool *handled);
void *tsc_graph_table_alloc(int index, size_t nbytes, bool *handled);
bool tsc_graph_scratch_free(int index, void *p); /* true: p was the graph's */
bool tsc_graph_table_h2d(int index, void *dst, const void *src, size_t n, const char *what,
                         bool *handled);
void tsc_install_graph(ts_backend *be);

/* Installs the compute kernels (reduce, matmul, index ops, softmax, conv2d, pooling, optimizer
 * steps, amp) into the CUDA backend table: src/backend/cuda/cuda_compute.cu. */
void tsc_install_compute_kernels(ts_backend *be);

/* Number of CUDA devices found at start-up (0 when none or no driver). */
int tsc_device_count(void);

/* Properties of device `index`, read once at start-up (multiProcessorCount, ...). */
const cudaDeviceProp *tsc_props(int index);

/* After a kernel launch: records TS_ERR_CUDA naming `kernel` when the launch failed. With
 * TS_CUDA_SYNC=1 in the environment it also waits for the kernel, so an asynchronous fault (an
 * illegal address, say) is reported against the kernel that caused it. Returns true when fine. */
bool tsc_launch_check(const char *kernel, int device);

/* Blocks for a grid-stride kernel of `items` work items with `threads` per block: enough to fill
 * the device, never more than the work needs, at least 1. */
unsigned tsc_grid_size(int index, int64_t items, unsigned threads);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* The Philox seed and offset a random kernel draws at: its own, or in a CUDA graph (counters from
 * tsc_graph_counters: {seed, base}, set before each launch) the graph's seed and base + its
 * offset, which is relative there. */
TS_HD inline void tsc_philox_at(const uint64_t *counters, uint64_t *seed, uint64_t *offset) {
    if (!counters) return;
    *seed = counters[0];
    *offset += counters[1];
}
#endif

#endif /* TS_CUDA_INTERNAL_H */
