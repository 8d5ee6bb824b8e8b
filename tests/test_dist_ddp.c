/* test_dist_ddp.c — DistributedDataParallel (run as a world of one, and by ctest under mpiexec
 * with 2 and 4 ranks): 10 steps of SGD with momentum and of Adam over the ranks equal one process
 * training on the global batch; small buckets, gradients as bucket views, no_sync accumulation,
 * find_unused_parameters and PyTorch's error without it, parameters and buffers broadcast from
 * rank 0, a model that differs across ranks, the grad scaler skipping a step on every rank
 * together, the hook the reducer runs on, and the wrapper's names. Every rank computes the
 * one-process reference itself, so each compares on its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static int rank, world;

/* ------------------------------------------------------------------ a small model */
typedef struct mlp {
    ts_module base;
    ts_module *fc1, *fc2, *fc3; /* fc3 is used only with `branch` */
    bool branch;
} mlp;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    mlp *m = (mlp *)self;
    ts_tensor *h = ts_tanh(ts_forward(m->fc1, x));
    ts_tensor *y = ts_forward(m->fc2, h);
    if (m->branch) y = ts_add(y, ts_forward(m->fc3, h));
    return y;
}

static ts_module *mlp_new(uint64_t seed, ts_device dev, ts_dtype dt, int hidden) {
    ts_manual_seed(seed);
    mlp *m = ts_module_alloc(sizeof *m, "MLP", mlp_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(6, hidden));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(hidden, 3));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(hidden, 3));
    m->branch = true;
    ts_module_to_dtype(&m->base, dt);
    return ts_module_to(&m->base, dev);
}

static mlp *inner(ts_module *ddp) { return (mlp *)ts_ddp_module(ddp); }

/* The global batch of a step: 8 rows per rank, the same numbers on every rank. */
#define ROWS 8
static void global_batch(int step, ts_device dev, ts_dtype dt, ts_tensor **x, ts_tensor **y) {
    ts_rng_state saved = ts_rng_get_state();
    ts_manual_seed(1000 + (uint64_t)step);
    *x = ts_to(ts_to_dtype(ts_randn(TS_SHAPE(ROWS * world, 6), (ts_opts){0}), dt), dev);
    *y = ts_to(ts_randint(0, 3, TS_SHAPE(ROWS * world), (ts_opts){0}), dev);
    ts_rng_set_state(saved);
}

static ts_tensor *rows_of_rank(ts_tensor *t) { return ts_narrow(t, 0, (int64_t)rank * ROWS, ROWS); }

/* max over parameters of |a - b| / max(|b|, 1e-3): relative, and absolute near zero */
static double params_rel_diff(ts_module *a, ts_module *b) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    double worst = la.n == lb.n ? 0 : INFINITY;
    for (int i = 0; i < la.n && i < lb.n; i++) {
        ts_scope_begin();
        ts_tensor *ta = ts_to_dtype(ts_to(la.tensors[i], ts_cpu()), TS_F64);
        ts_tensor *tb = ts_to_dtype(ts_to(lb.tensors[i], ts_cpu()), TS_F64);
        ts_tensor *den = ts_clamp_min(ts_abs(tb), 1e-3);
        double d = ts_item(ts_max(ts_div(ts_abs(ts_sub(ta, tb)), den)));
        if (!(d <= worst)) worst = d;
        ts_scope_end();
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

typedef enum { OPT_MOMENTUM, OPT_ADAM } opt_kind;
static ts_optim *make_opt(ts_module *m, opt_kind k) {
    if (k == OPT_ADAM) return ts_adam_new(m, (ts_adam_opts){.lr = 1e-2});
    return ts_sgd_new(m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
}

/* ------------------------------------------------------------------ THE equivalence */
/* Rank r trains on rows [8r, 8r + 8) of each global batch with DDP; the reference trains one
 * model on the whole global batch. Every rank starts from a different seed: the construction's
 * broadcast must make them rank 0's model (which the reference also starts from). In float64 the
 * two differ only by the order of sums (the averaged gradient adds W partial sums of 8 rows, the
 * reference one sum of 8W rows): ~1e-15 relative per step, so 1e-9 after 10 steps leaves room and
 * still catches any missing or doubled contribution (>= 1e-2). float32: 1e-4 (a few ulps, times
 * Adam's division by sqrt(v) where gradients are small). */
static void equivalence(opt_kind kind, ts_device dev, ts_dtype dt, ts_ddp_opts o, bool no_sync) {
    static const char *names[] = {"SGD+momentum", "Adam"};
    ts_module *ref = mlp_new(42, dev, dt, 16);
    ts_module *ddp = ts_ddp_new(mlp_new(42 + (uint64_t)rank, dev, dt, 16), o);
    CHECK(ddp != NULL);
    if (!ddp) {
        ts_module_free(ref);
        return;
    }
    CHECK(params_rel_diff(ddp, ref) == 0); /* rank 0's initial weights everywhere */
    ts_optim *o_ref = make_opt(ref, kind), *o_ddp = make_opt(ddp, kind);
    for (int step = 0; step < 10; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        global_batch(step, dev, dt, &x, &y);
        ts_optim_zero_grad(o_ref);
        ts_backward(ts_cross_entropy(ts_forward(ref, x), y));
        ts_optim_step(o_ref);

        ts_optim_zero_grad(o_ddp);
        ts_tensor *xr = rows_of_rank(x), *yr = rows_of_rank(y);
        if (no_sync) {
            /* two half batches: the first accumulates locally, the second reduces the sum; each
             * loss is halved so the sum is the mean over the rank's rows */
            ts_ddp_no_sync_begin(ddp);
            ts_backward(
                ts_mul_scalar(ts_cross_entropy(ts_forward(ddp, ts_narrow(xr, 0, 0, ROWS / 2)),
                                               ts_narrow(yr, 0, 0, ROWS / 2)),
                              0.5));
            ts_ddp_no_sync_end(ddp);
            ts_backward(ts_mul_scalar(
                ts_cross_entropy(ts_forward(ddp, ts_narrow(xr, 0, ROWS / 2, ROWS / 2)),
                                 ts_narrow(yr, 0, ROWS / 2, ROWS / 2)),
                0.5));
        } else {
            ts_backward(ts_cross_entropy(ts_forward(ddp, xr), yr));
        }
        ts_optim_step(o_ddp);
        ts_scope_end();
        CHECK_OK();
    }
    double tol = dt == TS_F64 ? 1e-9 : 1e-4;
    double d = params_rel_diff(ts_ddp_module(ddp), ref);
    if (!(d <= tol))
        printf("rank %d: %s on %s %s%s%s: parameters differ by %.3g relative (tolerance %g)\n",
               rank, names[kind], ts_device_str(dev), ts_dtype_name(dt),
               o.gradient_as_bucket_view ? ", bucket views" : "", no_sync ? ", no_sync" : "", d,
               tol);
    CHECK(d <= tol);
    ts_ddp_stats st;
    CHECK(ts_ddp_get_stats(ddp, &st) == TS_OK);
    if (o.bucket_cap_mb > 0 && o.bucket_cap_mb < 1e-3) CHECK(st.buckets >= 3);
    if (world > 1) CHECK(st.comm_s > 0 && st.wait_s >= 0); /* the reductions ran and were timed */
    if (o.overlap) CHECK(st.overlap == (o.overlap == TS_DDP_OVERLAP_ON));
    ts_optim_free(o_ref);
    ts_optim_free(o_ddp);
    ts_module_free(ref);
    ts_module_free(ddp);
    CHECK_OK();
}

/* The buckets: the default puts this small model in one; 1 KiB buckets give one per 256 f32 values,
 * and bucket views make .grad a view of a bucket (so gradients are not copied back). */
static void bucket_layout(void) {
    ts_module *ddp = ts_ddp_new(mlp_new(1, ts_cpu(), TS_F32, 16), (ts_ddp_opts){0});
    ts_ddp_stats st;
    CHECK(ts_ddp_get_stats(ddp, &st) == TS_OK);
    CHECK_EQ(st.buckets, 1);
    ts_module_free(ddp);
    /* fc1 16x6+16 = 112, fc2 3x16+3 = 51, fc3 51 values: reverse order fc3.bias, fc3.weight, ...
     * with a first bucket of 100 bytes (25 floats) and 400-byte ones after it */
    ddp = ts_ddp_new(mlp_new(1, ts_cpu(), TS_F32, 16),
                     (ts_ddp_opts){.first_bucket_mb = 100.0 / 1048576,
                                   .bucket_cap_mb = 400.0 / 1048576,
                                   .gradient_as_bucket_view = true});
    CHECK(ts_ddp_get_stats(ddp, &st) == TS_OK);
    /* fc3.bias (3) + fc3.weight (48) = 204 B >= 100: bucket 0; fc2.bias + fc2.weight + fc1.bias
     * = 51 + 16 floats = 268 B, + fc1.weight 96 floats = 652 B >= 400: bucket 1 */
    CHECK_EQ(st.buckets, 2);
    CHECK_EQ(st.bucket_bytes_max, 652);
    mlp *m = inner(ddp);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 6), (ts_opts){0});
    ts_backward(ts_sum(ts_forward(ddp, x)));
    ts_tensor *w1 = ts_module_get(m->fc1, "weight"), *w3 = ts_module_get(m->fc3, "weight");
    ts_tensor *b2 = ts_module_get(m->fc2, "bias");
    /* fc1.weight and fc2.bias share bucket 1's storage, fc3.weight bucket 0's */
    CHECK(ts_grad(w1) && ts_grad(b2) && ts_shares_storage(ts_grad(w1), ts_grad(b2)));
    CHECK(ts_grad(w3) && !ts_shares_storage(ts_grad(w1), ts_grad(w3)));
    ts_scope_end();
    ts_module_free(ddp);
    CHECK_OK();
}

/* find_unused_parameters, and PyTorch's error at the next forward without it */
static void unused_parameters(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 6), (ts_opts){0});
    ts_module *ddp = ts_ddp_new(mlp_new(3, ts_cpu(), TS_F32, 8), (ts_ddp_opts){0});
    inner(ddp)->branch = false;
    ts_backward(ts_sum(ts_forward(ddp, x))); /* fc3 unused: its bucket never fills */
    CHECK_OK();
    CHECK(ts_forward(ddp, x) == NULL);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "Expected to have finished reduction in the prior iteration") != NULL);
    CHECK(strstr(msg, "fc3.weight") != NULL && strstr(msg, "find_unused_parameters") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    ts_module_free(ddp);

    ddp =
        ts_ddp_new(mlp_new(3, ts_cpu(), TS_F32, 8), (ts_ddp_opts){.find_unused_parameters = true});
    ts_module *ref = mlp_new(3, ts_cpu(), TS_F32, 8);
    inner(ddp)->branch = ((mlp *)ref)->branch = false;
    for (int step = 0; step < 3; step++) {
        ts_backward(ts_sum(ts_forward(ddp, x)));
        CHECK_OK();
    }
    /* the same input on every rank: the average is each rank's own gradient, three times */
    ts_backward(ts_sum(ts_forward(ref, x)));
    ts_backward(ts_sum(ts_forward(ref, x)));
    ts_backward(ts_sum(ts_forward(ref, x)));
    mlp *m = inner(ddp), *r = (mlp *)ref;
    ts_tensor *g = ts_grad(ts_module_get(m->fc1, "weight"));
    ts_tensor *gr = ts_grad(ts_module_get(r->fc1, "weight"));
    CHECK(g && gr && ts_item(ts_max(ts_abs(ts_sub(g, gr)))) <= 1e-5);
    /* the unused layer gets zeros (the other ranks did not use it either) */
    ts_tensor *g3 = ts_grad(ts_module_get(m->fc3, "weight"));
    CHECK(g3 && ts_item(ts_max(ts_abs(g3))) == 0);
    ts_module_free(ref);
    ts_module_free(ddp);
    ts_scope_end();
    CHECK_OK();
}

/* Buffers come from rank 0 before every forward (broadcast_buffers), not with the option off. */
typedef struct bn_net {
    ts_module base;
    ts_module *fc, *bn;
} bn_net;
static ts_tensor *bn_forward(ts_module *self, ts_tensor *x) {
    bn_net *m = (bn_net *)self;
    return ts_forward(m->bn, ts_forward(m->fc, x));
}
static ts_module *bn_new(void) {
    ts_manual_seed(5);
    bn_net *m = ts_module_alloc(sizeof *m, "BN", bn_forward);
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(6, 4));
    m->bn = ts_module_add(&m->base, "bn", ts_batch_norm1d_new(4, (ts_norm_opts){0}));
    return &m->base;
}
static void buffers(bool broadcast) {
    ts_module *ddp = ts_ddp_new(bn_new(), (ts_ddp_opts){.no_broadcast_buffers = !broadcast});
    ts_module *net = ts_ddp_module(ddp);
    ts_tensor *rm = ts_module_get(net, "bn.running_mean");
    ts_release(ts_fill_(rm, 10.0 * rank)); /* each rank's own statistics (the op's reference) */
    ts_module_eval(ddp);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_forward(ddp, ts_randn(TS_SHAPE(2, 6), (ts_opts){0}));
    ts_no_grad_end();
    double want = broadcast ? 0.0 : 10.0 * rank;
    CHECK(ts_item(ts_max(ts_abs(ts_sub_scalar(rm, want)))) == 0);
    ts_scope_end();
    ts_module_free(ddp);
    CHECK_OK();
}

/* A model that differs on one rank: every rank gets the error naming the rank and both shapes. */
static void different_models(void) {
    if (world == 1) return;
    ts_module *m = mlp_new(1, ts_cpu(), TS_F32, rank == world - 1 ? 17 : 16);
    ts_module *ddp = ts_ddp_new(m, (ts_ddp_opts){0});
    CHECK(ddp == NULL);
    char want[64];
    snprintf(want, sizeof want, "on rank %d", world - 1);
    const char *msg = ts_error_message();
    CHECK(strstr(msg, "DDP expects same model across all ranks") != NULL);
    CHECK(strstr(msg, want) != NULL && strstr(msg, "[16, 6]") && strstr(msg, "[17, 6]"));
    CHECK_ERR(TS_ERR_DIST);
}

/* The grad scaler: an inf on the last rank only (gradients not reduced: no_sync) makes every rank
 * skip the step and back off the scale. */
static void scaler_agrees(void) {
    ts_module *ddp = ts_ddp_new(mlp_new(9, ts_cpu(), TS_F32, 8), (ts_ddp_opts){0});
    ts_optim *opt = ts_sgd_new(ddp, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *gs = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
    ts_scope_begin();
    ts_tensor *w = ts_module_get(inner(ddp)->fc1, "weight");
    ts_tensor *before = ts_clone(w);
    ts_ddp_no_sync_begin(ddp);
    ts_tensor *loss = ts_sum(ts_forward(ddp, ts_randn(TS_SHAPE(4, 6), (ts_opts){0})));
    if (rank == world - 1) loss = ts_mul_scalar(loss, INFINITY);
    ts_backward(ts_grad_scaler_scale(gs, loss));
    ts_ddp_no_sync_end(ddp);
    bool stepped = true;
    CHECK(ts_grad_scaler_step(gs, opt, &stepped) == TS_OK);
    CHECK(!stepped);
    CHECK(ts_grad_scaler_update(gs) == TS_OK);
    CHECK(ts_grad_scaler_get_scale(gs) == 512);
    CHECK(ts_item(ts_max(ts_abs(ts_sub(w, before)))) == 0);
    ts_scope_end();
    ts_grad_scaler_free(gs);
    ts_optim_free(opt);
    ts_module_free(ddp);
    CHECK_OK();
}

/* A scaler whose process group is this rank alone decides alone: the rank that saw the inf skips
 * and backs off, the others step (ranks that train independently); a NULL scaler is refused. */
static void scaler_alone(void) {
    CHECK(ts_grad_scaler_set_process_group(NULL, NULL) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "scaler is NULL");
    ts_dist_group *mine = NULL;
    for (int r = 0; r < world; r++) { /* every rank creates every group, in the same order */
        ts_dist_group *g = ts_dist_group_new(&r, 1);
        if (r == rank) mine = g;
    }
    CHECK(mine && ts_dist_group_size(mine) == 1);
    ts_module *ddp = ts_ddp_new(mlp_new(9, ts_cpu(), TS_F32, 8), (ts_ddp_opts){0});
    ts_optim *opt = ts_sgd_new(ddp, (ts_sgd_opts){.lr = 0.1});
    ts_grad_scaler *gs = ts_grad_scaler_new((ts_grad_scaler_opts){.init_scale = 1024});
    CHECK(ts_grad_scaler_set_process_group(gs, mine) == TS_OK);
    ts_scope_begin();
    ts_tensor *w = ts_module_get(inner(ddp)->fc1, "weight");
    ts_tensor *before = ts_clone(w);
    ts_ddp_no_sync_begin(ddp);
    ts_tensor *loss = ts_sum(ts_forward(ddp, ts_randn(TS_SHAPE(4, 6), (ts_opts){0})));
    const bool inf_here = rank == world - 1;
    if (inf_here) loss = ts_mul_scalar(loss, INFINITY);
    ts_backward(ts_grad_scaler_scale(gs, loss));
    ts_ddp_no_sync_end(ddp);
    bool stepped = !inf_here;
    CHECK(ts_grad_scaler_step(gs, opt, &stepped) == TS_OK);
    CHECK(stepped == !inf_here);
    CHECK(ts_grad_scaler_update(gs) == TS_OK);
    CHECK(ts_grad_scaler_get_scale(gs) == (inf_here ? 512 : 1024));
    const double moved = ts_item(ts_max(ts_abs(ts_sub(w, before))));
    CHECK(inf_here ? moved == 0 : moved > 0);
    ts_scope_end();
    ts_grad_scaler_free(gs);
    ts_optim_free(opt);
    ts_module_free(ddp);
    CHECK_OK();
}

/* The hook DDP builds on: it runs once per backward, after the last of several gradients. */
static int hook_calls;
static double hook_seen;
static void count_hook(ts_tensor *leaf, void *ctx) {
    hook_calls++;
    hook_seen = ts_item(ts_grad(leaf));
    (void)ctx;
}
static void post_accumulate_hook(void) {
    ts_scope_begin();
    ts_tensor *a = ts_tensor_f32(TS_SHAPE(), (float[]){3}, (ts_opts){.requires_grad = true});
    int h = ts_register_post_accumulate_grad_hook(a, count_hook, NULL);
    CHECK(h > 0);
    /* a used three times: a*a + a -> gradient 2a + 1 = 7, the hook sees it whole, once */
    ts_backward(ts_add(ts_mul(a, a), a));
    CHECK_EQ(hook_calls, 1);
    CHECK(hook_seen == 7);
    ts_backward(a); /* the leaf as the root */
    CHECK_EQ(hook_calls, 2);
    CHECK(ts_remove_grad_hook(a, h) == TS_OK);
    ts_backward(ts_mul(a, a));
    CHECK_EQ(hook_calls, 2);
    CHECK(ts_remove_grad_hook(a, h) != TS_OK);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *b = ts_mul(a, a);
    CHECK(ts_register_post_accumulate_grad_hook(b, count_hook, NULL) == 0);
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

static void names_and_errors(void) {
    ts_module *ddp = ts_ddp_new(mlp_new(1, ts_cpu(), TS_F32, 4), (ts_ddp_opts){0});
    ts_tensor_list sd = ts_module_state_dict(ddp);
    CHECK(sd.n == 6 && strcmp(sd.names[0], "module.fc1.weight") == 0);
    ts_tensor_list_free(&sd);
    sd = ts_module_state_dict(ts_ddp_module(ddp));
    CHECK(sd.n == 6 && strcmp(sd.names[0], "fc1.weight") == 0);
    ts_tensor_list_free(&sd);
    CHECK(strcmp(ddp->type_name, "DistributedDataParallel") == 0);
    ts_module_free(ddp);
    CHECK(ts_ddp_new(NULL, (ts_ddp_opts){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_ddp_new(mlp_new(1, ts_cpu(), TS_F32, 4), (ts_ddp_opts){.bucket_cap_mb = -1}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_ddp_new(mlp_new(1, ts_cpu(), TS_F32, 4), (ts_ddp_opts){.overlap = 7}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module *lin = ts_linear_new(2, 2);
    CHECK(ts_ddp_module(lin) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(lin);
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    if (rank == 0) printf("%s\n", ts_dist_describe());
    ts_device sim = ts_sim(rank % 4);
    for (int k = OPT_MOMENTUM; k <= OPT_ADAM; k++) {
        equivalence(k, ts_cpu(), TS_F64, (ts_ddp_opts){0}, false);
        equivalence(k, sim, TS_F64,
                    (ts_ddp_opts){.first_bucket_mb = 256.0 / 1048576,
                                  .bucket_cap_mb = 512.0 / 1048576,
                                  .overlap = TS_DDP_OVERLAP_ON},
                    false);
        equivalence(k, ts_cpu(), TS_F64,
                    (ts_ddp_opts){.first_bucket_mb = 256.0 / 1048576,
                                  .bucket_cap_mb = 512.0 / 1048576,
                                  .gradient_as_bucket_view = true,
                                  .overlap = TS_DDP_OVERLAP_OFF},
                    false);
        equivalence(k, sim, TS_F32, (ts_ddp_opts){.gradient_as_bucket_view = true}, false);
    }
    equivalence(OPT_MOMENTUM, ts_cpu(), TS_F64, (ts_ddp_opts){0}, true);
    equivalence(OPT_ADAM, sim, TS_F64, (ts_ddp_opts){.gradient_as_bucket_view = true}, true);
    bucket_layout();
    unused_parameters();
    buffers(true);
    buffers(false);
    different_models();
    scaler_agrees();
    scaler_alone();
    post_accumulate_hook();
    names_and_errors();
    ts_dist_finalize();
    return ts_test_finish();
}
