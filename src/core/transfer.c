/* transfer.c — copies: between devices (ts_to), between dtypes, to contiguous memory, in place. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

ts_tensor *tsi_contiguous(const char *op, ts_tensor *t) {
    if (tsi_is_contiguous(t)) return ts_retain(t);
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, tsi_device(t));
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    return out;
}

ts_tensor *tsi_cast(const char *op, ts_tensor *t, ts_dtype dt) {
    dt = tsi_resolve_dtype(dt);
    if (t->dtype == dt) return ts_retain(t);
    ts_tensor *out = tsi_new(op, t->shape, dt, tsi_device(t));
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    return out;
}

/* Raw bytes from one device's memory to another's, staging through the host when neither side
 * is the cpu and the backends differ. */
static bool move_bytes(const char *op, ts_device dd, void *dst, ts_device sd, const void *src,
                       size_t n) {
    const ts_backend *dbe = ts_backend_for(dd.type), *sbe = ts_backend_for(sd.type);
    if (sd.type == TS_CPU) {
        dbe->copy_h2d(dbe, dd.index, dst, src, n);
    } else if (dd.type == TS_CPU) {
        sbe->copy_d2h(sbe, sd.index, dst, src, n);
    } else if (sd.type == dd.type) {
        dbe->copy_d2d(dbe, dd.index, dst, sd.index, src, n);
    } else {
        void *stage = malloc(n ? n : 1);
        if (!stage) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory staging a copy", op),
                      false;
        sbe->copy_d2h(sbe, sd.index, stage, src, n);
        dbe->copy_h2d(dbe, dd.index, dst, stage, n);
        free(stage);
    }
    return true;
}

ts_tensor *tsi_to_device(const char *op, ts_tensor *t, ts_device d) {
    d = tsi_resolve_device(d);
    if (tsi_device_eq(d, tsi_device(t))) return ts_retain(t);
    if (!tsi_check_device(op, d)) return NULL;
    ts_tensor *src = tsi_contiguous(op, t);
    if (!src) return NULL;
    ts_tensor *out = tsi_new(op, t->shape, t->dtype, d);
    if (out) {
        size_t n = (size_t)tsi_numel(t->shape) * tsi_dtype_size(t->dtype);
        if (n && !move_bytes(op, d, tsi_kview(out).data, tsi_device(src), tsi_kview(src).data, n)) {
            ts_release(out);
            out = NULL;
        }
    }
    ts_release(src);
    return out;
}

ts_tensor *ts_to(ts_tensor *t, ts_device d) {
    tsi_init();
    if (!tsi_check_input("to", t, "tensor")) return NULL;
    ts_device rd = tsi_resolve_device(d);
    tsi_log_op("to", rd);
    ts_tensor *out = tsi_to_device("to", t, rd);
    if (out && out != t) out->requires_grad = false; /* autograd records ts_to in its issue */
    return tsi_own(out);
}

/* Without a CUDA stream to overlap with, the async form is the synchronous copy. */
ts_tensor *ts_to_async(ts_tensor *t, ts_device d) { return ts_to(t, d); }

ts_tensor *ts_to_dtype(ts_tensor *t, ts_dtype dt) {
    tsi_init();
    if (!tsi_check_input("to_dtype", t, "tensor")) return NULL;
    if ((unsigned)dt >= TS_DTYPE_COUNT)
        return tsi_error_set(TS_ERR_DTYPE, "to_dtype: invalid dtype %d", (int)dt), NULL;
    tsi_log_op("to_dtype", tsi_device(t));
    return tsi_own(tsi_cast("to_dtype", t, dt));
}

ts_tensor *ts_pin_memory(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("pin_memory", t, "tensor")) return NULL;
    if (tsi_device(t).type != TS_CPU)
        return tsi_error_set(TS_ERR_DEVICE,
                             "pin_memory: cannot pin %s: only cpu tensors can be pinned",
                             tsi_desc(t)),
               NULL;
    if (t->storage->pinned) return tsi_own(ts_retain(t));
    /* real page-locking arrives with the CUDA backend; until then pinned is a flag on a copy */
    ts_tensor *out = tsi_new("pin_memory", t->shape, t->dtype, ts_cpu());
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), 0, &dv, &sv);
    out->storage->pinned = true;
    return tsi_own(out);
}

ts_tensor *ts_clone(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("clone", t, "tensor")) return NULL;
    tsi_log_op("clone", tsi_device(t));
    ts_tensor *out = tsi_new("clone", t->shape, t->dtype, tsi_device(t));
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    return tsi_own(out);
}

bool tsi_check_inplace(const char *op, ts_tensor *t) {
    if (t->requires_grad && t->grad_fn == NULL)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: a leaf Variable that requires grad is being used in an in-place "
                             "operation.",
                             op),
               false;
    return true;
}

ts_tensor *ts_copy_(ts_tensor *dst, ts_tensor *src) {
    tsi_init();
    if (!tsi_check_input("copy_", dst, "destination") || !tsi_check_input("copy_", src, "source"))
        return NULL;
    if (!tsi_check_inplace("copy_", dst)) return NULL;
    /* several elements of an expanded destination share one location: which source value lands
     * there would be arbitrary (and a data race under OpenMP), so PyTorch refuses it */
    for (int i = 0; i < dst->shape.ndim; i++)
        if (dst->shape.dims[i] > 1 && dst->strides[i] == 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "copy_: unsupported operation: more than one element of the "
                                 "written-to tensor refers to a single memory location. Please "
                                 "clone() the tensor before performing the operation (destination "
                                 "%s)",
                                 tsi_desc(dst)),
                   NULL;
    ts_shape bs;
    if (!tsi_broadcast_shapes("copy_", dst->shape, src->shape, &bs)) return NULL;
    if (bs.ndim != dst->shape.ndim || memcmp(bs.dims, dst->shape.dims, sizeof bs.dims) != 0)
        return tsi_error_set(TS_ERR_SHAPE, "copy_: source %s cannot be broadcast to destination %s",
                             tsi_desc(src), tsi_desc(dst)),
               NULL;
    tsi_log_op("copy_", tsi_device(dst));
    /* copy_ is an explicit transfer, like PyTorch's: the source may live on another device */
    ts_tensor *s = tsi_to_device("copy_", src, tsi_device(dst));
    if (!s) return NULL;
    if (s->storage == dst->storage) { /* may overlap: go through a private copy */
        ts_tensor *c = tsi_new("copy_", s->shape, s->dtype, tsi_device(s));
        if (!c) return ts_release(s), NULL;
        ts_kview cv = tsi_kview(c), sv = tsi_kview(s);
        tsi_be(s)->copy(tsi_be(s), tsi_dev_index(s), &cv, &sv);
        ts_release(s);
        s = c;
    }
    ts_kview dv = tsi_kview(dst), sv = tsi_kview_broadcast(s, dst->shape);
    tsi_be(dst)->copy(tsi_be(dst), tsi_dev_index(dst), &dv, &sv);
    ts_release(s);
    tsi_bump_version(dst);
    return tsi_own(ts_retain(dst));
}
