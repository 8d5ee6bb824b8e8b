/* test_onnx_matmul_integer_fuse.c — the importer's MatMulInteger -> Cast -> Mul [-> Add] rewrite
 * (src/onnx/rewrite_matmul_integer.c) on a small float model (a Gemm with a bias, a MatMul + Add
 * (its bias through an Identity node, as torch.onnx writes parameters) and a bias-less MatMul
 * sharing its input) quantized by ts_onnx_quantize's dynamic mode, which
 * writes ONNX Runtime's quantize_dynamic graph.
 *
 * Checked: the three patterns become tessera.MatMulIntegerToFloat nodes (no MatMulInteger, Cast,
 * Mul or Add left) and the outputs equal, bit for bit, the same file loaded with the rewrite off
 * (TS_ONNX_FUSE_QMATMUL=0); with an intermediate made a graph output the pattern is left alone
 * (the int32 sums, the cast) or fused without the Add (the product before the bias), and a shared
 * scale product stays for its other reader; with gradients to record (the scales and biases are
 * parameters) the fused node runs the replaced nodes (its outputs then require grad), under
 * no_grad the fused op; an allocation-failure sweep over loading and running the model.
 * Then the second rewrite (by default; TS_ONNX_FUSE_QMATMUL=nodq leaves it out): each
 * DynamicQuantizeLinear whose outputs only fused products read becomes one
 * tessera.DynamicQuantizeMatMulToFloat node with them (h's with two), the same bits; a
 * quantization with another reader (a graph output, a product left unfused, a kept scale Mul)
 * stays. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "backend/env_config.h"
#include "fault_sweep.h"
#include "onnx/onnx_internal.h"
#include "onnx_build.h"
#include "tessera/onnx.h"

bool tso_read_file(const char *op, const char *path, uint8_t **data, size_t *size);

#define FUSED   "tessera.MatMulIntegerToFloat"
#define DQFUSED "tessera.DynamicQuantizeMatMulToFloat"

static char qpath[512];

/* x [4, 6] -> Gemm(w1 [5, 6], b1, transB) -> h -> Identity(b2) + MatMul(w2 [5, 3]) -> y;
 * MatMul(h, w3 [5, 2]) -> z */
static void make_quantized(void) {
    Onnx__GraphProto *g = graph();
    uint64_t s = 11;
    const int64_t w1d[2] = {5, 6}, b1d[1] = {5}, w2d[2] = {5, 3}, b2d[1] = {3}, w3d[2] = {5, 2};
    add_init_rand(g, "w1", 2, w1d, 0.5, &s);
    add_init_rand(g, "b1", 1, b1d, 0.5, &s);
    add_init_rand(g, "w2", 2, w2d, 0.5, &s);
    add_init_rand(g, "b2", 1, b2d, 0.5, &s);
    add_init_rand(g, "w3", 2, w3d, 0.5, &s);
    Onnx__NodeProto *gm = node(g, "Gemm", "gemm", "x,w1,b1", "h");
    attr_int(gm, "transB", 1);
    node(g, "MatMul", "mm2", "h,w2", "m2");
    node(g, "Identity", "idb", "b2", "b2i"); /* torch.onnx's parameters come so */
    node(g, "Add", "add2", "b2i,m2", "y");
    node(g, "MatMul", "mm3", "h,w3", "z");
    const int64_t xd[2] = {4, 6}, yd[2] = {4, 3}, zd[2] = {4, 2};
    add_input(g, "x", tensor_type(1, 2, xd));
    add_output(g, "y", tensor_type(1, 2, yd));
    add_output(g, "z", tensor_type(1, 2, zd));
    size_t len;
    uint8_t *bytes = pack(model(g, 13), &len);
    snprintf(qpath, sizeof qpath, "/tmp/ts_mif_%d.onnx", (int)getpid());
    ts_onnx_quantize_opts o = {.mode = TS_ONNX_QUANT_DYNAMIC};
    CHECK(ts_onnx_quantize_buffer(bytes, len, NULL, qpath, o, NULL) == TS_OK);
    arena_free();
}

/* the quantized file with extra graph outputs (int32 or float32 values of unknown shape) */
static ts_module *load_with(const char *const *extra, const int32_t *types, int n_extra) {
    uint8_t *d;
    size_t n;
    if (!tso_read_file("test", qpath, &d, &n)) return NULL;
    Onnx__ModelProto *m = onnx__model_proto__unpack(&tso_pb_allocator, n, d);
    free(d);
    if (!m) return NULL;
    Onnx__GraphProto *g = m->graph;
    Onnx__ValueInfoProto **old = g->output, *outs[8];
    const size_t n_old = g->n_output;
    for (size_t i = 0; i < n_old; i++) outs[i] = old[i];
    for (int i = 0; i < n_extra; i++)
        outs[n_old + (size_t)i] = value(extra[i], tensor_type(types[i], -1, NULL));
    g->output = outs;
    g->n_output = n_old + (size_t)n_extra;
    size_t len;
    uint8_t *bytes = pack(m, &len);
    g->output = old, g->n_output = n_old;
    onnx__model_proto__free_unpacked(m, &tso_pb_allocator);
    ts_module *mod = ts_onnx_load_buffer(bytes, len, NULL, (ts_onnx_opts){0});
    arena_free();
    return mod;
}

/* TS_ONNX_FUSE_QMATMUL: NULL (unset: both rewrites), "0" (none) or "nodq" (the products alone) */
static void set_mode(const char *mode) {
    if (!mode)
        unsetenv("TS_ONNX_FUSE_QMATMUL");
    else
        setenv("TS_ONNX_FUSE_QMATMUL", mode, 1);
    tsi_env_reload(TSI_ENV_ONNX_FUSE_QMATMUL);
}
static void set_fusion(bool on) { set_mode(on ? "nodq" : "0"); }

static int count_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

static ts_tensor *input(void) {
    float x[24];
    uint64_t s = 5;
    for (int i = 0; i < 24; i++) x[i] = (float)rand_uniform(&s, -2, 2);
    return ts_from_data(TS_SHAPE(4, 6), TS_F32, x, (ts_opts){0});
}

static bool same_bits(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b) || ts_dtype_of(a) != ts_dtype_of(b)) return false;
    size_t bytes = (size_t)ts_nbytes(a);
    char *x = malloc(bytes), *y = malloc(bytes);
    bool ok = ts_copy_to_host(ts_contiguous(a), x, bytes) == TS_OK &&
              ts_copy_to_host(ts_contiguous(b), y, bytes) == TS_OK && memcmp(x, y, bytes) == 0;
    free(x), free(y);
    return ok;
}

/* runs m (outputs y, z, then the extras) under no_grad */
static void run(ts_module *m, int n_out, ts_tensor **outs) {
    ts_tensor *x = input();
    ts_no_grad_begin();
    CHECK(ts_onnx_run(m, 1, &x, n_out, outs) == TS_OK);
    ts_no_grad_end();
}

static void test_fused_equals_unfused(void) {
    ts_scope_begin();
    set_fusion(false);
    ts_module *plain = load_with(NULL, NULL, 0);
    set_fusion(true);
    ts_module *fused = load_with(NULL, NULL, 0);
    CHECK(plain && fused);
    if (plain && fused) {
        CHECK_EQ(count_op(plain, "MatMulInteger"), 3);
        CHECK_EQ(count_op(plain, FUSED), 0);
        CHECK_EQ(count_op(fused, FUSED), 3);
        CHECK_EQ(count_op(fused, "MatMulInteger") + count_op(fused, "Cast") +
                     count_op(fused, "Mul") + count_op(fused, "Add") + count_op(fused, "Identity"),
                 0);
        CHECK_EQ(count_op(fused, "DynamicQuantizeLinear"), 2); /* h's shared by two */
        ts_tensor *a[2], *b[2];
        run(plain, 2, a);
        run(fused, 2, b);
        CHECK(same_bits(a[0], b[0]) && same_bits(a[1], b[1]));
        /* both rewrites: x's and h's quantization each one node with its products (h's two) */
        set_mode(NULL);
        ts_module *dq = load_with(NULL, NULL, 0);
        CHECK(dq != NULL);
        if (dq) {
            CHECK_EQ(count_op(dq, DQFUSED), 2);
            CHECK_EQ(count_op(dq, "DynamicQuantizeLinear") + count_op(dq, FUSED), 0);
            CHECK_EQ(((tso_model *)dq)->graph->n_nodes, 2);
            ts_tensor *d[2], *x = input(), *gd[2];
            run(dq, 2, d);
            CHECK(same_bits(a[0], d[0]) && same_bits(a[1], d[1]));
            /* gradients to record: the replaced nodes run, the same bits */
            CHECK(ts_onnx_run(dq, 1, &x, 2, gd) == TS_OK);
            CHECK(same_bits(gd[0], d[0]) && same_bits(gd[1], d[1]));
            CHECK(ts_requires_grad(gd[0]) && ts_requires_grad(gd[1]));
            CHECK(!ts_requires_grad(d[0]) && !ts_requires_grad(d[1]));
        }
        ts_module_free(dq);
        set_mode("nodq");
        /* with gradients to record, the replaced nodes run: the same bits, a graph behind */
        ts_tensor *x = input(), *g[2];
        CHECK(ts_onnx_run(fused, 1, &x, 2, g) == TS_OK);
        CHECK(same_bits(g[0], b[0]) && same_bits(g[1], b[1]));
        CHECK(ts_requires_grad(g[0]) && ts_requires_grad(g[1]));
        CHECK(!ts_requires_grad(b[0]) && !ts_requires_grad(b[1]));
    }
    ts_module_free(plain), ts_module_free(fused);
    CHECK_OK();
    ts_scope_end();
}

/* one extra graph output: the patterns it touches left alone (or shortened); the outputs the
 * unfused file's */
static void check_extra(const char *name, int32_t type, int want_mmi, int want_fused, int want_mul,
                        int want_add, int want_dq) {
    ts_scope_begin();
    const char *extra[1] = {name};
    set_fusion(false);
    ts_module *plain = load_with(extra, &type, 1);
    set_fusion(true);
    ts_module *fused = load_with(extra, &type, 1);
    CHECK(plain && fused);
    if (plain && fused) {
        const int got[4] = {count_op(fused, "MatMulInteger"), count_op(fused, FUSED),
                            count_op(fused, "Mul"), count_op(fused, "Add")};
        const int want[4] = {want_mmi, want_fused, want_mul, want_add};
        for (int i = 0; i < 4; i++)
            if (got[i] != want[i]) {
                ts_test_failf(__FILE__, __LINE__, "extra output %s: %d nodes of kind %d, not %d",
                              name, got[i], i, want[i]);
                ts_test_record(false);
            }
        ts_tensor *a[3], *b[3];
        run(plain, 3, a);
        run(fused, 3, b);
        for (int i = 0; i < 3; i++) CHECK(same_bits(a[i], b[i]));
    }
    set_mode(NULL); /* both rewrites: want_dq quantizations fused with their products */
    ts_module *dq = load_with(extra, &type, 1);
    CHECK(dq != NULL);
    if (plain && dq) {
        if (count_op(dq, DQFUSED) != want_dq ||
            count_op(dq, "DynamicQuantizeLinear") != 2 - want_dq) {
            ts_test_failf(__FILE__, __LINE__, "extra output %s: %d quantizations fused, not %d",
                          name, count_op(dq, DQFUSED), want_dq);
            ts_test_record(false);
        }
        ts_tensor *a[3], *d[3];
        run(plain, 3, a);
        run(dq, 3, d);
        for (int i = 0; i < 3; i++) CHECK(same_bits(a[i], d[i]));
    }
    set_mode("nodq");
    ts_module_free(plain), ts_module_free(fused), ts_module_free(dq);
    CHECK_OK();
    ts_scope_end();
}

/* ---- the allocation-failure sweep: load (the rewrite included) and two runs */
static uint8_t *sw_bytes;
static size_t sw_len;
static float sw_want[20];

typedef struct sw_st {
    ts_module *m;
    bool matched;
} sw_st;

static void *sw_setup(void) { return calloc(1, sizeof(sw_st)); }

static bool sw_run(void *p) {
    sw_st *s = p;
    ts_module_free(s->m); /* the run after a failure loads again */
    s->m = ts_onnx_load_buffer(sw_bytes, sw_len, NULL, (ts_onnx_opts){0});
    bool ok = s->m != NULL;
    s->matched = true;
    for (int r = 0; ok && r < 2; r++) {
        ts_scope_begin();
        ts_tensor *x = input(), *o[2] = {0};
        float got[20];
        ts_no_grad_begin();
        ok = x && ts_onnx_run(s->m, 1, &x, 2, o) == TS_OK;
        ts_no_grad_end();
        ok = ok && ts_copy_to_host(o[0], got, 12 * sizeof *got) == TS_OK &&
             ts_copy_to_host(o[1], got + 12, 8 * sizeof *got) == TS_OK;
        if (ok) s->matched = s->matched && memcmp(got, sw_want, sizeof got) == 0;
        ts_scope_end();
    }
    return ok && !ts_error();
}

static void sw_check(void *p, bool ok) {
    if (ok) CHECK(((sw_st *)p)->matched);
}

static void sw_teardown(void *p) {
    sw_st *s = p;
    ts_module_free(s->m);
    free(s);
}

static void test_sweep(void) {
    ts_scope_begin();
    set_fusion(false);
    ts_module *plain = load_with(NULL, NULL, 0);
    set_fusion(true);
    ts_tensor *o[2] = {0};
    if (plain) run(plain, 2, o);
    CHECK(o[0] && o[1] && ts_copy_to_host(o[0], sw_want, 12 * sizeof *sw_want) == TS_OK &&
          ts_copy_to_host(o[1], sw_want + 12, 8 * sizeof *sw_want) == TS_OK);
    ts_module_free(plain);
    ts_scope_end();
    set_mode(NULL); /* both rewrites, as a plain load makes them */
    CHECK(tso_read_file("test", qpath, &sw_bytes, &sw_len));
    const ts_sweep_case c = {.name = "onnx_matmul_integer_fuse",
                             .setup = sw_setup,
                             .run = sw_run,
                             .teardown = sw_teardown,
                             .check = sw_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 20000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    free(sw_bytes);
}

/* an Add where the scales' Mul belongs (MatMulInteger -> Cast -> Add(scale product)) is not the
 * pattern: nothing fuses, and the output is the same with the rewrite on and off */
static void test_not_a_mul(void) {
    ts_scope_begin();
    Onnx__GraphProto *g = graph();
    const int64_t wd[2] = {6, 3};
    int8_t w[18];
    for (int i = 0; i < 18; i++) w[i] = (int8_t)(i * 37 % 255 - 127);
    const int8_t wz = 0;
    const float ws = 0.03125f;
    add_init(g, tensor("w", 3, 2, wd, w, sizeof w));
    add_init(g, tensor("wz", 3, 0, NULL, &wz, 1));
    add_init(g, tensor("ws", 1, 0, NULL, &ws, 4));
    node(g, "DynamicQuantizeLinear", "dq", "x", "xq,xs,xz");
    node(g, "MatMulInteger", "mmi", "xq,w,xz,wz", "acc");
    Onnx__NodeProto *cast = node(g, "Cast", "cast", "acc", "accf");
    attr_int(cast, "to", 1);
    node(g, "Mul", "scales", "xs,ws", "sp");
    node(g, "Add", "notmul", "accf,sp", "y");
    const int64_t xd[2] = {4, 6}, yd[2] = {4, 3};
    add_input(g, "x", tensor_type(1, 2, xd));
    add_output(g, "y", tensor_type(1, 2, yd));
    size_t len;
    uint8_t *bytes = pack(model(g, 13), &len);
    ts_tensor *y[2] = {0};
    for (int on = 0; on < 2; on++) {
        set_mode(on ? NULL : "0");
        ts_module *m = ts_onnx_load_buffer(bytes, len, NULL, (ts_onnx_opts){0});
        CHECK(m != NULL);
        if (!m) continue;
        CHECK_EQ(count_op(m, FUSED), 0);
        CHECK_EQ(count_op(m, DQFUSED), 0);
        ts_tensor *x = input();
        ts_no_grad_begin();
        CHECK(ts_onnx_run(m, 1, &x, 1, &y[on]) == TS_OK);
        ts_no_grad_end();
        ts_module_free(m);
    }
    CHECK(same_bits(y[0], y[1]));
    set_mode(NULL);
    arena_free();
    ts_scope_end();
}

int main(void) {
    make_quantized();
    test_fused_equals_unfused();
    /* the Gemm's int32 sums: its pattern stays (MatMulInteger, Cast, Mul, Add, the scales' Mul);
     * x's quantization then has a reader that is not a fused product, h's is fused with two */
    check_extra("h_MatMul_output_quantized", 6, 1, 2, 2, 1, 1);
    /* the MatMul's cast: that pattern stays (its Add too: not after a fused Mul) */
    check_extra("m2_MatMul_output_quantized_cast_output", 1, 1, 2, 2, 1, 1);
    /* the Gemm's product before its bias: fused up to the Mul, the Add stays */
    check_extra("h_MatMul", 1, 0, 3, 0, 1, 2);
    /* a scale product read outside: fused, that Mul kept for its reader (h's scale is read by
     * it: h's quantization stays) */
    check_extra("z_quant_scales_mul", 1, 0, 3, 1, 0, 1);
    /* a quantization's output read outside: that one stays */
    check_extra("h_quantized", 2, 0, 3, 0, 0, 1);
    check_extra("h_scale", 1, 0, 3, 0, 0, 1);
    check_extra("h_zero_point", 2, 0, 3, 0, 0, 1);
    test_not_a_mul();
    test_sweep();
    unlink(qpath);
    arena_release();
    return ts_test_finish();
}
#endif
