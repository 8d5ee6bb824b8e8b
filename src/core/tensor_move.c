/* tensor_move.c — replacing a tensor's storage in place (module.to keeps the parameter handles). */
#include "core/internal.h"

/* t takes copy's storage (contiguous, offset 0) and copy takes t's old one, so that releasing copy
 * frees the old memory and the per-device live-tensor counts stay right (t now counts where its
 * new storage lives). The version counter carries over: saved-tensor checks see no change. */
static void adopt_storage(ts_tensor *t, ts_tensor *copy) {
    ts_storage *old = t->storage;
    atomic_store(&copy->storage->version, atomic_load(&old->version));
    t->storage = copy->storage;
    copy->storage = old;
    t->dtype = copy->dtype;
    t->offset = 0;
    tsi_contiguous_strides(&t->shape, t->strides);
    t->is_view = false;
    ts_release(copy);
}

ts_status tsi_tensor_move_storage(ts_tensor *t, ts_device d) {
    if (!tsi_check_input("module_to", t, "tensor")) return ts_error();
    d = tsi_resolve_device(d);
    if (tsi_device_eq(d, tsi_device(t))) return TS_OK;
    ts_tensor *copy = tsi_to_device("module_to", t, d);
    if (!copy) return ts_error();
    adopt_storage(t, copy);
    return TS_OK;
}

ts_status tsi_tensor_cast_storage(ts_tensor *t, ts_dtype dt) {
    if (!tsi_check_input("module_to_dtype", t, "tensor")) return ts_error();
    dt = tsi_resolve_dtype(dt);
    if (t->dtype == dt) return TS_OK;
    ts_tensor *copy = tsi_cast("module_to_dtype", t, dt);
    if (!copy) return ts_error();
    adopt_storage(t, copy);
    return TS_OK;
}
