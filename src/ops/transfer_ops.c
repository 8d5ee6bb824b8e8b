/* transfer_ops.c — the public copies: ts_to (device), ts_to_dtype, clone, pin_memory, copy_, each
 * differentiable (ts_to's backward sends the gradient back to the source device). */
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "core/pinned.h"
#include "core/sync_debug.h"
#include "ops/view_grad.h"

/* The node of a copy (to a device or dtype, clone): its backward hands the gradient back as it
 * is or copied, which is its own derivative. */
static void record_copy(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *t,
                        ts_tensor *out) {
    ts_node *n = tsi_record(name, op, fn, &t, 1, out, NULL, 0);
    if (n) n->flags |= TSI_NODE_TWICE;
}

ts_tensor *ts_to(ts_tensor *t, ts_device d) {
    tsi_init();
    if (!tsi_check_input("to", t, "tensor")) return NULL;
    ts_device rd = tsi_resolve_device(d);
    tsi_log_op("to", rd);
    tsi_sync_ctx sync = tsi_sync_enter("to", TSI_CALLER);
    ts_tensor *out = tsi_to_device("to", t, rd);
    tsi_sync_leave(sync);
    if (out && out != t) record_copy("ToCopyBackward0", "to", tsi_to_backward, t, out);
    return tsi_own(tsi_trace("to", &t, 1, out, NULL, 0, NULL, 0));
}

/* From pinned memory to cuda the copy is queued on the current stream and overlaps with compute;
 * every other pair is ts_to's synchronous copy (src/core/transfer.c). */
ts_tensor *ts_to_async(ts_tensor *t, ts_device d) {
    tsi_init();
    if (!tsi_check_input("to", t, "tensor")) return NULL;
    ts_device rd = tsi_resolve_device(d);
    tsi_log_op("to", rd);
    ts_tensor *out = tsi_to_device_async("to", t, rd);
    if (out && out != t) record_copy("ToCopyBackward0", "to", tsi_to_backward, t, out);
    return tsi_own(out);
}

/* complex to a real dtype would drop the imaginary parts (PyTorch warns and does it): refused, so
 * that no composite that casts "to float" turns complex values into wrong numbers */
static bool complex_to_real(const char *op, const ts_tensor *src, ts_dtype dt) {
    if (!tsi_is_complex(src->dtype) || tsi_is_complex(tsi_resolve_dtype(dt))) return false;
    tsi_error_set(TS_ERR_DTYPE,
                  "%s: casting complex to %s would discard the imaginary part; take real() or "
                  "abs() first (input: %s)",
                  op, ts_dtype_name(tsi_resolve_dtype(dt)), tsi_desc(src));
    return true;
}

ts_tensor *ts_to_dtype(ts_tensor *t, ts_dtype dt) {
    tsi_init();
    if (!tsi_check_input("to_dtype", t, "tensor")) return NULL;
    if ((unsigned)dt >= TS_DTYPE_COUNT)
        return tsi_error_set(TS_ERR_DTYPE, "to_dtype: invalid dtype %d", (int)dt), NULL;
    if (complex_to_real("to_dtype", t, dt)) return NULL;
    tsi_log_op("to_dtype", tsi_device(t));
    ts_tensor *out = tsi_cast("to_dtype", t, dt);
    if (out && out != t && (tsi_is_float(out->dtype) || tsi_is_complex(out->dtype)))
        record_copy("ToCopyBackward0", "to_dtype", tsi_identity_backward, t, out);
    return tsi_own(tsi_trace("to_dtype", &t, 1, out, (int64_t[]){dt}, 1, NULL, 0));
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
    /* page-locked memory when CUDA is available, else a copy flagged pinned */
    ts_tensor *out = tsi_new("pin_memory", t->shape, t->dtype, ts_cpu());
    if (!out) return NULL;
    if (!tsi_storage_pin("pin_memory", out)) return ts_release(out), NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), 0, &dv, &sv);
    record_copy("ToCopyBackward0", "pin_memory", tsi_identity_backward, t, out);
    return tsi_own(out);
}

ts_tensor *ts_clone(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("clone", t, "tensor")) return NULL;
    tsi_log_op("clone", tsi_device(t));
    ts_tensor *out = tsi_new_like("clone", t->shape, t->dtype, tsi_device(t), t);
    if (!out) return NULL;
    ts_kview dv = tsi_kview(out), sv = tsi_kview(t);
    tsi_be(t)->copy(tsi_be(t), tsi_dev_index(t), &dv, &sv);
    record_copy("CloneBackward0", "clone", tsi_identity_backward, t, out);
    return tsi_own(tsi_trace("clone", &t, 1, out, NULL, 0, NULL, 0));
}

ts_tensor *ts_copy_(ts_tensor *dst, ts_tensor *src) {
    tsi_init();
    if (!tsi_check_input("copy_", dst, "destination") || !tsi_check_input("copy_", src, "source"))
        return NULL;
    if (!tsi_check_inplace_operand("copy_", dst, src->requires_grad)) return NULL;
    if (complex_to_real("copy_", src, dst->dtype)) return NULL;
    /* several elements of an expanded destination share one location: which source value lands
     * there would be arbitrary (and a data race under OpenMP), so PyTorch refuses it */
    if (!tsi_check_no_self_overlap("copy_", dst)) return NULL;
    ts_shape bs;
    if (!tsi_broadcast_shapes("copy_", dst->shape, src->shape, &bs)) return NULL;
    /* the dims in use only: a shape's entries past ndim are not kept zero (reshape leaves them) */
    if (bs.ndim != dst->shape.ndim ||
        memcmp(bs.dims, dst->shape.dims, sizeof bs.dims[0] * (size_t)bs.ndim) != 0)
        return tsi_error_set(TS_ERR_SHAPE, "copy_: source %s cannot be broadcast to destination %s",
                             tsi_desc(src), tsi_desc(dst)),
               NULL;
    ts_tensor *ins[2] = {dst, src};
    ts_node *node = tsi_needs_graph(ins, 2)
                        ? tsi_node_new("CopyBackwards", "copy_", tsi_copy_backward, ins, 2, 1, 0)
                        : NULL;
    tsi_log_op("copy_", tsi_device(dst));
    /* copy_ is an explicit transfer, like PyTorch's: the source may live on another device */
    ts_tensor *s = tsi_to_device("copy_", src, tsi_device(dst));
    if (!s) return tsi_node_release(node), NULL;
    if (s->storage == dst->storage) { /* may overlap: go through a private copy */
        ts_tensor *c = tsi_new("copy_", s->shape, s->dtype, tsi_device(s));
        if (!c) return ts_release(s), tsi_node_release(node), NULL;
        ts_kview cv = tsi_kview(c), sv = tsi_kview(s);
        tsi_be(s)->copy(tsi_be(s), tsi_dev_index(s), &cv, &sv);
        ts_release(s);
        s = c;
    }
    ts_kview dv = tsi_kview(dst), sv = tsi_kview_broadcast(s, dst->shape);
    tsi_be(dst)->copy(tsi_be(dst), tsi_dev_index(dst), &dv, &sv);
    ts_release(s);
    tsi_bump_version(dst);
    if (node) {
        tsi_node_set_output(node, dst, 0);
        tsi_node_release(node);
    }
    return tsi_own(ts_retain(dst));
}
