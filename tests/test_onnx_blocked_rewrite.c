/* test_onnx_blocked_rewrite.c — onnx/rewrite_blocked.c's choices on small graphs
 * (test_onnx_blocked.c checks a MobileNetV3-like model, test_onnx_blocked_units.c the kernels and
 * helpers): the Convs it refuses (a depthwise multiplier, pads asymmetric in H, auto_pad VALID, a
 * weight that is a graph input) and accepts at the edges (depthwise of exactly 16, 17 outputs at
 * 3x3 stride 1, 16 at stride 2, explicit NOTSET, no bias), where it puts FromBlocked (a graph
 * output, a value an If's branch reads), the elementwise ops and a blocked Add and Mul that is no
 * scale, an Add of a plain value, TS_ONNX_BLOCKED, the per-run mode. Each model, loaded under
 * TS_ONNX_BLOCKED=nchw (the blocked layout, not the default's channels_last for dense conv nets),
 * gives the outputs of the model loaded with TS_ONNX_BLOCKED=0, bit for bit (the same convolutions
 * and element ops, in another layout). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "blocked_test_util.h"
#include "nn/conv_blocked.h"
#include "onnx/onnx_internal.h"
#include "onnx_build.h"
/* ------------------------------------------------------------------ the rewrite */
/* a Conv of an [o, cin / group, kh, kw] weight (or named weight input) with a bias */
static Onnx__NodeProto *conv(Onnx__GraphProto *g, const char *name, const char *in, const char *out,
                             int64_t cin, int64_t o, int64_t k, int64_t stride, int64_t group,
                             const int64_t pads[4]) {
    char w[32], b[32], all[128];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    const int64_t dims[4] = {o, cin / group, k, k}, n = o * (cin / group) * k * k;
    float *v = get((size_t)n * sizeof *v), *bv = get((size_t)o * sizeof *bv);
    for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(-1, 1) / (float)sqrt((double)(n / o));
    for (int64_t i = 0; i < o; i++) bv[i] = (float)uniform(-0.2, 0.2);
    add_init(g, tensor(w, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, dims, v, (size_t)n * 4));
    add_init(g, tensor(b, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &o, bv, (size_t)o * 4));
    snprintf(all, sizeof all, "%s,%s,%s", in, w, b);
    Onnx__NodeProto *nd = node(g, "Conv", name, all, out);
    attr_ints(nd, "kernel_shape", 2, (int64_t[]){k, k});
    attr_ints(nd, "strides", 2, (int64_t[]){stride, stride});
    const int64_t p = k / 2;
    attr_ints(nd, "pads", 4, pads ? pads : (int64_t[]){p, p, p, p});
    if (group > 1) attr_int(nd, "group", group);
    return nd;
}

static ts_module *load(const uint8_t *buf, size_t len, const char *blocked_env) {
    if (blocked_env) setenv("TS_ONNX_BLOCKED", blocked_env, 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED); /* the library read its environment at start-up */
    ts_module *m =
        ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = ts_cpu(), .optimize = true});
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    return m;
}

static int count_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

typedef struct expect {
    int convs, from, muls, gaps;
} expect;

/* the model's structure as expected, and its outputs those of the model loaded without the
 * rewrite, bit for bit (x [2, cin, side, side]) */
static void check_model(const char *what, Onnx__GraphProto *g, int n_out, int64_t cin, int64_t side,
                        expect e) {
    size_t len;
    const uint8_t *buf = pack(model(g, 14), &len);
    /* the blocked layout pinned: the default runs dense conv nets channels_last instead
     * (test_onnx_nhwc), which rounds otherwise */
    ts_module *m = load(buf, len, "nchw"), *p = load(buf, len, "0");
    CHECK_OK();
    if (!m || !p) return;
    const int c = count_op(m, "tessera.BlockedConv"), f = count_op(m, "tessera.FromBlocked");
    const int mu = count_op(m, "tessera.BlockedMul"),
              ga = count_op(m, "tessera.BlockedGlobalAveragePool");
    if (c != e.convs || f != e.from || mu != e.muls || ga != e.gaps)
        printf("  %s: %d blocked convs, %d FromBlocked, %d Mul, %d pools; want %d, %d, %d, %d\n",
               what, c, f, mu, ga, e.convs, e.from, e.muls, e.gaps);
    CHECK(c == e.convs && f == e.from && mu == e.muls && ga == e.gaps);
    CHECK_EQ(((tso_model *)m)->blocked, e.convs > 0);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = rnd(TS_SHAPE(2, cin, side, side), TS_F32), *ob[4] = {0}, *op[4] = {0};
    CHECK(ts_onnx_run(m, 1, &x, n_out, ob) == TS_OK);
    CHECK(ts_onnx_run(p, 1, &x, n_out, op) == TS_OK);
    for (int i = 0; i < n_out; i++) {
        const double d = max_diff(ob[i], op[i]);
        if (d != 0) printf("  %s: output %d differs (%g)\n", what, i, d);
        CHECK(d == 0);
    }
    CHECK_OK();
    ts_no_grad_end();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(p);
}

static void out_f(Onnx__GraphProto *g, const char *name) {
    add_output(g, name, tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
}
static Onnx__GraphProto *graph_x(void) {
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    return g;
}

static void check_rewrite(void) {
    Onnx__GraphProto *g;
    /* a blocked value that is a graph output: FromBlocked; its blocked readers read it as is */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
    conv(g, "e", "A", "E", 32, 24, 1, 1, 1, NULL);
    out_f(g, "A"), out_f(g, "E");
    check_model("graph output", g, 2, 3, 10, (expect){2, 1, 0, 0});
    /* the elementwise ops on a blocked value, and a Mul of two blocked values of one shape (the
     * BlockedMul that runs as the plain Mul), a pool read by a Conv */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 24, 3, 2, 1, NULL);
    node(g, "LeakyRelu", "lr", "A", "L");
    node(g, "Sigmoid", "sg", "L", "S");
    node(g, "Mul", "sq", "S,A", "M");
    node(g, "HardSigmoid", "hsg", "M", "H");
    node(g, "Add", "ad", "H,A", "Q"); /* blocked, and no BlockedMul */
    node(g, "Relu", "rl", "Q", "R");
    conv(g, "e", "R", "E", 24, 40, 1, 1, 1, NULL);
    node(g, "GlobalAveragePool", "gp", "E", "P");
    conv(g, "f", "P", "F", 40, 24, 1, 1, 1, NULL);
    out_f(g, "E"), out_f(g, "F");
    check_model("elementwise chain", g, 2, 3, 11, (expect){3, 1, 1, 1});
    /* an Add of a blocked value and a plain one: the Conv stays plain (no reader takes it) */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
    float *kv = get(32 * sizeof *kv);
    for (int i = 0; i < 32; i++) kv[i] = (float)uniform(-1, 1);
    add_init(g, tensor("k", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){1, 32, 1, 1}, kv,
                       32 * sizeof *kv));
    node(g, "Add", "add", "A,k", "B");
    conv(g, "e", "B", "E", 32, 24, 1, 1, 1, NULL);
    out_f(g, "E");
    check_model("Add of a plain value", g, 1, 3, 10, (expect){0, 0, 0, 0});
    /* refusals: a depthwise multiplier (16 groups, 32 outputs), pads asymmetric in H,
     * auto_pad VALID, a weight that is a graph input; accepted: depthwise of exactly 16, 3x3
     * stride 1 of 17 outputs, 16 outputs with stride 2 */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 16, 3, 2, 1, NULL);
    conv(g, "dm", "A", "D", 16, 32, 3, 1, 16, NULL);
    conv(g, "as", "A", "AS", 16, 32, 3, 1, 1, (int64_t[]){0, 1, 2, 1});
    Onnx__NodeProto *valid = conv(g, "va", "A", "V", 16, 32, 3, 1, 1, NULL);
    valid->n_attribute = 2;
    attr_string(valid, "auto_pad", "VALID");
    out_f(g, "D"), out_f(g, "AS"), out_f(g, "V");
    check_model("refused readers", g, 3, 3, 12, (expect){0, 0, 0, 0});
    g = graph_x();
    conv(g, "a", "x", "A", 3, 16, 3, 2, 1, NULL);
    conv(g, "d16", "A", "D", 16, 16, 3, 1, 16, NULL);
    conv(g, "o17", "D", "O", 16, 17, 3, 1, 1, NULL);
    conv(g, "s2", "O", "S", 17, 16, 3, 2, 1, NULL);
    conv(g, "n1", "S", "N", 16, 24, 3, 1, 1, (int64_t[]){1, 1, 1, 1});
    out_f(g, "N");
    Onnx__NodeProto *expl = conv(g, "ex", "N", "X", 24, 24, 1, 1, 1, NULL);
    attr_string(expl, "auto_pad", "NOTSET");
    node(g, "Conv", "nb", "N,ex.w", "NB"); /* no bias, no attributes */
    out_f(g, "X"), out_f(g, "NB");
    check_model("accepted readers", g, 3, 3, 18, (expect){7, 1, 0, 0});
    /* the CPU selector's rule (conv_select.c): the direct kernels take a depthwise Conv of 15
     * groups at stride 1 and one of 16 outputs at 3x3 stride 1 (plain), oneDNN the same depthwise
     * Conv at stride 2 (blocked) */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 15, 3, 2, 1, NULL);
    conv(g, "d15", "A", "D", 15, 15, 3, 1, 15, NULL);
    conv(g, "d15s2", "A", "E", 15, 15, 3, 2, 15, NULL);
    conv(g, "o16", "E", "F", 15, 16, 3, 1, 1, NULL);
    out_f(g, "D"), out_f(g, "F");
    check_model("the selector's rule", g, 2, 3, 12, (expect){2, 1, 0, 0});
    /* dilations 2 x 1 and strides 1 x 2 (each side its own), and a value an If's branch reads
     * (pinned: FromBlocked) besides the blocked Conv reading it */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
    Onnx__NodeProto *dil = conv(g, "d", "A", "D", 32, 24, 3, 1, 1, (int64_t[]){2, 1, 2, 1});
    attr_ints(dil, "dilations", 2, (int64_t[]){2, 1});
    dil->attribute[1]->ints[1] = 2; /* strides 1 x 2 */
    if (tso_find_op("If", 14, NULL)) {
        Onnx__GraphProto *then = graph(), *other = graph();
        node(then, "Relu", "t", "A", "t_out");
        add_output(then, "t_out", NULL);
        node(other, "Identity", "e", "A", "e_out");
        add_output(other, "e_out", NULL);
        Onnx__NodeProto *n = node(g, "If", "if", "cond", "I");
        attr_graph(n, "then_branch", then);
        attr_graph(n, "else_branch", other);
        add_init(g, tensor("cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL,
                           (const uint8_t[]){1}, 1));
        out_f(g, "D"), out_f(g, "I");
        check_model("dilations, strides, an If", g, 2, 3, 13, (expect){2, 1, 0, 0});
    } else {
        out_f(g, "D");
        check_model("dilations, strides", g, 1, 3, 13, (expect){2, 0, 0, 0});
    }
    /* a node of two outputs (an Add declaring a second, which nothing writes): not blocked, nor
     * the Conv before it (no reader takes its output blocked); its output is a graph output */
    g = graph_x();
    conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
    node(g, "Add", "two", "A,A", "T,T2");
    conv(g, "e", "T", "E", 32, 24, 1, 1, 1, NULL);
    out_f(g, "E"), out_f(g, "T");
    check_model("an Add of two outputs", g, 2, 3, 10, (expect){0, 0, 0, 0});
    /* the weight a graph input: not known at load */
    g = graph_x();
    add_input(g, "wx", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
    node(g, "Conv", "wi", "A,wx", "W");
    out_f(g, "W");
    {
        size_t len;
        const uint8_t *buf = pack(model(g, 14), &len);
        ts_module *m = load(buf, len, NULL);
        CHECK(m && count_op(m, "tessera.BlockedConv") == 0 && !((tso_model *)m)->blocked);
        ts_module_free(m);
        /* TS_ONNX_BLOCKED other than 0 leaves the rewrite on; this dense conv net runs
         * channels_last where that is native (block 16) unless nchw pins the blocked layout */
        g = graph_x();
        conv(g, "a", "x", "A", 3, 32, 3, 2, 1, NULL);
        conv(g, "e", "A", "E", 32, 24, 1, 1, 1, NULL);
        out_f(g, "E");
        buf = pack(model(g, 14), &len);
        m = load(buf, len, "1");
        ts_module *p = load(buf, len, "0"), *n = load(buf, len, "nchw");
        CHECK(m && count_op(m, "tessera.BlockedConv") == 2 && ((tso_model *)m)->blocked);
        CHECK(n && count_op(n, "tessera.BlockedConv") == 2 && ((tso_model *)n)->blocked);
        CHECK(p && count_op(p, "tessera.BlockedConv") == 0 && !((tso_model *)p)->blocked);
        if (m && n) {
            /* the per-run mode: no gradient, the device's block (-1: channels_last, block 16);
             * an input requiring grad, none */
            const int blk = tsi_conv_block(ts_cpu());
            ts_tensor *x = rnd(TS_SHAPE(1, 3, 8, 8), TS_F32), *none[2] = {NULL, x};
            ts_no_grad_begin();
            CHECK_EQ(tso_blocked_mode((tso_model *)m, ts_cpu(), none, 2), blk == 16 ? -1 : blk);
            CHECK_EQ(tso_blocked_mode((tso_model *)n, ts_cpu(), none, 2), blk);
            ts_no_grad_end();
            /* grad mode: the parameters require grad (an absent input among the inputs) */
            CHECK_EQ(tso_blocked_mode((tso_model *)m, ts_cpu(), none, 2), 0);
            CHECK_EQ(tso_blocked_mode((tso_model *)n, ts_cpu(), none, 2), 0);
            if (p) CHECK_EQ(tso_blocked_mode((tso_model *)p, ts_cpu(), none, 2), 0);
        }
        ts_module_free(m);
        ts_module_free(n);
        ts_module_free(p);
    }
    CHECK_OK();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_device devs[TS_TEST_MAX_DEVICES];
    (void)ts_test_devices(devs, TS_TEST_MAX_DEVICES); /* the backends installed */
    printf("blocked-layout rewrite (block %d on the cpu here)\n", tsi_conv_block(ts_cpu()));
    ts_scope_begin();
    check_rewrite();
    ts_scope_end();
    arena_release();
    return ts_test_finish();
}
#endif
