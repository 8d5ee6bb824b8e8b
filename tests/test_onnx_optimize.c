/* test_onnx_optimize.c — the convolution rewrites of ts_onnx_opts.optimize
 * (src/onnx/rewrite_conv.c) on small models packed here with protobuf-c: BatchNormalization folded
 * into the Conv before it (with and without a Conv bias, 1-D and 2-D), Conv + Relu / Clip fused
 * (Clip's bounds as opset-6/9 attributes and as opset-13 inputs, both bounds reached, one bound
 * only, pads conv2d cannot take), and the cases left alone (a Conv output that is a graph output
 * too, a BatchNormalization parameter two of them read, a BatchNormalization in training form, a
 * 3-D Conv). Each model runs optimized and not on cpu and sim:0: the outputs agree within a bound
 * derived from the float32 arithmetic, the node count falls by what was rewritten, the parameters
 * hold the folded values, and a rewritten model's gradient with respect to its input equals the
 * original's within rounding. The rewrites are checked on the blocked layout
 * (TS_ONNX_BLOCKED=nchw); the default, which runs dense conv nets channels_last, is held to the
 * same bound. An allocation-failure sweep loads and runs an optimized model. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "nn/conv_blocked.h"
#include "onnx/onnx_internal.h"

#define U 0x1p-24 /* float32's unit roundoff */

/* ------------------------------------------------------------------ a model in memory
 * The ModelProto's parts live in the builder (which must not move once begun) and in blocks it
 * holds, all freed by mb_end. */
enum { MB_PARTS = 24, MB_BLOCKS = 1024 };
typedef struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto *nodes[MB_PARTS];
    Onnx__TensorProto *inits[MB_PARTS];
    Onnx__ValueInfoProto *ins[MB_PARTS], *outs[MB_PARTS];
    void *blocks[MB_BLOCKS];
    int n_blocks;
} mb;

static void *mb_alloc(mb *b, size_t size) {
    void *p = calloc(1, size ? size : 1);
    if (!p || b->n_blocks == MB_BLOCKS) abort(); /* the test's own limits */
    return b->blocks[b->n_blocks++] = p;
}

static char *mb_str(mb *b, const char *s) { return strcpy(mb_alloc(b, strlen(s) + 1), s); }

static void mb_begin(mb *b, int opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = mb_str(b, "");
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.opset_import = b->opsets;
    b->model.n_opset_import = 1;
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.graph = &b->graph;
    b->graph.name = mb_str(b, "optimize");
    b->graph.node = b->nodes;
    b->graph.initializer = b->inits;
    b->graph.input = b->ins;
    b->graph.output = b->outs;
}

static void mb_end(mb *b) {
    for (int i = 0; i < b->n_blocks; i++) free(b->blocks[i]);
    b->n_blocks = 0;
}

/* "a,,b" as {"a", "", "b"} (an empty name: an absent optional input) */
static char **mb_list(mb *b, const char *csv, size_t *count) {
    char **v = mb_alloc(b, MB_PARTS * sizeof *v), *p = mb_str(b, csv);
    for (*count = 0; *csv; p++) {
        v[(*count)++] = p;
        p += strcspn(p, ",");
        if (!*p) break;
        *p = '\0';
    }
    return v;
}

static Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char *ins,
                                const char *outs) {
    Onnx__NodeProto *n = mb_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(b, op);
    n->name = mb_str(b, name);
    n->input = mb_list(b, ins, &n->n_input);
    n->output = mb_list(b, outs, &n->n_output);
    n->attribute = mb_alloc(b, MB_PARTS * sizeof *n->attribute);
    b->nodes[b->graph.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *mb_attr(mb *b, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = mb_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(b, name);
    a->has_type = 1;
    a->type = type;
    return n->attribute[n->n_attribute++] = a;
}

static void mb_int(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void mb_float(mb *b, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

/* an ints attribute of count copies of v */
static void mb_ints(mb *b, Onnx__NodeProto *n, const char *name, int count, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = mb_alloc(b, (size_t)count * sizeof *a->ints);
    for (a->n_ints = 0; a->n_ints < (size_t)count; a->n_ints++) a->ints[a->n_ints] = v;
}

static void mb_string(mb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(b, v);
    a->s.len = strlen(v);
}

/* a float tensor [dims[0..ndim-1]] holding v, as float_data */
static Onnx__TensorProto *mb_tensor(mb *b, const char *name, int ndim, const int64_t *dims,
                                    const float *v) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->dims = mb_alloc(b, (size_t)ndim * sizeof *dims);
    size_t count = 1;
    for (t->n_dims = 0; t->n_dims < (size_t)ndim; t->n_dims++)
        count *= (size_t)(t->dims[t->n_dims] = dims[t->n_dims]);
    t->float_data = memcpy(mb_alloc(b, count * sizeof *v), v, count * sizeof *v);
    t->n_float_data = count;
    return t;
}

static void mb_init(mb *b, const char *name, int ndim, const int64_t *dims, const float *v) {
    b->inits[b->graph.n_initializer++] = mb_tensor(b, name, ndim, dims, v);
}

/* a float input or output of unknown shape (a wrong one then reaches the nodes) */
static Onnx__ValueInfoProto *mb_value(mb *b, const char *name) {
    Onnx__TypeProto__Tensor *tt = mb_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    Onnx__TypeProto *type = mb_alloc(b, sizeof *type);
    onnx__type_proto__init(type);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tt;
    Onnx__ValueInfoProto *v = mb_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = mb_str(b, name);
    v->type = type;
    return v;
}

static uint8_t *mb_pack(mb *b, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = mb_alloc(b, *len);
    onnx__model_proto__pack(&b->model, buf);
    return buf;
}

/* ------------------------------------------------------------------ the models */
typedef enum act_kind { ACT_NONE, ACT_RELU, ACT_CLIP, ACT_HSWISH, ACT_HSIGMOID } act_kind;
typedef enum bn_form {
    BN_NONE,
    BN_INFER,  /* inference form: folded */
    BN_TRAIN,  /* training_mode = 1: batch statistics, left alone */
    BN_SHARED, /* a second Conv + BatchNormalization reading the same scale: left alone */
} bn_form;

/* x [2, cin, 6, ...] -> Conv -> [BatchNormalization] -> [Relu | Clip] */
typedef struct spec {
    const char *name;
    int opset, nsp;                       /* nsp spatial dims, 1 to 3 */
    int cin, cout, k, pad, stride, group; /* pad < 0: auto_pad SAME_UPPER */
    bool bias;                            /* the Conv has B */
    bn_form bn;
    float eps;           /* 0: the epsilon attribute absent (1e-5) */
    act_kind act;        /* ACT_CLIP: bounds lo and hi, NAN for an absent one; ACT_HSIGMOID:
                          * alpha lo and beta hi, attributes absent when NAN */
    double lo, hi;       /* opset >= 11: lo a Constant node's output, hi an initializer */
    bool conv_is_output; /* the Conv's output is a graph output too */
    int removed;         /* nodes the rewrites remove */
    bool bites;          /* ACT_CLIP: the original output reaches both bounds, so each is seen */
} spec;

enum { BATCH = 2, SIDE = 6 };

/* the model's values, random and fixed by a seed */
typedef struct params {
    float *x, *w, *b, *scale, *shift, *mean, *var;
    int64_t nx, nw, per; /* per: weights of one output channel */
} params;

static double uniform(uint64_t *s, double lo, double hi) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*s >> 11) * 0x1p-53;
}

static float *fill(int64_t n, uint64_t *s, double lo, double hi) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(s, lo, hi);
    return v;
}

static params make_params(const spec *c) {
    uint64_t s = 12345;
    params p = {.nx = BATCH * c->cin, .per = c->cin / c->group};
    for (int i = 0; i < c->nsp; i++) p.nx *= SIDE, p.per *= c->k;
    p.nw = c->cout * p.per;
    p.x = fill(p.nx, &s, -2, 2);
    p.w = fill(p.nw, &s, -0.5, 0.5);
    p.b = fill(c->cout, &s, -0.5, 0.5);
    p.scale = fill(c->cout, &s, -1.5, 1.5);
    p.shift = fill(c->cout, &s, -0.5, 0.5);
    p.mean = fill(c->cout, &s, -0.5, 0.5);
    p.var = fill(c->cout, &s, 0.2, 1.2);
    return p;
}

static void free_params(params *p) {
    float *v[] = {p->x, p->w, p->b, p->scale, p->shift, p->mean, p->var};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) free(v[i]);
}

static double eps_of(const spec *c) { return c->eps ? c->eps : 1e-5f; }

/* BatchNormalization "bn<tag>" of `in` with its scale "bn_s" and its own B, mean and var */
static void add_bn(mb *b, const spec *c, const params *p, const char *tag, const char *in,
                   const char *out) {
    const int64_t cd[1] = {c->cout};
    const float *vals[3] = {p->shift, p->mean, p->var};
    char names[3][32], ins[160], name[32];
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "bn%s_%c", tag, "tmv"[i]);
        mb_init(b, names[i], 1, cd, vals[i]);
    }
    snprintf(ins, sizeof ins, "%s,bn_s,%s,%s,%s", in, names[0], names[1], names[2]);
    snprintf(name, sizeof name, "bn%s", tag);
    Onnx__NodeProto *n = mb_node(b, "BatchNormalization", name, ins, out);
    if (c->eps) mb_float(b, n, "epsilon", c->eps);
    if (c->bn == BN_TRAIN) mb_int(b, n, "training_mode", 1);
}

/* Clip of `in` with the spec's bounds: attributes before opset 11, else inputs */
static void add_clip(mb *b, const spec *c, const char *in, const char *out) {
    const int64_t one[1] = {1};
    if (c->opset < 11) {
        Onnx__NodeProto *n = mb_node(b, "Clip", "clip", in, out);
        if (!isnan(c->lo)) mb_float(b, n, "min", (float)c->lo);
        if (!isnan(c->hi)) mb_float(b, n, "max", (float)c->hi);
        return;
    }
    if (!isnan(c->lo)) {
        Onnx__NodeProto *k = mb_node(b, "Constant", "lo", "", "lo");
        mb_attr(b, k, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
            mb_tensor(b, "lo", 0, one, (const float[]){(float)c->lo});
    }
    if (!isnan(c->hi)) mb_init(b, "hi", 0, one, (const float[]){(float)c->hi});
    char ins[64];
    snprintf(ins, sizeof ins, "%s,%s%s", in, isnan(c->lo) ? "" : "lo", isnan(c->hi) ? "" : ",hi");
    mb_node(b, "Clip", "clip", ins, out);
}

static void add_conv(mb *b, const spec *c, const params *p, const char *w, const char *out) {
    int64_t wd[5] = {c->cout, c->cin / c->group, c->k, c->k, c->k};
    mb_init(b, w, 2 + c->nsp, wd, p->w);
    char ins[64];
    snprintf(ins, sizeof ins, "x,%s%s", w, c->bias ? ",b" : "");
    Onnx__NodeProto *n = mb_node(b, "Conv", strcmp(w, "w") ? "conv2" : "conv", ins, out);
    mb_ints(b, n, "kernel_shape", c->nsp, c->k);
    mb_ints(b, n, "strides", c->nsp, c->stride);
    if (c->pad >= 0) mb_ints(b, n, "pads", 2 * c->nsp, c->pad);
    if (c->pad < 0) mb_string(b, n, "auto_pad", "SAME_UPPER");
    if (c->group != 1) mb_int(b, n, "group", c->group);
}

/* the model's bytes (held by b); its outputs: "y", then "y2" (BN_SHARED) or "c" (conv_is_output) */
static uint8_t *build(mb *b, const spec *c, const params *p, size_t *len) {
    mb_begin(b, c->opset);
    b->ins[b->graph.n_input++] = mb_value(b, "x");
    const int64_t cd[1] = {c->cout};
    if (c->bias) mb_init(b, "b", 1, cd, p->b);
    if (c->bn != BN_NONE) mb_init(b, "bn_s", 1, cd, p->scale);
    bool act = c->act != ACT_NONE;
    add_conv(b, c, p, "w", c->bn == BN_NONE && !act ? "y" : "c");
    const char *cur = "c";
    if (c->bn != BN_NONE) add_bn(b, c, p, "", "c", act ? "n" : "y"), cur = "n";
    if (c->act == ACT_RELU) mb_node(b, "Relu", "relu", cur, "y");
    if (c->act == ACT_CLIP) add_clip(b, c, cur, "y");
    if (c->act == ACT_HSWISH) mb_node(b, "HardSwish", "hswish", cur, "y");
    if (c->act == ACT_HSIGMOID) {
        Onnx__NodeProto *n = mb_node(b, "HardSigmoid", "hsigmoid", cur, "y");
        if (!isnan(c->lo)) mb_float(b, n, "alpha", (float)c->lo);
        if (!isnan(c->hi)) mb_float(b, n, "beta", (float)c->hi);
    }
    b->outs[b->graph.n_output++] = mb_value(b, "y");
    if (c->bn == BN_SHARED) {
        add_conv(b, c, p, "w2", "c2");
        add_bn(b, c, p, "2", "c2", "y2");
        b->outs[b->graph.n_output++] = mb_value(b, "y2");
    }
    if (c->conv_is_output) b->outs[b->graph.n_output++] = mb_value(b, "c");
    return mb_pack(b, len);
}

static const spec specs[] = {
    {"Conv + BatchNormalization + Relu", 13, 2, 4, 6, 3, 1, 1, 1, true, BN_INFER, 0.05f, ACT_RELU,
     NAN, NAN, false, 2, false},
    {"Conv (no bias) + BatchNormalization, stride 2", 13, 2, 3, 5, 3, 0, 2, 1, false, BN_INFER, 0,
     ACT_NONE, NAN, NAN, false, 1, false},
    {"Conv + Clip(0, 6), opset 9 attributes, group 2", 9, 2, 4, 4, 3, 1, 1, 2, true, BN_NONE, 0,
     ACT_CLIP, 0, 6, false, 1, false},
    {"Conv + BatchNormalization + Clip(0, 6), opset 13 inputs", 13, 2, 3, 4, 3, 1, 1, 1, true,
     BN_INFER, 0.01f, ACT_CLIP, 0, 6, false, 2, false},
    {"Conv + Clip(-0.5, 0.5), opset 6 attributes", 6, 2, 3, 4, 3, 1, 1, 1, true, BN_NONE, 0,
     ACT_CLIP, -0.5, 0.5, false, 1, true},
    {"Conv + Clip(max 0.5 only), opset 13", 13, 2, 3, 4, 3, 1, 1, 1, true, BN_NONE, 0, ACT_CLIP,
     NAN, 0.5, false, 1, false},
    {"Conv + Relu, asymmetric pads (SAME_UPPER, kernel 2)", 13, 2, 3, 4, 2, -1, 1, 1, true, BN_NONE,
     0, ACT_RELU, NAN, NAN, false, 1, false},
    {"1-D Conv + BatchNormalization + Relu", 13, 1, 3, 4, 3, 1, 1, 1, true, BN_INFER, 0.05f,
     ACT_RELU, NAN, NAN, false, 2, false},
    {"Conv + Relu, the Conv's output a graph output too", 13, 2, 3, 4, 3, 1, 1, 1, true, BN_NONE, 0,
     ACT_RELU, NAN, NAN, true, 0, false},
    {"two BatchNormalizations sharing a scale", 13, 2, 3, 4, 3, 1, 1, 1, true, BN_SHARED, 0.05f,
     ACT_NONE, NAN, NAN, false, 0, false},
    {"BatchNormalization in training form", 15, 2, 3, 4, 3, 1, 1, 1, true, BN_TRAIN, 0.05f,
     ACT_RELU, NAN, NAN, false, 0, false},
    {"3-D Conv + Relu (stays)", 13, 3, 2, 3, 3, 1, 1, 1, true, BN_NONE, 0, ACT_RELU, NAN, NAN,
     false, 0, false},
    /* the direct kernels (stride 1, few outputs), oneDNN's post-ops (stride 2, 16 depthwise) */
    {"Conv + BatchNormalization + HardSwish", 14, 2, 4, 6, 3, 1, 1, 1, true, BN_INFER, 0.05f,
     ACT_HSWISH, NAN, NAN, false, 2, false},
    {"Conv + HardSwish, stride 2", 14, 2, 4, 6, 3, 1, 2, 1, true, BN_NONE, 0, ACT_HSWISH, NAN, NAN,
     false, 1, false},
    {"depthwise Conv (16 channels) + HardSwish", 14, 2, 16, 16, 3, 1, 1, 16, true, BN_NONE, 0,
     ACT_HSWISH, NAN, NAN, false, 1, false},
    {"Conv + HardSigmoid (defaults), group 2", 13, 2, 4, 4, 3, 1, 1, 2, true, BN_NONE, 0,
     ACT_HSIGMOID, NAN, NAN, false, 1, false},
    {"Conv + HardSigmoid(0.3, 0.4), stride 2", 13, 2, 4, 6, 3, 1, 2, 1, true, BN_NONE, 0,
     ACT_HSIGMOID, 0.3, 0.4, false, 1, false},
    {"depthwise Conv (16 channels) + HardSigmoid(1/6, 1/2)", 13, 2, 16, 16, 3, 1, 1, 16, true,
     BN_NONE, 0, ACT_HSIGMOID, 1.0 / 6.0, 0.5, false, 1, false},
};

/* ------------------------------------------------------------------ the bound */
/* BatchNormalization's factor for channel o: scale / sqrt(var + eps), 1 without one */
static double factor(const spec *c, const params *p, int o) {
    return c->bn == BN_NONE ? 1 : p->scale[o] / sqrt((double)p->var[o] + eps_of(c));
}

/* Per output channel o, the most |optimized - original| of one output element may be. Each side
 * sums K = cin / group * k^nsp products and is within (K + 8) u A_o of the exact value, where
 * A_o = |s_o| (max|x| sum|W_o| + |b_o| + |mean_o|) + |B_o| bounds every magnitude met: the folded
 * side rounds W * s and b' once each (K + 3 roundings), the original rounds BatchNormalization's
 * subtract, scale (s itself computed in float64, rounded once) and add (K + 8); Relu and Clip do
 * not widen the difference. HardSigmoid, h(y) = clamp(alpha y + beta, 0, 1), widens it to
 * |alpha| d and adds its own roundings on each side, alpha y and + beta (or an FMA): at most
 * 2 u (|alpha| A + |beta|) each. HardSwish, y h(y): |y1 h1 - y2 h2| <= d |h1| + |y2| |h1 - h2|,
 * plus the product's rounding u A on each side (oneDNN's y relu6(y + 3) / 6 rounds y + 3, the
 * product and the division: within the same). */
static double act_tol(const spec *c, double d, double a) {
    const bool swish = c->act == ACT_HSWISH;
    if (!swish && c->act != ACT_HSIGMOID) return d;
    const double alpha = swish ? 1.0 / 6.0 : isnan(c->lo) ? 0.2 : c->lo;
    const double beta = swish ? 0.5 : isnan(c->hi) ? 0.5 : c->hi;
    const double h = fabs(alpha) * d + 4 * U * (fabs(alpha) * a + fabs(beta) + 1);
    return swish ? d + a * h + 4 * U * a : h;
}

static void output_tol(const spec *c, const params *p, double *tol) {
    double xmax = 0;
    for (int64_t i = 0; i < p->nx; i++) xmax = fmax(xmax, fabs(p->x[i]));
    bool bn = c->bn != BN_NONE;
    for (int o = 0; o < c->cout; o++) {
        double wsum = 0;
        for (int64_t j = 0; j < p->per; j++) wsum += fabs(p->w[o * p->per + j]);
        double a = fabs(factor(c, p, o)) *
                       (xmax * wsum + (c->bias ? fabs(p->b[o]) : 0) + (bn ? fabs(p->mean[o]) : 0)) +
                   (bn ? fabs(p->shift[o]) : 0);
        tol[o] = act_tol(c, (2.0 * (double)p->per + 16) * U * a, a);
    }
}

/* ------------------------------------------------------------------ running */
static ts_module *load(const uint8_t *buf, size_t len, ts_device dev, bool optimize) {
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = dev, .optimize = optimize});
}

static int nodes_of(ts_module *m) { return m ? ((tso_model *)m)->graph->n_nodes : -1; }

static ts_tensor *input(const spec *c, const params *p, ts_device dev) {
    ts_shape s = {.ndim = 2 + c->nsp, .dims = {BATCH, c->cin}};
    for (int i = 0; i < c->nsp; i++) s.dims[2 + i] = SIDE;
    return ts_from_data(s, TS_F32, p->x, (ts_opts){.dtype = TS_F32, .device = dev});
}

/* the model's first n outputs on x (in the current scope); false on error */
static bool run(ts_module *m, ts_tensor *x, int n, ts_tensor **out) {
    return m && ts_onnx_run(m, 1, &x, n, out) == TS_OK;
}

/* tol [cout] as a tensor broadcasting along dim 1 of a rank-nd tensor on dev */
static ts_tensor *per_channel(const double *tol, int cout, int nd, ts_device dev) {
    ts_shape s = {.ndim = nd};
    for (int i = 0; i < nd; i++) s.dims[i] = i == 1 ? cout : 1;
    return ts_from_data(s, TS_F64, tol, (ts_opts){.dtype = TS_F64, .device = dev});
}

/* the largest |a - b| / tol over the elements (tol per channel); INFINITY when the shapes differ */
static double excess(ts_tensor *a, ts_tensor *b, const double *tol, int cout) {
    if (!a || !b || ts_numel(a) != ts_numel(b) || ts_ndim(a) != ts_ndim(b)) return INFINITY;
    ts_tensor *d = ts_abs(ts_sub(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64)));
    return ts_item(ts_max(ts_div(d, per_channel(tol, cout, ts_ndim(a), ts_device_of(a)))));
}

/* the folded parameters: W' = W s and b' = (b - mean) s + B, each the float64 value rounded once
 * (copies in the current scope) */
static void check_folded(ts_module *m, const spec *c, const params *p) {
    ts_tensor *w = ts_module_get(m, "w"), *b = ts_module_get(m, c->bias ? "b" : "bn_t");
    CHECK(w && b && ts_numel(w) == p->nw && ts_numel(b) == c->cout);
    if (!w || !b || ts_numel(w) != p->nw || ts_numel(b) != c->cout) return;
    float *wv = malloc((size_t)p->nw * sizeof *wv), bv[64];
    CHECK(ts_copy_to_host(ts_contiguous(ts_to(w, ts_cpu())), wv, (size_t)p->nw * sizeof *wv) ==
          TS_OK);
    CHECK(ts_copy_to_host(ts_contiguous(ts_to(b, ts_cpu())), bv, (size_t)c->cout * sizeof *bv) ==
          TS_OK);
    double worst = 0;
    for (int o = 0; o < c->cout; o++) {
        double s = factor(c, p, o), want = ((c->bias ? p->b[o] : 0) - (double)p->mean[o]) * s;
        want += p->shift[o];
        worst = fmax(worst, fabs(bv[o] - want) / (U * fabs(want)));
        for (int64_t j = 0; j < p->per; j++) {
            double wj = p->w[o * p->per + j] * s;
            worst = fmax(worst, fabs(wv[o * p->per + j] - wj) / (U * fabs(wj)));
        }
    }
    CHECK(worst <= 1.0 + 0x1p-20); /* one rounding; float64's own error is 2^-50 or less */
    if (!(worst <= 1.0 + 0x1p-20))
        fprintf(stderr, "  %s: a folded parameter is %.3g roundings off\n", c->name, worst);
    free(wv);
    /* without a bias of its own the Conv reads BatchNormalization's B */
    const tso_graph *g = ((tso_model *)m)->graph;
    const tso_node *conv = &g->nodes[0];
    CHECK(conv->n_in == 3 && !strcmp(g->values[conv->in[2]].name, c->bias ? "b" : "bn_t"));
}

/* a spec's model: its values, its bytes (in b) and the model loaded without and with the rewrites
 */
typedef struct fixture {
    params p;
    mb b;
    uint8_t *buf;
    size_t len;
    ts_module *plain, *opt;
} fixture;

static void fixture_open(fixture *f, const spec *c, ts_device dev) {
    f->p = make_params(c);
    f->buf = build(&f->b, c, &f->p, &f->len);
    f->plain = load(f->buf, f->len, dev, false);
    f->opt = load(f->buf, f->len, dev, true);
    CHECK(f->plain && f->opt);
    CHECK_OK();
}

static void fixture_close(fixture *f) {
    ts_module_free(f->plain);
    ts_module_free(f->opt);
    mb_end(&f->b);
    free_params(&f->p);
}

/* one spec on one device: the outputs, the node count, the folded parameters */
static void check_spec(const spec *c, ts_device dev) {
    fixture f;
    fixture_open(&f, c, dev);
    ts_module *plain = f.plain, *opt = f.opt;
    const params p = f.p;
    int n_out = c->bn == BN_SHARED || c->conv_is_output ? 2 : 1;
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = input(c, &p, dev), *yp[2] = {0}, *yo[2] = {0};
    bool ran = run(plain, x, n_out, yp) && run(opt, x, n_out, yo);
    CHECK(ran);
    CHECK_OK();
    double tol[64], worst = 0;
    output_tol(c, &p, tol);
    for (int i = 0; ran && i < n_out; i++) {
        /* nothing rewritten: the same graph, the same bits */
        double e = c->removed ? excess(yo[i], yp[i], tol, c->cout)
                              : ts_item(ts_max(ts_abs(ts_sub(yo[i], yp[i]))));
        worst = fmax(worst, e);
    }
    CHECK(ran && worst <= (c->removed ? 1 : 0));
    if (c->bites && ran) { /* both bounds apply somewhere: a bound the fused node drops shows */
        CHECK(ts_item(ts_min(yp[0])) == (float)c->lo && ts_item(ts_max(yp[0])) == (float)c->hi);
    }
    printf("  %-58s %-5s nodes %d -> %d, |difference| / bound %.3g\n", c->name, ts_device_str(dev),
           nodes_of(plain), nodes_of(opt), worst);
    ts_no_grad_end();
    ts_scope_end();
    CHECK_EQ(nodes_of(plain) - nodes_of(opt), c->removed);
    ts_scope_begin();
    if (c->bn == BN_INFER && opt) check_folded(opt, c, &p);
    ts_scope_end();
    CHECK_OK();
    fixture_close(&f);
}

/* The default layout (TS_ONNX_BLOCKED unset): a dense conv net runs channels_last where oneDNN's
 * NHWC kernels are native (onnx/rewrite_blocked.c), the same products summed in another order, so
 * its outputs are held to the bound above (each side within (K + 8) u A of the exact value), not
 * to the unrewritten model's bits. Returns whether the run went channels_last. */
static bool check_default(const spec *c, ts_device dev) {
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    fixture f;
    fixture_open(&f, c, dev);
    setenv("TS_ONNX_BLOCKED", "nchw", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    const int n_out = c->bn == BN_SHARED || c->conv_is_output ? 2 : 1;
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = input(c, &f.p, dev), *yp[2] = {0}, *yo[2] = {0};
    const bool ran = run(f.plain, x, n_out, yp) && run(f.opt, x, n_out, yo);
    const bool nhwc = f.opt && tso_blocked_mode((tso_model *)f.opt, dev, &x, 1) < 0;
    CHECK(ran);
    double tol[64], worst = 0;
    output_tol(c, &f.p, tol);
    for (int i = 0; ran && i < n_out; i++) worst = fmax(worst, excess(yo[i], yp[i], tol, c->cout));
    CHECK(ran && worst <= 1);
    if (nhwc)
        printf("  %-58s %-5s channels_last, |difference| / bound %.3g\n", c->name,
               ts_device_str(dev), worst);
    ts_no_grad_end();
    ts_scope_end();
    CHECK_OK();
    fixture_close(&f);
    return nhwc;
}

/* ------------------------------------------------------------------ gradients */
/* sum(y * g) backward through model m from a fresh leaf copy of x; the input's gradient (in the
 * current scope) and, through *wgrad, whether W's gradient came out finite and not all zero */
static ts_tensor *input_grad(ts_module *m, ts_tensor *x, ts_tensor *g, bool *wgrad) {
    ts_tensor *leaf = ts_clone(x);
    ts_set_requires_grad(leaf, true);
    ts_tensor *y = NULL;
    if (!run(m, leaf, 1, &y)) return NULL;
    ts_backward(ts_sum(ts_mul(y, g)));
    ts_tensor *wg = ts_grad(ts_module_get(m, "w"));
    double total = wg ? ts_item(ts_sum(ts_abs(wg))) : NAN; /* a NaN or an infinity stays one */
    *wgrad = isfinite(total) && total > 0;
    return ts_grad(leaf);
}

/* Conv + BatchNormalization + Relu rewritten into one node still trains: its input gradient
 * equals the original model's. g is zeroed where the original output is within its forward bound
 * of 0, so both apply Relu's derivative to the same elements; each side then sums
 * K' = cout * k^2 products g W s into an input element (the folded side with W s rounded, the
 * original with g s rounded: (K' + 6) u T each), T = max|g| sum_o |s_o| sum|W_o| bounding them. */
static void check_gradient(const spec *c, ts_device dev) {
    fixture f;
    fixture_open(&f, c, dev);
    ts_module *plain = f.plain, *opt = f.opt;
    const params p = f.p;
    CHECK(nodes_of(opt) == 1);
    double tol[64], t = 0;
    output_tol(c, &p, tol);
    for (int o = 0; o < c->cout; o++) {
        double wsum = 0;
        for (int64_t j = 0; j < p.per; j++) wsum += fabs(p.w[o * p.per + j]);
        t += fabs(factor(c, &p, o)) * wsum;
    }
    int64_t terms = (int64_t)c->cout * c->k * c->k;
    double bound = (2.0 * (double)terms + 16) * U * t; /* max|g| = 1 */
    ts_scope_begin();
    ts_tensor *x = input(c, &p, dev), *y = NULL;
    ts_no_grad_begin();
    bool ok = run(plain, x, 1, &y);
    ts_no_grad_end();
    ts_tensor *g = NULL, *gp = NULL, *go = NULL;
    bool wp = false, wo = false;
    if (ok) {
        ts_manual_seed(5);
        ts_tensor *away =
            ts_gt(ts_abs(ts_to_dtype(y, TS_F64)), per_channel(tol, c->cout, ts_ndim(y), dev));
        g = ts_mul(ts_rand(ts_shape_of(y), (ts_opts){.device = dev}), ts_to_dtype(away, TS_F32));
        gp = input_grad(plain, x, g, &wp);
        go = input_grad(opt, x, g, &wo);
    }
    CHECK(gp && go && wp && wo);
    double d =
        gp && go ? ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(go, TS_F64), ts_to_dtype(gp, TS_F64)))))
                 : INFINITY;
    CHECK(d <= bound);
    printf("  gradient w.r.t. the input, %-5s |difference| %.3g, bound %.3g\n", ts_device_str(dev),
           d, bound);
    ts_scope_end();
    CHECK_OK();
    fixture_close(&f);
}

/* an error inside the fused node names the Conv */
static void check_error_names_conv(void) {
    const spec *c = &specs[0];
    fixture f;
    fixture_open(&f, c, ts_cpu());
    CHECK(nodes_of(f.opt) == 1);
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(BATCH, c->cin + 1, SIDE, SIDE), (ts_opts){0}), *y = NULL;
    CHECK(!run(f.opt, x, 1, &y));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "node 'conv' (Conv)");
    ts_scope_end();
    fixture_close(&f);
}

/* ------------------------------------------------------------------ allocation failures */
typedef struct sweep_st {
    ts_module *m;
    ts_tensor *x;
} sweep_st;

static fixture sweep_f;                           /* specs[0] on the cpu */
static float sweep_want[BATCH * 6 * SIDE * SIDE]; /* its output without the rewrites */

static void *sweep_setup(void) {
    sweep_st *s = calloc(1, sizeof *s);
    s->x = input(&specs[0], &sweep_f.p, ts_cpu());
    return s;
}

/* the load under test: optimized */
static bool sweep_run(void *p) {
    sweep_st *s = p;
    s->m = load(sweep_f.buf, sweep_f.len, ts_cpu(), true);
    return s->m && !ts_error();
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (!ok) return;
    /* a model loaded after a failure is the rewritten one and computes what it should */
    double tol[64];
    output_tol(&specs[0], &sweep_f.p, tol);
    ts_scope_begin();
    ts_tensor *y = NULL;
    CHECK(nodes_of(s->m) == 1 && run(s->m, s->x, 1, &y));
    ts_tensor *want = ts_from_data(ts_shape_of(y), TS_F32, sweep_want, (ts_opts){.dtype = TS_F32});
    CHECK(y && excess(y, want, tol, specs[0].cout) <= 1);
    ts_scope_end();
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m);
    ts_release(s->x);
    free(s);
}

static void test_sweep(void) {
    fixture_open(&sweep_f, &specs[0], ts_cpu());
    ts_scope_begin();
    ts_tensor *x = input(&specs[0], &sweep_f.p, ts_cpu()), *y = NULL;
    CHECK(run(sweep_f.plain, x, 1, &y) &&
          ts_numel(y) == (int64_t)(sizeof sweep_want / sizeof(float)));
    CHECK(y && ts_copy_to_host(y, sweep_want, sizeof sweep_want) == TS_OK);
    ts_scope_end();
    ts_sweep_case sc = {.name = "onnx_load optimized",
                        .setup = sweep_setup,
                        .run = sweep_run,
                        .teardown = sweep_teardown,
                        .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&sc, 20000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom);
    fixture_close(&sweep_f);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_dev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    /* the rewrites on the layout they keep: the blocked one (TS_ONNX_BLOCKED=nchw); the default's
     * channels_last runs of dense conv nets are held to the bound by check_default */
    setenv("TS_ONNX_BLOCKED", "nchw", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED); /* the library read its environment at start-up */
    printf("optimized vs not (bound: (2K + 16) u A per channel; 0 when nothing is rewritten):\n");
    for (int d = 0; d < n_dev; d++)
        for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) check_spec(&specs[i], devs[d]);
    int nhwc_runs = 0;
    for (int d = 0; d < n_dev; d++)
        for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
            nhwc_runs += check_default(&specs[i], devs[d]);
    /* with AVX-512 and oneDNN the dense 2-D specs ran channels_last */
    if (tsi_conv_block(ts_cpu()) == 16) CHECK(nhwc_runs > 0);
    for (int d = 0; d < n_dev; d++) check_gradient(&specs[0], devs[d]);
    check_error_names_conv();
    test_sweep();
    return ts_test_finish();
}
#endif
