/* softmax.c — softmax and log_softmax front ends. */
#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/elementwise.h"
#include "ops/reduce_grad.h"

static ts_tensor *softmax_run(const char *op, ts_tensor *t, int dim, bool log) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    /* PyTorch has no integer softmax kernel and refuses such inputs; so do we */
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for %s; convert it to a floating "
                             "dtype first (ts_to_dtype)",
                             op, tsi_desc(t)),
               NULL;
    ts_tensor *src = ts_retain(t);
    ts_device dev = tsi_device(t);
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, t->shape, src->dtype, dev);
    if (out && tsi_numel(t->shape) > 0) {
        ts_kview ko = tsi_kview(out), ki = tsi_kview(src);
        if (ko.ndim == 0) { /* a 0-dim tensor is softmaxed as one row of one element */
            ko.ndim = ki.ndim = 1;
            ko.shape[0] = ki.shape[0] = 1;
            ko.strides[0] = ki.strides[0] = 1;
        }
        tsi_be(src)->softmax(tsi_be(src), tsi_dev_index(src), &ko, &ki, d, log);
    }
    ts_release(src);
    if (out && tsi_needs_graph(&t, 1)) {
        ts_tensor *none = NULL;
        ts_node *n =
            tsi_record(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", op,
                       log ? tsi_log_softmax_backward : tsi_softmax_backward, &t, 1, out, &none, 1);
        if (n) {
            n->flags |= TSI_NODE_TWICE; /* reduce_grad.c (not fused under create_graph) */
            tsi_node_save_output(n, 0, out);
            n->ip[0] = d;
        }
    }
    return tsi_own(out);
}

ts_tensor *tsi_softmax_grad_fused(ts_tensor *g, ts_tensor *y, int dim, bool log) {
    const ts_backend *be = tsi_be(y);
    if (!be->softmax_backward || g->dtype != y->dtype || !tsi_ew_shape_eq(&g->shape, &y->shape) ||
        !ts_device_equal(tsi_device(g), tsi_device(y)))
        return NULL;
    ts_tensor *gx = tsi_new(log ? "log_softmax_backward" : "softmax_backward", y->shape, y->dtype,
                            tsi_device(y));
    if (!gx) return NULL;
    ts_kview kx = tsi_kview(gx), ky = tsi_kview(y), kg = tsi_kview(g);
    if (!be->softmax_backward(be, tsi_dev_index(y), &kx, &ky, &kg, dim, log)) {
        ts_release(gx);
        return NULL;
    }
    return tsi_own(gx);
}

static ts_tensor *softmax_op(const char *op, ts_tensor *t, int dim, bool log) {
    ts_tensor *const in = t;
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    ts_tensor *y = tsi_autocast_exit(&ac, softmax_run(op, t, dim, log));
    return tsi_trace(op, &in, 1, y, (int64_t[]){dim}, 1, NULL, 0);
}

ts_tensor *ts_softmax(ts_tensor *t, int dim) { return softmax_op("softmax", t, dim, false); }
ts_tensor *ts_log_softmax(ts_tensor *t, int dim) { return softmax_op("log_softmax", t, dim, true); }
