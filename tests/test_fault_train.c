/* test_fault_train.c — allocation-failure sweeps (fault_sweep.h) over training: building a model
 * and its optimizer, a training step (forward, backward, optimizer step) with SGD + momentum and
 * Adam on cpu and sim:0, a step over a non-contiguous parameter in two groups, a step through the
 * grad scaler, and a data-parallel step over sim:0 and sim:1. Every failing allocation must end
 * in a clear error with the model, the optimizer and the scaler exactly as before the call that
 * failed (an optimizer step happens wholly or not at all; a step after a failed forward or backward
 * changes nothing), nothing leaked, and the step must succeed after ts_error_clear(). */
#include <stdlib.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

typedef enum { OPT_MOMENTUM, OPT_ADAM } opt_kind;

static ts_optim *opt_new(ts_module *m, opt_kind k) {
    if (k == OPT_ADAM) return ts_adam_new(m, (ts_adam_opts){.lr = 1e-2});
    return ts_sgd_new(m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
}

/* ------------------------------------------------------------------ construction */
static void *empty_setup(void) { return calloc(1, sizeof(sweep_trainee)); }

/* A user's build: on failure what was made is freed (the state stays empty). */
static bool build_run(void *p) {
    sweep_trainee *t = p;
    t->m = sweep_mlp_new(ts_sim(0));
    t->o = t->m ? opt_new(t->m, OPT_ADAM) : NULL;
    if (t->m && t->o && ts_error() == TS_OK) return true;
    ts_optim_free(t->o);
    ts_module_free(t->m);
    t->m = NULL, t->o = NULL;
    return false;
}

/* ------------------------------------------------------------------ one training step */
static ts_device step_dev;
static opt_kind step_opt;
static int warm_steps; /* steps before the swept one (Adam's second step updates its state) */

static void *step_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = sweep_mlp_new(step_dev);
    t->o = opt_new(t->m, step_opt);
    sweep_batch_new(step_dev, &t->x, &t->y);
    for (int i = 0; i < warm_steps; i++) sweep_trainee_step(t);
    CHECK_OK();
    return t;
}

static void sweep_step(const char *name, ts_device dev, opt_kind k, int warm) {
    step_dev = dev, step_opt = k, warm_steps = warm;
    ts_sweep_case c = {.name = name,
                       .setup = step_setup,
                       .run = sweep_trainee_step,
                       .teardown = sweep_trainee_free,
                       .snap = sweep_trainee_snap};
    ts_fault_sweep(&c, MAX_POINTS);
}

/* ------------------------------------------------------------------ a strided parameter */
/* Two groups: w (contiguous) and v, a transposed (non-contiguous) leaf, which the optimizer
 * steps through a contiguous copy: the copies must be made before anything is updated. */
typedef struct strided_st {
    ts_tensor *w, *v, *a, *b;
    ts_optim *o;
} strided_st;

static void *strided_setup(void) {
    strided_st *s = calloc(1, sizeof *s);
    ts_manual_seed(3);
    ts_scope_begin();
    s->w = ts_keep(ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    s->v = ts_keep(ts_detach(ts_transpose(ts_randn(TS_SHAPE(3, 4), (ts_opts){0}), 0, 1)));
    s->a = ts_keep(ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    s->b = ts_keep(ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    ts_scope_end();
    ts_set_requires_grad(s->w, true);
    ts_set_requires_grad(s->v, true);
    s->o = ts_sgd_new_params(&s->v, 1, (ts_sgd_opts){.lr = 0.5, .momentum = 0.5});
    ts_optim_add_param_group(s->o, &s->w, 1, 0.25);
    CHECK_OK();
    return s;
}

static bool strided_run(void *p) {
    strided_st *s = p;
    ts_scope_begin();
    ts_optim_zero_grad(s->o);
    ts_backward(ts_add(ts_sum(ts_mul(s->w, s->a)), ts_sum(ts_mul(ts_mul(s->v, s->v), s->b))));
    ts_optim_step(s->o);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static ts_snapshot strided_snap(void *p) {
    strided_st *s = p;
    ts_snapshot snap = {0};
    ts_tensor_list l = {0};
    ts_tensor_list_add(&l, "w", s->w);
    ts_tensor_list_add(&l, "v", s->v);
    ts_snapshot_add(&snap, "", &l);
    ts_tensor_list_free(&l);
    l = ts_optim_state_dict(s->o);
    ts_snapshot_add(&snap, "optim.", &l);
    ts_tensor_list_free(&l);
    return snap;
}

static void strided_teardown(void *p) {
    strided_st *s = p;
    ts_optim_free(s->o);
    ts_release(s->w), ts_release(s->v), ts_release(s->a), ts_release(s->b);
    free(s);
}

/* ------------------------------------------------------------------ the grad scaler */
/* Two calls a user would retry separately: (scale, backward, scaler step) and update. */
typedef struct scaler_st {
    sweep_trainee *t;
    ts_grad_scaler *g;
    int phase; /* 0: the step is to do; 1: update is to do; 2: done */
} scaler_st;

static ts_snapshot scaler_ref[3]; /* before, after the step, after the update */

static void *scaler_setup(void) {
    scaler_st *s = calloc(1, sizeof *s);
    step_dev = ts_cpu(), step_opt = OPT_ADAM, warm_steps = 0;
    s->t = step_setup();
    s->g = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024, .growth_interval = 1});
    return s;
}

static bool scaler_step(scaler_st *s) {
    ts_scope_begin();
    ts_optim_zero_grad(s->t->o);
    ts_tensor *loss = ts_cross_entropy(ts_forward(s->t->m, s->t->x), s->t->y);
    ts_backward(ts_grad_scaler_scale(s->g, loss));
    ts_grad_scaler_step(s->g, s->t->o, NULL);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static bool scaler_run(void *p) {
    scaler_st *s = p;
    if (s->phase == 0) {
        if (!scaler_step(s)) return false;
        s->phase = 1;
    }
    if (ts_grad_scaler_update(s->g) != TS_OK) return false;
    s->phase = 2;
    return true;
}

static ts_snapshot scaler_snap(scaler_st *s) { return ts_snapshot_take(s->t->m, s->t->o, s->g); }

/* each call wholly or not at all: the state is the one of the phase reached */
static void scaler_check(void *p, bool ok) {
    scaler_st *s = p;
    ts_snapshot now = scaler_snap(s);
    ts_snapshot_check(ok ? "after scaler step and update" : "after a failed scaler call", &now,
                      &scaler_ref[s->phase]);
    if (ok) CHECK(s->phase == 2);
    ts_snapshot_free(&now);
}

static void scaler_teardown(void *p) {
    scaler_st *s = p;
    ts_grad_scaler_free(s->g);
    sweep_trainee_free(s->t);
    free(s);
}

static void sweep_scaler(void) {
    scaler_st *s = scaler_setup();
    scaler_ref[0] = scaler_snap(s);
    CHECK(scaler_step(s));
    scaler_ref[1] = scaler_snap(s);
    CHECK(ts_grad_scaler_update(s->g) == TS_OK);
    scaler_ref[2] = scaler_snap(s);
    CHECK(!ts_snapshot_equal(&scaler_ref[0], &scaler_ref[1]));
    CHECK(!ts_snapshot_equal(&scaler_ref[1], &scaler_ref[2])); /* the scale grew */
    scaler_teardown(s);
    ts_sweep_case c = {.name = "grad scaler step+update",
                       .setup = scaler_setup,
                       .run = scaler_run,
                       .teardown = scaler_teardown,
                       .check = scaler_check};
    ts_fault_sweep(&c, MAX_POINTS);
    for (int i = 0; i < 3; i++) ts_snapshot_free(&scaler_ref[i]);
}

/* ------------------------------------------------------------------ data parallel */
static void *dp_setup(void) {
    static const ts_device devs[2] = {{TS_SIM, 0}, {TS_SIM, 1}};
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = ts_data_parallel_new(sweep_mlp_new(ts_sim(0)), devs, 2, (ts_device){0});
    t->o = opt_new(t->m, OPT_MOMENTUM);
    sweep_batch_new(ts_sim(0), &t->x, &t->y);
    CHECK_OK();
    return t;
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    ts_sweep_case build = {.name = "model+optimizer",
                           .setup = empty_setup,
                           .run = build_run,
                           .teardown = sweep_trainee_free,
                           .snap = sweep_trainee_snap};
    ts_fault_sweep(&build, MAX_POINTS);
    sweep_step("step sgd+momentum cpu", ts_cpu(), OPT_MOMENTUM, 0);
    sweep_step("step adam cpu (2nd)", ts_cpu(), OPT_ADAM, 1);
    sweep_step("step adam sim:0", ts_sim(0), OPT_ADAM, 0);
    ts_sweep_case strided = {.name = "step, strided parameter",
                             .setup = strided_setup,
                             .run = strided_run,
                             .teardown = strided_teardown,
                             .snap = strided_snap};
    ts_fault_sweep(&strided, MAX_POINTS);
    sweep_scaler();
    ts_sweep_case dp = {.name = "data parallel step",
                        .setup = dp_setup,
                        .run = sweep_trainee_step,
                        .teardown = sweep_trainee_free,
                        .snap = sweep_trainee_snap};
    ts_fault_sweep(&dp, MAX_POINTS);
    return ts_test_finish();
}
