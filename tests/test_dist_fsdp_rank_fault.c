/* test_dist_fsdp_rank_fault.c — an allocation that fails on one rank alone (a world of one, and by
 * ctest under mpiexec with 2 and 4 ranks).
 * While ts_fsdp builds the units: for every allocation
 * ts_fsdp makes on the failing rank (the fault hook armed there only; the first rank and the last
 * in turn), every rank returns from ts_fsdp with the same outcome — all NULL with the failing
 * rank's error, or all a working module when the failure was absorbed — instead of the others
 * waiting in a collective the failed rank skipped. The errors name ts_fsdp's op and the failing
 * rank; a failure while a unit is built names the unit too ("ts_fsdp: unit 1 (2): rank 1 ran out
 * of memory building its shard (...)"), and every unit is reached so. Nothing leaks on any rank,
 * and ts_fsdp then succeeds. Two configurations: stage 3, and mixed precision with decay groups
 * (more allocations after each unit's broadcast).
 * In ts_fsdp_clip_grad_norm (before its all-reduce of the norm) and in ts_grad_scaler_step (before
 * the ranks' found-inf agreement): for every allocation on the failing rank, every rank fails
 * with it, or none does.
 * A short group timeout guards the test: a rank left waiting fails its ts_fsdp with a timeout
 * (TS_ERR_DIST "... timed out"), which the checks reject, and ts_dist_finalize then aborts the
 * job — a failure within seconds, not a hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#define MAX_POINTS 5000

static int rank, world;

/* Linear(4, 6) - Tanh - Linear(6, 6) - Tanh - Linear(6, 3): the root holds the first Linear */
static ts_module *model_new(void) {
    ts_manual_seed(3);
    ts_module *layers[] = {ts_linear_new(4, 6), ts_tanh_new(), ts_linear_new(6, 6), ts_tanh_new(),
                           ts_linear_new(6, 3)};
    return ts_sequential_new(5, layers);
}

static const char *const UNITS[] = {"2", "4"};
static const char *const UNIT_LABELS[] = {"unit 0 (<root>)", "unit 1 (2)", "unit 2 (4)"};
#define N_UNITS 3

/* sum over the ranks of v (the test's own collective, never fault-armed) */
static double sum_ranks(double v) {
    if (world == 1) return v;
    ts_scope_begin();
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(), &v, (ts_opts){.device = ts_cpu()});
    double out = -1;
    if (ts_dist_all_reduce(t, TS_DIST_SUM, NULL) == TS_OK) out = ts_item(t);
    ts_scope_end();
    return out;
}

/* a forward on the wrapped model: it works (every rank) */
static bool works(ts_module *f) {
    ts_scope_begin();
    ts_manual_seed(9);
    ts_tensor *y = ts_forward(f, ts_randn(TS_SHAPE(2, 4), (ts_opts){0}));
    bool ok = y && ts_ndim(y) == 2 && ts_size(y, 1) == 3;
    ts_scope_end();
    return ok;
}

/* After one rank's armed call: every rank failed, or none did, and never by a timeout. Returns
 * whether the fault fired on the failing rank (every rank learns it). */
static bool same_outcome(const char *what, int n, bool ok, bool fired) {
    ts_status code = ts_error();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    ts_error_clear();
    int failed_ranks = (int)sum_ranks(!ok);
    bool any_fired = sum_ranks(fired) > 0;
    int failures = ts_test_failed_count();
    CHECK(failed_ranks == 0 || failed_ranks == world);
    if (!any_fired) CHECK(ok && code == TS_OK);
    if (!ok) {
        CHECK(code != TS_OK && code != TS_ERR_DIST && msg[0] != '\0');
        CHECK(strstr(msg, "timed out") == NULL);
        CHECK(sum_ranks(code) == (double)world * (double)code);
    }
    if (ts_test_failed_count() != failures)
        printf("%s, allocation %d: rank %d got %s (%s)\n", what, n, rank, ts_status_string(code),
               msg);
    return any_fired;
}

typedef struct sweep_counts {
    int points, errors, absorbed;
    int unit_oom[N_UNITS]; /* failures named "<unit>: rank v ran out of memory building ..." */
} sweep_counts;

/* One point: the n-th allocation of ts_fsdp on rank `victim` fails. Returns whether it fired
 * there (every rank learns it). */
static bool one_point(const char *what, ts_fsdp_opts o, int victim, int n, sweep_counts *c) {
    int64_t live0 = ts_sweep_live_tensors();
    ts_module *m = model_new();
    if (rank == victim) ts_fault_alloc_set(n);
    ts_module *f = ts_fsdp_new(m, o);
    bool fired = rank == victim && ts_fault_alloc_fired();
    ts_fault_alloc_set(-1);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    int failures = ts_test_failed_count();
    bool any_fired = same_outcome(what, n, f != NULL, fired);
    if (f) {
        CHECK(works(f));
        if (any_fired) c->absorbed++;
    } else {
        c->errors++;
        /* a world of one keeps the error as the op made it; with more ranks it names ts_fsdp's op
         * and the rank */
        char who[32];
        snprintf(who, sizeof who, "rank %d", victim);
        if (world > 1) {
            CHECK(strstr(msg, "ts_fsdp") || strstr(msg, "FullyShardedDataParallel"));
            CHECK(strstr(msg, who) != NULL);
        }
        for (int u = 0; u < N_UNITS; u++) {
            char want[128];
            snprintf(want, sizeof want, "ts_fsdp: %s: %s ran out of memory building its shard",
                     UNIT_LABELS[u], who);
            if (strstr(msg, want)) c->unit_oom[u]++;
        }
    }
    ts_module_free(f);
    ts_error_clear();
    int64_t live1 = ts_sweep_live_tensors();
    CHECK(live1 == live0);
    if (ts_test_failed_count() != failures)
        printf("%s, rank %d failing allocation %d: rank %d got \"%s\", %lld tensors leaked\n", what,
               victim, n, rank, msg, (long long)(live1 - live0));
    c->points++;
    return any_fired;
}

/* a forward and backward of the wrapped model (the loss scaled by s when given) */
static bool train_pass(ts_module *f, ts_grad_scaler *s) {
    ts_scope_begin();
    ts_manual_seed(10 + rank);
    ts_tensor *y = ts_forward(f, ts_randn(TS_SHAPE(3, 4), (ts_opts){0}));
    ts_tensor *loss = ts_sum(ts_mul(y, y));
    ts_backward(s ? ts_grad_scaler_scale(s, loss) : loss);
    bool ok = ts_error() == TS_OK;
    ts_scope_end();
    return ok;
}

/* the clip's all-reduce of the norm: a rank whose own part failed joins it failing */
static void sweep_clip(int victim) {
    ts_module *f = ts_fsdp_new(model_new(), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    CHECK(f && train_pass(f, NULL));
    int n = 1;
    for (; n <= MAX_POINTS; n++) {
        if (rank == victim) ts_fault_alloc_set(n);
        double norm = ts_fsdp_clip_grad_norm(f, 0.5, 2);
        bool fired = rank == victim && ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (!same_outcome("clip", n, norm == norm && ts_error() == TS_OK, fired)) break;
    }
    CHECK(n > 1 && n <= MAX_POINTS);
    ts_module_free(f);
    CHECK_OK();
    if (rank == 0) printf("clip_grad_norm, rank %d failing: %d points\n", victim, n);
}

/* the grad scaler's step: a rank that fails before the found-inf agreement takes part failing */
static void sweep_scaler_step(int victim) {
    ts_module *f = ts_fsdp_new(model_new(), (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    ts_tensor_list l = ts_fsdp_parameters(f);
    int n = 1;
    for (; f && n <= MAX_POINTS; n++) {
        ts_optim *o = ts_sgd_new_params(l.tensors, l.n, (ts_sgd_opts){.lr = 0.01});
        ts_grad_scaler *s = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 8});
        CHECK(o && s);
        ts_optim_zero_grad(o);
        CHECK(train_pass(f, s));
        if (rank == victim) ts_fault_alloc_set(n);
        bool stepped = false;
        bool ok = ts_grad_scaler_step(s, o, &stepped) == TS_OK;
        bool fired = rank == victim && ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        bool go = same_outcome("scaler step", n, ok, fired);
        ts_grad_scaler_free(s);
        ts_optim_free(o);
        if (!go) break;
    }
    CHECK(n > 1 && n <= MAX_POINTS);
    ts_tensor_list_free(&l);
    ts_module_free(f);
    CHECK_OK();
    if (rank == 0) printf("grad_scaler_step, rank %d failing: %d points\n", victim, n);
}

static void sweep(const char *what, ts_fsdp_opts o) {
    int victims[2] = {world - 1, 0};
    for (int k = 0; k < (world > 1 ? 2 : 1); k++) {
        sweep_counts c = {0};
        int n = 1;
        while (n <= MAX_POINTS && one_point(what, o, victims[k], n, &c)) n++;
        CHECK(n <= MAX_POINTS);
        CHECK(c.errors > 0);
        /* with more ranks, a failure inside each unit's building is named as such */
        for (int u = 0; world > 1 && u < N_UNITS; u++) CHECK(c.unit_oom[u] > 0);
        /* afterwards, ts_fsdp works on every rank */
        ts_module *f = ts_fsdp_new(model_new(), o);
        CHECK(f != NULL && works(f));
        ts_module_free(f);
        CHECK_OK();
        if (rank == 0)
            printf("%s, rank %d failing: %d points, %d errors, %d absorbed, unit OOMs %d/%d/%d\n",
                   what, victims[k], c.points, c.errors, c.absorbed, c.unit_oom[0], c.unit_oom[1],
                   c.unit_oom[2]);
    }
}

int main(void) {
    /* the guard: a rank left in a collective times out in 10 s (the checks then fail) */
    if (ts_dist_init((ts_dist_opts){.timeout_s = 10}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    sweep("stage 3", (ts_fsdp_opts){.units = UNITS, .n_units = 2});
    sweep("bf16, decay groups", (ts_fsdp_opts){.units = UNITS,
                                               .n_units = 2,
                                               .param_dtype = TS_BF16,
                                               .reduce_dtype = TS_F32,
                                               .decay_groups = true});
    sweep_clip(world - 1);
    sweep_scaler_step(world - 1);
    ts_dist_finalize();
    return ts_test_finish();
}
