/* bench_train.c — training-step time and training-time memory growth of the models on the
 * cpu: linear regression (seed), SimpleNN 784-128-10 b64, SimpleCNN b64, MLP 784-1024-1024-10 b256,
 * ResNet-18 with the CIFAR stem b64 and ResNet-20 b128 on 32x32 images (SGD momentum 0.9).
 * Prints "name ms_per_step peak_mb gflop_per_step" lines (0: not counted) that bench/run_train.sh
 * sets beside PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_models.h"
#include "bench_rss.h"
#include "tessera.h"

#define BENCH_NAME "bench_train"
#include "bench_util.h"

/* Floating-point operations of one training step of a CIFAR-style ResNet of BasicBlocks (`blocks`
 * per stage, stage s with width << s channels at side >> s, the first block of a later stage
 * strided) on a batch of s x s images: 2 per multiply-add of the convs and fc, three products each
 * (forward, input and weight gradients) except the stem's input gradient, which nobody needs.
 * Batch norm, ReLU, pooling and the optimizer are not counted. projection: 1x1 shortcut convs. */
static double resnet_step_flops(int stages, int blocks, int64_t width, int64_t in_ch, int64_t side,
                                bool projection, int64_t classes, int64_t batch) {
    const double stem = 9.0 * (double)(in_ch * width * side * side);
    double macs = 0;
    int64_t c = width;
    for (int s = 0; s < stages; s++) {
        const int64_t planes = width << s, hw = (side >> s) * (side >> s);
        for (int b = 0; b < blocks; b++) {
            const int64_t cin = b ? planes : c;
            macs += 9.0 * (double)((cin + planes) * planes * hw);
            if (!b && cin != planes && projection) macs += (double)(cin * planes * hw);
        }
        c = planes;
    }
    macs += (double)(c * classes);
    return (double)batch * (2.0 * 3.0 * macs + 2.0 * 2.0 * stem);
}

/* ms per step: best of `repeats` means over `steps` steps, after warm-up. BENCH_AUTOCAST=1: forward
 * and loss under a bf16 autocast region (the figures are then autocast steps).
 * BENCH_CHANNELS_LAST=1: image inputs in the channels_last memory format (the convolutions,
 * batch-norms and activations then stay NHWC; bench_train_torch.py converts its model and input
 * the same way). */
static void bench_model(const char *name, ts_module *m, ts_tensor *x, ts_tensor *y, double lr,
                        double momentum, int steps, int repeats, double flops) {
    ts_optim *opt = ts_sgd_new(m, (ts_sgd_opts){.lr = lr, .momentum = momentum});
    long rss0 = rss_reset();
    const bool autocast = getenv("BENCH_AUTOCAST") != NULL;
    if (getenv("BENCH_CHANNELS_LAST") && ts_ndim(x) == 4)
        x = ts_contiguous_format(x, TS_CHANNELS_LAST);
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            ts_optim_zero_grad(opt);
            if (autocast) ts_autocast_begin(TS_CPU, TS_BF16);
            ts_tensor *loss = ts_cross_entropy(ts_forward(m, x), y);
            if (autocast) ts_autocast_end();
            ts_backward(loss);
            ts_optim_step(opt);
            ts_scope_end();
        }
        double dt = (now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt; /* round 0 warms caches and the allocator */
    }
    long peak = status_kb("VmHWM:");
    die_on_error(name);
    printf("%s %.4f %.2f %.4f\n", name, best, (double)(peak - rss0) / 1024.0, flops / 1e9);
    fflush(stdout);
    ts_optim_free(opt);
    ts_module_free(m);
}

static void bench_linreg(int steps, int repeats) {
    ts_tensor *X = ts_rand(TS_SHAPE(100, 10), (ts_opts){0});
    ts_tensor *y = ts_rand(TS_SHAPE(100, 1), (ts_opts){0});
    ts_tensor *W = ts_rand(TS_SHAPE(10, 1), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_sgd_new_params(&W, 1, (ts_sgd_opts){.lr = 0.01});
    long rss0 = rss_reset();
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            ts_optim_zero_grad(opt);
            ts_tensor *error = ts_sub(ts_mm(X, W), y);
            ts_tensor *loss = ts_mean(ts_pow_scalar(error, 2));
            ts_backward(loss);
            ts_optim_step(opt);
            ts_scope_end();
        }
        double dt = (now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt;
    }
    long peak = status_kb("VmHWM:");
    die_on_error("linreg");
    printf("linreg %.4f %.2f 0\n", best, (double)(peak - rss0) / 1024.0);
    fflush(stdout);
    ts_optim_free(opt);
    ts_release(X);
    ts_release(y);
    ts_release(W);
}

/* Floating-point operations of one training step of an MLP over a batch: per layer the forward
 * product and the weight gradient, and the input gradient of every layer but the first (2 per
 * multiply-add). The bias, ReLU, the loss and the optimizer are not counted. */
static double mlp_step_flops(const int64_t *dims, int n, int64_t batch) {
    double f = 0;
    for (int l = 0; l + 1 < n; l++) f += (l ? 6.0 : 4.0) * (double)(batch * dims[l] * dims[l + 1]);
    return f;
}

/* The MLP 784-1024-1024-10 step's GEMMs alone, in the linear layers' layouts (y = x W^T, the weight
 * gradient g^T x, the input gradient g W but for the first layer): issue 14 asks for them at >= 85%
 * of the host's peak; the whole step's rate includes ReLU, the loss, the bias sums and the
 * optimizer. Printed like a model with its flops, so run_train.sh gives the share of peak. */
static void bench_mlp_gemms(int steps, int repeats) {
    const int64_t dims[4] = {784, 1024, 1024, 10}, batch = 256;
    ts_tensor *h[3], *w[3], *g[3];
    for (int l = 0; l < 3; l++) {
        h[l] = ts_randn(TS_SHAPE(batch, dims[l]), (ts_opts){0});
        w[l] = ts_randn(TS_SHAPE(dims[l + 1], dims[l]), (ts_opts){0});
        g[l] = ts_randn(TS_SHAPE(batch, dims[l + 1]), (ts_opts){0});
    }
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            for (int l = 0; l < 3; l++) {
                ts_mm(h[l], ts_t(w[l]));
                ts_mm(ts_t(g[l]), h[l]);
                if (l) ts_mm(g[l], w[l]);
            }
            ts_scope_end();
        }
        double dt = (now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt;
    }
    die_on_error("mlp_gemms");
    printf("mlp_gemms %.4f 0 %.4f\n", best, mlp_step_flops(dims, 4, batch) / 1e9);
    fflush(stdout);
    for (int l = 0; l < 3; l++) ts_release(h[l]), ts_release(w[l]), ts_release(g[l]);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    int scale = quick ? 1 : 4;
    const char *only = argc > 2 ? argv[2] : NULL; /* one model, for profiling */
#define WANT(name) (!only || !strcmp(only, name))
    ts_manual_seed(0);
    if (WANT("linreg")) bench_linreg(500 * scale, 3);

    ts_tensor *x = ts_randn(TS_SHAPE(64, 784), (ts_opts){0});
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(64), (ts_opts){0});
    if (WANT("simplenn"))
        bench_model("simplenn", mlp_new((int64_t[]){784, 128, 10}, 3), x, y, 0.01, 0, 50 * scale, 3,
                    mlp_step_flops((int64_t[]){784, 128, 10}, 3, 64));

    ts_tensor *img = ts_randn(TS_SHAPE(64, 3, 32, 32), (ts_opts){0});
    if (WANT("simplecnn"))
        bench_model("simplecnn", simple_cnn_new(), img, y, 0.001, 0.9, 10 * scale, 3, 0);

    ts_tensor *xb = ts_randn(TS_SHAPE(256, 784), (ts_opts){0});
    ts_tensor *yb = ts_randint(0, 10, TS_SHAPE(256), (ts_opts){0});
    if (WANT("mlp"))
        bench_model("mlp", mlp_new((int64_t[]){784, 1024, 1024, 10}, 4), xb, yb, 0.01, 0, 5 * scale,
                    3, mlp_step_flops((int64_t[]){784, 1024, 1024, 10}, 4, 256));
    if (WANT("mlp") || WANT("mlp_gemms")) bench_mlp_gemms(5 * scale, 3);

    /* ResNets in training mode (batch statistics), as the trainer runs them on CIFAR-10 */
    if (WANT("resnet18"))
        bench_model("resnet18",
                    ts_resnet18_new((ts_resnet_config){.num_classes = 10, .cifar_stem = true}), img,
                    y, 0.1, 0.9, scale, 2, resnet_step_flops(4, 2, 64, 3, 32, true, 10, 64));
    ts_tensor *img128 = ts_randn(TS_SHAPE(128, 3, 32, 32), (ts_opts){0});
    ts_tensor *y128 = ts_randint(0, 10, TS_SHAPE(128), (ts_opts){0});
    if (WANT("resnet20"))
        bench_model("resnet20", ts_resnet20_new((ts_resnet_config){0}), img128, y128, 0.1, 0.9,
                    2 * scale, 2, resnet_step_flops(3, 3, 16, 3, 32, false, 10, 128));
    ts_release(img128);
    ts_release(y128);
    ts_release(x);
    ts_release(y);
    ts_release(img);
    ts_release(xb);
    ts_release(yb);
    return 0;
}
