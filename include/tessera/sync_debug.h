/* tessera/sync_debug.h — implicit host-device synchronisations (PyTorch's set_sync_debug_mode)
 * and memory snapshots with allocation history (PyTorch's _snapshot / _record_memory_history).
 * See docs/PROFILING.md ("Implicit synchronisations", "Memory snapshots"). */
#ifndef TESSERA_SYNC_DEBUG_H
#define TESSERA_SYNC_DEBUG_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an operation that makes the host wait for a non-cpu device (sim devices included) does:
 * ts_item, device-to-host copies into pageable memory (ts_to(cpu), ts_copy_to_host), ops whose
 * output size depends on device data (nonzero, masked_select, unique...). An explicit
 * synchronize (ts_cuda_synchronize, stream and event synchronize) is not reported; cpu tensors
 * never are. TS_SYNC_DEBUG=warn|error at start-up. */
typedef enum ts_sync_debug {
    TS_SYNC_DEBUG_OFF = 0,  /* nothing (the default) */
    TS_SYNC_DEBUG_WARN = 1, /* a warning, once per call site */
    TS_SYNC_DEBUG_ERROR = 2 /* the op fails with TS_ERR_STATE naming itself */
} ts_sync_debug;
TS_API ts_status ts_set_sync_debug_mode(ts_sync_debug mode); /* TS_ERR_ARG for another value */
TS_API ts_sync_debug ts_get_sync_debug_mode(void);

typedef struct ts_sync_event {
    const char *op; /* "item", "copy_to_host", "to", "nonzero" ... */
    ts_device device;
    const void *site; /* the caller's return address in the public function */
    bool first;       /* the first report from this site (the default handler prints only these) */
    bool error;       /* error mode: the op fails after the handler returns */
} ts_sync_event;
/* Called for every implicit synchronisation while the mode is not OFF, in the thread doing it.
 * NULL restores the default (one line on stderr per new call site in warn mode). */
typedef void (*ts_sync_debug_handler)(void *ctx, const ts_sync_event *ev);
TS_API void ts_set_sync_debug_handler(ts_sync_debug_handler fn, void *ctx);
/* Forgets the call sites already reported (so they warn again). */
TS_API void ts_sync_debug_reset(void);

/* Memory snapshots: every segment of every device's caching allocator (pinned host memory as
 * device "cpu_pinned") in PyTorch's _snapshot() layout, as JSON. */
TS_API ts_status ts_memory_snapshot(const char *path); /* TS_ERR_IO when the file fails */
/* The same JSON as a malloc'ed string the caller frees with free(); NULL with TS_ERR_OOM. */
TS_API char *ts_memory_snapshot_json(void);
/* From now on each allocation records its C backtrace (bounded depth, from the caller of the
 * allocator), listed in snapshots. */
TS_API void ts_memory_record_history(bool enabled);
TS_API bool ts_memory_recording_history(void);
/* The calling thread's allocation context: frames listed after the C backtrace of each allocation
 * this thread makes while history recording is on, as a JSON array of PyTorch's snapshot frames
 * ([{"name": ..., "filename": ..., "line": ...}], innermost first; other text is listed as one
 * frame named by it). A binding passes its caller's stack: the Python package sets the Python
 * frames of each call into the library. It stays until replaced; NULL clears it. The text is
 * copied. TS_ERR_OOM: the thread then has no context. */
TS_API ts_status ts_memory_history_context(const char *frames_json);
/* Writes a snapshot to path whenever an allocation fails (NULL: off). TS_OOM_SNAPSHOT=path at
 * start-up sets it. */
TS_API ts_status ts_memory_set_oom_snapshot(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_SYNC_DEBUG_H */
