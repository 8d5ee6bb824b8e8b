/* registry.c — the table of backends, one per device type, filled at library start-up. */
#include <stdatomic.h>

#include "backend/backend.h"

#define TYPE_SLOTS 5 /* TS_DEVICE_DEFAULT, TS_CPU, TS_CUDA, TS_SIM, TS_META */

/* Atomic because ops on worker threads look backends up while start-up may still register one. */
static _Atomic(const ts_backend *) registry[TYPE_SLOTS];

const ts_backend *tsi_backend_for(ts_device_type type) {
    if ((int)type <= (int)TS_DEVICE_DEFAULT || (int)type >= TYPE_SLOTS) return NULL;
    return atomic_load_explicit(&registry[type], memory_order_acquire);
}

void tsi_backend_register(const ts_backend *be) {
    if (!be || (int)be->type <= (int)TS_DEVICE_DEFAULT || (int)be->type >= TYPE_SLOTS) return;
    atomic_store_explicit(&registry[be->type], be, memory_order_release);
}
