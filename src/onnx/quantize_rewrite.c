/* quantize_rewrite.c — ts_onnx_quantize's rewrites (quantize_graph.c runs them): static, the QDQ
 * pairs after each calibrated activation and the DequantizeLinear weights and int32 biases of ORT's
 * QDQ format; dynamic, ORT's quantize_dynamic pattern for MatMul / Gemm with a weight
 * initializer. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/quantize_graph.h"

#define OP "onnx_quantize"

/* ------------------------------------------------------------------ the static (QDQ) rewrite */
/* the name consumers read for activation `name` */
static const char *read_name(qz *q, const char *name) {
    qz_range *r = qz_range_of(q, name);
    if (!r || r->graph_out) return name;
    return qz_str(q, "%s_DequantizeLinear_Output", name);
}

/* Q -> DQ after the activation */
static bool emit_qdq(qz *q, qz_range *r) {
    bool i8 = q->o.int8_activations;
    int32_t zt = i8 ? ONNX__TENSOR_PROTO__DATA_TYPE__INT8 : ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    int8_t z8 = (int8_t)r->zp;
    uint8_t zu = (uint8_t)r->zp;
    const char *s = qz_add_scalar(q, qz_str(q, "%s_scale", r->name),
                                  ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &r->scale, 4);
    const char *z = qz_add_scalar(q, qz_str(q, "%s_zero_point", r->name), zt,
                                  i8 ? (const void *)&z8 : (const void *)&zu, 1);
    const char *x = r->graph_out ? qz_str(q, "%s_QuantizeLinear_Input", r->name) : r->name;
    const char *qo = qz_str(q, "%s_QuantizeLinear_Output", r->name);
    const char *dqo = r->graph_out ? r->name : qz_str(q, "%s_DequantizeLinear_Output", r->name);
    if (!s || !z || !x || !qo || !dqo) return false;
    const char *qin[] = {x, s, z}, *dqin[] = {qo, s, z};
    return qz_add_node(q, "QuantizeLinear", 3, qin, 1, &qo) &&
           qz_add_node(q, "DequantizeLinear", 3, dqin, 1, &dqo);
}

/* The weight as int8 (per output channel along `axis`, or per tensor), symmetric [-127, 127],
 * with its DequantizeLinear; the DQ output's name, NULL on failure. wscale gets the scales. */
static const char *emit_weight(qz *q, const Onnx__TensorProto *w, const char *base, int axis,
                               bool per_channel, float **wscale, int64_t *nch) {
    int64_t n;
    float *v = qz_init_floats(q, w, &n);
    if (!v) return NULL;
    int64_t c = per_channel ? w->dims[axis] : 1, inner = 1;
    for (int d = axis + 1; d < (int)w->n_dims; d++) inner *= w->dims[d];
    if (!per_channel) inner = n;
    float *sc = qz_alloc(q, sizeof *sc * (size_t)c);
    int8_t *qv = qz_alloc(q, (size_t)n), *zv = qz_alloc(q, (size_t)c);
    const char *out = NULL;
    if (sc && qv && zv) {
        float *lo = malloc(sizeof *lo * (size_t)c), *hi = malloc(sizeof *hi * (size_t)c);
        if (!lo || !hi) {
            free(lo), free(hi), free(v);
            return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), NULL;
        }
        for (int64_t ch = 0; ch < c; ch++) lo[ch] = INFINITY, hi[ch] = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            int64_t ch = per_channel ? (i / inner) % c : 0;
            lo[ch] = fminf(lo[ch], v[i]), hi[ch] = fmaxf(hi[ch], v[i]);
        }
        for (int64_t ch = 0; ch < c; ch++) {
            int zp;
            qz_quant_params(lo[ch], hi[ch], -127, 127, true, &sc[ch], &zp);
            zv[ch] = (int8_t)zp;
        }
        free(lo), free(hi);
        for (int64_t i = 0; i < n; i++) {
            int64_t ch = per_channel ? (i / inner) % c : 0;
            qv[i] = (int8_t)qz_quantize_value(v[i], sc[ch], zv[ch], -128, 127);
        }
        int64_t cd[1] = {c};
        const char *qn =
            qz_add_init(q, qz_str(q, "%s_quantized", base), ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
                        (int)w->n_dims, w->dims, qv, (size_t)n);
        const char *sn =
            qz_add_init(q, qz_str(q, "%s_scale", base), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                        per_channel, cd, sc, sizeof *sc * (size_t)c);
        const char *zn =
            qz_add_init(q, qz_str(q, "%s_zero_point", base), ONNX__TENSOR_PROTO__DATA_TYPE__INT8,
                        per_channel, cd, zv, (size_t)c);
        const char *o = qz_str(q, "%s_DequantizeLinear_Output", base);
        const char *in[] = {qn, sn, zn};
        Onnx__NodeProto *dq =
            qn && sn && zn && o ? qz_add_node(q, "DequantizeLinear", 3, in, 1, &o) : NULL;
        if (dq && (!per_channel || qz_node_attr_int(q, dq, "axis", axis))) out = o;
    }
    free(v);
    *wscale = sc, *nch = c;
    return out;
}

/* the int32 bias: round_half_even(float64(b) / float64(x_scale * w_scale[c])), clipped */
static const char *emit_bias(qz *q, const Onnx__TensorProto *b, const char *base, float x_scale,
                             const float *ws, int64_t nws) {
    int64_t n;
    float *v = qz_init_floats(q, b, &n);
    if (!v) return NULL;
    float *sc = qz_alloc(q, sizeof *sc * (size_t)n);
    int32_t *qv = qz_alloc(q, sizeof *qv * (size_t)n), *zv = qz_alloc(q, sizeof *zv * (size_t)n);
    const char *out = NULL;
    if (sc && qv && zv) {
        for (int64_t i = 0; i < n; i++) {
            sc[i] = x_scale * ws[nws == 1 ? 0 : i]; /* float32, as numpy multiplies float32 */
            double r = nearbyint((double)v[i] / (double)sc[i]);
            qv[i] = r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : (int32_t)r;
        }
        int64_t d[1] = {n};
        const char *qn = qz_add_init(q, qz_str(q, "%s_quantized", base),
                                     ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 1, d, qv, 4 * (size_t)n);
        const char *sn = qz_add_init(q, qz_str(q, "%s_quantized_scale", base),
                                     ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, d, sc, 4 * (size_t)n);
        const char *zn = qz_add_init(q, qz_str(q, "%s_quantized_zero_point", base),
                                     ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 1, d, zv, 4 * (size_t)n);
        const char *o = qz_str(q, "%s_DequantizeLinear_Output", base);
        const char *in[] = {qn, sn, zn};
        Onnx__NodeProto *dq =
            qn && sn && zn && o ? qz_add_node(q, "DequantizeLinear", 3, in, 1, &o) : NULL;
        if (dq && qz_node_attr_int(q, dq, "axis", 0)) out = o;
    }
    free(v);
    return out;
}

/* a copy of node n with inputs renamed (the original node is left as it was) */
static Onnx__NodeProto *copy_node(qz *q, const Onnx__NodeProto *n) {
    Onnx__NodeProto *c = qz_alloc(q, sizeof *c);
    char **iv = qz_alloc(q, sizeof *iv * (n->n_input + 1)),
         **ov = qz_alloc(q, sizeof *ov * (n->n_output + 1));
    if (!c || !iv || !ov) return NULL;
    *c = *n;
    if (n->n_input) memcpy(iv, n->input, sizeof *iv * n->n_input); /* NULL when empty */
    if (n->n_output) memcpy(ov, n->output, sizeof *ov * n->n_output);
    c->input = iv, c->output = ov;
    for (size_t i = 0; i < n->n_input; i++)
        if (*iv[i] && !(iv[i] = (char *)read_name(q, iv[i]))) return NULL;
    for (size_t i = 0; i < n->n_output; i++) {
        qz_range *r = qz_range_of(q, ov[i]);
        if (r && r->graph_out && !(ov[i] = qz_str(q, "%s_QuantizeLinear_Input", ov[i])))
            return NULL;
    }
    return qz_push(q, (void ***)&q->nodes, &q->n_nodes, &q->cap_nodes, c) ? c : NULL;
}

bool qz_build_static(qz *q) {
    Onnx__GraphProto *g = q->g;
    const bool per_channel = !q->o.per_tensor_weights;
    /* ORT writes the weights' and biases' DequantizeLinear nodes first */
    const char **win = qz_alloc(q, sizeof *win * g->n_node),
               **bin = qz_alloc(q, sizeof *bin * g->n_node);
    float **wsc = qz_alloc(q, sizeof *wsc * g->n_node);
    int64_t *nwsc = qz_alloc(q, sizeof *nwsc * g->n_node);
    int *axes = qz_alloc(q, sizeof *axes * g->n_node);
    if (!win || !bin || !wsc || !nwsc || !axes) return false;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        if (q->kind[k] == K_NONE || q->kind[k] == K_ADD) continue;
        const Onnx__TensorProto *w = qz_find_init(q, n->input[1]);
        int axis = q->kind[k] == K_MATMUL ? 1
                   : q->kind[k] == K_GEMM ? (qz_attr_i(n, "transB", 0) ? 0 : 1)
                                          : 0;
        /* a weight (bias) shared by several nodes is quantized once when they agree (same axis;
         * for a bias also the same input and weight), else once per node under its own names */
        const char *wbase = w->name, *bbase = NULL;
        bool has_b = n->n_input > 2 && *n->input[2];
        if (has_b) bbase = n->input[2];
        for (size_t j = 0; j < k && (wbase || bbase); j++) {
            const Onnx__NodeProto *p = g->node[j];
            if (!win[j]) continue;
            if (wbase && !strcmp(p->input[1], n->input[1])) {
                if (axes[j] == axis) {
                    win[k] = win[j], wsc[k] = wsc[j], nwsc[k] = nwsc[j];
                } else if (!(wbase = qz_str(q, "%s_%zu", w->name, k))) {
                    return false;
                }
            }
            if (bbase && bin[j] && !strcmp(p->input[2], n->input[2])) {
                if (win[k] == win[j] && !strcmp(p->input[0], n->input[0]))
                    bin[k] = bin[j], bbase = NULL;
                else if (!(bbase = qz_str(q, "%s_%zu", n->input[2], k)))
                    return false;
            }
        }
        axes[k] = axis;
        if (!win[k] && !(win[k] = emit_weight(q, w, wbase, axis, per_channel, &wsc[k], &nwsc[k])))
            return false;
        if (has_b && !bin[k]) {
            qz_range *x = qz_range_of(q, n->input[0]);
            if (!(bin[k] =
                      emit_bias(q, qz_find_init(q, n->input[2]), bbase, x->scale, wsc[k], nwsc[k])))
                return false;
        }
    }
    for (size_t i = 0; i < g->n_input; i++) {
        qz_range *r = qz_range_of(q, qz_nm(g->input[i]->name));
        if (r && !qz_find_init(q, r->name) && !emit_qdq(q, r)) return false;
    }
    for (size_t k = 0; k < g->n_node; k++) {
        Onnx__NodeProto *c = copy_node(q, g->node[k]);
        if (!c) return false;
        if (win[k]) c->input[1] = (char *)win[k];
        if (bin[k]) c->input[2] = (char *)bin[k];
        for (size_t i = 0; i < g->node[k]->n_output; i++) {
            qz_range *r = qz_range_of(q, g->node[k]->output[i]);
            if (r && !emit_qdq(q, r)) return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ the dynamic rewrite */
bool qz_build_dynamic(qz *q) {
    Onnx__GraphProto *g = q->g;
    const char **dql = qz_alloc(q, sizeof *dql * g->n_node); /* inputs already quantized */
    int n_dql = 0;
    if (!dql) return false;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        if (q->kind[k] == K_NONE) {
            if (!copy_node(q, n)) return false;
            continue;
        }
        const char *x = n->input[0], *y = n->output[0];
        bool seen = false;
        for (int i = 0; i < n_dql; i++) seen = seen || !strcmp(dql[i], x);
        const char *xq = qz_str(q, "%s_quantized", x), *xs = qz_str(q, "%s_scale", x),
                   *xz = qz_str(q, "%s_zero_point", x);
        if (!xq || !xs || !xz) return false;
        if (!seen) {
            const char *outs[] = {xq, xs, xz};
            if (!qz_add_node(q, "DynamicQuantizeLinear", 1, &x, 3, outs)) return false;
            dql[n_dql++] = x;
        }
        /* the weight [K, N] (a transB Gemm's transposed), per tensor symmetric int8 */
        const Onnx__TensorProto *w = qz_find_init(q, n->input[1]);
        bool tb = q->kind[k] == K_GEMM && qz_attr_i(n, "transB", 0);
        const char *wname = tb ? qz_str(q, "%s_Transposed", w->name) : w->name;
        const char *wq = qz_str(q, "%s_quantized", wname), *wsn = qz_str(q, "%s_scale", wname),
                   *wzn = qz_str(q, "%s_zero_point", wname);
        if (!wq || !wsn || !wzn) return false;
        bool done = false;
        for (int i = 0; i < q->n_done; i++) done = done || !strcmp(q->done_w[i], wq);
        if (!done) {
            int64_t count;
            float *v = qz_init_floats(q, w, &count);
            if (!v) return false;
            int64_t r = w->dims[0], c = w->dims[1];
            int8_t *qv = qz_alloc(q, (size_t)count);
            float lo = INFINITY, hi = -INFINITY, sc;
            int zp;
            for (int64_t i = 0; i < count; i++) lo = fminf(lo, v[i]), hi = fmaxf(hi, v[i]);
            qz_quant_params(lo, hi, -127, 127, true, &sc, &zp);
            for (int64_t i = 0; qv && i < r; i++)
                for (int64_t j = 0; j < c; j++)
                    qv[tb ? j * r + i : i * c + j] =
                        (int8_t)qz_quantize_value(v[i * c + j], sc, zp, -128, 127);
            free(v);
            int8_t z8 = (int8_t)zp;
            int64_t dims[2] = {tb ? c : r, tb ? r : c};
            if (!qv ||
                !qz_add_init(q, wq, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 2, dims, qv,
                             (size_t)count) ||
                !qz_add_scalar(q, wsn, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &sc, 4) ||
                !qz_add_scalar(q, wzn, ONNX__TENSOR_PROTO__DATA_TYPE__INT8, &z8, 1))
                return false;
            q->done_w[q->n_done++] = wq;
        }
        bool bias = n->n_input > 2 && *n->input[2];
        const char *mul = qz_str(q, "%s_quant_scales_mul", y),
                   *acc = qz_str(q, "%s_MatMul_output_quantized", y),
                   *cst = qz_str(q, "%s_MatMul_output_quantized_cast_output", y),
                   *mm = bias ? qz_str(q, "%s_MatMul", y) : y;
        if (!mul || !acc || !cst || !mm) return false;
        const char *min[] = {xs, wsn}, *iin[] = {xq, wq, xz, wzn}, *mo[] = {cst, mul};
        Onnx__NodeProto *cast;
        if (!qz_add_node(q, "Mul", 2, min, 1, &mul) ||
            !qz_add_node(q, "MatMulInteger", 4, iin, 1, &acc) ||
            !(cast = qz_add_node(q, "Cast", 1, &acc, 1, &cst)) ||
            !qz_node_attr_int(q, cast, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) ||
            !qz_add_node(q, "Mul", 2, mo, 1, &mm))
            return false;
        if (bias) {
            const char *ain[] = {mm, n->input[2]};
            if (!qz_add_node(q, "Add", 2, ain, 1, &y)) return false;
        }
    }
    return true;
}
