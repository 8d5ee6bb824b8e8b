/* quantize_graph.c — ts_onnx_quantize: a float ONNX model written as the quantized model ONNX
 * Runtime's quantizer writes (docs/QUANTIZATION.md, "tessera quantize"), so that Tessera's importer
 * (rewrite_qdq.c, ops_qoperator.c) and ORT run it in integers.
 * Static: the float model runs on the calibration batches with every activation to quantize made a
 * graph output (ORT's augmented graph); MinMax ranges over all batches give per-tensor uint8 (or
 * int8) scale / zero point by ORT's compute_scale_zp; weights are int8 symmetric per output
 * channel, biases int32 with scale x_scale * w_scale; QuantizeLinear / DequantizeLinear pairs
 * follow each quantized activation, DequantizeLinear nodes read the weights (ORT's QDQ format).
 * Dynamic: each MatMul / Gemm with a weight initializer becomes ORT's quantize_dynamic pattern
 * (DynamicQuantizeLinear, MatMulInteger, Cast, Mul [, Add]) over a per-tensor symmetric int8
 * weight. The file is rewritten as an overlay on the unpacked model: new nodes and initializers
 * live in an arena; the original arrays are put back before the model is freed. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "onnx/quantize_graph.h"

#define OP "onnx_quantize"

bool tso_read_file(const char *op, const char *path, uint8_t **data,
                   size_t *size); /* tensor_proto.c */

/* ------------------------------------------------------------------ arena and protobuf building */
void *qz_alloc(qz *q, size_t n) {
    if (q->n_mem == q->cap_mem) {
        int cap = q->cap_mem ? 2 * q->cap_mem : 256;
        void **p = realloc(q->mem, sizeof *p * (size_t)cap);
        if (!p) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), NULL;
        q->mem = p, q->cap_mem = cap;
    }
    void *p = calloc(1, n ? n : 1);
    if (!p) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), NULL;
    return q->mem[q->n_mem++] = p;
}

char *qz_str(qz *q, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = qz_alloc(q, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

bool qz_push(qz *q, void ***a, int *n, int *cap, void *item) {
    if (!item) return false;
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        void **p = realloc(*a, sizeof *p * (size_t)c);
        if (!p) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
        *a = p, *cap = c;
    }
    (void)q;
    (*a)[(*n)++] = item;
    return true;
}

/* A node op_type(in...) -> out..., appended to the new graph */
Onnx__NodeProto *qz_add_node(qz *q, const char *op, int n_in, const char *const *in, int n_out,
                             const char *const *out) {
    Onnx__NodeProto *n = qz_alloc(q, sizeof *n);
    char **iv = qz_alloc(q, sizeof *iv * (size_t)n_in),
         **ov = qz_alloc(q, sizeof *ov * (size_t)n_out);
    if (!n || !iv || !ov) return NULL;
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->op_type = (char *)op;
    n->domain = "";
    for (int i = 0; i < n_in; i++) iv[i] = (char *)in[i];
    for (int i = 0; i < n_out; i++) ov[i] = (char *)out[i];
    n->n_input = (size_t)n_in, n->input = iv;
    n->n_output = (size_t)n_out, n->output = ov;
    n->name = qz_str(q, "%s_%d", op, q->n_nodes);
    return qz_push(q, (void ***)&q->nodes, &q->n_nodes, &q->cap_nodes, n) ? n : NULL;
}

bool qz_node_attr_int(qz *q, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = qz_alloc(q, sizeof *a), **list = qz_alloc(q, sizeof *list);
    if (!a || !list) return false;
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = (char *)name;
    a->has_type = true, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = true, a->i = v;
    list[0] = a;
    n->n_attribute = 1, n->attribute = list;
    return true;
}

/* An initializer from host data (raw little-endian bytes, as ORT writes them) */
const char *qz_add_init(qz *q, const char *name, int32_t type, int ndim, const int64_t *dims,
                        const void *data, size_t bytes) {
    Onnx__TensorProto *t = qz_alloc(q, sizeof *t);
    int64_t *d = qz_alloc(q, sizeof *d * (size_t)(ndim ? ndim : 1));
    uint8_t *raw = qz_alloc(q, bytes);
    if (!t || !d || !raw || !name) return NULL;
    *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
    if (ndim) memcpy(d, dims, sizeof *d * (size_t)ndim); /* a scalar's dims may be NULL */
    if (bytes) memcpy(raw, data, bytes);
    t->n_dims = (size_t)ndim, t->dims = d;
    t->has_data_type = true, t->data_type = type;
    t->name = (char *)name;
    t->has_raw_data = true, t->raw_data = (ProtobufCBinaryData){bytes, raw};
    return qz_push(q, (void ***)&q->inits, &q->n_inits, &q->cap_inits, t) ? name : NULL;
}

const char *qz_add_scalar(qz *q, const char *name, int32_t type, const void *v, size_t bytes) {
    return qz_add_init(q, name, type, 0, NULL, v, bytes);
}

/* ------------------------------------------------------------------ reading the model */
Onnx__TensorProto *qz_find_init(const qz *q, const char *name) {
    for (size_t i = 0; name && i < q->g->n_initializer; i++)
        if (q->g->initializer[i]->name && !strcmp(q->g->initializer[i]->name, name))
            return q->g->initializer[i];
    return NULL;
}

static bool is_float_init(const Onnx__TensorProto *t, int rank) {
    return t && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && (int)t->n_dims == rank;
}

static bool is_default_domain(const Onnx__NodeProto *n) {
    return !n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx");
}

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}
int64_t qz_attr_i(const Onnx__NodeProto *n, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->i : def;
}
static float attr_f(const Onnx__NodeProto *n, const char *name, float def) {
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->f : def;
}

/* the weight's elements as float32 on the host (malloc'ed; NULL with the error set) */
float *qz_init_floats(const qz *q, const Onnx__TensorProto *t, int64_t *count) {
    ts_tensor *x = tso_tensor_from_proto(t, q->base_dir, ts_cpu(), t->name);
    if (!x) return NULL;
    *count = ts_numel(x);
    float *v = malloc(sizeof *v * (size_t)(*count ? *count : 1));
    if (!v || ts_copy_to_host(x, v, sizeof *v * (size_t)*count) != TS_OK) {
        if (!v) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
        free(v);
        v = NULL;
    }
    ts_release(x);
    return v;
}

/* The node's quantization kind: a Conv / MatMul / Gemm with a float32 weight initializer (and a
 * float32 1-D bias initializer for Conv / Gemm), an Add of two activations (static only). */
static int node_kind(const qz *q, const Onnx__NodeProto *n, bool dynamic) {
    if (!is_default_domain(n) || n->n_output != 1 || n->n_input < 2 || !*n->input[0] ||
        !*n->input[1] || !*n->output[0])
        return K_NONE;
    const char *op = n->op_type ? n->op_type : "";
    if (qz_find_init(q, n->input[0])) return K_NONE;
    const Onnx__TensorProto *w = qz_find_init(q, n->input[1]);
    const Onnx__TensorProto *b =
        n->n_input > 2 && *n->input[2] ? qz_find_init(q, n->input[2]) : NULL;
    bool has_b = n->n_input > 2 && *n->input[2];
    if (!strcmp(op, "Conv") && !dynamic && (is_float_init(w, 4) || is_float_init(w, 3)) &&
        (!has_b || (is_float_init(b, 1) && b->dims[0] == w->dims[0])))
        return K_CONV;
    if (!strcmp(op, "MatMul") && is_float_init(w, 2)) return K_MATMUL;
    if (!strcmp(op, "Gemm") && is_float_init(w, 2) && !qz_attr_i(n, "transA", 0) &&
        attr_f(n, "alpha", 1) == 1 && attr_f(n, "beta", 1) == 1) {
        int64_t m = w->dims[qz_attr_i(n, "transB", 0) ? 0 : 1];
        if (!has_b || (is_float_init(b, 1) && b->dims[0] == m)) return K_GEMM;
    }
    if (!strcmp(op, "Add") && !dynamic && n->n_input == 2 && !w) return K_ADD;
    return K_NONE;
}

/* a name that may be absent from the file */

static bool is_graph_output(const qz *q, const char *name) {
    for (size_t i = 0; i < q->g->n_output; i++)
        if (!strcmp(qz_nm(q->g->output[i]->name), name)) return true;
    return false;
}

qz_range *qz_range_of(qz *q, const char *name) {
    for (int i = 0; i < q->n_r; i++)
        if (!strcmp(q->r[i].name, name)) return &q->r[i];
    return NULL;
}

static bool add_range(qz *q, const char *name) {
    if (qz_range_of(q, name)) return true;
    q->r[q->n_r++] = (qz_range){.name = name, .lo = INFINITY, .hi = -INFINITY};
    return true;
}

/* ------------------------------------------------------------------ ORT's arithmetic */
/* quant_utils.compute_scale_zp: the range widened to hold 0 (symmetric: [-absmax, absmax]), the
 * scale (rmax - rmin) / (qmax - qmin) in float64 then stored as float32, the zero point
 * round_half_even(qmin - rmin / scale) with the float64 scale (symmetric: the middle of the range);
 * a scale under float32's smallest normal is 1 with zero point 0. */
void qz_quant_params(float rmin, float rmax, int qmin, int qmax, bool symmetric, float *scale,
                     int *zp) {
    rmin = fminf(rmin, 0.0f);
    rmax = fmaxf(rmax, 0.0f);
    if (symmetric) {
        float a = fmaxf(fabsf(rmin), fabsf(rmax));
        rmin = -a, rmax = a;
    }
    double s = ((double)rmax - (double)rmin) / ((double)qmax - (double)qmin);
    if (s < FLT_MIN) {
        *scale = 1.0f, *zp = 0;
        return;
    }
    *zp = symmetric ? (int)nearbyint((qmin + qmax) / 2.0) : (int)nearbyint(qmin - rmin / s);
    *scale = (float)s;
}

/* quant_utils.quantize_nparray: clip(round_half_even(float32(x / scale)) + zp, qmin, qmax) */
int qz_quantize_value(float x, float scale, int zp, int qmin, int qmax) {
    float v = nearbyintf(x / scale) + (float)zp;
    return v < (float)qmin ? qmin : v > (float)qmax ? qmax : (int)v;
}

/* ------------------------------------------------------------------ calibration */
static bool calibrate(qz *q, int *batches) {
    Onnx__GraphProto *g = q->g;
    int n_extra = 0;
    for (int i = 0; i < q->n_r; i++) n_extra += !q->r[i].graph_out;
    size_t n_out = g->n_output + (size_t)n_extra;
    Onnx__ValueInfoProto **outs = qz_alloc(q, sizeof *outs * n_out);
    if (!outs) return false;
    if (g->n_output) memcpy(outs, g->output, sizeof *outs * g->n_output);
    int *slot = qz_alloc(q, sizeof *slot * (size_t)q->n_r);
    if (!slot) return false;
    size_t k = g->n_output;
    for (int i = 0; i < q->n_r; i++) {
        if (q->r[i].graph_out) {
            for (size_t j = 0; j < g->n_output; j++)
                if (!strcmp(qz_nm(g->output[j]->name), q->r[i].name)) slot[i] = (int)j;
            continue;
        }
        Onnx__ValueInfoProto *v = qz_alloc(q, sizeof *v);
        if (!v) return false;
        *v = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
        v->name = (char *)q->r[i].name;
        slot[i] = (int)k;
        outs[k++] = v;
    }
    /* ORT's augmented model: the activations as extra graph outputs */
    Onnx__ValueInfoProto **old = g->output;
    size_t old_n = g->n_output;
    g->output = outs, g->n_output = n_out;
    size_t size = onnx__model_proto__get_packed_size(q->m);
    uint8_t *buf = malloc(size ? size : 1);
    if (buf) onnx__model_proto__pack(q->m, buf);
    g->output = old, g->n_output = old_n;
    if (!buf) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    ts_module *mod =
        ts_onnx_load_buffer(buf, size, q->base_dir, (ts_onnx_opts){.device = q->o.device});
    free(buf);
    if (!mod) return false;
    int n_in = ts_onnx_num_inputs(mod);
    ts_tensor **in = calloc((size_t)n_in + 1, sizeof *in), **out = calloc(n_out, sizeof *out);
    bool ok = in && out;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    int b = 0;
    for (; ok; b++) {
        int more = 1;
        if (q->o.calib_fn) {
            more = q->o.calib_fn(q->o.calib_user, n_in, in);
            if (more < 0) {
                ok = false;
                if (!ts_error())
                    tsi_error_set(TS_ERR_ARG, "%s: the calibration callback failed at batch %d", OP,
                                  b);
            }
        } else if (b < q->o.n_calib) {
            for (int i = 0; i < n_in; i++) in[i] = ts_retain(q->o.calib[(size_t)b * n_in + i]);
        } else {
            more = 0;
        }
        if (!ok || !more) break;
        ts_no_grad_begin();
        ts_scope_begin();
        ok = ts_onnx_run(mod, n_in, in, (int)n_out, out) == TS_OK;
        for (int i = 0; ok && i < q->n_r; i++) {
            ts_tensor *t = out[slot[i]];
            if (ts_dtype_of(t) != TS_F32) {
                ok = !tsi_error_set(TS_ERR_UNSUPPORTED,
                                    "%s: activation '%s' is %s, not float32: only float32 models "
                                    "are quantized",
                                    OP, q->r[i].name, ts_dtype_name(ts_dtype_of(t)));
                break;
            }
            if (!ts_numel(t)) continue;
            double lo = ts_item(ts_min(t)), hi = ts_item(ts_max(t));
            ok = !ts_error();
            if ((float)lo < q->r[i].lo) q->r[i].lo = (float)lo;
            if ((float)hi > q->r[i].hi) q->r[i].hi = (float)hi;
        }
        ts_scope_end(); /* the outputs belong to the scope */
        ts_no_grad_end();
        for (int i = 0; i < n_in; i++) ts_release(in[i]), in[i] = NULL;
        if (ok && q->o.progress) q->o.progress(q->o.calib_user, b + 1);
    }
    for (int i = 0; in && i < n_in; i++) ts_release(in[i]); /* a failed callback's partial batch */
    free(in);
    free(out);
    ts_module_free(mod);
    *batches = b;
    if (ok && b == 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: mode static: no calibration batches (give calib / n_calib or "
                             "calib_fn)",
                             OP),
               false;
    return ok;
}

/* ------------------------------------------------------------------ driver */
/* name is read by a node of the graph (or a sub-graph) or is a graph output */
static bool name_used(const Onnx__GraphProto *g, Onnx__NodeProto *const *nodes, size_t n_nodes,
                      const char *name) {
    for (size_t i = 0; i < g->n_output; i++)
        if (!strcmp(qz_nm(g->output[i]->name), name)) return true;
    for (size_t k = 0; k < n_nodes; k++) {
        const Onnx__NodeProto *n = nodes[k];
        for (size_t i = 0; i < n->n_input; i++)
            if (!strcmp(n->input[i], name)) return true;
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g && name_used(at->g, at->g->node, at->g->n_node, name)) return true;
            for (size_t j = 0; j < at->n_graphs; j++)
                if (name_used(at->graphs[j], at->graphs[j]->node, at->graphs[j]->n_node, name))
                    return true;
        }
    }
    return false;
}

static bool write_buffer(const uint8_t *buf, size_t size, const char *path) {
    tsi_afile f;
    if (tsi_afile_open(&f, OP, path) != TS_OK) return false;
    if (tsi_afile_write(&f, buf, size) != TS_OK) {
        tsi_afile_abort(&f);
        return false;
    }
    return tsi_afile_commit(&f) == TS_OK;
}

static int64_t default_opset(const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx")) return m->opset_import[i]->version;
    }
    return 0;
}

static bool quantize(qz *q, size_t in_size, const char *out_path, ts_onnx_quantize_report *rep) {
    Onnx__GraphProto *g = q->g;
    const bool dynamic = q->o.mode == TS_ONNX_QUANT_DYNAMIC;
    int64_t opset = default_opset(q->m);
    if (opset < 13)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: the model's opset %lld: quantized models need opset 13 or later "
                             "(per-channel DequantizeLinear); export it at opset 13+",
                             OP, (long long)opset),
               false;
    static const char *const quantized_ops[] = {
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
        "ConvInteger",    "QLinearConv",      "QLinearMatMul"};
    for (size_t k = 0; k < g->n_node; k++)
        for (size_t i = 0; i < sizeof quantized_ops / sizeof *quantized_ops; i++)
            if (g->node[k]->op_type && !strcmp(g->node[k]->op_type, quantized_ops[i]))
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: the model is already quantized (node '%s', %s)", OP,
                                     g->node[k]->name ? g->node[k]->name : "", quantized_ops[i]),
                       false;
    if (!(q->kind = qz_alloc(q, sizeof *q->kind * (g->n_node + 1))) ||
        !(q->r = qz_alloc(q, sizeof *q->r * (3 * g->n_node + 1))) ||
        !(q->done_w = qz_alloc(q, sizeof *q->done_w * (g->n_node + 1))))
        return false;
    int n_q = 0;
    for (size_t k = 0; k < g->n_node; k++)
        n_q += (q->kind[k] = node_kind(q, g->node[k], dynamic)) != 0;
    if (!n_q)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: nothing to quantize: no %s with a float32 weight initializer", OP,
                             dynamic ? "MatMul or Gemm" : "Conv, MatMul, Gemm (or Add)"),
               false;
    int batches = 0;
    if (!dynamic) {
        for (size_t k = 0; k < g->n_node; k++) {
            const Onnx__NodeProto *n = g->node[k];
            if (!q->kind[k]) continue;
            add_range(q, n->input[0]);
            if (q->kind[k] == K_ADD) add_range(q, n->input[1]);
            add_range(q, n->output[0]);
        }
        for (int i = 0; i < q->n_r; i++) q->r[i].graph_out = is_graph_output(q, q->r[i].name);
        if (!calibrate(q, &batches)) return false;
        const bool i8 = q->o.int8_activations;
        for (int i = 0; i < q->n_r; i++) {
            qz_range *r = &q->r[i];
            if (r->lo > r->hi) r->lo = r->hi = 0; /* only empty tensors seen */
            qz_quant_params(r->lo, r->hi, i8 ? -128 : 0, i8 ? 127 : 255, false, &r->scale, &r->zp);
        }
    }
    if (!(dynamic ? qz_build_dynamic(q) : qz_build_static(q))) return false;
    /* the original initializers still read (float weights read by unquantized nodes too) */
    for (size_t i = 0; i < g->n_initializer; i++)
        if (name_used(g, q->nodes, (size_t)q->n_nodes, qz_nm(g->initializer[i]->name)) &&
            !qz_push(q, (void ***)&q->inits, &q->n_inits, &q->cap_inits, g->initializer[i]))
            return false;
    Onnx__NodeProto **old_nodes = g->node;
    Onnx__TensorProto **old_inits = g->initializer;
    size_t old_nn = g->n_node, old_ni = g->n_initializer;
    char *old_producer = q->m->producer_name;
    g->node = q->nodes, g->n_node = (size_t)q->n_nodes;
    g->initializer = q->inits, g->n_initializer = (size_t)q->n_inits;
    if (q->o.producer) q->m->producer_name = (char *)q->o.producer;
    size_t size = onnx__model_proto__get_packed_size(q->m);
    uint8_t *buf = malloc(size ? size : 1);
    if (buf) onnx__model_proto__pack(q->m, buf);
    g->node = old_nodes, g->n_node = old_nn;
    g->initializer = old_inits, g->n_initializer = old_ni;
    q->m->producer_name = old_producer;
    if (!buf) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    bool ok = write_buffer(buf, size, out_path);
    free(buf);
    if (ok && rep)
        *rep = (ts_onnx_quantize_report){.nodes_quantized = n_q,
                                         .tensors_calibrated = q->n_r,
                                         .calib_batches = batches,
                                         .bytes_before = in_size,
                                         .bytes_after = size};
    return ok;
}

ts_status ts_onnx_quantize_buffer(const void *data, size_t size, const char *base_dir,
                                  const char *out_path, ts_onnx_quantize_opts o,
                                  ts_onnx_quantize_report *report) {
    tsi_init();
    if (report) *report = (ts_onnx_quantize_report){0};
    if (!data) return tsi_error_set(TS_ERR_ARG, "%s: data is NULL", OP);
    if (!out_path || !*out_path)
        return tsi_error_set(TS_ERR_ARG, "%s: out_path is NULL or empty", OP);
    if (o.mode == TS_ONNX_QUANT_INT4)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: mode int4: not supported (INT4 blocked weights need opset 21, "
                             "past the importer's opset 17); use static or dynamic",
                             OP);
    if (o.mode != TS_ONNX_QUANT_STATIC && o.mode != TS_ONNX_QUANT_DYNAMIC)
        return tsi_error_set(TS_ERR_ARG, "%s: mode %d: expected static, dynamic or int4", OP,
                             (int)o.mode);
    if (o.mode == TS_ONNX_QUANT_STATIC && !o.calib_fn && (o.n_calib <= 0 || !o.calib))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: mode static needs calibration data: calib and n_calib > 0, or "
                             "calib_fn",
                             OP);
    if (size > TSO_MAX_FILE_BYTES)
        return tsi_error_set(TS_ERR_FORMAT, "%s: %zu bytes, past protobuf's 2 GiB", OP, size);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&tso_pb_allocator, size, data);
    if (!m || !m->graph) {
        if (m) onnx__model_proto__free_unpacked(m, &tso_pb_allocator);
        return tsi_error_set(TS_ERR_FORMAT, "%s: not a valid ONNX model (%zu bytes)", OP, size);
    }
    qz q = {.m = m, .g = m->graph, .base_dir = base_dir, .o = o};
    bool ok = quantize(&q, size, out_path, report);
    for (int i = 0; i < q.n_mem; i++) free(q.mem[i]);
    free(q.mem);
    free(q.nodes);
    free(q.inits);
    onnx__model_proto__free_unpacked(m, &tso_pb_allocator);
    return ok ? TS_OK : ts_error() ? ts_error() : tsi_error_set(TS_ERR_STATE, "%s: failed", OP);
}

ts_status ts_onnx_quantize(const char *in_path, const char *out_path, ts_onnx_quantize_opts o,
                           ts_onnx_quantize_report *report) {
    tsi_init();
    uint8_t *data;
    size_t size;
    if (!tso_read_file(OP, in_path, &data, &size)) return ts_error();
    char *dir = tsi_strdup(in_path);
    if (!dir) {
        free(data);
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
    else
        strcpy(dir, ".");
    ts_status st = ts_onnx_quantize_buffer(data, size, dir, out_path, o, report);
    free(dir);
    free(data);
    return st;
}
