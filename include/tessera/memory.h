/* tessera/memory.h — memory statistics per device and allocation-failure injection (via
 * tessera.h). */
#ifndef TESSERA_MEMORY_H
#define TESSERA_MEMORY_H

typedef struct ts_mem_stats {
    size_t allocated, peak_allocated, reserved, peak_reserved;
    uint64_t alloc_count, oom_count;
    int64_t live_tensors;
} ts_mem_stats;
TS_API ts_status ts_memory_stats(ts_device d, ts_mem_stats *out);
TS_API ts_status ts_memory_reset_peak(ts_device d);
TS_API ts_status ts_empty_cache(ts_device d);
/* bytes a device has in all and free (capacity - reserved for sim; RAM for cpu) */
TS_API ts_status ts_device_memory(ts_device d, size_t *free_bytes, size_t *total_bytes);
/* Allocation-failure injection, for testing error paths (SQLite's discipline): every allocation
 * the library makes, host (malloc and friends inside the library, tensor structs) or device (any
 * device's caching allocator, cache hits included), counts once. ts_fault_alloc_set(n) restarts
 * the count and makes the n-th allocation from now fail (once; the later ones succeed): the op that
 * made it reports TS_ERR_OOM naming itself, or its own error. n == 0 counts without failing,
 * n < 0 switches counting off (the default). The count is process-wide (every thread adds to it).
 * TS_FAULT_ALLOC=n in the environment calls ts_fault_alloc_set(n) at start-up. */
TS_API void ts_fault_alloc_set(int64_t n);
TS_API uint64_t ts_fault_alloc_count(void); /* allocations counted since the last set */
TS_API bool ts_fault_alloc_fired(void);     /* the n-th allocation was reached (and failed) */

#endif /* TESSERA_MEMORY_H */
