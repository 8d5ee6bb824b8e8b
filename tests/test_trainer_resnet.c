/* test_trainer_resnet.c — the `tessera` command's residual networks: ResNet defaults, BatchNorm in
 * train mode while training and eval mode for the test figures, exact resume mid-epoch, resnet18
 * on CIFAR-10 files, augmentation reaching the batches, and the mistakes. The harness:
 * support/trainer_run.c. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer_run.h"
#include "ts_test.h"

/* Test loss and accuracy of a saved ResNet-20 on the test images, computed here through the library
 * in eval mode: what the trainer prints must be the eval-mode figures (running statistics), not
 * the batch statistics of train mode. */
static bool resnet_reference(const char *weights, int64_t width, double *loss, double *acc) {
    ts_tensor_list sd = {0};
    ts_module *m = ts_resnet20_new((ts_resnet_config){.in_channels = 1, .width = width});
    bool ok = m && !ts_safetensors_load(weights, ts_cpu(), &sd) &&
              !ts_module_load_state_dict(m, &sd, true);
    ts_tensor_list_free(&sd);
    static float x[NTEST * SIDE * SIDE];
    for (int i = 0; i < NTEST * SIDE * SIDE; i++) /* --data mnist: MNIST's mean and std */
        x[i] = ((float)trainer_test_img[i] / 255.0f - 0.1307f) / 0.3081f;
    int64_t y[NTEST];
    for (int i = 0; i < NTEST; i++) y[i] = trainer_test_lab[i];
    ts_scope_begin();
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_tensor *logits =
        ts_forward(m, ts_tensor_f32(TS_SHAPE(NTEST, 1, SIDE, SIDE), x, (ts_opts){0}));
    ts_tensor *target = ts_tensor_i64(TS_SHAPE(NTEST), y, (ts_opts){0});
    ts_no_grad_end();
    *loss = ts_item(ts_cross_entropy(logits, target));
    *acc = ts_item(ts_sum(ts_eq(ts_argmax_dim(logits, 1, false), target))) / NTEST;
    ts_scope_end();
    ts_module_free(m);
    ok &= ts_error() == TS_OK;
    ts_error_clear();
    return ok;
}

/* "test loss L acc A" of the last epoch line */
static double last_test_loss(const char *out) {
    epoch_line e[8];
    int n = parse_epochs(out, e, 8);
    return n ? e[n - 1].test_loss : -1;
}

/* CIFAR-10 binary batches of 32x32 colour images, `per` records each: class k a coloured square. */
static void write_cifar(const char *dir, int per) {
    mkdir(path_in(dir, NULL), 0777);
    const char *names[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    uint32_t seed = 11;
    static uint8_t rec[3073];
    for (int f = 0; f < 6; f++) {
        FILE *fp = fopen(path_in(dir, names[f]), "wb");
        for (int i = 0; i < per; i++) {
            int k = (int)(lcg(&seed) >> 8) % CLASSES;
            rec[0] = (uint8_t)k;
            for (int j = 1; j < 3073; j++) rec[j] = (uint8_t)(lcg(&seed) >> 26);
            for (int r = 4 + (k / 5) * 12; r < 14 + (k / 5) * 12; r++)
                for (int c = 2 + (k % 5) * 6; c < 6 + (k % 5) * 6; c++)
                    rec[1 + (k % 3) * 1024 + r * 32 + c] = 200;
            fwrite(rec, 1, sizeof rec, fp);
        }
        fclose(fp);
    }
}

/* --model resnet20 / resnet18: ResNet defaults (SGD lr 0.1, weight decay 5e-4, batch 128, random
 * crop and flip), BatchNorm in train mode while training (running statistics move) and in eval mode
 * for the test figures (recomputed here from the saved weights), exact resume mid-epoch with the
 * BatchNorm buffers and the augmentation, resnet18 on CIFAR-10 files, and the mistakes. */
static void test_resnet(void) {
/* on the CPU: resuming is byte-exact where the kernels are deterministic (cuDNN's may not be) */
#define R20(dir)                                                                                   \
    "train", "--model", "resnet20", "--device", "cpu", "--width", "4", DATA, "--epochs", "2",      \
        "--batch-size", "64", "--seed", "3", "--augment", "on", "--progress", "none",              \
        "--checkpoint-every", "4", "--checkpoint", path_in(dir, NULL)
    result r = RUN(R20("r20"));
    check_clean_exit(&r);
    /* 17326 at 3 input channels (tests/test_golden_resnet.c's r20n) less conv1's 2 x 4 x 9 */
    CHECK(r.out && strstr(r.out, "ResNet-20 (17254 parameters) on MNIST"));
    CHECK(r.out && strstr(r.out, "batch 64, SGD lr 0.1 momentum 0.9 weight decay 0.0005 cosine "
                                 "decay, seed 3, random crop (padding 4) and flip\n"));
    epoch_line e[2];
    CHECK_EQ(parse_epochs(r.out, e, 2), 2);
    double printed_acc = final_accuracy(r.out), printed_loss = last_test_loss(r.out);
    if (exit_code(&r) != 0) fprintf(stderr, "  resnet20: %s", r.out ? r.out : "");
    result_free(&r);
    /* train mode while training: 16 batches counted, running statistics away from 0 and 1 */
    const char *model = path_in("r20", "model.safetensors");
    CHECK_EQ(tensor_i64(model, "layer2.1.bn1.num_batches_tracked"), 16);
    ts_tensor_list sd = {0};
    ts_safetensors_load(model, ts_cpu(), &sd);
    ts_tensor *rv = ts_tensor_list_get(&sd, "layer3.2.bn2.running_var");
    ts_scope_begin();
    CHECK(rv && ts_item(ts_max(ts_abs(ts_sub_scalar(rv, 1)))) > 1e-3);
    ts_scope_end();
    ts_tensor_list_free(&sd);
    CHECK_OK();
    /* eval mode for the test: the figures of the saved weights with their running statistics */
    double ref_loss = -1, ref_acc = -1;
    CHECK(resnet_reference(model, 4, &ref_loss, &ref_acc));
    CHECK_NEAR(printed_loss, ref_loss, 1e-4); /* printed with 4 decimals */
    CHECK_NEAR(printed_acc, ref_acc, 0.5 / NTEST);
    /* eval is not augmented: any --seed gives the trainer's figures */
    for (int i = 0; i < 2; i++) {
        r = RUN("eval", "--model", "resnet20", "--width", "4", DATA, "--seed", i ? "9" : "1",
                "--checkpoint", path_in("r20", NULL));
        check_clean_exit(&r);
        const char *p = r.out ? strstr(r.out, "test accuracy ") : NULL;
        CHECK(p && fabs(strtod(p + 14, NULL) - printed_acc) < 1e-9);
        CHECK(r.out && strstr(r.out, "ResNet-20 on MNIST"));
        result_free(&r);
    }

    /* killed after batch 13, past the mid-epoch save at step 12 (8 batches an epoch), resumed:
     * the uninterrupted run's files, byte for byte (weights, BatchNorm buffers, momentum) */
    r = RUN_ENV("TS_TRAIN_KILL_AFTER_BATCHES=13", R20("r20cut"));
    CHECK(killed(&r));
    result_free(&r);
    CHECK_EQ(checkpoint_step(path_in("r20cut", "latest.safetensors")), 12);
    r = RUN(R20("r20cut"), "--resume");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "at step 12: epoch 2, batch 4"));
    result_free(&r);
    CHECK(same_file(path_in("r20", "latest.safetensors"), path_in("r20cut", "latest.safetensors")));
    CHECK(same_file(model, path_in("r20cut", "model.safetensors")));
#undef R20

    /* without --augment the ResNets augment CIFAR-10 only: the line says nothing of augmentation
     * on these grey images, nor with --augment off */
    r = RUN("train", "--model", "resnet20", "--width", "4", DATA, "--max-steps", "2", "--progress",
            "none");
    check_clean_exit(&r);
    CHECK(r.out && !strstr(r.out, "random crop") && strstr(r.out, "batch 128,"));
    result_free(&r);
    r = RUN("train", "--model", "resnet20", "--width", "4", DATA, "--max-steps", "2", "--augment",
            "off", "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && !strstr(r.out, "random crop") && strstr(r.out, "batch 128,"));
    result_free(&r);

    /* resnet18 (CIFAR stem) on CIFAR-10 files of 3-channel 32x32 images */
    write_cifar("cifar", 40);
    r = RUN("train", "--model", "resnet18", "--width", "4", "--data", "cifar10", "--data-dir",
            path_in("cifar", NULL), "--max-steps", "3", "--batch-size", "32", "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "ResNet-18 (44622 parameters) on CIFAR-10 (200 train / 40 test)"));
    CHECK(r.out && strstr(r.out, "random crop (padding 4) and flip\n"));
    result_free(&r);

    write_toy_csv(path_in("toy.csv", NULL));
    check_usage_error(RUN("train", "--model", "resnet20", "--data", "csv", "--data-dir",
                          path_in("toy.csv", NULL), "--csv-target", "label"),
                      "tessera: --model resnet20: needs image data; use --model mlp for --data "
                      "csv\n");
    check_usage_error(RUN("train", "--model", "mlp", "--data", "csv", "--augment", "on"),
                      "tessera: --augment: only for images (--data fashion-mnist, mnist or "
                      "cifar10)\n");
    check_usage_error(RUN("train", "--model", "lenet", "--width", "8"),
                      "tessera: --width: only for --model resnet20 or resnet18\n");
    check_usage_error(RUN("train", "--model", "resnet18", "--augment", "yes"),
                      "tessera: --augment: expected on or off, got 'yes'\n");
    check_usage_error(RUN("train", "--model", "resnet20", "--data", "text"),
                      "tessera: --data text: needs --model gpt (a language model)\n");
    /* a resnet20 checkpoint is not a resnet18 */
    check_usage_prefix(RUN("eval", "--model", "resnet18", "--width", "4", DATA, "--checkpoint",
                           path_in("r20", NULL)),
                       "tessera: load_state_dict: Error(s) in loading state_dict for ResNet: "
                       "Missing key(s) in state_dict: \"layer2.0.downsample.0.weight\"");
}

/* Augmentation reaches the training batches: on the synthetic images a class is a position, and a
 * flip maps classes 0, 1, 5, 6 onto 4, 3, 9, 8 (2 and 7 onto themselves), so an MLP trained on
 * flipped images can tell at most 6 of 10 classes apart; without it, it learns them all. */
static void test_augment_mlp(void) {
    result r = RUN("train", "--model", "mlp", DATA, "--augment", "on", "--epochs", "3",
                   "--progress", "none");
    check_clean_exit(&r);
    CHECK(r.out && strstr(r.out, "random crop (padding 4) and flip"));
    double acc = final_accuracy(r.out);
    CHECK(acc >= 0 && acc < 0.75);
    if (!(acc < 0.75)) fprintf(stderr, "  mlp with augmentation: %s", r.out ? r.out : "");
    result_free(&r);
    r = RUN("train", "--model", "mlp", DATA, "--augment", "off", "--epochs", "3", "--progress",
            "none");
    check_clean_exit(&r);
    CHECK(final_accuracy(r.out) >= 0.9);
    result_free(&r);
}

int main(void) {
    if (!trainer_setup(TS_TESSERA_BIN)) return ts_test_skip("cannot create a temporary folder");
    test_resnet();
    test_augment_mlp();
    trainer_cleanup();
    return ts_test_finish();
}
