/* test_cli_onnx.c — `tessera info` and `tessera run` end to end on models of ONNX's backend test
 * suite (Debian's libonnx-testdata; skipped without it): the description, outputs saved with
 * --save checked against the suite's expected output_0.pb (byte for byte where the operator is
 * exact), random inputs of the declared shapes (--batch for symbolic dims), --bench's line, and
 * the one-line errors with status 2 (flags, a missing file, an unknown input, a shape mismatch, an
 * operator Tessera lacks), and the inference rewrites (on by default, off with --no-optimize or
 * --grad-output) on a Conv + BatchNorm + Relu exported here. The harness is the trainer tests'
 * (support/trainer_run.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer_run.h"
#include "ts_test.h"

static char data_dir[512];

/* "<suite>/<case>/<file>" in the test data (one of four rotating buffers) */
static const char *case_file(const char *suite_case, const char *file) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s/%s", data_dir, suite_case, file);
    return buf[k];
}

static bool has(const char *s, const char *frag) {
    bool ok = s && strstr(s, frag);
    if (!ok) fprintf(stderr, "  output lacks \"%s\":\n%s\n", frag, s ? s : "(none)");
    return ok;
}

static void write_bytes(const char *name, const void *data, size_t n) {
    FILE *f = fopen(path_in(name, NULL), "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

/* A TensorProto of the suite as a .npy file in the temporary folder. */
static bool pb_to_npy(const char *pb, const char *npy) {
    ts_tensor *t = ts_onnx_tensor_load(pb, ts_cpu(), NULL);
    bool ok = t && ts_npy_save(npy, t) == TS_OK;
    ts_release(t);
    CHECK(ok);
    ts_error_clear();
    return ok;
}

/* largest |a - b| of two tensors of one shape and dtype (INFINITY when they differ so) */
static double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_dtype_of(a) != ts_dtype_of(b) || ts_numel(a) != ts_numel(b) ||
        ts_ndim(a) != ts_ndim(b))
        return INFINITY;
    for (int d = 0; d < ts_ndim(a); d++)
        if (ts_size(a, d) != ts_size(b, d)) return INFINITY;
    ts_scope_begin();
    double m = ts_numel(a)
                   ? ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64)))))
                   : 0;
    ts_scope_end();
    return m;
}

static void test_flags(void) {
    result r = RUN("--help");
    check_clean_exit(&r);
    const char *words[] = {"run",       "info",      "--input NAME=FILE", "--save DIR",
                           "--bench N", "--batch B", "--no-optimize"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) CHECK(has(r.out, words[i]));
    result_free(&r);
    const char *relu = case_file("node/test_relu", "model.onnx");
    check_usage_error(RUN("run"), "tessera: run: needs a model file (tessera run model.onnx)\n");
    check_usage_error(RUN("info"), "tessera: info: needs a model file (tessera info model.onnx)\n");
    check_usage_error(RUN("run", relu, "other.onnx"),
                      "tessera: unexpected argument 'other.onnx' (options start with --; see "
                      "tessera --help)\n");
    check_usage_error(RUN("run", relu, "--input", "x"),
                      "tessera: --input: expected NAME=FILE.npy, got 'x'\n");
    check_usage_error(RUN("run", relu, "--input", "=a.npy"),
                      "tessera: --input: expected NAME=FILE.npy, got '=a.npy'\n");
    check_usage_error(RUN("run", relu, "--bench", "0"),
                      "tessera: --bench: expected a positive integer, got '0'\n");
    check_usage_error(RUN("info", relu, "--bench", "3"),
                      "tessera: --bench: not an option of 'tessera info' (see tessera --help)\n");
    check_usage_error(RUN("train", "--save", "x"),
                      "tessera: --save: not an option of 'tessera train' (see tessera --help)\n");
    check_usage_prefix(RUN("run", path_in("absent.onnx", NULL)),
                       "tessera: onnx_load: cannot open ");
    check_usage_prefix(RUN("info", path_in("data", NULL)), "tessera: onnx_load: ");
    check_usage_error(RUN("run", relu, "--input", "nope=a.npy"),
                      "tessera: --input: the model has no input 'nope' (its inputs: x)\n");
    check_usage_prefix(RUN("run", relu, "--input", "x=/nonexistent/x.npy"), "tessera: --input: ");
}

static void test_info(void) {
    result r = RUN("info", case_file("node/test_relu", "model.onnx"));
    check_clean_exit(&r);
    CHECK(has(r.out, "inputs (1):\n  x: float32 [3, 4, 5]"));
    CHECK(has(r.out, "outputs (1):\n  y: float32 [3, 4, 5]"));
    CHECK(has(r.out, "Relu x1"));
    CHECK(has(r.out, "opsets: ai.onnx"));
    result_free(&r);

    /* an operator Tessera lacks: test_relu with its op renamed (same length) */
    size_t len;
    char *bytes = slurp(case_file("node/test_relu", "model.onnx"), &len);
    char *op = NULL;
    for (size_t i = 0; bytes && i + 4 <= len && !op; i++)
        if (!memcmp(bytes + i, "Relu", 4)) op = bytes + i;
    CHECK(op != NULL);
    if (op) memcpy(op, "Rulu", 4);
    write_bytes("rulu.onnx", bytes, len);
    free(bytes);
    check_usage_prefix(RUN("info", path_in("rulu.onnx", NULL)), "tessera: onnx_load: graph: node ");
    r = RUN("info", path_in("rulu.onnx", NULL));
    CHECK(has(r.err, "(Rulu) at opset"));
    CHECK(has(r.err, "Tessera does not support the operator Rulu"));
    result_free(&r);
}

/* run --save: the outputs as .npy, against the suite's expected output_0.pb */
static void test_run_save(void) {
    const char *relu = "node/test_relu";
    CHECK(pb_to_npy(case_file(relu, "test_data_set_0/input_0.pb"), path_in("x.npy", NULL)));
    char arg[600];
    snprintf(arg, sizeof arg, "x=%s", path_in("x.npy", NULL));
    result r = RUN("run", case_file(relu, "model.onnx"), "--input", arg, "--save",
                   path_in("out/relu", NULL), "--device", "sim:0");
    check_clean_exit(&r);
    CHECK(has(r.out, "on sim:0"));
    CHECK(has(r.out, "output y: float32 [3, 4, 5]"));
    CHECK(has(r.out, "(60 values)"));
    result_free(&r);
    /* exact: the bytes np.save would write for the expected tensor */
    CHECK(
        pb_to_npy(case_file(relu, "test_data_set_0/output_0.pb"), path_in("y_expected.npy", NULL)));
    CHECK(same_file(path_in("out/relu", "y.npy"), path_in("y_expected.npy", NULL)));

    /* two inputs given in the other order, the output "sum" */
    const char *add = "node/test_add";
    CHECK(pb_to_npy(case_file(add, "test_data_set_0/input_0.pb"), path_in("in0.npy", NULL)));
    CHECK(pb_to_npy(case_file(add, "test_data_set_0/input_1.pb"), path_in("in1.npy", NULL)));
    char a0[600], a1[600];
    snprintf(a0, sizeof a0, "x=%s", path_in("in0.npy", NULL));
    snprintf(a1, sizeof a1, "y=%s", path_in("in1.npy", NULL));
    r = RUN("run", case_file(add, "model.onnx"), "--input", a1, "--input", a0, "--save",
            path_in("out", NULL));
    check_clean_exit(&r);
    CHECK(has(r.out, "input x: "));
    CHECK(has(r.out, "in0.npy\ninput y: "));
    result_free(&r);
    ts_tensor *got = ts_npy_load(path_in("out", "sum.npy"), ts_cpu());
    ts_tensor *want =
        ts_onnx_tensor_load(case_file(add, "test_data_set_0/output_0.pb"), ts_cpu(), NULL);
    double d = max_diff(got, want);
    CHECK(d <= 1e-6);
    if (!(d <= 1e-6)) fprintf(stderr, "  sum.npy differs from output_0.pb by %g\n", d);
    ts_release(got);
    ts_release(want);
    CHECK_OK();

    /* a shape mismatch is the library's message, status 2, nothing on stdout */
    ts_tensor *small = ts_zeros(TS_SHAPE(2, 2), (ts_opts){0});
    CHECK(ts_npy_save(path_in("small.npy", NULL), small) == TS_OK);
    ts_release(small);
    snprintf(arg, sizeof arg, "y=%s", path_in("small.npy", NULL));
    check_usage_prefix(RUN("run", case_file(add, "model.onnx"), "--input", a0, "--input", arg),
                       "tessera: onnx_run: input 'y' must have shape ");
    check_usage_error(RUN("run", case_file(add, "model.onnx"), "--input", a0, "--input", a0),
                      "tessera: --input: 'x' is given twice\n");

    /* an output named "out/y:0" is saved as out_y_0.npy */
    static const unsigned char odd[] = {
        0x08, 0x08, 0x3a, 0x42, 0x0a, 0x15, 0x0a, 0x01, 0x78, 0x12, 0x07, 0x6f, 0x75,
        0x74, 0x2f, 0x79, 0x3a, 0x30, 0x1a, 0x01, 0x72, 0x22, 0x04, 0x52, 0x65, 0x6c,
        0x75, 0x12, 0x01, 0x67, 0x5a, 0x0f, 0x0a, 0x01, 0x78, 0x12, 0x0a, 0x0a, 0x08,
        0x08, 0x01, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x02, 0x62, 0x15, 0x0a, 0x07, 0x6f,
        0x75, 0x74, 0x2f, 0x79, 0x3a, 0x30, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x01, 0x12,
        0x04, 0x0a, 0x02, 0x08, 0x02, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d};
    write_bytes("odd.onnx", odd, sizeof odd);
    r = RUN("run", path_in("odd.onnx", NULL), "--save", path_in("odd", NULL));
    check_clean_exit(&r);
    CHECK(has(r.out, "output out/y:0: float32 [2]"));
    result_free(&r);
    struct stat st;
    CHECK(stat(path_in("odd", "out_y_0.npy"), &st) == 0 && S_ISREG(st.st_mode));
}

/* random inputs of the declared shapes; --batch for symbolic dims; --bench */
static void test_run_random(void) {
    result r = RUN("run", case_file("node/test_relu", "model.onnx"), "--seed", "3", "--bench", "5",
                   "--threads", "1");
    check_clean_exit(&r);
    CHECK(has(r.out, "input x: random float32 [3, 4, 5] (N(0, 1))"));
    CHECK(has(r.out, "output y: float32 [3, 4, 5]"));
    CHECK(has(r.out, "bench: 5 runs after 3 warm-up on cpu: median "));
    CHECK(has(r.out, " ms, p90 "));
    CHECK(has(r.out, "samples/s (batch 1)"));
    /* the same seed, the same numbers */
    result again = RUN("run", case_file("node/test_relu", "model.onnx"), "--seed", "3");
    const char *y1 = r.out ? strstr(r.out, "output y:") : NULL;
    const char *y2 = again.out ? strstr(again.out, "output y:") : NULL;
    CHECK(y1 && y2 && !strncmp(y1, y2, strcspn(y1, "\n")));
    result_free(&again);
    result_free(&r);

    /* y = Relu(x), x [N, 3] (the bytes tools/gen_onnx_corpus.py's encoder writes) */
    static const unsigned char sym[] = {
        0x08, 0x08, 0x3a, 0x40, 0x0a, 0x0f, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x1a, 0x01, 0x72,
        0x22, 0x04, 0x52, 0x65, 0x6c, 0x75, 0x12, 0x01, 0x67, 0x5a, 0x14, 0x0a, 0x01, 0x78, 0x12,
        0x0f, 0x0a, 0x0d, 0x08, 0x01, 0x12, 0x09, 0x0a, 0x03, 0x12, 0x01, 0x4e, 0x0a, 0x02, 0x08,
        0x03, 0x62, 0x14, 0x0a, 0x01, 0x79, 0x12, 0x0f, 0x0a, 0x0d, 0x08, 0x01, 0x12, 0x09, 0x0a,
        0x03, 0x12, 0x01, 0x4e, 0x0a, 0x02, 0x08, 0x03, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d};
    write_bytes("sym.onnx", sym, sizeof sym);
    r = RUN("info", path_in("sym.onnx", NULL));
    check_clean_exit(&r);
    CHECK(has(r.out, "x: float32 [N, 3]"));
    result_free(&r);
    r = RUN("run", path_in("sym.onnx", NULL), "--batch", "4", "--bench", "2");
    check_clean_exit(&r);
    CHECK(has(r.out, "input x: random float32 [4, 3]"));
    CHECK(has(r.out, "output y: float32 [4, 3]"));
    CHECK(has(r.out, "(batch 4)"));
    result_free(&r);
    /* a file fills the symbolic dim: its first dim is the batch */
    ts_tensor *x = ts_randn(TS_SHAPE(7, 3), (ts_opts){0});
    CHECK(ts_npy_save(path_in("x7.npy", NULL), x) == TS_OK);
    ts_release(x);
    char arg[600];
    snprintf(arg, sizeof arg, "x=%s", path_in("x7.npy", NULL));
    r = RUN("run", path_in("sym.onnx", NULL), "--input", arg, "--bench", "1", "--save",
            path_in("out7", NULL));
    check_clean_exit(&r);
    CHECK(has(r.out, "output y: float32 [7, 3]"));
    CHECK(has(r.out, "(batch 7)"));
    result_free(&r);
    ts_tensor *y = ts_npy_load(path_in("out7", "y.npy"), ts_cpu());
    CHECK(y && ts_size(y, 0) == 7 && ts_size(y, 1) == 3);
    ts_release(y);
    CHECK_OK();
}

/* a [1, 1, 2, 2] float tensor of v saved as name.npy in the temporary folder; its path */
static const char *npy4(const char *name, const float *v) {
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(1, 1, 2, 2), v, (ts_opts){0});
    const char *path = path_in(name, NULL);
    CHECK(t && ts_npy_save(path, t) == TS_OK);
    ts_release(t);
    return path;
}

/* the four values of a saved [1, 1, 2, 2] output, NAN when unreadable */
static void load4(const char *path, float *v) {
    ts_tensor *t = ts_npy_load(path, ts_cpu());
    if (!t || ts_numel(t) != 4 || ts_copy_to_host(t, v, 4 * sizeof *v) != TS_OK)
        for (int i = 0; i < 4; i++) v[i] = NAN;
    ts_release(t);
    ts_error_clear();
}

/* Conv 1x1 + BatchNorm + Relu exported from Tessera with dyadic values, so every operation is
 * exact on either path: W 2, b 1, BatchNorm scale 1, B 0.5, mean 1, var 3.5, eps 0.5
 * (sqrt(var + eps) = 2); folded W' = 1, b' = 0.5. */
static bool export_conv_bn_relu(const char *path) {
    ts_module *mods[3] = {ts_conv2d_new(1, 1, 1, (ts_conv2d_opts){0}),
                          ts_batch_norm2d_new(1, (ts_norm_opts){.eps = 0.5}), ts_relu_new()};
    ts_module *net = ts_sequential_new(3, mods);
    const char *names[] = {"0.weight", "0.bias",         "1.weight",
                           "1.bias",   "1.running_mean", "1.running_var"};
    const double vals[] = {2, 1, 1, 0.5, 1, 3.5};
    ts_scope_begin(); /* what the in-place fills return */
    ts_no_grad_begin();
    for (int i = 0; net && i < 6; i++) ts_fill_(ts_module_get(net, names[i]), vals[i]);
    ts_no_grad_end();
    ts_module_eval(net);
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 1, 2, 2), (ts_opts){0});
    bool ok = net && x && ts_onnx_export(net, 1, &x, path, (ts_onnx_export_opts){0}) == TS_OK;
    ts_scope_end();
    ts_module_free(net);
    CHECK(ok);
    CHECK_OK();
    return ok;
}

/* run --max-memory on two capped sim devices. With the rewrites the model is one node (the Conv,
 * BatchNorm folded in, Relu fused: its weight and bias, 8 bytes; the BatchNorm's four unread
 * initializers stay on the cpu): not on sim:0 (4 B), on sim:1 (1 KiB), its outputs the unplaced
 * run's on sim:1 byte for byte. Without them (--no-optimize, and --grad-output's file graph) the
 * graph splits: the Conv on sim:0 (8 B), BatchNormalization and Relu on sim:1 (16 B), with the
 * outputs and every gradient of the unplaced cpu run. Budgets that hold a node nowhere fail naming
 * each device. */
static void test_run_max_memory(const char *model, const char *x_arg, const char *g_arg) {
    const char *const env[] = {"TS_SIM_DEVICES=2", "TS_SIM_CAPACITY=1M", NULL};
    result r =
        run_env(env, (const char *const[]){"run", model, "--input", x_arg, "--save",
                                           path_in("mm_ref", NULL), "--device", "sim:1", NULL});
    check_clean_exit(&r);
    result_free(&r);
    r = run_env(env,
                (const char *const[]){"run", model, "--input", x_arg, "--save", path_in("mm", NULL),
                                      "--max-memory", "sim:0=4B,sim:1=1KiB,cpu=1GiB", NULL});
    check_clean_exit(&r);
    CHECK(has(r.out, "placement (--max-memory):\n"));
    CHECK(has(r.out, "node '/Conv_1' (Conv)    -> sim:1    8 B\n"));
    CHECK(has(r.out, "sim:1: 8 B of 1.00 KiB\n"));
    CHECK(has(r.out, " on sim:1, inference rewrites on\n"));
    result_free(&r);
    CHECK(same_file(path_in("mm_ref", "output.npy"), path_in("mm", "output.npy")));
    /* split: the file's graph, with and without its gradients */
    for (int grad = 0; grad < 2; grad++) {
        const char *flag = grad ? "--grad-output" : "--no-optimize", *val = grad ? g_arg : NULL;
        r = run_env(env, (const char *const[]){"run", model, "--input", x_arg, "--save",
                                               path_in("mm_ref", NULL), flag, val, NULL});
        check_clean_exit(&r);
        result_free(&r);
        r = run_env(env, (const char *const[]){"run", model, "--input", x_arg, "--save",
                                               path_in("mm", NULL), "--max-memory",
                                               "sim:0=8B,sim:1=16B,cpu=1GiB", flag, val, NULL});
        check_clean_exit(&r);
        CHECK(has(r.out, "node '/Conv_1' (Conv)    -> sim:0    8 B\n"));
        CHECK(has(r.out, "(2 nodes) -> sim:1    16 B\n"));
        CHECK(has(r.out, "sim:0: 8 B of 8 B\nsim:1: 16 B of 16 B\ncpu: 0 B of 1.00 GiB\n"));
        CHECK(has(r.out, " on sim:0 + sim:1, inference rewrites off ("));
        result_free(&r);
        CHECK(same_file(path_in("mm_ref", "output.npy"), path_in("mm", "output.npy")));
        const char *grads[] = {"0.weight", "0.bias", "1.weight", "1.bias"};
        for (int i = 0; grad && i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "grad/%s.npy", grads[i]);
            CHECK(same_file(path_in("mm_ref", name), path_in("mm", name)));
        }
    }
    r = run_env(env, (const char *const[]){"run", model, "--input", x_arg, "--max-memory",
                                           "sim:0=4B,sim:1=4B", NULL});
    CHECK_EQ(exit_code(&r), 1);
    CHECK(!r.out || !*r.out); /* nothing on stdout */
    CHECK(has(r.err, "tessera: --max-memory: module_place: the budgets cannot hold the model"));
    CHECK(has(r.err, "fits on none of sim:0=4 B (0 B planned), sim:1=4 B (0 B planned)\n"));
    result_free(&r);
    check_usage_error(RUN("run", model, "--max-memory", "cpu=1GiB", "--device", "cpu"),
                      "tessera: --max-memory: not with --device (the budgets choose the device)\n");
    check_usage_prefix(RUN("run", model, "--max-memory", "cpu=lots"), "tessera: --max-memory: ");
}

/* run's inference rewrites: on by default, off with --no-optimize and with --grad-output (whose
 * gradients are the file's parameters'); y = relu(((2x + 1) - 1) / 2 + 0.5) = relu(x + 0.5) exactly
 * either way */
static void test_run_optimize(void) {
    char model[600]; /* path_in's buffers rotate */
    snprintf(model, sizeof model, "%s", path_in("cbr.onnx", NULL));
    if (!export_conv_bn_relu(model)) return;
    char x_arg[600], g_arg[600];
    snprintf(x_arg, sizeof x_arg, "input=%s", npy4("cbr_x.npy", (const float[]){-1, 0, 1, 3}));
    snprintf(g_arg, sizeof g_arg, "output=%s", npy4("cbr_g.npy", (const float[]){1, 1, 1, 1}));
    const char *modes[3][2] = {{NULL, "inference rewrites on\n"},
                               {"--no-optimize", "inference rewrites off (--no-optimize)\n"},
                               {"--grad-output", "inference rewrites off (--grad-output)\n"}};
    for (int i = 0; i < 3; i++) {
        char dir[32];
        snprintf(dir, sizeof dir, "cbr%d", i);
        result r = i == 0   ? RUN("run", model, "--input", x_arg, "--save", path_in(dir, NULL))
                   : i == 1 ? RUN("run", model, "--input", x_arg, "--save", path_in(dir, NULL),
                                  modes[i][0])
                            : RUN("run", model, "--input", x_arg, "--save", path_in(dir, NULL),
                                  modes[i][0], g_arg, "--device", "sim:0");
        check_clean_exit(&r);
        CHECK(has(r.out, modes[i][1]));
        result_free(&r);
        float y[4];
        load4(path_in(dir, "output.npy"), y);
        CHECK(y[0] == 0 && y[1] == 0.5f && y[2] == 1.5f && y[3] == 3.5f);
    }
    /* the file's graph: BatchNorm's scale has its gradient, sum over y > 0 of (c - mean) / 2 with
     * c = 2x + 1: 0 + 1 + 3 */
    float gs[1] = {NAN};
    ts_tensor *gt = ts_npy_load(path_in("cbr2", "grad/1.weight.npy"), ts_cpu());
    CHECK(gt && ts_numel(gt) == 1 && ts_copy_to_host(gt, gs, sizeof gs) == TS_OK && gs[0] == 4);
    ts_release(gt);
    CHECK_OK();
    test_run_max_memory(model, x_arg, g_arg);
    check_usage_error(RUN("info", model, "--no-optimize"),
                      "tessera: --no-optimize: not an option of 'tessera info' (see tessera "
                      "--help)\n");
    check_usage_error(RUN("run", model, "--no-optimize=1"),
                      "tessera: --no-optimize: takes no value, got '1'\n");
}

int main(void) {
    const char *env = getenv("TS_ONNX_TESTDATA");
    snprintf(data_dir, sizeof data_dir, "%s",
             env && *env ? env : "/usr/share/libonnx-testdata/data");
    struct stat st;
    if (stat(case_file("node/test_relu", "model.onnx"), &st) != 0)
        return ts_test_skip("no ONNX backend test data in %s (Debian's libonnx-testdata)",
                            data_dir);
    ts_tensor *probe = ts_onnx_tensor_load(
        case_file("node/test_relu", "test_data_set_0/input_0.pb"), ts_cpu(), NULL);
    if (!probe) return ts_test_skip("this build has no ONNX support: %s", ts_error_message());
    ts_release(probe);
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot make a temporary folder");
    test_flags();
    test_info();
    test_run_save();
    test_run_random();
    test_run_optimize();
    trainer_cleanup();
    return ts_test_finish();
}
