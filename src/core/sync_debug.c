/* sync_debug.c — PyTorch's sync debug mode: reports (once per call site) or refuses the operations
 * that make the host wait for a non-cpu device. */
#include "core/sync_debug.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "core/internal.h"

#define SITES                                                                                      \
    1024 /* distinct (op, call site) pairs remembered; past that each report is "first"            \
          */

atomic_int tsi_sync_mode;
static _Thread_local tsi_sync_ctx outer;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ts_sync_debug_handler handler;
static void *handler_ctx;
static struct {
    const void *site;
    const char *op;
} seen[SITES];
static int nseen;

ts_status ts_set_sync_debug_mode(ts_sync_debug mode) {
    tsi_init(); /* TS_SYNC_DEBUG is read first, so that this call overrides it */
    if (mode != TS_SYNC_DEBUG_OFF && mode != TS_SYNC_DEBUG_WARN && mode != TS_SYNC_DEBUG_ERROR)
        return tsi_error_set(TS_ERR_ARG,
                             "set_sync_debug_mode: mode must be 0 (default), 1 (warn) or 2 "
                             "(error), got %d",
                             (int)mode);
    atomic_store(&tsi_sync_mode, (int)mode);
    return TS_OK;
}

ts_sync_debug ts_get_sync_debug_mode(void) {
    tsi_init();
    return (ts_sync_debug)atomic_load(&tsi_sync_mode);
}

void ts_set_sync_debug_handler(ts_sync_debug_handler fn, void *ctx) {
    pthread_mutex_lock(&mu);
    handler = fn;
    handler_ctx = ctx;
    pthread_mutex_unlock(&mu);
}

void ts_sync_debug_reset(void) {
    pthread_mutex_lock(&mu);
    nseen = 0;
    pthread_mutex_unlock(&mu);
}

tsi_sync_ctx tsi_sync_enter(const char *op, const void *site) {
    tsi_sync_ctx saved = outer;
    if (!outer.op) outer = (tsi_sync_ctx){op, site};
    return saved;
}

void tsi_sync_leave(tsi_sync_ctx saved) { outer = saved; }

/* True the first time (op, site) is seen. */
static bool first_seen(const char *op, const void *site) {
    for (int i = 0; i < nseen; i++)
        if (seen[i].site == site && seen[i].op == op) return false;
    if (nseen < SITES) seen[nseen].site = site, seen[nseen++].op = op;
    return true;
}

bool tsi_sync_report(const char *op, ts_device d, const void *site) {
    int mode = atomic_load(&tsi_sync_mode);
    if (mode == TS_SYNC_DEBUG_OFF) return true;
    if (outer.op) op = outer.op, site = outer.site;
    pthread_mutex_lock(&mu);
    ts_sync_event ev = {.op = op,
                        .device = d,
                        .site = site,
                        .first = first_seen(op, site),
                        .error = mode == TS_SYNC_DEBUG_ERROR};
    ts_sync_debug_handler fn = handler;
    void *ctx = handler_ctx;
    pthread_mutex_unlock(&mu);
    if (fn)
        fn(ctx, &ev);
    else if (ev.first && !ev.error)
        fprintf(stderr,
                "tessera: warning: %s called a synchronizing operation on %s (call site %p)\n", op,
                ts_device_str(d), site);
    if (!ev.error) return true;
    tsi_error_set(TS_ERR_STATE,
                  "%s: called a synchronizing operation on %s while the sync debug mode is "
                  "\"error\" (ts_set_sync_debug_mode)",
                  op, ts_device_str(d));
    return false;
}
