/* test_onnx_node_cap.c — TS_ONNX_MAX_NODE_ELEMENTS bounds every tensor a file's nodes make: the
 * operators that size their outputs from attributes or data (Tile, Pad, Resize, Range,
 * ConstantOfShape; Expand makes a view, its readers allocate) are refused with TS_ERR_OOM naming
 * the node before anything that size is allocated, whether the node runs at load (constant folding)
 * or in a run; the same nodes one size smaller load and run; the limit holds only while ONNX runs,
 * so the caller's own tensors are not bounded by it (docs/ONNX.md, "Untrusted files"). */
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

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

enum { CAP_ELEMENTS = 4096 };

/* One node "op" reading the graph input x (float, dims x_dims) and then the int64 or float
 * initializers c1.. (values init_vals; length 0: a scalar); inputs listed in ins. */
typedef struct cap_case {
    const char *what;
    const char *op;
    const char *ins;
    int x_ndim; /* 0: no graph input (the node folds at load) */
    int64_t x_dims[4];
    int n_inits;
    int32_t init_type[3];
    int init_len[3];
    double init_vals[3][4];
    bool refused;
    bool view;        /* the output is a broadcast view: no memory, so any size is accepted */
    const char *then; /* a second node reading the first's output (the graph's output then) */
} cap_case;

static Onnx__ModelProto *build(const cap_case *c) {
    Onnx__GraphProto *g = graph();
    if (c->x_ndim) add_input(g, "x", tensor_type(FLOAT, c->x_ndim, c->x_dims));
    for (int i = 0; i < c->n_inits; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i + 1);
        int64_t dims[1] = {c->init_len[i]};
        const int count = c->init_len[i] ? c->init_len[i] : 1; /* 0: a scalar */
        if (c->init_type[i] == INT64) {
            int64_t v[4];
            for (int k = 0; k < count; k++) v[k] = (int64_t)c->init_vals[i][k];
            add_init(
                g, tensor(name, INT64, c->init_len[i] ? 1 : 0, dims, v, (size_t)count * sizeof *v));
        } else {
            float v[4];
            for (int k = 0; k < count; k++) v[k] = (float)c->init_vals[i][k];
            add_init(
                g, tensor(name, FLOAT, c->init_len[i] ? 1 : 0, dims, v, (size_t)count * sizeof *v));
        }
    }
    node(g, c->op, "n", c->ins, "y");
    if (c->then) node(g, c->then, "m", "y", "z");
    add_output(g, c->then ? "z" : "y", NULL);
    return model(g, 13);
}

static void check_case(const cap_case *c) {
    ts_scope_begin();
    size_t len;
    const uint8_t *buf = pack(build(c), &len);
    ts_module *m = ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.optimize = true});
    ts_status st = m ? TS_OK : ts_error();
    int64_t numel = -1;
    if (m) {
        ts_shape s = {.ndim = c->x_ndim};
        for (int d = 0; d < c->x_ndim; d++) s.dims[d] = c->x_dims[d];
        ts_tensor *x = c->x_ndim ? ts_ones(s, (ts_opts){0}) : NULL;
        ts_tensor *y = NULL;
        st = ts_onnx_run(m, c->x_ndim ? 1 : 0, &x, 1, &y);
        if (y) numel = ts_numel(y);
    }
    const char *msg = ts_error_message();
    if (c->refused) {
        CHECK_EQ(st, TS_ERR_OOM);
        CHECK(strstr(msg, "exceed the limit of 4096 elements") != NULL);
        CHECK(strstr(msg, c->then ? c->then : c->op) != NULL); /* the node is named */
        printf("  %-40s refused %s: %s\n", c->what, m ? "at run" : "at load", msg);
    } else {
        CHECK_EQ(st, TS_OK);
        CHECK(numel > 0 && (numel <= CAP_ELEMENTS || c->view));
        printf("  %-40s ok: %lld elements\n", c->what, (long long)numel);
    }
    ts_error_clear();
    ts_module_free(m);
    ts_scope_end();
    arena_free();
}

#define I64 INT64
static const cap_case cases[] = {
    {"Tile 4x4 by 100x100",
     "Tile",
     "x,c1",
     2,
     {4, 4},
     1,
     {I64},
     {2},
     {{100, 100}},
     true,
     false,
     NULL},
    {"Tile 4x4 by 16x16", "Tile", "x,c1", 2, {4, 4}, 1, {I64}, {2}, {{16, 16}}, false, false, NULL},
    /* Expand makes a view with stride 0: a billion elements cost nothing until someone copies */
    {"Expand 1 to 1e9 (a view)",
     "Expand",
     "x,c1",
     1,
     {1},
     1,
     {I64},
     {1},
     {{1e9}},
     false,
     true,
     NULL},
    {"Expand 1 to 1e9, then Relu",
     "Expand",
     "x,c1",
     1,
     {1},
     1,
     {I64},
     {1},
     {{1e9}},
     true,
     false,
     "Relu"},
    {"Expand 1 to 4096", "Expand", "x,c1", 1, {1}, 1, {I64}, {1}, {{4096}}, false, false, NULL},
    {"Pad 2x2 by 3000 each side",
     "Pad",
     "x,c1",
     2,
     {2, 2},
     1,
     {I64},
     {4},
     {{0, 3000, 0, 3000}},
     true,
     false,
     NULL},
    {"Pad 2x2 by 1000 each side",
     "Pad",
     "x,c1",
     2,
     {2, 2},
     1,
     {I64},
     {4},
     {{0, 1000, 0, 1000}},
     false,
     false,
     NULL},
    {"Resize 1x1x4x4 scales 100",
     "Resize",
     "x,,c1",
     4,
     {1, 1, 4, 4},
     1,
     {FLOAT},
     {4},
     {{1, 1, 100, 100}},
     true,
     false,
     NULL},
    {"Resize 1x1x4x4 scales 16",
     "Resize",
     "x,,c1",
     4,
     {1, 1, 4, 4},
     1,
     {FLOAT},
     {4},
     {{1, 1, 16, 16}},
     false,
     false,
     NULL},
    {"Range 0..1e12 (folded at load)",
     "Range",
     "c1,c2,c3",
     0,
     {0},
     3,
     {I64, I64, I64},
     {0, 0, 0},
     {{0}, {1e12}, {1}},
     true,
     false,
     NULL},
    {"Range 0..4096 (folded at load)",
     "Range",
     "c1,c2,c3",
     0,
     {0},
     3,
     {I64, I64, I64},
     {0, 0, 0},
     {{0}, {4096}, {1}},
     false,
     false,
     NULL},
    {"ConstantOfShape 1e6 x 1e6 (folded)",
     "ConstantOfShape",
     "c1",
     0,
     {0},
     1,
     {I64},
     {2},
     {{1e6, 1e6}},
     true,
     false,
     NULL},
    {"ConstantOfShape 64 x 64 (folded)",
     "ConstantOfShape",
     "c1",
     0,
     {0},
     1,
     {I64},
     {2},
     {{64, 64}},
     false,
     false,
     NULL},
};

int main(void) {
    setenv("TS_ONNX_MAX_NODE_ELEMENTS", "4096", 1); /* the loads read it once, at the first */
    tsi_env_reload(TSI_ENV_ONNX_MAX_NODE_ELEMENTS);
    printf("TS_ONNX_MAX_NODE_ELEMENTS=%d:\n", CAP_ELEMENTS);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    /* the limit was the ONNX run's: the caller's own tensors are not bounded by it */
    ts_scope_begin();
    ts_tensor *big = ts_zeros(TS_SHAPE(CAP_ELEMENTS * 4), (ts_opts){0});
    CHECK(big != NULL);
    CHECK_EQ(ts_error(), TS_OK);
    ts_scope_end();
    arena_release();
    return ts_test_finish();
}
#endif
