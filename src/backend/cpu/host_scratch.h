/* host_scratch.h — cached host memory for kernels' temporary buffers (oneDNN's reorders and
 * scratchpads): a caching allocator of its own over the cpu backend's raw memory, so a buffer of
 * many megabytes needed at every call is not mapped, faulted in page by page and unmapped each
 * time. Thread-safe. Not counted in the device's memory statistics (like malloc'ed scratch). */
#ifndef TS_HOST_SCRATCH_H
#define TS_HOST_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct ts_block ts_block;

/* Bytes for n floats rounded up to a 64-byte line: the parts of one scratch block that holds
 * several float buffers side by side. */
static inline size_t tsi_scratch_float_bytes(int64_t n) {
    return ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
}

/* n bytes, 512-byte aligned, or NULL (out of memory; *block is then NULL). Give the block back
 * with tsi_host_scratch_put (NULL-safe). */
void *tsi_host_scratch_get(size_t n, ts_block **block);
void tsi_host_scratch_put(ts_block *block);
/* Returns the cached buffers to the system (ts_empty_cache on the cpu). */
void tsi_host_scratch_empty(void);

#endif /* TS_HOST_SCRATCH_H */
