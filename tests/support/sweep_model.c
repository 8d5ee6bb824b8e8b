/* sweep_model.c — the sweeps' shared model, batch and training step (sweep_model.h). */
#include "sweep_model.h"

#include <stdlib.h>

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

ts_snapshot sweep_trainee_snap(void *p) {
    sweep_trainee *t = p;
    return ts_snapshot_take(t->m, t->o, NULL);
}

bool sweep_trainee_step(void *p) {
    sweep_trainee *t = p;
    return sweep_train_step(t->m, t->o, t->x, t->y);
}

void sweep_trainee_free(void *p) {
    sweep_trainee *t = p;
    ts_optim_free(t->o);
    ts_module_free(t->m);
    ts_release(t->x), ts_release(t->y);
    free(t);
}
