/* bench_ddp.c — DistributedDataParallel's training step under mpirun (bench/run_ddp.sh runs it
 * beside PyTorch's DDP on gloo): for the MLP 784-1024-1024-10 (global batch 256) and SimpleCNN
 * (global batch 64), the DDP step, the same step without DDP on the per-rank batch (every rank at
 * once, so the machine is as loaded), that step with one blocking all-reduce of all the gradients
 * between backward and the optimizer, one blocking all-reduce of all the gradients alone, raw
 * MPI_Allreduce of the same bytes, and how much of the communication backward hid.
 * Rank 0 prints lines "key value" (milliseconds unless named otherwise). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TS_HAVE_MPI
#include <mpi.h>
#endif

#include "bench_models.h"

static int rank, world;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median over ranks' medians would need a gather: each rank times its own steps between
 * barriers, rank 0's median is reported (every rank waits for the slowest inside the step) */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* NULL, or a tensor of every gradient's size all-reduced (blocking) between backward and the
 * optimizer: what one blocking all-reduce costs inside a step, rank skew and cold caches included
 */
static ts_tensor *step_flat;

static void step(ts_module *net, ts_optim *opt, ts_tensor *x, ts_tensor *y) {
    ts_scope_begin();
    ts_optim_zero_grad(opt);
    ts_backward(ts_cross_entropy(ts_forward(net, x), y));
    if (step_flat) ts_dist_all_reduce(step_flat, TS_DIST_SUM, NULL);
    ts_optim_step(opt);
    ts_scope_end();
}

static double time_steps(ts_module *net, ts_optim *opt, ts_tensor *x, ts_tensor *y, int iters) {
    for (int i = 0; i < 3; i++) step(net, opt, x, y);
    double *t = malloc((size_t)iters * sizeof *t);
    for (int i = 0; i < iters; i++) {
        ts_dist_barrier();
        double t0 = now();
        step(net, opt, x, y);
        t[i] = now() - t0;
    }
    double m = median(t, iters);
    free(t);
    return m * 1e3;
}

static void bench(const char *name, ts_module *(*make)(void), ts_shape xs, int64_t global,
                  int iters) {
    int64_t per = global / world;
    xs.dims[0] = per;
    ts_manual_seed(1 + (uint64_t)rank);
    ts_tensor *x = ts_randn(xs, (ts_opts){0});
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(per), (ts_opts){0});

    /* the same model without DDP, every rank stepping alone on its per-rank batch */
    ts_module *plain = make();
    ts_optim *po = ts_sgd_new(plain, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
    double t_plain = time_steps(plain, po, x, y, iters);
    int64_t nparams = ts_module_num_parameters(plain);
    step_flat = ts_ones(TS_SHAPE(nparams), (ts_opts){0});
    double t_plain_ar = time_steps(plain, po, x, y, iters);
    ts_release(step_flat);
    step_flat = NULL;
    ts_optim_free(po);
    ts_module_free(plain);

    /* BENCH_BUCKET_VIEW=1: gradients as bucket views (no copy back after the reduction) */
    const char *bv = getenv("BENCH_BUCKET_VIEW");
    ts_module *ddp = ts_ddp_new(make(), (ts_ddp_opts){.gradient_as_bucket_view = bv && *bv == '1'});
    ts_optim *o = ts_sgd_new(ddp, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
    double t_ddp = time_steps(ddp, o, x, y, iters);
    ts_ddp_stats st = {0};
    double comm = 0, wait = 0;
    for (int i = 0; i < iters; i++) { /* the overlap, averaged over steps */
        step(ddp, o, x, y);
        ts_ddp_get_stats(ddp, &st);
        comm += st.comm_s, wait += st.wait_s;
    }
    ts_optim_free(o);
    ts_module_free(ddp);

    /* one blocking all-reduce of every gradient at once */
    ts_tensor *flat = ts_ones(TS_SHAPE(nparams), (ts_opts){0});
    double *t = malloc((size_t)iters * sizeof *t);
    for (int i = 0; i < 3; i++) ts_dist_all_reduce(flat, TS_DIST_SUM, NULL);
    for (int i = 0; i < iters; i++) {
        ts_dist_barrier();
        double t0 = now();
        ts_dist_all_reduce(flat, TS_DIST_SUM, NULL);
        t[i] = now() - t0;
    }
    double t_ar = median(t, iters) * 1e3;
    double t_mpi = 0;
#ifdef TS_HAVE_MPI
    if (world > 1) {
        float *buf = malloc((size_t)nparams * sizeof *buf);
        for (int64_t i = 0; i < nparams; i++) buf[i] = 1;
        for (int i = 0; i < 3; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)nparams, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)nparams, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[i] = now() - t0;
        }
        t_mpi = median(t, iters) * 1e3;
        free(buf);
    }
#endif
    free(t);
    if (rank == 0) {
        printf("%s ddp_step %.3f\n", name, t_ddp);
        printf("%s plain_step %.3f\n", name, t_plain);
        printf("%s plain_ar_step %.3f\n", name, t_plain_ar);
        printf("%s allreduce %.3f\n", name, t_ar);
        printf("%s mpi_allreduce %.3f\n", name, t_mpi);
        printf("%s grad_mb %.2f\n", name, (double)nparams * 4 / 1e6);
        printf("%s buckets %d\n", name, st.buckets);
        /* without overlap (AUTO on a host with no spare core) nothing is hidden by construction */
        printf("%s hidden %.3f\n", name, st.overlap && comm > 0 ? 1 - wait / comm : 0);
        fflush(stdout);
    }
    ts_release(flat);
    ts_release(x);
    ts_release(y);
}

static ts_module *mlp(void) { return mlp_new((int64_t[]){784, 1024, 1024, 10}, 4); }

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    if (ts_dist_init((ts_dist_opts){0})) {
        fprintf(stderr, "bench_ddp: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    if (rank == 0) printf("world %d\n", world);
    bench("mlp", mlp, TS_SHAPE(0, 784), 256, iters);
    bench("simplecnn", simple_cnn_new, TS_SHAPE(0, 3, 32, 32), 64, iters);
    if (ts_error()) fprintf(stderr, "bench_ddp: rank %d: %s\n", rank, ts_error_message());
    ts_dist_finalize();
    return ts_error() != TS_OK;
}
