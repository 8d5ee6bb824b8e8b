/* test_onnx_place.c — an imported ONNX graph split across devices by memory budget
 * (ts_module_place on an ONNX model: src/onnx/place.c, src/onnx/run.c). Models exported here
 * from Tessera (an MLP, a dense conv net) and built here (an If whose branches read the top
 * level), each loaded twice from one file: one placed over sim:0, sim:1 and the cpu, the other run
 * unplaced on the cpu. Sim devices run the cpu kernels, so the placed run must give the unplaced
 * run's outputs and gradients bit for bit (including the conv net's channels_last and blocked
 * layouts). Checked too: the plan (runs in order, never back to an earlier device, their bytes),
 * where each initializer lives, budgets too small (the error naming each device, nothing moved),
 * one device holding the model (one run), output_device, placing again, a dry run, the example
 * input's charge and the refusals. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_sweep.h"
#include "same_bits.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "backend/env_config.h"
#include "onnx/memo.h"
#include "onnx/place.h"
#include "onnx_build.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define BOOL  ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

static char dir[64];

static const char *path_of(const char *name) {
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static ts_module *load(const char *path, bool optimize) {
    ts_module *m = ts_onnx_load(path, (ts_onnx_opts){.device = ts_cpu(), .optimize = optimize});
    CHECK(m != NULL);
    CHECK_OK();
    return m;
}

/* the model's first output for inputs in[0..n) (owned by the current scope) */
static ts_tensor *run(ts_module *m, int n, ts_tensor *const *in) {
    ts_tensor *y = NULL;
    CHECK(ts_onnx_run(m, n, in, 1, &y) == TS_OK);
    CHECK_OK();
    return y;
}

static bool on(ts_tensor *t, ts_device d) { return t && ts_device_equal(ts_device_of(t), d); }

/* every parameter and buffer named prefix* lives on d */
static bool lives_on(ts_module *m, const char *prefix, ts_device d) {
    ts_tensor_list l = ts_module_state_dict(m);
    bool ok = l.n > 0;
    for (int i = 0; i < l.n; i++)
        if (!strncmp(l.names[i], prefix, strlen(prefix)) && !on(l.tensors[i], d)) {
            fprintf(stderr, "  %s is on %s, expected %s\n", l.names[i],
                    ts_device_str(ts_device_of(l.tensors[i])), ts_device_str(d));
            ok = false;
        }
    ts_tensor_list_free(&l);
    return ok;
}

static void show_plan(const ts_place_plan *p) {
    char *s = ts_place_plan_str(p);
    printf("%s", s ? s : "(no plan)\n");
    free(s);
}

/* ------------------------------------------------------------------ the models */
/* Linear(8, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 4): 576, 1088 and 272 bytes */
static void export_mlp(const char *path) {
    ts_manual_seed(7);
    ts_module *mods[5] = {ts_linear_new(8, 16), ts_relu_new(), ts_linear_new(16, 16), ts_relu_new(),
                          ts_linear_new(16, 4)};
    ts_module *net = ts_sequential_new(5, mods);
    ts_module_eval(net);
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(2, 8), (ts_opts){0});
    CHECK(net && x && ts_onnx_export(net, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    ts_scope_end();
    ts_module_free(net);
    CHECK_OK();
}

/* three 3x3 convolutions (padding 1) with ReLUs: 3584, 36992 and 36992 bytes; a dense conv net, so
 * the rewrites run it channels_last (or blocked under TS_ONNX_BLOCKED=nchw) on the cpu */
static void export_convs(const char *path) {
    ts_manual_seed(11);
    const ts_conv2d_opts o = {.padding = {1, 1}};
    ts_module *mods[6] = {ts_conv2d_new(3, 32, 3, o),  ts_relu_new(),
                          ts_conv2d_new(32, 32, 3, o), ts_relu_new(),
                          ts_conv2d_new(32, 32, 3, o), ts_relu_new()};
    ts_module *net = ts_sequential_new(6, mods);
    ts_module_eval(net);
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 3, 8, 8), (ts_opts){0});
    CHECK(net && x && ts_onnx_export(net, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK);
    ts_scope_end();
    ts_module_free(net);
    CHECK_OK();
}

/* a = MatMul(x, w0); y = If(cond) { a + w1 } else { a - w1 }: the If reads a and w1 from the top
 * level inside its branches, not as inputs (w0: 64 bytes, w1: 16) */
static void build_if(const char *path) {
    float w0[16], w1[4];
    for (int i = 0; i < 16; i++) w0[i] = (float)(i % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 4; i++) w1[i] = 0.125f * (float)(i + 1);
    Onnx__GraphProto *g = graph();
    add_init(g, tensor("w0", FLOAT, 2, (const int64_t[]){4, 4}, w0, sizeof w0));
    add_init(g, tensor("w1", FLOAT, 1, (const int64_t[]){4}, w1, sizeof w1));
    add_input(g, "x", tensor_type(FLOAT, 2, (const int64_t[]){2, 4}));
    add_input(g, "cond", tensor_type(BOOL, 0, NULL));
    node(g, "MatMul", "mm", "x,w0", "a");
    Onnx__GraphProto *then = graph(), *other = graph();
    then->name = str("then");
    other->name = str("else");
    node(then, "Add", "t", "a,w1", "t_out");
    add_output(then, "t_out", NULL);
    node(other, "Sub", "e", "a,w1", "e_out");
    add_output(other, "e_out", NULL);
    Onnx__NodeProto *n = node(g, "If", "if", "cond", "y");
    attr_graph(n, "then_branch", then);
    attr_graph(n, "else_branch", other);
    add_output(g, "y", tensor_type(FLOAT, 2, (const int64_t[]){2, 4}));
    size_t len = 0;
    uint8_t *bytes = pack(model(g, 13), &len);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, len, f) == len);
    if (f) fclose(f);
    arena_free();
}

/* a = MatMul(x, w0); y = Reshape(a + w1, Shape(a)) with x [N, 4] (N symbolic): the Shape is
 * the shape memo's, made on sim:0 and read by the Reshape on sim:1 */
static void build_memo(const char *path) {
    float w0[16], w1[4];
    for (int i = 0; i < 16; i++) w0[i] = (float)(i % 3) * 0.5f - 0.25f;
    for (int i = 0; i < 4; i++) w1[i] = 0.25f * (float)i;
    Onnx__GraphProto *g = graph();
    add_init(g, tensor("w0", FLOAT, 2, (const int64_t[]){4, 4}, w0, sizeof w0));
    add_init(g, tensor("w1", FLOAT, 1, (const int64_t[]){4}, w1, sizeof w1));
    add_input(g, "x", tensor_type(FLOAT, 2, (const int64_t[]){-1, 4}));
    node(g, "MatMul", "mm", "x,w0", "a");
    node(g, "Shape", "shape", "a", "s");
    node(g, "Add", "add", "a,w1", "b");
    node(g, "Reshape", "reshape", "b,s", "y");
    add_output(g, "y", tensor_type(FLOAT, 2, (const int64_t[]){-1, 4}));
    size_t len = 0;
    uint8_t *bytes = pack(model(g, 13), &len);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, len, f) == len);
    if (f) fclose(f);
    arena_free();
}

/* ------------------------------------------------------------------ the split */
/* The MLP over sim:0 (600 B: the first layer), sim:1 (1100 B: the second) and the cpu: three runs
 * in budget order, each layer's weights on its run's device, the outputs the unplaced run's. */
static void test_split(const char *path) {
    printf("the MLP split over sim:0, sim:1 and the cpu\n");
    for (int opt = 0; opt < 2; opt++) {
        ts_module *ref = load(path, opt), *m = load(path, opt);
        ts_place_plan p;
        CHECK(ts_module_place_str(m, "sim:0=600B,sim:1=1100B,cpu=1GiB", (ts_place_opts){0}, &p) ==
              TS_OK);
        CHECK_OK();
        show_plan(&p);
        CHECK_EQ(p.n_units, 3);
        const ts_device want[3] = {ts_sim(0), ts_sim(1), ts_cpu()};
        const size_t bytes[3] = {576, 1088, 272};
        for (int i = 0; i < 3 && i < p.n_units; i++) {
            CHECK(ts_device_equal(p.units[i].device, want[i]));
            CHECK_EQ(p.units[i].param_bytes, bytes[i]);
            CHECK_EQ(p.used[i].bytes, bytes[i]);
        }
        ts_place_plan_free(&p);
        CHECK(lives_on(m, "0.", ts_sim(0)));
        CHECK(lives_on(m, "2.", ts_sim(1)));
        CHECK(lives_on(m, "4.", ts_cpu()));
        ts_scope_begin();
        ts_tensor *x = ts_randn(TS_SHAPE(2, 8), (ts_opts){0});
        ts_tensor *y0 = run(ref, 1, &x), *y = run(m, 1, &x);
        CHECK(on(y, ts_cpu())); /* the last run's device */
        CHECK(same_bits(y, y0));
        ts_tensor *xs = ts_to(x, ts_sim(1)); /* an input anywhere moves to the first run */
        CHECK(same_bits(run(m, 1, &xs), y0));
        CHECK(same_bits(run(m, 1, &x), y0)); /* again: the shape memo and the copies */
        ts_scope_end();
        ts_module_free(ref);
        ts_module_free(m);
        CHECK_OK();
    }
}

/* --grad-output's path (the file's graph, no rewrites): sum(y * g) backward through the split
 * gives every parameter and the input the unplaced run's gradients, each gradient on its
 * parameter's device */
static void test_grads(const char *path) {
    printf("gradients through the split\n");
    ts_module *ref = load(path, false), *m = load(path, false);
    CHECK(ts_module_place_str(m, "sim:0=600B,sim:1=1100B,cpu=1GiB", (ts_place_opts){0}, NULL) ==
          TS_OK);
    ts_scope_begin();
    ts_tensor *x0 = ts_randn(TS_SHAPE(2, 8), (ts_opts){0}),
              *g = ts_randn(TS_SHAPE(2, 4), (ts_opts){0});
    ts_tensor *xa = ts_clone(x0), *xb = ts_clone(x0);
    ts_set_requires_grad(xa, true);
    ts_set_requires_grad(xb, true);
    ts_backward(ts_sum(ts_mul(run(ref, 1, &xa), g)));
    ts_tensor *y = run(m, 1, &xb);
    ts_backward(ts_sum(ts_mul(y, ts_to(g, ts_device_of(y)))));
    CHECK_OK();
    CHECK(same_bits(ts_grad(xb), ts_grad(xa)));
    CHECK(on(ts_grad(xb), ts_cpu()));
    ts_tensor_list pa = ts_module_named_parameters(ref), pb = ts_module_named_parameters(m);
    CHECK_EQ(pa.n, 6);
    CHECK_EQ(pb.n, pa.n);
    for (int i = 0; i < pa.n && i < pb.n; i++) {
        CHECK_STREQ(pb.names[i], pa.names[i]);
        ts_tensor *ga = ts_grad(pa.tensors[i]), *gb = ts_grad(pb.tensors[i]);
        CHECK(ga && gb && same_bits(gb, ga));
        CHECK(on(gb, ts_device_of(pb.tensors[i])));
    }
    CHECK(on(ts_module_get(m, "2.weight"), ts_sim(1)));
    ts_tensor_list_free(&pa);
    ts_tensor_list_free(&pb);
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(m);
    CHECK_OK();
}

/* The conv net with the rewrites, in the layout the unplaced cpu run takes (channels_last by
 * default with oneDNN on AVX-512, blocked under TS_ONNX_BLOCKED=nchw): every device of the split
 * runs the cpu kernels, so the placed run takes the same layout and the same bits. */
static void test_convs(const char *path) {
    const char *envs[2] = {NULL, "nchw"};
    for (int e = 0; e < 2; e++) {
        if (envs[e])
            setenv("TS_ONNX_BLOCKED", envs[e], 1);
        else
            unsetenv("TS_ONNX_BLOCKED");
        tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
        ts_module *ref = load(path, true), *m = load(path, true);
        ts_place_plan p;
        CHECK(ts_module_place_str(m, "sim:0=4KiB,sim:1=40KiB,cpu=1GiB", (ts_place_opts){0}, &p) ==
              TS_OK);
        show_plan(&p);
        CHECK_EQ(p.n_units, 3);
        ts_place_plan_free(&p);
        ts_no_grad_begin(); /* the layouts are for inference: none while a gradient may be recorded
                             */
        ts_scope_begin();
        ts_tensor *x = ts_randn(TS_SHAPE(1, 3, 8, 8), (ts_opts){0});
        const int mode = tso_blocked_mode((tso_model *)ref, ts_cpu(), &x, 1);
        const tso_model *tm = (const tso_model *)m;
        CHECK(tm->place && tso_place_mode(tm, tm->place, &x, 1) == mode);
        printf("the conv net split (TS_ONNX_BLOCKED=%s): layout mode %d\n",
               envs[e] ? envs[e] : "unset", mode);
        CHECK(same_bits(run(m, 1, &x), run(ref, 1, &x)));
        ts_scope_end();
        ts_no_grad_end();
        ts_module_free(ref);
        ts_module_free(m);
        CHECK_OK();
    }
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
}

/* the If on sim:1 reads a (made on sim:0) and w1 inside its branches: both reach it on sim:1 */
static void test_subgraph(const char *path) {
    printf("an If reading the top level from its branches\n");
    ts_module *ref = load(path, true), *m = load(path, true);
    ts_place_plan p;
    CHECK(ts_module_place_str(m, "sim:0=64B,sim:1=1KiB", (ts_place_opts){0}, &p) == TS_OK);
    show_plan(&p);
    CHECK_EQ(p.n_units, 2);
    ts_place_plan_free(&p);
    CHECK(on(ts_module_get(m, "w0"), ts_sim(0)));
    CHECK(on(ts_module_get(m, "w1"), ts_sim(1))); /* charged to the If, which reads it */
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 4), (ts_opts){0});
    for (int c = 0; c < 2; c++) {
        ts_tensor *in[2] = {x, ts_full((ts_shape){.ndim = 0}, c, (ts_opts){.dtype = TS_BOOL})};
        ts_tensor *y = run(m, 2, in);
        CHECK(on(y, ts_sim(1)));
        CHECK(same_bits(y, run(ref, 2, in)));
    }
    ts_scope_end();
    /* an example feeds one input: this model takes two */
    ts_scope_begin();
    CHECK(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){.example_input = x}, NULL) ==
          TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "the ONNX model has 2 inputs; an example feeds one");
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(m);
    CHECK_OK();
}

/* the shape memo's values stay where their nodes made them; a hit's reach the Reshape on sim:1 */
static void test_memo(const char *path) {
    printf("the shape memo through the split\n");
    ts_module *ref = load(path, false), *m = load(path, false);
    CHECK(ts_module_place_str(m, "sim:0=64B,sim:1=1KiB", (ts_place_opts){0}, NULL) == TS_OK);
    CHECK(on(ts_module_get(m, "w0"), ts_sim(0)) && on(ts_module_get(m, "w1"), ts_sim(1)));
    ts_scope_begin();
    for (int r = 0; r < 3; r++) {
        ts_tensor *x = ts_randn(TS_SHAPE(3 + r / 2, 4), (ts_opts){0});
        ts_tensor *y = run(m, 1, &x);
        CHECK(on(y, ts_sim(1)));
        CHECK(same_bits(y, run(ref, 1, &x)));
    }
    ts_scope_end();
    int64_t hits = 0;
    int skipped = 0;
    tso_memo_stats(((tso_model *)m)->graph, &hits, &skipped);
    CHECK_EQ(hits, 1); /* the second run's: the third has another shape */
    CHECK_EQ(skipped, 1);
    ts_module_free(ref);
    ts_module_free(m);
    CHECK_OK();
}

/* ------------------------------------------------------------------ budgets and options */
static void test_budgets(const char *path) {
    printf("budgets: too small, one device, output_device, again, dry run, example\n");
    ts_module *ref = load(path, true), *m = load(path, true);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 8), (ts_opts){0});
    ts_tensor *y0 = run(ref, 1, &x);
    /* too small anywhere: the error names each device, nothing moves, the model runs where it is */
    ts_place_plan p;
    CHECK(ts_module_place_str(m, "sim:0=100B,sim:1=700B", (ts_place_opts){0}, &p) == TS_ERR_OOM);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "module_place: the budgets cannot hold the model") != NULL);
    CHECK(strstr(msg, "fits on none of sim:0=100 B (0 B planned), sim:1=700 B (576 B planned)"));
    printf("  %s\n", msg);
    ts_error_clear();
    CHECK_EQ(p.n_units, 0);
    CHECK(lives_on(m, "", ts_cpu()));
    CHECK(!((tso_model *)m)->place);
    CHECK(same_bits(run(m, 1, &x), y0));
    /* one device holds it: one run, today's behaviour */
    CHECK(ts_module_place_str(m, "sim:0=16B,sim:1=1MiB,cpu=1GiB", (ts_place_opts){0}, &p) == TS_OK);
    CHECK_EQ(p.n_units, 1);
    CHECK(p.n_units == 1 && ts_device_equal(p.units[0].device, ts_sim(1)));
    CHECK_EQ(p.used[1].bytes, 576 + 1088 + 272);
    show_plan(&p);
    ts_place_plan_free(&p);
    CHECK(lives_on(m, "", ts_sim(1)));
    ts_tensor *y = run(m, 1, &x);
    CHECK(on(y, ts_sim(1)));
    CHECK(same_bits(y, y0));
    /* never back to a device left: the last layer (272 B) would fit on sim:0 (576 B of 900 B
     * planned) but goes on to the cpu, as sim:1 has no room left */
    CHECK(ts_module_place_str(m, "sim:0=900B,sim:1=1100B,cpu=1GiB", (ts_place_opts){0}, &p) ==
          TS_OK);
    CHECK_EQ(p.n_units, 3);
    for (int i = 0; i < 3 && i < p.n_units; i++)
        CHECK(ts_device_equal(p.units[i].device, i == 0   ? ts_sim(0)
                                                 : i == 1 ? ts_sim(1)
                                                          : ts_cpu()));
    ts_place_plan_free(&p);
    CHECK(lives_on(m, "4.", ts_cpu()));
    CHECK(same_bits(run(m, 1, &x), y0));
    /* split again, the outputs where the caller asks */
    CHECK(ts_module_place_str(m, "sim:0=600B,sim:1=1100B,cpu=1GiB",
                              (ts_place_opts){.output_device = ts_sim(0)}, NULL) == TS_OK);
    CHECK(lives_on(m, "0.", ts_sim(0)) && lives_on(m, "4.", ts_cpu()));
    y = run(m, 1, &x);
    CHECK(on(y, ts_sim(0)));
    CHECK(same_bits(y, y0));
    /* a dry run plans and moves nothing; an example input charges each node its outputs' bytes */
    CHECK(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){.dry_run = true, .example_input = x},
                              &p) == TS_OK);
    CHECK(lives_on(m, "0.", ts_sim(0)) && lives_on(m, "2.", ts_sim(1)));
    size_t acts = 0;
    for (int i = 0; i < p.n_units; i++) acts += p.units[i].act_bytes;
    CHECK_EQ(acts, (2 * 16 * 4) * 4 + 2 * 4 * 4); /* two Linear + ReLU pairs of [2, 16], [2, 4] */
    show_plan(&p);
    ts_place_plan_free(&p);
    /* with_grads: each parameter twice */
    CHECK(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){.with_grads = true}, &p) == TS_OK);
    CHECK_EQ(p.used[0].bytes, 2 * (576 + 1088 + 272));
    ts_place_plan_free(&p);
    CHECK(lives_on(m, "", ts_cpu())); /* placed whole on the cpu again */
    CHECK(same_bits(run(m, 1, &x), y0));
    /* refusals */
    CHECK(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){.overrides = "0.weight=cpu"}, NULL) ==
          TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "overrides: not for OnnxModel");
    CHECK(ts_module_place_str(m, "sim:0=1GiB,sim:7=1GiB", (ts_place_opts){0}, NULL) != TS_OK);
    ts_error_clear();
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(m);
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
/* every allocation of a placement (with an example input: a measuring run) and a placed run
 * fails in turn: a clean error, no leak, and the scenario finishes once the error is cleared */
typedef struct sweep_state {
    ts_module *m;
    ts_tensor *x;
} sweep_state;

static void *sweep_setup(void) {
    sweep_state *s = calloc(1, sizeof *s);
    s->m = ts_onnx_load(path_of("mlp.onnx"), (ts_onnx_opts){.device = ts_cpu(), .optimize = true});
    s->x = ts_ones(TS_SHAPE(2, 8), (ts_opts){0});
    return s;
}

static bool sweep_run(void *p) {
    sweep_state *s = p;
    ts_place_plan plan;
    ts_status st = ts_module_place_str(s->m, "sim:0=600B,sim:1=1100B,cpu=1GiB",
                                       (ts_place_opts){.example_input = s->x}, &plan);
    ts_place_plan_free(&plan);
    if (st != TS_OK) return false;
    ts_scope_begin();
    ts_tensor *y = NULL;
    bool ok = ts_onnx_run(s->m, 1, &s->x, 1, &y) == TS_OK;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void sweep_teardown(void *p) {
    sweep_state *s = p;
    ts_module_free(s->m);
    ts_release(s->x);
    free(s);
}

int main(void) {
    ts_sim_configure(2, 0);
    strcpy(dir, "/tmp/ts_onnx_place_XXXXXX");
    if (!mkdtemp(dir)) return ts_test_skip("cannot create a scratch folder");
    export_mlp(path_of("mlp.onnx"));
    export_convs(path_of("convs.onnx"));
    build_if(path_of("if.onnx"));
    build_memo(path_of("memo.onnx"));
    test_split(path_of("mlp.onnx"));
    test_grads(path_of("mlp.onnx"));
    test_convs(path_of("convs.onnx"));
    test_subgraph(path_of("if.onnx"));
    test_memo(path_of("memo.onnx"));
    test_budgets(path_of("mlp.onnx"));
    ts_fault_sweep(&(ts_sweep_case){.name = "module_place on an ONNX model",
                                    .setup = sweep_setup,
                                    .run = sweep_run,
                                    .teardown = sweep_teardown},
                   400);
    const char *files[] = {"mlp.onnx", "convs.onnx", "if.onnx", "memo.onnx"};
    for (int i = 0; i < 4; i++) unlink(path_of(files[i]));
    rmdir(dir);
    arena_release();
    return ts_test_finish();
}
#endif
