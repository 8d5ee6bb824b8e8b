/* tensor_move_api.c — the public in-place moves (PyTorch's `p.data = p.data.to(...)`) and
 * `p.data = x`: code outside the C module system (the Python nn.Module, Tensor.data) changes what
 * a handle holds with these, so whoever keeps the handle (an optimizer, a C module) follows. */
#include "core/internal.h"

/* t's grad, when it has one, follows t (as ts_module_to does for parameters). */
ts_status ts_tensor_move_(ts_tensor *t, ts_device d) {
    tsi_init();
    if (!tsi_check_input("tensor_move_", t, "tensor")) return ts_error();
    if (tsi_tensor_move_storage(t, d) != TS_OK) return ts_error();
    return t->grad ? tsi_tensor_move_storage(t->grad, d) : TS_OK;
}

ts_status ts_tensor_cast_(ts_tensor *t, ts_dtype dt) {
    tsi_init();
    if (!tsi_check_input("tensor_cast_", t, "tensor")) return ts_error();
    if ((unsigned)dt >= TS_DTYPE_COUNT)
        return tsi_error_set(TS_ERR_DTYPE, "tensor_cast_: invalid dtype %d", (int)dt);
    if (tsi_tensor_cast_storage(t, dt) != TS_OK) return ts_error();
    return t->grad ? tsi_tensor_cast_storage(t->grad, dt) : TS_OK;
}

/* t takes a view of src's storage (shape, strides, offset, dtype); a view made for the purpose
 * takes t's old storage away and frees it. The swap keeps the per-device live-tensor counts right,
 * as adopt_storage in tensor_move.c does. */
ts_status ts_tensor_set_data(ts_tensor *t, ts_tensor *src) {
    tsi_init();
    if (!tsi_check_input("tensor_set_data", t, "tensor") ||
        !tsi_check_input("tensor_set_data", src, "src"))
        return ts_error();
    ts_tensor *v = tsi_view_of(src, src->shape, src->strides, src->offset);
    if (!v) return ts_error();
    ts_tensor old = *t;
    t->storage = v->storage, t->dtype = v->dtype, t->offset = v->offset, t->shape = v->shape;
    t->is_view = true;
    for (int i = 0; i < TS_MAX_DIMS; i++) t->strides[i] = v->strides[i];
    v->storage = old.storage, v->dtype = old.dtype, v->offset = old.offset, v->shape = old.shape;
    ts_release(v);
    return TS_OK;
}
