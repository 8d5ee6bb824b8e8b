/* lenet_model.c — LeNet-5's shape for the tests (lenet_model.h). */
#include "lenet_model.h"

typedef struct lenet {
    ts_module base;
    ts_module *c1, *c2, *f1, *f2, *f3;
} lenet;

static ts_tensor *lenet_forward(ts_module *self, ts_tensor *x) {
    lenet *m = (lenet *)self;
    const ts_pool2d_opts pool = {.kernel = {2, 2}};
    x = ts_max_pool2d(ts_relu(ts_forward(m->c1, x)), pool);
    x = ts_max_pool2d(ts_relu(ts_forward(m->c2, x)), pool);
    x = ts_relu(ts_forward(m->f1, ts_flatten(x, 1, -1)));
    return ts_forward(m->f3, ts_relu(ts_forward(m->f2, x)));
}

ts_module *ts_test_lenet_new(int64_t in_channels, int padding) {
    lenet *m = ts_module_alloc(sizeof *m, "LeNet", lenet_forward);
    const ts_conv2d_opts first = {.padding = {padding, padding}};
    m->c1 = ts_module_add(&m->base, "c1", ts_conv2d_new(in_channels, 6, 5, first));
    m->c2 = ts_module_add(&m->base, "c2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->f1 = ts_module_add(&m->base, "f1", ts_linear_new(16 * 5 * 5, 120));
    m->f2 = ts_module_add(&m->base, "f2", ts_linear_new(120, 84));
    m->f3 = ts_module_add(&m->base, "f3", ts_linear_new(84, 10));
    return &m->base;
}
