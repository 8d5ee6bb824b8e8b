/* test_optim_groups.c — AdamW with nanoGPT's decay groups (which parameters decay, and the steps
 * against a float64 AdamW written here), per-group weight decay, and the warm-up + cosine
 * schedule's landmarks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

/* torch.optim.AdamW's update of one scalar, in double */
static double adamw_ref(double p, double g, int steps, double lr, double wd) {
    double m = 0, v = 0;
    for (int t = 1; t <= steps; t++) {
        p -= lr * wd * p;
        m = 0.9 * m + 0.1 * g;
        v = 0.999 * v + 0.001 * g * g;
        double mh = m / (1 - pow(0.9, t)), vh = v / (1 - pow(0.999, t));
        p -= lr * mh / (sqrt(vh) + 1e-8);
    }
    return p;
}

static void test_decay_groups(ts_device dev) {
    ts_device_push(dev);
    ts_scope_begin();
    ts_manual_seed(1);
    ts_module *seq = ts_sequential_new(
        2, (ts_module *[]){ts_linear_new(3, 2), ts_layer_norm_new(TS_SHAPE(2), (ts_norm_opts){0})});
    const double lr = 0.01, wd = 0.1;
    ts_optim *opt = ts_adamw_new_decay_groups(seq, (ts_adam_opts){.lr = lr, .weight_decay = wd});
    CHECK_OK();
    CHECK_EQ(ts_optim_num_groups(opt), 2);
    CHECK_NEAR(ts_optim_get_weight_decay(opt, 0), wd, 0);
    CHECK_NEAR(ts_optim_get_weight_decay(opt, 1), 0, 0);
    /* every parameter gets the gradient 0.5: only the group decides how it moves */
    ts_tensor_list l = ts_module_named_parameters(seq);
    double before[4][6] = {{0}}, after[4][6] = {{0}};
    for (int i = 0; i < l.n; i++)
        ts_copy_to_host(ts_to_dtype(l.tensors[i], TS_F64), before[i],
                        (size_t)ts_numel(l.tensors[i]) * 8);
    for (int s = 0; s < 5; s++) {
        for (int i = 0; i < l.n; i++) ts_set_grad(l.tensors[i], ts_full_like(l.tensors[i], 0.5));
        CHECK_EQ(ts_optim_step(opt), TS_OK);
    }
    for (int i = 0; i < l.n; i++)
        ts_copy_to_host(ts_to_dtype(l.tensors[i], TS_F64), after[i],
                        (size_t)ts_numel(l.tensors[i]) * 8);
    /* 0.weight [2,3] decays; 0.bias, 1.weight, 1.bias do not */
    CHECK_STREQ(l.names[0], "0.weight");
    double worst = 0;
    for (int i = 0; i < l.n; i++) {
        const bool decays = ts_ndim(l.tensors[i]) >= 2;
        for (int64_t k = 0; k < ts_numel(l.tensors[i]); k++) {
            double want = adamw_ref(before[i][k], 0.5, 5, lr, decays ? wd : 0);
            double e = fabs((double)after[i][k] - want) / (fabs(want) + 1e-3);
            if (e > worst) worst = e;
        }
    }
    /* float32 parameters: a few roundings of ~6e-8 per step */
    CHECK(worst < 2e-6);
    if (worst >= 2e-6) printf("  worst relative error %g on %s\n", worst, ts_device_str(dev));
    ts_tensor_list_free(&l);
    ts_optim_free(opt);

    /* a module of vectors only: one group, no decay */
    ts_module *ln = ts_layer_norm_new(TS_SHAPE(4), (ts_norm_opts){0});
    opt = ts_adamw_new_decay_groups(ln, (ts_adam_opts){.weight_decay = 0.1});
    CHECK_EQ(ts_optim_num_groups(opt), 1);
    CHECK_NEAR(ts_optim_get_weight_decay(opt, 0), 0, 0);
    ts_optim_free(opt);
    ts_module_free(ln);
    ts_module_free(seq);
    ts_scope_end();
    ts_device_pop();
    CHECK_OK();
}

/* A deeper model (8 weight matrices, 8 biases): every matrix in the decaying group, every bias
 * in the other, each moving as AdamW with its group's decay says. */
static void test_decay_groups_many(void) {
    enum { LAYERS = 8 };
    ts_scope_begin();
    ts_module *layers[LAYERS];
    for (int i = 0; i < LAYERS; i++) layers[i] = ts_linear_new(2, 2);
    ts_module *seq = ts_sequential_new(LAYERS, layers);
    const double lr = 0.01, wd = 0.1;
    ts_optim *opt = ts_adamw_new_decay_groups(seq, (ts_adam_opts){.lr = lr, .weight_decay = wd});
    CHECK(opt && ts_optim_num_groups(opt) == 2);
    ts_tensor_list l = ts_module_named_parameters(seq);
    CHECK_EQ(l.n, 2 * LAYERS);
    double before[2 * LAYERS][4], after[2 * LAYERS][4];
    for (int i = 0; i < l.n; i++) {
        ts_copy_to_host(ts_to_dtype(l.tensors[i], TS_F64), before[i],
                        (size_t)ts_numel(l.tensors[i]) * 8);
        ts_set_grad(l.tensors[i], ts_full_like(l.tensors[i], 0.5));
    }
    CHECK_EQ(ts_optim_step(opt), TS_OK);
    int wrong = 0;
    for (int i = 0; i < l.n; i++) {
        ts_copy_to_host(ts_to_dtype(l.tensors[i], TS_F64), after[i],
                        (size_t)ts_numel(l.tensors[i]) * 8);
        const double d = ts_ndim(l.tensors[i]) >= 2 ? wd : 0;
        for (int64_t k = 0; k < ts_numel(l.tensors[i]); k++) {
            double want = adamw_ref(before[i][k], 0.5, 1, lr, d);
            wrong += fabs(after[i][k] - want) > 1e-6 * (fabs(want) + 1e-3);
        }
    }
    CHECK_EQ(wrong, 0);
    ts_tensor_list_free(&l);
    ts_optim_free(opt);
    ts_module_free(seq);
    ts_scope_end();
    CHECK_OK();
}

static void test_group_errors(void) {
    ts_tensor *p = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_tensor *q = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_adamw_new_params(&p, 1, (ts_adam_opts){.weight_decay = 0.1});
    CHECK_EQ(ts_optim_add_param_group_wd(opt, &q, 1, 0.01, -1), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "weight_decay") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_optim_add_param_group_wd(opt, &q, 1, 0.01, 0.5), TS_OK);
    CHECK_NEAR(ts_optim_get_weight_decay(opt, 1), 0.5, 0);
    CHECK(isnan(ts_optim_get_weight_decay(opt, 2)));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_adamw_new_decay_groups(NULL, (ts_adam_opts){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_optim_free(opt);
    ts_release(p);
    ts_release(q);
}

static void test_warmup_cosine(void) {
    const int W = 4, T = 20;
    const double m = 0.1;
    /* the landmarks of the factor */
    CHECK_NEAR(ts_warmup_cosine_factor(0, W, T, m), 0.25, 1e-15);
    CHECK_NEAR(ts_warmup_cosine_factor(W - 1, W, T, m), 1, 1e-15);
    CHECK_NEAR(ts_warmup_cosine_factor(W, W, T, m), 1, 1e-15);
    CHECK_NEAR(ts_warmup_cosine_factor(W + (T - W) / 2, W, T, m), (1 + m) / 2, 1e-15);
    CHECK_NEAR(ts_warmup_cosine_factor(T, W, T, m), m, 1e-15);
    CHECK_NEAR(ts_warmup_cosine_factor(T + 7, W, T, m), m, 1e-15);
    /* no warm-up: the cosine from the first step */
    CHECK_NEAR(ts_warmup_cosine_factor(0, 0, T, 0), 1, 1e-15);
    /* falls monotonically after the warm-up */
    bool falls = true;
    for (int s = W; s < T; s++)
        falls =
            falls && ts_warmup_cosine_factor(s + 1, W, T, m) < ts_warmup_cosine_factor(s, W, T, m);
    CHECK(falls);
    /* the scheduler applies it to every group's base lr */
    ts_tensor *p = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_tensor *q = ts_zeros(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_adamw_new_params(&p, 1, (ts_adam_opts){.lr = 0.1});
    ts_optim_add_param_group(opt, &q, 1, 0.05);
    ts_lr_scheduler *s = ts_warmup_cosine_lr_new(opt, W, T, m);
    CHECK_OK();
    bool ok = true;
    for (int e = 0; e <= T + 2; e++) {
        double f = ts_warmup_cosine_factor(e, W, T, m);
        ok = ok && fabs(ts_optim_get_lr(opt, 0) - 0.1 * f) < 1e-15 &&
             fabs(ts_optim_get_lr(opt, 1) - 0.05 * f) < 1e-15;
        ts_scheduler_step(s);
    }
    CHECK(ok);
    CHECK(ts_warmup_cosine_lr_new(opt, 5, 5, 0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_warmup_cosine_lr_new(opt, 1, 5, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scheduler_free(s);
    ts_optim_free(opt);
    ts_release(p);
    ts_release(q);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) test_decay_groups(devs[i]);
    test_decay_groups_many();
    test_group_errors();
    test_warmup_cosine();
    return ts_test_finish();
}
