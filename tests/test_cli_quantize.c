/* test_cli_quantize.c — `tessera quantize` and `tessera eval --onnx` end to end on the trainer
 * tests' synthetic Fashion-MNIST-format data (support/trainer_run.c): a LeNet trained 3 epochs,
 * quantized from its checkpoint (static, calibrated) and from its exported file (dynamic); the
 * progress and summary lines; the written files run by eval --onnx with an accuracy near the float
 * model's; and the one-line errors with status 2 (unknown mode, no data for static, nothing to
 * quantize, int4, missing flags). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer_run.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else

static bool has(const char *s, const char *frag) {
    bool ok = s && strstr(s, frag);
    if (!ok) fprintf(stderr, "  output lacks \"%s\":\n%s\n", frag, s ? s : "(none)");
    return ok;
}

/* "test accuracy A" of eval's output, -1 when absent */
static double eval_accuracy(const char *out) {
    const char *p = out ? strstr(out, "test accuracy ") : NULL;
    return p ? atof(p + strlen("test accuracy ")) : -1;
}

static char data_dir[512], ck[512], q_static[512], q_dynamic[512], f_onnx[512];

static void test_quantize(void) {
    result r =
        RUN("train", "--model", "lenet", "--data-dir", data_dir, "--epochs", "3", "--checkpoint",
            ck, "--progress", "none", "--batch-size", "16", "--optimizer", "adam");
    check_clean_exit(&r);
    result_free(&r);
    /* from the checkpoint: export, calibrate, write */
    r = RUN("quantize", "--model", "lenet", "--checkpoint", ck, "--data-dir", data_dir, "--out",
            q_static, "--calib-batches", "3", "--batch-size", "16");
    check_clean_exit(&r);
    CHECK(has(r.out, "exporting LeNet-5"));
    CHECK(has(r.out, "calibration: batch 3/3"));
    CHECK(has(r.out, "quantized 5 nodes (static int8, QDQ) written to"));
    CHECK(has(r.out, "10 activations calibrated on 3 batches"));
    result_free(&r);
    struct stat st;
    char tmp_float[600];
    snprintf(tmp_float, sizeof tmp_float, "%s.float.onnx", q_static);
    CHECK(stat(tmp_float, &st) != 0); /* the float export is not left behind */
    /* the float model as a file, then dynamic from it (no data needed) */
    r = RUN("export", "--model", "lenet", "--checkpoint", ck, "--data-dir", data_dir, "-o", f_onnx,
            "--dynamic-batch");
    check_clean_exit(&r);
    result_free(&r);
    r = RUN("quantize", "--onnx", f_onnx, "-o", q_dynamic, "--mode", "dynamic");
    check_clean_exit(&r);
    CHECK(has(r.out, "quantized 3 nodes (dynamic int8, DynamicQuantizeLinear + MatMulInteger)"));
    result_free(&r);
    /* the accuracies: the float checkpoint, its ONNX file, and the two quantized files */
    r = RUN("eval", "--model", "lenet", "--checkpoint", ck, "--data-dir", data_dir);
    double acc = eval_accuracy(r.out);
    check_clean_exit(&r);
    result_free(&r);
    const char *files[] = {f_onnx, q_static, q_dynamic};
    double got[3];
    for (int i = 0; i < 3; i++) {
        r = RUN("eval", "--onnx", files[i], "--data-dir", data_dir);
        check_clean_exit(&r);
        got[i] = eval_accuracy(r.out);
        CHECK(has(r.out, "(128 test samples)"));
        result_free(&r);
    }
    printf("  accuracy: checkpoint %.4f, onnx %.4f, static %.4f, dynamic %.4f\n", acc, got[0],
           got[1], got[2]);
    CHECK(acc > 0.5);           /* the synthetic classes are easy: the model learned them */
    CHECK(got[0] == acc);       /* the exported file is the same model */
    CHECK(got[1] >= acc - 0.1); /* int8 moves a few of the 128 samples at most */
    CHECK(got[2] >= acc - 0.1);
}

static void test_errors(void) {
    check_usage_error(RUN("quantize", "--onnx", f_onnx, "--out", "x.onnx", "--mode", "int3"),
                      "tessera: --mode: expected static, dynamic or int4, got 'int3'\n");
    check_usage_error(RUN("quantize", "--onnx", f_onnx, "--out", "x.onnx"),
                      "tessera: quantize: --mode static needs calibration data: --data NAME (the "
                      "model's input samples; --mode dynamic needs none)\n");
    check_usage_error(RUN("quantize", "--onnx", f_onnx),
                      "tessera: quantize: needs --out FILE.onnx (the file to write)\n");
    check_usage_error(RUN("quantize", "--out", "x.onnx"),
                      "tessera: quantize: needs --onnx FILE, or --model M --checkpoint DIR (a "
                      "trained model, exported first)\n");
    check_usage_error(RUN("quantize", "--onnx", f_onnx, "--checkpoint", ck, "--out", "x.onnx"),
                      "tessera: quantize: give either --onnx FILE or --model with --checkpoint, "
                      "not both\n");
    check_usage_error(RUN("quantize", "--onnx", f_onnx, "--out", "x.onnx", "--mode", "dynamic",
                          "--calib-batches", "2"),
                      "tessera: --calib-batches: only with --mode static\n");
    check_usage_prefix(RUN("quantize", "--onnx", f_onnx, "--out", "x.onnx", "--mode", "int4"),
                       "tessera: quantize: onnx_quantize: mode int4: not supported");
    check_usage_error(RUN("quantize", "--onnx", TS_QUANTIZE_DATA "/relu.onnx", "--out", "x.onnx",
                          "--mode", "dynamic"),
                      "tessera: quantize: onnx_quantize: nothing to quantize: no MatMul or Gemm "
                      "with a float32 weight initializer\n");
    check_usage_prefix(RUN("quantize", "--onnx", q_dynamic, "--out", "x.onnx", "--mode", "dynamic"),
                       "tessera: quantize: onnx_quantize: the model is already quantized");
    check_usage_prefix(RUN("eval", "--onnx", "/nonexistent/m.onnx", "--data-dir", data_dir),
                       "tessera: --onnx: onnx_load: cannot open /nonexistent/m.onnx");
    check_usage_error(RUN("eval", "--onnx", f_onnx, "--checkpoint", ck),
                      "tessera: eval: give either --checkpoint or --onnx, not both\n");
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot make a temporary folder");
    snprintf(data_dir, sizeof data_dir, "%s/data", trainer_dir);
    snprintf(ck, sizeof ck, "%s/ck", trainer_dir);
    snprintf(q_static, sizeof q_static, "%s/static.onnx", trainer_dir);
    snprintf(q_dynamic, sizeof q_dynamic, "%s/dynamic.onnx", trainer_dir);
    snprintf(f_onnx, sizeof f_onnx, "%s/float.onnx", trainer_dir);
    test_quantize();
    test_errors();
    trainer_cleanup();
    return ts_test_finish();
}
#endif
