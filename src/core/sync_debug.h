/* sync_debug.h — the library's calls into the implicit-synchronisation checker (sync_debug.c).
 * A host read of a non-cpu device's memory calls tsi_sync_point; a public op whose result size
 * depends on device data brackets its body with tsi_sync_enter/leave so that the reads inside are
 * reported under its name and its caller's address. Off, a check is one relaxed atomic load. */
#ifndef TS_CORE_SYNC_DEBUG_H
#define TS_CORE_SYNC_DEBUG_H

#include <stdatomic.h>

#include "tessera/sync_debug.h"

extern atomic_int tsi_sync_mode;

typedef struct tsi_sync_ctx {
    const char *op;
    const void *site;
} tsi_sync_ctx;

/* The caller's return address of the enclosing public function. */
#define TSI_CALLER __builtin_return_address(0)

bool tsi_sync_report(const char *op, ts_device d, const void *site);
/* False (error set, TS_ERR_STATE) when error mode refuses the host wait; true otherwise. */
static inline bool tsi_sync_point(const char *op, ts_device d, const void *site) {
    if (d.type == TS_CPU || atomic_load_explicit(&tsi_sync_mode, memory_order_relaxed) == 0)
        return true;
    return tsi_sync_report(op, d, site);
}
/* Opens an outer op (the outermost wins); hand the result to tsi_sync_leave. */
tsi_sync_ctx tsi_sync_enter(const char *op, const void *site);
void tsi_sync_leave(tsi_sync_ctx saved);

#endif /* TS_CORE_SYNC_DEBUG_H */
