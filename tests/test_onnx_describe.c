/* test_onnx_describe.c — what a loaded ONNX model is, on small models packed here with the
 * generated protobuf-c code: ts_onnx_describe's exact text (producer, opsets, inputs and outputs
 * with symbolic and unknown dims, operator kinds and counts in file order, initializers, values
 * and parameters); the module tree its dotted initializer names make (BatchNormalization's running
 * statistics as buffers; a name that is also a child's is refused, one under a tensor's name made
 * flat); the graph constant folding leaves (an integer initializer folded, each value's producer
 * the node that writes it); constants already on the run's device used as they are; the
 * optimizing load; and no heap left behind by repeated loads (glibc's count; LSan under ASan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap_usage.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "onnx_build.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* ModelProtos are built with tests/onnx_support/onnx_build.h (an arena freed per case). */

static ts_module *load(const Onnx__ModelProto *m, bool optimize) {
    size_t len;
    const uint8_t *buf = pack(m, &len);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.optimize = optimize});
}

/* ------------------------------------------------------------------ the described model
 * x [N, 3] -> Gemm (fc) -> Relu -> BatchNormalization (bn) -> Add the Relu -> Relu -> Mul itself
 * -> Sigmoid -> y [N, ?]; z = Identity of the first Relu, declared without a type. */
static Onnx__ModelProto *described(void) {
    static const float w[12] = {1, -2, 3, -1, 2, -3, 0.5f, 1, -1, 2, 0, 1}, b[4] = {1, 0, -1, 2};
    static const float one[4] = {1, 1, 1, 1}, half[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    const int64_t d4[] = {4};
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 2, (int64_t[]){-1, 3}));
    add_init(g, tensor("fc.weight", FLOAT, 2, (int64_t[]){4, 3}, w, sizeof w));
    add_init(g, tensor("fc.bias", FLOAT, 1, d4, b, sizeof b));
    add_init(g, tensor("bn.weight", FLOAT, 1, d4, one, sizeof one));
    add_init(g, tensor("bn.bias", FLOAT, 1, d4, half, sizeof half));
    add_init(g, tensor("bn.running_mean", FLOAT, 1, d4, half, sizeof half));
    add_init(g, tensor("bn.running_var", FLOAT, 1, d4, one, sizeof one));
    attr_int(node(g, "Gemm", "fc", "x,fc.weight,fc.bias", "a"), "transB", 1);
    node(g, "Relu", "r1", "a", "r");
    node(g, "BatchNormalization", "bn", "r,bn.weight,bn.bias,bn.running_mean,bn.running_var", "b");
    node(g, "Add", "add", "b,r", "s");
    node(g, "Relu", "r2", "s", "s2");
    node(g, "Mul", "sq", "s2,s2", "m");
    node(g, "Sigmoid", "sig", "m", "y");
    node(g, "Identity", "id", "r", "z");
    add_output(g, "y", tensor_type(FLOAT, 2, (int64_t[]){-1, 4}));
    /* the second dim declared with neither a value nor a name */
    g->output[0]->type->tensor_type->shape->dim[1]->value_case =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
    add_output(g, "z", NULL);
    Onnx__ModelProto *m = model(g, 13);
    m->producer_name = str("test_onnx_describe");
    m->producer_version = str("0.1");
    Onnx__OperatorSetIdProto *o = get(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = str("ai.onnx.ml");
    o->has_version = 1;
    o->version = 3;
    Onnx__OperatorSetIdProto **two = get(2 * sizeof *two);
    two[0] = m->opset_import[0];
    two[1] = o;
    m->opset_import = two;
    m->n_opset_import = 2;
    return m;
}

static const char described_text[] =
    "producer: test_onnx_describe 0.1\n"
    "IR version: 8\n"
    "opsets: ai.onnx 13 ai.onnx.ml 3\n"
    "inputs (1):\n"
    "  x: float32 [N, 3]\n"
    "outputs (2):\n"
    "  y: float32 [N, ?]\n"
    "  z: ? [rank unknown]\n"
    "operators (7 kinds, 8 nodes):\n"
    "  Gemm x1, Relu x2, BatchNormalization x1, Add x1, Mul x1, Sigmoid x1\n"
    "  Identity x1\n"
    /* 12 + 5 * 4 values; the running statistics are buffers */
    "initializers: 6, 32 values (24 in parameters)\n";

static bool has_names(ts_tensor_list l, const char *const *want, int n) {
    bool ok = l.n == n;
    for (int i = 0; ok && i < n; i++) ok = !strcmp(l.names[i], want[i]);
    return ok;
}

static void test_describe(void) {
    ts_module *m = load(described(), false);
    CHECK(m != NULL);
    char *text = m ? ts_onnx_describe(m) : NULL;
    CHECK_STREQ(text, described_text);
    if (text) printf("%s", text);
    free(text);
    /* the dotted names as a module tree, the running statistics as buffers */
    static const char *const params[] = {"fc.weight", "fc.bias", "bn.weight", "bn.bias"};
    static const char *const buffers[] = {"bn.running_mean", "bn.running_var"};
    ts_tensor_list p = ts_module_named_parameters(m), b = ts_module_named_buffers(m);
    CHECK(has_names(p, params, 4));
    CHECK(has_names(b, buffers, 2));
    ts_tensor_list_free(&p);
    ts_tensor_list_free(&b);
    CHECK_OK();
    ts_module_free(m);
    arena_free();
}

/* ------------------------------------------------------------------ initializer names
 * x -> Relu -> y with float initializers of the given names (unused, yet each the module's). */
static Onnx__ModelProto *named(const char *const *inits, int n) {
    static const float one = 1;
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 1, (int64_t[]){1}));
    for (int i = 0; i < n; i++) add_init(g, tensor(inits[i], FLOAT, 1, (int64_t[]){1}, &one, 4));
    node(g, "Relu", "relu", "x", "y");
    add_output(g, "y", NULL);
    return model(g, 13);
}

static void test_names(void) {
    /* "b" is already the second child (of "b.w"): the same name twice in the state dict */
    ts_module *m = load(named((const char *[]){"a.w", "b.w", "b"}, 3), false);
    CHECK(!m);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "initializer 'b' clashes with another name");
    ts_module_free(m);
    m = load(named((const char *[]){"a.w", "a"}, 2), false);
    CHECK(!m);
    CHECK_ERR_HAS(TS_ERR_FORMAT, "initializer 'a' clashes with another name");
    ts_module_free(m);
    /* "p" is a tensor: "p.q" cannot be its child's, and is made flat */
    m = load(named((const char *[]){"p", "p.q", "c.d.e"}, 3), false);
    CHECK(m && ts_module_get(m, "p") && ts_module_get(m, "p_q") && ts_module_get(m, "c.d.e"));
    CHECK_OK();
    ts_module_free(m);
    arena_free();
}

/* ------------------------------------------------------------------ folding and constants
 * y = Reshape(x [2, 3], Mul(Constant [1, -1], one)) with the int64 initializer "one" first (the
 * graph's value 0): the shape chain is folded at load, the Reshape reads a constant. */
static Onnx__ModelProto *folded(void) {
    Onnx__GraphProto *g = graph();
    add_init(g, tensor("one", INT64, 1, (int64_t[]){1}, (const int64_t[]){1}, 8));
    add_input(g, "x", tensor_type(FLOAT, 2, (int64_t[]){2, 3}));
    Onnx__NodeProto *k = node(g, "Constant", "shape0", "", "shape0");
    attr(k, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(NULL, INT64, 1, (int64_t[]){2}, (const int64_t[]){1, -1}, 16);
    node(g, "Mul", "shape1", "shape0,one", "shape1");
    node(g, "Reshape", "flat", "x,shape1", "y");
    add_output(g, "y", NULL);
    return model(g, 13);
}

/* Each value's producer is the node that writes it; values no node writes have none. */
static bool producers_right(const tso_graph *g) {
    for (int v = 0; v < g->n_values; v++) {
        int p = g->values[v].producer;
        if (g->values[v].kind != TSO_V_NODE && p != -1) return false;
        if (p < -1 || p >= g->n_nodes) return false;
    }
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_out; i++) {
            int v = g->nodes[k].out[i];
            if (v >= 0 && g->values[v].producer != k) return false;
        }
    return true;
}

/* Runs the folded model on dev: y is x flattened to [1, 6]. */
static bool flattens(ts_module *m, ts_device dev) {
    static const float xv[6] = {1, 2, 3, 4, 5, 6};
    ts_scope_begin();
    ts_tensor *x = ts_from_data(TS_SHAPE(2, 3), TS_F32, xv, (ts_opts){.device = dev}), *y = NULL;
    float got[6] = {0};
    bool ok = ts_onnx_run(m, 1, &x, 1, &y) == TS_OK && ts_ndim(y) == 2 && ts_size(y, 0) == 1 &&
              ts_size(y, 1) == 6 && ts_copy_to_host(ts_to(y, ts_cpu()), got, sizeof got) == TS_OK &&
              !memcmp(got, xv, sizeof xv);
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void test_folding(void) {
    ts_module *m = load(folded(), false);
    CHECK(m != NULL);
    if (!m) {
        ts_error_clear();
        arena_free();
        return;
    }
    const tso_graph *g = ((tso_model *)m)->graph;
    CHECK_EQ(g->n_nodes, 1);
    CHECK(g->n_nodes >= 1 && !strcmp(g->nodes[0].op_type, "Reshape"));
    CHECK(producers_right(g));
    /* a constant on the device a run is on is used as it is; for another one it is copied there
     * (and the copy kept for the next runs) */
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++) {
        CHECK(flattens(m, devs[d]));
        bool cpu = devs[d].type == TS_CPU;
        for (int v = 0; v < g->n_values; v++) {
            const tso_value *val = &g->values[v];
            if (val->kind != TSO_V_CONST) continue;
            CHECK(cpu ? !val->dev_copy
                      : val->dev_copy && ts_device_of(val->dev_copy).type == devs[d].type);
        }
    }
    ts_module_free(m);
    /* the optimizing load gives the same model */
    m = load(folded(), true);
    CHECK(m && flattens(m, ts_cpu()));
    CHECK_OK();
    ts_module_free(m);
    arena_free();
}

/* ------------------------------------------------------------------ no heap left behind */

static void load_describe_run_free(const uint8_t *buf, size_t len) {
    ts_module *m = ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){0});
    free(m ? ts_onnx_describe(m) : NULL);
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), *y[2] = {0};
    if (m) ts_onnx_run(m, 1, &x, 2, y);
    ts_scope_end();
    ts_module_free(m);
}

/* A leak of even one small allocation per load shows as ROUNDS times its size; what a warmed-up
 * process keeps (caches filled by the first rounds) does not grow. The warm-up is long: the
 * per-thread struct caches and malloc's own fill over a few hundred loads (6048 bytes after 256
 * loads and the same after 1024, session 31), while a leak grows in every window. */
static void test_no_heap_growth(void) {
    enum { WARM = 512, ROUNDS = 256, SLACK_PER_ROUND = 16 };
    size_t len;
    const uint8_t *packed = pack(described(), &len);
    uint8_t *buf = malloc(len);
    memcpy(buf, packed, len);
    arena_free();
    for (int i = 0; i < WARM; i++) load_describe_run_free(buf, len);
    CHECK_OK();
    const int64_t before = ts_heap_in_use();
    for (int i = 0; i < ROUNDS; i++) load_describe_run_free(buf, len);
    const int64_t after = ts_heap_in_use();
    CHECK_OK();
    free(buf);
    if (before < 0) {
        printf("heap growth: not measured here (glibc's mallinfo2 missing, or LSan's job)\n");
        return;
    }
    printf("heap growth over %d loads: %lld bytes\n", ROUNDS, (long long)(after - before));
    CHECK(after - before <= ROUNDS * SLACK_PER_ROUND);
}

int main(void) {
    test_describe();
    test_names();
    test_folding();
    test_no_heap_growth();
    arena_release();
    return ts_test_finish();
}
#endif
