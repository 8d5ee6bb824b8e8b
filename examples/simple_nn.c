/* simple_nn.c — seed 001: SimpleNN (784-128-10) trained one step on the cpu, then the same code on
 * the device: only where the model and the data live changes. */
#include "common_device.h"

typedef struct {
    ts_module base;
    ts_module *fc1, *fc2;
} simple_nn;

static ts_tensor *simple_nn_forward(ts_module *self, ts_tensor *x) {
    simple_nn *m = (simple_nn *)self;
    x = ts_relu(ts_forward(m->fc1, x));
    return ts_forward(m->fc2, x);
}

static ts_module *simple_nn_new(void) {
    simple_nn *m = ts_module_alloc(sizeof *m, "SimpleNN", simple_nn_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(784, 128));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(128, 10));
    return &m->base;
}

/* One training step; returns the loss before the step and after it. */
static int train_step(ts_device dev, double *before, double *after) {
    ts_module *model = ts_module_to(simple_nn_new(), dev);
    ts_optim *opt = ts_sgd_new(model, (ts_sgd_opts){.lr = 0.01});
    ts_scope_begin();
    ts_tensor *input = ts_to(ts_randn(TS_SHAPE(64, 784), (ts_opts){0}), dev);
    ts_tensor *target = ts_to(ts_randint(0, 10, TS_SHAPE(64), (ts_opts){0}), dev);
    ts_tensor *loss = ts_cross_entropy(ts_forward(model, input), target);
    ts_optim_zero_grad(opt);
    ts_backward(loss);
    ts_optim_step(opt);
    *before = ts_item(loss);
    ts_no_grad_begin();
    *after = ts_item(ts_cross_entropy(ts_forward(model, input), target));
    ts_no_grad_end();
    ts_scope_end();
    ts_optim_free(opt);
    ts_module_free(model);
    EXAMPLE_CHECK();
    return 0;
}

int main(void) {
    ts_device dev = example_device();
    ts_manual_seed(0);
    ts_module *m = simple_nn_new();
    ts_module_summary(m);
    ts_module_free(m);
    double b0, a0, b1, a1;
    if (train_step(ts_cpu(), &b0, &a0) || train_step(dev, &b1, &a1)) return 1;
    printf("cpu: loss %.4f -> %.4f after one SGD step\n", b0, a0);
    printf("%s: loss %.4f -> %.4f after one SGD step\n", ts_device_str(dev), b1, a1);
    return a0 < b0 && a1 < b1 ? 0 : 1;
}
