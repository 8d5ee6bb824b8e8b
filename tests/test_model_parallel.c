/* test_model_parallel.c — a two-stage model with its stages on two devices (ts_to between them):
 * the gradients of every device's parameters (and of the cpu input) pass ts_gradcheck in f64, land
 * on their parameters' devices, and equal those of the same model on one device; a few SGD steps
 * give the same losses. Device pairs: sim:0 + sim:1, cpu + sim:1, and two GPUs when present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

#define IN  4
#define MID 5
#define OUT 3

typedef struct two_stage {
    ts_module base;
    ts_module *stage1, *stage2;
    ts_device dev1, dev2;
} two_stage;

static ts_tensor *two_stage_forward(ts_module *self, ts_tensor *x) {
    two_stage *m = (two_stage *)self;
    ts_tensor *h = ts_forward(m->stage1, ts_to(x, m->dev1));
    return ts_forward(m->stage2, ts_to(h, m->dev2));
}

/* stage1 = Linear(4, 5) + Tanh (smooth, for the finite differences) on dev1, stage2 = Linear(5, 3)
 * on dev2; f64. */
static ts_module *two_stage_new(ts_device dev1, ts_device dev2) {
    two_stage *m = ts_module_alloc(sizeof *m, "TwoStage", two_stage_forward);
    m->dev1 = dev1;
    m->dev2 = dev2;
    ts_device_push(dev1);
    m->stage1 =
        ts_module_add(&m->base, "stage1",
                      ts_sequential_new(2, (ts_module *[]){ts_linear_new(IN, MID), ts_tanh_new()}));
    ts_device_pop();
    ts_device_push(dev2);
    m->stage2 = ts_module_add(&m->base, "stage2", ts_linear_new(MID, OUT));
    ts_device_pop();
    return ts_module_to_dtype(&m->base, TS_F64);
}

static double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return INFINITY;
    ts_scope_begin();
    double d = ts_item(ts_max(ts_abs(ts_sub(ts_to(a, ts_cpu()), ts_to(b, ts_cpu())))));
    ts_scope_end();
    return d;
}

static ts_tensor *f_model(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_forward(ctx, in[0]); /* in[1..4] are the model's own parameters */
}

static const char *param_names[4] = {"stage1.0.weight", "stage1.0.bias", "stage2.weight",
                                     "stage2.bias"};

static void check_pair(ts_device dev1, ts_device dev2) {
    printf("stages on %s and %s\n", ts_device_str(dev1), ts_device_str(dev2));
    ts_manual_seed(21);
    ts_module *net = two_stage_new(dev1, dev2);
    ts_device want[4] = {dev1, dev1, dev2, dev2};
    for (int i = 0; i < 4; i++)
        CHECK(ts_device_equal(ts_device_of(ts_module_get(net, param_names[i])), want[i]));

    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(6, IN), (ts_opts){.dtype = TS_F64, .device = ts_cpu()});
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_randint(0, OUT, TS_SHAPE(6), (ts_opts){.device = ts_cpu()});

    /* (1) gradcheck over the input and every parameter of both devices */
    ts_tensor *ins[5] = {x};
    for (int i = 0; i < 4; i++) ins[i + 1] = ts_module_get(net, param_names[i]);
    bool ok = ts_gradcheck(f_model, net, ins, 5, (ts_gradcheck_opts){0});
    CHECK(ok);
    CHECK_OK();
    printf("  gradcheck over x and the 4 parameters: %s\n", ok ? "ok" : "FAILED");

    /* (2) the same model on one device: same values, same gradients */
    ts_module *ref = two_stage_new(dev1, dev1);
    ts_tensor_list sd = ts_module_state_dict(net);
    CHECK_EQ(ts_module_load_state_dict(ref, &sd, true), TS_OK);
    ts_tensor_list_free(&sd);
    ts_tensor *x_ref = ts_detach(x);
    ts_set_requires_grad(x_ref, true);
    ts_tensor *l = ts_cross_entropy(ts_forward(net, x), ts_to(y, dev2));
    ts_tensor *l_ref = ts_cross_entropy(ts_forward(ref, x_ref), ts_to(y, dev1));
    CHECK(ts_device_equal(ts_device_of(l), dev2));
    ts_backward(l);
    ts_backward(l_ref);
    CHECK(fabs(ts_item(l) - ts_item(l_ref)) <= 1e-12);
    double worst = max_diff(ts_grad(x), ts_grad(x_ref));
    CHECK(ts_grad(x) && ts_device_of(ts_grad(x)).type == TS_CPU);
    for (int i = 0; i < 4; i++) {
        ts_tensor *g = ts_grad(ts_module_get(net, param_names[i]));
        ts_tensor *g_ref = ts_grad(ts_module_get(ref, param_names[i]));
        CHECK(g && ts_device_equal(ts_device_of(g), want[i]));
        double d = max_diff(g, g_ref);
        if (d > worst) worst = d;
    }
    CHECK(worst <= 1e-12);
    printf("  gradients vs one device: max difference %.3g\n", worst);
    ts_scope_end();

    /* (3) a few SGD steps: the same losses */
    ts_optim *o = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.2}),
             *o_ref = ts_sgd_new(ref, (ts_sgd_opts){.lr = 0.2});
    double wl = 0;
    for (int step = 0; step < 5; step++) {
        ts_scope_begin();
        ts_manual_seed(300 + (uint64_t)step);
        ts_tensor *xb = ts_randn(TS_SHAPE(8, IN), (ts_opts){.dtype = TS_F64, .device = ts_cpu()});
        ts_tensor *yb = ts_randint(0, OUT, TS_SHAPE(8), (ts_opts){.device = ts_cpu()});
        ts_tensor *a = ts_cross_entropy(ts_forward(net, xb), ts_to(yb, dev2));
        ts_tensor *b = ts_cross_entropy(ts_forward(ref, xb), ts_to(yb, dev1));
        ts_optim_zero_grad(o);
        ts_optim_zero_grad(o_ref);
        ts_backward(a);
        ts_backward(b);
        ts_optim_step(o);
        ts_optim_step(o_ref);
        double d = fabs(ts_item(a) - ts_item(b));
        if (d > wl) wl = d;
        ts_scope_end();
    }
    CHECK(wl <= 1e-12);
    CHECK_OK();
    ts_optim_free(o);
    ts_optim_free(o_ref);
    ts_module_free(ref);
    ts_module_free(net);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES=2 or more");
    check_pair(ts_sim(0), ts_sim(1));
    check_pair(ts_cpu(), ts_sim(1));
    if (ts_device_count(TS_CUDA) >= 2) check_pair(ts_cuda(0), ts_cuda(1));
    if (ts_device_count(TS_CUDA) >= 1) check_pair(ts_cuda(0), ts_sim(0));
    return ts_test_finish();
}
