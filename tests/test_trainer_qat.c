/* test_trainer_qat.c — `tessera train --qat [--qat-from CHECKPOINT]` and `tessera eval` of a QAT
 * checkpoint end to end on the synthetic IDX data: a float LeNet-5 fine-tuned with QAT prints that
 * QAT is on and the observed ranges of its five layers, saves PyTorch's QAT state-dict keys, and
 * its printed test accuracy is the fake-quantized model's (recomputed here from the saved weights
 * through ts_qat_prepare, and different from the float model's logits); eval reports the same; the
 * mistakes. The harness: support/trainer_run.c. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/quant.h"
#include "trainer_run.h"
#include "ts_test.h"

/* the trainer's LeNet-5 (tools/tessera/models.c) built here */
typedef struct lenet {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} lenet;

static ts_tensor *lenet_forward(ts_module *self, ts_tensor *x) {
    lenet *m = (lenet *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_flatten(x, 1, -1);
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}

static ts_module *lenet_new(void) {
    lenet *m = ts_module_alloc(sizeof *m, "LeNet5", lenet_forward);
    m->conv1 = ts_module_add(&m->base, "conv1",
                             ts_conv2d_new(1, 6, 5, (ts_conv2d_opts){.padding = {2, 2}}));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(16 * 5 * 5, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, CLASSES));
    return &m->base;
}

/* The saved weights in a LeNet (prepared for QAT or not), in eval mode on the test images: the
 * logits [NTEST, CLASSES] into out and the accuracy. */
static double lenet_accuracy(const char *weights, bool qat, float *out) {
    ts_tensor_list sd = {0}, use = {0};
    ts_module *m = lenet_new();
    bool ok = m && (!qat || ts_qat_prepare(m, (ts_qat_opts){0}) == TS_OK) &&
              !ts_safetensors_load(weights, ts_cpu(), &sd);
    for (int i = 0; i < sd.n; i++) /* the float model: the weights and biases alone */
        if (qat ||
            (!strstr(sd.names[i], "fake_quant") && !strstr(sd.names[i], "activation_post_process")))
            ts_tensor_list_add(&use, sd.names[i], sd.tensors[i]);
    ok = ok && !ts_module_load_state_dict(m, &use, true);
    CHECK(ok);
    ts_tensor_list_free(&sd);
    ts_tensor_list_free(&use);
    static float x[NTEST * SIDE * SIDE];
    for (int i = 0; i < NTEST * SIDE * SIDE; i++) /* --data mnist: MNIST's mean and std */
        x[i] = ((float)trainer_test_img[i] / 255.0f - 0.1307f) / 0.3081f;
    ts_scope_begin();
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_tensor *logits =
        ts_forward(m, ts_tensor_f32(TS_SHAPE(NTEST, 1, SIDE, SIDE), x, (ts_opts){0}));
    ts_no_grad_end();
    CHECK(logits && ts_copy_to_host(logits, out, NTEST * CLASSES * sizeof(float)) == TS_OK);
    int correct = 0;
    for (int i = 0; i < NTEST; i++) {
        int best = 0;
        for (int k = 1; k < CLASSES; k++)
            if (out[i * CLASSES + k] > out[i * CLASSES + best]) best = k;
        correct += best == trainer_test_lab[i];
    }
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
    return (double)correct / NTEST;
}

/* "test loss L  test accuracy A" of tessera eval */
static double eval_accuracy(const char *out) {
    const char *p = out ? strstr(out, "test accuracy ") : NULL;
    return p ? atof(p + 14) : -1;
}

static void test_qat(void) {
    /* a float model, then QAT from it */
    result r = RUN("train", DATA, "--model", "lenet", "--epochs", "1", "--checkpoint",
                   path_in("float", NULL), "--progress", "none");
    check_clean_exit(&r);
    result_free(&r);
    r = RUN("train", DATA, "--model", "lenet", "--epochs", "1", "--qat", "--qat-from",
            path_in("float", NULL), "--checkpoint", path_in("qat", NULL), "--progress", "none");
    check_clean_exit(&r);
    char line[512];
    snprintf(line, sizeof line, "; from %s (float)\n", path_in("float", "latest.safetensors"));
    CHECK(r.out &&
          strstr(r.out, "quantization-aware training: weights fake-quantized per channel"));
    CHECK(r.out && strstr(r.out, line));
    CHECK(r.out && strstr(r.out, "qat: observed ranges"));
    const char *layers[] = {"  conv1 ", "  conv2 ", "  fc1 ", "  fc2 ", "  fc3 "};
    for (int i = 0; i < 5; i++) CHECK(r.out && strstr(r.out, layers[i]));
    const double printed = final_accuracy(r.out);
    result_free(&r);
    /* the saved state: PyTorch's QAT keys with trained qparams */
    ts_tensor_list sd = {0};
    CHECK(ts_safetensors_load(path_in("qat", "model.safetensors"), ts_cpu(), &sd) == TS_OK);
    ts_tensor *s = ts_tensor_list_get(&sd, "conv1.weight_fake_quant.scale"),
              *mn = ts_tensor_list_get(&sd, "fc3.activation_post_process.activation_post_process."
                                            "min_val");
    CHECK(s && ts_numel(s) == 6 && mn && isfinite(ts_item(mn)));
    CHECK(ts_tensor_list_get(&sd, "conv2.activation_post_process.zero_point") != NULL);
    ts_tensor_list_free(&sd);
    /* the printed accuracy is the fake-quantized model's, which differs from the float one's */
    static float lq[NTEST * CLASSES], lf[NTEST * CLASSES];
    const double acc = lenet_accuracy(path_in("qat", "model.safetensors"), true, lq);
    CHECK_NEAR(printed, acc, 5e-5);
    lenet_accuracy(path_in("qat", "model.safetensors"), false, lf);
    double diff = 0;
    for (int i = 0; i < NTEST * CLASSES; i++) diff = fmax(diff, fabs(lq[i] - lf[i]));
    CHECK(diff > 1e-4);
    /* eval of the QAT checkpoint: the same figure, said to be fake-quantized */
    r = RUN("eval", DATA, "--model", "lenet", "--checkpoint", path_in("qat", NULL));
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "fake-quantized (QAT)"));
    CHECK_NEAR(eval_accuracy(r.out), acc, 5e-5);
    result_free(&r);
    /* the float checkpoint's eval is not */
    r = RUN("eval", DATA, "--model", "lenet", "--checkpoint", path_in("float", NULL));
    check_clean_exit(&r);
    CHECK(r.out && !strstr(r.out, "fake-quantized"));
    result_free(&r);
    /* an mlp from scratch, a few steps */
    r = RUN("train", DATA, "--model", "mlp", "--max-steps", "3", "--qat", "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "  fc2 ") && final_accuracy(r.out) >= 0);
    result_free(&r);
}

static void test_mistakes(void) {
    check_usage_error(RUN("train", "--qat-from", "x"), "tessera: --qat-from: only with --qat\n");
    check_usage_error(RUN("train", DATA, "--qat", "--amp"),
                      "tessera: --qat: not with --amp (fake quantization runs in float32 on one "
                      "device, eagerly)\n");
    check_usage_error(RUN("train", DATA, "--qat", "--devices", "sim:0,sim:1"),
                      "tessera: --qat: not with --devices (fake quantization runs in float32 on "
                      "one device, eagerly)\n");
    check_usage_error(RUN("train", DATA, "--qat", "--qat-from", path_in("nowhere", NULL)),
                      "tessera: --qat-from: no checkpoint at '%s'\n", path_in("nowhere", NULL));
    /* a checkpoint of another model: refused with the library's message */
    check_usage_prefix(
        RUN("train", DATA, "--model", "mlp", "--qat", "--qat-from", path_in("float", NULL)),
        "tessera: --qat-from: ");
    result r = RUN("train", "--help");
    CHECK(r.out && strstr(r.out, "--qat-from CKPT"));
    result_free(&r);
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_qat();
    test_mistakes();
    trainer_cleanup();
    return ts_test_finish();
}
