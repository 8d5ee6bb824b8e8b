/* test_fault_ddp.c — allocation-failure sweeps (fault_sweep.h) over distributed training in a
 * world of one (no launcher): joining and leaving (ts_dist_init / finalize), the collectives
 * (synchronous, asynchronous, on a subgroup), wrapping a model in DistributedDataParallel, a DDP
 * training step, and the same two for sharded data parallel (two units; the step under each of
 * stages 1, 2 and 3; the full state dict's consolidation). Each failing
 * allocation must end in a clear error, leak nothing and leave a defined state: collectives leave
 * their tensors as they were or as the result (the same in a world of one), a DDP step happens
 * wholly or not at all; the failed call then succeeds after ts_error_clear(). */
#include <stdio.h>
#include <stdlib.h>

#include "fault_sweep.h"
#include "sweep_model.h"
#include "ts_test.h"

#define MAX_POINTS 20000

/* ------------------------------------------------------------------ collectives */
typedef struct coll_st {
    ts_tensor *t, *out, *in4, *small; /* t [4, 3]; out [4, 3] gathered; in4 [4, 3]; small [4, 3] */
    ts_snapshot t0;
    int phase; /* 0: init, 1: collectives, 2: finalize, 3: done */
} coll_st;

static void *coll_setup(void) {
    coll_st *s = calloc(1, sizeof *s);
    ts_manual_seed(2);
    ts_scope_begin();
    s->t = ts_keep(ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    s->out = ts_keep(ts_zeros(TS_SHAPE(4, 3), (ts_opts){0}));
    s->in4 = ts_keep(ts_randn(TS_SHAPE(4, 3), (ts_opts){0}));
    s->small = ts_keep(ts_zeros(TS_SHAPE(4, 3), (ts_opts){0}));
    ts_scope_end();
    ts_tensor_list l = {0};
    ts_tensor_list_add(&l, "t", s->t);
    ts_snapshot_add(&s->t0, "", &l);
    ts_tensor_list_free(&l);
    return s;
}

static bool collectives(coll_st *s) {
    if (ts_dist_all_reduce(s->t, TS_DIST_SUM, NULL)) return false;
    if (ts_dist_all_reduce(s->t, TS_DIST_AVG, NULL)) return false;
    if (ts_dist_broadcast(s->t, 0, NULL)) return false;
    if (ts_dist_all_gather(s->out, s->t, NULL)) return false;
    if (ts_dist_reduce_scatter(s->small, s->in4, TS_DIST_SUM, NULL)) return false;
    if (ts_dist_wait(ts_dist_all_reduce_async(s->t, TS_DIST_MAX, NULL))) return false;
    if (ts_dist_barrier()) return false;
    int ranks[] = {0};
    ts_dist_group *g = ts_dist_group_new(ranks, 1);
    if (!g) return false;
    ts_status st = ts_dist_all_reduce(s->t, TS_DIST_SUM, g);
    ts_dist_group_free(g);
    return st == TS_OK;
}

static bool coll_run(void *p) {
    coll_st *s = p;
    if (s->phase == 0) {
        if (ts_dist_init((ts_dist_opts){0})) return false;
        s->phase = 1;
    }
    if (s->phase == 1) {
        if (!collectives(s)) return false;
        s->phase = 2;
    }
    if (ts_dist_finalize()) return false;
    s->phase = 3;
    return ts_error() == TS_OK;
}

static void coll_check(void *p, bool ok) {
    coll_st *s = p;
    ts_tensor_list l = {0};
    ts_tensor_list_add(&l, "t", s->t);
    ts_snapshot now = {0};
    ts_snapshot_add(&now, "", &l);
    ts_tensor_list_free(&l);
    /* every collective of a world of one gives back its input */
    ts_snapshot_check("tensor after the collectives", &now, &s->t0);
    ts_snapshot_free(&now);
    CHECK(ts_dist_is_initialized() == (s->phase == 1 || s->phase == 2));
    if (ok) {
        CHECK(s->phase == 3);
        ts_scope_begin();
        CHECK(ts_item(ts_max(ts_abs(ts_sub(s->out, s->t)))) == 0);
        CHECK(ts_item(ts_max(ts_abs(ts_sub(s->small, s->in4)))) == 0);
        ts_scope_end();
    }
}

static void coll_teardown(void *p) {
    coll_st *s = p;
    if (ts_dist_is_initialized()) CHECK(ts_dist_finalize() == TS_OK);
    ts_release(s->t), ts_release(s->out), ts_release(s->in4), ts_release(s->small);
    ts_snapshot_free(&s->t0);
    free(s);
}

/* ------------------------------------------------------------------ DDP */
static void *wrap_setup(void) { return calloc(1, sizeof(sweep_trainee)); }

static bool wrap_run(void *p) {
    sweep_trainee *t = p;
    t->m = ts_ddp_new(sweep_mlp_new(ts_cpu()), (ts_ddp_opts){0});
    return t->m && ts_error() == TS_OK;
}

static void *step_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = ts_ddp_new(sweep_mlp_new(ts_cpu()), (ts_ddp_opts){.bucket_cap_mb = 100.0 / 1048576});
    t->o = ts_sgd_new(t->m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    sweep_batch_new(ts_cpu(), &t->x, &t->y);
    CHECK_OK();
    return t;
}

/* ------------------------------------------------------------------ FSDP */
static const char *const SWEEP_UNITS[] = {"0", "2"}; /* the two Linears; the root holds nothing */

static bool fsdp_wrap_run(void *p) {
    sweep_trainee *t = p;
    t->m = ts_fsdp_new(sweep_mlp_new(ts_cpu()), (ts_fsdp_opts){.units = SWEEP_UNITS, .n_units = 2});
    return t->m && ts_error() == TS_OK;
}

/* Under stage 3 the module's parameters live only while gathered: the state is the shards and
 * the optimizer's. */
static ts_snapshot fsdp_snap(void *p) {
    sweep_trainee *t = p;
    ts_snapshot s = ts_snapshot_take(NULL, t->o, NULL);
    ts_tensor_list l = t->m ? ts_fsdp_parameters(t->m) : (ts_tensor_list){0};
    ts_snapshot_add(&s, "shard.", &l);
    ts_tensor_list_free(&l);
    return s;
}

static int fsdp_stage; /* the stage fsdp_step_setup wraps with */

static void *fsdp_step_setup(void) {
    sweep_trainee *t = calloc(1, sizeof *t);
    t->m = ts_fsdp_new(sweep_mlp_new(ts_cpu()),
                       (ts_fsdp_opts){.units = SWEEP_UNITS, .n_units = 2, .stage = fsdp_stage});
    ts_tensor_list l = ts_fsdp_parameters(t->m);
    t->o = ts_sgd_new_params(l.tensors, l.n, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    ts_tensor_list_free(&l);
    sweep_batch_new(ts_cpu(), &t->x, &t->y);
    CHECK_OK();
    return t;
}

/* Consolidation: the full state dict is whole or, on a failure, empty (nothing half-gathered is
 * handed out) and the shards are untouched. */
static bool fsdp_full_run(void *p) {
    sweep_trainee *t = p;
    ts_tensor_list sd = ts_fsdp_full_state_dict(t->m);
    const bool failed = ts_error() != TS_OK;
    if (failed) CHECK_EQ(sd.n, 0);
    const bool ok = !failed && sd.n == 4; /* two Linears: weight and bias each */
    ts_tensor_list_free(&sd);
    return ok;
}

int main(void) {
    ts_sweep_case coll = {.name = "dist init+collectives",
                          .setup = coll_setup,
                          .run = coll_run,
                          .teardown = coll_teardown,
                          .check = coll_check};
    ts_fault_sweep(&coll, MAX_POINTS);

    if (ts_dist_init((ts_dist_opts){0}) != TS_OK) return ts_test_skip("%s", ts_error_message());
    /* ts_ddp frees the module it was given when it fails: the state stays empty */
    ts_sweep_case wrap = {.name = "ddp wrap",
                          .setup = wrap_setup,
                          .run = wrap_run,
                          .teardown = sweep_trainee_free,
                          .snap = sweep_trainee_snap};
    ts_fault_sweep(&wrap, MAX_POINTS);
    ts_sweep_case step = {.name = "ddp step",
                          .setup = step_setup,
                          .run = sweep_trainee_step,
                          .teardown = sweep_trainee_free,
                          .snap = sweep_trainee_snap};
    ts_fault_sweep(&step, MAX_POINTS);
    ts_sweep_case fwrap = {.name = "fsdp wrap",
                           .setup = wrap_setup,
                           .run = fsdp_wrap_run,
                           .teardown = sweep_trainee_free,
                           .snap = fsdp_snap};
    ts_fault_sweep(&fwrap, MAX_POINTS);
    static const char *const step_names[] = {"", "fsdp step, stage 1", "fsdp step, stage 2",
                                             "fsdp step, stage 3"};
    for (fsdp_stage = 1; fsdp_stage <= 3; fsdp_stage++) {
        ts_sweep_case fstep = {.name = step_names[fsdp_stage],
                               .setup = fsdp_step_setup,
                               .run = sweep_trainee_step,
                               .teardown = sweep_trainee_free,
                               .snap = fsdp_snap};
        ts_fault_sweep(&fstep, MAX_POINTS);
    }
    fsdp_stage = 3;
    ts_sweep_case ffull = {.name = "fsdp full state dict",
                           .setup = fsdp_step_setup,
                           .run = fsdp_full_run,
                           .teardown = sweep_trainee_free,
                           .snap = fsdp_snap};
    ts_fault_sweep(&ffull, MAX_POINTS);
    CHECK(ts_dist_finalize() == TS_OK);
    return ts_test_finish();
}
