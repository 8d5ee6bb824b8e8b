/* nccl_probe.c — tools/gpu_check.sh's NCCL step: every collective on tensors of one device, checked
 * against values computed on the host, for any world size. Under mpirun with cuda tensors they go
 * through NCCL; without a launcher (a world of one, no MPI) through the local path. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>
#include <time.h>

static int R, W, fails, checks;
static ts_device dev;

static double val(int r, int64_t i) { return (double)(r + 1) * (double)(i % 7 + 1); }

static ts_tensor *make(int64_t n, ts_dtype dt, int r) {
    double *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) h[i] = val(r, i);
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), h, (ts_opts){0}), dt), dev);
    free(h);
    return t;
}

static double *host(ts_tensor *t, int64_t n) {
    double *h = calloc((size_t)n, sizeof *h);
    ts_tensor *c = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    if (!c || ts_copy_to_host(c, h, (size_t)n * sizeof *h) != TS_OK) {
        free(h);
        return NULL;
    }
    return h;
}

static void check(const char *what, ts_dtype dt, ts_status st, ts_tensor *t, int64_t n,
                  double (*want)(int64_t, void *), void *ctx) {
    checks++;
    double *h = st == TS_OK ? host(t, n) : NULL;
    int64_t bad = -1;
    for (int64_t i = 0; h && i < n && bad < 0; i++)
        if (fabs(h[i] - want(i, ctx)) > 1e-6 * fabs(want(i, ctx))) bad = i;
    if (st == TS_OK && h && bad < 0) {
        if (R == 0)
            printf("nccl_probe: ok   %-28s %-9s n=%lld\n", what, ts_dtype_name(dt), (long long)n);
    } else {
        fails++;
        printf("nccl_probe: FAIL %-28s %-9s rank %d: %s\n", what, ts_dtype_name(dt), R,
               st != TS_OK || !h ? ts_error_message() : "wrong values");
        if (h && bad >= 0)
            printf("nccl_probe:      element %lld is %g, expected %g\n", (long long)bad, h[bad],
                   want(bad, ctx));
        ts_error_clear();
    }
    free(h);
}

static double tri(void) { return (double)W * (W + 1) / 2; }
static double w_sum(int64_t i, void *c) {
    (void)c;
    return tri() * (double)(i % 7 + 1);
}
static double w_avg(int64_t i, void *c) {
    (void)c;
    return tri() / W * (double)(i % 7 + 1);
}
static double w_max(int64_t i, void *c) {
    (void)c;
    return val(W - 1, i);
}
static double w_min(int64_t i, void *c) {
    (void)c;
    return val(0, i);
}
static double w_prod(int64_t i, void *c) {
    (void)c;
    double p = 1;
    for (int r = 0; r < W; r++) p *= val(r, i);
    return p;
}
static double w_own(int64_t i, void *c) {
    (void)c;
    return val(R, i);
}
static double w_gather(int64_t i, void *c) {
    int64_t n = *(int64_t *)c;
    return val((int)(i / n), i % n);
}
static double w_scatter(int64_t i, void *c) {
    return tri() * (double)((R * *(int64_t *)c + i) % 7 + 1);
}

int main(int argc, char **argv) {
    const char *dname = argc > 1 ? argv[1] : "cuda:0";
    if (ts_device_parse(dname, &dev) != TS_OK) {
        fprintf(stderr, "nccl_probe: %s\n", ts_error_message());
        return 2;
    }
    ts_dist_opts o = {.backend = dev.type == TS_CUDA ? TS_DIST_NCCL : TS_DIST_AUTO};
    if (ts_dist_init(o) != TS_OK) {
        fprintf(stderr, "nccl_probe: ts_dist_init: %s\n", ts_error_message());
        return 1;
    }
    R = ts_dist_rank(), W = ts_dist_world_size();
    ts_tensor *first = ts_zeros(TS_SHAPE(1), (ts_opts){.device = dev});
    if (!first) {
        fprintf(stderr, "nccl_probe: %s\n", ts_error_message());
        return 1;
    }
    ts_release(first);
    if (R == 0) printf("nccl_probe: %s on %s\n", ts_dist_describe(), ts_device_str(dev));
    const int64_t n = 1000;
    int64_t nn = n;
    ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16, TS_I64, TS_I32, TS_U8};
    for (size_t k = 0; k < sizeof dts / sizeof *dts; k++) {
        ts_scope_begin();
        ts_dtype dt = dts[k];
        ts_tensor *t = make(n, dt, R);
        check("all_reduce sum", dt, ts_dist_all_reduce(t, TS_DIST_SUM, NULL), t, n, w_sum, NULL);
        t = make(n, dt, R);
        check("all_reduce max", dt, ts_dist_all_reduce(t, TS_DIST_MAX, NULL), t, n, w_max, NULL);
        t = make(n, dt, R);
        check("all_reduce min", dt, ts_dist_all_reduce(t, TS_DIST_MIN, NULL), t, n, w_min, NULL);
        t = make(n, dt, R);
        check("broadcast from last rank", dt, ts_dist_broadcast(t, W - 1, NULL), t, n, w_max, NULL);
        t = make(n, dt, R);
        check("reduce sum to 0", dt, ts_dist_reduce(t, 0, TS_DIST_SUM, NULL), t, n,
              R == 0 ? w_sum : w_own, NULL);
        ts_tensor *in = make(n, dt, R);
        ts_tensor *out = ts_zeros(TS_SHAPE(W * n), (ts_opts){.dtype = dt, .device = dev});
        check("all_gather", dt, ts_dist_all_gather(out, in, NULL), out, W * n, w_gather, &nn);
        in = make(W * n, dt, R);
        out = ts_zeros(TS_SHAPE(n), (ts_opts){.dtype = dt, .device = dev});
        check("reduce_scatter sum", dt, ts_dist_reduce_scatter(out, in, TS_DIST_SUM, NULL), out, n,
              w_scatter, &nn);
        if (dt == TS_F32 || dt == TS_F64 || dt == TS_BF16 || dt == TS_F16) {
            t = make(n, dt, R);
            check("all_reduce avg", dt, ts_dist_all_reduce(t, TS_DIST_AVG, NULL), t, n, w_avg,
                  NULL);
        }
        if (dt == TS_F64) {
            t = make(n, dt, R);
            check("all_reduce product", dt, ts_dist_all_reduce(t, TS_DIST_PRODUCT, NULL), t, n,
                  w_prod, NULL);
        }
        ts_scope_end();
    }
    ts_scope_begin();
    /* a non-contiguous view (reduced as a contiguous copy, copied back) */
    ts_tensor *m = ts_reshape(make(n, TS_F32, R), TS_SHAPE(40, 25));
    ts_status st = ts_dist_all_reduce(ts_transpose(m, 0, 1), TS_DIST_SUM, NULL);
    check("all_reduce sum, transposed", TS_F32, st, m, n, w_sum, NULL);
    /* two asynchronous reductions in flight */
    ts_tensor *a = make(n, TS_F32, R), *b = make(n, TS_F32, R);
    ts_dist_work *wa = ts_dist_all_reduce_async(a, TS_DIST_SUM, NULL);
    ts_dist_work *wb = ts_dist_all_reduce_async(b, TS_DIST_MAX, NULL);
    st = ts_dist_wait(wa);
    ts_status st2 = ts_dist_wait(wb);
    check("all_reduce_async sum", TS_F32, st, a, n, w_sum, NULL);
    check("all_reduce_async max", TS_F32, st2, b, n, w_max, NULL);
    ts_scope_end();
    /* 64 MiB of float32, timed */
    ts_scope_begin();
    const int64_t big = 16 << 20;
    ts_tensor *g = ts_full(TS_SHAPE(big), 1.0, (ts_opts){.device = dev});
    st = ts_dist_all_reduce(g, TS_DIST_SUM, NULL); /* warm-up */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 5 && st == TS_OK; i++) st = ts_dist_all_reduce(g, TS_DIST_AVG, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / 5;
    double sum = st == TS_OK ? ts_item(ts_sum(g)) : NAN;
    checks++;
    if (st != TS_OK || !(fabs(sum - (double)big * W) <= 1e-3 * (double)big * W)) {
        fails++;
        printf("nccl_probe: FAIL all_reduce 64 MiB rank %d: %s (sum %g)\n", R,
               st != TS_OK ? ts_error_message() : "wrong values", sum);
        ts_error_clear();
    } else if (R == 0) {
        printf("nccl_probe: ok   all_reduce 64 MiB float32: %.3f ms a call\n", ms);
    }
    ts_scope_end();
    checks++;
    if (ts_dist_barrier() != TS_OK) {
        fails++;
        printf("nccl_probe: FAIL barrier: %s\n", ts_error_message());
    }
    if (R == 0) printf("nccl_probe: %d of %d checks passed on rank 0\n", checks - fails, checks);
    st = ts_dist_finalize();
    return fails || st != TS_OK ? 1 : 0;
}
