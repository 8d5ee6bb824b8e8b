/* test_onnx_passes.c — the loader's passes on small graphs where other tests left mutants alive
 * (tools/mutate.sh on src/onnx): constant folding of a node reading the graph's first value (value
 * index 0, an integer initializer) and a folding failure with nodes after it, the rewrites chained
 * (the convolution rewrite removes nodes, then the transformer rewrite finds its pattern by the
 * producers tso_graph_drop_dead renumbered), the input-shape message of a declared 0 and of a dim
 * with neither value nor name, the shape operand of rank 2 refused, and a graph of many
 * two-output nodes within the loader's bound on values. Models built with
 * xformer_util.h's builders; every value is a small dyadic rational, so each output is exact in
 * float32 and checked for equality. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "xformer_util.h"

static void int_init(const char *name, int count, const int64_t *v) {
    const int64_t dims = count;
    add_init(cur, data_tensor(name, INT64, 1, &dims, NULL, v));
}

/* ------------------------------------------------------------------ constant folding */
/* The first initializer is value 0 of the graph: Add(a, a) folds at load to [4, 6] (fold.c reads
 * every input index >= 0, 0 included) and Reshape takes it as its target. */
static void test_fold_value_zero(void) {
    begin(17);
    int_init("a", 2, (const int64_t[]){2, 3});
    op("Add", "a a", "s");
    op("Reshape", "x s", "y");
    input("x", 1, (const int64_t[]){24});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (!m) {
        printf("  load: %s\n", ts_test_error_str());
        done();
        return;
    }
    CHECK(nodes_of(m, NULL) == 1 && nodes_of(m, "Reshape") == 1); /* Add folded */
    float xv[24];
    double want[24], tol[24] = {0};
    for (int i = 0; i < 24; i++) xv[i] = (float)i, want[i] = i;
    ts_scope_begin();
    ts_tensor *x = host_tensor(TS_SHAPE(24), xv, ts_cpu());
    ts_tensor *y = run(m, 1, &x);
    CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == 4 && ts_size(y, 1) == 6);
    check_close("Reshape to the folded [4, 6]", y, want, tol, 24);
    ts_scope_end();
    ts_module_free(m);
    done();
}

/* A constant node that fails at load (Reshape of 2 values to [5]) is the model's error, with
 * nodes not yet visited after it (the graph keeps them for the loader to free: ASan's leak check
 * sees a lost one). */
static void test_fold_failure(void) {
    begin(17);
    int_init("a", 2, (const int64_t[]){2, 3});
    int_init("bad", 1, (const int64_t[]){5});
    op("Relu", "x", "r");
    op("Reshape", "a bad", "s");
    op("Reshape", "r s", "y");
    op("Relu", "y", "z");
    input("x", 1, (const int64_t[]){24});
    output("z");
    ts_module *m = load(false);
    CHECK(!m);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Reshape_1");
    ts_module_free(m);
    done();
}

/* ------------------------------------------------------------------ the rewrites chained */
/* x [1, 2, 2, 2] -> Conv (1x1, 3 outputs) -> BatchNormalization -> Relu -> Dropout (its mask
 * absent) -> Flatten -> MatMul [12, 2] -> Add: the convolution rewrite folds the
 * BatchNormalization and fuses the Relu (two nodes dropped, the rest renumbered), then the
 * transformer rewrite must find MatMul + Add by their producers: FusedConv, Dropout, Flatten and
 * tessera.Linear are left. BatchNormalization with epsilon 0,
 * var 4 and scale 2 multiplies by 1 exactly; every product and sum is a small multiple of 1/8,
 * exact in float32 either way, so optimized, plain and the float64 reference agree exactly. */
static void chain_reference(const float *x, const float *w, const float *bias, const float *shift,
                            const float *wm, const float *bm, double *y) {
    double h[12]; /* [3 channels, 2, 2] after Relu, flattened */
    for (int o = 0; o < 3; o++)
        for (int p = 0; p < 4; p++) {
            double s = bias[o];
            for (int i = 0; i < 2; i++) s += (double)w[o * 2 + i] * x[i * 4 + p];
            s = s * 2 / sqrt(4.0) + shift[o]; /* (s - mean 0) * scale / sqrt(var + 0) + B */
            h[o * 4 + p] = s > 0 ? s : 0;
        }
    for (int j = 0; j < 2; j++) {
        double s = bm[j];
        for (int k = 0; k < 12; k++) s += h[k] * wm[k * 2 + j];
        y[j] = s;
    }
}

static void build_chain(const float *w, const float *bias, const float *shift, const float *wm,
                        const float *bm) {
    const float scale[3] = {2, 2, 2}, mean[3] = {0, 0, 0}, var[3] = {4, 4, 4};
    begin(17);
    initializer("W", 4, (const int64_t[]){3, 2, 1, 1}, w);
    initializer("B", 1, (const int64_t[]){3}, bias);
    initializer("bn_s", 1, (const int64_t[]){3}, scale);
    initializer("bn_b", 1, (const int64_t[]){3}, shift);
    initializer("bn_m", 1, (const int64_t[]){3}, mean);
    initializer("bn_v", 1, (const int64_t[]){3}, var);
    initializer("Wm", 2, (const int64_t[]){12, 2}, wm);
    initializer("bm", 1, (const int64_t[]){2}, bm);
    op("Conv", "x W B", "c");
    Onnx__NodeProto *bn = op("BatchNormalization", "c bn_s bn_b bn_m bn_v", "n");
    Onnx__AttributeProto *eps = attr(bn, "epsilon", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    eps->has_f = 1, eps->f = 0;
    op("Relu", "n", "r");
    op("Dropout", "r", "d -"); /* an absent output (value -1): renumbering must skip it */
    op("Flatten", "d", "f");
    op("MatMul", "f Wm", "mm");
    op("Add", "mm bm", "y");
    input("x", 4, (const int64_t[]){1, 2, 2, 2});
    output("y");
}

static void test_rewrites_chained(void) {
    float x[8], w[6], bias[3], shift[3], wm[24], bm[2];
    for (int i = 0; i < 8; i++) x[i] = (float)((i * 5) % 8 - 3) / 2;   /* halves in [-1.5, 2] */
    for (int i = 0; i < 6; i++) w[i] = (float)((i * 3) % 5 - 2) / 2;   /* halves in [-1, 1] */
    for (int i = 0; i < 3; i++) bias[i] = (float)(i - 1) / 4;          /* -1/4, 0, 1/4 */
    for (int i = 0; i < 3; i++) shift[i] = (float)(1 - i) / 8;         /* 1/8, 0, -1/8 */
    for (int i = 0; i < 24; i++) wm[i] = (float)((i * 7) % 9 - 4) / 4; /* quarters in [-1, 1] */
    for (int i = 0; i < 2; i++) bm[i] = (float)(2 * i - 1) / 8;        /* -1/8, 1/8 */
    double want[2], tol[2] = {0, 0};
    chain_reference(x, w, bias, shift, wm, bm, want);
    build_chain(w, bias, shift, wm, bm);
    ts_module *opt = load(true), *plain = load(false);
    CHECK(opt && plain);
    if (opt) {
        CHECK(nodes_of(opt, NULL) == 4);
        CHECK(nodes_of(opt, "FusedConv") == 1 && nodes_of(opt, "Dropout") == 1 &&
              nodes_of(opt, "Flatten") == 1 && nodes_of(opt, "tessera.Linear") == 1);
        if (nodes_of(opt, NULL) != 4)
            for (int k = 0; k < ((tso_model *)opt)->graph->n_nodes; k++)
                printf("  node %d: %s\n", k, ((tso_model *)opt)->graph->nodes[k].op_type);
    }
    for (int pass = 0; pass < 2; pass++) {
        ts_module *m = pass ? plain : opt;
        if (!m) continue;
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(1, 2, 2, 2), x, ts_cpu());
        check_close(pass ? "plain chain" : "optimized chain", run(m, 1, &xt), want, tol, 2);
        ts_scope_end();
    }
    ts_module_free(opt);
    ts_module_free(plain);
    done();
}

/* A Conv whose W is a scalar, then BatchNormalization: the rewrite leaves it (no output channel
 * to fold into) and the Conv refuses it at run as it does unoptimized, with the same message. */
static void test_scalar_weight_left(void) {
    const float one = 1, two = 2, four = 4, zero = 0;
    begin(17);
    const int64_t d1 = 1;
    add_init(cur, data_tensor("W", FLOAT, 0, &d1, &two, NULL));
    initializer("bn_s", 1, &d1, &two);
    initializer("bn_b", 1, &d1, &zero);
    initializer("bn_m", 1, &d1, &zero);
    initializer("bn_v", 1, &d1, &four);
    op("Conv", "x W", "c");
    op("BatchNormalization", "c bn_s bn_b bn_m bn_v", "y");
    input("x", 4, (const int64_t[]){1, 1, 2, 2});
    output("y");
    ts_module *opt = load(true), *plain = load(false);
    CHECK(opt && plain);
    char msg[2][512] = {"", ""};
    ts_status code[2] = {TS_OK, TS_OK};
    for (int pass = 0; pass < 2 && opt && plain; pass++) {
        ts_scope_begin();
        ts_tensor *x = ts_full(TS_SHAPE(1, 1, 2, 2), one, (ts_opts){0}), *y = NULL;
        code[pass] = ts_onnx_run(pass ? plain : opt, 1, &x, 1, &y);
        snprintf(msg[pass], sizeof msg[pass], "%s", ts_error_message());
        ts_error_clear();
        ts_scope_end();
    }
    CHECK(code[0] != TS_OK && code[0] == code[1] && !strcmp(msg[0], msg[1]));
    if (strcmp(msg[0], msg[1])) printf("  optimized: %s\n  plain:     %s\n", msg[0], msg[1]);
    ts_module_free(opt);
    ts_module_free(plain);
    done();
}

/* ------------------------------------------------------------------ messages */
/* x declared [0, ?, 3] (a dim of value 0, one with neither value nor name) fed [1, 2, 3]: the
 * message spells the declared shape */
static void test_input_shape_message(void) {
    begin(17);
    op("Identity", "x", "y");
    input("x", 3, (const int64_t[]){0, 1, 3});
    Onnx__TensorShapeProto__Dimension *d = cur->input[0]->type->tensor_type->shape->dim[1];
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_ones(TS_SHAPE(1, 2, 3), (ts_opts){0}), *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_SHAPE && !y);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "input 'x' must have shape [0, ?, 3], got");
        ts_scope_end();
    }
    ts_module_free(m);
    done();
}

/* Reshape's shape operand is a vector: one of rank 2 is refused by name */
static void test_shape_operand_rank(void) {
    begin(17);
    const int64_t dims[2] = {1, 2}, v[2] = {2, 3};
    add_init(cur, data_tensor("shape", INT64, 2, dims, NULL, v));
    op("Reshape", "x shape", "y");
    input("x", 1, (const int64_t[]){6});
    output("y");
    ts_module *m = load(false);
    if (m) {
        ts_scope_begin();
        ts_tensor *x = ts_ones(TS_SHAPE(6), (ts_opts){0}), *y = NULL;
        CHECK(ts_onnx_run(m, 1, &x, 1, &y) == TS_ERR_SHAPE && !y);
        ts_scope_end();
    }
    CHECK_ERR_HAS(TS_ERR_SHAPE, "must be a scalar or a vector, got");
    ts_module_free(m);
    done();
}

/* The loader bounds a graph's values by their sum (inputs, initializers and every node's
 * outputs): a chain of 24 two-output Dropouts has 1 + 48 values, far below TSO_MAX_VALUES (a
 * product of the output counts would be 2^24). It loads, and runs as the identity. */
static void test_many_two_output_nodes(void) {
    begin(13);
    char ins[16], outs[32];
    for (int k = 0; k < 24; k++) {
        if (k)
            snprintf(ins, sizeof ins, "y%d", k - 1);
        else
            snprintf(ins, sizeof ins, "x");
        if (k < 23)
            snprintf(outs, sizeof outs, "y%d m%d", k, k);
        else
            snprintf(outs, sizeof outs, "y m%d", k);
        op("Dropout", ins, outs);
    }
    input("x", 1, (const int64_t[]){3});
    output("y");
    ts_module *m = load(false);
    CHECK(m);
    if (!m) printf("  load: %s\n", ts_test_error_str());
    ts_scope_begin();
    ts_tensor *x = host_tensor(TS_SHAPE(3), (const float[]){1.5f, -2, 0.25f}, ts_cpu());
    ts_tensor *y = m ? run(m, 1, &x) : NULL;
    check_close("24 Dropouts", y, (const double[]){1.5, -2, 0.25}, (const double[]){0, 0, 0}, 3);
    ts_scope_end();
    ts_module_free(m);
    done();
}

int main(void) {
    test_fold_value_zero();
    test_fold_failure();
    test_rewrites_chained();
    test_scalar_weight_left();
    test_input_shape_message();
    test_shape_operand_rank();
    test_many_two_output_nodes();
    arena_release();
    return ts_test_finish();
}
#endif
