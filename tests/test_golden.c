/* test_golden.c — Tessera against PyTorch on the seed models (files from tools/gen_golden.py): the
 * logits, loss and every gradient within f32 tolerance, batch-norm buffers, and 10-step loss
 * trajectories with SGD-momentum and Adam within 1e-4 relative, on cpu, sim:0 and cuda:0 when
 * present (tests/support/test_devices.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_util.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the models, as in the script
 */
typedef struct {
    ts_module base;
    ts_module *fc1, *fc2;
} simple_nn;
static ts_tensor *simple_nn_forward(ts_module *self, ts_tensor *x) {
    simple_nn *m = (simple_nn *)self;
    return ts_forward(m->fc2, ts_relu(ts_forward(m->fc1, x)));
}
static ts_module *simple_nn_new(void) {
    simple_nn *m = ts_module_alloc(sizeof *m, "SimpleNN", simple_nn_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(784, 128));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(128, 10));
    return &m->base;
}

typedef struct {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} simple_cnn;
static ts_tensor *simple_cnn_forward(ts_module *self, ts_tensor *x) {
    simple_cnn *m = (simple_cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_view(x, TS_SHAPE(-1, 16 * 5 * 5));
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}
static ts_module *simple_cnn_new(void) {
    simple_cnn *m = ts_module_alloc(sizeof *m, "SimpleCNN", simple_cnn_forward);
    m->conv1 = ts_module_add(&m->base, "conv1", ts_conv2d_new(3, 6, 5, (ts_conv2d_opts){0}));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(400, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, 10));
    return &m->base;
}

typedef struct {
    ts_module base;
    ts_module *linear;
} lin_reg;
static ts_tensor *lin_reg_forward(ts_module *self, ts_tensor *x) {
    return ts_forward(((lin_reg *)self)->linear, x);
}
static ts_module *lin_reg_new(void) {
    lin_reg *m = ts_module_alloc(sizeof *m, "LinReg", lin_reg_forward);
    m->linear = ts_module_add(&m->base, "linear", ts_linear_new(10, 1));
    return &m->base;
}

typedef struct {
    ts_module base;
    ts_module *conv, *bn, *pool, *fc;
} conv_bn;
static ts_tensor *conv_bn_forward(ts_module *self, ts_tensor *x) {
    conv_bn *m = (conv_bn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->bn, ts_forward(m->conv, x))));
    return ts_forward(m->fc, ts_flatten(x, 1, -1));
}
static ts_module *conv_bn_new(void) {
    conv_bn *m = ts_module_alloc(sizeof *m, "ConvBN", conv_bn_forward);
    m->conv = ts_module_add(&m->base, "conv",
                            ts_conv2d_new(1, 4, 3, (ts_conv2d_opts){.padding = {1, 1}}));
    m->bn = ts_module_add(&m->base, "bn", ts_batch_norm2d_new(4, (ts_norm_opts){0}));
    m->pool =
        ts_module_add(&m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}}));
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(64, 3));
    return &m->base;
}

typedef struct {
    const char *name;
    ts_module *(*build)(void);
    bool cross_entropy;
} golden_model;

static const golden_model MODELS[] = {
    {"simplenn", simple_nn_new, true},
    {"simplecnn", simple_cnn_new, true},
    {"linreg", lin_reg_new, false},
    {"convbn", conv_bn_new, true},
};

static ts_module *load_model(const golden_model *gm, const ts_tensor_list *file, ts_device dev) {
    ts_module *m = gm->build();
    ts_tensor_list sd = ts_golden_prefix(file, "model.");
    ts_module_load_state_dict(m, &sd, true);
    ts_tensor_list_free(&sd);
    return ts_module_to(m, dev);
}

static ts_tensor *loss_of(const golden_model *gm, ts_tensor *out, ts_tensor *target) {
    return gm->cross_entropy ? ts_cross_entropy(out, target) : ts_mse_loss(out, target);
}

/* ------------------------------------------------------------------ checks */
static void check_step(const golden_model *gm, const ts_tensor_list *file, ts_device dev) {
    ts_module *m = load_model(gm, file, dev);
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_tensor_list_get(file, "input"), dev);
    ts_tensor *y = ts_to(ts_tensor_list_get(file, "target"), dev);
    ts_tensor *out = ts_forward(m, x);
    ts_tensor *loss = loss_of(gm, out, y);
    ts_backward(loss);
    CHECK_OK();
    bool ok = ts_golden_close("logits", out, ts_tensor_list_get(file, "logits"), 1e-4, 1e-5);
    ok &= ts_golden_close("loss", loss, ts_tensor_list_get(file, "loss"), 1e-5, 1e-6);
    ts_tensor_list params = ts_module_named_parameters(m);
    for (int i = 0; i < params.n; i++) {
        char key[256];
        snprintf(key, sizeof key, "grad.%s", params.names[i]);
        ok &= ts_golden_close(key, ts_grad(params.tensors[i]), ts_tensor_list_get(file, key), 1e-3,
                              1e-5);
    }
    ts_tensor_list_free(&params);
    ts_tensor_list bufs = ts_module_named_buffers(m);
    for (int i = 0; i < bufs.n; i++) {
        char key[256];
        snprintf(key, sizeof key, "after.%s", bufs.names[i]);
        ts_tensor *want = ts_tensor_list_get(file, key);
        if (want) ok &= ts_golden_close(key, bufs.tensors[i], want, 1e-4, 1e-6);
    }
    ts_tensor_list_free(&bufs);
    ts_scope_end();
    ts_module_free(m);
    printf("golden %-9s %-5s logits, loss, gradients: %s\n", gm->name, ts_device_str(dev),
           ok ? "ok" : "MISMATCH");
    CHECK(ok);
}

static void check_trajectory(const golden_model *gm, const ts_tensor_list *file, ts_device dev,
                             bool adam) {
    ts_module *m = load_model(gm, file, dev);
    ts_optim *opt = adam ? ts_adam_new(m, (ts_adam_opts){.lr = 1e-3})
                         : ts_sgd_new(m, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
    double losses[10];
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_tensor_list_get(file, "input"), dev);
    ts_tensor *y = ts_to(ts_tensor_list_get(file, "target"), dev);
    for (int i = 0; i < 10; i++) {
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        ts_tensor *loss = loss_of(gm, ts_forward(m, x), y);
        ts_backward(loss);
        ts_optim_step(opt);
        losses[i] = ts_item(loss);
        ts_scope_end();
    }
    ts_tensor *got = ts_tensor_f64(TS_SHAPE(10), losses, (ts_opts){0});
    bool ok = ts_golden_close(adam ? "traj.adam" : "traj.sgd", got,
                              ts_tensor_list_get(file, adam ? "traj.adam" : "traj.sgd"), 1e-4, 0);
    ts_scope_end();
    CHECK_OK();
    ts_optim_free(opt);
    ts_module_free(m);
    printf("golden %-9s %-5s 10-step %-4s trajectory: %s (last loss %.6f)\n", gm->name,
           ts_device_str(dev), adam ? "Adam" : "SGD", ok ? "ok" : "MISMATCH", losses[9]);
    CHECK(ok);
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_device devices[TS_TEST_MAX_DEVICES];
    const int ndev = ts_test_devices(devices, TS_TEST_MAX_DEVICES);
    for (size_t k = 0; k < sizeof MODELS / sizeof *MODELS; k++) {
        ts_tensor_list file;
        if (!ts_golden_load(__FILE__, MODELS[k].name, &file)) {
            continue;
        }
        for (int d = 0; d < ndev; d++) {
            check_step(&MODELS[k], &file, devices[d]);
            check_trajectory(&MODELS[k], &file, devices[d], false);
            check_trajectory(&MODELS[k], &file, devices[d], true);
        }
        ts_tensor_list_free(&file);
    }
    return ts_test_finish();
}
