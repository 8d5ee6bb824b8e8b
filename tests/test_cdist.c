/* test_cdist.c — ts_cdist's direct kernel (src/ops/cdist.c, src/backend/cpu/kern_cdist.c) on
 * every device against float64 loops written here: p = 0, 1, 2, 3, 0.5, inf; broadcast batch
 * dims (one x2 for all batches too), non-contiguous inputs, tile-crossing sizes that run
 * threaded, rows spanning several packed panels, an empty M, zero rows,
 * NaNs, float32 / float16 / bfloat16 (references from the rounded inputs, tolerances from the
 * output's rounding alone where the kernel sums in double; float32 p = 2 on AVX2 sums in float32:
 * M eps32 relative, with its own tile- and panel-crossing cases), ts_gradcheck of the recorded node
 * (CdistBackward0), the gradient at zero distances, a captured step's replay (with pad's
 * gather_dims), and the refusals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 16384

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(0.71 * (double)(i + 1) + 1.3 * seed) * 2.5;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), d);
}

/* (sum_m |a[m] - b[m]|^p)^(1/p) over m < M, a and b at strides sa, sb */
static double ref_dist(const double *a, int64_t sa, const double *b, int64_t sb, int64_t M,
                       double p) {
    double r = 0;
    for (int64_t m = 0; m < M; m++) {
        const double d = fabs(a[m * sa] - b[m * sb]);
        if (isinf(p))
            r = isnan(d) || isnan(r) ? NAN : fmax(r, d);
        else
            r += p == 0 ? (d != 0) : p == 1 ? d : p == 2 ? d * d : pow(d, p);
    }
    return p == 0 || p == 1 || isinf(p) ? r : p == 2 ? sqrt(r) : pow(r, 1 / p);
}

/* y against ref (n values): |y - ref| <= tol * (1 + |ref|), NaN and inf where ref is */
static void check_close(const char *what, ts_tensor *y, const double *ref, int64_t n, double tol) {
    static double got[MAXN];
    bool ok = n <= MAXN && rd(y, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        const bool good = isnan(ref[i])   ? isnan(got[i])
                          : isinf(ref[i]) ? got[i] == ref[i]
                                          : fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i]));
        if (!good) ok = false, at = i;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld: %.17g vs %.17g%s", what, (long long)at,
                      at >= 0 ? got[at] : 0.0, at >= 0 ? ref[at] : 0.0, ts_test_error_str());
    ts_error_clear();
}

static const double ps[] = {0, 1, 2, 3, 0.5, INFINITY};
#define NP (int)(sizeof ps / sizeof *ps)

/* x1 [P, M] against x2 [R, M], contiguous, every p, f64 and f32 */
static void test_plain(void) {
    static double x1[MAXN], x2[MAXN], ref[MAXN];
    /* small; not a multiple of the tiles' 4 x2 rows and 8 columns; tile-crossing (16 x1 rows, 32
     * x2 rows, 128 columns a tile) and large enough to run threaded */
    const int64_t shapes[][3] = {{5, 6, 7}, {1, 1, 1}, {37, 70, 150}};
    for (int s = 0; s < 3; s++) {
        const int64_t P = shapes[s][0], R = shapes[s][1], M = shapes[s][2];
        fill(x1, P * M, 1), fill(x2, R * M, 2);
        x2[0] = x1[0];                /* a zero difference for p = 0 */
        if (M > 3) x2[M + 2] = x1[2]; /* and another */
        for (int di = 0; di < ndev; di++)
            for (int q = 0; q < NP; q++)
                for (int f = 0; f < 2; f++) {
                    const ts_dtype dt = f ? TS_F32 : TS_F64;
                    double a[MAXN], b[MAXN]; /* the inputs as the dtype holds them */
                    for (int64_t i = 0; i < P * M; i++) a[i] = f ? (float)x1[i] : x1[i];
                    for (int64_t i = 0; i < R * M; i++) b[i] = f ? (float)x2[i] : x2[i];
                    for (int64_t i = 0; i < P; i++)
                        for (int64_t j = 0; j < R; j++)
                            ref[i * R + j] = ref_dist(a + i * M, 1, b + j * M, 1, M, ps[q]);
                    ts_scope_begin();
                    ts_tensor *y = ts_cdist(mk(TS_SHAPE(P, M), x1, dt, devs[di]),
                                            mk(TS_SHAPE(R, M), x2, dt, devs[di]), ps[q]);
                    CHECK(y && ts_dtype_of(y) == dt && ts_ndim(y) == 2 && ts_size(y, 0) == P &&
                          ts_size(y, 1) == R);
                    char what[96];
                    snprintf(what, sizeof what, "cdist %lldx%lldx%lld p=%g %s on %s", (long long)P,
                             (long long)R, (long long)M, ps[q], ts_dtype_name(dt),
                             ts_device_str(devs[di]));
                    /* sums in double: the output's rounding (and pow's few ulps) only; float32
                     * p = 2 sums in float32 (AVX2): M + 2 roundings of eps32 relative */
                    const double tol = !f ? 4e-15 : ps[q] == 2 ? (double)(M + 2) * 6e-8 : 1.2e-7;
                    check_close(what, y, ref, P * R, tol);
                    /* the same through transposed storage (columns apart in memory) */
                    ts_tensor *at = ts_transpose(
                        ts_contiguous(ts_transpose(mk(TS_SHAPE(P, M), x1, dt, devs[di]), 0, 1)), 0,
                        1);
                    ts_tensor *bt = ts_transpose(
                        ts_contiguous(ts_transpose(mk(TS_SHAPE(R, M), x2, dt, devs[di]), 0, 1)), 0,
                        1);
                    CHECK(at && bt && (M == 1 || !ts_is_contiguous(at)));
                    check_close(what, ts_cdist(at, bt, ps[q]), ref, P * R, tol);
                    ts_scope_end();
                }
    }
    CHECK_OK();
}

/* batch dims broadcast ([2, 1, P, M] against [3, R, M]) and non-contiguous inputs */
static void test_batched_strided(void) {
    static double x1[MAXN], x2[MAXN], ref[MAXN];
    const int64_t P = 5, R = 9, M = 11;
    fill(x1, 2 * P * M, 3), fill(x2, 3 * R * M, 4);
    for (int di = 0; di < ndev; di++)
        for (int q = 0; q < NP; q++) {
            for (int64_t b0 = 0; b0 < 2; b0++)
                for (int64_t b1 = 0; b1 < 3; b1++)
                    for (int64_t i = 0; i < P; i++)
                        for (int64_t j = 0; j < R; j++)
                            ref[((b0 * 3 + b1) * P + i) * R + j] = ref_dist(
                                x1 + (b0 * P + i) * M, 1, x2 + (b1 * R + j) * M, 1, M, ps[q]);
            ts_scope_begin();
            ts_tensor *a = mk(TS_SHAPE(2, 1, P, M), x1, TS_F64, devs[di]);
            ts_tensor *b = mk(TS_SHAPE(3, R, M), x2, TS_F64, devs[di]);
            ts_tensor *y = ts_cdist(a, b, ps[q]);
            CHECK(y && ts_ndim(y) == 4 && ts_size(y, 0) == 2 && ts_size(y, 1) == 3);
            check_close("cdist batched", y, ref, 2 * 3 * P * R, 4e-15);
            /* the same values through transposed storage ([M, P] seen as [P, M]) */
            ts_tensor *at = ts_transpose(ts_contiguous(ts_transpose(a, -1, -2)), -1, -2);
            ts_tensor *bt = ts_transpose(ts_contiguous(ts_transpose(b, -1, -2)), -1, -2);
            CHECK(at && !ts_is_contiguous(at) && bt && !ts_is_contiguous(bt));
            check_close("cdist transposed", ts_cdist(at, bt, ps[q]), ref, 2 * 3 * P * R, 4e-15);
            /* every other column of a wider tensor */
            static double w1[MAXN];
            for (int64_t r = 0; r < 2 * P; r++)
                for (int64_t m = 0; m < M; m++) w1[r * 2 * M + 2 * m] = x1[r * M + m];
            ts_tensor *aw =
                ts_slice(mk(TS_SHAPE(2, 1, P, 2 * M), w1, TS_F64, devs[di]), 3, 0, 2 * M, 2);
            check_close("cdist strided columns", ts_cdist(aw, b, ps[q]), ref, 2 * 3 * P * R, 4e-15);
            ts_scope_end();
        }
    CHECK_OK();
}

/* one x2 for every batch ([3, P, M] against [R, M]: a batch stride of 0, packed once), and sizes
 * whose packed rows span several panels of each set (about 4 MB each) */
static void test_shared_and_panels(void) {
    static double x1[MAXN], x2[MAXN], ref[MAXN];
    const int64_t P = 7, R = 10, M = 13;
    fill(x1, 3 * P * M, 5), fill(x2, R * M, 6);
    for (int di = 0; di < ndev; di++)
        for (int q = 0; q < NP; q++) {
            for (int64_t b = 0; b < 3; b++)
                for (int64_t i = 0; i < P; i++)
                    for (int64_t j = 0; j < R; j++)
                        ref[(b * P + i) * R + j] =
                            ref_dist(x1 + (b * P + i) * M, 1, x2 + j * M, 1, M, ps[q]);
            ts_scope_begin();
            check_close("cdist shared x2",
                        ts_cdist(mk(TS_SHAPE(3, P, M), x1, TS_F64, devs[di]),
                                 mk(TS_SHAPE(R, M), x2, TS_F64, devs[di]), ps[q]),
                        ref, 3 * P * R, 4e-15);
            ts_scope_end();
        }
    /* 100 x 100 rows of 6000 columns: panels of 80 x1 rows and 64 x2 rows (p = 1, cpu) */
    static double big1[100 * 6000], big2[100 * 6000];
    fill(big1, 100 * 6000, 7), fill(big2, 100 * 6000, 8);
    for (int64_t i = 0; i < 100; i++)
        for (int64_t j = 0; j < 100; j++)
            ref[i * 100 + j] = ref_dist(big1 + i * 6000, 1, big2 + j * 6000, 1, 6000, 1);
    ts_scope_begin();
    check_close("cdist panels",
                ts_cdist(mk(TS_SHAPE(100, 6000), big1, TS_F64, devs[0]),
                         mk(TS_SHAPE(100, 6000), big2, TS_F64, devs[0]), 1),
                ref, 100 * 100, 1e-14);
    ts_scope_end();
    CHECK_OK();
}

/* float32 p = 2 (summed in float32 on AVX2, kern_cdist_f32.c): sizes that are not multiples of
 * its 6 x 16 (6 x 32) tiles, more columns than a tile takes at a time (512), a broadcast batch with
 * one x2 for all (batch stride 0) and one x2 a batch, transposed storage, rows over several 2 MB
 * panels; NaN and inf */
static void test_f32_p2(void) {
    static float a[1000 * 600], b[200 * 600];
    static double x[1000 * 600], ref[MAXN * 4], da[1000 * 600], db[200 * 600];
    /* B, P, R, M, whether x2 has the batch dim */
    const int64_t cases[][5] = {
        {3, 13, 29, 1, 0}, {2, 31, 47, 700, 0}, {1, 900, 12, 600, 0}, {3, 7, 40, 9, 1}};
    for (int c = 0; c < 4; c++) {
        const int64_t B = cases[c][0], P = cases[c][1], R = cases[c][2], M = cases[c][3];
        const int64_t B2 = cases[c][4] ? B : 1;
        fill(x, B * P * M, 11 + c);
        for (int64_t i = 0; i < B * P * M; i++) a[i] = (float)x[i];
        fill(x, B2 * R * M, 21 + c);
        for (int64_t i = 0; i < B2 * R * M; i++) b[i] = (float)x[i];
        if (M > 1) a[M + 1] = NAN, a[2 * M] = INFINITY; /* row 1: NaN; row 2: inf */
        for (int64_t i = 0; i < B * P * M; i++) da[i] = a[i];
        for (int64_t i = 0; i < B2 * R * M; i++) db[i] = b[i];
        for (int64_t bb = 0; bb < B; bb++)
            for (int64_t i = 0; i < P; i++)
                for (int64_t j = 0; j < R; j++)
                    ref[(bb * P + i) * R + j] = ref_dist(
                        da + (bb * P + i) * M, 1, db + ((B2 > 1 ? bb : 0) * R + j) * M, 1, M, 2);
        const double tol = (double)(M + 2) * 6e-8;
        for (int di = 0; di < ndev; di++) {
            ts_scope_begin();
            ts_tensor *ta = mk(TS_SHAPE(B, P, M), da, TS_F32, devs[di]);
            ts_tensor *tb = B2 > 1 ? mk(TS_SHAPE(B, R, M), db, TS_F32, devs[di])
                                   : mk(TS_SHAPE(R, M), db, TS_F32, devs[di]);
            check_close("cdist f32 p=2", ts_cdist(ta, tb, 2), ref, B * P * R, tol);
            ts_tensor *at = ts_transpose(ts_contiguous(ts_transpose(ta, -1, -2)), -1, -2);
            check_close("cdist f32 p=2 transposed", ts_cdist(at, tb, 2), ref, B * P * R, tol);
            ts_scope_end();
        }
    }
    CHECK_OK();
}

/* empty M (zeros), zero rows, NaN, halves */
static void test_edges(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const ts_device d = devs[di];
        for (int q = 0; q < NP; q++) {
            ts_tensor *y =
                ts_cdist(ts_zeros(TS_SHAPE(3, 0), (ts_opts){.dtype = TS_F64, .device = d}),
                         ts_zeros(TS_SHAPE(2, 0), (ts_opts){.dtype = TS_F64, .device = d}), ps[q]);
            check_close("cdist empty M", y, (double[]){0, 0, 0, 0, 0, 0}, 6, 0);
            y = ts_cdist(ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = TS_F32, .device = d}),
                         ts_ones(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_F32, .device = d}), ps[q]);
            CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == 0 && ts_size(y, 1) == 3);
            y = ts_cdist(ts_ones(TS_SHAPE(0, 2, 4), (ts_opts){.dtype = TS_F32, .device = d}),
                         ts_ones(TS_SHAPE(3, 4), (ts_opts){.dtype = TS_F32, .device = d}), ps[q]);
            CHECK(y && ts_ndim(y) == 3 && ts_size(y, 0) == 0 && ts_size(y, 2) == 3);
        }
        /* NaN: propagates, counts as nonzero for p = 0; inf ties */
        const double a[] = {1, NAN, 3, 1, 2, 3}, b[] = {1, 2, 3, 0, 2, 5};
        ts_tensor *A = mk(TS_SHAPE(2, 3), a, TS_F64, d), *B = mk(TS_SHAPE(2, 3), b, TS_F64, d);
        for (int q = 0; q < NP; q++) {
            double ref[4];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    ref[i * 2 + j] = ref_dist(a + 3 * i, 1, b + 3 * j, 1, 3, ps[q]);
            check_close("cdist NaN", ts_cdist(A, B, ps[q]), ref, 4, 4e-15);
        }
        /* float16 and bfloat16: from the rounded inputs, one rounding of the output */
        static double x1[64], x2[64], ref[64];
        fill(x1, 40, 5), fill(x2, 32, 6);
        const ts_dtype halves[] = {TS_F16, TS_BF16};
        for (int h = 0; h < 2; h++) {
            ts_tensor *h1 = mk(TS_SHAPE(5, 8), x1, halves[h], d);
            ts_tensor *h2 = mk(TS_SHAPE(4, 8), x2, halves[h], d);
            double r1[40], r2[32];
            CHECK(rd(h1, r1, 40) && rd(h2, r2, 32));
            for (int q = 0; q < NP; q++) {
                for (int i = 0; i < 5; i++)
                    for (int j = 0; j < 4; j++)
                        ref[i * 4 + j] = ref_dist(r1 + 8 * i, 1, r2 + 8 * j, 1, 8, ps[q]);
                ts_tensor *y = ts_cdist(h1, h2, ps[q]);
                CHECK(y && ts_dtype_of(y) == halves[h]);
                check_close("cdist half", y, ref, 20, h ? 1.0 / 256 : 1.0 / 2048);
            }
        }
        ts_scope_end();
        CHECK_OK();
    }
}

static ts_tensor *cd_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_cdist(in[0], in[1], *(const double *)ctx);
}

static void test_grads(void) {
    static double v[2][64];
    fill(v[0], 64, 7), fill(v[1], 64, 8);
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    const double gps[] = {1, 2, 3, 0.5, 1.5, INFINITY};
    for (int di = 0; di < ndev; di++)
        for (size_t q = 0; q < sizeof gps / sizeof *gps; q++) {
            ts_scope_begin();
            ts_tensor *in[2] = {mk(TS_SHAPE(2, 3, 4), v[0], TS_F64, devs[di]),
                                mk(TS_SHAPE(5, 4), v[1], TS_F64, devs[di])};
            ts_set_requires_grad(in[0], true), ts_set_requires_grad(in[1], true);
            const bool ok = ts_gradcheck(cd_fn, (void *)&gps[q], in, 2, go);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck p=%g on %s%s", gps[q],
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
    /* a zero distance (p = 2): gradient 0, not NaN; the node's name */
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const double a[] = {1, 2, 3, 4}, b[] = {1, 2, 0, 0};
        ts_tensor *A = mk(TS_SHAPE(2, 2), a, TS_F64, devs[di]);
        ts_tensor *B = mk(TS_SHAPE(1, 2), b, TS_F64, devs[di]);
        ts_set_requires_grad(A, true);
        ts_tensor *y = ts_cdist(A, B, 2);
        CHECK(y && ts_grad_fn_name(y) && strcmp(ts_grad_fn_name(y), "CdistBackward0") == 0);
        ts_backward(ts_sum(y));
        CHECK_OK();
        /* row 1: (3, 4) - (1, 2) = (2, 2), d = sqrt(8): grad (2, 2) / sqrt(8) */
        const double r = 2 / sqrt(8.0);
        check_close("cdist grad at 0", ts_grad(A), (double[]){0, 0, r, r}, 4, 1e-15);
        ts_scope_end();
        CHECK_OK();
    }
}

/* a captured step (ts_graph) records the cdist and gather_dims kernels: a replay after new inputs
 * were copied in gives the eager results of the new inputs */
static void test_capture(void) {
    double a1[24], b1[12], x1[30], a2[24], b2[12], x2[30];
    fill(a1, 24, 11), fill(b1, 12, 12), fill(x1, 30, 13);
    fill(a2, 24, 14), fill(b2, 12, 15), fill(x2, 30, 16);
    const int64_t pad[] = {2, 1, 1, 2};
    for (int di = 0; di < ndev; di++) {
        const ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *A = mk(TS_SHAPE(6, 4), a1, TS_F64, d), *B = mk(TS_SHAPE(3, 4), b1, TS_F64, d);
        ts_tensor *X = mk(TS_SHAPE(1, 5, 6), x1, TS_F64, d);
        ts_tensor *D = ts_cdist(A, B, 2), *Y = ts_pad(X, pad, 4, TS_PAD_REFLECT, 0); /* warm-up */
        ts_graph *g = ts_graph_capture_begin(d, (ts_graph_opts){0});
        D = ts_cdist(A, B, 2), Y = ts_pad(X, pad, 4, TS_PAD_REFLECT, 0);
        CHECK(g && ts_graph_capture_end() == TS_OK && ts_graph_kernel_count(g) >= 2);
        ts_copy_(A, mk(TS_SHAPE(6, 4), a2, TS_F64, d));
        ts_copy_(B, mk(TS_SHAPE(3, 4), b2, TS_F64, d));
        ts_copy_(X, mk(TS_SHAPE(1, 5, 6), x2, TS_F64, d));
        CHECK(ts_graph_replay(g) == TS_OK);
        double wd[18], wy[1 * 8 * 9];
        CHECK(rd(ts_cdist(A, B, 2), wd, 18) && rd(ts_pad(X, pad, 4, TS_PAD_REFLECT, 0), wy, 72));
        check_close("cdist replayed", D, wd, 18, 0);
        check_close("pad replayed", Y, wy, 72, 0);
        ts_graph_free(g);
        ts_scope_end();
        CHECK_OK();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *f = ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64});
    CHECK(ts_cdist(f, ts_ones(TS_SHAPE(2, 4), (ts_opts){.dtype = TS_F64}), 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "X1 and X2 must have the same number of columns");
    CHECK(ts_cdist(f, f, -1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-negative p");
    CHECK(ts_cdist(f, f, NAN) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "non-negative p");
    CHECK(ts_cdist(ts_ones(TS_SHAPE(3), (ts_opts){.dtype = TS_F64}), f, 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "at least 2D");
    CHECK(ts_cdist(f, ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F32}), 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "same type");
    CHECK(ts_cdist(ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_I64}),
                   ts_ones(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_I64}), 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "floating-point");
    CHECK(ts_cdist(ts_ones(TS_SHAPE(2, 2, 3), (ts_opts){.dtype = TS_F64}),
                   ts_ones(TS_SHAPE(3, 2, 3), (ts_opts){.dtype = TS_F64}), 2) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "cdist");
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_plain();
    test_batched_strided();
    test_shared_and_panels();
    test_edges();
    test_f32_p2();
    test_grads();
    test_capture();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
