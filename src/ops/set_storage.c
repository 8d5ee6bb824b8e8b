/* set_storage.c — a tensor's storage itself (tessera/storage.h): the whole storage viewed as a
 * 1-D tensor of any dtype (PyTorch's untyped_storage() / storage()), and the in-place ops that give
 * a tensor another storage or geometry: set_(source), set_(source, offset, size, stride), set_()
 * and as_strided_; and the address of a tensor's first element. They change t's own struct (the
 * handle every holder of t sees), so they are refused on a tensor that requires grad — its graph
 * would describe another tensor — except a leaf under no_grad (PyTorch's way of swapping a
 * parameter's data). */
#include "core/internal.h"
#include "tessera/autograd.h"
#include "tessera/storage.h"

static int64_t storage_elems(const ts_tensor *t, ts_dtype dtype) {
    return (int64_t)(t->storage->nbytes / tsi_dtype_size(dtype));
}

ts_tensor *ts_storage_view(ts_tensor *t, ts_dtype dtype) {
    const char *op = "storage";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if ((unsigned)dtype >= TS_DTYPE_COUNT || tsi_dtype_size(dtype) == 0)
        return tsi_error_set(TS_ERR_DTYPE, "%s: not a dtype (%d)", op, (int)dtype), NULL;
    const int64_t n = storage_elems(t, dtype), one = 1;
    ts_tensor *v = tsi_view_of(t, TS_SHAPE(n), &one, 0);
    if (!v) return NULL;
    v->dtype = dtype;
    return tsi_own(v);
}

/* may op change t's storage or geometry in place? */
static bool check_target(const char *op, ts_tensor *t) {
    if (!tsi_check_input(op, t, "self")) return false;
    if (!ts_requires_grad(t) || (ts_is_leaf(t) && !ts_grad_enabled())) return true;
    if (ts_is_leaf(t))
        tsi_error_set(TS_ERR_STATE,
                      "%s: a leaf Variable that requires grad is being used in an in-place "
                      "operation.",
                      op);
    else
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s: a tensor with autograd history (%s) cannot take another storage or "
                      "geometry in place; detach() it first",
                      op, tsi_desc(t));
    return false;
}

static bool check_source(const char *op, ts_tensor *t, ts_tensor *source) {
    if (!tsi_check_input(op, source, "source")) return false;
    if (!tsi_device_eq(tsi_device(t), tsi_device(source))) {
        tsi_error_set(TS_ERR_DEVICE,
                      "%s: attempted to set the storage of a tensor on %s to a storage on %s", op,
                      tsi_desc(t), tsi_desc(source));
        return false;
    }
    return true;
}

/* t takes v's storage, offset, shape and strides (v keeps t's old ones and is released) */
static ts_tensor *take_geometry(ts_tensor *t, ts_tensor *v) {
    ts_tensor old = *t;
    t->storage = v->storage, t->offset = v->offset, t->shape = v->shape;
    for (int i = 0; i < TS_MAX_DIMS; i++) t->strides[i] = v->strides[i];
    t->is_view = true;
    v->storage = old.storage, v->offset = old.offset, v->shape = old.shape;
    ts_release(v);
    tsi_bump_version(t);
    return t;
}

ts_tensor *ts_set_(ts_tensor *t, ts_tensor *source) {
    const char *op = "set_";
    tsi_init();
    if (!check_target(op, t) || !check_source(op, t, source)) return NULL;
    if (source->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: could not set tensor of type %s to a tensor of type %s", op,
                             ts_dtype_name(source->dtype), ts_dtype_name(t->dtype)),
               NULL;
    if (source == t) { /* nothing moves, but PyTorch counts it as a write */
        tsi_bump_version(t);
        return t;
    }
    ts_tensor *v = tsi_view_of(source, source->shape, source->strides, source->offset);
    return v ? take_geometry(t, v) : NULL;
}

/* the geometry of set_storage_ / as_strided_, checked against the storage's extent in bytes */
static ts_tensor *set_geometry(const char *op, ts_tensor *t, ts_tensor *source,
                               int64_t storage_offset, ts_shape size, const int64_t *stride) {
    if (size.ndim < 0 || size.ndim > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: at most %d dims, got %d", op, TS_MAX_DIMS,
                             size.ndim),
               NULL;
    if (storage_offset < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: storage_offset must be >= 0, got %lld", op,
                             (long long)storage_offset),
               NULL;
    int64_t st[TS_MAX_DIMS] = {0};
    if (stride)
        for (int d = 0; d < size.ndim; d++) st[d] = stride[d];
    else
        tsi_contiguous_strides(&size, st);
    int64_t last = storage_offset; /* the last element the geometry reaches */
    bool empty = false;
    for (int d = 0; d < size.ndim; d++) {
        if (size.dims[d] < 0 || st[d] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: negative sizes or strides are not supported, got size %lld "
                                 "and stride %lld at dim %d",
                                 op, (long long)size.dims[d], (long long)st[d], d),
                   NULL;
        empty |= size.dims[d] == 0;
        last += size.dims[d] > 0 ? (size.dims[d] - 1) * st[d] : 0;
    }
    const int64_t es = (int64_t)tsi_dtype_size(t->dtype);
    const int64_t need = empty ? 0 : (last + 1) * es, have = (int64_t)source->storage->nbytes;
    if (need > have)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: sizes %s, storage offset %lld and itemsize %lld requiring a "
                             "storage size of %lld are out of bounds for storage of size %lld",
                             op, tsi_shape_str(size), (long long)storage_offset, (long long)es,
                             (long long)need, (long long)have),
               NULL;
    ts_tensor *v = tsi_view_of(source, size, st, storage_offset);
    return v ? take_geometry(t, v) : NULL;
}

ts_tensor *ts_set_storage_(ts_tensor *t, ts_tensor *source, int64_t storage_offset, ts_shape size,
                           const int64_t *stride) {
    const char *op = "set_";
    tsi_init();
    if (!check_target(op, t) || !check_source(op, t, source)) return NULL;
    return set_geometry(op, t, source, storage_offset, size, stride);
}

ts_tensor *ts_as_strided_(ts_tensor *t, ts_shape size, const int64_t *stride,
                          int64_t storage_offset) {
    const char *op = "as_strided_";
    tsi_init();
    if (!check_target(op, t)) return NULL;
    if (size.ndim > 0 && !stride)
        return tsi_error_set(TS_ERR_ARG, "%s: size of %d dims needs a stride of as many", op,
                             size.ndim),
               NULL;
    return set_geometry(op, t, t, storage_offset < 0 ? t->offset : storage_offset, size, stride);
}

ts_tensor *ts_set_empty_(ts_tensor *t) {
    const char *op = "set_";
    tsi_init();
    if (!check_target(op, t)) return NULL;
    ts_tensor *fresh = tsi_new(op, TS_SHAPE(0), t->dtype, tsi_device(t));
    if (!fresh) return NULL;
    ts_tensor *v = tsi_view_of(fresh, fresh->shape, fresh->strides, 0);
    ts_release(fresh);
    return v ? take_geometry(t, v) : NULL;
}

uintptr_t ts_data_ptr(ts_tensor *t) {
    if (!tsi_check_input("data_ptr", t, "tensor")) return 0;
    if (!t->storage->data || !t->storage->nbytes || t->storage->device.type == TS_META) return 0;
    return (uintptr_t)((char *)t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype));
}

bool ts_is_set_to(ts_tensor *t, ts_tensor *other) {
    if (!t || !other || t->storage != other->storage || t->offset != other->offset ||
        t->shape.ndim != other->shape.ndim)
        return false;
    for (int d = 0; d < t->shape.ndim; d++)
        if (t->shape.dims[d] != other->shape.dims[d] || t->strides[d] != other->strides[d])
            return false;
    return true;
}
