/* test_fault_train.c — allocation-failure sweeps (fault_sweep.h) over training: building a model
 * and its optimizer, a training step (forward, backward, optimizer step) with SGD + momentum and
 * Adam on cpu and sim:0, a step over a non-contiguous parameter in two groups, a step through the
 * grad scaler, and a data-parallel step over sim:0 and sim:1. Every failing allocation must end
 * in a clear error with the model, the optimizer and the scaler exactly as before the call that
 * failed (an optimizer step happens wholly or not at all; a step after a failed forward or backward
 * changes nothing), nothing leaked, and the step must succeed after ts_error_clear(). */
#include <stdio.h>
#include <stdlib.h>

#include "fault_sweep.h"
#include "state_snapshot.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

typedef enum { OPT_MOMENTUM, OPT_ADAM } opt_kind;

static ts_optim *opt_new(ts_module *m, opt_kind k) {
    if (k == OPT_ADAM) return ts_adam(m, (ts_adam_opts){.lr = 1e-2});
    return ts_sgd(m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
}

/* ------------------------------------------------------------------ construction */
typedef struct built {
    ts_module *m;
    ts_optim *o;
} built;

static void *build_setup(void) { return calloc(1, sizeof(built)); }

static bool build_run(void *p) {
    built *b = p;
    ts_module_free(b->m);
    ts_optim_free(b->o);
    b->m = sweep_mlp_new(ts_sim(0));
    b->o = b->m ? opt_new(b->m, OPT_ADAM) : NULL;
    return b->m && b->o && ts_error() == TS_OK;
}

static void build_check(void *p, bool ok) {
    built *b = p;
    if (ok) CHECK(b->m && b->o && ts_module_num_parameters(b->m) == 6 * 8 + 8 + 8 * 3 + 3);
}

static void build_teardown(void *p) {
    built *b = p;
    ts_optim_free(b->o);
    ts_module_free(b->m);
    free(b);
}

/* ------------------------------------------------------------------ one training step */
typedef struct step_cfg {
    ts_device dev;
    opt_kind opt;
    int warm_steps; /* steps before the swept one (Adam's second step updates existing state) */
} step_cfg;

typedef struct step_st {
    const step_cfg *cfg;
    ts_module *m;
    ts_optim *o;
    ts_tensor *x, *y;
    ts_snapshot before, after; /* before the step; after one fault-free step (the reference) */
} step_st;

static bool step_run(void *p) {
    step_st *s = p;
    return sweep_train_step(s->m, s->o, s->x, s->y);
}

static const step_cfg *cur_cfg;

static step_st *step_build(const step_cfg *c) {
    step_st *s = calloc(1, sizeof *s);
    s->cfg = c;
    s->m = sweep_mlp_new(c->dev);
    s->o = opt_new(s->m, c->opt);
    sweep_batch_new(c->dev, &s->x, &s->y);
    for (int i = 0; i < c->warm_steps; i++) step_run(s);
    return s;
}

static void step_free(step_st *s) {
    ts_snapshot_free(&s->before);
    ts_snapshot_free(&s->after);
    ts_optim_free(s->o);
    ts_module_free(s->m);
    ts_release(s->x), ts_release(s->y);
    free(s);
}

static ts_snapshot ref_before, ref_after;

static void step_refs(const step_cfg *c) {
    ts_snapshot_free(&ref_before);
    ts_snapshot_free(&ref_after);
    step_st *s = step_build(c);
    ref_before = ts_snapshot_take(s->m, s->o, NULL);
    CHECK(step_run(s));
    ref_after = ts_snapshot_take(s->m, s->o, NULL);
    CHECK(!ts_snapshot_equal(&ref_before, &ref_after));
    step_free(s);
}

static void *step_setup(void) {
    step_st *s = step_build(cur_cfg);
    CHECK_OK();
    return s;
}

static void step_check(void *p, bool ok) {
    step_st *s = p;
    ts_snapshot now = ts_snapshot_take(s->m, s->o, NULL);
    /* success: one whole step; failure: none at all */
    ts_snapshot_check(ok ? "after a step" : "after a failed step", &now,
                      ok ? &ref_after : &ref_before);
    ts_snapshot_free(&now);
}

static void step_teardown(void *p) { step_free(p); }

static void sweep_step(const char *name, step_cfg c) {
    cur_cfg = &c;
    step_refs(&c);
    ts_sweep_case sc = {name, step_setup, step_run, step_check, step_teardown};
    ts_fault_sweep(&sc, MAX_POINTS);
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
    s->o = ts_sgd_params(&s->v, 1, (ts_sgd_opts){.lr = 0.5, .momentum = 0.5});
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

static ts_snapshot strided_snap(strided_st *s) {
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

static void strided_check(void *p, bool ok) {
    ts_snapshot now = strided_snap(p);
    ts_snapshot_check(ok ? "after a step" : "after a failed step", &now,
                      ok ? &ref_after : &ref_before);
    ts_snapshot_free(&now);
}

static void strided_teardown(void *p) {
    strided_st *s = p;
    ts_optim_free(s->o);
    ts_release(s->w), ts_release(s->v), ts_release(s->a), ts_release(s->b);
    free(s);
}

static void sweep_strided(void) {
    strided_st *s = strided_setup();
    ts_snapshot_free(&ref_before);
    ts_snapshot_free(&ref_after);
    ref_before = strided_snap(s);
    CHECK(strided_run(s));
    ref_after = strided_snap(s);
    strided_teardown(s);
    ts_sweep_case sc = {"step, strided parameter", strided_setup, strided_run, strided_check,
                        strided_teardown};
    ts_fault_sweep(&sc, MAX_POINTS);
}

/* ------------------------------------------------------------------ the grad scaler */
/* Two calls a user would retry separately: (scale, backward, scaler step) and update. */
typedef struct scaler_st {
    step_st *s;
    ts_grad_scaler *g;
    int phase; /* 0: the step is to do; 1: update is to do; 2: done */
} scaler_st;

static ts_snapshot scaler_ref[3]; /* before, after the step, after the update */

static scaler_st *scaler_build(void) {
    static const step_cfg c = {.dev = {TS_CPU, 0}, .opt = OPT_ADAM};
    scaler_st *s = calloc(1, sizeof *s);
    s->s = step_build(&c);
    s->g = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024, .growth_interval = 1});
    return s;
}

static bool scaler_run(void *p) {
    scaler_st *s = p;
    if (s->phase == 0) {
        ts_scope_begin();
        ts_optim_zero_grad(s->s->o);
        ts_tensor *loss = ts_cross_entropy(ts_forward(s->s->m, s->s->x), s->s->y);
        ts_backward(ts_grad_scaler_scale(s->g, loss));
        bool stepped = false;
        ts_grad_scaler_step(s->g, s->s->o, &stepped);
        ts_scope_end();
        if (ts_error()) return false;
        s->phase = 1;
    }
    if (ts_grad_scaler_update(s->g) != TS_OK) return false;
    s->phase = 2;
    return true;
}

static ts_snapshot scaler_snap(scaler_st *s) { return ts_snapshot_take(s->s->m, s->s->o, s->g); }

static void *scaler_setup(void) { return scaler_build(); }

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
    step_free(s->s);
    free(s);
}

static void sweep_scaler(void) {
    scaler_st *s = scaler_build();
    scaler_ref[0] = scaler_snap(s);
    s->phase = 0;
    ts_scope_begin();
    ts_optim_zero_grad(s->s->o);
    ts_backward(
        ts_grad_scaler_scale(s->g, ts_cross_entropy(ts_forward(s->s->m, s->s->x), s->s->y)));
    ts_grad_scaler_step(s->g, s->s->o, NULL);
    ts_scope_end();
    scaler_ref[1] = scaler_snap(s);
    ts_grad_scaler_update(s->g);
    scaler_ref[2] = scaler_snap(s);
    CHECK_OK();
    CHECK(!ts_snapshot_equal(&scaler_ref[0], &scaler_ref[1]));
    CHECK(!ts_snapshot_equal(&scaler_ref[1], &scaler_ref[2])); /* the scale grew */
    scaler_teardown(s);
    ts_sweep_case sc = {"grad scaler step+update", scaler_setup, scaler_run, scaler_check,
                        scaler_teardown};
    ts_fault_sweep(&sc, MAX_POINTS);
    for (int i = 0; i < 3; i++) ts_snapshot_free(&scaler_ref[i]);
}

/* ------------------------------------------------------------------ data parallel */
typedef struct dp_st {
    ts_module *dp;
    ts_optim *o;
    ts_tensor *x, *y;
} dp_st;

static const ts_device dp_devs[2] = {{TS_SIM, 0}, {TS_SIM, 1}};

static void *dp_setup(void) {
    dp_st *s = calloc(1, sizeof *s);
    s->dp = ts_data_parallel(sweep_mlp_new(ts_sim(0)), dp_devs, 2, (ts_device){0});
    s->o = opt_new(s->dp, OPT_MOMENTUM);
    sweep_batch_new(ts_sim(0), &s->x, &s->y);
    CHECK_OK();
    return s;
}

static bool dp_run(void *p) {
    dp_st *s = p;
    return sweep_train_step(s->dp, s->o, s->x, s->y);
}

static void dp_check(void *p, bool ok) {
    dp_st *s = p;
    ts_snapshot now = ts_snapshot_take(s->dp, s->o, NULL);
    ts_snapshot_check(ok ? "after a data-parallel step" : "after a failed data-parallel step", &now,
                      ok ? &ref_after : &ref_before);
    ts_snapshot_free(&now);
}

static void dp_teardown(void *p) {
    dp_st *s = p;
    ts_optim_free(s->o);
    ts_module_free(s->dp);
    ts_release(s->x), ts_release(s->y);
    free(s);
}

static void sweep_dp(void) {
    dp_st *s = dp_setup();
    ts_snapshot_free(&ref_before);
    ts_snapshot_free(&ref_after);
    ref_before = ts_snapshot_take(s->dp, s->o, NULL);
    CHECK(dp_run(s));
    ref_after = ts_snapshot_take(s->dp, s->o, NULL);
    dp_teardown(s);
    ts_sweep_case sc = {"data parallel step", dp_setup, dp_run, dp_check, dp_teardown};
    ts_fault_sweep(&sc, MAX_POINTS);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    ts_sweep_case build = {"model+optimizer", build_setup, build_run, build_check, build_teardown};
    ts_fault_sweep(&build, MAX_POINTS);
    sweep_step("step sgd+momentum cpu", (step_cfg){.dev = ts_cpu(), .opt = OPT_MOMENTUM});
    sweep_step("step adam cpu (2nd)",
               (step_cfg){.dev = ts_cpu(), .opt = OPT_ADAM, .warm_steps = 1});
    sweep_step("step adam sim:0", (step_cfg){.dev = ts_sim(0), .opt = OPT_ADAM});
    sweep_strided();
    sweep_scaler();
    sweep_dp();
    ts_snapshot_free(&ref_before);
    ts_snapshot_free(&ref_after);
    return ts_test_finish();
}
