/* test_dist_sync_batch_norm.c — ts_sync_batch_norm (run as a world of one, and by ctest under
 * mpiexec with 2 and 4 ranks): each rank normalises its shard of a global batch, and its output,
 * the running statistics and the gradients of its input, weight and bias equal batch norm over
 * the whole batch, computed on the host in long double (tests/support/bn_ref.c) with its
 * per-element tolerances for the arithmetic (sums of m terms in the input's dtype). Uneven shards
 * (rank r holds 2 + r rows; a rank with none), [N, C], [N, C, L] and [N, C, D, H, W] inputs,
 * float64, float32 and bfloat16, cpu and sim, without weight, bias or running statistics, a
 * subgroup; then the failures every rank must share: a total of one value per channel, channel
 * counts that differ across ranks, a bad argument on one rank. Every rank builds the same global
 * batch and the reference itself, so each compares on its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bn_ref.h"
#include "host_values.h"
#include "tol_check.h"
#include "ts_test.h"

static int rank, world;

/* ------------------------------------------------------------------ shards */
typedef enum { ROWS_UNEVEN, ROWS_ONE_EMPTY } rows_kind;

/* rows of group member r: 2 + r, or 3 with member 1 holding none */
static int64_t rows_of(rows_kind k, int r) {
    if (k == ROWS_ONE_EMPTY) return r == 1 ? 0 : 3;
    return 2 + r;
}

/* worst |got - want| / tol over n values (> 1: a failure), printing the first miss */
static double worst(const char *what, const double *got, const double *want, const double *tol,
                    int64_t n) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / tol[i];
        if (!(e <= 1) && w <= 1)
            printf("  rank %d %s[%lld]: %.17g vs %.17g (tol %.3g)\n", rank, what, (long long)i,
                   got[i], want[i], tol[i]);
        if (!(e <= w)) w = e;
    }
    return w;
}

typedef struct bn_case {
    const char *name;
    ts_device dev;
    ts_dtype dt;
    int ndim;         /* 2, 3 or 5 */
    int64_t c, sp[3]; /* channels; the spatial dims (ndim - 2 of them) */
    rows_kind rows;
    bool weight, bias, running;
    double momentum, eps;
    ts_dist_group *group; /* NULL: the world */
} bn_case;

/* One training step of the case on this rank against the reference over every member's rows. */
static void check_case(bn_case k) {
    const int gr = ts_dist_group_rank(k.group), gw = ts_dist_group_size(k.group);
    if (gr < 0) return; /* not a member */
    int64_t total = 0, start = 0;
    for (int r = 0; r < gw; r++) {
        if (r == gr) start = total;
        total += rows_of(k.rows, r);
    }
    const int64_t mine = rows_of(k.rows, gr), c = k.c;
    int64_t hw = 1;
    for (int d = 0; d < k.ndim - 2; d++) hw *= k.sp[d];
    ts_shape gs = {.ndim = k.ndim}, ls = {.ndim = k.ndim};
    gs.dims[0] = total, ls.dims[0] = mine;
    gs.dims[1] = ls.dims[1] = c;
    for (int d = 2; d < k.ndim; d++) gs.dims[d] = ls.dims[d] = k.sp[d - 2];
    const int64_t n_all = total * c * hw, n_mine = mine * c * hw;

    /* the global batch, the same on every rank: each row drifts, so that the shards' means differ
     * (a step that normalised by its own shard's statistics would show) */
    ts_bn_data d = {0};
    d.x = malloc((size_t)n_all * sizeof(double));
    d.dy = malloc((size_t)n_all * sizeof(double));
    d.w = malloc((size_t)c * sizeof(double)), d.b = malloc((size_t)c * sizeof(double));
    d.rm = malloc((size_t)c * sizeof(double)), d.rv = malloc((size_t)c * sizeof(double));
    ts_test_fill_uniform(d.x, n_all, 11);
    ts_test_fill_uniform(d.dy, n_all, 12);
    ts_test_fill_uniform(d.w, c, 13);
    ts_test_fill_uniform(d.b, c, 14);
    ts_test_fill_uniform(d.rm, c, 15);
    ts_test_fill_uniform(d.rv, c, 16);
    for (int64_t i = 0; i < n_all; i++) d.x[i] = 3 + 2 * d.x[i] + 0.25 * (double)(i / (c * hw));
    for (int64_t i = 0; i < c; i++) d.w[i] = 1 + 0.5 * d.w[i], d.rv[i] = 1 + 0.5 * d.rv[i];
    if (!k.weight)
        for (int64_t i = 0; i < c; i++) d.w[i] = 1;
    if (!k.bias)
        for (int64_t i = 0; i < c; i++) d.b[i] = 0;

    ts_scope_begin();
    /* the inputs in the case's dtype; the reference reads them back, rounded as the op sees them */
    ts_tensor *X = ts_test_tensor_f64(gs, d.x, k.dt, ts_cpu());
    ts_tensor *DY = ts_test_tensor_f64(gs, d.dy, k.dt, ts_cpu());
    ts_tensor *W = ts_test_tensor_f64(TS_SHAPE(c), d.w, k.dt, k.dev);
    ts_tensor *B = ts_test_tensor_f64(TS_SHAPE(c), d.b, k.dt, k.dev);
    ts_tensor *RM = ts_test_tensor_f64(TS_SHAPE(c), d.rm, k.dt, k.dev);
    ts_tensor *RV = ts_test_tensor_f64(TS_SHAPE(c), d.rv, k.dt, k.dev);
    ts_test_read_f64(X, d.x, n_all), ts_test_read_f64(DY, d.dy, n_all);
    ts_test_read_f64(W, d.w, c), ts_test_read_f64(B, d.b, c);
    ts_test_read_f64(RM, d.rm, c), ts_test_read_f64(RV, d.rv, c);
    /* the sums of a channel take m = total * hw terms in the statistics' dtype (float64 for a
     * float64 input, float32 otherwise; growth in units of double's roundoff, the reference's
     * convention) */
    const double m = (double)(total * hw);
    const double growth = k.dt == TS_F64 ? m : m * ts_test_unit_roundoff(TS_F32) / ldexp(1, -53);
    ts_bn_ref ref = ts_bn_reference(&d, total, c, hw, true, true, k.eps, k.momentum, growth, k.dt);

    /* this rank's shard, a leaf on the case's device */
    ts_tensor *x = ts_detach(ts_to(ts_narrow(X, 0, start, mine), k.dev));
    ts_tensor *dy = ts_to(ts_narrow(DY, 0, start, mine), k.dev);
    ts_set_requires_grad(x, true);
    ts_set_requires_grad(W, true);
    ts_set_requires_grad(B, true);
    ts_tensor *y =
        ts_sync_batch_norm(x, k.running ? RM : NULL, k.running ? RV : NULL, k.weight ? W : NULL,
                           k.bias ? B : NULL, k.momentum, k.eps, k.group);
    CHECK_OK();
    if (y) ts_backward(ts_sum(ts_mul(y, dy)));
    CHECK_OK();

    double *got = malloc((size_t)(n_mine > c ? n_mine : c) * sizeof(double) + 8);
    const int64_t off = start * c * hw;
    char what[160];
    snprintf(what, sizeof what, "%s y", k.name);
    CHECK(y && ts_test_read_f64(y, got, n_mine) &&
          worst(what, got, ref.y + off, ref.ty + off, n_mine) <= 1);
    snprintf(what, sizeof what, "%s dx", k.name);
    CHECK(ts_grad(x) && ts_test_read_f64(ts_grad(x), got, n_mine) &&
          worst(what, got, ref.dx + off, ref.tdx + off, n_mine) <= 1);
    /* the weight's and bias's gradients: this rank's rows' share (over the global statistics) */
    double *dw = calloc((size_t)c, sizeof(double)), *db = calloc((size_t)c, sizeof(double));
    for (int64_t i = start; i < start + mine; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++) {
                const int64_t at = (i * c + ch) * hw + j;
                db[ch] += d.dy[at];
                dw[ch] += d.dy[at] * (d.x[at] - ref.mean[ch]) * ref.inv[ch];
            }
    if (k.weight) {
        snprintf(what, sizeof what, "%s dweight", k.name);
        CHECK(ts_grad(W) && ts_test_read_f64(ts_grad(W), got, c) &&
              worst(what, got, dw, ref.tdw, c) <= 1);
    } else {
        CHECK(ts_grad(W) == NULL);
    }
    if (k.bias) {
        snprintf(what, sizeof what, "%s dbias", k.name);
        CHECK(ts_grad(B) && ts_test_read_f64(ts_grad(B), got, c) &&
              worst(what, got, db, ref.tdb, c) <= 1);
        /* the shares add up to the global batch's gradient */
        ts_tensor *sum = ts_clone(ts_grad(B));
        CHECK(ts_dist_all_reduce(sum, TS_DIST_SUM, k.group) == TS_OK);
        snprintf(what, sizeof what, "%s dbias summed", k.name);
        CHECK(ts_test_read_f64(sum, got, c) && worst(what, got, ref.db, ref.tdb, c) <= 1);
    }
    if (k.running) {
        snprintf(what, sizeof what, "%s running_mean", k.name);
        CHECK(ts_test_read_f64(RM, got, c) && worst(what, got, ref.rm, ref.trm, c) <= 1);
        snprintf(what, sizeof what, "%s running_var", k.name);
        CHECK(ts_test_read_f64(RV, got, c) && worst(what, got, ref.rv, ref.trv, c) <= 1);
    }
    CHECK_OK();
    free(got), free(dw), free(db);
    ts_bn_ref_free(&ref);
    ts_bn_data_free(&d);
    ts_scope_end();
}

/* ------------------------------------------------------------------ failures shared by all ranks
 */
static void failures(void) {
    ts_scope_begin();
    /* one value per channel over the whole group (rank 0 holds one row, the others none) */
    ts_tensor *x = ts_ones(TS_SHAPE(rank == 0 ? 1 : 0, 3), (ts_opts){0});
    CHECK(ts_sync_batch_norm(x, NULL, NULL, NULL, NULL, 0.1, 0, NULL) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "more than 1 value per channel");
    /* the same with more rows: a world of one has 1 x 1 values, more ranks more */
    x = ts_ones(TS_SHAPE(1, 3), (ts_opts){0});
    ts_tensor *y = ts_sync_batch_norm(x, NULL, NULL, NULL, NULL, 0.1, 0, NULL);
    if (world == 1) {
        CHECK(y == NULL);
        CHECK_ERR_HAS(TS_ERR_ARG, "more than 1 value per channel");
    } else {
        CHECK(y != NULL);
        CHECK_OK();
    }
    /* a bad argument on one rank (a weight of the wrong size) fails every rank */
    ts_tensor *w = ts_ones(TS_SHAPE(rank == world - 1 ? 2 : 3), (ts_opts){0});
    CHECK(ts_sync_batch_norm(ts_ones(TS_SHAPE(4, 3), (ts_opts){0}), NULL, NULL, w, NULL, 0.1, 0,
                             NULL) == NULL);
    if (rank == world - 1) {
        CHECK_ERR_HAS(TS_ERR_SHAPE, "weight should contain 3 elements");
    } else { /* the failed rank's error, naming it */
        CHECK_ERR_HAS(TS_ERR_SHAPE, "sync_batch_norm: weight should contain 3 elements");
    }
    /* an integer input, on every rank */
    CHECK(ts_sync_batch_norm(ts_ones(TS_SHAPE(4, 3), (ts_opts){.dtype = TS_I64}), NULL, NULL, NULL,
                             NULL, 0.1, 0, NULL) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    /* channel counts that differ across ranks */
    if (world > 1) {
        x = ts_ones(TS_SHAPE(4, rank == 0 ? 3 : 4), (ts_opts){0});
        CHECK(ts_sync_batch_norm(x, NULL, NULL, NULL, NULL, 0.1, 0, NULL) == NULL);
        CHECK(ts_error() == TS_ERR_SHAPE);
        ts_error_clear();
    }
    /* the group still works after the shared failures */
    x = ts_ones(TS_SHAPE(2, 3), (ts_opts){0});
    CHECK(ts_sync_batch_norm(x, NULL, NULL, NULL, NULL, 0.1, 0, NULL) != NULL);
    CHECK_OK();
    /* eval needs no collective: ts_batch_norm; a double backward is refused */
    ts_tensor *xg = ts_randn(TS_SHAPE(3, 2), (ts_opts){.requires_grad = true});
    y = ts_sync_batch_norm(xg, NULL, NULL, NULL, NULL, 0.1, 0, NULL);
    ts_tensor *gx = NULL, *gx2 = NULL, *loss = ts_sum(ts_square(y));
    CHECK(ts_autograd_grad(&loss, NULL, 1, &xg, 1, (ts_grad_opts){.create_graph = true}, &gx) ==
              TS_OK &&
          gx);
    if (gx) {
        ts_tensor *l2 = ts_sum(gx);
        CHECK(ts_autograd_grad(&l2, NULL, 1, &xg, 1, (ts_grad_opts){0}, &gx2) != TS_OK);
        CHECK_ERR(TS_ERR_UNSUPPORTED);
    }
    ts_scope_end();
}

int main(void) {
    if (ts_dist_init((ts_dist_opts){.timeout_s = 120}) != TS_OK) {
        printf("dist_init: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    if (rank == 0) printf("%s\n", ts_dist_describe());
    const ts_device cpu = ts_cpu(), sim = ts_sim(rank % 4);
    const bn_case base = {.dev = cpu,
                          .dt = TS_F64,
                          .ndim = 3,
                          .c = 3,
                          .sp = {4},
                          .weight = true,
                          .bias = true,
                          .running = true,
                          .momentum = 0.1,
                          .eps = 1e-5};
    bn_case k = base;
    k.name = "[N, C, L] f64 cpu";
    check_case(k);
    k.name = "[N, C, L] f32 sim", k.dt = TS_F32, k.dev = sim;
    check_case(k);
    k = base;
    k.name = "[N, C] f32 cpu", k.ndim = 2, k.c = 5, k.dt = TS_F32, k.momentum = 0.5;
    check_case(k);
    k = base;
    k.name = "[N, C, D, H, W] f32 cpu", k.ndim = 5, k.c = 2, k.sp[0] = 2, k.sp[1] = 3, k.sp[2] = 2,
    k.dt = TS_F32;
    check_case(k);
    k.name = "[N, C, D, H, W] f64 sim", k.dt = TS_F64, k.dev = sim, k.momentum = 1;
    check_case(k);
    k = base;
    k.name = "[N, C, L] bf16 cpu", k.dt = TS_BF16;
    check_case(k);
    k = base;
    k.name = "one rank empty, f32", k.rows = ROWS_ONE_EMPTY, k.dt = TS_F32, k.eps = 1e-3;
    check_case(k);
    k = base;
    k.name = "no weight, bias, running stats", k.weight = k.bias = k.running = false;
    check_case(k);
    k = base;
    k.name = "weight only", k.bias = false, k.momentum = 0;
    check_case(k);
    if (world > 2) { /* a subgroup of ranks 0 and 1 (the others are outside it) */
        ts_dist_group *g = ts_dist_group_new((int[]){0, 1}, 2);
        CHECK(g != NULL);
        k = base;
        k.name = "subgroup {0, 1}", k.group = g;
        check_case(k);
        if (rank >= 2) {
            ts_scope_begin();
            CHECK(ts_sync_batch_norm(ts_ones(TS_SHAPE(2, 3), (ts_opts){0}), NULL, NULL, NULL, NULL,
                                     0.1, 0, g) == NULL);
            CHECK_ERR_HAS(TS_ERR_ARG, "not a member");
            ts_scope_end();
        }
        ts_dist_barrier();
        ts_dist_group_free(g);
    }
    failures();
    ts_dist_finalize();
    return ts_test_finish();
}
