/* conv_nd.c — conv1d (conv2d over a height-1 view) and conv3d (a sum over the kernel's depth of
 * conv2d over depth slices), composed from differentiable ops so that they run with autograd on
 * every device; and the checks every k-dim (transposed) convolution shares. conv3d's float32
 * inference calls on the CPU run oneDNN's 3-d primitive instead (conv3d_direct). */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "nn/conv_internal.h"
#include "nn/conv_nd_internal.h"

/* stride, padding, dilation, output_padding and groups with the defaults resolved */
static bool check_params(const char *op, int k, bool transposed, ts_convnd_opts o,
                         tsi_convnd_geom *g) {
    for (int i = 0; i < k; i++) {
        if (o.stride[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: non-positive stride is not supported", op), false;
        if (o.padding[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: negative padding is not supported", op), false;
        if (o.dilation[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: dilation should be greater than zero", op), false;
        if (o.output_padding[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: negative output_padding is not supported", op),
                   false;
        g->s[i] = o.stride[i] ? o.stride[i] : 1;
        g->p[i] = o.padding[i];
        g->d[i] = o.dilation[i] ? o.dilation[i] : 1;
        g->op[i] = o.output_padding[i];
        if (g->op[i] && !transposed)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: output_padding is only for the transposed convolutions", op),
                   false;
        if (g->op[i] >= g->s[i] && g->op[i] >= g->d[i])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: output padding must be smaller than either stride or "
                                 "dilation, but got output_padding=%d, stride=%d, dilation=%d "
                                 "(dim %d)",
                                 op, g->op[i], g->s[i], g->d[i], i),
                   false;
    }
    if (o.groups < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: non-positive groups is not supported", op), false;
    g->groups = o.groups ? o.groups : 1;
    return true;
}

static bool check_channels(const char *op, bool transposed, ts_shape xs, ts_shape ws,
                           tsi_convnd_geom *g) {
    const int64_t groups = g->groups;
    if (!transposed) {
        g->cout = ws.dims[0];
        return tsi_conv_check_groups(op, xs, ws, groups, g->cin);
    }
    if (g->cin != ws.dims[0])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given transposed=1, weight of size %s, expected input%s to "
                             "have %lld channels, but got %lld channels instead",
                             op, tsi_shape_str(ws), tsi_shape_str(xs), (long long)ws.dims[0],
                             (long long)g->cin),
               false;
    if (g->cin % groups != 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given groups=%lld, expected weight to be divisible by %lld at "
                             "dimension 0, but got weight of size %s instead",
                             op, (long long)groups, (long long)groups, tsi_shape_str(ws)),
               false;
    g->cout = ws.dims[1] * groups;
    return true;
}

static bool output_sizes(const char *op, bool transposed, tsi_convnd_geom *g) {
    for (int i = 0; i < g->k; i++) {
        const int64_t eff = (int64_t)g->d[i] * (g->ker[i] - 1) + 1;
        if (!transposed) {
            const int64_t padded = g->in[i] + 2 * (int64_t)g->p[i];
            if (padded < eff)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "%s: calculated padded input size per channel: %lld (dim "
                                     "%d). Kernel size: %lld. Kernel size can't be greater than "
                                     "actual input size",
                                     op, (long long)padded, i, (long long)eff),
                       false;
            g->out[i] = (padded - eff) / g->s[i] + 1;
        } else {
            g->out[i] = (g->in[i] - 1) * g->s[i] - 2 * (int64_t)g->p[i] + eff + g->op[i];
            if (g->in[i] < 1 || g->out[i] < 1)
                return tsi_error_set(TS_ERR_SHAPE,
                                     "%s: given input size per channel %lld (dim %d), the "
                                     "calculated output size %lld is too small",
                                     op, (long long)g->in[i], i, (long long)g->out[i]),
                       false;
        }
    }
    return true;
}

bool tsi_convnd_check(const char *op, int k, bool transposed, ts_tensor *x, ts_tensor *w,
                      ts_tensor *b, ts_convnd_opts o, tsi_convnd_geom *g) {
    *g = (tsi_convnd_geom){.k = k};
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, w, "weight")) return false;
    ts_tensor *all[3] = {x, w, b};
    if (!tsi_same_device(op, all, b ? 3 : 2, false, &g->dev)) return false;
    if (!tsi_conv_check_dtypes(op, x, w, b)) return false;
    const ts_shape xs = x->shape, ws = w->shape;
    if (xs.ndim != k + 1 && xs.ndim != k + 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected %dD (unbatched) or %dD (batched) input to %s, but got "
                             "input of size: %s",
                             op, k + 1, k + 2, op, tsi_shape_str(xs)),
               false;
    bool empty_kernel = ws.ndim != k + 2;
    for (int i = 0; !empty_kernel && i < k; i++) empty_kernel = ws.dims[2 + i] < 1;
    if (empty_kernel)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a %d-D weight [%s, *kernel] with a non-empty kernel, "
                             "but got weight of size %s",
                             op, k + 2,
                             transposed ? "in_channels, out_channels/groups"
                                        : "out_channels, in_channels/groups",
                             tsi_shape_str(ws)),
               false;
    if (!check_params(op, k, transposed, o, g)) return false;
    g->unbatched = xs.ndim == k + 1;
    const int lead = g->unbatched ? 0 : 1;
    g->n = g->unbatched ? 1 : xs.dims[0];
    g->cin = xs.dims[lead];
    for (int i = 0; i < k; i++) g->in[i] = xs.dims[lead + 1 + i], g->ker[i] = ws.dims[2 + i];
    if (!check_channels(op, transposed, xs, ws, g)) return false;
    if (b && (b->shape.ndim != 1 || b->shape.dims[0] != g->cout))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given weight of size %s, expected bias to be 1-dimensional with "
                             "%lld elements, but got bias of size %s instead",
                             op, tsi_shape_str(ws), (long long)g->cout, tsi_shape_str(b->shape)),
               false;
    return output_sizes(op, transposed, g);
}

/* ------------------------------------------------------------------ depth helpers */
static ts_tensor *zeros_like_dims(ts_tensor *x, ts_shape s) {
    return ts_zeros(s, (ts_opts){.dtype = x->dtype, .device = tsi_device(x)});
}

ts_tensor *tsi_depth_spread(ts_tensor *x, int64_t every, int64_t front, int64_t back) {
    if (!x) return NULL;
    const ts_shape s = x->shape; /* [N, D, C, H, W] */
    const int64_t N = s.dims[0], D = s.dims[1], C = s.dims[2], H = s.dims[3], W = s.dims[4];
    ts_tensor *y = x;
    if (every > 1 && D > 1) {
        ts_tensor *parts[2] = {ts_unsqueeze(x, 2),
                               zeros_like_dims(x, TS_SHAPE(N, D, every - 1, C, H, W))};
        ts_tensor *c = ts_cat(parts, 2, 2);
        y = ts_narrow(ts_reshape(c, TS_SHAPE(N, D * every, C, H, W)), 1, 0, (D - 1) * every + 1);
    }
    if (!front && !back) return y;
    ts_tensor *parts[3];
    int n = 0;
    if (front) parts[n++] = zeros_like_dims(x, TS_SHAPE(N, front, C, H, W));
    parts[n++] = y;
    if (back) parts[n++] = zeros_like_dims(x, TS_SHAPE(N, back, C, H, W));
    return ts_cat(parts, n, 1);
}

/* ------------------------------------------------------------------ conv1d, conv3d */
/* The composition's result, handed out in the caller's scope (which ends the op's span) */
static ts_tensor *keep_result(ts_tensor *y) {
    y = y ? ts_retain(y) : NULL;
    ts_scope_end();
    return tsi_own(y);
}

static ts_tensor *conv1d_body(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    tsi_init();
    tsi_convnd_geom g;
    if (!tsi_convnd_check("conv1d", 1, false, x, w, b, o, &g)) return NULL;
    tsi_log_op("conv1d", g.dev);
    const ts_conv2d_opts c = {
        .stride = {1, g.s[0]}, .padding = {0, g.p[0]}, .dilation = {1, g.d[0]}, .groups = g.groups};
    const int hdim = x->shape.ndim - 1; /* a height of 1 before the length */
    ts_scope_begin();
    ts_tensor *y = ts_conv2d(ts_unsqueeze(x, hdim), ts_unsqueeze(w, 2), b, c);
    return keep_result(y ? ts_squeeze_dim(y, hdim) : NULL);
}

/* conv3d as one primitive of the backend (its conv3d_forward slot: oneDNN's on the cpu) where
 * nothing needs the composition: float32, no graph to record (no input requires grad while grad
 * mode is on), no autocast, no ONNX trace and no capture (which record the composed ops). The
 * composition runs three conv2d and sums them, with copies of the input's depth slices and of the
 * result; the primitive reads and writes each once (bench_surface's conv3d, 2 x 16 x 16^3 by 32 x
 * 16 x 3^3, one thread on a loaded Zen 4: about 1.3x, level with PyTorch within 10%;
 * bench/results/SURFACE.md). 1: *out holds the result; 0: not taken (or oneDNN declined), nothing
 * set; -1: out of memory, the error set. */
static int conv3d_direct(ts_tensor *x, ts_tensor *w, ts_tensor *b, const tsi_convnd_geom *g,
                         ts_tensor **out) {
    ts_tensor *ins[3] = {x, w, b};
    ts_dtype lower;
    const ts_backend *be = tsi_backend_for(g->dev.type);
    if (!be || !be->conv3d_forward || x->dtype != TS_F32 || w->dtype != TS_F32 ||
        (b && b->dtype != TS_F32) || tsi_needs_graph(ins, 3) || tsi_trace_active ||
        tsi_capture_graph || tsi_autocast_active(g->dev, &lower))
        return 0;
    tsi_conv3d_geom c3 = {.n = g->n, .c = g->cin, .o = g->cout, .groups = g->groups};
    for (int i = 0; i < 3; i++) {
        c3.in[i] = g->in[i], c3.out[i] = g->out[i], c3.k[i] = g->ker[i];
        c3.s[i] = g->s[i], c3.p[i] = g->p[i], c3.d[i] = g->d[i];
    }
    const ts_shape os = g->unbatched ? TS_SHAPE(g->cout, g->out[0], g->out[1], g->out[2])
                                     : TS_SHAPE(g->n, g->cout, g->out[0], g->out[1], g->out[2]);
    if (tsi_numel(x->shape) == 0 || tsi_numel(w->shape) == 0 || tsi_numel(os) == 0) return 0;
    ts_tensor *xc = tsi_contiguous("conv3d", x), *wc = xc ? tsi_contiguous("conv3d", w) : NULL;
    ts_tensor *bc = wc && b ? tsi_contiguous("conv3d", b) : NULL;
    ts_tensor *y = wc && (bc || !b) ? tsi_new("conv3d", os, TS_F32, g->dev) : NULL;
    int r = -1;
    if (y) {
        const ts_kview kx = tsi_kview(xc), kw = tsi_kview(wc), ky = tsi_kview(y);
        const ts_kview kb = bc ? tsi_kview(bc) : (ts_kview){0};
        r = be->conv3d_forward(be, g->dev.index, &c3, &kx, &kw, &kb, &ky);
    }
    ts_release(xc), ts_release(wc), ts_release(bc);
    if (r == 1)
        *out = tsi_own(y);
    else
        ts_release(y);
    return r;
}

static ts_tensor *conv3d_body(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    tsi_init();
    tsi_convnd_geom g;
    if (!tsi_convnd_check("conv3d", 3, false, x, w, b, o, &g)) return NULL;
    tsi_log_op("conv3d", g.dev);
    ts_tensor *direct = NULL;
    const int taken = conv3d_direct(x, w, b, &g, &direct);
    if (taken) return taken > 0 ? direct : tsi_own(NULL); /* failed: the error set, span ended */
    const ts_conv2d_opts c = {.stride = {g.s[1], g.s[2]},
                              .padding = {g.p[1], g.p[2]},
                              .dilation = {g.d[1], g.d[2]},
                              .groups = g.groups};
    const int64_t N = g.n, OD = g.out[0];
    ts_scope_begin();
    /* [N, C, D, H, W] -> [N, D, C, H, W], the depth padded with zeros */
    ts_tensor *xb = g.unbatched ? ts_unsqueeze(x, 0) : x;
    ts_tensor *xt = tsi_depth_spread(ts_permute(xb, TS_DIMS(0, 2, 1, 3, 4)), 1, g.p[0], g.p[0]);
    ts_tensor *acc = NULL;
    /* out[:, :, od] = sum over kk of conv2d(x[:, :, od * stride + kk * dilation], w[:, :, kk]) */
    for (int64_t kk = 0; kk < g.ker[0] && xt; kk++) {
        const int64_t start = kk * g.d[0];
        ts_tensor *xs = ts_slice(xt, 1, start, start + (OD - 1) * g.s[0] + 1, g.s[0]);
        ts_tensor *xr = ts_reshape(xs, TS_SHAPE(N * OD, g.cin, g.in[1], g.in[2]));
        ts_tensor *y = ts_conv2d(xr, ts_select(w, 2, kk), kk == 0 ? b : NULL, c);
        acc = acc ? ts_add(acc, y) : y;
    }
    ts_tensor *y5 = ts_reshape(acc, TS_SHAPE(N, OD, g.cout, g.out[1], g.out[2]));
    ts_tensor *y = ts_contiguous(ts_permute(y5, TS_DIMS(0, 2, 1, 3, 4)));
    return keep_result(g.unbatched && y ? ts_squeeze_dim(y, 0) : y);
}

/* autocast: conv2d's policy (lower precision), as PyTorch's conv1d and conv3d; the arguments are
 * cast before the checks, so mixed dtypes are fine under autocast */
ts_tensor *ts_conv1d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    tsi_init();
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "conv2d", &x, &w, &b);
    return tsi_autocast_exit(&ac, conv1d_body(x, w, b, o));
}

ts_tensor *ts_conv3d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    tsi_init();
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, "conv2d", &x, &w, &b);
    return tsi_autocast_exit(&ac, conv3d_body(x, w, b, o));
}
