/* export_ops_nn.c — ONNX forms of the traced neural-network ops: products (matmul, linear),
 * convolution, pools, the norms, softmax, lookups (embedding, index_select, gather), attention
 * (decomposed as torch.onnx writes it before opset 23) and dropout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/export_internal.h"

static const char *with_axis(tse *e, Onnx__NodeProto *n, int64_t axis) {
    return n && tse_attr_int(e, n, "axis", axis) ? n->output[0] : NULL;
}

/* ------------------------------------------------------------------ products */
static const char *emit_matmul(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    (void)r;
    return tse_node2(e, "MatMul", in[0], in[1], out);
}

/* The last two dims of x swapped. */
static const char *swap_last(tse *e, const char *x, int nd) {
    int64_t perm[TS_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 1] = nd - 2;
    perm[nd - 2] = nd - 1;
    Onnx__NodeProto *t = tse_node(e, "Transpose", 1, &x, NULL);
    return t && tse_attr_ints(e, t, "perm", perm, nd) ? t->output[0] : NULL;
}

/* x @ w^T + b: Gemm for a matrix x (what PyTorch writes for nn.Linear), else MatMul with the
 * transposed weight and Add. The weight stays the module's parameter either way. */
static const char *emit_linear(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    if (tse_in(e, r, 1)->shape.ndim == 1) { /* a 1-D weight: x @ w (+ a 0-d bias) */
        const char *y = tse_node2(e, "MatMul", in[0], in[1], in[2] ? NULL : out);
        return in[2] ? tse_node2(e, "Add", y, in[2], out) : y;
    }
    if (tse_in(e, r, 0)->shape.ndim == 2) {
        const char *c[3] = {in[0], in[1], in[2] ? in[2] : ""};
        Onnx__NodeProto *g = tse_node(e, "Gemm", in[2] ? 3 : 2, c, out);
        return g && tse_attr_int(e, g, "transB", 1) ? g->output[0] : NULL;
    }
    const char *y = tse_node2(e, "MatMul", in[0], swap_last(e, in[1], 2), in[2] ? NULL : out);
    return in[2] ? tse_node2(e, "Add", y, in[2], out) : y;
}

/* ------------------------------------------------------------------ convolution and pools */
static bool spatial(tse *e, Onnx__NodeProto *n, const char *name, int64_t a, int64_t b,
                    int64_t def) {
    const int64_t v[2] = {a ? a : def, b ? b : def};
    return tse_attr_ints(e, n, name, v, 2);
}

static bool pads_attr(tse *e, Onnx__NodeProto *n, int64_t ph, int64_t pw) {
    const int64_t v[4] = {ph, pw, ph, pw};
    return tse_attr_ints(e, n, "pads", v, 4);
}

/* conv2d: ip = stride[2], padding[2], dilation[2], groups (0: defaults) */
static const char *emit_conv2d(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    ts_tensor *x = tse_in(e, r, 0), *w = tse_in(e, r, 1);
    if (x->shape.ndim != 4) return tse_refuse(e, r, "an unbatched (3-D) input");
    const char *c[3] = {in[0], in[1], in[2]};
    Onnx__NodeProto *n = tse_node(e, "Conv", in[2] ? 3 : 2, c, out);
    const int64_t *ip = r->i;
    bool ok = n && spatial(e, n, "kernel_shape", w->shape.dims[2], w->shape.dims[3], 1) &&
              spatial(e, n, "strides", ip[0], ip[1], 1) && pads_attr(e, n, ip[2], ip[3]) &&
              spatial(e, n, "dilations", ip[4], ip[5], 1) &&
              tse_attr_int(e, n, "group", ip[6] ? ip[6] : 1);
    return ok ? n->output[0] : NULL;
}

/* The output size of a pooled dim (floor or ceil mode, ONNX's formula). */
static int64_t pooled(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    const int64_t span = size + 2 * p - d * (k - 1) - 1;
    return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

/* max_pool2d / avg_pool2d: ip = kernel[2], stride[2], padding[2], dilation[2], ceil_mode,
 * exclude_pad, divisor_override (AveragePool has none: refused). ceil_mode is written only where it
 * changes the size, and only where ONNX's size agrees with PyTorch's (which drops a last window
 * that starts in the padding). */
static const char *emit_pool(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    ts_tensor *x = tse_in(e, r, 0), *y = tse_out(e, r);
    if (x->shape.ndim != 4) return tse_refuse(e, r, "an unbatched (3-D) input");
    const bool max = !strcmp(e->onnx_op, "MaxPool");
    const int64_t *ip = r->i;
    int64_t k[2], s[2], d[2];
    bool ceil_needed = false;
    for (int i = 0; i < 2; i++) {
        k[i] = ip[i], s[i] = ip[2 + i] ? ip[2 + i] : ip[i], d[i] = ip[6 + i] ? ip[6 + i] : 1;
        const int64_t want = y->shape.dims[2 + i], size = x->shape.dims[2 + i];
        if (pooled(size, k[i], s[i], ip[4 + i], d[i], false) == want) continue;
        if (pooled(size, k[i], s[i], ip[4 + i], d[i], true) != want)
            return tse_refuse(e, r, "ceil_mode gives %lld outputs where ONNX's rule gives another",
                              (long long)want);
        ceil_needed = true;
    }
    if (!max && r->n_i > 10 && r->i[10] > 0)
        return tse_refuse(e, r, "divisor_override %lld (AveragePool divides by the window)",
                          (long long)r->i[10]);
    if (!max && (d[0] != 1 || d[1] != 1))
        return tse_refuse(e, r, "a dilated average pool (AveragePool has dilations from opset 19)");
    if (!max && ceil_needed)
        return tse_refuse(e, r,
                          "ceil_mode on an average pool (the windows past the edge are "
                          "divided differently)");
    Onnx__NodeProto *n = tse_node(e, e->onnx_op, 1, in, out);
    bool ok = n && spatial(e, n, "kernel_shape", k[0], k[1], 1) &&
              spatial(e, n, "strides", s[0], s[1], 1) && pads_attr(e, n, ip[4], ip[5]) &&
              (!ceil_needed || tse_attr_int(e, n, "ceil_mode", 1));
    if (ok && max) ok = spatial(e, n, "dilations", d[0], d[1], 1);
    if (ok && !max && (ip[4] || ip[5])) ok = tse_attr_int(e, n, "count_include_pad", !ip[9]);
    return ok ? n->output[0] : NULL;
}

/* adaptive_avg_pool2d(oh, ow): GlobalAveragePool for 1x1, else an AveragePool where the windows
 * are uniform (sizes divisible) */
static const char *emit_adaptive_pool(tse *e, const tsi_trace_rec *r, const char *const *in,
                                      const char *out) {
    ts_tensor *x = tse_in(e, r, 0);
    if (x->shape.ndim != 4) return tse_refuse(e, r, "an unbatched (3-D) input");
    const int64_t oh = r->i[0], ow = r->i[1], h = x->shape.dims[2], w = x->shape.dims[3];
    if (oh == 1 && ow == 1) return tse_node1(e, "GlobalAveragePool", 1, in, out);
    if (!oh || !ow || h % oh || w % ow)
        return tse_refuse(e, r, "output %lldx%lld of input %lldx%lld: windows of unequal sizes",
                          (long long)oh, (long long)ow, (long long)h, (long long)w);
    Onnx__NodeProto *n = tse_node(e, "AveragePool", 1, in, out);
    bool ok = n && spatial(e, n, "kernel_shape", h / oh, w / ow, 1) &&
              spatial(e, n, "strides", h / oh, w / ow, 1);
    return ok ? n->output[0] : NULL;
}

/* ------------------------------------------------------------------ norms */
/* A vector of `value` with n elements: the scale or shift a norm without one implies. */
static const char *filled(tse *e, ts_shape s, double value, ts_dtype dt) {
    ts_tensor *t = ts_full(s, value, (ts_opts){.dtype = dt, .device = ts_cpu()});
    return t ? tse_const_tensor(e, t, NULL) : NULL;
}

/* batch_norm: ins x, w, b, running_mean, running_var; ip training; fp eps (0: 1e-5), momentum */
static const char *emit_batch_norm(tse *e, const tsi_trace_rec *r, const char *const *in,
                                   const char *out) {
    if (r->i[0] || !in[3] || !in[4])
        return tse_refuse(e, r,
                          "batch statistics (training mode, or a BatchNorm that tracks no "
                          "running statistics)");
    ts_tensor *x = tse_in(e, r, 0);
    const ts_shape c = TS_SHAPE(x->shape.dims[1]);
    ts_tensor *stats = tse_in(e, r, 3);
    const char *n[5] = {in[0], in[1] ? in[1] : filled(e, c, 1, stats->dtype),
                        in[2] ? in[2] : filled(e, c, 0, stats->dtype), in[3], in[4]};
    if (!n[1] || !n[2]) return NULL;
    Onnx__NodeProto *b = tse_node(e, "BatchNormalization", 5, n, out);
    return b && tse_attr_float(e, b, "epsilon", (float)(r->f[0] ? r->f[0] : 1e-5)) ? b->output[0]
                                                                                   : NULL;
}

/* layer_norm: ins x, w, b; ip the normalized dims' count; fp eps (0: 1e-5) */
static const char *emit_layer_norm(tse *e, const tsi_trace_rec *r, const char *const *in,
                                   const char *out) {
    ts_tensor *x = tse_in(e, r, 0);
    const int nn = (int)r->i[0];
    ts_shape ns = {.ndim = nn};
    for (int i = 0; i < nn; i++) ns.dims[i] = x->shape.dims[x->shape.ndim - nn + i];
    const char *n[3] = {in[0], in[1] ? in[1] : filled(e, ns, 1, x->dtype), in[2]};
    if (!n[1]) return NULL;
    Onnx__NodeProto *l = tse_node(e, "LayerNormalization", in[2] ? 3 : 2, n, out);
    bool ok = l && tse_attr_int(e, l, "axis", -nn) &&
              tse_attr_float(e, l, "epsilon", (float)(r->f[0] ? r->f[0] : 1e-5));
    return ok ? l->output[0] : NULL;
}

/* ------------------------------------------------------------------ softmax, lookups */
static const char *emit_softmax(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    return with_axis(e, tse_node(e, e->onnx_op, 1, in, out), r->i[0]);
}

/* embedding(weight, indices): rows of the weight */
static const char *emit_embedding(tse *e, const tsi_trace_rec *r, const char *const *in,
                                  const char *out) {
    (void)r;
    return with_axis(e, tse_node(e, "Gather", 2, in, out), 0);
}

static const char *emit_index_select(tse *e, const tsi_trace_rec *r, const char *const *in,
                                     const char *out) {
    return with_axis(e, tse_node(e, "Gather", 2, in, out), r->i[0]);
}

static const char *emit_gather(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    return with_axis(e, tse_node(e, "GatherElements", 2, in, out), r->i[0]);
}

/* ------------------------------------------------------------------ attention */
/* The causal mask as an additive constant [L, S]: 0 where key j <= query i, else -inf. */
static const char *causal_mask(tse *e, int64_t L, int64_t S, ts_dtype dt) {
    float *m = malloc((size_t)(L * S > 0 ? L * S : 1) * sizeof *m);
    if (!m) return tsi_error_set(TS_ERR_OOM, "onnx_export: out of host memory"), NULL;
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < S; j++) m[i * S + j] = j <= i ? 0.0f : -INFINITY;
    ts_tensor *f = tsi_from_host("onnx_export", TS_SHAPE(L, S), TS_F32, m, ts_cpu());
    free(m);
    ts_tensor *t = f ? ts_to_dtype(f, dt) : NULL; /* owned by the export's scope */
    const char *name = t ? tse_const_tensor(e, t, NULL) : NULL;
    ts_release(f);
    return name;
}

/* scaled_dot_product_attention(q, k, v, mask): ip is_causal; fp scale (0: 1/sqrt(E)), dropout_p.
 * softmax(q k^T * scale + mask) v, as torch.onnx decomposes it: MatMul, Mul, Add (or Where for a
 * bool mask), Softmax, MatMul. A row whose every key is masked gives NaN here where Tessera gives
 * 0 (PyTorch's _safe_softmax); a causal mask never masks a whole row. */
static const char *emit_sdpa(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    if (r->f[1] > 0) return tse_refuse(e, r, "dropout_p > 0 (random: no inference form)");
    ts_tensor *q = tse_in(e, r, 0), *k = tse_in(e, r, 1), *mask = tse_in(e, r, 3);
    const int nq = q->shape.ndim, nk = k->shape.ndim;
    const int64_t L = q->shape.dims[nq - 2], E = q->shape.dims[nq - 1], S = k->shape.dims[nk - 2];
    const double scale = r->f[0] > 0 ? r->f[0] : 1.0 / sqrt((double)E);
    const char *s = tse_node2(e, "MatMul", in[0], swap_last(e, in[1], nk), NULL);
    s = tse_node2(e, "Mul", s, tse_const_scalar(e, scale, q->dtype), NULL);
    if (r->i[0]) {
        s = tse_node2(e, "Add", s, causal_mask(e, L, S, q->dtype), NULL);
    } else if (mask && mask->dtype == TS_BOOL) {
        const char *c[3] = {in[3], s, tse_const_scalar(e, -INFINITY, q->dtype)};
        s = s && c[2] ? tse_node1(e, "Where", 3, c, NULL) : NULL;
    } else if (mask) {
        s = tse_node2(e, "Add", s, in[3], NULL);
    }
    const char *p = s ? with_axis(e, tse_node(e, "Softmax", 1, &s, NULL), -1) : NULL;
    return tse_node2(e, "MatMul", p, in[2], out);
}

/* The trace records only a dropout that runs: in training mode it is random */
static const char *emit_dropout(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    (void)in, (void)out;
    return tse_refuse(e, r, "a dropout that drops (p = %g, training): random, no inference form",
                      r->f[0]);
}

const tse_op tse_ops_nn[] = {
    {"matmul", emit_matmul, NULL},
    {"mm", emit_matmul, NULL},
    {"bmm", emit_matmul, NULL},
    {"linear", emit_linear, NULL},
    {"conv2d", emit_conv2d, NULL},
    {"max_pool2d", emit_pool, "MaxPool"},
    {"avg_pool2d", emit_pool, "AveragePool"},
    {"adaptive_avg_pool2d", emit_adaptive_pool, NULL},
    {"batch_norm", emit_batch_norm, NULL},
    {"layer_norm", emit_layer_norm, NULL},
    {"softmax", emit_softmax, "Softmax"},
    {"log_softmax", emit_softmax, "LogSoftmax"},
    {"embedding", emit_embedding, NULL},
    {"index_select", emit_index_select, NULL},
    {"gather", emit_gather, NULL},
    {"scaled_dot_product_attention", emit_sdpa, NULL},
    {"dropout", emit_dropout, NULL},
    {NULL, NULL, NULL},
};
