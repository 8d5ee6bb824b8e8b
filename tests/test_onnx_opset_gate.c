/* test_onnx_opset_gate.c — opsets 18 to 21 (src/onnx/opset_gate.c): a node using what a newer
 * opset added and Tessera does not implement is refused naming the node, the op, the opset and the
 * attribute; the newer semantics Tessera implements give hand-computed values; the gate's list
 * holds every change ONNX 1.23 made in opsets 18-21 to an operator Tessera's table has. */
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "onnx_build.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static ts_module *load(const Onnx__ModelProto *m) {
    size_t len;
    const uint8_t *buf = pack(m, &len);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){0});
}

static Onnx__TypeProto *f32(int ndim, const int64_t *dims) {
    return tensor_type(FLOAT, ndim, dims);
}

/* x [2, 3] = 0..5 through one node op (inputs "x" plus initializers), output y */
static Onnx__GraphProto *one(const char *op, const char *ins, const char *outs,
                             Onnx__NodeProto **np) {
    Onnx__GraphProto *g = graph();
    add_input(g, "x", f32(2, (int64_t[]){2, 3}));
    *np = node(g, op, "n1", ins, outs);
    size_t k;
    char **o = names(outs, &k);
    for (size_t i = 0; i < k; i++) add_output(g, o[i], f32(-1, NULL));
    return g;
}

static void add_i64(Onnx__GraphProto *g, const char *name, int count, const int64_t *v) {
    add_init(g, tensor(name, INT64, 1, (int64_t[]){count}, v, sizeof *v * (size_t)count));
}

/* runs m on x = 0..5 [2, 3]; output k as doubles into got (count returned, -1 on error) */
static int run(ts_module *m, int n_out, int k, double *got, int max, ts_shape *s) {
    double v[6] = {0, 1, 2, 3, 4, 5};
    ts_scope_begin(); /* the input, the outputs and the copy are released at its end */
    ts_tensor *x =
        ts_to_dtype(ts_from_data(TS_SHAPE(2, 3), TS_F64, v, (ts_opts){.dtype = TS_F64}), TS_F32);
    ts_tensor *y[4] = {0};
    int64_t count = -1;
    if (ts_onnx_run(m, 1, &x, n_out, y) == TS_OK) {
        *s = ts_shape_of(y[k]);
        count = ts_numel(y[k]);
        ts_tensor *h = count <= max ? ts_to_dtype(y[k], TS_F64) : NULL;
        if (!h || ts_copy_to_host(h, got, (size_t)count * sizeof *got) != TS_OK) count = -1;
    }
    ts_scope_end();
    return (int)count;
}

static void refused(Onnx__GraphProto *g, int opset, const char *frag1, const char *frag2) {
    ts_module *m = load(model(g, opset));
    CHECK(m == NULL);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "'n1'") != NULL && strstr(msg, frag1) != NULL && strstr(msg, frag2) != NULL);
    if (m == NULL) printf("  refused: %s\n", msg);
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    ts_module_free(m);
    arena_free();
}

static void test_refusals(void) {
    Onnx__NodeProto *n;
    Onnx__GraphProto *g = one("Resize", "x,,s", "y", &n);
    add_init(g, tensor("s", FLOAT, 1, (int64_t[]){2}, (float[]){1, 2}, 8));
    attr_int(n, "antialias", 1);
    refused(g, 18, "opset 18", "'antialias'");

    g = one("Resize", "x,,s", "y", &n);
    add_init(g, tensor("s", FLOAT, 1, (int64_t[]){2}, (float[]){1, 2}, 8));
    attr_string(n, "coordinate_transformation_mode", "half_pixel_symmetric");
    refused(g, 19, "Resize", "half_pixel_symmetric");

    g = one("ScatterElements", "x,i,x", "y", &n);
    add_init(g, tensor("i", INT64, 2, (int64_t[]){2, 3}, (int64_t[]){0, 1, 2, 0, 1, 2}, 48));
    attr_string(n, "reduction", "max");
    refused(g, 18, "ScatterElements", "'reduction'");

    g = one("LpPool", "x", "y", &n);
    attr_ints(n, "kernel_shape", 1, (int64_t[]){2});
    attr_int(n, "ceil_mode", 1);
    refused(g, 18, "LpPool", "'ceil_mode'");

    g = one("AveragePool", "x", "y", &n);
    attr_ints(n, "kernel_shape", 1, (int64_t[]){2});
    attr_ints(n, "dilations", 1, (int64_t[]){2});
    refused(g, 19, "AveragePool", "'dilations'");

    /* wrap is a Pad mode from opset 19 only */
    g = one("Pad", "x,p", "y", &n);
    add_i64(g, "p", 4, (int64_t[]){0, 1, 0, 1});
    attr_string(n, "mode", "wrap");
    ts_module *m = load(model(g, 18));
    CHECK(m == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "wrap");
    arena_free();

    g = one("Relu", "x", "y", &n);
    m = load(model(g, 22));
    CHECK(m == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "opsets 1 to 21");
    arena_free();
}

/* the opset-18+ semantics Tessera implements, against hand-computed values of x = 0..5 [2, 3] */
static void test_semantics(void) {
    Onnx__NodeProto *n;
    double got[16];
    ts_shape s;
    /* ReduceMean 18: axes [1] from the input -> [1, 4] (an attribute would be ignored) */
    Onnx__GraphProto *g = one("ReduceMean", "x,a", "y", &n);
    add_i64(g, "a", 1, (int64_t[]){1});
    attr_int(n, "keepdims", 0);
    ts_module *m = load(model(g, 18));
    CHECK(m != NULL);
    int c = m ? run(m, 1, 0, got, 16, &s) : -1;
    CHECK(c == 2 && s.ndim == 1 && got[0] == 1 && got[1] == 4);
    ts_module_free(m);
    arena_free();

    /* ReduceMax 18 over axes [0] from the input, keepdims: [[3, 4, 5]] */
    g = one("ReduceMax", "x,a", "y", &n);
    add_i64(g, "a", 1, (int64_t[]){0});
    m = load(model(g, 18));
    c = m ? run(m, 1, 0, got, 16, &s) : -1;
    CHECK(c == 3 && s.ndim == 2 && got[0] == 3 && got[2] == 5);
    ts_module_free(m);
    arena_free();

    /* Split 18 num_outputs 2 on dim 3: [2, 2] and [2, 1] */
    g = one("Split", "x", "y0,y1", &n);
    attr_int(n, "axis", 1);
    attr_int(n, "num_outputs", 2);
    m = load(model(g, 18));
    c = m ? run(m, 2, 1, got, 16, &s) : -1;
    CHECK(c == 2 && s.dims[1] == 1 && got[0] == 2 && got[1] == 5);
    ts_module_free(m);
    arena_free();

    /* Pad 19 wrap, 2 before and 1 after dim 1: row 0 -> 1 2 0 1 2 0 */
    g = one("Pad", "x,p", "y", &n);
    add_i64(g, "p", 4, (int64_t[]){0, 2, 0, 1});
    attr_string(n, "mode", "wrap");
    m = load(model(g, 19));
    c = m ? run(m, 1, 0, got, 16, &s) : -1;
    double want[6] = {1, 2, 0, 1, 2, 0};
    CHECK(c == 12 && s.dims[1] == 6);
    for (int i = 0; c == 12 && i < 6; i++) CHECK(got[i] == want[i]);
    ts_module_free(m);
    arena_free();

    /* Pad 18 with axes [1]: pads (1, 0) for dim 1 only -> [2, 4], row 0 = 0 0 1 2 */
    g = one("Pad", "x,p,,a", "y", &n);
    add_i64(g, "p", 2, (int64_t[]){1, 0});
    add_i64(g, "a", 1, (int64_t[]){1});
    m = load(model(g, 18));
    c = m ? run(m, 1, 0, got, 16, &s) : -1;
    CHECK(c == 8 && s.dims[0] == 2 && s.dims[1] == 4 && got[0] == 0 && got[1] == 0 && got[3] == 2 &&
          got[5] == 3);
    ts_module_free(m);
    arena_free();
}

/* ONNX 1.23's operators with a version in 18-21 (onnx.defs.get_all_schemas_with_history) */
static const struct {
    const char *op;
    int version;
} onnx_changes[] = {
    {"AveragePool", 19},
    {"Cast", 19},
    {"Cast", 21},
    {"CastLike", 19},
    {"CastLike", 21},
    {"Constant", 19},
    {"Constant", 21},
    {"ConstantOfShape", 20},
    {"ConstantOfShape", 21},
    {"DFT", 20},
    {"DequantizeLinear", 19},
    {"DequantizeLinear", 21},
    {"Equal", 19},
    {"Flatten", 21},
    {"GridSample", 20},
    {"GroupNormalization", 18},
    {"GroupNormalization", 21},
    {"Identity", 19},
    {"Identity", 21},
    {"If", 19},
    {"If", 21},
    {"IsInf", 20},
    {"IsNaN", 20},
    {"Loop", 19},
    {"Loop", 21},
    {"LpPool", 18},
    {"Mish", 18},
    {"OptionalGetElement", 18},
    {"OptionalHasElement", 18},
    {"Pad", 18},
    {"Pad", 19},
    {"Pad", 21},
    {"QLinearMatMul", 21},
    {"QuantizeLinear", 19},
    {"QuantizeLinear", 21},
    {"ReduceL1", 18},
    {"ReduceL2", 18},
    {"ReduceLogSum", 18},
    {"ReduceLogSumExp", 18},
    {"ReduceMax", 18},
    {"ReduceMax", 20},
    {"ReduceMean", 18},
    {"ReduceMin", 18},
    {"ReduceMin", 20},
    {"ReduceProd", 18},
    {"ReduceSumSquare", 18},
    {"Reshape", 19},
    {"Reshape", 21},
    {"Resize", 18},
    {"Resize", 19},
    {"Scan", 19},
    {"Scan", 21},
    {"ScatterElements", 18},
    {"ScatterND", 18},
    {"Shape", 19},
    {"Shape", 21},
    {"Size", 19},
    {"Size", 21},
    {"Split", 18},
    {"Squeeze", 21},
    {"Transpose", 21},
    {"Unsqueeze", 21},
};

static void test_list(void) {
    int missing = 0;
    for (size_t i = 0; i < sizeof onnx_changes / sizeof *onnx_changes; i++) {
        const tso_op_def *d = tso_find_op(onnx_changes[i].op, onnx_changes[i].version, NULL);
        if (!d || d->since >= onnx_changes[i].version) continue; /* no row, or a row of it */
        bool found = false;
        const char *op;
        int v, count = tso_opset_changes(&op, &v, -1);
        for (int k = 0; k < count && !found; k++) {
            tso_opset_changes(&op, &v, k);
            found = !strcmp(op, onnx_changes[i].op) && v == onnx_changes[i].version;
        }
        if (!found) {
            printf("  opset_gate.c lacks %s %d\n", onnx_changes[i].op, onnx_changes[i].version);
            missing++;
        }
    }
    CHECK_EQ(missing, 0);
}

int main(void) {
    test_refusals();
    test_semantics();
    test_list();
    return ts_test_finish();
}
#endif
