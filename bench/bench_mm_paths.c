/* bench_mm_paths.c — every CPU float32 / float64 matrix-product path on the shapes
 * matmul_select.c sends it and the shapes at its edges, against the alternatives on the same
 * shapes, in turns, on one thread (issue 76's sweep; bench/results/cpu-matmul.md, "Path sweep").
 *   op:  ts_matmul with the table's choice against the same product forced elsewhere
 *        (tsi_gemv_enable / tsi_gemm_small_enable off, tsi_mm_select_force DIRECT or LIB);
 *   lib: the library's routes called directly on contiguous operands: oneDNN's matmul primitive,
 *        its sgemm, OpenBLAS, the built-in blocked GEMM;
 *   half: bf16 ts_matmul (oneDNN's native bf16 on an AVX512-BF16 host) against the same shape in
 *        f16 (which is always widened to float32: the path bf16 takes without native support).
 * Each figure is the median over ROUNDS rounds of the process's CPU time a call (microseconds;
 * one thread, so a loaded host still measures the kernel), the sides alternating within a round.
 * Ratios are side / the table's choice (op) or side / the route the provider takes (lib): > 1
 * means the chosen path is faster.
 * Usage: bench_mm_paths [op|lib|half] (default all) */
#define BENCH_NAME "bench_mm_paths"
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm_blocked.h"
#include "backend/cpu/gemm_provider.h"
#include "backend/cpu/gemm_small.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/matmul_select.h"
#include "bench_util.h"

#ifdef TS_HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef TS_HAVE_DNNL
#include <dnnl.h>
#endif

enum { ROUNDS = 11, SIDES_MAX = 4 };

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int reps_for(double macs) { return macs > 4e6 ? 3 : (int)(4e6 / (macs + 2e3)) + 1; }

/* ------------------------------------------------------------------ op: through ts_matmul */
enum { S_TABLE, S_NO_GEMV, S_NO_SMALL, S_DIRECT, S_LIB };
static const char *const side_name[] = {"table", "no-gemv", "no-small", "direct", "lib"};

static void set_side(int s) {
    tsi_gemv_enable(s != S_NO_GEMV);
    tsi_gemm_small_enable(s != S_NO_SMALL);
    tsi_mm_select_force(s == S_DIRECT ? TSI_MM_DIRECT : s == S_LIB ? TSI_MM_LIB : -1);
}

static double op_call(ts_tensor *a, ts_tensor *b, int reps) {
    const double c0 = cpu_s();
    for (int r = 0; r < reps; r++) {
        ts_tensor *c = ts_matmul(a, b);
        die_on_error("matmul");
        ts_release(c);
    }
    return (cpu_s() - c0) * 1e6 / reps;
}

static const char *path_name(tsi_mm_path p) {
    return p == TSI_MM_GEMV     ? "gemv"
           : p == TSI_MM_SMALL  ? "small"
           : p == TSI_MM_DIRECT ? "direct"
                                : "lib";
}

/* layout 0: A B, 1: A B^T (B a transposed view: a linear layer's x W^T), 2: A^T B */
static void op_one(ts_dtype dt, int64_t m, int64_t n, int64_t k, int layout, const int *sides,
                   int ns) {
    const ts_opts o = {.dtype = dt};
    ts_tensor *at = layout == 2 ? ts_randn(TS_SHAPE(k, m), o) : ts_randn(TS_SHAPE(m, k), o);
    ts_tensor *a = layout == 2 ? ts_transpose(at, 0, 1) : at;
    ts_tensor *bt = layout == 1 ? ts_randn(TS_SHAPE(n, k), o) : ts_randn(TS_SHAPE(k, n), o);
    ts_tensor *b = layout == 1 ? ts_transpose(bt, 0, 1) : bt;
    die_on_error("inputs");
    const double macs = (double)m * (double)n * (double)k;
    /* the table's choice for this product (strides of the views above) */
    const int64_t sa[2] = {layout == 2 ? 1 : k, layout == 2 ? m : 1};
    const int64_t sb[2] = {layout == 1 ? 1 : n, layout == 1 ? k : 1}, sc[2] = {n, 1};
    const tsi_mm_path chosen = tsi_mm_select(dt == TS_F64, m, n, k, sa, sb, sc,
                                             dt != TS_F64 && tsi_lib_sgemm_near_peak(macs));
    const int reps = reps_for(macs);
    double t[SIDES_MAX][ROUNDS];
    for (int s = 0; s < ns; s++) set_side(sides[s]), (void)op_call(a, b, 2);
    for (int r = 0; r < ROUNDS; r++)
        for (int s = 0; s < ns; s++) {
            const int si = (r & 1) ? ns - 1 - s : s; /* alternate the order too */
            set_side(sides[si]);
            t[si][r] = op_call(a, b, reps);
        }
    set_side(S_TABLE);
    printf("%-4s %5lldx%5lldx%5lld %s %-6s", dt == TS_F64 ? "f64" : "f32", (long long)m,
           (long long)n, (long long)k,
           layout == 1   ? "NT"
           : layout == 2 ? "TN"
                         : "NN",
           path_name(chosen));
    double med0 = 0;
    for (int s = 0; s < ns; s++) {
        qsort(t[s], ROUNDS, sizeof t[s][0], cmp_double);
        const double med = t[s][ROUNDS / 2];
        if (s == 0) med0 = med;
        printf("  %s %.2f", side_name[sides[s]], med);
        if (s > 0) printf(" (%.2fx)", med / med0);
    }
    printf("\n");
    fflush(stdout);
    if (b != bt) ts_release(b);
    if (a != at) ts_release(a);
    ts_release(at), ts_release(bt);
}

static void op_sweep(void) {
    printf("op: CPU us a call, 1 thread, median of %d; (x) = side / table's choice\n", ROUNDS);
    const int gemv_sides[] = {S_TABLE, S_NO_GEMV, S_DIRECT};
    const int small_sides[] = {S_TABLE, S_NO_SMALL, S_DIRECT};
    const int direct_sides[] = {S_TABLE, S_LIB};
    /* gemv: a row times W^T (NT) and a matrix times a column, from just over the plain loop's
     * 4096 multiply-adds up to a classifier and GPT-2's layers at one token */
    const int64_t gemv[][4] = {{1, 65, 64, 1},    {1, 128, 128, 1},   {1, 240, 64, 1},
                               {1, 1024, 576, 1}, {1, 1000, 1024, 1}, {1, 3072, 768, 1},
                               {1, 768, 3072, 1}, {65, 1, 64, 0},     {256, 1, 256, 0},
                               {1024, 1, 1024, 0}};
    for (size_t i = 0; i < sizeof gemv / sizeof gemv[0]; i++)
        op_one(TS_F32, gemv[i][0], gemv[i][1], gemv[i][2], (int)gemv[i][3], gemv_sides,
               (int)(gemv[i][1] * gemv[i][2] * gemv[i][0] <= 1 << 20 ? 3 : 2));
    /* gemm_small NT (m 16..128, k >= 64) and TN (k <= 256), near its edges */
    const int64_t small[][4] = {{16, 16, 64, 1},   {16, 64, 64, 1},    {32, 128, 256, 1},
                                {64, 256, 512, 1}, {128, 256, 512, 1}, {128, 512, 256, 1},
                                {128, 128, 64, 1}, {16, 16, 8, 2},     {64, 64, 32, 2},
                                {128, 784, 64, 2}, {256, 256, 128, 2}, {512, 512, 256, 2},
                                {784, 128, 64, 2}, {1024, 1024, 16, 2}};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        op_one(TS_F32, small[i][0], small[i][1], small[i][2], (int)small[i][3], small_sides,
               small[i][0] * small[i][1] * small[i][2] <= 1 << 20 ? 3 : 2);
    /* the plain loop up to 4096 multiply-adds and just past it, float32 and float64 */
    const int64_t direct[][4] = {
        {2, 2, 2, 0},    {100, 1, 10, 1}, {1, 64, 64, 1},  {1, 64, 64, 0},  {8, 8, 64, 1},
        {32, 4, 32, 0},  {4, 4, 4, 0},    {1, 10, 100, 0}, {8, 8, 8, 0},    {10, 1, 100, 0},
        {16, 16, 16, 0}, {16, 16, 16, 1}, {16, 16, 16, 2}, {16, 16, 8, 2},  {15, 16, 16, 2},
        {4, 4, 4, 2},    {4, 64, 16, 0},  {17, 16, 16, 0}, {24, 24, 24, 0}, {32, 32, 32, 0}};
    for (int dbl = 0; dbl < 2; dbl++)
        for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++)
            op_one(dbl ? TS_F64 : TS_F32, direct[i][0], direct[i][1], direct[i][2],
                   (int)direct[i][3], direct_sides, 2);
}

/* ------------------------------------------------------------------ lib: the routes directly */
enum { R_PRIM, R_SGEMM, R_BLAS, R_BLOCKED, R_COUNT };
static const char *const route_name[] = {"prim", "sgemm", "openblas", "blocked"};

static bool route_call(int route, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                       const float *b, float *c) {
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    switch (route) {
#ifdef TS_HAVE_DNNL
    case R_PRIM:
        return tsi_dnnl_matmul_f32(ta, tb, m, n, k, a, lda, b, ldb, c, n);
    case R_SGEMM:
        return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c,
                          n) == dnnl_success;
#endif
#ifdef TS_HAVE_CBLAS
    case R_BLAS:
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)n);
        return true;
#endif
    case R_BLOCKED:
        return tsi_gemm_blocked_f32(m, n, k, a, ta ? 1 : lda, ta ? lda : 1, b, tb ? 1 : ldb,
                                    tb ? ldb : 1, c, n, 1, false);
    default:
        return false;
    }
}

static void lib_one(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    const double macs = (double)m * (double)n * (double)k;
    float *a = malloc(sizeof(float) * (size_t)(m * k)),
          *b = malloc(sizeof(float) * (size_t)(k * n));
    float *c = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (int64_t i = 0; i < k * n; i++) b[i] = (float)((i * 104729) % 1000) * 1e-3f - 0.5f;
    const tsi_sgemm_lib chosen = tsi_lib_sgemm_route(ta, tb, m, n, k, 0.0f);
    const int reps = reps_for(macs);
    double t[R_COUNT][ROUNDS];
    bool ok[R_COUNT];
    for (int s = 0; s < R_COUNT; s++) ok[s] = route_call(s, ta, tb, m, n, k, a, b, c);
    for (int r = 0; r < ROUNDS; r++)
        for (int s0 = 0; s0 < R_COUNT; s0++) {
            const int s = (r & 1) ? R_COUNT - 1 - s0 : s0;
            if (!ok[s]) continue;
            const double c0 = cpu_s();
            for (int i = 0; i < reps; i++) (void)route_call(s, ta, tb, m, n, k, a, b, c);
            t[s][r] = (cpu_s() - c0) * 1e6 / reps;
        }
    const int ch = chosen == TSI_SGEMM_PRIMITIVE ? R_PRIM
                   : chosen == TSI_SGEMM_DNNL    ? R_SGEMM
                   : chosen == TSI_SGEMM_BLAS    ? R_BLAS
                                                 : R_BLOCKED;
    double med[R_COUNT];
    for (int s = 0; s < R_COUNT; s++) {
        if (!ok[s]) continue;
        qsort(t[s], ROUNDS, sizeof t[s][0], cmp_double);
        med[s] = t[s][ROUNDS / 2];
    }
    printf("lib %5lldx%5lldx%5lld %c%c %-8s", (long long)m, (long long)n, (long long)k,
           ta ? 'T' : 'N', tb ? 'T' : 'N', route_name[ch]);
    for (int s = 0; s < R_COUNT; s++)
        if (ok[s])
            printf("  %s %.2f (%.2fx)", route_name[s], med[s], med[s] / med[ch]);
        else
            printf("  %s -", route_name[s]);
    printf("\n");
    fflush(stdout);
    free(a), free(b), free(c);
}

static void lib_sweep(void) {
    printf("lib: CPU us a call, 1 thread, median of %d; (x) = route / provider's route\n", ROUNDS);
    /* around lib_tiny_macs (2^15) and prim_min_macs (2^20), thin products, NN / NT / TN */
    const int64_t shapes[][3] = {
        {8, 8, 8},       {16, 16, 16},   {4, 64, 16},      {17, 16, 16},     {24, 24, 24},
        {8, 8, 64},      {32, 32, 16},   {32, 32, 32},     {32, 32, 33},     {64, 64, 64},
        {100, 100, 100}, {128, 128, 63}, {128, 128, 64},   {128, 128, 128},  {256, 256, 256},
        {512, 512, 512}, {256, 10, 512}, {1024, 10, 1024}, {256, 1024, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int l = 0; l < 3; l++)
            lib_one(shapes[i][0], shapes[i][1], shapes[i][2], l == 2, l == 1);
}

/* ------------------------------------------------------------------ half: bf16 against f16 */
static void half_sweep(void) {
    printf("half: CPU us a call, 1 thread, median of %d; bf16 (%s) and f16 (widened)\n", ROUNDS,
           tsi_dnnl_bf16_native() ? "oneDNN native" : "widened");
    const int64_t shapes[][3] = {{16, 16, 16},    {64, 64, 64},    {128, 128, 128},
                                 {256, 256, 256}, {512, 512, 512}, {1, 1024, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        ts_tensor *ab = ts_randn(TS_SHAPE(m, k), (ts_opts){.dtype = TS_BF16});
        ts_tensor *bb = ts_randn(TS_SHAPE(k, n), (ts_opts){.dtype = TS_BF16});
        ts_tensor *ah = ts_randn(TS_SHAPE(m, k), (ts_opts){.dtype = TS_F16});
        ts_tensor *bh = ts_randn(TS_SHAPE(k, n), (ts_opts){.dtype = TS_F16});
        die_on_error("inputs");
        const int reps = reps_for((double)(m * n * k));
        double t[2][ROUNDS];
        (void)op_call(ab, bb, 2), (void)op_call(ah, bh, 2);
        for (int r = 0; r < ROUNDS; r++) {
            t[r & 1][r] = op_call((r & 1) ? ah : ab, (r & 1) ? bh : bb, reps);
            t[!(r & 1)][r] = op_call((r & 1) ? ab : ah, (r & 1) ? bb : bh, reps);
        }
        for (int s = 0; s < 2; s++) qsort(t[s], ROUNDS, sizeof t[s][0], cmp_double);
        printf("half %5lldx%5lldx%5lld  bf16 %.2f  f16 %.2f (%.2fx)\n", (long long)m, (long long)n,
               (long long)k, t[0][ROUNDS / 2], t[1][ROUNDS / 2],
               t[1][ROUNDS / 2] / t[0][ROUNDS / 2]);
        fflush(stdout);
        ts_release(ab), ts_release(bb), ts_release(ah), ts_release(bh);
    }
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    ts_set_num_threads(1);
    ts_release(ts_randn(TS_SHAPE(1), (ts_opts){0})); /* the CPU backend (scratch for oneDNN) */
    die_on_error("init");
    ts_no_grad_begin();
    printf("f32 provider: %s; f64: %s\n", tsi_lib_gemm_name(false), tsi_lib_gemm_name(true));
    if (!strcmp(what, "op") || !strcmp(what, "all")) op_sweep();
    if (!strcmp(what, "lib") || !strcmp(what, "all")) lib_sweep();
    if (!strcmp(what, "half") || !strcmp(what, "all")) half_sweep();
    ts_no_grad_end();
    return 0;
}
