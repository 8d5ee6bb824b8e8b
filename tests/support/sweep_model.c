/* sweep_model.c — the sweeps' shared model, batch and training step (sweep_model.h). */
#include "sweep_model.h"

ts_module *sweep_mlp_new(ts_device dev) {
    ts_manual_seed(5);
    ts_device_push(dev);
    ts_module *layers[] = {ts_linear_new(6, 8), ts_relu_new(), ts_linear_new(8, 3)};
    ts_module *m = ts_sequential_new(3, layers);
    ts_device_pop();
    return m;
}

void sweep_batch_new(ts_device dev, ts_tensor **x, ts_tensor **y) {
    ts_manual_seed(11);
    ts_scope_begin();
    *x = ts_keep(ts_to(ts_randn(TS_SHAPE(5, 6), (ts_opts){0}), dev));
    *y = ts_keep(ts_to(ts_randint(0, 3, TS_SHAPE(5), (ts_opts){0}), dev));
    ts_scope_end();
}

bool sweep_train_step(ts_module *m, ts_optim *o, ts_tensor *x, ts_tensor *y) {
    ts_scope_begin();
    ts_optim_zero_grad(o);
    ts_backward(ts_cross_entropy(ts_forward(m, x), y));
    ts_optim_step(o);
    ts_scope_end();
    return ts_error() == TS_OK;
}
