/* test_softmax_grad.c — the gradient of softmax and log_softmax (the fused backend kernel where it
 * applies, the composition elsewhere) against a float64 reference computed here from the inputs:
 * random x and a random output gradient g, many row lengths, the last dim (fused) and an inner dim
 * (composed), a gradient built from a transposed tensor, f32, f64, f16 and bf16 (from the
 * inputs as rounded to the dtype), on every test device. The tolerance of each element comes from
 * the arithmetic: softmax's gx = y * (g - sum(g y)) carries a
 * few unit roundoffs of y and of the sum's terms, log_softmax's gx = g - exp(y) sum(g) a few of g
 * and of exp(y) sum(|g|). Also: the fused path's memory (it must run where it applies), and the
 * forward's edge cases (large inputs, NaNs) by rows and by column tiles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/ts_test.h"

/* deterministic inputs in [-4, 4) and [-1, 1) */
static double hash01(uint64_t i, uint64_t salt) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* Checks d/dx sum(f(x) * g) along `dim` of a [R, L] (dim 1) or [L, R] (dim 0) tensor. */
static void check_case(ts_device dev, ts_dtype dt, int64_t R, int64_t L, int dim, bool lg,
                       bool g_transposed) {
    const int64_t n = R * L;
    double *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g);
    double *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) x[i] = 8 * hash01((uint64_t)i, 1) - 4;
    for (int64_t i = 0; i < n; i++) g[i] = 2 * hash01((uint64_t)i, 2) - 1;
    ts_scope_begin();
    ts_shape s = dim == 1 ? TS_SHAPE(R, L) : TS_SHAPE(L, R);
    ts_tensor *xt = ts_to(ts_to_dtype(ts_from_data(s, TS_F64, x, (ts_opts){0}), dt), dev);
    ts_set_requires_grad(xt, true);
    ts_tensor *gt = ts_to(ts_to_dtype(ts_from_data(s, TS_F64, g, (ts_opts){0}), dt), dev);
    if (g_transposed) /* the same values in a column-major layout */
        gt = ts_transpose(ts_contiguous(ts_transpose(gt, 0, 1)), 0, 1);
    ts_tensor *y = lg ? ts_log_softmax(xt, dim) : ts_softmax(xt, dim);
    ts_backward(ts_sum(ts_mul(y, gt)));
    ts_tensor *gx = ts_to(ts_to_dtype(ts_grad(xt), TS_F64), ts_cpu());
    CHECK(gx && ts_copy_to_host(gx, got, (size_t)n * sizeof *got) == TS_OK);
    /* the reference starts from the inputs as the dtype holds them */
    ts_tensor *xr = ts_contiguous(ts_to(ts_to_dtype(ts_detach(xt), TS_F64), ts_cpu()));
    ts_tensor *gr = ts_contiguous(ts_to(ts_to_dtype(gt, TS_F64), ts_cpu()));
    CHECK(xr && ts_copy_to_host(xr, x, (size_t)n * sizeof *x) == TS_OK);
    CHECK(gr && ts_copy_to_host(gr, g, (size_t)n * sizeof *g) == TS_OK);
    ts_scope_end();

    const double u = dt == TS_F64   ? 0x1p-53
                     : dt == TS_F32 ? 0x1p-24
                     : dt == TS_F16 ? 0x1p-11
                                    : 0x1p-8; /* bfloat16 */
    const double c = 8 + 2 * log2((double)L); /* roundings along a row, with room */
    int bad = 0;
    double worst = 0;
    for (int64_t r = 0; r < R; r++) {
        /* element k of row r at k * ks + r * rs */
        const int64_t ks = dim == 1 ? 1 : R, rs = dim == 1 ? L : 1;
        double m = -INFINITY, sum = 0, dot = 0, adot = 0, gsum = 0, agsum = 0;
        for (int64_t k = 0; k < L; k++) m = fmax(m, x[k * ks + r * rs]);
        for (int64_t k = 0; k < L; k++) sum += exp(x[k * ks + r * rs] - m);
        for (int64_t k = 0; k < L; k++) {
            const int64_t i = k * ks + r * rs;
            const double p = exp(x[i] - m) / sum;
            dot += g[i] * p, adot += fabs(g[i]) * p, gsum += g[i], agsum += fabs(g[i]);
        }
        for (int64_t k = 0; k < L; k++) {
            const int64_t i = k * ks + r * rs;
            const double p = exp(x[i] - m) / sum, ly = x[i] - m - log(sum);
            const double want = lg ? g[i] - p * gsum : p * (g[i] - dot);
            const double tol = lg ? c * u * (fabs(g[i]) + p * agsum * (2 + fabs(ly)))
                                  : c * u * p * (fabs(g[i]) + adot) * (2 + fabs(x[i] - m));
            const double err = fabs(got[i] - want);
            if (!(err <= tol)) bad++;
            if (err / (tol > 0 ? tol : 1) > worst) worst = err / (tol > 0 ? tol : 1);
        }
    }
    if (bad)
        printf("  %s %s %s [%lld x %lld] dim %d%s: %d elements beyond tolerance (worst %.1fx)\n",
               ts_device_str(dev), ts_dtype_name(dt), lg ? "log_softmax" : "softmax",
               (long long)(dim == 1 ? R : L), (long long)(dim == 1 ? L : R), dim,
               g_transposed ? " g transposed" : "", bad, worst);
    CHECK(bad == 0);
    CHECK_OK();
    free(x), free(g), free(got);
}

/* The forward's edge cases, along the contiguous dim (rows) and along dim 0 of a [L, 16] tensor
 * (tiles of columns): inputs near 1000 give the same probabilities as the same inputs near 0 (the
 * maximum is subtracted before exp, which would overflow otherwise), and a NaN makes its own row
 * or column NaN and no other. */
static void check_forward_edges(ts_device dev, ts_dtype dt) {
    enum { L = 33, C = 16 };
    double x[L * C];
    for (int i = 0; i < L * C; i++) x[i] = 8 * hash01((uint64_t)i, 3) - 4;
    for (int dim = 0; dim < 2; dim++)
        for (int lg = 0; lg < 2; lg++) {
            ts_scope_begin();
            ts_tensor *a =
                ts_to(ts_to_dtype(ts_from_data(TS_SHAPE(L, C), TS_F64, x, (ts_opts){0}), dt), dev);
            ts_tensor *b = ts_add_scalar(a, 1000.0);
            ts_tensor *ya = lg ? ts_log_softmax(a, dim) : ts_softmax(a, dim);
            ts_tensor *yb = lg ? ts_log_softmax(b, dim) : ts_softmax(b, dim);
            double ra[L * C], rb[L * C];
            CHECK(ts_copy_to_host(ts_to(ts_to_dtype(ya, TS_F64), ts_cpu()), ra, sizeof ra) ==
                  TS_OK);
            CHECK(ts_copy_to_host(ts_to(ts_to_dtype(yb, TS_F64), ts_cpu()), rb, sizeof rb) ==
                  TS_OK);
            /* b's inputs are a's rounded at 1000's magnitude: 1000 u relative to each input */
            const double u = dt == TS_F64 ? 0x1p-53 : 0x1p-24, tol = 4 * 1024 * u;
            int bad = 0;
            for (int i = 0; i < L * C; i++)
                bad += !(fabs(ra[i] - rb[i]) <= tol * (lg ? 1 + fabs(ra[i]) : fabs(ra[i])));
            CHECK(bad == 0);
            /* a spread of 200 within a row or column (first +100, last -100): every output is
             * finite and each row or column's probabilities sum to 1 (exp(200) overflows f32, so
             * the shift must be the maximum, not any element) */
            double xw[L * C];
            memcpy(xw, x, sizeof xw);
            for (int j = 0; j < C; j++) xw[j] += 100, xw[(L - 1) * C + j] -= 100;
            for (int i = 0; i < L; i++) xw[i * C] += 100, xw[i * C + C - 1] -= 100;
            ts_tensor *w =
                ts_to(ts_to_dtype(ts_from_data(TS_SHAPE(L, C), TS_F64, xw, (ts_opts){0}), dt), dev);
            ts_tensor *yw = lg ? ts_log_softmax(w, dim) : ts_softmax(w, dim);
            CHECK(ts_copy_to_host(ts_to(ts_to_dtype(yw, TS_F64), ts_cpu()), rb, sizeof rb) ==
                  TS_OK);
            int off = 0;
            for (int r = 0; r < (dim == 1 ? L : C); r++) {
                double sum = 0;
                for (int k = 0; k < (dim == 1 ? C : L); k++) {
                    const double v = rb[dim == 1 ? r * C + k : k * C + r];
                    sum += lg ? exp(v) : v;
                }
                off += !(fabs(sum - 1) <= 64 * u);
            }
            CHECK(off == 0);
            /* a NaN at (5, 7): row 5 (dim 1) or column 7 (dim 0) is NaN, nothing else */
            double xn[L * C];
            memcpy(xn, x, sizeof xn);
            xn[5 * C + 7] = NAN;
            ts_tensor *n =
                ts_to(ts_to_dtype(ts_from_data(TS_SHAPE(L, C), TS_F64, xn, (ts_opts){0}), dt), dev);
            ts_tensor *yn = lg ? ts_log_softmax(n, dim) : ts_softmax(n, dim);
            CHECK(ts_copy_to_host(ts_to(ts_to_dtype(yn, TS_F64), ts_cpu()), rb, sizeof rb) ==
                  TS_OK);
            int wrong = 0;
            for (int i = 0; i < L; i++)
                for (int j = 0; j < C; j++) {
                    const bool hit = dim == 1 ? i == 5 : j == 7;
                    wrong += hit != (bool)isnan(rb[i * C + j]);
                }
            CHECK(wrong == 0);
            CHECK_OK();
            ts_scope_end();
        }
}

/* The fused gradient runs where it applies: a softmax forward + backward on the cpu allocates the
 * output and the input's gradient and nothing of their size besides (the composition's products
 * and differences would take three more). */
static void check_fused_memory(bool lg, ts_dtype dt) {
    const int64_t R = 64, C = 1024;
    ts_scope_begin();
    ts_manual_seed(8);
    ts_tensor *x = ts_to_dtype(ts_randn(TS_SHAPE(R, C), (ts_opts){0}), dt);
    ts_set_requires_grad(x, true);
    ts_tensor *g = ts_to_dtype(ts_randn(TS_SHAPE(R, C), (ts_opts){0}), dt);
    ts_mem_stats before, after;
    CHECK(ts_memory_stats(ts_cpu(), &before) == TS_OK);
    CHECK(ts_memory_reset_peak(ts_cpu()) == TS_OK);
    ts_tensor *y = lg ? ts_log_softmax(x, 1) : ts_softmax(x, 1);
    ts_backward_with(y, g);
    CHECK_OK();
    CHECK(ts_memory_stats(ts_cpu(), &after) == TS_OK);
    const double full = (double)(R * C * (dt == TS_F32 ? 4 : 2));
    const double extra = (double)after.peak_allocated - (double)before.allocated;
    const double limit = 2 * full + 8 * 512 + full / 4; /* y and dx, allocations rounded to 512 */
    printf("%s [64, 1024] %s forward + backward: %.0f KiB extra peak (limit %.0f KiB)\n",
           lg ? "log_softmax" : "softmax", ts_dtype_name(dt), extra / 1024, limit / 1024);
    CHECK(extra <= limit);
    CHECK(ts_grad(x) != NULL);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    const int64_t lens[] = {1, 3, 17, 64, 1000, 4099};
    const int64_t rows[] = {1, 7, 300};
    /* float16 / bfloat16: rows up to 4096 through the fused kernel in float, longer composed */
    const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int d = 0; d < nd; d++)
        for (size_t t = 0; t < sizeof dts / sizeof *dts; t++)
            for (int lg = 0; lg < 2; lg++)
                for (size_t a = 0; a < sizeof lens / sizeof *lens; a++)
                    for (size_t b = 0; b < sizeof rows / sizeof *rows; b++) {
                        if (lens[a] * rows[b] > 400000) continue;
                        check_case(devs[d], dts[t], rows[b], lens[a], 1, lg, false);
                        if (b == 1) {
                            check_case(devs[d], dts[t], rows[b], lens[a], 0, lg, false);
                            check_case(devs[d], dts[t], rows[b], lens[a], 1, lg, true);
                        }
                    }
    for (int d = 0; d < nd; d++) {
        check_forward_edges(devs[d], TS_F32);
        check_forward_edges(devs[d], TS_F64);
    }
    for (int lg = 0; lg < 2; lg++) {
        check_fused_memory(lg, TS_F32);
        check_fused_memory(lg, TS_F16);
    }
    /* the graph records the gradient's node under PyTorch's names */
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(3, 5), (ts_opts){.requires_grad = true});
    CHECK(!strcmp(ts_grad_fn_name(ts_softmax(x, 1)), "SoftmaxBackward0"));
    CHECK(!strcmp(ts_grad_fn_name(ts_log_softmax(x, 1)), "LogSoftmaxBackward0"));
    ts_scope_end();
    return ts_test_finish();
}
