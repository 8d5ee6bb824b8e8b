/* test_onnx_loop_cap.c — TS_ONNX_MAX_LOOP_ITERATIONS bounds the Loop body runs of one run: a
 * file's trip count is untrusted (M = 2^62 with a condition that stays true would run for
 * centuries), so past the limit the run fails with TS_ERR_UNSUPPORTED naming the node, nested
 * loops counted together; below it the loops compute their sums exactly; a loop over constants
 * (never folded at load: a node with a sub-graph runs in each run) the same way (docs/ONNX.md,
 * "Untrusted files"). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_build.h"

#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define BOOL  ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

enum { CAP_ITERATIONS = 5000 };

static const int64_t one_dim[1] = {1};

static Onnx__TensorProto *int_init(const char *name, int ndim, int64_t v) {
    return tensor(name, INT64, ndim, one_dim, &v, sizeof v);
}

/* A Loop node in g: "<prefix>_y" = x_name plus the number of the body's runs, each adding
 * `inner` (0: one) — inner > 0 nests a second Loop of `inner` trips in the body. */
static void add_loop(Onnx__GraphProto *g, const char *prefix, const char *x_name, int64_t trips,
                     int64_t inner) {
    char m[32], cond[32], y[32], body_x[32], body_y[32], body_one[32];
    snprintf(m, sizeof m, "%s_M", prefix);
    snprintf(cond, sizeof cond, "%s_cond", prefix);
    snprintf(y, sizeof y, "%s_y", prefix);
    snprintf(body_x, sizeof body_x, "%s_bx", prefix);
    snprintf(body_y, sizeof body_y, "%s_by", prefix);
    snprintf(body_one, sizeof body_one, "%s_one", prefix);
    add_init(g, int_init(m, 0, trips));
    const uint8_t yes = 1;
    add_init(g, tensor(cond, BOOL, 0, NULL, &yes, 1));
    Onnx__GraphProto *body = graph();
    body->name = str("body");
    add_input(body, "i", tensor_type(INT64, 0, NULL));
    add_input(body, "c", tensor_type(BOOL, 0, NULL));
    add_input(body, body_x, tensor_type(INT64, 1, one_dim));
    if (inner > 0) {
        char inner_prefix[32];
        snprintf(inner_prefix, sizeof inner_prefix, "%s_in", prefix);
        add_loop(body, inner_prefix, body_x, inner, 0);
        node(body, "Identity", "", strcat(strcpy(get(40), inner_prefix), "_y"), body_y);
    } else {
        add_init(body, int_init(body_one, 1, 1));
        char ins[80];
        snprintf(ins, sizeof ins, "%s,%s", body_x, body_one);
        node(body, "Add", "", ins, body_y);
    }
    node(body, "Identity", "", "c", "c_out");
    add_output(body, "c_out", tensor_type(BOOL, 0, NULL));
    add_output(body, body_y, tensor_type(INT64, 1, one_dim));
    char ins[100];
    snprintf(ins, sizeof ins, "%s,%s,%s", m, cond, x_name);
    char name[40];
    snprintf(name, sizeof name, "%s_loop", prefix);
    attr_graph(node(g, "Loop", name, ins, y), "body", body);
}

/* the model: y = x + outer * max(inner, 1); x a graph input, or (constant) an int64 initializer
 * 0 so that constant folding runs the loop at load */
static ts_module *loop_model(int64_t outer, int64_t inner, bool constant) {
    Onnx__GraphProto *g = graph();
    g->name = str("loop_cap");
    if (constant)
        add_init(g, int_init("x", 1, 0));
    else
        add_input(g, "x", tensor_type(INT64, 1, one_dim));
    add_loop(g, "outer", "x", outer, inner);
    add_output(g, "outer_y", tensor_type(INT64, 1, one_dim));
    size_t len;
    uint8_t *bytes = pack(model(g, 16), &len);
    ts_module *m = bytes ? ts_onnx_load_buffer(bytes, len, NULL, (ts_onnx_opts){0}) : NULL;
    arena_free();
    return m;
}

/* runs the model on x = 7; the result y[0], or -1 with the error pending */
static int64_t run(ts_module *m) {
    ts_scope_begin();
    const int64_t seven = 7;
    ts_tensor *x = ts_from_data(TS_SHAPE(1), TS_I64, &seven, (ts_opts){.dtype = TS_I64});
    ts_tensor *y = NULL;
    int64_t v = -1;
    if (ts_onnx_run(m, 1, &x, 1, &y) == TS_OK) ts_copy_to_host(y, &v, sizeof v);
    ts_scope_end();
    return v;
}

static void check_refused(const char *what, const char *node) {
    printf("  %-32s refused: %s\n", what, ts_error_message());
    CHECK(strstr(ts_error_message(), node) != NULL); /* the node is named */
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "more than 5000 Loop iterations in one run "
                                      "(TS_ONNX_MAX_LOOP_ITERATIONS");
}

int main(void) {
    char cap[16];
    snprintf(cap, sizeof cap, "%d", CAP_ITERATIONS);
    setenv("TS_ONNX_MAX_LOOP_ITERATIONS", cap, 1); /* the ONNX runs read it once, at the first */
    tsi_env_reload(TSI_ENV_ONNX_MAX_LOOP_ITERATIONS);
    printf("TS_ONNX_MAX_LOOP_ITERATIONS=%s:\n", cap);
    /* within the limit: the sums, exactly (4999 runs; nested 70 x 70 + 70 = 4970 runs) */
    ts_module *m = loop_model(4999, 0, false);
    CHECK(m != NULL);
    CHECK_EQ(run(m), 7 + 4999);
    CHECK_EQ(run(m), 7 + 4999); /* the count is per run */
    ts_module_free(m);
    m = loop_model(70, 70, false);
    CHECK_EQ(run(m), 7 + 70 * 70);
    ts_module_free(m);
    CHECK_OK();
    /* past it: M = 2^62, and two nested loops of 100 trips that each stay below it */
    m = loop_model((int64_t)1 << 62, 0, false);
    CHECK(m != NULL);
    CHECK_EQ(run(m), -1);
    check_refused("M = 2^62", "node 'outer_loop' (Loop)");
    ts_error_clear();
    ts_module_free(m);
    m = loop_model(100, 100, false);
    CHECK_EQ(run(m), -1);
    check_refused("nested, 100 x 100", "node 'outer_in_loop' (Loop)");
    ts_error_clear();
    ts_module_free(m);
    /* a loop over constants only */
    m = loop_model((int64_t)1 << 62, 0, true);
    CHECK(m != NULL);
    ts_scope_begin();
    ts_tensor *y = NULL;
    CHECK_EQ(ts_onnx_run(m, 0, NULL, 1, &y), TS_ERR_UNSUPPORTED);
    CHECK(y == NULL);
    check_refused("over constants, M = 2^62", "node 'outer_loop' (Loop)");
    ts_error_clear();
    ts_scope_end();
    ts_module_free(m);
    m = loop_model(30, 0, true);
    CHECK(m != NULL);
    ts_scope_begin();
    y = NULL;
    CHECK_EQ(ts_onnx_run(m, 0, NULL, 1, &y), TS_OK);
    int64_t v = -1;
    if (y) ts_copy_to_host(y, &v, sizeof v);
    CHECK_EQ(v, 30);
    ts_scope_end();
    ts_module_free(m);
    arena_release();
    return ts_test_finish();
}
#endif
