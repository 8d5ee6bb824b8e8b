/* linear_regression.c — seed 002: the same linear regression four ways: with a hand-written
 * gradient (the NumPy version), with autograd on a weight tensor (cpu and device), and as an
 * nn.Linear module with MSELoss (cpu and device). 1000 epochs each, SGD lr 0.01. */
#include "common_device.h"

#define EPOCHS 1000

/* W -= lr * X^T (XW - y) / n, no autograd */
static double hand_gradient(ts_tensor *X, ts_tensor *y, ts_tensor *W) {
    double loss = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ts_scope_begin();
        ts_tensor *predictions = ts_mm(X, W);
        ts_tensor *error = ts_sub(predictions, y);
        loss = ts_item(ts_mean(ts_pow_scalar(error, 2)));
        ts_tensor *gradient = ts_div_scalar(ts_mm(ts_t(X), error), (double)ts_size(X, 0));
        ts_sub_(W, ts_mul_scalar(gradient, 0.01));
        ts_scope_end();
    }
    return loss;
}

static double with_autograd(ts_device dev, ts_tensor *Xc, ts_tensor *yc) {
    ts_scope_begin();
    ts_tensor *X = ts_keep(ts_to(Xc, dev)), *y = ts_keep(ts_to(yc, dev));
    ts_tensor *W =
        ts_keep(ts_rand(TS_SHAPE(10, 1), (ts_opts){.device = dev, .requires_grad = true}));
    ts_scope_end();
    ts_optim *opt = ts_sgd_new_params(&W, 1, (ts_sgd_opts){.lr = 0.01});
    double loss = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        ts_tensor *predictions = ts_mm(X, W);
        ts_tensor *error = ts_sub(predictions, y);
        ts_tensor *l = ts_mean(ts_pow_scalar(error, 2));
        ts_backward(l);
        ts_optim_step(opt);
        loss = ts_item(l);
        ts_scope_end();
    }
    ts_optim_free(opt);
    ts_release(W);
    ts_release(X);
    ts_release(y);
    return loss;
}

static double with_module(ts_device dev, ts_tensor *Xc, ts_tensor *yc) {
    ts_module *model = ts_module_to(ts_linear_new(10, 1), dev);
    ts_optim *opt = ts_sgd_new(model, (ts_sgd_opts){.lr = 0.01});
    ts_scope_begin();
    ts_tensor *X = ts_keep(ts_to(Xc, dev)), *y = ts_keep(ts_to(yc, dev));
    ts_scope_end();
    double loss = 0;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        ts_tensor *l = ts_mse_loss(ts_forward(model, X), y);
        ts_backward(l);
        ts_optim_step(opt);
        loss = ts_item(l);
        ts_scope_end();
    }
    ts_release(X);
    ts_release(y);
    ts_optim_free(opt);
    ts_module_free(model);
    return loss;
}

int main(void) {
    ts_device dev = example_device();
    ts_manual_seed(0);
    ts_tensor *X = ts_rand(TS_SHAPE(100, 10), (ts_opts){0});
    ts_tensor *y = ts_rand(TS_SHAPE(100, 1), (ts_opts){0});
    ts_tensor *W = ts_rand(TS_SHAPE(10, 1), (ts_opts){0});
    double l0 = hand_gradient(X, y, W);
    double l1 = with_autograd(ts_cpu(), X, y);
    double l2 = with_autograd(dev, X, y);
    double l3 = with_module(ts_cpu(), X, y);
    double l4 = with_module(dev, X, y);
    EXAMPLE_CHECK();
    printf("final MSE after %d epochs:\n", EPOCHS);
    printf("  hand-written gradient (cpu): %.5f\n", l0);
    printf("  autograd weight (cpu):       %.5f\n", l1);
    printf("  autograd weight (%s):     %.5f\n", ts_device_str(dev), l2);
    printf("  nn.Linear + MSE (cpu):       %.5f\n", l3);
    printf("  nn.Linear + MSE (%s):     %.5f\n", ts_device_str(dev), l4);
    ts_release(X);
    ts_release(y);
    ts_release(W);
    /* the data are uniform noise: every variant should settle near the same small error */
    return (l0 < 0.2 && l1 < 0.2 && l2 < 0.2 && l3 < 0.2 && l4 < 0.2) ? 0 : 1;
}
