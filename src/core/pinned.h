/* pinned.h — page-locked host memory and the asynchronous copy that uses it (memory.c,
 * transfer.c), for the factories and transfer ops. */
#ifndef TS_CORE_PINNED_H
#define TS_CORE_PINNED_H

#include "core/internal.h"

/* Marks a cpu tensor pinned. With CUDA available its storage moves to page-locked memory from the
 * pinned caching allocator (cudaHostAlloc); without, "pinned" is only the flag. The contents are
 * dropped: call it on a tensor just made by tsi_new, before writing it. False + TS_ERR_OOM. */
bool tsi_storage_pin(const char *op, ts_tensor *t);
/* The storage is also used by work queued on `stream` (an allocator stream id). */
void tsi_storage_record_stream(ts_tensor *t, uintptr_t stream);

/* ts_to_async's copy: from pinned cpu memory to a cuda device it is queued on the current stream
 * and returns at once (the source block is not reused before the copy ran); everything else is
 * tsi_to_device. Same ownership as tsi_to_device. */
ts_tensor *tsi_to_device_async(const char *op, ts_tensor *t, ts_device d);

#endif /* TS_CORE_PINNED_H */
