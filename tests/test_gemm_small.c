/* test_gemm_small.c — the hand-written NT f32 GEMM (gemm_small.c) against a double
 * reference: every edge of their blocks (rows, columns, the k tail), padded leading dimensions,
 * nothing written outside C, the same bits with and without threads, the layouts they must turn
 * down (the retired TN layout among them), and linear layers giving the same results through them
 * as through BLAS. The variant is
 * the one ts_cpu_isa_get() names (ctest runs this under each TS_CPU_ISA cap); the portable path
 * must decline every product. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_small.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

enum { GUARD = 8 };
static const float GUARD_VALUE = 12345.0f;

/* One product in layout nt (A row-major, B = W^T with W row-major) or tn (A = Xt^T, B row-major),
 * leading dims padded by pad. Returns -1 when the kernel declined, else the number of wrong
 * elements (outside the k-term error bound, or written outside C). *bits_out gets C for the
 * thread-count comparison (caller frees). */
static int run_case(bool nt, int64_t m, int64_t n, int64_t k, int64_t pad, bool parallel,
                    float **bits_out) {
    /* the logical matrices, as doubles exact in f32 */
    double *ra = malloc(sizeof(double) * (size_t)(m * k + 1));
    double *rb = malloc(sizeof(double) * (size_t)(k * n + 1));
    for (int64_t i = 0; i < m * k; i++) ra[i] = (float)uniform();
    for (int64_t i = 0; i < k * n; i++) rb[i] = (float)uniform();
    /* storage: nt: A [m][k+pad], W [n][k+pad]; tn: At [k][m+pad], B [k][n+pad] */
    const int64_t lda = nt ? k + pad : m + pad, ldb = nt ? k + pad : n + pad, ldc = n + pad;
    float *a = malloc(sizeof(float) * (size_t)((nt ? m : k) * lda + 1));
    float *b = malloc(sizeof(float) * (size_t)((nt ? n : k) * ldb + 1));
    const int64_t cspan = m * ldc + 2 * GUARD;
    float *c = malloc(sizeof(float) * (size_t)cspan);
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) a[nt ? i * lda + p : p * lda + i] = (float)ra[i * k + p];
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) b[nt ? j * ldb + p : p * ldb + j] = (float)rb[p * n + j];
    for (int64_t i = 0; i < cspan; i++) c[i] = GUARD_VALUE;
    float *c0 = c + GUARD;
    bool took = nt ? tsi_gemm_small_f32(m, n, k, a, lda, 1, b, 1, ldb, c0, ldc, 1, parallel)
                   : tsi_gemm_small_f32(m, n, k, a, 1, lda, b, ldb, 1, c0, ldc, 1, parallel);
    int bad = 0;
    if (took) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, g = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = ra[i * k + p] * rb[p * n + j];
                    s += x, g += fabs(x);
                }
                double got = c0[i * ldc + j];
                if (!(fabs(got - s) <= (double)(k + 1) * 6e-8 * g + 1e-6)) {
                    if (bad++ < 3)
                        printf("  %s m=%lld n=%lld k=%lld pad=%lld (%lld,%lld): %.9g vs %.9g\n",
                               nt ? "NT" : "TN", (long long)m, (long long)n, (long long)k,
                               (long long)pad, (long long)i, (long long)j, got, s);
                }
            }
        /* the guards and the padding columns of C keep their value */
        for (int64_t i = 0; i < cspan; i++) {
            int64_t off = i - GUARD;
            bool inside = off >= 0 && off < m * ldc && off % ldc < n;
            if (!inside && c[i] != GUARD_VALUE) bad++;
        }
    }
    if (bits_out) {
        *bits_out = malloc(sizeof(float) * (size_t)(m * n));
        for (int64_t i = 0; i < m; i++) memcpy(*bits_out + i * n, c0 + i * ldc, sizeof(float) * n);
    }
    free(ra), free(rb), free(a), free(b), free(c);
    return took ? bad : -1;
}

static bool have_kernels(void) {
    float x[16 * 64] = {0}, w[16 * 64] = {0}, y[16 * 16];
    return tsi_gemm_small_f32(16, 16, 64, x, 64, 1, w, 1, 64, y, 16, 1, false);
}

static void test_shapes(void) {
    /* NT blocks are 4 x 6 over k in vectors of 16 (AVX-512) or 3 x 4 over vectors of 8 (AVX2) */
    const int64_t nt_m[] = {16, 17, 18, 19, 64, 127, 128};
    const int64_t nt_n[] = {16, 17, 18, 23, 24, 128, 131};
    const int64_t nt_k[] = {64, 65, 79, 80, 784, 1000};
    int cases = 0, bad = 0;
    for (int im = 0; im < 7; im++)
        for (int in = 0; in < 7; in++)
            for (int ik = 0; ik < 6; ik++) {
                if ((im + in + ik) % 2) continue; /* half the grid keeps it short */
                int r = run_case(true, nt_m[im], nt_n[in], nt_k[ik], (im + ik) % 3, ik % 2, NULL);
                CHECK(r >= 0);
                cases++, bad += r > 0;
            }
    printf("small GEMM: %d cases, %d bad\n", cases, bad);
    CHECK_EQ(bad, 0);
}

/* Each element is summed in one order whatever the threads: the bits agree. */
static void test_thread_independent(void) {
    const struct {
        bool nt;
        int64_t m, k;
    } cases[] = {{true, 64, 784}, {true, 128, 64}, {true, 17, 1000}};
    for (int i = 0; i < 3; i++) {
        const int64_t m = cases[i].m, n = 128 + 3;
        float *one = NULL, *many = NULL;
        rng = 42; /* the same operands twice */
        CHECK_EQ(run_case(cases[i].nt, m, n, cases[i].k, 1, false, &one), 0);
        rng = 42;
        CHECK_EQ(run_case(cases[i].nt, m, n, cases[i].k, 1, true, &many), 0);
        CHECK(memcmp(one, many, sizeof(float) * (size_t)(m * n)) == 0);
        free(one), free(many);
    }
}

/* Layouts and sizes it is not written for are left to BLAS, C untouched. */
static void test_declines(void) {
    static float a[300 * 300], b[300 * 300], c[300 * 300];
    c[0] = GUARD_VALUE;
    CHECK(!tsi_gemm_small_f32(129, 32, 64, a, 64, 1, b, 1, 64, c, 32, 1, true)); /* NT, m > 128 */
    CHECK(!tsi_gemm_small_f32(32, 32, 63, a, 63, 1, b, 1, 63, c, 32, 1, true));  /* NT, k < 64 */
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 1, 32, b, 32, 1, c, 32, 1, true));  /* TN (retired) */
    CHECK(!tsi_gemm_small_f32(32, 32, 8, a, 1, 32, b, 32, 1, c, 32, 1, true));   /* TN, short k */
    CHECK(!tsi_gemm_small_f32(15, 32, 64, a, 64, 1, b, 1, 64, c, 32, 1, true));  /* m < 16 */
    CHECK(!tsi_gemm_small_f32(32, 15, 64, a, 64, 1, b, 1, 64, c, 15, 1, true));  /* n < 16 */
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 64, 1, b, 1, 64, c, 1, 32, true));  /* C col-major */
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 64, 1, b, 64, 1, c, 32, 1, true));  /* NN */
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 1, 32, b, 1, 64, c, 32, 1, true));  /* TT */
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 0, 1, b, 1, 64, c, 32, 1, true));   /* rows alias */
    tsi_gemm_small_enable(false);
    CHECK(!tsi_gemm_small_f32(32, 32, 64, a, 64, 1, b, 1, 64, c, 32, 1, true));
    tsi_gemm_small_enable(true);
    CHECK(c[0] == GUARD_VALUE);
}

/* A linear layer's forward and gradients through the kernels equal those through BLAS (or the
 * blocked GEMM) within f32 rounding. */
static void test_linear_layer(void) {
    ts_manual_seed(3);
    ts_tensor *x = ts_randn(TS_SHAPE(64, 784), (ts_opts){0});
    ts_tensor *w = ts_randn(TS_SHAPE(128, 784), (ts_opts){.requires_grad = true});
    ts_tensor *bias = ts_randn(TS_SHAPE(128), (ts_opts){.requires_grad = true});
    float out[2][64 * 128], gw[2][128 * 784];
    for (int pass = 0; pass < 2; pass++) {
        tsi_gemm_small_enable(pass == 0);
        ts_scope_begin();
        ts_set_grad(w, NULL);
        ts_tensor *y = ts_linear(x, w, bias);
        ts_backward(ts_sum(ts_mul(y, y)));
        CHECK_OK();
        CHECK_EQ(ts_copy_to_host(y, out[pass], sizeof out[pass]), TS_OK);
        CHECK_EQ(ts_copy_to_host(ts_grad(w), gw[pass], sizeof gw[pass]), TS_OK);
        ts_scope_end();
    }
    tsi_gemm_small_enable(true);
    double e_out = 0, e_gw = 0, s_out = 0, s_gw = 0;
    for (int i = 0; i < 64 * 128; i++)
        e_out = fmax(e_out, fabs(out[0][i] - out[1][i])), s_out = fmax(s_out, fabs(out[1][i]));
    for (int i = 0; i < 128 * 784; i++)
        e_gw = fmax(e_gw, fabs(gw[0][i] - gw[1][i])), s_gw = fmax(s_gw, fabs(gw[1][i]));
    printf("linear 64x784 -> 128: largest difference %.3g (of %.3g) in y, %.3g (of %.3g) in "
           "dW\n",
           e_out, s_out, e_gw, s_gw);
    CHECK(e_out <= 1e-5 * s_out);
    CHECK(e_gw <= 1e-5 * s_gw);
    ts_release(x), ts_release(w), ts_release(bias);
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    test_declines();
    if (ts_cpu_isa_get() == TS_ISA_GENERIC) { /* the portable path leaves these to BLAS */
        CHECK(!have_kernels());
        test_linear_layer();
        return ts_test_finish();
    }
    CHECK(have_kernels());
    test_shapes();
    test_thread_independent();
    test_linear_layer();
    return ts_test_finish();
}
