/* conv_blocked.c — inference convolutions on channel-blocked activations (conv_blocked.h): the
 * layout changes as tensor ops, and the convolution through the backend's conv2d_blocked where it
 * takes the call, else through the plain layout and tsi_conv2d_act. */
#include <math.h>

#include "nn/conv_blocked.h"

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "nn/conv_internal.h"

int tsi_conv_block(ts_device dev) {
    if (tsi_capture_graph) return 0; /* a capture records plain kernels only */
    const ts_backend *be = tsi_backend_for(dev.type);
    return be && be->conv2d_block && be->conv2d_blocked ? be->conv2d_block(be) : 0;
}

ts_tensor *tsi_to_blocked(ts_tensor *x, int blk) {
    if (!x) return NULL;
    if (ts_ndim(x) != 4 || blk < 1)
        return tsi_error_set(TS_ERR_SHAPE, "to_blocked: x %s must be [N, C, H, W] (block %d)",
                             tsi_desc(x), blk),
               NULL;
    const ts_shape s = ts_shape_of(x);
    const int64_t n = s.dims[0], c = s.dims[1], h = s.dims[2], w = s.dims[3];
    const int64_t cb = (c + blk - 1) / blk;
    ts_tensor *xp = x;
    if (cb * blk != c) {
        ts_tensor *parts[2] = {
            x, ts_zeros(TS_SHAPE(n, cb * blk - c, h, w),
                        (ts_opts){.dtype = ts_dtype_of(x), .device = ts_device_of(x)})};
        xp = parts[1] ? ts_cat(parts, 2, 1) : NULL;
    }
    ts_tensor *r = xp ? ts_reshape(xp, TS_SHAPE(n, cb, blk, h, w)) : NULL;
    return r ? ts_contiguous(ts_permute(r, TS_DIMS(0, 1, 3, 4, 2))) : NULL;
}

ts_tensor *tsi_from_blocked(ts_tensor *xb, int64_t c) {
    if (!xb) return NULL;
    const ts_shape s = ts_shape_of(xb);
    if (s.ndim != 5 || c < 1 || c > s.dims[1] * s.dims[4] || c <= (s.dims[1] - 1) * s.dims[4])
        return tsi_error_set(TS_ERR_SHAPE,
                             "from_blocked: x %s must be [N, ceil(C/B), H, W, B] for C = %lld",
                             tsi_desc(xb), (long long)c),
               NULL;
    ts_tensor *p = ts_permute(xb, TS_DIMS(0, 1, 4, 2, 3));
    ts_tensor *r =
        p ? ts_reshape(p, TS_SHAPE(s.dims[0], s.dims[1] * s.dims[4], s.dims[2], s.dims[3])) : NULL;
    ts_tensor *y = r && c < s.dims[1] * s.dims[4] ? ts_narrow(r, 1, 0, c) : r;
    return y ? ts_contiguous(y) : NULL;
}

static int64_t out_size(int64_t in, int k, int s, int p, int d) {
    return s < 1 || d < 1 ? -1 : (in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1) / s + 1;
}

/* x's shape as the blocked kernel takes it: plain [N, c, H, W] or [N, ceil(c/blk), H, W, blk] */
static bool layout_ok(ts_tensor *x, int blk, int64_t c) {
    const ts_shape s = ts_shape_of(x);
    if (!blk) return s.ndim == 4 && s.dims[1] == c;
    return s.ndim == 5 && s.dims[4] == blk && s.dims[1] == (c + blk - 1) / blk;
}

/* The backend's blocked kernel; NULL without an error when it does not take the call (the caller
 * then runs the plain path) or with the error when memory ran out. */
static ts_tensor *blocked_call(ts_tensor *x, int x_blk, int64_t c, ts_tensor *w, ts_tensor *b,
                               ts_conv2d_opts o, ts_conv_act a, double lo, double hi, int y_blk) {
    const int blk = tsi_conv_block(ts_device_of(x));
    if (!blk || (x_blk && x_blk != blk) || (y_blk && y_blk != blk)) return NULL;
    ts_tensor *const ins[3] = {x, w, b};
    if (tsi_trace_active || tsi_autocast_any || tsi_needs_graph(ins, 3)) return NULL;
    for (int i = 0; i < 3; i++)
        if (ins[i] && (ts_dtype_of(ins[i]) != TS_F32 || !ts_is_contiguous(ins[i]) ||
                       !tsi_device_eq(tsi_device(ins[i]), tsi_device(x))))
            return NULL;
    const int groups = o.groups > 0 ? o.groups : 1;
    if (ts_ndim(w) != 4 || ts_size(w, 1) * groups != c || !layout_ok(x, x_blk, c) ||
        (b && (ts_ndim(b) != 1 || ts_size(b, 0) != ts_size(w, 0))))
        return NULL;
    const int st[2] = {o.stride[0] ? o.stride[0] : 1, o.stride[1] ? o.stride[1] : 1};
    const int dl[2] = {o.dilation[0] ? o.dilation[0] : 1, o.dilation[1] ? o.dilation[1] : 1};
    const int64_t nchw[4] = {ts_size(x, 0), c, ts_size(x, 2), ts_size(x, 3)};
    const int64_t khw[2] = {ts_size(w, 2), ts_size(w, 3)};
    const int64_t ohw[3] = {
        ts_size(w, 0),
        out_size(nchw[2], (int)khw[0], st[0], o.padding[0], dl[0]),
        out_size(nchw[3], (int)khw[1], st[1], o.padding[1], dl[1]),
    };
    if (ohw[1] < 1 || ohw[2] < 1 || nchw[0] < 1 || o.padding[0] < 0 || o.padding[1] < 0)
        return NULL;
    const ts_shape ys = y_blk
                            ? TS_SHAPE(nchw[0], (ohw[0] + y_blk - 1) / y_blk, ohw[1], ohw[2], y_blk)
                            : TS_SHAPE(nchw[0], ohw[0], ohw[1], ohw[2]);
    ts_tensor *y = tsi_new("conv2d", ys, TS_F32, tsi_device(x));
    if (!y) return NULL;
    ts_conv2d_params p = {.stride = {st[0], st[1]},
                          .padding = {o.padding[0], o.padding[1]},
                          .dilation = {dl[0], dl[1]},
                          .groups = groups,
                          .act = a,
                          .act_lo = lo,
                          .act_hi = hi};
    tsi_conv_weight_identity(w, w, &p);
    const ts_backend *be = tsi_be(x);
    const ts_kview ky = tsi_kview(y), kx = tsi_kview(x), kw = tsi_kview(w);
    const ts_kview kb = b ? tsi_kview(b) : kw;
    if (!be->conv2d_blocked(be, tsi_dev_index(x), (float *)ky.data, y_blk, (const float *)kx.data,
                            x_blk, (const float *)kw.data, b ? (const float *)kb.data : NULL, nchw,
                            ohw, khw, &p)) {
        ts_release(y);
        return NULL;
    }
    return tsi_own(y);
}

ts_tensor *tsi_conv2d_act_blocked(ts_tensor *x, int x_blk, int64_t c, ts_tensor *w, ts_tensor *b,
                                  ts_conv2d_opts o, tsi_conv_act act, double lo, double hi,
                                  int y_blk, bool *blocked_ran) {
    if (blocked_ran) *blocked_ran = false;
    if (!x || !w) return NULL;
    ts_conv_act a;
    if (!tsi_conv_backend_act(act, lo, hi, &a))
        return tsi_error_set(TS_ERR_ARG, "conv2d: unknown activation %d", (int)act), NULL;
    ts_tensor *y = blocked_call(x, x_blk, c, w, b, o, a, lo, hi, y_blk);
    if (y || ts_error()) {
        if (blocked_ran) *blocked_ran = y != NULL;
        return y;
    }
    ts_tensor *xp = x_blk ? tsi_from_blocked(x, c) : x;
    ts_tensor *yp = xp ? tsi_conv2d_act(xp, w, b, o, act, lo, hi) : NULL;
    return y_blk ? tsi_to_blocked(yp, y_blk) : yp;
}

ts_tensor *tsi_global_avg_pool_blocked(ts_tensor *xb) {
    if (!xb) return NULL;
    const ts_shape s = ts_shape_of(xb);
    if (s.ndim != 5)
        return tsi_error_set(TS_ERR_SHAPE, "global_avg_pool_blocked: x %s must be [N, Cb, H, W, B]",
                             tsi_desc(xb)),
               NULL;
    const int64_t hw = s.dims[2] * s.dims[3];
    const ts_backend *be = tsi_be(xb);
    ts_tensor *const ins[1] = {xb};
    if (!be->global_avg_pool_blocked || hw < 1 || s.dims[4] > 16 || ts_dtype_of(xb) != TS_F32 ||
        tsi_needs_graph(ins, 1) || tsi_trace_active || !ts_is_contiguous(xb))
        return ts_mean_dims(xb, TS_DIMS(2, 3), true);
    ts_tensor *y = tsi_new("global_avg_pool_blocked",
                           TS_SHAPE(s.dims[0], s.dims[1], 1, 1, s.dims[4]), TS_F32, tsi_device(xb));
    if (!y) return NULL;
    const ts_kview ky = tsi_kview(y), kx = tsi_kview(xb);
    be->global_avg_pool_blocked(be, tsi_dev_index(xb), (float *)ky.data, (const float *)kx.data,
                                s.dims[0] * s.dims[1], hw, (int)s.dims[4]);
    return tsi_own(y);
}

/* x [N, Cb, H, W, B] and s [N, Cb, 1, 1, B] */
static bool scale_pair(ts_tensor *x, ts_tensor *s) {
    if (ts_ndim(x) != 5 || ts_ndim(s) != 5) return false;
    for (int d = 0; d < 5; d++)
        if (ts_size(s, d) != ((d == 2 || d == 3) ? 1 : ts_size(x, d))) return false;
    return ts_size(x, 2) * ts_size(x, 3) > 1;
}

ts_tensor *tsi_mul_channels_blocked(ts_tensor *a, ts_tensor *b) {
    if (!a || !b) return NULL;
    ts_tensor *x = scale_pair(a, b) ? a : scale_pair(b, a) ? b : NULL;
    ts_tensor *s = x == a ? b : a;
    if (!x) return NULL;
    const ts_backend *be = tsi_be(x);
    ts_tensor *const ins[2] = {x, s};
    if (!be->mul_channels_blocked || ts_size(x, 4) > 16 || ts_dtype_of(x) != TS_F32 ||
        ts_dtype_of(s) != TS_F32 || !tsi_device_eq(tsi_device(x), tsi_device(s)) ||
        tsi_needs_graph(ins, 2) || tsi_trace_active || !ts_is_contiguous(x) || !ts_is_contiguous(s))
        return NULL;
    ts_tensor *y = tsi_new("mul", ts_shape_of(x), TS_F32, tsi_device(x));
    if (!y) return NULL;
    const ts_kview ky = tsi_kview(y), kx = tsi_kview(x), ks = tsi_kview(s);
    be->mul_channels_blocked(be, tsi_dev_index(x), (float *)ky.data, (const float *)kx.data,
                             (const float *)ks.data, ts_size(x, 0) * ts_size(x, 1),
                             ts_size(x, 2) * ts_size(x, 3), (int)ts_size(x, 4));
    return tsi_own(y);
}
