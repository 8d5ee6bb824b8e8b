/* test_onnx_export_quant.c — ts_onnx_export of a model built from the quantized C ops (quantize,
 * conv per channel with ReLU, depthwise conv, add_relu, max pool, cat, linear on a 4-D input with
 * ReLU, adaptive average pool, reshape, linear, dequantize) written as QDQ, loaded back by the
 * importer and run. The model is cut after each stage and exported with that stage's integers as
 * the graph's output, so every integer tensor is compared, not only the last.
 *
 * With power-of-two scales every step of both arithmetics is exact (x / s and x * (1 / s), the
 * float32 and float64 multipliers, ORT's fma rates, the average's 1 / count), so the re-imported
 * model must give the eager integers bit for bit: a wrong zero point, axis, attribute or ReLU
 * shows. With ordinary scales the two requantize differently (docs/ONNX.md, "Quantized models"): at
 * most one quantum per stage from the arithmetic, plus what a one-quantum input difference moves
 * (|w| / out_scale per tap: the bound below), and only at near-ties.
 * The importer's QDQ rewrite must fuse every conv, linear and add into its integer node. Errors:
 * ops with no QDQ form are refused naming the op. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "tessera/io.h"
#include "tessera/quant.h"

static char dir[64];
static char path[128];

/* ------------------------------------------------------------------ the model */
enum {
    S_QUANT,
    S_CONV1,
    S_CONV2,
    S_ADD,
    S_POOL,
    S_CAT,
    S_FC1,
    S_AVG,
    S_FLAT,
    S_FC2,
    S_OUT,
    N_STAGES
};
static const char *const stage_name[N_STAGES] = {
    "quantize",  "conv1 (per channel, relu)", "conv2 (depthwise)", "add_relu", "max_pool",
    "cat",       "fc1 (4-D, relu)",           "adaptive_avg_pool", "reshape",  "fc2 (2-D)",
    "dequantize"};

typedef struct qnet {
    ts_module base;
    int stop;  /* the last stage run (its integers are the output) */
    bool pow2; /* power-of-two scales: exact */
    ts_tensor *w1, *b1, *w2, *b2, *w3, *b3, *w4;
} qnet;

static double sc(const qnet *m, double pow2, double other) { return m->pow2 ? pow2 : other; }

static ts_tensor *qnet_forward(ts_module *self, ts_tensor *x) {
    qnet *m = (qnet *)self;
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0}, two[2] = {2, 2};
    ts_tensor *q = ts_quantize_per_tensor(x, sc(m, 1.0 / 32, 0.043), 128, TS_QUINT8);
    if (m->stop == S_QUANT) return q;
    /* conv1's int32 bias is computed in the forward from constants, as Python's modules do: the
     * file holds its value, not the ops */
    ts_tensor *b1 = ts_to_dtype(ts_mul_scalar(ts_to_dtype(m->b1, TS_F32), 1.0), TS_I32);
    ts_tensor *h =
        ts_quantized_conv2d(q, m->w1, b1, one, one, one, 1, sc(m, 1.0 / 16, 0.071), 0, true);
    if (m->stop == S_CONV1) return h;
    ts_tensor *d =
        ts_quantized_conv2d(h, m->w2, m->b2, one, one, one, 4, sc(m, 1.0 / 8, 0.093), 120, false);
    if (m->stop == S_CONV2) return d;
    ts_tensor *a = ts_quantized_add(d, h, sc(m, 1.0 / 8, 0.11), 6, true); /* relu, zp > 0 */
    if (m->stop == S_ADD) return a;
    ts_tensor *p = ts_quantized_max_pool2d(a, two, two, zero, one, false);
    if (m->stop == S_POOL) return p;
    ts_tensor *c = ts_quantized_cat(
        (ts_tensor *[]){p, d ? ts_quantized_max_pool2d(d, two, two, zero, one, false) : NULL}, 2, 1,
        sc(m, 1.0 / 4, 0.13), 10);
    if (m->stop == S_CAT) return c;
    ts_tensor *f = ts_quantized_linear(c, m->w3, m->b3, sc(m, 1.0 / 4, 0.09), 4, true);
    if (m->stop == S_FC1) return f;
    ts_tensor *v = ts_quantized_adaptive_avg_pool2d(f, 2, 1);
    if (m->stop == S_AVG) return v;
    ts_tensor *r = v ? ts_quantized_reshape(v, TS_SHAPE(ts_shape_of(v).dims[0], 16)) : NULL;
    if (m->stop == S_FLAT) return r;
    ts_tensor *y = ts_quantized_linear(r, m->w4, NULL, sc(m, 1.0 / 2, 0.21), 131, false);
    if (m->stop == S_FC2) return y;
    return ts_dequantize(y);
}

/* A float tensor of the shape with values from a small fixed generator in [-amp, amp]. */
static ts_tensor *values(ts_shape s, double amp, unsigned seed) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)(amp * (((seed >> 8) & 0xffff) / 32767.5 - 1.0));
    }
    ts_tensor *t = ts_from_data(s, TS_F32, v, (ts_opts){.device = ts_cpu()});
    free(v);
    return t;
}

/* weight per channel along dim 0 (scales pow2: 2^-(5 + c % 3)) or per tensor */
static ts_tensor *qweight(ts_shape s, bool per_channel, bool pow2, unsigned seed) {
    ts_tensor *w = values(s, 0.5, seed), *q;
    const int64_t co = s.dims[0];
    if (per_channel) {
        double sv[16];
        int64_t zv[16] = {0};
        for (int64_t c = 0; c < co; c++)
            sv[c] = pow2 ? ldexp(1, -(5 + (int)(c % 3))) : 0.004 + 0.001 * c;
        ts_tensor *st = ts_from_data(TS_SHAPE(co), TS_F64, sv, (ts_opts){.device = ts_cpu()});
        ts_tensor *zt = ts_from_data(TS_SHAPE(co), TS_I64, zv, (ts_opts){.device = ts_cpu()});
        q = ts_quantize_per_channel(w, st, zt, 0, TS_QINT8);
        ts_release(st), ts_release(zt);
    } else {
        q = ts_quantize_per_tensor(w, pow2 ? 1.0 / 64 : 0.0047, 0, TS_QINT8);
    }
    ts_release(w);
    return q;
}

static ts_tensor *ibias(int64_t n, int amp, unsigned seed) {
    int32_t v[16];
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (int32_t)((seed >> 8) % (2u * (unsigned)amp + 1)) - amp;
    }
    return ts_from_data(TS_SHAPE(n), TS_I32, v, (ts_opts){.device = ts_cpu()});
}

static qnet *qnet_new(bool pow2) {
    qnet *m = ts_module_alloc(sizeof *m, "QNet", qnet_forward);
    m->pow2 = pow2;
    m->stop = S_OUT;
    m->w1 = qweight(TS_SHAPE(4, 3, 3, 3), true, pow2, 1);
    m->b1 = ibias(4, 300, 2);
    m->w2 = qweight(TS_SHAPE(4, 1, 3, 3), false, pow2, 3);
    m->b2 = ibias(4, 200, 4);
    m->w3 = qweight(TS_SHAPE(5, 4), true, pow2, 5);
    m->b3 = ibias(5, 100, 6);
    m->w4 = qweight(TS_SHAPE(3, 16), true, pow2, 7);
    return m;
}

static void qnet_free(qnet *m) {
    ts_tensor *ts[] = {m->w1, m->b1, m->w2, m->b2, m->w3, m->b3, m->w4};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) ts_release(ts[i]);
    ts_module_free(&m->base);
}

/* ------------------------------------------------------------------ checks */
static int count_graph_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

/* the integers (or floats) of t as doubles */
static double *host_values(ts_tensor *t, int64_t *n) {
    const ts_dtype dt = ts_dtype_of(t);
    const bool q = dt == TS_QUINT8 || dt == TS_QINT8 || dt == TS_QINT32;
    ts_tensor *i = q ? ts_int_repr(t) : t;
    ts_tensor *d = i ? ts_to_dtype(i, TS_F64) : NULL;
    *n = d ? ts_numel(d) : 0;
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
    if (d) ts_copy_to_host(d, v, (size_t)*n * sizeof *v);
    return v;
}

static Onnx__ModelProto *read_model(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)(n > 0 ? n : 1));
    Onnx__ModelProto *m = NULL;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
        m = onnx__model_proto__unpack(NULL, (size_t)n, buf);
    fclose(f);
    free(buf);
    return m;
}

/* TS_EXPORT_QUANT_KEEP=DIR keeps each file as DIR/<pow2|ordinary>_<stage>.onnx with the input
 * (x.npy) and the eager result's integers (<...>.npy), for running them in ONNX Runtime by hand */
static void keep_files(const qnet *m, int stage, ts_tensor *x, ts_tensor *want) {
    const char *keep = getenv("TS_EXPORT_QUANT_KEEP");
    if (!keep || !want) return;
    char to[512];
    snprintf(to, sizeof to, "%s/%s_%d.onnx", keep, m->pow2 ? "pow2" : "ordinary", stage);
    FILE *in = fopen(path, "rb"), *out = fopen(to, "wb");
    char buf[4096];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    if (in) fclose(in);
    if (out) fclose(out);
    snprintf(to, sizeof to, "%s/x_%s.npy", keep, m->pow2 ? "pow2" : "ordinary");
    ts_npy_save(to, x);
    snprintf(to, sizeof to, "%s/%s_%d.npy", keep, m->pow2 ? "pow2" : "ordinary", stage);
    const ts_dtype dt = ts_dtype_of(want);
    ts_npy_save(to, dt == TS_QUINT8 || dt == TS_QINT8 ? ts_int_repr(want) : want);
}

/* Exports m cut after `stage`, loads it back, runs it on x; compares with the eager integers.
 * Returns the largest difference (in quanta; the output's units for the float stage). */
static double round_trip(qnet *m, int stage, ts_tensor *x, int *mismatches) {
    m->stop = stage;
    double worst = -1;
    *mismatches = 0;
    ts_scope_begin();
    ts_tensor *want = ts_forward(&m->base, x);
    CHECK_OK();
    CHECK(ts_onnx_export(&m->base, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    CHECK_OK();
    keep_files(m, stage, x, want);
    ts_module *back = ts_onnx_load(path, (ts_onnx_opts){0});
    CHECK_OK();
    ts_tensor *got = NULL;
    if (back) {
        CHECK(ts_onnx_run(back, 1, &x, 1, &got) == TS_OK);
        CHECK_OK();
    }
    if (got && want) {
        const ts_shape gs = ts_shape_of(got), ws = ts_shape_of(want);
        CHECK(gs.ndim == ws.ndim && !memcmp(gs.dims, ws.dims, sizeof(int64_t) * (size_t)gs.ndim));
        const ts_dtype wd = ts_dtype_of(want);
        const ts_dtype expect = wd == TS_QUINT8 ? TS_U8 : wd == TS_QINT8 ? TS_I8 : wd;
        CHECK_EQ(ts_dtype_of(got), expect);
        int64_t n1, n2;
        double *a = host_values(got, &n1), *b = host_values(want, &n2);
        CHECK_EQ(n1, n2);
        worst = 0;
        for (int64_t i = 0; i < n1 && n1 == n2; i++) {
            const double dd = fabs(a[i] - b[i]);
            *mismatches += dd != 0;
            worst = fmax(worst, dd);
        }
        free(a), free(b);
    }
    if (stage == S_OUT) { /* the file: QDQ and the float ops of the patterns, nothing else */
        Onnx__ModelProto *mp = read_model(path);
        CHECK(mp != NULL);
        static const char *const allowed[] = {
            "QuantizeLinear", "DequantizeLinear", "Conv",   "Gemm",        "Add",
            "Relu",           "MaxPool",          "Concat", "AveragePool", "Reshape"};
        for (size_t i = 0; mp && i < mp->graph->n_node; i++) {
            bool ok = false;
            for (size_t k = 0; k < sizeof allowed / sizeof *allowed; k++)
                ok = ok || !strcmp(mp->graph->node[i]->op_type, allowed[k]);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "unexpected node %s in the file",
                              mp->graph->node[i]->op_type);
            ts_test_record(ok);
        }
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    }
    if (back && stage == S_OUT) { /* the whole model: every pattern fused into integer nodes */
        CHECK_EQ(count_graph_op(back, "QDQConv"), 2);
        CHECK_EQ(count_graph_op(back, "QDQAdd"), 1);
        CHECK_EQ(count_graph_op(back, "QDQGemm"), 2);
        CHECK_EQ(count_graph_op(back, "Conv") + count_graph_op(back, "Gemm") +
                     count_graph_op(back, "Add"),
                 0);
    }
    if (back) ts_module_free(back);
    ts_scope_end();
    return worst;
}

static void test_exact(void) {
    qnet *m = qnet_new(true);
    ts_tensor *x = values(TS_SHAPE(2, 3, 8, 8), 3.0, 11);
    for (int s = 0; s < N_STAGES; s++) {
        int bad;
        const double worst = round_trip(m, s, x, &bad);
        if (worst != 0)
            ts_test_failf(__FILE__, __LINE__,
                          "power-of-two scales, stage %s: %d values differ (largest %g): "
                          "expected bit for bit",
                          stage_name[s], bad, worst);
        ts_test_record(worst == 0);
    }
    ts_release(x);
    qnet_free(m);
}

/* ordinary scales: each integer stage within what the two requantizations allow */
static void test_within_a_quantum(void) {
    qnet *m = qnet_new(false);
    ts_tensor *x = values(TS_SHAPE(2, 3, 8, 8), 3.0, 12);
    /* the quanta one stage may move: its own rounding (1) plus an input that moved by one quantum
     * at a tie, times the largest |w| x_scale / out_scale sum over a window (conv1 reads the
     * quantized input: 27 taps of |w| <= 0.5 at 0.043 / 0.071 ~ 8; later stages read stages that
     * are themselves off only at rare ties) */
    static const double bound[N_STAGES] = {1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 2};
    for (int s = 0; s < N_STAGES; s++) {
        int bad;
        const double worst = round_trip(m, s, x, &bad);
        printf("  ordinary scales, %-26s: %d values differ by up to %g\n", stage_name[s], bad,
               worst);
        CHECK(worst >= 0 && worst <= bound[s]);
    }
    ts_release(x);
    qnet_free(m);
}

/* ------------------------------------------------------------------ refusals */
typedef struct one_op {
    ts_module base;
    int which;
    ts_tensor *w;
} one_op;

static ts_tensor *one_op_forward(ts_module *self, ts_tensor *x) {
    one_op *m = (one_op *)self;
    switch (m->which) {
    case 0: { /* int4 groups */
        ts_tensor *s =
            ts_full(TS_SHAPE(ts_shape_of(x).dims[0], 2), 0.1, (ts_opts){.dtype = TS_F64});
        ts_tensor *z = ts_zeros(TS_SHAPE(ts_shape_of(x).dims[0], 2), (ts_opts){.dtype = TS_I64});
        return ts_dequantize(ts_quantize_per_group(x, s, z, 4, TS_QUINT8));
    }
    case 1: /* qint32 activations */
        return ts_dequantize(ts_quantize_per_tensor(x, 0.1, 0, TS_QINT32));
    case 2: /* the int32 accumulators */
        return ts_quantized_linear_acc(ts_quantize_per_tensor(x, 0.1, 128, TS_QUINT8), m->w, NULL);
    case 4: { /* cat of inputs with the output's parameters: a Concat of the integers */
        ts_tensor *q = ts_quantize_per_tensor(x, 0.1, 128, TS_QUINT8);
        return ts_dequantize(ts_quantized_cat((ts_tensor *[]){q, q}, 2, -1, 0.1, 128));
    }
    case 5: /* quint4x2 per tensor: two integers a byte have no ONNX type at opset 13 */
        return ts_dequantize(ts_quantize_per_tensor(x, 0.1, 0, TS_QUINT4X2));
    case 6: /* int_repr: the integers themselves, as the graph's uint8 output */
        return ts_int_repr(ts_quantize_per_tensor(x, 0.1, 128, TS_QUINT8));
    case 7: { /* a convolution without bias (a C caller's NULL; power-of-two scales: exact) */
        ts_tensor *q =
            ts_quantize_per_tensor(ts_reshape(x, TS_SHAPE(2, 2, 2, 2)), 0.125, 128, TS_QUINT8);
        const float wv[6] = {1.0f, -0.5f, 0.25f, 0.75f, -1.0f, 0.5f};
        ts_tensor *w = ts_quantize_per_tensor(ts_tensor_f32(TS_SHAPE(3, 2, 1, 1), wv, (ts_opts){0}),
                                              0.0625, 0, TS_QINT8);
        const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
        return ts_dequantize(ts_quantized_conv2d(q, w, NULL, one, zero, one, 1, 0.25, 100, false));
    }
    default: { /* a weight computed from the input */
        ts_tensor *q = ts_quantize_per_tensor(x, 0.1, 128, TS_QUINT8);
        ts_tensor *w = ts_quantize_per_tensor(ts_mul_scalar(x, 0.5), 0.1, 0, TS_QINT8);
        return ts_dequantize(ts_quantized_linear(q, w, NULL, 0.2, 0, false));
    }
    }
}

static void test_refusals(void) {
    static const char *const want[] = {"'quantize_per_group'", "qint32", "'quantized_linear_acc'",
                                       "computed from the model's input", "quint4x2"};
    static const int which[] = {0, 1, 2, 3, 5};
    ts_tensor *x = values(TS_SHAPE(2, 8), 1.0, 13);
    for (int k = 0; k < 5; k++) {
        one_op *m = ts_module_alloc(sizeof *m, "OneOp", one_op_forward);
        m->which = which[k];
        m->w = qweight(TS_SHAPE(3, 8), false, true, 14);
        ts_scope_begin();
        CHECK(ts_onnx_export(&m->base, 1, &x, path, (ts_onnx_export_opts){0}) != TS_OK);
        CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, want[k]);
        ts_scope_end();
        ts_release(m->w);
        ts_module_free(&m->base);
    }
    ts_release(x);
}

/* one op exported, re-imported and run: the eager values bit for bit, with n_dq DequantizeLinear
 * nodes and one node `op`. Cases: 4, a cat whose inputs have its parameters (no DequantizeLinear
 * but the last); 6, int_repr (the quantize's integers pass as they are: no DequantizeLinear); 7, a
 * convolution without bias (the importer fuses its QDQ into one QDQConv) */
static void test_exact_one_op(int which, int n_dq, const char *op) {
    ts_tensor *x = values(TS_SHAPE(2, 8), 5.0, 15);
    one_op *m = ts_module_alloc(sizeof *m, "OneOp", one_op_forward);
    m->which = which;
    ts_scope_begin();
    ts_tensor *want = ts_forward(&m->base, x);
    CHECK(ts_onnx_export(&m->base, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    ts_module *back = ts_onnx_load(path, (ts_onnx_opts){0});
    ts_tensor *got = NULL;
    CHECK(back && ts_onnx_run(back, 1, &x, 1, &got) == TS_OK);
    CHECK_OK();
    if (got && want) {
        int64_t n1, n2;
        double *a = host_values(got, &n1), *b = host_values(want, &n2);
        CHECK(n1 == n2 && !memcmp(a, b, (size_t)n1 * sizeof *a));
        free(a), free(b);
    }
    if (back) {
        CHECK_EQ(count_graph_op(back, "DequantizeLinear"), n_dq);
        CHECK_EQ(count_graph_op(back, op), 1);
        ts_module_free(back);
    }
    ts_scope_end();
    ts_module_free(&m->base);
    ts_release(x);
}

/* a dynamic batch: the 4-D linear's reshapes and the flatten follow the batch size */
static void test_dynamic_batch(void) {
    qnet *m = qnet_new(true);
    ts_tensor *x2 = values(TS_SHAPE(2, 3, 8, 8), 3.0, 16),
              *x3 = values(TS_SHAPE(3, 3, 8, 8), 3.0, 17);
    const int stages[2] = {S_FC1, S_OUT};
    for (int k = 0; k < 2; k++) {
        m->stop = stages[k];
        ts_scope_begin();
        CHECK(ts_onnx_export(&m->base, 1, &x2, path,
                             (ts_onnx_export_opts){.dynamic_batch = true}) == TS_OK);
        CHECK_OK();
        ts_module *back = ts_onnx_load(path, (ts_onnx_opts){0});
        ts_tensor *want = ts_forward(&m->base, x3), *got = NULL;
        CHECK(back && ts_onnx_run(back, 1, &x3, 1, &got) == TS_OK);
        CHECK_OK();
        if (got && want) {
            int64_t n1, n2;
            double *a = host_values(got, &n1), *b = host_values(want, &n2);
            CHECK(n1 == n2 && !memcmp(a, b, (size_t)n1 * sizeof *a));
            free(a), free(b);
        }
        if (back) ts_module_free(back);
        ts_scope_end();
    }
    ts_release(x2), ts_release(x3);
    qnet_free(m);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ts_export_quant_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot make a temporary folder");
    snprintf(path, sizeof path, "%s/q.onnx", dir);
    test_exact();
    test_within_a_quantum();
    test_refusals();
    test_exact_one_op(4, 1, "Concat");
    test_exact_one_op(6, 0, "QuantizeLinear");
    test_exact_one_op(7, 1, "QDQConv");
    test_dynamic_batch();
    unlink(path);
    rmdir(dir);
    return ts_test_finish();
}
#endif
