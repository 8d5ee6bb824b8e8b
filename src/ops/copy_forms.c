/* copy_forms.c — the copying forms of views and fills (issue 76): expand_copy, squeeze_copy,
 * view_copy (by shape or by dtype), torch.fill (a filled copy) and nonzero_static. Each result is a
 * fresh contiguous tensor that never aliases its input (PyTorch's *_copy), composed of the view,
 * clone, contiguous and copy_, so gradients flow as through the view. */
#include "autograd/autograd.h"
#include "core/internal.h"

/* a fresh contiguous copy of the view v (kept out of the caller's scope by the caller) */
static ts_tensor *fresh(ts_tensor *v) {
    if (!v) return NULL;
    return ts_is_contiguous(v) ? ts_clone(v) : ts_contiguous(v);
}

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_expand_copy(ts_tensor *t, ts_shape size) {
    tsi_init();
    if (!tsi_check_input("expand_copy", t, "input")) return NULL;
    ts_scope_begin();
    return finish(fresh(ts_expand(t, size)));
}

ts_tensor *ts_squeeze_copy(ts_tensor *t, const ts_dims *dims) {
    tsi_init();
    if (!tsi_check_input("squeeze_copy", t, "input")) return NULL;
    ts_scope_begin();
    return finish(fresh(dims ? ts_squeeze_dims(t, *dims) : ts_squeeze(t)));
}

ts_tensor *ts_view_copy(ts_tensor *t, ts_shape size) {
    tsi_init();
    if (!tsi_check_input("view_copy", t, "input")) return NULL;
    ts_scope_begin();
    return finish(fresh(ts_reshape(t, size)));
}

ts_tensor *ts_view_copy_dtype(ts_tensor *t, ts_dtype dtype) {
    tsi_init();
    if (!tsi_check_input("view_copy", t, "input")) return NULL;
    ts_scope_begin();
    return finish(fresh(ts_view_dtype(t, dtype)));
}

ts_tensor *ts_fill(ts_tensor *t, ts_tensor *value) {
    const char *op = "fill";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!value) {
        tsi_error_set(TS_ERR_ARG, "%s: value is NULL", op);
        return NULL;
    }
    if (value->shape.ndim != 0) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: fill only supports 0-dimension value tensor but got tensor with %d "
                      "dimensions.",
                      op, value->shape.ndim);
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *v = value;
    v = ts_to(v, ts_device_of(t)); /* a cpu 0-dim value goes to t's device */
    ts_tensor *y = v ? ts_clone(t) : NULL;
    return finish(y ? ts_copy_(y, v) : NULL);
}

ts_tensor *ts_nonzero_static(ts_tensor *t, int64_t size, int64_t fill_value) {
    const char *op = "nonzero_static";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (size < 0) {
        tsi_error_set(TS_ERR_ARG, "%s(): 'size' must be an non-negative integer", op);
        return NULL;
    }
    const int nd = t->shape.ndim;
    const ts_opts o = {.dtype = TS_I64, .device = ts_device_of(t)};
    if (tsi_device(t).type == TS_META) /* a static size: the shape needs no values */
        return ts_empty(TS_SHAPE(size, nd), o);
    ts_scope_begin();
    ts_tensor *nz = ts_nonzero(t), *y = NULL;
    if (nz) {
        const int64_t n = nz->shape.dims[0];
        if (n >= size) {
            y = fresh(ts_narrow(nz, 0, 0, size));
        } else {
            ts_tensor *parts[2] = {nz, ts_full(TS_SHAPE(size - n, nd), (double)fill_value, o)};
            y = parts[1] ? ts_cat(parts, 2, 0) : NULL;
        }
    }
    return finish(y);
}
