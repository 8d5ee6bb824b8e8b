/* alloc.h — the device-generic caching allocator (PyTorch's scheme) over a backend's raw memory. */
#ifndef TS_ALLOC_H
#define TS_ALLOC_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) allocates its scratch memory here too */
#endif

#include "backend/backend.h" /* inside: backend.h declares C functions with no linkage of its own */

typedef struct ts_allocator ts_allocator;
typedef struct ts_block ts_block; /* one allocation handed out; opaque */

/* One allocator per device (backend + index). Thread-safe. */
ts_allocator *tsi_allocator_new(const ts_backend *be, int index);
/* Frees every cached segment; live blocks (a leak) are reported by the caller's leak check. */
void tsi_allocator_destroy(ts_allocator *a);

/* Rounds like PyTorch (512-byte granularity; small pool <= 1 MiB carved from 2 MiB segments; large
 * requests from 20 MiB segments below 10 MiB, else rounded to 2 MiB), best-fit, splits and merges.
 * On raw failure: frees the cache, retries; then returns NULL, counts an OOM and writes into msg
 * (give it TS_OOM_MSG_LEN bytes) the request, the device's capacity and free memory, the bytes
 * allocated by tensors, reserved but unallocated, and the largest free cached block. */
#define TS_OOM_MSG_LEN 512
ts_block *tsi_allocator_alloc(ts_allocator *a, size_t nbytes, char *msg, size_t msg_len);
void tsi_allocator_release(ts_allocator *a, ts_block *b);
void *tsi_block_ptr(const ts_block *b);
size_t tsi_block_size(const ts_block *b); /* rounded size */

void tsi_allocator_stats(ts_allocator *a, ts_mem_stats *out); /* live_tensors left 0 */
void tsi_allocator_reset_peak(ts_allocator *a);
void tsi_allocator_empty_cache(ts_allocator *a);
/* "1.50 MiB" style formatting used in OOM messages */
void tsi_format_bytes(size_t n, char *buf, size_t len);

/* Memory snapshots (ts_memory_snapshot): every block of every segment, in address order within a
 * segment, under the allocator's lock (fn must not allocate from this allocator). */
typedef struct ts_alloc_block_info {
    const void *segment;   /* the segment's base address */
    size_t segment_size;   /* its total size */
    bool small_pool;       /* carved for requests <= 1 MiB */
    bool first_in_segment; /* a new segment starts with this block */
    const void *ptr;
    size_t size;
    bool allocated;
    void *const *frames; /* backtrace of the allocation (history recording on), else NULL */
    int nframes;
    const char *context; /* the allocating thread's context then (tsi_allocator_set_context) */
} ts_alloc_block_info;
typedef void (*ts_alloc_walk_fn)(void *ctx, const ts_alloc_block_info *b);
void tsi_allocator_walk(ts_allocator *a, ts_alloc_walk_fn fn, void *ctx);
/* Allocations from now on record their backtrace (at most TS_ALLOC_HISTORY_DEPTH frames). */
#define TS_ALLOC_HISTORY_DEPTH 24
void tsi_allocator_record_history(bool on);
/* The calling thread's allocation context: text (a binding's stack, as the JSON frames of
 * ts_memory_history_context) attached to each block this thread allocates while history recording
 * is on; NULL clears it. Copied; false (out of memory: the thread has none then). */
bool tsi_allocator_set_context(const char *text);
bool tsi_allocator_recording_history(void);
/* Called (outside every lock) after any allocator fails a request: TS_OOM_SNAPSHOT's writer. */
void tsi_allocator_set_oom_hook(void (*fn)(void));

/* Stream-ordered reuse, for devices whose work runs asynchronously on streams (CUDA). A block
 * remembers the streams that used it: the one it was allocated on, the one current when it was
 * released, and any recorded with tsi_allocator_record_stream. Reusing it from another stream first
 * makes that stream wait for the work those streams had queued (an event, no host wait), so a block
 * freed on stream S is reused on S at no cost and elsewhere safely. Stream ids are opaque and
 * non-zero; 0 stands for the host (a pinned host allocator's own allocations), which never needs
 * waiting for since host work is synchronous. The pinned host allocator's ids are uses rather than
 * streams: an event recorded right after each asynchronous copy from or to the block, so that
 * reusing it waits for those copies alone. The waits run after the allocator's lock is dropped
 * (the block is already taken), so a host wait stalls only the allocation that needs it. */
typedef struct ts_alloc_hooks {
    /* the calling thread's current stream on device `index` */
    uintptr_t (*current_stream)(int index);
    /* `to` waits for the work queued on `from` so far; to == 0: the host waits */
    void (*stream_wait)(int index, uintptr_t from, uintptr_t to);
    /* the host waits for all work on the device (a block used by too many streams, and before
     * cached segments go back to the driver) */
    void (*device_wait)(int index);
    /* the out-of-memory message gives the device's free and total memory (memory_info) */
    bool report_free;
    /* optional: true when waiting for use x also covers use y (y is done, or an earlier use on
     * x's stream), so a block's history keeps one pending use per stream; NULL: x == y only */
    bool (*covers)(int index, uintptr_t x, uintptr_t y);
    /* ids are streams that allocate (device memory): a free block stays in the pool of the stream
     * it was allocated on, and a stream takes from its own pool first (PyTorch's pools per
     * stream), from another's only when nothing else fits, before asking for more memory */
    bool stream_pools;
} ts_alloc_hooks;

/* Installs hooks before the allocator is first used (not thread-safe against allocations). */
void tsi_allocator_set_hooks(ts_allocator *a, const ts_alloc_hooks *h);
/* A live block is also used by `stream` (PyTorch's record_stream): whoever reuses it after its
 * release waits for that stream's work too. */
void tsi_allocator_record_stream(ts_allocator *a, ts_block *b, uintptr_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TS_ALLOC_H */
