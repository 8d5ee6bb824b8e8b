/* resize.c — Tensor.resize_ / resize_as_: t takes a new shape, contiguous from its storage
 * offset; a storage too small for it is replaced by a larger one holding the old bytes first (the
 * new elements are uninitialised, as PyTorch's). Other views of the old storage keep the old one
 * (PyTorch grows the storage they share). Refused on a tensor that requires grad, as PyTorch. */
#include "core/internal.h"

ts_tensor *ts_resize_(ts_tensor *t, ts_shape size) {
    const char *op = "resize_";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->requires_grad)
        return tsi_error_set(TS_ERR_STATE, "%s: cannot resize variables that require grad", op),
               NULL;
    if (size.ndim < 0 || size.ndim > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: at most %d dims", op, TS_MAX_DIMS), NULL;
    int64_t n = 1;
    for (int d = 0; d < size.ndim; d++) {
        if (size.dims[d] < 0)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: Trying to create tensor with negative dimension %lld: %s", op,
                                 (long long)size.dims[d], tsi_shape_str(size)),
                   NULL;
        n *= size.dims[d];
    }
    const size_t es = tsi_dtype_size(t->dtype);
    const size_t need = (size_t)(t->offset + n) * es;
    if (t->storage->nbytes < need) { /* a larger storage, the old bytes first */
        const int64_t elems = t->offset + n;
        ts_tensor *grown = tsi_new(op, TS_SHAPE(elems), t->dtype, tsi_device(t));
        if (!grown) return NULL;
        const size_t old = t->storage->nbytes;
        if (old && t->storage->data)
            tsi_be(t)->copy_d2d(tsi_be(t), tsi_dev_index(grown), grown->storage->data,
                                tsi_dev_index(t), t->storage->data, old);
        t->shape = size;
        tsi_tensor_alias_storage(t, grown, t->offset);
        t->is_view = false;
        ts_release(grown);
    } else {
        t->shape = size;
        tsi_contiguous_strides(&t->shape, t->strides);
    }
    tsi_bump_version(t);
    return t;
}

ts_tensor *ts_resize_as_(ts_tensor *t, ts_tensor *other) {
    if (!tsi_check_input("resize_as_", other, "the_template")) return NULL;
    return ts_resize_(t, other->shape);
}
