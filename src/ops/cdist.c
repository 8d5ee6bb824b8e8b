/* cdist.c — torch.cdist (issue 52): the p-norm distances between the rows of x1 [..., P, M] and
 * x2 [..., R, M] (batch dims broadcast). Where the backend has the cdist kernel it computes them
 * in one pass without the [P, R, M] differences (cpu and sim: in double, tiled and threaded,
 * src/backend/cpu/kern_cdist.c); elsewhere, for an empty M and while ONNX export traces, they are
 * the norm over M of the differences. The gradient is PyTorch's norm_backward of those
 * differences (LinalgVectorNormBackward0's, composed of differentiable ops and summed over the
 * other set's rows), so the two routes differentiate alike. */
#include <math.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* [..., P, 1, M] - [..., 1, R, M] */
static ts_tensor *differences(ts_tensor *a, ts_tensor *b) {
    return ts_sub(ts_unsqueeze(a, -2), ts_unsqueeze(b, -3));
}

/* the gradient of the differences x from the distances' gradient g and the distances r (both
 * [..., P, R]), PyTorch's norm_backward over the last dim */
static ts_tensor *differences_grad(ts_tensor *x, ts_tensor *g0, ts_tensor *r0, double p) {
    ts_tensor *g = ts_unsqueeze(g0, -1), *nr = ts_unsqueeze(r0, -1);
    if (p == 0) return ts_zeros_like(x);
    if (p == 1) return ts_mul(ts_sign(x), g);
    if (isinf(p)) { /* shared evenly among |x| == norm (and NaNs) */
        ts_tensor *ax = ts_abs(x);
        ts_tensor *mask = ts_logical_or(ts_eq(ax, nr), ts_ne(ax, ax));
        ts_tensor *cnt = ts_sum_dim(mask, -1, true);
        return ts_mul(ts_sign(x), ts_mul(ts_div(g, cnt), mask));
    }
    if (p < 1) {
        ts_tensor *s = ts_mul(
            ts_sign(x), ts_masked_fill(ts_pow_scalar(ts_abs(x), p - 1), ts_eq_scalar(x, 0), 0.0));
        return ts_mul(s, ts_mul(g, ts_pow_scalar(nr, 1 - p)));
    }
    ts_tensor *s = p == 2  ? x
                   : p < 2 ? ts_mul(ts_sign(x), ts_pow_scalar(ts_abs(x), p - 1))
                           : ts_mul(x, ts_pow_scalar(ts_abs(x), p - 2));
    ts_tensor *den = p == 2 ? nr : ts_pow_scalar(nr, p - 1);
    return ts_mul(s, ts_masked_fill(ts_div(g, den), ts_eq_scalar(nr, 0), 0.0));
}

/* node: saved x1, x2 and the distances; p[0] p */
static void cdist_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *a = tsi_node_saved(n, 0), *b = tsi_node_saved(n, 1), *r = tsi_node_saved(n, 2);
    if (!go[0] || !a || !b || !r) return;
    ts_tensor *gd = differences_grad(differences(a, b), go[0], r, n->p[0]);
    if (!gd) return;
    if (tsi_node_needs(n, 0)) gi[0] = tsi_sum_to(ts_sum_dim(gd, -2, false), a->shape);
    if (tsi_node_needs(n, 1)) gi[1] = tsi_sum_to(ts_neg(ts_sum_dim(gd, -3, false)), b->shape);
}

/* the distances through the backend's kernel: batch dims broadcast and flattened to one */
static ts_tensor *cdist_kernel(const char *op, ts_tensor *a, ts_tensor *b, double p) {
    const int na = a->shape.ndim, nb = b->shape.ndim;
    ts_shape ba = {.ndim = na - 2}, bb = {.ndim = nb - 2}, bs;
    for (int i = 0; i < na - 2; i++) ba.dims[i] = a->shape.dims[i];
    for (int i = 0; i < nb - 2; i++) bb.dims[i] = b->shape.dims[i];
    if (!tsi_broadcast_shapes(op, ba, bb, &bs)) return NULL;
    const int64_t P = a->shape.dims[na - 2], R = b->shape.dims[nb - 2];
    const int64_t M = a->shape.dims[na - 1], B = tsi_numel(bs);
    ts_shape ys = bs, s1 = bs, s2 = bs;
    ys.dims[ys.ndim++] = P, ys.dims[ys.ndim++] = R;
    s1.dims[s1.ndim++] = P, s1.dims[s1.ndim++] = M;
    s2.dims[s2.ndim++] = R, s2.dims[s2.ndim++] = M;
    ts_tensor *y = tsi_own(tsi_new(op, ys, a->dtype, tsi_device(a)));
    if (!y || !B || !P || !R) return y;
    ts_tensor *x1 = ts_reshape(ts_expand(a, s1), TS_SHAPE(B, P, M));
    ts_tensor *x2 = ts_reshape(ts_expand(b, s2), TS_SHAPE(B, R, M));
    if (!x1 || !x2) return NULL;
    const ts_kview k1 = tsi_kview(x1), k2 = tsi_kview(x2);
    ts_kview ko = tsi_kview(y); /* y is new, so contiguous: [B, P, R] */
    ko.ndim = 3, ko.shape[0] = B, ko.shape[1] = P, ko.shape[2] = R;
    ko.strides[0] = P * R, ko.strides[1] = R, ko.strides[2] = 1;
    const ts_backend *be = tsi_be(y);
    be->cdist(be, tsi_dev_index(y), &ko, &k1, &k2, p);
    return y;
}

static ts_tensor *cdist_body(ts_tensor *a, ts_tensor *b, double p) {
    const char *op = "cdist";
    tsi_init();
    bool ok = tsi_check_input(op, a, "x1");
    if (!(tsi_check_input(op, b, "x2") && ok)) return NULL;
    ts_tensor *both[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return NULL;
    const int na = a->shape.ndim, nb = b->shape.ndim;
    if (na < 2 || nb < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: only supports at least 2D tensors, got %s and %s",
                             op, tsi_desc(a), tsi_desc(b)),
               NULL;
    if (a->shape.dims[na - 1] != b->shape.dims[nb - 1])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: X1 and X2 must have the same number of columns. X1: %lld X2: "
                             "%lld",
                             op, (long long)a->shape.dims[na - 1],
                             (long long)b->shape.dims[nb - 1]),
               NULL;
    if (!tsi_is_float(a->dtype) || a->dtype != b->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: only supports floating-point dtypes of the same type, got %s "
                             "and %s",
                             op, tsi_desc(a), tsi_desc(b)),
               NULL;
    if (!(p >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: only supports non-negative p values, got %g", op, p),
               NULL;
    if ((na > nb ? na : nb) + 1 > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: at most %d dims are supported (%s and %s)", op,
                             TS_MAX_DIMS - 1, tsi_desc(a), tsi_desc(b)),
               NULL;
    const int64_t M = a->shape.dims[na - 1];
    ts_scope_begin();
    if (!tsi_be(a)->cdist || tsi_trace_active || M == 0) {
        ts_tensor *diff = differences(a, b); /* an empty M: zeros */
        if (!diff) return finish(NULL);
        if (M == 0) return finish(ts_sum_dim(diff, -1, false));
        return finish(ts_vector_norm(diff, p, TS_DIMS(-1), false, TS_DTYPE_DEFAULT));
    }
    ts_tensor *y = cdist_kernel(op, a, b, p);
    if (y && ts_error() == TS_OK && tsi_needs_graph(both, 2)) {
        ts_node *n = tsi_record("CdistBackward0", op, cdist_backward, both, 2, y,
                                (ts_tensor *[]){a, b, NULL}, 3);
        if (n) {
            tsi_node_save_output(n, 2, y);
            n->p[0] = p;
            n->flags |= TSI_NODE_TWICE; /* public ops, linear in g, on x1, x2 and the distances */
        }
    }
    return finish(y);
}

/* cdist is on PyTorch's fp32 lists (CUDA's and the CPU's) */
ts_tensor *ts_cdist(ts_tensor *a, ts_tensor *b, double p) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "cdist", &a, &b);
    return tsi_autocast_exit(&ac, cdist_body(a, b, p));
}
