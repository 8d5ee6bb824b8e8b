/* alloc.h — the device-generic caching allocator (PyTorch's scheme) over a backend's raw memory. */
#ifndef TS_ALLOC_H
#define TS_ALLOC_H

#include "backend/backend.h"

typedef struct ts_allocator ts_allocator;
typedef struct ts_block ts_block; /* one allocation handed out; opaque */

/* One allocator per device (backend + index). Thread-safe. */
ts_allocator *ts_allocator_new(const ts_backend *be, int index);
/* Frees every cached segment; live blocks (a leak) are reported by the caller's leak check. */
void ts_allocator_destroy(ts_allocator *a);

/* Rounds like PyTorch (512-byte granularity; small pool <= 1 MiB carved from 2 MiB segments; large
 * requests from 20 MiB segments below 10 MiB, else rounded to 2 MiB), best-fit, splits and merges.
 * On raw failure: frees the cache, retries; then returns NULL, counts an OOM and writes into msg
 * "tried to allocate X; N allocated, M reserved, capacity C" (sizes human-readable). */
ts_block *ts_allocator_alloc(ts_allocator *a, size_t nbytes, char *msg, size_t msg_len);
void ts_allocator_release(ts_allocator *a, ts_block *b);
void *ts_block_ptr(const ts_block *b);
size_t ts_block_size(const ts_block *b); /* rounded size */

void ts_allocator_stats(ts_allocator *a, ts_mem_stats *out); /* live_tensors left 0 */
void ts_allocator_reset_peak(ts_allocator *a);
void ts_allocator_empty_cache(ts_allocator *a);
/* "1.50 MiB" style formatting used in OOM messages */
void ts_format_bytes(size_t n, char *buf, size_t len);

#endif /* TS_ALLOC_H */
