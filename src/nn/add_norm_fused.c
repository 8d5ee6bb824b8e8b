/* add_norm_fused.c — ts_add_layer_norm and ts_add_rms_norm (decision 0031): a pre-norm block's
 * residual add h = x + residual and the norm of h in one pass of the backend's layer-norm kernels
 * (ts_layer_norm_args.residual), which read x and residual once and write h and y. The graph is
 * the composition's: h is the output of ts_add's node (AddBackward0) and y that of the norm's
 * node over h, so h's gradient (from y and from its later uses) reaches x and residual, and every
 * gradient has the composition's bits. Where the kernels decline (cpu float16 / bfloat16, empty
 * tensors), on meta tensors, under autocast, tracing or create_graph, and for any argument the
 * norm would refuse (whose error its own check then reports), the composition ts_add +
 * ts_layer_norm / ts_rms_norm runs. */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "nn/norm_rows.h"
#include "nn/rms_norm_fused.h"
#include "ops/elementwise_grad.h"

/* x and residual: one dtype, one shape (no broadcasting: h is the residual stream) and one
 * device; the error names the op and the argument */
static bool check_pair(const char *op, ts_tensor *x, ts_tensor *r) {
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, r, "residual")) return false;
    ts_tensor *both[2] = {x, r};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return false;
    if (x->dtype != r->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected residual of the input's dtype, got %s and %s", op,
                             tsi_desc(x), tsi_desc(r)),
               false;
    bool same = x->shape.ndim == r->shape.ndim;
    for (int i = 0; same && i < x->shape.ndim; i++) same = x->shape.dims[i] == r->shape.dims[i];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected residual of the input's shape %s (no broadcasting), "
                             "got %s",
                             op, tsi_shape_str(x->shape), tsi_shape_str(r->shape)),
               false;
    return true;
}

/* An affine parameter the kernels take: absent, or of normalized_shape, x's dtype and device */
static bool param_fits(ts_tensor *t, ts_tensor *x, ts_shape ns) {
    if (!t) return true;
    if (t->dtype != x->dtype || !tsi_device_eq(tsi_device(t), tsi_device(x))) return false;
    if (t->shape.ndim != ns.ndim) return false;
    for (int i = 0; i < ns.ndim; i++)
        if (t->shape.dims[i] != ns.dims[i]) return false;
    return true;
}

/* Whether the fused kernels run (the pair already checked): every argument valid for the norm,
 * none of the cases the header comment lists, and the backend's kernels take the residual form */
static bool fused_takes(bool rms, ts_tensor *x, ts_tensor *r, ts_shape ns, ts_tensor *w,
                        ts_tensor *b) {
    if (tsi_device(x).type == TS_META || !tsi_is_float(x->dtype)) return false;
    if (tsi_autocast_any || tsi_trace_active || tsi_create_graph_active()) return false;
    if (ns.ndim < 1 || ns.ndim > x->shape.ndim) return false;
    for (int i = 1; i <= ns.ndim; i++)
        if (ns.dims[ns.ndim - i] != x->shape.dims[x->shape.ndim - i]) return false;
    if (!param_fits(w, x, ns) || !param_fits(b, x, ns)) return false;
    const ts_backend *be = tsi_be(x);
    if (!be->layer_norm_supports || !be->layer_norm_workspace || !be->layer_norm_forward ||
        !be->layer_norm_backward)
        return false;
    ts_layer_norm_args a = {.rms = rms};
    tsi_norm_rows_cols(x, ns.ndim, &a.rows, &a.cols);
    if (a.rows < 1 || a.cols < 1) return false;
    a.x.dtype = a.residual.dtype = a.h.dtype = x->dtype;
    a.residual.data = r->storage->data; /* non-NULL: the residual form is asked about */
    return be->layer_norm_supports(be, tsi_dev_index(x), &a);
}

/* The composition, the reference the fused path gives the bits of */
static ts_tensor *composed(bool rms, ts_tensor *x, ts_tensor *r, ts_shape ns, ts_tensor *w,
                           ts_tensor *b, double eps, ts_tensor **h) {
    ts_tensor *s = ts_add(x, r);
    ts_tensor *y = !s ? NULL : rms ? ts_rms_norm(s, ns, w, eps) : ts_layer_norm(s, ns, w, b, eps);
    *h = y ? s : NULL;
    return y;
}

/* The kernels' pass and the two nodes; eps resolved. */
static ts_tensor *fused(const char *op, bool rms, ts_tensor *x0, ts_tensor *r0, int nnorm,
                        ts_tensor *w0, ts_tensor *b0, double eps, ts_tensor **h_out) {
    const ts_device dev = tsi_device(x0);
    tsi_log_op(op, dev);
    ts_tensor *x = tsi_contiguous(op, x0);
    ts_tensor *r = x ? tsi_contiguous(op, r0) : NULL;
    ts_tensor *w = r && w0 ? tsi_contiguous(op, w0) : NULL;
    ts_tensor *b = r && b0 ? tsi_contiguous(op, b0) : NULL;
    ts_tensor *h = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    ts_layer_norm_args a = {.rms = rms, .eps = eps};
    if (r && (!w0 || w) && (!b0 || b)) {
        tsi_norm_rows_cols(x, nnorm, &a.rows, &a.cols);
        const ts_dtype st = tsi_norm_stat_dtype(x->dtype);
        h = tsi_new(op, x->shape, x->dtype, dev);
        y = h ? tsi_new(op, x->shape, x->dtype, dev) : NULL;
        mean = y && !rms ? tsi_new(op, TS_SHAPE(a.rows), st, dev) : NULL;
        rstd = y && (rms || mean) ? tsi_new(op, TS_SHAPE(a.rows), st, dev) : NULL;
    }
    if (rstd) {
        tsi_norm_view2(&a.x, x, a.rows, a.cols);
        tsi_norm_view2(&a.residual, r, a.rows, a.cols);
        tsi_norm_view2(&a.h, h, a.rows, a.cols);
        tsi_norm_view2(&a.y, y, a.rows, a.cols);
        tsi_norm_view2(&a.weight, w, 0, a.cols);
        tsi_norm_view2(&a.bias, b, 0, a.cols);
        tsi_norm_view2(&a.mean, mean, 0, a.rows);
        tsi_norm_view2(&a.rstd, rstd, 0, a.rows);
        const ts_backend *be = tsi_be(x);
        be->layer_norm_forward(be, tsi_dev_index(x), &a);
    } else {
        ts_release(h), ts_release(y), h = y = NULL;
    }
    /* h: ts_add's node (x0 + r0); y: the norm's node over h, saving h itself */
    ts_tensor *const add_ins[2] = {x0, r0};
    if (h && tsi_needs_graph(add_ins, 2)) {
        h = tsi_ew_record_binary("add", TS_B_ADD, x0, r0, h, 1);
        if (!h) ts_release(y), y = NULL;
    }
    if (y) {
        ts_tensor *const ins[3] = {h, w0, rms ? NULL : b0};
        if (rms)
            tsi_rms_norm_fused_record(ins, h, w, rstd, y, nnorm, eps);
        else
            tsi_layer_norm_fused_record(ins, h, w, mean, rstd, y, nnorm, eps);
    }
    ts_release(mean), ts_release(rstd);
    ts_release(x), ts_release(r), ts_release(w), ts_release(b);
    if (!y) ts_release(h), h = NULL;
    *h_out = tsi_own(h);
    return tsi_own(y);
}

static ts_tensor *add_norm(const char *op, bool rms, ts_tensor *x, ts_tensor *r, ts_shape ns,
                           ts_tensor *w, ts_tensor *b, double eps, ts_tensor **h) {
    tsi_init();
    if (!h) return tsi_error_set(TS_ERR_ARG, "%s: the output h is NULL", op), NULL;
    *h = NULL;
    if (!check_pair(op, x, r)) return NULL;
    ts_tensor *y;
    if (fused_takes(rms, x, r, ns, w, b)) {
        const double e = rms ? tsi_rms_norm_eps(eps, x->dtype) : eps != 0 ? eps : 1e-5;
        y = fused(op, rms, x, r, ns.ndim, w, b, e, h);
    } else {
        y = composed(rms, x, r, ns, w, b, eps, h);
    }
    return y;
}

ts_tensor *ts_add_layer_norm(ts_tensor *x, ts_tensor *residual, ts_shape normalized_shape,
                             ts_tensor *w, ts_tensor *b, double eps, ts_tensor **h) {
    return add_norm("add_layer_norm", false, x, residual, normalized_shape, w, b, eps, h);
}

ts_tensor *ts_add_rms_norm(ts_tensor *x, ts_tensor *residual, ts_shape normalized_shape,
                           ts_tensor *w, double eps, ts_tensor **h) {
    return add_norm("add_rms_norm", true, x, residual, normalized_shape, w, NULL, eps, h);
}
