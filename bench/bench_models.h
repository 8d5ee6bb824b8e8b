/* bench_models.h — the benchmarked models, shared by bench_train.c (cpu) and bench_gpu.c (cuda):
 * SimpleCNN (the CIFAR-10 tutorial's) and an MLP of given sizes with ReLU between layers. */
#ifndef TS_BENCH_MODELS_H
#define TS_BENCH_MODELS_H

#include "tessera.h"

typedef struct {
    ts_module base;
    ts_module *seq;
} wrap;

static inline ts_tensor *wrap_forward(ts_module *self, ts_tensor *x) {
    return ts_forward(((wrap *)self)->seq, x);
}

typedef struct {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} simple_cnn;
static inline ts_tensor *simple_cnn_forward(ts_module *self, ts_tensor *x) {
    simple_cnn *m = (simple_cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_view(x, TS_SHAPE(-1, 400));
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}
static inline ts_module *simple_cnn_new(void) {
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

static inline ts_module *mlp_new(const int64_t *sizes, int n) {
    ts_module *seq = ts_sequential_new(0, NULL);
    for (int i = 0; i + 1 < n; i++) {
        ts_sequential_append(seq, ts_linear_new(sizes[i], sizes[i + 1]));
        if (i + 2 < n) ts_sequential_append(seq, ts_relu_new());
    }
    wrap *w = ts_module_alloc(sizeof *w, "MLP", wrap_forward);
    w->seq = ts_module_add(&w->base, "seq", seq);
    return &w->base;
}

#endif /* TS_BENCH_MODELS_H */
