/* conv_transpose.c — the transposed convolutions. 2d is the input gradient of conv2d: the
 * backend's conv2d_backward_data kernel, and its node ConvolutionBackward0 runs conv2d for the
 * input's gradient and conv2d_backward_weight with the roles of input and gradient swapped for the
 * weight's. 1d is 2d over a height-1 view; 3d a sum over the kernel's depth of 2d over the
 * (zero-dilated, padded) depth slices. */
#include <math.h>

#include "amp/autocast.h"
#include "nn/conv_internal.h"
#include "nn/conv_nd_internal.h"

static ts_conv2d_params params_of(const tsi_convnd_geom *g) {
    ts_conv2d_params p = {.act = TS_CONV_ACT_NONE, .act_lo = NAN, .act_hi = NAN};
    for (int i = 0; i < 2; i++)
        p.stride[i] = g->s[i], p.padding[i] = g->p[i], p.dilation[i] = g->d[i];
    p.groups = g->groups;
    return p;
}

/* out (allocated, contiguous) = zeros when an operand is empty, else run(...) */
static bool empty_operand(const ts_tensor *out, const ts_tensor *a, const ts_tensor *b) {
    if (tsi_numel(out->shape) == 0) return true;
    if (tsi_numel(a->shape) > 0 && tsi_numel(b->shape) > 0) return false;
    const ts_backend *be = tsi_be(out);
    const ts_kview ko = tsi_kview(out);
    be->fill(be, tsi_dev_index(out), &ko, 0.0);
    return true;
}

/* The saved input (slot 0: x, 1: w) as the forward got it: slots 2 and 3 hold the inputs
 * themselves where the kernels read contiguous copies (which carry no history). */
static ts_tensor *saved_input(ts_node *n, int slot) {
    return tsi_node_has_saved(n, slot + 2) ? tsi_node_saved(n, slot + 2) : tsi_node_saved(n, slot);
}

/* ct_backward's formulas as public ops, so that under create_graph they record the gradients'
 * graph: gx = conv2d(gy, w) (its output has x's size: output_padding < stride here), gw = conv2d's
 * weight gradient (conv.c's composite) with gy as the input and x as the output's gradient. */
static void ct_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const ts_conv2d_params p = tsi_conv_params_load(n);
    ts_tensor *g = go[0]->dtype == n->in_dtype[0] ? go[0] : ts_to_dtype(go[0], n->in_dtype[0]);
    if (!g) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *w = saved_input(n, 1);
        if (!w) return;
        ts_conv2d_opts o = {.groups = p.groups};
        for (int i = 0; i < 2; i++)
            o.stride[i] = p.stride[i], o.padding[i] = p.padding[i], o.dilation[i] = p.dilation[i];
        gi[0] = ts_conv2d(g, w, NULL, o);
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *x = saved_input(n, 0);
        if (!x) return;
        gi[1] = tsi_conv_weight_grad_composite(g, x, &p, n->in_shape[1]);
    }
}

/* y = conv_transpose2d(x, w): gx = conv2d(gy, w), gw = conv2d's weight gradient with x as the
 * output's gradient and gy as the input */
static void ct_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const char *op = "conv_transpose2d_backward";
    if (!go[0]) return;
    if (tsi_create_graph_active()) {
        ct_backward_composite(n, go, gi);
        return;
    }
    const ts_conv2d_params p = tsi_conv_params_load(n);
    const ts_shape xs = n->in_shape[0], ws = n->in_shape[1];
    ts_tensor *gc = tsi_cast(op, go[0], n->in_dtype[0]);
    ts_tensor *g = gc ? tsi_contiguous(op, gc) : NULL;
    ts_release(gc);
    if (!g) return;
    const ts_backend *be = tsi_be(g);
    const ts_kview kg = tsi_kview(g);
    if (tsi_node_needs(n, 0)) {
        ts_tensor *w = tsi_node_saved(n, 1);
        ts_tensor *gx = w ? tsi_new(op, xs, n->in_dtype[0], tsi_device(g)) : NULL;
        if (gx && !empty_operand(gx, g, w)) {
            const ts_kview kx = tsi_kview(gx), kw = tsi_kview(w);
            be->conv2d(be, tsi_dev_index(g), &kx, &kg, &kw, NULL, &p);
        }
        gi[0] = tsi_own(gx);
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *x = tsi_node_saved(n, 0);
        ts_tensor *gw = x ? tsi_new(op, ws, n->in_dtype[1], tsi_device(g)) : NULL;
        if (gw && !empty_operand(gw, g, x)) {
            const ts_kview kw = tsi_kview(gw), kx = tsi_kview(x);
            be->conv2d_backward_weight(be, tsi_dev_index(g), &kw, &kx, &kg, &p);
        }
        gi[1] = tsi_own(gw);
    }
    ts_release(g);
}

/* g's output size is consistent with conv2d's (output_padding < stride): conv2d of the result
 * has x's size, so the backend's backward-data kernel computes it */
static ts_tensor *ct2d_direct(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g) {
    const char *op = "conv_transpose2d";
    const ts_conv2d_params p = params_of(g);
    ts_tensor *xc = tsi_contiguous(op, x), *wc = xc ? tsi_contiguous(op, w) : NULL;
    const ts_shape os = TS_SHAPE(g->n, g->cout, g->out[0], g->out[1]);
    ts_tensor *out = wc ? tsi_new(op, os, x->dtype, g->dev) : NULL;
    if (out && !empty_operand(out, xc, wc)) {
        const ts_backend *be = tsi_be(xc);
        const ts_kview ko = tsi_kview(out), kx = tsi_kview(xc), kw = tsi_kview(wc);
        be->conv2d_backward_data(be, tsi_dev_index(xc), &ko, &kx, &kw, &p);
    }
    if (out) {
        ts_tensor *ins[2] = {x, w};
        /* the kernels read xc and wc; the inputs themselves too where those are copies, for
         * ct_backward_composite (create_graph), which differentiates again */
        ts_tensor *saves[4] = {w->requires_grad ? xc : NULL, x->requires_grad ? wc : NULL,
                               w->requires_grad && xc != x ? x : NULL,
                               x->requires_grad && wc != w ? w : NULL};
        ts_node *n = tsi_record("ConvolutionBackward0", "conv_transpose2d", ct_backward, ins, 2,
                                out, saves, 4);
        if (n) tsi_conv_params_store(n, &p), n->flags |= TSI_NODE_TWICE;
    }
    ts_release(xc);
    ts_release(wc);
    return tsi_own(out);
}

ts_tensor *tsi_conv_transpose2d_nobias(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g) {
    if (g->op[0] < g->s[0] && g->op[1] < g->s[1]) return ct2d_direct(x, w, g);
    /* output_padding >= stride (< dilation): the rows past what a consistent size holds get
     * values from the padding too, so: no padding, then crop padding and extend by
     * output_padding (ts_pad's negative pads crop) */
    tsi_convnd_geom g0 = *g;
    int64_t pad[4];
    for (int i = 0; i < 2; i++) {
        g0.p[i] = g0.op[i] = 0;
        g0.out[i] = (g->in[i] - 1) * g->s[i] + (int64_t)g->d[i] * (g->ker[i] - 1) + 1;
        pad[2 * (1 - i)] = -(int64_t)g->p[i];
        pad[2 * (1 - i) + 1] = (int64_t)g->op[i] - g->p[i];
    }
    ts_tensor *full = ct2d_direct(x, w, &g0);
    return full ? ts_pad(full, pad, 4, TS_PAD_CONSTANT, 0.0) : NULL;
}

/* x [N, Cin, L]: 2d over [N, Cin, 1, L] */
static ts_tensor *ct1d(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g) {
    tsi_convnd_geom g2 = *g;
    g2.k = 2;
    g2.in[0] = g2.ker[0] = g2.out[0] = 1;
    g2.s[0] = g2.d[0] = 1;
    g2.p[0] = g2.op[0] = 0;
    g2.in[1] = g->in[0], g2.ker[1] = g->ker[0], g2.out[1] = g->out[0];
    g2.s[1] = g->s[0], g2.p[1] = g->p[0], g2.d[1] = g->d[0], g2.op[1] = g->op[0];
    ts_tensor *y = tsi_conv_transpose2d_nobias(ts_unsqueeze(x, 2), ts_unsqueeze(w, 2), &g2);
    return y ? ts_squeeze_dim(y, 2) : NULL;
}

/* x [N, Cin, D, H, W]. Along the depth, out[o] = sum over (i, kk) with i * stride + kk * dilation
 * = o + padding of y_kk[i], y_kk the 2d transposed convolution of slice i by w[:, :, kk]: on x's
 * depth with stride - 1 zero slices between slices and (kd - 1) * dilation in front, that is
 * y_kk's slices from (kd - 1 - kk) * dilation + padding on. */
static ts_tensor *ct3d(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g) {
    const int64_t N = g->n, kd = g->ker[0], dd = g->d[0], OD = g->out[0];
    const int64_t front = (kd - 1) * dd, back0 = (kd - 1) * dd - g->p[0] + g->op[0];
    ts_tensor *xz = tsi_depth_spread(ts_permute(x, TS_DIMS(0, 2, 1, 3, 4)), g->s[0], front,
                                     back0 > 0 ? back0 : 0);
    if (!xz) return NULL;
    const int64_t Dz = xz->shape.dims[1];
    tsi_convnd_geom g2 = *g;
    g2.k = 2;
    g2.n = N * Dz;
    for (int i = 0; i < 2; i++) {
        g2.in[i] = g->in[i + 1], g2.ker[i] = g->ker[i + 1], g2.out[i] = g->out[i + 1];
        g2.s[i] = g->s[i + 1], g2.p[i] = g->p[i + 1], g2.d[i] = g->d[i + 1];
        g2.op[i] = g->op[i + 1];
    }
    ts_tensor *xr = ts_reshape(xz, TS_SHAPE(N * Dz, g->cin, g->in[1], g->in[2])), *acc = NULL;
    for (int64_t kk = 0; kk < kd && xr; kk++) {
        ts_tensor *y = tsi_conv_transpose2d_nobias(xr, ts_select(w, 2, kk), &g2);
        ts_tensor *y5 = ts_reshape(y, TS_SHAPE(N, Dz, g->cout, g->out[1], g->out[2]));
        ts_tensor *part = ts_narrow(y5, 1, (kd - 1 - kk) * dd + g->p[0], OD);
        acc = acc ? ts_add(acc, part) : part;
    }
    return ts_contiguous(ts_permute(acc, TS_DIMS(0, 2, 1, 3, 4)));
}

/* ct3d for a float32 input off CUDA (the cpu and sim backends' kernels): in float64, rounded
 * once. The depth's kd 2d transposed convolutions are kd float32 accumulations, each rounded,
 * in the direct kernels' (cin, kh, kw) order, then added: on PyTorch's OpInfo samples 2.9 times
 * float32's tolerance against a float64 run where PyTorch's one gemm + col2vol is at 1.2 (the
 * worst element, in a cancellation). In float64 the error is the final rounding alone (about
 * 0.5 ulp), for twice the arithmetic's cost and float64 copies of x and w saved for backward. */
static ts_tensor *ct3d_f32(ts_tensor *x, ts_tensor *w, const tsi_convnd_geom *g) {
    if (x->dtype != TS_F32 || w->dtype != TS_F32 || g->dev.type == TS_CUDA) return ct3d(x, w, g);
    ts_tensor *x64 = ts_to_dtype(x, TS_F64), *w64 = x64 ? ts_to_dtype(w, TS_F64) : NULL;
    ts_tensor *y = w64 ? ct3d(x64, w64, g) : NULL;
    return y ? ts_to_dtype(y, TS_F32) : NULL;
}

static ts_tensor *conv_transpose_run(const char *op, int k, ts_tensor *x, ts_tensor *w,
                                     ts_tensor *b, ts_convnd_opts o) {
    tsi_convnd_geom g;
    if (!tsi_convnd_check(op, k, true, x, w, b, o, &g)) return NULL;
    tsi_log_op(op, g.dev);
    ts_scope_begin();
    ts_tensor *xb = g.unbatched ? ts_unsqueeze(x, 0) : x;
    g.n = g.unbatched ? 1 : g.n;
    ts_tensor *y = k == 1   ? ct1d(xb, w, &g)
                   : k == 2 ? tsi_conv_transpose2d_nobias(xb, w, &g)
                            : ct3d_f32(xb, w, &g);
    if (b && y) {
        ts_shape bs = TS_SHAPE(g.cout, 1, 1, 1);
        bs.ndim = k + 1;
        y = ts_add(y, ts_reshape(b, bs));
    }
    if (g.unbatched && y) y = ts_squeeze_dim(y, 0);
    y = y ? ts_retain(y) : NULL;
    ts_scope_end();
    return tsi_own(y); /* ends the op's span */
}

static ts_tensor *conv_transpose(const char *op, int k, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                                 ts_convnd_opts o) {
    tsi_init();
    tsi_ac_frame ac; /* autocast: conv2d's policy (lower precision), as PyTorch's conv_transpose */
    TSI_AUTOCAST_ENTER(&ac, "conv2d", &x, &w, &b);
    return tsi_autocast_exit(&ac, conv_transpose_run(op, k, x, w, b, o));
}

ts_tensor *ts_conv_transpose1d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    return conv_transpose("conv_transpose1d", 1, x, w, b, o);
}

ts_tensor *ts_conv_transpose2d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    return conv_transpose("conv_transpose2d", 2, x, w, b, o);
}

ts_tensor *ts_conv_transpose3d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    return conv_transpose("conv_transpose3d", 3, x, w, b, o);
}
