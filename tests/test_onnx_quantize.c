/* test_onnx_quantize.c — ts_onnx_quantize (src/onnx/quantize_graph.c) against ONNX Runtime's own
 * quantizer on small float models (tests/data/onnx_quantize, made by gen_onnx_quantize_ref.py):
 * static (QDQ, MinMax on the same calibration batches; uint8 and int8 activations) and dynamic
 * files whose every initializer ORT writes (scales, zero points, int8 weights, int32 biases) is
 * equal bit for bit and whose operators are ORT's; Tessera's importer runs them in integers (the
 * nodes fused into QDQConv / QDQGemm / QDQAdd / QDQMatMul, MatMulInteger) to ORT's outputs
 * exactly; a one-Gemm model's outputs lie within the quantization error bound of the float64
 * result computed from the file's scales; and the refusals. */
#define _POSIX_C_SOURCE 200809L
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

bool tso_read_file(const char *op, const char *path, uint8_t **data, size_t *size);

/* CHECK with the pending error printed */
#define CHECK_PASS(cond)                                                                           \
    do {                                                                                           \
        bool ok_ = (cond);                                                                         \
        if (!ok_) fprintf(stderr, "  error: %s\n", ts_error_message());                            \
        CHECK(ok_);                                                                                \
    } while (0)

static const char *data(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", TS_QUANTIZE_DATA, name);
    return buf[k];
}

static char tmp_dir[256];
static const char *tmp(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

static Onnx__ModelProto *unpack(const char *path) {
    uint8_t *d;
    size_t n;
    if (!tso_read_file("test", path, &d, &n)) return NULL;
    Onnx__ModelProto *m = onnx__model_proto__unpack(&tso_pb_allocator, n, d);
    free(d);
    return m;
}

static const Onnx__TensorProto *init_named(const Onnx__ModelProto *m, const char *name) {
    for (size_t i = 0; i < m->graph->n_initializer; i++)
        if (!strcmp(m->graph->initializer[i]->name, name)) return m->graph->initializer[i];
    return NULL;
}

static int count_op(const Onnx__ModelProto *m, const char *op) {
    int k = 0;
    for (size_t i = 0; i < m->graph->n_node; i++) k += !strcmp(m->graph->node[i]->op_type, op);
    return k;
}

/* every initializer of ORT's file is in ours, same dtype, shape and bytes; the same operators */
static void check_same_as_ort(const char *mine, const char *ort) {
    Onnx__ModelProto *a = unpack(mine), *b = unpack(ort);
    CHECK(a && b);
    if (!a || !b) goto done;
    static const char *const ops[] = {"QuantizeLinear",
                                      "DequantizeLinear",
                                      "DynamicQuantizeLinear",
                                      "MatMulInteger",
                                      "Conv",
                                      "Gemm",
                                      "MatMul",
                                      "Add",
                                      "Mul",
                                      "Cast",
                                      "Relu",
                                      "Flatten"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (count_op(a, ops[i]) != count_op(b, ops[i])) {
            ts_test_failf(__FILE__, __LINE__, "%s: %d %s nodes, ORT's %s has %d", mine,
                          count_op(a, ops[i]), ops[i], ort, count_op(b, ops[i]));
            ts_test_record(false);
        }
    CHECK(a->graph->n_node == b->graph->n_node);
    int compared = 0, n_close = 0;
    for (size_t i = 0; i < b->graph->n_initializer; i++) {
        const Onnx__TensorProto *tb = b->graph->initializer[i], *ta = init_named(a, tb->name);
        if (!ta) {
            ts_test_failf(__FILE__, __LINE__, "%s lacks ORT's initializer '%s'", mine, tb->name);
            ts_test_record(false);
            continue;
        }
        ts_scope_begin();
        ts_tensor *x = tso_tensor_from_proto(ta, NULL, ts_cpu(), ta->name),
                  *y = tso_tensor_from_proto(tb, NULL, ts_cpu(), tb->name);
        bool same = x && y && ts_dtype_of(x) == ts_dtype_of(y) && ts_ndim(x) == ts_ndim(y) &&
                    ts_numel(x) == ts_numel(y);
        for (int d = 0; same && d < ts_ndim(x); d++) same = ts_size(x, d) == ts_size(y, d);
        if (same) {
            size_t nb = (size_t)ts_numel(x) * ts_dtype_size(ts_dtype_of(x));
            char *p = malloc(nb + 1), *q = malloc(nb + 1);
            same = p && q && !ts_copy_to_host(x, p, nb) && !ts_copy_to_host(y, q, nb);
            if (same && memcmp(p, q, nb)) {
                /* An activation's range comes from a float run, Tessera's here and ORT's there,
                 * whose sums round differently: its scale may differ by an ulp or two, and so
                 * the bias scales and int32 biases that follow from it (by one). The weights,
                 * their scales and zero points, and the graph input's parameters are exact. */
                size_t len = strlen(tb->name);
                char base[256];
                snprintf(base, sizeof base, "%.*s_quantized", (int)(len > 6 ? len - 6 : 0),
                         tb->name);
                bool exact = !strcmp(tb->name, "x_scale") || !strstr(tb->name, "_scale") ||
                             (init_named(b, base) && !strstr(tb->name, "_quantized_scale"));
                bool is_bias = strstr(tb->name, "_quantized") && ts_dtype_of(x) == TS_I32;
                same = !exact || is_bias;
                for (int64_t k = 0; same && k < ts_numel(x); k++) {
                    if (ts_dtype_of(x) == TS_F32) {
                        float u = ((float *)p)[k], v = ((float *)q)[k];
                        same = fabsf(u - v) <= 3e-7f * fabsf(v);
                    } else if (ts_dtype_of(x) == TS_I32) {
                        same = abs(((int32_t *)p)[k] - ((int32_t *)q)[k]) <= 1;
                    } else {
                        same = false;
                    }
                }
                n_close += same;
            }
            free(p), free(q);
        }
        if (!same) {
            ts_test_failf(__FILE__, __LINE__, "%s: initializer '%s' differs from ORT's", mine,
                          tb->name);
            ts_test_record(false);
        }
        compared++;
        ts_release(x), ts_release(y);
        ts_scope_end();
    }
    CHECK(compared >= 3);
    if (n_close)
        printf("  %s: %d of %d initializers within an ulp or two of ORT's\n", mine, n_close,
               compared);
done:
    if (a) onnx__model_proto__free_unpacked(a, &tso_pb_allocator);
    if (b) onnx__model_proto__free_unpacked(b, &tso_pb_allocator);
}

/* the model's output on input (a new reference) */
static ts_tensor *run1(const char *path, ts_tensor *x, ts_module **keep) {
    ts_module *m = ts_onnx_load(path, (ts_onnx_opts){0});
    CHECK_PASS(m != NULL);
    if (!m) return NULL;
    ts_tensor *y = NULL;
    ts_scope_begin();
    CHECK_PASS(ts_onnx_run(m, 1, &x, 1, &y) == TS_OK);
    ts_retain(y);
    ts_scope_end();
    if (keep)
        *keep = m;
    else
        ts_module_free(m);
    return y;
}

static int count_graph_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

/* got equals ORT's output want_npy within tol (0: bit for bit) */
static void check_equal(ts_tensor *got, const char *want_npy, const char *what, double tol) {
    ts_tensor *w = ts_npy_load(data(want_npy), ts_cpu());
    CHECK(got && w && ts_numel(got) == ts_numel(w));
    if (got && w && ts_numel(got) == ts_numel(w)) {
        int64_t n = ts_numel(w), bad = 0;
        float *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
        ts_copy_to_host(got, a, sizeof *a * (size_t)n);
        ts_copy_to_host(w, b, sizeof *b * (size_t)n);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            bad += fabs((double)a[i] - b[i]) > tol;
            worst = fmax(worst, fabs((double)a[i] - b[i]));
        }
        if (tol > 0)
            printf("  %s: largest difference from ORT's output %.3g (allowed %.3g)\n", what, worst,
                   tol);
        if (bad) {
            ts_test_failf(__FILE__, __LINE__,
                          "%s: %lld of %lld outputs differ from ORT's by more than %g", what,
                          (long long)bad, (long long)n, tol);
            ts_test_record(false);
        } else {
            ts_test_record(true);
        }
        free(a), free(b);
    }
    ts_release(w);
}

static ts_tensor *calib[3];
static void load_calib(const char *name) {
    char f[64];
    for (int k = 0; k < 3; k++) {
        ts_release(calib[k]);
        snprintf(f, sizeof f, "%s_calib_%d.npy", name, k);
        calib[k] = ts_npy_load(data(f), ts_cpu());
        CHECK_PASS(calib[k] != NULL);
    }
}

/* static and dynamic against ORT, and Tessera's integer run of ours equal to ORT's run of ORT's */
static double init_scalar(const Onnx__ModelProto *m, const char *name, int64_t i);
static double file_scalar(const char *path, const char *name) {
    Onnx__ModelProto *m = unpack(path);
    double v = m ? init_scalar(m, name, 0) : NAN;
    if (m) onnx__model_proto__free_unpacked(m, &tso_pb_allocator);
    return v;
}

/* dyn_tol: 0 when the dynamic Gemm / MatMul read the graph input (then Tessera's integer run
 * equals ORT's bit for bit); else float layers ahead of them (Tessera's kernels, not ORT's) round
 * differently, which can move a DynamicQuantizeLinear input by one step */
static void test_against_ort(const char *name, bool int8_act, const char *const *fused, int n_fused,
                             int n_nodes, double dyn_tol) {
    char f[128], g[128];
    load_calib(name);
    snprintf(f, sizeof f, "%s.onnx", name);
    ts_onnx_quantize_report rep;
    ts_onnx_quantize_opts so = {.n_calib = 3, .calib = calib, .int8_activations = int8_act};
    CHECK_PASS(ts_onnx_quantize(data(f), tmp("s.onnx"), so, &rep) == TS_OK);
    CHECK(rep.nodes_quantized == n_nodes && rep.calib_batches == 3 && rep.bytes_after > 0);
    snprintf(g, sizeof g, "%s_static_ort.onnx", name);
    check_same_as_ort(tmp("s.onnx"), data(g));
    snprintf(g, sizeof g, "%s_input.npy", name);
    ts_tensor *x = ts_npy_load(data(g), ts_cpu());
    ts_module *m = NULL;
    ts_tensor *y = run1(tmp("s.onnx"), x, &m);
    snprintf(g, sizeof g, "%s_static_out.npy", name);
    /* the scales of activations made by float sums may differ from ORT's by an ulp (above): the
     * integers then by one step at a near-tie, at most a quantum of y per layer */
    check_equal(y, g, name, n_nodes * file_scalar(tmp("s.onnx"), "y_scale") * 1.0001);
    ts_release(y);
    if (m) { /* every quantized node runs as one integer node; no float Conv / Gemm / ... left */
        for (int i = 0; i < n_fused; i++) CHECK(count_graph_op(m, fused[i]) >= 1);
        CHECK(count_graph_op(m, "Conv") + count_graph_op(m, "Gemm") + count_graph_op(m, "MatMul") +
                  count_graph_op(m, "Add") ==
              0);
        ts_module_free(m);
    }
    /* dynamic */
    CHECK_PASS(ts_onnx_quantize(data(f), tmp("d.onnx"),
                                (ts_onnx_quantize_opts){.mode = TS_ONNX_QUANT_DYNAMIC},
                                &rep) == TS_OK);
    snprintf(g, sizeof g, "%s_dynamic_ort.onnx", name);
    check_same_as_ort(tmp("d.onnx"), data(g));
    y = run1(tmp("d.onnx"), x, &m);
    snprintf(g, sizeof g, "%s_dynamic_out.npy", name);
    check_equal(y, g, name, dyn_tol);
    if (m) {
        /* each MatMulInteger -> Cast -> Mul [-> Add] one node (rewrite_matmul_integer.c), or
         * one output of its input's DynamicQuantizeLinear fused with its readers */
        const tso_graph *mg = ((tso_model *)m)->graph;
        int products = count_graph_op(m, "tessera.MatMulIntegerToFloat");
        for (int i = 0; i < mg->n_nodes; i++)
            if (!strcmp(mg->nodes[i].op_type, "tessera.DynamicQuantizeMatMulToFloat"))
                products += mg->nodes[i].n_out;
        CHECK(products == rep.nodes_quantized);
        CHECK(count_graph_op(m, "MatMulInteger") == 0);
        CHECK(count_graph_op(m, "Gemm") + count_graph_op(m, "MatMul") == 0);
        ts_module_free(m);
    }
    ts_release(y);
    ts_release(x);
}

static void host_floats(ts_tensor *t, double *out, int64_t n) {
    float *v = malloc(sizeof *v * (size_t)n);
    CHECK_PASS(ts_copy_to_host(t, v, sizeof *v * (size_t)n) == TS_OK);
    for (int64_t i = 0; i < n; i++) out[i] = v[i];
    free(v);
}

static double init_scalar(const Onnx__ModelProto *m, const char *name, int64_t i) {
    const Onnx__TensorProto *t = init_named(m, name);
    CHECK(t != NULL);
    if (!t) return NAN;
    ts_tensor *x = tso_tensor_from_proto(t, NULL, ts_cpu(), name);
    double v[64];
    host_floats(x, v, ts_numel(x));
    ts_release(x);
    return v[i];
}

/* y = x W^T + b, one Gemm [4, 6] x [3, 6]^T: |y_q - y| <= sum_k (|w| xs/2 + |x| ws/2 + xs ws/4)
 * + bs/2 (+ ys/2 for static's output rounding), from the file's scales, the reference in float64.
 * Calibrated on the input itself: nothing is clipped. */
static void test_error_bound(bool dynamic) {
    Onnx__ModelProto *fm = unpack(data("gemm1.onnx"));
    ts_tensor *x = ts_npy_load(data("gemm1_calib_0.npy"), ts_cpu());
    CHECK(fm && x);
    if (!fm || !x) return;
    ts_tensor *cal[1] = {x};
    ts_onnx_quantize_opts o = {
        .mode = dynamic ? TS_ONNX_QUANT_DYNAMIC : TS_ONNX_QUANT_STATIC, .n_calib = 1, .calib = cal};
    CHECK_PASS(ts_onnx_quantize(data("gemm1.onnx"), tmp("b.onnx"), o, NULL) == TS_OK);
    Onnx__ModelProto *qm = unpack(tmp("b.onnx"));
    ts_tensor *y = run1(tmp("b.onnx"), x, NULL);
    double xv[24], w[18], b[3], yq[12];
    host_floats(x, xv, 24);
    ts_tensor *wt = tso_tensor_from_proto(init_named(fm, "w"), NULL, ts_cpu(), "w"),
              *bt = tso_tensor_from_proto(init_named(fm, "b"), NULL, ts_cpu(), "b");
    host_floats(wt, w, 18), host_floats(bt, b, 3);
    host_floats(y, yq, 12);
    double xs, lo = 0, hi = 0;
    for (int i = 0; i < 24; i++) lo = fmin(lo, xv[i]), hi = fmax(hi, xv[i]);
    xs = dynamic ? (hi - lo) / 255 : init_scalar(qm, "x_scale", 0);
    double worst = 0, ymax = 0;
    for (int r = 0; r < 4; r++)
        for (int n = 0; n < 3; n++) {
            double ws =
                dynamic ? init_scalar(qm, "w_Transposed_scale", 0) : init_scalar(qm, "w_scale", n);
            double ref = b[n], bound = dynamic ? 0 : init_scalar(qm, "b_quantized_scale", n) / 2;
            for (int k = 0; k < 6; k++) {
                ref += xv[r * 6 + k] * w[n * 6 + k];
                bound += fabs(w[n * 6 + k]) * xs / 2 + fabs(xv[r * 6 + k]) * ws / 2 + xs * ws / 4;
            }
            if (!dynamic) bound += init_scalar(qm, "y_scale", 0) / 2;
            bound = bound * (1 + 1e-6) + 1e-6 * fabs(ref); /* float32 steps along the way */
            double err = fabs(yq[r * 3 + n] - ref);
            worst = fmax(worst, err / bound), ymax = fmax(ymax, fabs(ref));
            if (err > bound) {
                ts_test_failf(__FILE__, __LINE__,
                              "%s gemm1 y[%d][%d] = %.9g, float64 %.9g: error %.3g past the bound "
                              "%.3g",
                              dynamic ? "dynamic" : "static", r, n, yq[r * 3 + n], ref, err, bound);
                ts_test_record(false);
            }
        }
    CHECK(worst > 0); /* quantized for real: not the float model */
    ts_release(wt), ts_release(bt), ts_release(y), ts_release(x);
    onnx__model_proto__free_unpacked(fm, &tso_pb_allocator);
    if (qm) onnx__model_proto__free_unpacked(qm, &tso_pb_allocator);
}

/* one weight and bias read by two Gemms: the weight quantized once, the bias once per input scale
 * (names suffixed by the node), both Gemms fused; the output near the float model's */
static void test_shared_weight(void) {
    ts_tensor *x = ts_npy_load(data("shared_calib.npy"), ts_cpu());
    ts_tensor *cal[1] = {x};
    CHECK_PASS(ts_onnx_quantize(data("shared.onnx"), tmp("s.onnx"),
                                (ts_onnx_quantize_opts){.n_calib = 1, .calib = cal},
                                NULL) == TS_OK);
    Onnx__ModelProto *m = unpack(tmp("s.onnx"));
    CHECK(m && init_named(m, "w_quantized") && init_named(m, "b_quantized") &&
          init_named(m, "b_1_quantized") && !init_named(m, "w_1_quantized"));
    if (m) onnx__model_proto__free_unpacked(m, &tso_pb_allocator);
    ts_module *qm = NULL;
    ts_tensor *yq = run1(tmp("s.onnx"), x, &qm), *yf = run1(data("shared.onnx"), x, NULL);
    if (qm) {
        CHECK(count_graph_op(qm, "QDQGemm") == 2);
        ts_module_free(qm);
    }
    double a[24], b[24], worst = 0, big = 0;
    host_floats(yq, a, 24), host_floats(yf, b, 24);
    for (int i = 0; i < 24; i++)
        worst = fmax(worst, fabs(a[i] - b[i])), big = fmax(big, fabs(b[i]));
    CHECK(worst < 0.05 * big); /* int8 through two layers: a few percent of the range at most */
    ts_release(yq), ts_release(yf), ts_release(x);
}

static int calls;
static int failing_calib(void *user, int n, ts_tensor **in) {
    (void)user, (void)n, (void)in;
    return calls++ ? -1 : (in[0] = ts_retain(calib[0]), 1);
}

static void refused(const char *in, ts_onnx_quantize_opts o, ts_status code, const char *says) {
    unlink(tmp("e.onnx"));
    ts_status st = ts_onnx_quantize(in, tmp("e.onnx"), o, NULL);
    if (st != code || !strstr(ts_error_message(), says)) {
        ts_test_failf(__FILE__, __LINE__, "%s: got %d '%s', want %d with '%s'", in, (int)st,
                      ts_error_message(), (int)code, says);
        ts_test_record(false);
    } else {
        ts_test_record(true);
    }
    CHECK(access(tmp("e.onnx"), F_OK) != 0); /* nothing written */
    ts_error_clear();
}

static void test_errors(void) {
    load_calib("gemm1");
    ts_onnx_quantize_opts st = {.n_calib = 3, .calib = calib};
    ts_onnx_quantize_opts dyn = {.mode = TS_ONNX_QUANT_DYNAMIC};
    refused(data("relu.onnx"), st, TS_ERR_ARG, "nothing to quantize");
    refused(data("relu.onnx"), dyn, TS_ERR_ARG, "nothing to quantize");
    refused(data("gemm1.onnx"), (ts_onnx_quantize_opts){0}, TS_ERR_ARG, "needs calibration data");
    refused(data("gemm1.onnx"), (ts_onnx_quantize_opts){.mode = TS_ONNX_QUANT_INT4},
            TS_ERR_UNSUPPORTED, "int4");
    refused(data("gemm1.onnx"), (ts_onnx_quantize_opts){.mode = (ts_onnx_quant_mode)7}, TS_ERR_ARG,
            "mode 7");
    refused(data("gemm1_opset11.onnx"), dyn, TS_ERR_UNSUPPORTED, "opset 11");
    refused(data("convnet_static_ort.onnx"), dyn, TS_ERR_ARG, "already quantized");
    refused(data("no_such.onnx"), dyn, TS_ERR_IO, "no_such.onnx");
    refused(data("gemm1_input.npy"), dyn, TS_ERR_FORMAT, "not a valid ONNX model");
    ts_tensor *wrong = ts_zeros(TS_SHAPE(4, 5), (ts_opts){0});
    refused(data("gemm1.onnx"), (ts_onnx_quantize_opts){.n_calib = 1, .calib = &wrong},
            TS_ERR_SHAPE, "");
    ts_release(wrong);
    calls = 0;
    refused(data("gemm1.onnx"), (ts_onnx_quantize_opts){.calib_fn = failing_calib}, TS_ERR_ARG,
            "calibration callback failed at batch 1");
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/ts_quantize_XXXXXX");
    if (!mkdtemp(tmp_dir)) return ts_test_skip("cannot make a temporary folder");
    static const char *const conv_fused[] = {"QDQConv", "QDQAdd", "QDQGemm"};
    static const char *const mlp_fused[] = {"QDQMatMul", "QDQGemm"};
    static const char *const gemm_fused[] = {"QDQGemm"};
    test_against_ort("convnet", false, conv_fused, 3, 4, 0.05);
    test_against_ort("mlp", true, mlp_fused, 2, 2, 0);
    test_against_ort("gemm1", false, gemm_fused, 1, 1, 0);
    test_against_ort("ties", false, gemm_fused, 1, 1, 0); /* weights at rounding ties */
    test_error_bound(false);
    test_error_bound(true);
    test_shared_weight();
    test_errors();
    for (int k = 0; k < 3; k++) ts_release(calib[k]);
    const char *files[] = {"s.onnx", "d.onnx", "b.onnx", "e.onnx"};
    for (size_t i = 0; i < 4; i++) unlink(tmp(files[i]));
    rmdir(tmp_dir);
    return ts_test_finish();
}
#endif
