/* models.c — the trainer's models: an MLP, LeNet-5, the CIFAR-10 tutorial's SimpleCNN and the
 * library's ResNet-20 and ResNet-18, sized from the data (input channels and size, classes). */
#include <string.h>

#include "cli.h"

/* ------------------------------------------------------------------ MLP */
typedef struct mlp {
    ts_module base;
    ts_module *fc1, *fc2;
} mlp;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    mlp *m = (mlp *)self;
    x = ts_flatten(x, 1, -1);
    x = ts_relu(ts_forward(m->fc1, x));
    return ts_forward(m->fc2, x);
}

static ts_module *mlp_new(int64_t in, int64_t classes) {
    mlp *m = ts_module_alloc(sizeof *m, "MLP", mlp_forward);
    if (!m) return NULL;
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(in, 128));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(128, classes));
    return &m->base;
}

/* ---------------------------------------------------- LeNet-5 and SimpleCNN */
/* Both are conv-relu-pool twice, then three linear layers; they differ in conv1's padding. */
typedef struct cnn {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} cnn;

static ts_tensor *cnn_forward(ts_module *self, ts_tensor *x) {
    cnn *m = (cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_flatten(x, 1, -1);
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}

static ts_module *cnn_new(const char *type, const tcli_data *d, int pad) {
    /* conv 5x5 (padding pad), pool 2, conv 5x5, pool 2 */
    int64_t h = ((d->height + 2 * pad - 4) / 2 - 4) / 2, w = ((d->width + 2 * pad - 4) / 2 - 4) / 2;
    if (h < 1 || w < 1) {
        tcli_fail(TCLI_USAGE, "--model: images of %lldx%lld are too small for %s",
                  (long long)d->height, (long long)d->width, type);
        return NULL;
    }
    cnn *m = ts_module_alloc(sizeof *m, type, cnn_forward);
    if (!m) return NULL;
    ts_conv2d_opts c1 = {.padding = {pad, pad}};
    m->conv1 = ts_module_add(&m->base, "conv1", ts_conv2d_new(d->channels, 6, 5, c1));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(16 * h * w, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, d->classes));
    return &m->base;
}

ts_module *tcli_model_new(const tcli_opts *o, const tcli_data *d) {
    const char *name = o->model;
    if (!strcmp(name, "gpt")) return tcli_gpt_new(o);
    if (!strcmp(name, "mlp")) return mlp_new(d->features, d->classes);
    if (!d->channels) {
        tcli_fail(TCLI_USAGE, "--model %s: needs image data; use --model mlp for --data %s", name,
                  "csv");
        return NULL;
    }
    if (!strcmp(name, "lenet")) return cnn_new("LeNet5", d, 2);
    /* every image data set the trainer reads is small (28x28, 32x32): resnet18 takes the CIFAR
     * stem, which keeps the resolution that the ImageNet stem's stride 4 would throw away */
    ts_resnet_config rc = {
        .num_classes = d->classes, .in_channels = d->channels, .width = o->width};
    if (!strcmp(name, "resnet20")) return ts_resnet20_new(rc);
    if (!strcmp(name, "resnet18")) {
        rc.cifar_stem = true;
        return ts_resnet18_new(rc);
    }
    return cnn_new("SimpleCNN", d, 0);
}

const char *tcli_model_title(const char *name) {
    return !strcmp(name, "mlp")        ? "MLP"
           : !strcmp(name, "lenet")    ? "LeNet-5"
           : !strcmp(name, "gpt")      ? "GPT"
           : !strcmp(name, "resnet20") ? "ResNet-20"
           : !strcmp(name, "resnet18") ? "ResNet-18"
                                       : "SimpleCNN";
}
