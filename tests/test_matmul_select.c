/* test_matmul_select.c — the CPU matrix products' one selector (src/backend/cpu/matmul_select.c):
 * each cut-off of its table at its edge (the value on one side, the next on the other), so a
 * changed threshold or a changed rule fails here: gemv for one row or column past the plain loop's
 * size in the layouts it reads, gemm_small's NT layout and sizes (and never near the library's
 * peak; its retired TN layout goes to the library), the plain loop up to its size, the library for
 * the rest and for every float64 product but the plain loop's; then products through ts_matmul on
 * each side of each edge against a float64 reference, so a path taken wrongly still computes the
 * right numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/gemm_small_blocks.h"
#include "backend/cpu/matmul_select.h"
#include "core/internal.h"
#include "ts_test.h"

static tsi_mm_path sel(bool dbl, int64_t m, int64_t n, int64_t k, int64_t sa0, int64_t sa1,
                       int64_t sb0, int64_t sb1, int64_t sc0, int64_t sc1, bool near_peak) {
    const int64_t sa[2] = {sa0, sa1}, sb[2] = {sb0, sb1}, sc[2] = {sc0, sc1};
    return tsi_mm_select(dbl, m, n, k, sa, sb, sc, near_peak);
}

/* row-major A [m, k], B stored as W [n, k] (B's columns along k: x @ W^T), C [m, n] */
static tsi_mm_path sel_nt(bool dbl, int64_t m, int64_t n, int64_t k, bool near_peak) {
    return sel(dbl, m, n, k, k, 1, 1, k, n, 1, near_peak);
}

/* A stored as At [k, m] (A's columns along m: dY^T @ x), B row-major [k, n], C [m, n] */
static tsi_mm_path sel_tn(bool dbl, int64_t m, int64_t n, int64_t k) {
    return sel(dbl, m, n, k, 1, m, n, 1, n, 1, false);
}

/* row-major A and B: the plain loop or the library, never gemv / gemm_small's layouts */
static tsi_mm_path sel_nn(bool dbl, int64_t m, int64_t n, int64_t k) {
    return sel(dbl, m, n, k, k, 1, n, 1, n, 1, false);
}

static void test_edges(const tsi_mm_limits *l) {
    const int64_t dm = (int64_t)l->direct_max_macs;
    /* the plain loop up to direct_max_macs, then the library (row-major operands) */
    CHECK_EQ(sel_nn(false, 1, 1, dm), TSI_MM_DIRECT); /* k along B's rows: not gemv's layout */
    CHECK_EQ(sel_nn(false, 2, 2, dm / 4), TSI_MM_DIRECT);
    CHECK_EQ(sel_nn(false, 2, 2, dm / 4 + 1), TSI_MM_LIB);
    CHECK_EQ(sel_nn(true, 2, 2, dm / 4), TSI_MM_DIRECT);
    CHECK_EQ(sel_nn(true, 2, 2, dm / 4 + 1), TSI_MM_LIB);
    CHECK_EQ(sel_nn(false, 64, 64, 64), TSI_MM_LIB);

    /* gemv: one row (or column) past the plain loop's size, A's rows and B's columns along k */
    CHECK_EQ(sel_nt(false, 1, 1, dm, false), TSI_MM_DIRECT);
    CHECK_EQ(sel_nt(false, 1, 1, dm + 1, false), TSI_MM_GEMV);
    CHECK_EQ(sel_nt(false, 1, 512, 256, false), TSI_MM_GEMV);
    CHECK_EQ(sel_nt(false, 512, 1, 256, false), TSI_MM_GEMV);
    CHECK_EQ(sel_nt(true, 1, 512, 256, false), TSI_MM_LIB); /* float32 only */
    CHECK_EQ(sel_nt(false, 2, 512, 256, false), TSI_MM_LIB);
    CHECK_EQ(sel_nn(false, 1, 512, 256), TSI_MM_LIB); /* B's rows along n: not gemv's */
    /* k == 1: any layout is gemv's (an outer product's row) */
    CHECK_EQ(sel(false, 1, dm + 1, 1, 7, 3, 9, 5, dm + 1, 1, false), TSI_MM_GEMV);

    /* gemm_small NT: m and n from small_min_mn, m up to small_nt_max_m, k from small_nt_min_k,
     * C's rows contiguous, never near the library's peak */
    const int64_t mn = l->small_min_mn, mm = l->small_nt_max_m, kk = l->small_nt_min_k;
#ifdef TS_SMALL_GEMM_BLOCKS
    const tsi_mm_path small = TSI_MM_SMALL;
#else
    const tsi_mm_path small = TSI_MM_LIB;
#endif
    CHECK_EQ(sel_nt(false, mn, 256, kk, false), small);
    CHECK_EQ(sel_nt(false, mm, 256, kk, false), small);
    CHECK_EQ(sel_nt(false, mm + 1, 256, kk, false), TSI_MM_LIB);
    CHECK_EQ(sel_nt(false, mn - 1, 256, kk, false), TSI_MM_LIB);
    CHECK_EQ(sel_nt(false, 64, mn - 1, kk, false), TSI_MM_LIB);
    CHECK_EQ(sel_nt(false, 64, 256, kk - 1, false), TSI_MM_LIB);
    CHECK_EQ(sel_nt(false, 64, 256, kk, true), TSI_MM_LIB);
    CHECK_EQ(sel_nt(true, 64, 256, kk, false), TSI_MM_LIB);
    /* C's rows not contiguous, or shorter than n */
    CHECK_EQ(sel(false, 64, 256, kk, kk, 1, 1, kk, 1, 64, false), TSI_MM_LIB);
    CHECK_EQ(sel(false, 64, 256, kk, kk, 1, 1, kk, 255, 1, false), TSI_MM_LIB);

    /* A^T B (a weight gradient): gemm_small's TN kernels were retired (decision 0044), so the
     * library whatever k, within the plain loop's size too from small_min_mn rows and columns,
     * float32 and float64 */
    CHECK_EQ(sel_tn(false, 256, 512, 1), TSI_MM_LIB);
    CHECK_EQ(sel_tn(false, 256, 512, 64), TSI_MM_LIB);
    CHECK_EQ(sel_tn(false, 256, 512, 256), TSI_MM_LIB);
    CHECK_EQ(sel_tn(false, mn, mn, dm / (mn * mn)), TSI_MM_LIB);
    CHECK_EQ(sel_tn(true, mn, mn, dm / (mn * mn)), TSI_MM_LIB);
    CHECK_EQ(sel_tn(false, mn - 1, mn, dm / (mn * mn)), TSI_MM_DIRECT);
    CHECK_EQ(sel_tn(false, mn, mn - 1, dm / (mn * mn)), TSI_MM_DIRECT);
    CHECK_EQ(sel_tn(true, mn - 1, mn, dm / (mn * mn)), TSI_MM_DIRECT);
    /* the small products that are neither NT nor TN */
    CHECK_EQ(sel_nn(false, 16, 16, 16), TSI_MM_DIRECT);
    CHECK_EQ(sel_nn(false, 16, 16, 17), TSI_MM_LIB);

    /* the other rows: ordered as their measurements say */
    CHECK(l->lib_tiny_macs < l->prim_min_macs && l->prim_min_macs < l->near_peak_macs);
    CHECK(l->batch_prim_tiny_macs > l->direct_max_macs);
    CHECK(l->gemv_parallel_min_macs > 0 && l->parallel_min_macs > 0 && l->amx_min_macs > 0);
}

/* C = A B through ts_matmul against a float64 sum, float32: |err| <= k 2^-24 sum|a||b| (each of
 * the k additions and products rounds once, in any order). A given as the transpose of a stored
 * [k, m] when a_transposed (a weight gradient's dY^T), B of a stored [n, k] when b_transposed. */
static void check_product_at(int64_t m, int64_t n, int64_t k, bool a_transposed,
                             bool b_transposed) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_tensor *a = a_transposed ? ts_transpose(ts_randn(TS_SHAPE(k, m), (ts_opts){0}), 0, 1)
                                : ts_randn(TS_SHAPE(m, k), (ts_opts){0});
    ts_tensor *w = b_transposed ? ts_randn(TS_SHAPE(n, k), (ts_opts){0})
                                : ts_randn(TS_SHAPE(k, n), (ts_opts){0});
    ts_tensor *b = b_transposed ? ts_transpose(w, 0, 1) : w;
    ts_tensor *c = ts_matmul(a, b);
    CHECK(c != NULL);
    a = ts_contiguous(a); /* [m, k] rows for the reference */
    float *pa = malloc(sizeof(float) * (size_t)(m * k)),
          *pw = malloc(sizeof(float) * (size_t)(n * k)),
          *pc = malloc(sizeof(float) * (size_t)(m * n));
    if (c && pa && pw && pc && ts_copy_to_host(a, pa, sizeof(float) * (size_t)(m * k)) == TS_OK &&
        ts_copy_to_host(w, pw, sizeof(float) * (size_t)(n * k)) == TS_OK &&
        ts_copy_to_host(c, pc, sizeof(float) * (size_t)(m * n)) == TS_OK) {
        double worst = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    const double bv = b_transposed ? pw[j * k + p] : pw[p * n + j];
                    s += (double)pa[i * k + p] * bv;
                    mag += fabs((double)pa[i * k + p] * bv);
                }
                const double e =
                    fabs(pc[i * n + j] - s) / ((double)k * ldexp(1, -24) * mag + 1e-30);
                if (e > worst) worst = e;
            }
        if (!(worst <= 1.0))
            printf("  %lldx%lldx%lld%s: error %.3g of the bound\n", (long long)m, (long long)n,
                   (long long)k, b_transposed ? " (B^T)" : "", worst);
        CHECK(worst <= 1.0);
    } else {
        CHECK(false);
    }
    free(pa), free(pw), free(pc);
    ts_scope_end();
}

static void check_product(int64_t m, int64_t n, int64_t k, bool b_transposed) {
    check_product_at(m, n, k, false, b_transposed);
}

static void test_products(const tsi_mm_limits *l) {
    const int64_t dm = (int64_t)l->direct_max_macs;
    check_product(1, 1, dm, true);      /* the plain loop */
    check_product(1, 1, dm + 1, true);  /* gemv */
    check_product(1, 512, 256, true);   /* gemv */
    check_product(2, 2, dm / 4, false); /* the plain loop */
    check_product(2, 2, dm / 4 + 1, false);
    check_product(l->small_min_mn, 256, l->small_nt_min_k, true); /* gemm_small NT */
    check_product(l->small_nt_max_m + 1, 256, l->small_nt_min_k, true);
    check_product(64, 256, l->small_nt_min_k - 1, true);
    check_product(16, 16, 16, false);
    check_product(16, 16, 17, false);
    check_product(96, 80, 300, false); /* the library */
    /* A^T B, the retired TN kernels' shapes: the plain loop below small_min_mn, the library */
    const int64_t mn = l->small_min_mn;
    check_product_at(mn - 1, mn, dm / (mn * mn), true, false);
    check_product_at(mn, mn, dm / (mn * mn), true, false);
    check_product_at(128, 784, 64, true, false);
    check_product_at(37, 300, 256, true, false);
}

int main(void) {
    tsi_init(); /* the backends */
    const tsi_mm_limits *l = tsi_mm_limits_get();
    test_edges(l);
    test_products(l);
    return ts_test_finish();
}
