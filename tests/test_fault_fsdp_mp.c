/* test_fault_fsdp_mp.c — allocation-failure sweeps (fault_sweep.h) over sharded data parallel with
 * mixed precision and decay groups in a world of one: wrapping (the float32 flat buffer, the bf16
 * one that replaces it, the two leaves a unit) and a step (the shard rounded for the gather, the
 * bf16 gradient converted for the float32 reduction, the reduced block split between the leaves,
 * the grad scaler on top). Each failing allocation must end in a clear error, leak nothing and
 * leave a defined state (the shards and the optimizer's as before or as after); the failed call
 * then succeeds after ts_error_clear(). test_fault_ddp sweeps the plain FSDP paths. */
#include <stdio.h>
#include <stdlib.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

static const char *const UNITS[] = {"0", "2"}; /* the two Linears; the root holds nothing */
static const ts_fsdp_opts OPTS = {.units = UNITS,
                                  .n_units = 2,
                                  .param_dtype = TS_BF16,
                                  .reduce_dtype = TS_F32,
                                  .decay_groups = true};

static void *wrap_setup(void) { return calloc(1, sizeof(sweep_trainee)); }

static bool wrap_run(void *p) {
    sweep_trainee *t = p;
    t->m = ts_fsdp_new(sweep_mlp_new(ts_cpu()), OPTS);
    return t->m && ts_error() == TS_OK;
}

/* the state is the shards (their leaves) and the optimizer's */
static ts_snapshot snap(void *p) {
    sweep_trainee *t = p;
    ts_snapshot s = ts_snapshot_take(NULL, t->o, NULL);
    ts_tensor_list l = t->m ? ts_fsdp_parameters(t->m) : (ts_tensor_list){0};
    ts_snapshot_add(&s, "shard.", &l);
    ts_tensor_list_free(&l);
    return s;
}

/* AdamW in the two groups, as `tessera train --fsdp` builds it */
static void *step_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = ts_fsdp_new(sweep_mlp_new(ts_cpu()), OPTS);
    ts_tensor_list d = {0}, n = {0};
    CHECK(ts_fsdp_decay_groups(t->m, &d, &n) == TS_OK);
    t->o = ts_adamw_new_params(d.tensors, d.n, (ts_adam_opts){.lr = 0.01, .weight_decay = 0.1});
    CHECK(ts_optim_add_param_group_wd(t->o, n.tensors, n.n, 0.01, 0) == TS_OK);
    ts_tensor_list_free(&d);
    ts_tensor_list_free(&n);
    sweep_batch_new(ts_cpu(), &t->x, &t->y);
    CHECK_OK();
    return t;
}

/* the grad scaler over the step: unscale_, step (skipping on inf), update */
typedef struct scaled {
    sweep_trainee t;
    ts_grad_scaler *s;
} scaled;

static void *scaled_setup(void) {
    sweep_trainee *t = step_setup();
    scaled *c = realloc(t, sizeof *c);
    c->s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 256});
    return c;
}

static bool scaled_step(void *p) {
    scaled *c = p;
    ts_scope_begin();
    ts_optim_zero_grad(c->t.o);
    ts_tensor *loss = ts_cross_entropy(ts_forward(c->t.m, c->t.x), c->t.y);
    ts_backward(ts_grad_scaler_scale(c->s, loss));
    ts_grad_scaler_unscale_(c->s, c->t.o);
    ts_grad_scaler_step(c->s, c->t.o, NULL);
    ts_grad_scaler_update(c->s);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static void scaled_free(void *p) {
    scaled *c = p;
    ts_grad_scaler_free(c->s);
    sweep_trainee_free(p);
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){0}) != TS_OK) return ts_test_skip("%s", ts_error_message());
    ts_sweep_case wrap = {.name = "fsdp wrap (bf16, decay groups)",
                          .setup = wrap_setup,
                          .run = wrap_run,
                          .teardown = sweep_trainee_free,
                          .snap = snap};
    ts_fault_sweep(&wrap, MAX_POINTS);
    ts_sweep_case step = {.name = "fsdp step (bf16, f32 reduce, decay groups)",
                          .setup = step_setup,
                          .run = sweep_trainee_step,
                          .teardown = sweep_trainee_free,
                          .snap = snap};
    ts_fault_sweep(&step, MAX_POINTS);
    ts_sweep_case sc = {.name = "fsdp step with the grad scaler",
                        .setup = scaled_setup,
                        .run = scaled_step,
                        .teardown = scaled_free,
                        .snap = snap};
    ts_fault_sweep(&sc, MAX_POINTS);
    CHECK(ts_dist_finalize() == TS_OK);
    return ts_test_finish();
}
