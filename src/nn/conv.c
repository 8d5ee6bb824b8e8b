/* conv.c — the conv2d front end: PyTorch's checks and output size, the backend kernels, and the
 * ConvolutionBackward0 node. */
#include <math.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "core/capture.h"
#include "nn/conv_internal.h"

/* A dense tensor's data seen as [n, c, h, w] (unbatched tensors get n = 1): NCHW-contiguous, or
 * channels_last (NHWC) when cl. */
static ts_kview kview4(const ts_tensor *t, int64_t n, int64_t c, int64_t h, int64_t w, bool cl) {
    ts_kview v = tsi_kview(t);
    const ts_shape s = TS_SHAPE(n, c, h, w);
    v.ndim = 4;
    for (int i = 0; i < TS_MAX_DIMS; i++) {
        v.shape[i] = i < 4 ? s.dims[i] : 1;
        v.strides[i] = 0;
    }
    if (cl)
        tsi_channels_last_strides(&s, v.strides);
    else
        tsi_contiguous_strides(&s, v.strides);
    return v;
}

/* Whether the convolution keeps x's channels_last format: a batched x that prefers it, on a
 * backend whose kernels take NHWC activations of that dtype (backend.h's conv2d_channels_last;
 * elsewhere the result is NCHW-contiguous). */
static bool keeps_channels_last(const ts_tensor *x) {
    const ts_backend *be = tsi_be(x);
    return x->shape.ndim == 4 && tsi_prefers_channels_last(x) && be->conv2d_channels_last &&
           be->conv2d_channels_last(be, tsi_dev_index(x), x->dtype);
}

typedef struct conv_geom {
    ts_conv2d_params p;
    bool unbatched;
    int64_t n, c, h, w, o, kh, kw, oh, ow;
} conv_geom;

/* Zero means the default (1) for stride, dilation and groups; negative values are errors. No
 * activation and no weight identity (conv_run adds those). */
static bool conv_params(const char *op, ts_conv2d_opts o, ts_conv2d_params *p) {
    *p = (ts_conv2d_params){.act = TS_CONV_ACT_NONE, .act_lo = NAN, .act_hi = NAN};
    for (int i = 0; i < 2; i++) {
        if (o.stride[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: non-positive stride is not supported", op), false;
        if (o.padding[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: negative padding is not supported", op), false;
        if (o.dilation[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: non-positive dilation is not supported", op),
                   false;
        p->stride[i] = o.stride[i] ? o.stride[i] : 1;
        p->padding[i] = o.padding[i];
        p->dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
    }
    if (o.groups < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: non-positive groups is not supported", op), false;
    p->groups = o.groups ? o.groups : 1;
    return true;
}

/* weight [out, in / groups, ...] against an input of cin channels, with PyTorch's messages
 * (conv_internal.h) */
bool tsi_conv_check_groups(const char *op, ts_shape xs, ts_shape ws, int64_t groups, int64_t cin) {
    if (ws.dims[0] % groups != 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given groups=%lld, expected weight to be divisible by %lld at "
                             "dimension 0, but got weight of size %s instead",
                             op, (long long)groups, (long long)groups, tsi_shape_str(ws)),
               false;
    if (cin != ws.dims[1] * groups)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given groups=%lld, weight of size %s, expected input%s to have "
                             "%lld channels, but got %lld channels instead",
                             op, (long long)groups, tsi_shape_str(ws), tsi_shape_str(xs),
                             (long long)(ws.dims[1] * groups), (long long)cin),
               false;
    return true;
}

/* a floating input, and weight and bias of its dtype, with PyTorch's messages (conv_internal.h) */
bool tsi_conv_check_dtypes(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    if (!tsi_is_float(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating input, but got %s", op,
                             tsi_desc(x)),
               false;
    if (w->dtype != x->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: input type (%s) and weight type (%s) should be the same", op,
                             ts_dtype_name(x->dtype), ts_dtype_name(w->dtype)),
               false;
    if (b && b->dtype != x->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: input type (%s) and bias type (%s) should be the same", op,
                             ts_dtype_name(x->dtype), ts_dtype_name(b->dtype)),
               false;
    return true;
}

static bool conv_check(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                       conv_geom *g, ts_device *dev) {
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, w, "weight")) return false;
    ts_tensor *all[3] = {x, w, b};
    if (!tsi_same_device(op, all, b ? 3 : 2, false, dev)) return false;
    if (!tsi_conv_check_dtypes(op, x, w, b)) return false;
    const ts_shape xs = x->shape, ws = w->shape;
    if (xs.ndim != 3 && xs.ndim != 4)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                             "input of size: %s",
                             op, tsi_shape_str(xs)),
               false;
    if (ws.ndim != 4 || ws.dims[2] < 1 || ws.dims[3] < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a 4-D weight [out_channels, in_channels/groups, kH, kW] "
                             "with a non-empty kernel, but got weight of size %s",
                             op, tsi_shape_str(ws)),
               false;
    if (!conv_params(op, o, &g->p)) return false;
    g->unbatched = xs.ndim == 3;
    const int lead = g->unbatched ? 0 : 1;
    g->n = g->unbatched ? 1 : xs.dims[0];
    g->c = xs.dims[lead], g->h = xs.dims[lead + 1], g->w = xs.dims[lead + 2];
    g->o = ws.dims[0], g->kh = ws.dims[2], g->kw = ws.dims[3];
    if (!tsi_conv_check_groups(op, xs, ws, g->p.groups, g->c)) return false;
    if (b && (b->shape.ndim != 1 || b->shape.dims[0] != g->o))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: given weight of size %s, expected bias to be 1-dimensional with "
                             "%lld elements, but got bias of size %s instead",
                             op, tsi_shape_str(ws), (long long)g->o, tsi_shape_str(b->shape)),
               false;
    const int64_t ph = g->h + 2 * (int64_t)g->p.padding[0],
                  pw = g->w + 2 * (int64_t)g->p.padding[1];
    const int64_t eh = (int64_t)g->p.dilation[0] * (g->kh - 1) + 1;
    const int64_t ew = (int64_t)g->p.dilation[1] * (g->kw - 1) + 1;
    if (ph < eh || pw < ew)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: calculated padded input size per channel: (%lld x %lld). Kernel "
                             "size: (%lld x %lld). Kernel size can't be greater than actual input "
                             "size",
                             op, (long long)ph, (long long)pw, (long long)eh, (long long)ew),
               false;
    g->oh = (ph - eh) / g->p.stride[0] + 1;
    g->ow = (pw - ew) / g->p.stride[1] + 1;
    return true;
}

/* node->ip: stride, padding, dilation (2 each), groups (conv_internal.h) */
void tsi_conv_params_store(ts_node *n, const ts_conv2d_params *p) {
    for (int i = 0; i < 2; i++) {
        n->ip[i] = p->stride[i];
        n->ip[2 + i] = p->padding[i];
        n->ip[4 + i] = p->dilation[i];
    }
    n->ip[6] = p->groups;
}

ts_conv2d_params tsi_conv_params_load(const ts_node *n) {
    ts_conv2d_params p = {.act = TS_CONV_ACT_NONE, .act_lo = NAN, .act_hi = NAN};
    for (int i = 0; i < 2; i++) {
        p.stride[i] = (int)n->ip[i];
        p.padding[i] = (int)n->ip[2 + i];
        p.dilation[i] = (int)n->ip[4 + i];
    }
    p.groups = (int)n->ip[6];
    return p;
}

/* The weight's gradient as a convolution (create_graph): for each group, the input with batch and
 * channels swapped, convolved with the output gradient as the kernel (batch as its channels),
 * the forward's dilation as the stride and its stride as the dilation, cut to the kernel's size:
 * gw[o, c, i, j] = sum over n, y, x of g[n, o, y, x] xpad[n, c, y s + i d, x s + j d]. */
ts_tensor *tsi_conv_weight_grad_composite(ts_tensor *x, ts_tensor *g, const ts_conv2d_params *p,
                                          ts_shape ws) {
    const int groups = p->groups > 0 ? p->groups : 1;
    const int64_t cg = ws.dims[1], og = ws.dims[0] / groups;
    ts_tensor *small[8], **parts = groups <= 8 ? small : malloc(sizeof *parts * (size_t)groups);
    if (!parts) return tsi_error_set(TS_ERR_OOM, "conv2d_backward: out of host memory"), NULL;
    const ts_conv2d_opts o = {.stride = {p->dilation[0], p->dilation[1]},
                              .padding = {p->padding[0], p->padding[1]},
                              .dilation = {p->stride[0], p->stride[1]},
                              .groups = 1};
    for (int k = 0; k < groups; k++) {
        ts_tensor *xt = ts_transpose(ts_narrow(x, 1, k * cg, cg), 0, 1);
        ts_tensor *gt = ts_transpose(ts_narrow(g, 1, k * og, og), 0, 1);
        ts_tensor *r = ts_conv2d(xt, gt, NULL, o); /* [cg, og, >= kh, >= kw] */
        r = ts_narrow(ts_narrow(r, 2, 0, ws.dims[2]), 3, 0, ws.dims[3]);
        parts[k] = ts_transpose(r, 0, 1);
    }
    ts_tensor *gw = groups == 1 ? parts[0] : ts_cat(parts, groups, 0);
    if (parts != small) free(parts);
    return gw;
}

/* conv_backward's formulas as public ops, so that under create_graph they record the gradients'
 * graph: the input's gradient is the transposed convolution of g, the weight's a convolution
 * (tsi_conv_weight_grad_composite), the bias's a sum. */
static void conv_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const ts_conv2d_params p = tsi_conv_params_load(n);
    const ts_shape xs = n->in_shape[0], ws = n->in_shape[1];
    const bool unbatched = xs.ndim == 3;
    ts_tensor *g = go[0]->dtype == n->in_dtype[0] ? go[0] : ts_to_dtype(go[0], n->in_dtype[0]);
    if (g && unbatched) g = ts_unsqueeze(g, 0);
    if (!g) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *w = tsi_node_saved(n, 1);
        if (!w) return;
        ts_convnd_opts o = {.groups = p.groups};
        for (int i = 0; i < 2; i++) {
            const int64_t in = xs.dims[xs.ndim - 2 + i], out = g->shape.dims[2 + i];
            const int64_t made = (out - 1) * p.stride[i] - 2 * p.padding[i] +
                                 p.dilation[i] * (ws.dims[2 + i] - 1) + 1;
            o.stride[i] = p.stride[i], o.padding[i] = p.padding[i], o.dilation[i] = p.dilation[i];
            o.output_padding[i] = (int)(in - made); /* the rows the forward's stride skipped */
        }
        ts_tensor *gx = ts_conv_transpose2d(g, w, NULL, o);
        gi[0] = unbatched && gx ? ts_squeeze_dim(gx, 0) : gx;
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *x = tsi_node_saved(n, 0);
        if (!x) return;
        gi[1] = tsi_conv_weight_grad_composite(unbatched ? ts_unsqueeze(x, 0) : x, g, &p, ws);
    }
    if (tsi_node_needs(n, 2)) gi[2] = ts_sum_dims(g, TS_DIMS(0, 2, 3), false);
}

static void conv_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const char *op = "conv2d_backward";
    if (!go[0]) return;
    if (tsi_create_graph_active()) {
        conv_backward_composite(n, go, gi);
        return;
    }
    const ts_conv2d_params p = tsi_conv_params_load(n);
    const ts_shape xs = n->in_shape[0], ws = n->in_shape[1];
    const bool unbatched = xs.ndim == 3;
    const int lead = unbatched ? 0 : 1;
    const int64_t N = unbatched ? 1 : xs.dims[0], C = xs.dims[lead], H = xs.dims[lead + 1],
                  W = xs.dims[lead + 2], O = ws.dims[0];
    const int64_t OH = go[0]->shape.dims[lead + 1], OW = go[0]->shape.dims[lead + 2];
    const bool cl = n->ip[7] != 0; /* the gradients in the forward's layout */
    ts_tensor *gc = tsi_cast(op, go[0], n->in_dtype[0]);
    ts_tensor *g = gc ? cl ? tsi_channels_last(op, gc) : tsi_contiguous(op, gc) : NULL;
    ts_release(gc);
    if (!g) return;
    const ts_backend *be = tsi_be(g);
    const ts_kview kg = kview4(g, N, O, OH, OW, cl);
    if (tsi_node_needs(n, 0)) {
        ts_tensor *w = tsi_node_saved(n, 1);
        ts_tensor *gx = !w   ? NULL
                        : cl ? tsi_new_channels_last(op, xs, n->in_dtype[0], tsi_device(g))
                             : tsi_new(op, xs, n->in_dtype[0], tsi_device(g));
        if (gx && tsi_numel(xs) > 0) {
            const ts_kview kx = kview4(gx, N, C, H, W, cl), kw = tsi_kview(w);
            be->conv2d_backward_data(be, tsi_dev_index(g), &kx, &kg, &kw, &p);
        }
        gi[0] = tsi_own(gx);
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *x = tsi_node_saved(n, 0);
        ts_tensor *gw = x ? tsi_new(op, ws, n->in_dtype[1], tsi_device(g)) : NULL;
        if (gw && tsi_numel(ws) > 0) {
            const ts_kview kw = tsi_kview(gw), kx = kview4(x, N, C, H, W, cl);
            be->conv2d_backward_weight(be, tsi_dev_index(g), &kw, &kg, &kx, &p);
        }
        gi[1] = tsi_own(gw);
    }
    if (tsi_node_needs(n, 2))
        gi[2] = unbatched ? ts_sum_dims(g, TS_DIMS(1, 2), false)
                          : ts_sum_dims(g, TS_DIMS(0, 2, 3), false);
    ts_release(g);
}

/* The weight's identity for the backend's caches (backend.h): only when the weight is not being
 * trained (grad mode off, or it does not require grad), the call reads its own storage (not a
 * contiguous copy made for this call, which no later call would meet again) and Tessera owns
 * that memory and has not shared it (imported or exported memory can change without a version
 * bump). */
void tsi_conv_weight_identity(const ts_tensor *w, const ts_tensor *wc, ts_conv2d_params *p) {
    ts_storage *s = wc->storage;
    if (s != w->storage || !s->alloc || s->release || atomic_load(&s->exported)) return;
    if (tsi_grad_mode() && w->requires_grad) return;
    p->weight_uid = s->uid;
    p->weight_version = (uint64_t)atomic_load(&s->version);
    p->weight_offset = wc->offset;
}

/* One forward call: the checks, contiguous inputs, the output and the backend's kernel applying
 * act. The caller releases xc, wc and bc (NULL-safe) and owns out (NULL on failure). */
typedef struct conv_call {
    conv_geom g;
    bool cl; /* x and out channels_last (keeps_channels_last) */
    ts_tensor *xc, *wc, *bc, *out;
} conv_call;

static void conv_run(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o, ts_conv_act act,
                     double lo, double hi, conv_call *c) {
    const char *op = "conv2d";
    tsi_init();
    *c = (conv_call){0};
    ts_device dev;
    conv_geom *g = &c->g;
    if (!conv_check(op, x, w, b, o, g, &dev)) return;
    tsi_log_op(op, dev);
    c->cl = keeps_channels_last(x);
    c->xc = c->cl ? ts_retain(x) : tsi_contiguous(op, x);
    c->wc = c->xc ? tsi_contiguous(op, w) : NULL;
    c->bc = c->wc && b ? tsi_contiguous(op, b) : NULL;
    const ts_shape os =
        g->unbatched ? TS_SHAPE(g->o, g->oh, g->ow) : TS_SHAPE(g->n, g->o, g->oh, g->ow);
    if (c->wc && (c->bc || !b))
        c->out =
            c->cl ? tsi_new_channels_last(op, os, x->dtype, dev) : tsi_new(op, os, x->dtype, dev);
    if (!c->out || tsi_numel(os) == 0) return;
    g->p.act = act, g->p.act_lo = lo, g->p.act_hi = hi;
    tsi_conv_weight_identity(w, c->wc, &g->p);
    const ts_kview ko = kview4(c->out, g->n, g->o, g->oh, g->ow, c->cl);
    const ts_kview kx = kview4(c->xc, g->n, g->c, g->h, g->w, c->cl);
    const ts_kview kw = tsi_kview(c->wc), kb = c->bc ? tsi_kview(c->bc) : kw;
    tsi_be(c->xc)->conv2d(tsi_be(c->xc), tsi_dev_index(c->xc), &ko, &kx, &kw, c->bc ? &kb : NULL,
                          &g->p);
}

static void conv_call_release(conv_call *c) {
    ts_release(c->xc);
    ts_release(c->wc);
    ts_release(c->bc);
}

static ts_tensor *conv2d_op(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o) {
    conv_call c;
    conv_run(x, w, b, o, TS_CONV_ACT_NONE, NAN, NAN, &c);
    if (c.out) {
        /* the input is needed only for the weight's gradient and the weight only for the input's */
        ts_tensor *ins[3] = {x, w, b};
        ts_tensor *saves[2] = {w->requires_grad ? c.xc : NULL, x->requires_grad ? c.wc : NULL};
        ts_node *n =
            tsi_record("ConvolutionBackward0", "conv2d", conv_backward, ins, 3, c.out, saves, 2);
        if (n) tsi_conv_params_store(n, &c.g.p), n->ip[7] = c.cl; /* the forward's layout */
        /* conv_backward_composite differentiates again when what it saved are the inputs
         * themselves (not layout or dtype copies, which carry no history) */
        if (n && (!saves[0] || saves[0] == x) && (!saves[1] || saves[1] == w))
            n->flags |= TSI_NODE_TWICE;
    }
    conv_call_release(&c);
    return tsi_own(c.out);
}

ts_tensor *tsi_conv2d_forward_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                                  ts_conv_act act, double lo, double hi) {
    conv_call c;
    conv_run(x, w, b, o, act, lo, hi, &c);
    conv_call_release(&c);
    return tsi_own(c.out);
}

/* One spatial dim of a valid convolution (input in > 0, kernel k, stride s, padding p, dilation
 * d, all positive but p): the kernel taps [*start, *start + *len) that meet the input for some
 * output position, and the padding *pad that gives the same outputs with only those taps; false
 * when every tap meets the input (or none does). A 3x3 kernel with padding 1 on a 1x1 input (a
 * ResNet's last stage on 28x28 images) meets it with its centre only: 1x1, padding 0. */
static bool crop_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int64_t *start,
                     int64_t *len, int *pad) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1;
    if (in <= 0 || span < 0) return false;
    const int64_t out = span / s + 1;
    int64_t lo = -1, hi = -1;
    for (int64_t t = 0; t < k; t++) {
        const int64_t first = p - t * d; /* tap t meets the input at o s in [first, first + in) */
        const int64_t o = first <= 0 ? 0 : (first + s - 1) / s;
        if (o < out && o * s < first + in) {
            if (lo < 0) lo = t;
            hi = t;
        }
    }
    const int64_t kn = hi - lo + 1, pn = p - lo * d, spn = in + 2 * pn - d * (kn - 1) - 1;
    if (lo < 0 || kn == k || pn < 0 || pn > INT32_MAX || spn < 0 || spn / s + 1 != out)
        return false;
    *start = lo, *len = kn, *pad = (int)pn;
    return true;
}

/* conv2d with the weight's taps that only ever meet the padding cut off (crop_dim), when the call
 * is otherwise valid (conv2d_op reports the rest with the caller's shapes): the zeros they would
 * multiply add nothing but time. The cut weight is a differentiable view made contiguous, so the
 * weight's gradient is zero on those taps and the node stays twice differentiable. A (cut) kernel
 * that covers the whole input runs as ts_linear over the flattened input and weight. Not while an
 * ONNX export traces (it records the call as made). */
static ts_tensor *conv2d_cropped(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o) {
    if (tsi_trace_active || !x || !w || (x->shape.ndim != 3 && x->shape.ndim != 4) ||
        w->shape.ndim != 4 || x->dtype != w->dtype || (b && b->dtype != w->dtype) ||
        tsi_device(x).type != tsi_device(w).type || tsi_device(x).index != tsi_device(w).index)
        return conv2d_op(x, w, b, o);
    const int lead = x->shape.ndim - 3, groups = o.groups ? o.groups : 1;
    if (o.groups < 0 || w->shape.dims[1] * groups != x->shape.dims[lead] ||
        w->shape.dims[0] % groups != 0)
        return conv2d_op(x, w, b, o);
    int64_t start[2] = {0, 0}, len[2] = {w->shape.dims[2], w->shape.dims[3]};
    int pad[2] = {o.padding[0], o.padding[1]};
    bool cut = false;
    for (int i = 0; i < 2; i++) {
        const int64_t s = o.stride[i] ? o.stride[i] : 1, d = o.dilation[i] ? o.dilation[i] : 1;
        if (o.stride[i] < 0 || o.dilation[i] < 0 || o.padding[i] < 0) return conv2d_op(x, w, b, o);
        if (crop_dim(x->shape.dims[lead + 1 + i], w->shape.dims[2 + i], s, o.padding[i], d,
                     &start[i], &len[i], &pad[i]))
            cut = true;
    }
    if (!cut) return conv2d_op(x, w, b, o);
    /* the cut kernel covers the whole unpadded input: one output position, a matrix product
     * (stage 4's 3x3 convolutions at 1x1, stage 3's stride-2 entry at 2x2). Only a cut one: an
     * uncut kernel that covers its input (a 1x1 convolution after a global pool) stays conv2d's,
     * whose bits the ONNX blocked-layout rewrite reproduces (test_onnx_blocked_rewrite). */
    const int64_t n = lead ? x->shape.dims[0] : 0, h = x->shape.dims[lead + 1],
                  wd = x->shape.dims[lead + 2];
    const bool whole = lead && n > 0 && groups == 1 && pad[0] == 0 && pad[1] == 0 && len[0] == h &&
                       len[1] == wd && (len[0] == 1 || o.dilation[0] <= 1) &&
                       (len[1] == 1 || o.dilation[1] <= 1);
    ts_scope_begin();
    ts_tensor *wn =
        ts_contiguous(ts_narrow(ts_narrow(w, 2, start[0], len[0]), 3, start[1], len[1]));
    ts_tensor *y = NULL;
    if (wn && whole) {
        const int64_t oc = w->shape.dims[0];
        y = ts_linear(ts_reshape(x, TS_SHAPE(n, x->shape.dims[1] * h * wd)),
                      ts_reshape(wn, TS_SHAPE(oc, w->shape.dims[1] * h * wd)), b);
        y = ts_keep(ts_reshape(y, TS_SHAPE(n, oc, 1, 1)));
    } else if (wn) {
        ts_conv2d_opts oc = o;
        oc.padding[0] = pad[0], oc.padding[1] = pad[1];
        y = ts_keep(conv2d_op(x, wn, b, oc));
    }
    ts_scope_end();
    return y;
}

ts_tensor *ts_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o) {
    ts_tensor *const ins[3] = {x, w, b};
    const int64_t ip[7] = {o.stride[0],   o.stride[1],   o.padding[0], o.padding[1],
                           o.dilation[0], o.dilation[1], o.groups};
    tsi_ac_frame ac; /* autocast: lower precision */
    TSI_AUTOCAST_ENTER(&ac, "conv2d", &x, &w, &b);
    return tsi_trace("conv2d", ins, 3, tsi_autocast_exit(&ac, conv2d_cropped(x, w, b, o)), ip, 7,
                     NULL, 0);
}
