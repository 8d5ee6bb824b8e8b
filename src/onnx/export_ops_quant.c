/* export_ops_quant.c — the traced quantized ops (include/tessera/quant.h) written as QDQ: a
 * quantized value is its integers (uint8 / int8 / int32) in the graph, and each op reads its
 * operands through DequantizeLinear and writes its result through QuantizeLinear with the scales
 * and zero points the tensors carried when the forward ran. The patterns are the ones the
 * importer's rewrite_qdq.c (and ONNX Runtime's QDQ transformer) fuse into integer kernels: DQ(x),
 * DQ(w, per channel axis 0), DQ(int32 bias, scale x_scale * w_scale in float32, zero point 0) ->
 * Conv / Gemm -> Q, and DQ, DQ -> Add -> Q. What that gives against the eager ops: docs/ONNX.md,
 * "Quantized models". */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant_desc.h"
#include "onnx/export_internal.h"

/* ------------------------------------------------------------------ parameters */
/* The scale (float32) and zero point (the integers' type) of quantized tensor t as initializers:
 * scalars per tensor, 1-D per channel (*axis its dim, else -1). */
static bool qparams(tse *e, const tsi_trace_rec *r, ts_tensor *t, const char *what,
                    const char **scale, const char **zp, int *axis) {
    const tsi_quant *d = t->quant;
    if (!tsi_is_quantized(t->dtype) || !d)
        return tse_refuse(e, r, "%s is not quantized (%s)", what, tsi_desc(t)), false;
    if (t->dtype == TS_QUINT4X2 || d->scheme == TS_PER_GROUP_AFFINE)
        return tse_refuse(e, r,
                          "%s is quantized per group or as quint4x2 (blocked DequantizeLinear is "
                          "opset 21; the exporter writes opset %d)",
                          what, TSE_OPSET),
               false;
    const bool per_channel = d->scheme == TS_PER_CHANNEL_AFFINE;
    const int64_t n = d->count;
    const ts_dtype zdt = tse_storage_dtype(t->dtype);
    float *s = malloc((size_t)n * sizeof *s);
    void *z = malloc((size_t)n * tsi_dtype_size(zdt));
    bool ok = s && z;
    if (!ok) tsi_error_set(TS_ERR_OOM, "onnx_export: out of host memory");
    for (int64_t i = 0; ok && i < n; i++) {
        s[i] = (float)d->scales[i];
        if (zdt == TS_I8) ((int8_t *)z)[i] = (int8_t)d->zero_points[i];
        if (zdt == TS_U8) ((uint8_t *)z)[i] = (uint8_t)d->zero_points[i];
        if (zdt == TS_I32) ((int32_t *)z)[i] = (int32_t)d->zero_points[i];
    }
    const ts_shape sh = per_channel ? TS_SHAPE(n) : (ts_shape){0};
    ts_tensor *st = ok ? tsi_from_host("onnx_export", sh, TS_F32, s, ts_cpu()) : NULL;
    ts_tensor *zt = st ? tsi_from_host("onnx_export", sh, zdt, z, ts_cpu()) : NULL;
    free(s);
    free(z);
    *scale = zt ? tse_const_tensor(e, st, NULL) : NULL;
    *zp = *scale ? tse_const_tensor(e, zt, NULL) : NULL;
    ts_release(st);
    ts_release(zt);
    *axis = per_channel ? d->axis : -1;
    return *zp != NULL;
}

/* DequantizeLinear of the integers x (quantized tensor t's) */
static const char *dq(tse *e, const tsi_trace_rec *r, const char *x, ts_tensor *t,
                      const char *what) {
    const char *c[3] = {x, NULL, NULL};
    int axis;
    if (!x || !qparams(e, r, t, what, &c[1], &c[2], &axis)) return NULL;
    Onnx__NodeProto *n = tse_node(e, "DequantizeLinear", 3, c, NULL);
    return n && (axis < 0 || tse_attr_int(e, n, "axis", axis)) ? n->output[0] : NULL;
}

/* QuantizeLinear of the float f to quantized tensor y's parameters, named out (NULL: fresh) */
static const char *q(tse *e, const tsi_trace_rec *r, const char *f, ts_tensor *y, const char *out) {
    if (y->dtype == TS_QINT32)
        return tse_refuse(e, r,
                          "an output of dtype qint32 (QuantizeLinear writes 8-bit integers at "
                          "opset %d)",
                          TSE_OPSET);
    const char *c[3] = {f, NULL, NULL};
    int axis;
    if (!f || !qparams(e, r, y, "the output", &c[1], &c[2], &axis)) return NULL;
    Onnx__NodeProto *n = tse_node(e, "QuantizeLinear", 3, c, out);
    return n && (axis < 0 || tse_attr_int(e, n, "axis", axis)) ? n->output[0] : NULL;
}

/* The output of an op whose eager form may apply ReLU while it requantizes (its lower bound raised
 * to the output zero point): Q alone when the zero point is the dtype's lowest value (Q's
 * saturation is that ReLU exactly: what observers give after a ReLU), else Q, then DQ -> Relu -> Q
 * on the integers, which is max(q, zp) exactly; either way the op before Q stays fusable. */
static const char *requant(tse *e, const tsi_trace_rec *r, const char *f, ts_tensor *y, bool relu,
                           const char *out) {
    int64_t lo, hi;
    tsi_quant_range(y->dtype, &lo, &hi);
    if (!relu || y->quant->zero_points[0] <= lo) return q(e, r, f, y, out);
    const char *i = q(e, r, f, y, NULL);
    const char *d = dq(e, r, i, y, "the output");
    const char *u = d ? tse_node1(e, "Relu", 1, &d, NULL) : NULL;
    return q(e, r, u, y, out);
}

/* x per tensor, 8-bit: the activations the integer patterns take */
static bool act_8bit(tse *e, const tsi_trace_rec *r, ts_tensor *x, const char *what) {
    if ((x->dtype == TS_QUINT8 || x->dtype == TS_QINT8) && x->quant &&
        x->quant->scheme == TS_PER_TENSOR_AFFINE)
        return true;
    return tse_refuse(e, r, "%s %s: QDQ activations are quint8 / qint8 per tensor", what,
                      tsi_desc(x)),
           false;
}

/* A float32 bias (PyTorch's x86 arithmetic in eager) as the int32 bias QDQ carries:
 * round_half_even(bias / (x_scale * w_scale[c])) in float64, clamped to int32 (PyTorch's qnnpack /
 * oneDNN rule; ONNX Runtime then computes as with an int32 bias: within one quantum of eager, at
 * rounding ties) */
static const char *bias_int32(tse *e, ts_tensor *bt, ts_tensor *x, const tsi_quant *wd) {
    const int64_t n = bt->shape.dims[0];
    float *b = malloc((size_t)n * sizeof *b);
    int32_t *q = malloc((size_t)n * sizeof *q);
    ts_scope_begin(); /* the host copy is the scope's */
    ts_tensor *h = b && q ? ts_contiguous(ts_to(bt, ts_cpu())) : NULL;
    const bool read = h && ts_copy_to_host(h, b, (size_t)n * sizeof *b) == TS_OK;
    ts_scope_end();
    const char *name = NULL;
    if (read) {
        for (int64_t c = 0; c < n; c++) {
            const double s = x->quant->scales[0] *
                             wd->scales[wd->scheme == TS_PER_CHANNEL_AFFINE ? c : 0],
                         v = nearbyint((double)b[c] / s);
            q[c] = v < -2147483648.0 ? INT32_MIN : v > 2147483647.0 ? INT32_MAX : (int32_t)v;
        }
        ts_tensor *qt = tsi_from_host("onnx_export", TS_SHAPE(n), TS_I32, q, ts_cpu());
        name = qt ? tse_const_tensor(e, qt, NULL) : NULL;
        ts_release(qt);
    } else if (!b || !q) {
        tsi_error_set(TS_ERR_OOM, "onnx_export: out of host memory");
    }
    free(b), free(q);
    return name;
}

/* DequantizeLinear of the bias (int32, or float32 made int32 above): scale x_scale * w_scale[c]
 * (float32 product, what ORT's quantizer writes and rewrite_qdq.c's fusion checks), zero point 0,
 * per channel when w is */
static const char *bias_dq(tse *e, const tsi_trace_rec *r, ts_tensor *x, ts_tensor *w) {
    ts_tensor *bt = tse_in(e, r, 2);
    const tsi_quant *wd = w->quant;
    if (bt->dtype != TS_I32 && bt->dtype != TS_F32)
        return tse_refuse(e, r, "bias %s: the QDQ bias is int32 (or float32, made int32)",
                          tsi_desc(bt));
    const char *b = bt->dtype == TS_I32 ? tse_const_in(e, r, 2) : bias_int32(e, bt, x, wd);
    if (!b) return NULL;
    const int64_t n = wd->scheme == TS_PER_CHANNEL_AFFINE ? wd->count : 1;
    float *s = malloc((size_t)n * sizeof *s);
    int32_t *z = calloc((size_t)n, sizeof *z);
    if (!s || !z) {
        free(s), free(z);
        return tsi_error_set(TS_ERR_OOM, "onnx_export: out of host memory"), NULL;
    }
    const float xs = (float)x->quant->scales[0];
    for (int64_t i = 0; i < n; i++) s[i] = xs * (float)wd->scales[i];
    const ts_shape sh = n > 1 || wd->scheme == TS_PER_CHANNEL_AFFINE ? TS_SHAPE(n) : (ts_shape){0};
    ts_tensor *st = tsi_from_host("onnx_export", sh, TS_F32, s, ts_cpu());
    ts_tensor *zt = st ? tsi_from_host("onnx_export", sh, TS_I32, z, ts_cpu()) : NULL;
    free(s), free(z);
    const char *c[3] = {b, zt ? tse_const_tensor(e, st, NULL) : NULL, NULL};
    c[2] = c[1] ? tse_const_tensor(e, zt, NULL) : NULL;
    ts_release(st), ts_release(zt);
    Onnx__NodeProto *d = b && c[2] ? tse_node(e, "DequantizeLinear", 3, c, NULL) : NULL;
    return d && (sh.ndim == 0 || tse_attr_int(e, d, "axis", 0)) ? d->output[0] : NULL;
}

/* the weight (per tensor or per channel along dim 0: what the eager ops take) */
static const char *weight_dq(tse *e, const tsi_trace_rec *r, ts_tensor **w) {
    *w = tse_in(e, r, 1);
    const tsi_quant *d = (*w)->quant;
    if ((*w)->dtype != TS_QINT8 || !d ||
        (d->scheme == TS_PER_CHANNEL_AFFINE ? d->axis != 0 : d->scheme != TS_PER_TENSOR_AFFINE))
        return tse_refuse(e, r,
                          "weight %s: QDQ weights are qint8, per tensor or per channel "
                          "along dim 0",
                          tsi_desc(*w));
    return dq(e, r, tse_const_in(e, r, 1), *w, "weight");
}

/* ------------------------------------------------------------------ emitters */
static const char *emit_quantize(tse *e, const tsi_trace_rec *r, const char *const *in,
                                 const char *out) {
    return q(e, r, in[0], tse_out(e, r), out);
}

static const char *emit_dequantize(tse *e, const tsi_trace_rec *r, const char *const *in,
                                   const char *out) {
    ts_tensor *x = tse_in(e, r, 0);
    const char *c[3] = {in[0], NULL, NULL};
    int axis;
    if (!qparams(e, r, x, "the input", &c[1], &c[2], &axis)) return NULL;
    Onnx__NodeProto *n = tse_node(e, "DequantizeLinear", 3, c, out);
    return n && (axis < 0 || tse_attr_int(e, n, "axis", axis)) ? n->output[0] : NULL;
}

/* int_repr and make_*_quantized_tensor change the type, not the integers: the value passes */
static const char *emit_same_ints(tse *e, const tsi_trace_rec *r, const char *const *in,
                                  const char *out) {
    (void)out;
    ts_tensor *t = tsi_is_quantized(tse_in(e, r, 0)->dtype) ? tse_in(e, r, 0) : tse_out(e, r);
    if (t->dtype == TS_QUINT4X2)
        return tse_refuse(e, r, "quint4x2 (two integers a byte) has no ONNX type at opset %d",
                          TSE_OPSET);
    return in[0];
}

static const char *emit_reshape(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    const ts_shape a = tse_in(e, r, 0)->shape, b = tse_out(e, r)->shape;
    if (a.ndim == b.ndim && !memcmp(a.dims, b.dims, (size_t)a.ndim * sizeof *a.dims))
        return in[0]; /* the same shape: the value itself */
    return tse_emit_as(e, "reshape", r, in, out);
}

/* quantized_conv2d(x, w, bias): ip = stride[2], padding[2], dilation[2], groups, relu */
static const char *emit_conv(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    ts_tensor *x = tse_in(e, r, 0), *w = NULL;
    if (!act_8bit(e, r, x, "input")) return NULL;
    const char *c[3] = {dq(e, r, in[0], x, "input"), weight_dq(e, r, &w), NULL};
    if (!c[0] || !c[1]) return NULL;
    if (tse_in(e, r, 2) && !(c[2] = bias_dq(e, r, x, w))) return NULL;
    const char *f = tse_emit_as(e, "conv2d", r, c, NULL);
    return f ? requant(e, r, f, tse_out(e, r), r->i[7], out) : NULL;
}

/* The shape x.shape[:-1] + [n] of the integers x (rank nd) at run time: Shape, Slice, Concat */
static const char *lead_shape(tse *e, const char *x, int64_t n) {
    const char *sh = tse_node1(e, "Shape", 1, &x, NULL);
    const int64_t zero = 0, minus1 = -1;
    const char *c[4] = {sh, tse_const_ints(e, &zero, 1, false),
                        tse_const_ints(e, &minus1, 1, false), tse_const_ints(e, &zero, 1, false)};
    const char *lead = c[0] && c[1] && c[2] && c[3] ? tse_node1(e, "Slice", 4, c, NULL) : NULL;
    const char *cc[2] = {lead, tse_const_ints(e, &n, 1, false)};
    Onnx__NodeProto *cat = lead && cc[1] ? tse_node(e, "Concat", 2, cc, NULL) : NULL;
    return cat && tse_attr_int(e, cat, "axis", 0) ? cat->output[0] : NULL;
}

/* quantized_linear(x, w, bias): ip = relu. A Gemm (transB) on rows: another rank is reshaped to
 * [-1, K] and back as integers (exact), so the pattern stays fusable with its bias. */
static const char *emit_linear(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    ts_tensor *x = tse_in(e, r, 0), *y = tse_out(e, r), *w = NULL;
    if (!act_8bit(e, r, x, "input")) return NULL;
    const int nd = x->shape.ndim;
    const int64_t K = x->shape.dims[nd - 1], N = y->shape.dims[nd - 1];
    const char *xi = in[0];
    if (nd != 2) {
        const int64_t rows[2] = {-1, K};
        xi = tse_node2(e, "Reshape", in[0], tse_const_ints(e, rows, 2, false), NULL);
    }
    const char *c[3] = {dq(e, r, xi, x, "input"), weight_dq(e, r, &w), NULL};
    if (!c[0] || !c[1]) return NULL;
    if (tse_in(e, r, 2) && !(c[2] = bias_dq(e, r, x, w))) return NULL;
    Onnx__NodeProto *g = tse_node(e, "Gemm", c[2] ? 3 : 2, c, NULL);
    if (!g || !tse_attr_int(e, g, "transB", 1)) return NULL;
    const char *yq = requant(e, r, g->output[0], y, r->i[0], nd == 2 ? out : NULL);
    if (nd == 2 || !yq) return yq;
    const char *shape = e->o.dynamic_batch && nd > 2
                            ? lead_shape(e, in[0], N)
                            : tse_const_ints(e, y->shape.dims, y->shape.ndim, false);
    return tse_node2(e, "Reshape", yq, shape, out);
}

/* quantized_add / _mul (+ _relu: the table's "Relu") (a, b): DQ, DQ -> Add / Mul -> Q */
static const char *emit_binary(tse *e, const tsi_trace_rec *r, const char *const *in,
                               const char *out) {
    ts_tensor *a = tse_in(e, r, 0), *b = tse_in(e, r, 1);
    if (!act_8bit(e, r, a, "input") || !act_8bit(e, r, b, "other")) return NULL;
    const char *kind = strncmp(r->op, "quantized_mul", 13) ? "Add" : "Mul";
    const char *s =
        tse_node2(e, kind, dq(e, r, in[0], a, "input"), dq(e, r, in[1], b, "other"), NULL);
    return s ? requant(e, r, s, tse_out(e, r), e->onnx_op != NULL, out) : NULL;
}

static bool same_params(const ts_tensor *a, const ts_tensor *b) {
    return a->dtype == b->dtype && a->quant->scales[0] == b->quant->scales[0] &&
           a->quant->zero_points[0] == b->quant->zero_points[0];
}

/* quantized_cat(tensors...): ip = dim. Concat of the integers when every input has the output's
 * parameters (the eager dequantize-quantize gives the same integers back), else DQ... -> Concat
 * -> Q. */
static const char *emit_cat(tse *e, const tsi_trace_rec *r, const char *const *in,
                            const char *out) {
    ts_tensor *y = tse_out(e, r);
    bool same = true;
    for (int k = 0; k < r->n_in; k++) same = same && same_params(tse_in(e, r, k), y);
    const char **c = tse_alloc(e, (size_t)r->n_in * sizeof *c);
    if (!c) return NULL;
    for (int k = 0; k < r->n_in; k++)
        if (!(c[k] = same ? in[k] : dq(e, r, in[k], tse_in(e, r, k), "tensors"))) return NULL;
    Onnx__NodeProto *n = tse_node(e, "Concat", r->n_in, c, same ? out : NULL);
    if (!n || !tse_attr_int(e, n, "axis", r->i[0])) return NULL;
    return same ? n->output[0] : q(e, r, n->output[0], y, out);
}

/* quantized_max_pool2d / avg_pool2d / adaptive_avg_pool2d / mean: DQ -> the float op's form -> Q
 * (the input's parameters) */
static const char *emit_pool(tse *e, const tsi_trace_rec *r, const char *const *in,
                             const char *out) {
    ts_tensor *x = tse_in(e, r, 0);
    const char *d = dq(e, r, in[0], x, "input");
    const char *p = d ? tse_emit_as(e, e->onnx_op, r, &d, NULL) : NULL;
    return p ? q(e, r, p, tse_out(e, r), out) : NULL;
}

/* ops with a trace record but no QDQ form: refused naming the reason (tse.onnx_op) */
static const char *emit_refused(tse *e, const tsi_trace_rec *r, const char *const *in,
                                const char *out) {
    (void)in, (void)out;
    return tse_refuse(e, r, "%s", e->onnx_op);
}

unsigned tse_const_inputs(const char *op) {
    /* the weight (1) and bias (2) of the quantized layers */
    return !strcmp(op, "quantized_conv2d") || !strcmp(op, "quantized_linear") ? 6u : 0u;
}

const tse_op tse_ops_quant[] = {
    {"quantize_per_tensor", emit_quantize, NULL},
    {"quantize_per_channel", emit_quantize, NULL},
    {"dequantize", emit_dequantize, NULL},
    {"int_repr", emit_same_ints, NULL},
    {"make_per_tensor_quantized_tensor", emit_same_ints, NULL},
    {"make_per_channel_quantized_tensor", emit_same_ints, NULL},
    {"quantized_reshape", emit_reshape, NULL},
    {"quantized_conv2d", emit_conv, NULL},
    {"quantized_linear", emit_linear, NULL},
    {"quantized_add", emit_binary, NULL},
    {"quantized_add_relu", emit_binary, "Relu"},
    {"quantized_mul", emit_binary, NULL},
    {"quantized_mul_relu", emit_binary, "Relu"},
    {"quantized_cat", emit_cat, NULL},
    {"quantized_max_pool2d", emit_pool, "max_pool2d"},
    {"quantized_adaptive_avg_pool2d", emit_pool, "adaptive_avg_pool2d"},
    {"quantized_avg_pool2d", emit_pool, "avg_pool2d"},
    {"quantized_mean", emit_pool, "mean"},
    {"quantized_hardswish", emit_refused,
     "quantized hardswish: HardSwish is not written by the exporter (nor is the float op)"},
    {"quantized_hardsigmoid", emit_refused,
     "quantized hardsigmoid: HardSigmoid is not written by the exporter (nor is the float op)"},
    {"quantize_per_group", emit_refused,
     "per-group (int4) quantization: blocked QuantizeLinear is opset 21, the exporter writes 17"},
    {"quantized_linear_acc", emit_refused,
     "int32 accumulators (MatMulInteger) are not written; export ts_quantized_linear"},
    {"dynamic_quantized_linear", emit_refused,
     "dynamic quantization (DynamicQuantizeLinear + MatMulInteger) is not written"},
    {"qlinear_conv2d", emit_refused, "ONNX's own QLinearConv arithmetic is not written back"},
    {NULL, NULL, NULL},
};
