/* pool.c — max_pool2d, avg_pool2d and adaptive_avg_pool2d front ends: PyTorch's checks and output
 * sizes (ceil_mode included), the backend kernels, and their backward nodes. */
#include "autograd/autograd.h"
#include "autograd/trace.h"

typedef struct pool_geom {
    ts_pool2d_params p;
    bool unbatched;
    int64_t n, c, h, w, oh, ow;
} pool_geom;

/* A contiguous tensor's data seen as [n, c, h, w]: NCHW, or NHWC-dense when cl (a channels_last
 * tensor's, backend.h's pool2d_channels_last). */
static ts_kview kview4(const ts_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w, bool cl) {
    ts_kview v = tsi_kview(t);
    const int64_t d[4] = {n, c, h, w};
    v.ndim = 4;
    for (int i = 0; i < TS_MAX_DIMS; i++) {
        v.shape[i] = i < 4 ? d[i] : 1;
        v.strides[i] = 0;
    }
    if (cl)
        v.strides[1] = 1, v.strides[3] = c, v.strides[2] = w * c, v.strides[0] = h * w * c;
    else
        v.strides[3] = 1, v.strides[2] = w, v.strides[1] = h * w, v.strides[0] = c * h * w;
    return v;
}

/* Whether the pooling keeps t's channels_last format: a batched t that prefers it, on a backend
 * whose kernels take NHWC activations of its dtype (elsewhere NCHW copies, and the result made
 * channels_last after). */
static bool keeps_channels_last(const ts_tensor *t) {
    const ts_backend *be = tsi_be(t);
    return t->shape.ndim == 4 && tsi_prefers_channels_last(t) && be->pool2d_channels_last &&
           be->pool2d_channels_last(be, tsi_dev_index(t), t->dtype);
}

/* PyTorch's pooling_output_shape: floor or ceil division, and in ceil mode the last window must
 * start inside the input or its left padding. */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
    int64_t q = num / s;
    if (num % s != 0 && num < 0) q--; /* round toward -inf */
    int64_t out = q + 1;
    if (ceil && (out - 1) * s >= in + pad) out--;
    return out;
}

/* Input rank and sizes: 3-D [C, H, W] or 4-D [N, C, H, W]; only N may be 0 (C too when
 * allow_empty_c, as adaptive pooling allows). */
static bool pool_input(const char *op, ts_tensor *x, bool allow_empty_c, pool_geom *g) {
    if (!tsi_check_input(op, x, "input")) return false;
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for %s; convert it to a floating "
                             "dtype first (ts_to_dtype)",
                             op, tsi_desc(x)),
               false;
    const ts_shape s = x->shape;
    const int lead = s.ndim == 3 ? 0 : 1;
    if ((s.ndim != 3 && s.ndim != 4) || (s.dims[lead] == 0 && !allow_empty_c) ||
        s.dims[lead + 1] == 0 || s.dims[lead + 2] == 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                             "size for input, but got: %s",
                             op, tsi_shape_str(s)),
               false;
    g->unbatched = s.ndim == 3;
    g->n = g->unbatched ? 1 : s.dims[0];
    g->c = s.dims[lead], g->h = s.dims[lead + 1], g->w = s.dims[lead + 2];
    return true;
}

static bool pool_check(const char *op, ts_tensor *x, ts_pool2d_opts o, ts_pool_kind kind,
                       pool_geom *g) {
    if (!pool_input(op, x, false, g)) return false;
    ts_pool2d_params *p = &g->p;
    p->kind = kind;
    if (o.kernel[0] <= 0 || o.kernel[1] <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: kernel size should be greater than zero, but got kH: %d kW: %d",
                             op, o.kernel[0], o.kernel[1]),
               false;
    if (o.stride[0] < 0 || o.stride[1] < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: stride should be greater than zero, but got dH: %d dW: %d", op,
                             o.stride[0], o.stride[1]),
               false;
    if (o.padding[0] < 0 || o.padding[1] < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: pad must be non-negative, but got pad: (%d, %d)", op,
                             o.padding[0], o.padding[1]),
               false;
    if (o.dilation[0] < 0 || o.dilation[1] < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: dilation should be greater than zero, but got dilationH: %d "
                             "dilationW: %d",
                             op, o.dilation[0], o.dilation[1]),
               false;
    for (int i = 0; i < 2; i++) {
        p->kernel[i] = o.kernel[i];
        p->stride[i] = o.stride[i] ? o.stride[i] : o.kernel[i];
        p->padding[i] = o.padding[i];
        p->dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
    }
    if (o.divisor_override < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: divisor_override must be positive, but got %d", op,
                             o.divisor_override),
               false;
    p->divisor = kind == TS_POOL_MAX ? 0 : o.divisor_override;
    if (kind != TS_POOL_MAX && (p->dilation[0] != 1 || p->dilation[1] != 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: dilation is not supported (PyTorch's avg_pool2d has none), but "
                             "got dilation (%d, %d)",
                             op, p->dilation[0], p->dilation[1]),
               false;
    for (int i = 0; i < 2; i++)
        if (p->padding[i] > p->kernel[i] / 2)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: pad should be at most half of kernel size, but got pad=%d "
                                 "and kernel_size=%d",
                                 op, p->padding[i], p->kernel[i]),
                   false;
    g->oh =
        pool_out_size(g->h, p->kernel[0], p->padding[0], p->stride[0], p->dilation[0], o.ceil_mode);
    g->ow =
        pool_out_size(g->w, p->kernel[1], p->padding[1], p->stride[1], p->dilation[1], o.ceil_mode);
    if (g->oh < 1 || g->ow < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given input size: (%lldx%lldx%lld). Calculated output size: "
                             "(%lldx%lldx%lld). Output size is too small",
                             op, (long long)g->c, (long long)g->h, (long long)g->w, (long long)g->c,
                             (long long)g->oh, (long long)g->ow),
               false;
    return true;
}

/* node->ip: kernel, stride, padding, dilation (2 each), kind; ip[9]: whether the forward ran the
 * channels_last kernels (backward then does too) */
static void params_store(ts_node *n, const ts_pool2d_params *p) {
    for (int i = 0; i < 2; i++) {
        n->ip[i] = p->kernel[i];
        n->ip[2 + i] = p->stride[i];
        n->ip[4 + i] = p->padding[i];
        n->ip[6 + i] = p->dilation[i];
    }
    n->ip[8] = p->kind;
    n->ip[10] = p->divisor;
}

static ts_pool2d_params params_load(const ts_node *n) {
    ts_pool2d_params p;
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = (int)n->ip[i];
        p.stride[i] = (int)n->ip[2 + i];
        p.padding[i] = (int)n->ip[4 + i];
        p.dilation[i] = (int)n->ip[6 + i];
    }
    p.kind = (ts_pool_kind)n->ip[8];
    p.divisor = (int)n->ip[10];
    return p;
}

/* Max pooling's backward as a scatter_add of g at the indices within each plane (public ops: under
 * create_graph it records the gradient's graph, whose own backward is a gather). */
static ts_tensor *max_pool_grad_composite(const ts_node *n, ts_tensor *g, ts_tensor *idx) {
    const ts_shape xs = n->in_shape[0];
    const int d = xs.ndim - 2; /* the plane's dim once H, W (OH, OW) are flattened */
    ts_shape fx = xs, fg = g->shape;
    fx.ndim = fg.ndim = d + 1;
    fx.dims[d] = xs.dims[d] * xs.dims[d + 1];
    fg.dims[d] = g->shape.dims[d] * g->shape.dims[d + 1];
    if (g->dtype != n->in_dtype[0]) g = ts_to_dtype(g, n->in_dtype[0]);
    ts_tensor *z = ts_zeros(fx, (ts_opts){.dtype = n->in_dtype[0], .device = n->in_device[0]});
    return ts_reshape(ts_scatter_add(z, d, ts_reshape(idx, fg), ts_reshape(g, fg)), xs);
}

static ts_tensor *pool_forward(const char *op, const char *node_name, ts_tensor *x,
                               const pool_geom *g, ts_tensor **indices_out);

/* The average poolings' backward is linear in g, so its own backward is the pooling again
 * (PyTorch's AvgPool2DBackwardBackward0 and its adaptive twin): the incoming gradient's gradient
 * is the pooling of gg, x's is zero. Inputs: g (the pooled shape), then x's edge. */
static void avg_pool_bwd_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const ts_shape gs = n->in_shape[0], xs = n->in_shape[1];
    if (tsi_node_needs(n, 1))
        gi[1] = ts_zeros(xs, (ts_opts){.dtype = n->in_dtype[1], .device = n->in_device[1]});
    if (!go[0] || !tsi_node_needs(n, 0)) return;
    pool_geom g = {.p = params_load(n), .unbatched = xs.ndim == 3};
    const int lead = g.unbatched ? 0 : 1;
    g.n = g.unbatched ? 1 : xs.dims[0];
    g.c = xs.dims[lead], g.h = xs.dims[lead + 1], g.w = xs.dims[lead + 2];
    g.oh = gs.dims[lead + 1], g.ow = gs.dims[lead + 2];
    ts_tensor *gg = go[0]->dtype == n->in_dtype[1] ? go[0] : ts_to_dtype(go[0], n->in_dtype[1]);
    const char *name =
        g.p.kind == TS_POOL_ADAPTIVE_AVG ? "AdaptiveAvgPool2DBackward0" : "AvgPool2DBackward0";
    ts_tensor *r = gg ? pool_forward(n->op, name, gg, &g, NULL) : NULL;
    gi[0] = r && r->dtype != n->in_dtype[0] ? ts_to_dtype(r, n->in_dtype[0]) : r;
}

/* Under create_graph, gx (made by the kernels from go) as the output of avg_pool_bwd_backward's
 * node, whose inputs are go and pool node n's own input edge. false + error on failure. */
static bool avg_pool_grad_graph(ts_node *n, ts_tensor *go, ts_tensor *gx) {
    const bool adaptive = n->ip[8] == TS_POOL_ADAPTIVE_AVG;
    ts_node *e =
        tsi_node_new(adaptive ? "AdaptiveAvgPool2DBackwardBackward0" : "AvgPool2DBackwardBackward0",
                     adaptive ? "adaptive_avg_pool2d" : "avg_pool2d", avg_pool_bwd_backward,
                     (ts_tensor *[]){go, NULL}, 2, 1, 0);
    if (!e) return false;
    e->next[1].fn = n->next[0].fn ? tsi_node_retain(n->next[0].fn) : NULL;
    e->next[1].output_nr = n->next[0].output_nr;
    e->next[1].leaf = ts_retain(n->next[0].leaf);
    e->in_shape[1] = n->in_shape[0];
    e->in_dtype[1] = n->in_dtype[0];
    e->in_device[1] = n->in_device[0];
    for (int i = 0; i < 11; i++) e->ip[i] = n->ip[i];
    e->flags |= TSI_NODE_TWICE; /* pool_forward records the pooling of gg */
    tsi_node_set_output(e, gx, 0);
    tsi_node_release(e);
    return true;
}

/* One backward for the three kinds: max pooling scatters through its saved indices, the averages
 * spread each gradient over its window. */
static void pool_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const char *op = "pool2d_backward";
    if (!go[0] || !tsi_node_needs(n, 0)) return;
    const ts_pool2d_params p = params_load(n);
    ts_tensor *idx = NULL;
    if (p.kind == TS_POOL_MAX && !(idx = tsi_node_saved(n, 0))) return;
    if (idx && tsi_create_graph_active()) {
        gi[0] = max_pool_grad_composite(n, go[0], idx);
        return;
    }
    const ts_shape xs = n->in_shape[0];
    const int lead = xs.ndim == 3 ? 0 : 1;
    const int64_t N = xs.ndim == 3 ? 1 : xs.dims[0], C = xs.dims[lead], H = xs.dims[lead + 1],
                  W = xs.dims[lead + 2];
    const int64_t OH = go[0]->shape.dims[lead + 1], OW = go[0]->shape.dims[lead + 2];
    ts_tensor *gc = tsi_cast(op, go[0], n->in_dtype[0]);
    const bool cl = n->ip[9] != 0; /* as the forward ran (max pooling's indices are NHWC then) */
    ts_tensor *g = gc ? (cl ? tsi_channels_last(op, gc) : tsi_contiguous(op, gc)) : NULL;
    ts_release(gc);
    ts_tensor *gx = !g   ? NULL
                    : cl ? tsi_new_channels_last(op, xs, n->in_dtype[0], tsi_device(g))
                         : tsi_new(op, xs, n->in_dtype[0], tsi_device(g));
    if (gx && tsi_numel(xs) > 0) {
        const ts_kview kx = kview4(gx, N, C, H, W, cl), kg = kview4(g, N, C, OH, OW, cl);
        const ts_kview ki = idx ? kview4(idx, N, C, OH, OW, cl) : kg;
        tsi_be(g)->pool2d_backward(tsi_be(g), tsi_dev_index(g), &kx, &kg, idx ? &ki : NULL, &p);
    }
    ts_release(g);
    if (gx && !idx && tsi_create_graph_active() && !avg_pool_grad_graph(n, go[0], gx))
        ts_release(gx), gx = NULL;
    gi[0] = tsi_own(gx);
}

static ts_tensor *pool_forward(const char *op, const char *node_name, ts_tensor *x,
                               const pool_geom *g, ts_tensor **indices_out) {
    const ts_device dev = tsi_device(x);
    tsi_log_op(op, dev);
    const bool max = g->p.kind == TS_POOL_MAX;
    const bool graph = tsi_needs_graph(&x, 1);
    const ts_shape os =
        g->unbatched ? TS_SHAPE(g->c, g->oh, g->ow) : TS_SHAPE(g->n, g->c, g->oh, g->ow);
    const bool cl = keeps_channels_last(x); /* NHWC kernels: no copies to NCHW and back */
    ts_tensor *xc = cl ? tsi_channels_last(op, x) : tsi_contiguous(op, x);
    ts_tensor *(*make)(const char *, ts_shape, ts_dtype, ts_device) =
        cl ? tsi_new_channels_last : tsi_new;
    ts_tensor *out = xc ? make(op, os, x->dtype, dev) : NULL;
    /* indices only when backward will need them */
    const bool want_idx = max && (graph || indices_out);
    ts_tensor *idx = out && want_idx ? make(op, os, TS_I64, dev) : NULL;
    if (out && (idx || !want_idx) && tsi_numel(os) > 0) {
        const ts_kview ko = kview4(out, g->n, g->c, g->oh, g->ow, cl);
        const ts_kview kx = kview4(xc, g->n, g->c, g->h, g->w, cl);
        const ts_kview ki = idx ? kview4(idx, g->n, g->c, g->oh, g->ow, cl) : ko;
        tsi_be(xc)->pool2d(tsi_be(xc), tsi_dev_index(xc), &ko, &kx, idx ? &ki : NULL, &g->p);
    }
    if (out && want_idx && !idx) { /* the indices could not be allocated */
        ts_release(out);
        out = NULL;
    }
    if (out && !cl && tsi_prefers_channels_last(x)) { /* the NCHW kernels' result in x's format */
        ts_tensor *nhwc = tsi_channels_last(op, out);
        ts_release(out);
        out = nhwc;
    }
    if (out) {
        ts_node *n = tsi_record(node_name, op, pool_backward, &x, 1, out, &idx, idx ? 1 : 0);
        if (n) params_store(n, &g->p), n->ip[9] = cl;
        /* max_pool_grad_composite; the averages' gradient gets avg_pool_bwd_backward's node */
        if (n) n->flags |= TSI_NODE_TWICE;
    }
    if (indices_out) { /* the caller's: its reference moves into the scope */
        *indices_out = out && idx ? tsi_own(idx) : NULL;
        if (!*indices_out) ts_release(idx);
        idx = NULL;
    }
    ts_release(idx);
    ts_release(xc);
    return tsi_own(out);
}

/* the options as the trace records them */
static ts_tensor *trace_pool(const char *op, ts_tensor *x, ts_tensor *out, ts_pool2d_opts o) {
    const int64_t ip[11] = {o.kernel[0],  o.kernel[1],   o.stride[0],       o.stride[1],
                            o.padding[0], o.padding[1],  o.dilation[0],     o.dilation[1],
                            o.ceil_mode,  o.exclude_pad, o.divisor_override};
    return tsi_trace(op, &x, 1, out, ip, 11, NULL, 0);
}

ts_tensor *ts_max_pool2d(ts_tensor *x, ts_pool2d_opts o) {
    tsi_init();
    pool_geom g;
    if (!pool_check("max_pool2d", x, o, TS_POOL_MAX, &g)) return NULL;
    return trace_pool("max_pool2d", x,
                      pool_forward("max_pool2d", "MaxPool2DWithIndicesBackward0", x, &g, NULL), o);
}

ts_tensor *ts_max_pool2d_with_indices(ts_tensor *x, ts_pool2d_opts o, ts_tensor **indices) {
    const char *op = "max_pool2d_with_indices";
    tsi_init();
    if (!indices) return tsi_error_set(TS_ERR_ARG, "%s: indices must not be NULL", op), NULL;
    *indices = NULL;
    pool_geom g;
    if (!pool_check(op, x, o, TS_POOL_MAX, &g)) return NULL;
    ts_tensor *y = pool_forward(op, "MaxPool2DWithIndicesBackward0", x, &g, indices);
    if (!y) *indices = NULL;
    return trace_pool("max_pool2d", x, y, o);
}

ts_tensor *ts_avg_pool2d(ts_tensor *x, ts_pool2d_opts o) {
    tsi_init();
    pool_geom g;
    const ts_pool_kind kind = o.exclude_pad ? TS_POOL_AVG_EXCLUDE_PAD : TS_POOL_AVG;
    if (!pool_check("avg_pool2d", x, o, kind, &g)) return NULL;
    ts_tensor *y = pool_forward("avg_pool2d", "AvgPool2DBackward0", x, &g, NULL);
    return trace_pool("avg_pool2d", x, y, o);
}

ts_tensor *ts_adaptive_avg_pool2d(ts_tensor *x, int64_t out_h, int64_t out_w) {
    const char *op = "adaptive_avg_pool2d";
    tsi_init();
    pool_geom g = {.p = {.kind = TS_POOL_ADAPTIVE_AVG}};
    if (!pool_input(op, x, true, &g)) return NULL;
    if (out_h < 0 || out_w < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: elements of output_size must be greater than or equal to 0 but "
                             "received {%lld, %lld}",
                             op, (long long)out_h, (long long)out_w),
               NULL;
    g.oh = out_h, g.ow = out_w;
    return tsi_trace(op, &x, 1, pool_forward(op, "AdaptiveAvgPool2DBackward0", x, &g, NULL),
                     (int64_t[]){out_h, out_w}, 2, NULL, 0);
}

/* ------------------------------------------------------------ max_pool2d_with_indices_backward */
/* Its own gradient (PyTorch's max_pool_double_backward): the output's gradient gg (x's shape)
 * gathered at the indices, in go's shape; x's gradient is zero. */
static void max_pool_bwd_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const ts_shape gs = n->in_shape[0], xs = n->in_shape[1];
    if (tsi_node_needs(n, 1))
        gi[1] = ts_zeros(xs, (ts_opts){.dtype = n->in_dtype[1], .device = n->in_device[1]});
    if (!go[0] || !tsi_node_needs(n, 0)) return;
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!idx) return;
    const int d = xs.ndim - 2; /* the plane's dim once H, W (OH, OW) are flattened */
    ts_shape fx = xs, fg = gs;
    fx.ndim = fg.ndim = d + 1;
    fx.dims[d] = xs.dims[d] * xs.dims[d + 1];
    fg.dims[d] = gs.dims[d] * gs.dims[d + 1];
    ts_tensor *g = ts_gather(ts_reshape(go[0], fx), d, ts_reshape(idx, fg));
    gi[0] = g ? ts_to_dtype(ts_reshape(g, gs), n->in_dtype[0]) : NULL;
}

ts_tensor *ts_max_pool2d_backward(ts_tensor *go, ts_tensor *x, ts_pool2d_opts o,
                                  ts_tensor *indices) {
    const char *op = "max_pool2d_with_indices_backward";
    tsi_init();
    pool_geom g;
    if (!pool_check(op, x, o, TS_POOL_MAX, &g)) return NULL;
    if (!tsi_check_input(op, go, "grad_output") || !tsi_check_input(op, indices, "indices"))
        return NULL;
    ts_tensor *all[3] = {go, x, indices};
    ts_device dev;
    if (!tsi_same_device(op, all, 3, false, &dev)) return NULL;
    const ts_shape os = g.unbatched ? TS_SHAPE(g.c, g.oh, g.ow) : TS_SHAPE(g.n, g.c, g.oh, g.ow);
    if (!tsi_shape_equal(go->shape, os) || !tsi_shape_equal(indices->shape, os))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: grad_output %s and indices %s must have the pooling's output "
                             "shape %s",
                             op, tsi_shape_str(go->shape), tsi_shape_str(indices->shape),
                             tsi_shape_str(os)),
               NULL;
    if (indices->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: indices must be int64 (Long), but got %s", op,
                             tsi_torch_scalar_name(indices->dtype)),
               NULL;
    if (!tsi_is_float(go->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: grad_output must be floating, but got %s", op,
                             tsi_torch_scalar_name(go->dtype)),
               NULL;
    tsi_log_op(op, dev);
    const int64_t plane = g.h * g.w;
    ts_tensor *gx = NULL;
    ts_scope_begin();
    if (tsi_numel(os) > 0) { /* the kernel trusts its indices: each must lie in the input plane */
        const double lo = ts_item(ts_min(indices)), hi = ts_item(ts_max(indices));
        if (ts_error() == TS_OK && (lo < 0 || hi >= (double)plane))
            tsi_error_set(TS_ERR_ARG,
                          "%s: indices must lie in [0, %lld) (the input plane %lldx%lld), but "
                          "got %.0f..%.0f",
                          op, (long long)plane, (long long)g.h, (long long)g.w, lo, hi);
    }
    ts_tensor *gc = ts_error() == TS_OK ? tsi_cast(op, go, x->dtype) : NULL;
    ts_tensor *gk = gc ? tsi_contiguous(op, gc) : NULL;
    ts_tensor *ik = gk ? tsi_contiguous(op, indices) : NULL;
    gx = ik ? tsi_new(op, x->shape, x->dtype, dev) : NULL;
    if (gx && tsi_numel(x->shape) > 0) {
        const ts_kview kx = kview4(gx, g.n, g.c, g.h, g.w, false),
                       kg = kview4(gk, g.n, g.c, g.oh, g.ow, false),
                       ki = kview4(ik, g.n, g.c, g.oh, g.ow, false);
        tsi_be(gx)->pool2d_backward(tsi_be(gx), tsi_dev_index(gx), &kx, &kg, &ki, &g.p);
    }
    ts_release(gc);
    ts_release(gk);
    ts_release(ik);
    ts_scope_end();
    if (gx && tsi_prefers_channels_last(x)) { /* the input's memory format, as PyTorch's */
        ts_tensor *cl = tsi_channels_last(op, gx);
        ts_release(gx);
        gx = cl;
    }
    if (gx) {
        ts_tensor *ins[2] = {go, x};
        tsi_record("MaxPool2DWithIndicesBackwardBackward0", op, max_pool_bwd_backward, ins, 2, gx,
                   &indices, 1);
    }
    return tsi_own(gx);
}
