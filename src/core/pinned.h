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

/* One copy of a whole tensor's bytes between a device tensor and a pinned cpu tensor of the same
 * size (weight streaming, the optimizer's offload), queued on the device's copy engine where it has
 * one: the simulated link's (sim, while TS_SIM_LINK is on: whatever uses the destination's storage
 * next waits for it, tsi_copy_link_wait waits for it now) or the current stream (cuda: the pinned
 * block is not reused before the copy ran; *use, when use is not NULL, gets the copy's event for
 * tsi_copy_use_wait, 0 when the copy has completed already). The front ends reach both engines
 * only through these (the backends' bridges are private to core). */
typedef enum {
    TSI_COPY_FAILED = -1,    /* an error is set (TS_ERR_CUDA) */
    TSI_COPY_NOT_QUEUED = 0, /* no engine for it: the caller copies now */
    TSI_COPY_QUEUED = 1,
} tsi_copy_queue;
tsi_copy_queue tsi_copy_queue_h2d(ts_tensor *dev, ts_tensor *host, uintptr_t *use);
tsi_copy_queue tsi_copy_queue_d2h(ts_tensor *host, ts_tensor *dev, uintptr_t *use);
/* The host waits for a queued cuda copy's event on dev's device; *use becomes 0 (0: nothing) */
void tsi_copy_use_wait(ts_device dev, uintptr_t *use);
/* The host waits until the copies queued on dev's simulated link into t's storage (a device
 * tensor's, or a pinned host tensor's) have landed: before that storage is read or written
 * outside the ops, which wait by themselves (one relaxed load off sim or with nothing queued) */
void tsi_copy_link_wait(ts_device dev, ts_tensor *t);

#endif /* TS_CORE_PINNED_H */
