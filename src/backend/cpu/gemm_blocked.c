/* gemm_blocked.c — built-in GEMM: BLIS-style cache blocking, packed panels, vector micro-kernels.
 */
/* The library is built for the baseline ISA, so each micro-kernel is compiled several times with
 * per-function target attributes and picked at run time. ISO C mode turns off FMA contraction,
 * which the micro-kernels need for full speed; rounding then matches what BLAS libraries do. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/gemm_blocked.h"

#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_GEMM_X86      1
#define TS_TARGET_AVX2   __attribute__((target("avx2,fma")))
#define TS_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#endif

/* C tile update shared by every kernel: acc_c adds into C (later k blocks), else overwrites. */
typedef void (*ts_ukr_fn)(int64_t kc, const void *ap, const void *bp, void *c, int64_t rsc,
                          int64_t csc, bool acc_c, int m, int n);

/* Blocking: a kc x nr panel of B stays in L1, an mc x kc block of A in L2, kc x nc of B in L3. */
typedef struct gemm_kernel {
    const char *isa;
    int mr, nr;
    int64_t kc, mc, nc;
    ts_ukr_fn fn;
} gemm_kernel;

/* The micro-kernel: an MR x (NV*VL) tile of C kept in vector registers over the whole kc loop.
 * All loop bounds are constants, so gcc unrolls them and keeps acc in registers. */
#define TS_DEFINE_UKR(NAME, ATTR, T, VT, VL, MR, NV)                                               \
    ATTR static void NAME(int64_t kc, const void *ap_, const void *bp_, void *c_, int64_t rsc,     \
                          int64_t csc, bool acc_c, int m, int n) {                                 \
        const T *restrict ap = ap_;                                                                \
        const T *restrict bp = bp_;                                                                \
        T *restrict c = c_;                                                                        \
        VT acc[MR][NV];                                                                            \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < NV; v++) acc[i][v] = (VT){0};                                      \
        for (int64_t p = 0; p < kc; p++, ap += MR, bp += NV * VL) {                                \
            VT b[NV];                                                                              \
            for (int v = 0; v < NV; v++) b[v] = *(const VT *)(bp + v * VL);                        \
            for (int i = 0; i < MR; i++)                                                           \
                for (int v = 0; v < NV; v++) acc[i][v] += ap[i] * b[v];                            \
        }                                                                                          \
        if (m == MR && n == NV * VL && csc == 1) {                                                 \
            for (int i = 0; i < MR; i++)                                                           \
                for (int v = 0; v < NV; v++) {                                                     \
                    T *cp = c + i * rsc + v * VL;                                                  \
                    VT x = acc[i][v];                                                              \
                    if (acc_c) {                                                                   \
                        VT old;                                                                    \
                        memcpy(&old, cp, sizeof old);                                              \
                        x += old;                                                                  \
                    }                                                                              \
                    memcpy(cp, &x, sizeof x);                                                      \
                }                                                                                  \
            return;                                                                                \
        }                                                                                          \
        T buf[MR * NV * VL];                                                                       \
        for (int i = 0; i < MR; i++)                                                               \
            for (int v = 0; v < NV; v++) memcpy(buf + (i * NV + v) * VL, &acc[i][v], sizeof(VT));  \
        for (int i = 0; i < m; i++)                                                                \
            for (int j = 0; j < n; j++) {                                                          \
                T *cp = c + i * rsc + j * csc;                                                     \
                *cp = acc_c ? *cp + buf[i * NV * VL + j] : buf[i * NV * VL + j];                   \
            }                                                                                      \
    }

typedef float ts_v4f __attribute__((vector_size(16)));
typedef double ts_v2d __attribute__((vector_size(16)));
TS_DEFINE_UKR(ukr_f32_generic, , float, ts_v4f, 4, 6, 2)
TS_DEFINE_UKR(ukr_f64_generic, , double, ts_v2d, 2, 6, 2)

#ifdef TS_GEMM_X86
typedef float ts_v8f __attribute__((vector_size(32)));
typedef double ts_v4d __attribute__((vector_size(32)));
typedef float ts_v16f __attribute__((vector_size(64)));
typedef double ts_v8d __attribute__((vector_size(64)));
TS_DEFINE_UKR(ukr_f32_avx2, TS_TARGET_AVX2, float, ts_v8f, 8, 6, 2)
TS_DEFINE_UKR(ukr_f64_avx2, TS_TARGET_AVX2, double, ts_v4d, 4, 6, 2)
TS_DEFINE_UKR(ukr_f32_avx512, TS_TARGET_AVX512, float, ts_v16f, 16, 12, 2)
TS_DEFINE_UKR(ukr_f64_avx512, TS_TARGET_AVX512, double, ts_v8d, 8, 12, 2)
#endif

enum { ISA_GENERIC, ISA_AVX2, ISA_AVX512, ISA_COUNT };
static const gemm_kernel kernels_f32[ISA_COUNT] = {
    {"generic", 6, 8, 256, 240, 4096, ukr_f32_generic},
#ifdef TS_GEMM_X86
    {"avx2", 6, 16, 256, 240, 4096, ukr_f32_avx2},
    {"avx512", 12, 32, 384, 96, 4096, ukr_f32_avx512},
#endif
};
static const gemm_kernel kernels_f64[ISA_COUNT] = {
    {"generic", 6, 4, 256, 120, 4096, ukr_f64_generic},
#ifdef TS_GEMM_X86
    {"avx2", 6, 8, 256, 120, 4096, ukr_f64_avx2},
    {"avx512", 12, 16, 256, 96, 4096, ukr_f64_avx512},
#endif
};

static int forced_isa = -1;

static bool isa_supported(int isa) {
#ifdef TS_GEMM_X86
    if (isa == ISA_AVX512) return __builtin_cpu_supports("avx512f");
    if (isa == ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == ISA_GENERIC;
}

/* No cached answer: __builtin_cpu_supports only reads a table, and nothing is shared between
 * threads. */
static int current_isa(void) {
    if (forced_isa >= 0) return forced_isa;
    for (int i = ISA_COUNT - 1; i > ISA_GENERIC; i--)
        if (isa_supported(i)) return i;
    return ISA_GENERIC;
}

const char *ts_gemm_blocked_isa(void) { return kernels_f32[current_isa()].isa; }

bool ts_gemm_blocked_force_isa(const char *name) {
    if (!name) {
        forced_isa = -1;
        return true;
    }
    for (int i = 0; i < ISA_COUNT; i++)
        if (kernels_f32[i].isa && strcmp(kernels_f32[i].isa, name) == 0 && isa_supported(i)) {
            forced_isa = i;
            return true;
        }
    return false;
}

/* Element-size-generic copies: the drivers are inlined with es a constant, so these become plain
 * loads and stores. */
static inline __attribute__((always_inline)) void put(char *dst, const char *src, size_t es) {
    memcpy(dst, src, es);
}

/* Pack rows [0, m) x cols [0, kc) of A (already offset) into mr-row panels: panel r holds
 * A[r*mr + i, p] at [p*mr + i], zero-padded to a whole panel. */
static inline __attribute__((always_inline)) void pack_a(char *dst, const char *a, int64_t rsa,
                                                         int64_t csa, int64_t m, int64_t kc, int mr,
                                                         size_t es) {
    for (int64_t r = 0; r < m; r += mr) {
        int64_t rows = m - r < mr ? m - r : mr;
        char *pd = dst + (size_t)(r * kc) * es;
        const char *pa = a + (size_t)(r * rsa) * es;
        if (rows == mr && rsa == 1) {
            for (int64_t p = 0; p < kc; p++)
                memcpy(pd + (size_t)(p * mr) * es, pa + (size_t)(p * csa) * es, (size_t)mr * es);
            continue;
        }
        for (int64_t p = 0; p < kc; p++) {
            char *q = pd + (size_t)(p * mr) * es;
            for (int64_t i = 0; i < rows; i++)
                put(q + (size_t)i * es, pa + (size_t)(i * rsa + p * csa) * es, es);
            memset(q + (size_t)rows * es, 0, (size_t)(mr - rows) * es);
        }
    }
}

/* Pack one kc x nr panel of B (cols [0, cols) valid) as [p*nr + j], zero-padded. */
static inline __attribute__((always_inline)) void pack_b_panel(char *dst, const char *b,
                                                               int64_t rsb, int64_t csb, int64_t kc,
                                                               int64_t cols, int nr, size_t es) {
    if (cols == nr && csb == 1) {
        for (int64_t p = 0; p < kc; p++)
            memcpy(dst + (size_t)(p * nr) * es, b + (size_t)(p * rsb) * es, (size_t)nr * es);
        return;
    }
    for (int64_t p = 0; p < kc; p++) {
        char *q = dst + (size_t)(p * nr) * es;
        for (int64_t j = 0; j < cols; j++)
            put(q + (size_t)j * es, b + (size_t)(p * rsb + j * csb) * es, es);
        memset(q + (size_t)cols * es, 0, (size_t)(nr - cols) * es);
    }
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static void zero_c(char *c, int64_t m, int64_t n, int64_t rsc, int64_t csc, size_t es) {
    for (int64_t i = 0; i < m; i++) {
        if (csc == 1) {
            memset(c + (size_t)(i * rsc) * es, 0, (size_t)n * es);
            continue;
        }
        for (int64_t j = 0; j < n; j++) memset(c + (size_t)(i * rsc + j * csc) * es, 0, es);
    }
}

/* The five-loop driver. Threads share the packed B block and split the (A block, column chunk)
 * tiles; each thread packs the A blocks of its own tiles. */
static inline __attribute__((always_inline)) void
gemm_driver(const gemm_kernel *kd, size_t es, int64_t m, int64_t n, int64_t k, const char *a,
            int64_t rsa, int64_t csa, const char *b, int64_t rsb, int64_t csb, char *c, int64_t rsc,
            int64_t csc, bool parallel) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        zero_c(c, m, n, rsc, csc, es);
        return;
    }
    const int mr = kd->mr, nr = kd->nr;
    const int64_t kcb = min64(kd->kc, k);
    /* equal-sized A blocks, so threads splitting them get equal work */
    const int64_t n_ic = (m + kd->mc - 1) / kd->mc;
    const int64_t mcb = round_up((m + n_ic - 1) / n_ic, mr);
    const int64_t ncb = min64(kd->nc, round_up(n, nr));
    int nthreads = 1;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
    /* below ~2 MFLOP the fork/join costs more than a second thread gains */
    if (parallel && (double)m * (double)n * (double)k >= 1e6 && !omp_in_parallel())
        nthreads = omp_get_max_threads();
#endif
    size_t b_bytes = (size_t)(kcb * ncb) * es;
    size_t a_bytes = (size_t)(kcb * mcb) * es;
    char *bp = aligned_alloc(64, (size_t)round_up((int64_t)b_bytes, 64));
    char *ap_all = aligned_alloc(64, (size_t)round_up((int64_t)a_bytes, 64) * (size_t)nthreads);
    if (!bp || !ap_all) {
        /* no memory for panels: a plain loop still gives the right answer */
        free(bp);
        free(ap_all);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++) {
                    const char *x = a + (size_t)(i * rsa + p * csa) * es;
                    const char *y = b + (size_t)(p * rsb + j * csb) * es;
                    s += es == 4 ? (double)*(const float *)x * *(const float *)y
                                 : *(const double *)x * *(const double *)y;
                }
                char *z = c + (size_t)(i * rsc + j * csc) * es;
                if (es == 4)
                    *(float *)z = (float)s;
                else
                    *(double *)z = s;
            }
        return;
    }
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
#endif
    {
        int tid = 0;
#ifdef TS_HAVE_OPENMP
        tid = omp_get_thread_num();
#endif
        char *ap = ap_all + (size_t)round_up((int64_t)a_bytes, 64) * (size_t)tid;
        for (int64_t jc = 0; jc < n; jc += ncb) {
            const int64_t nc = min64(ncb, n - jc);
            const int64_t n_panels = (nc + nr - 1) / nr;
            /* enough column chunks that every thread gets a few tiles */
            int64_t n_jchunks = (4 * (int64_t)nthreads + n_ic - 1) / n_ic;
            if (nthreads == 1) n_jchunks = 1;
            if (n_jchunks > n_panels) n_jchunks = n_panels;
            const int64_t chunk_panels = (n_panels + n_jchunks - 1) / n_jchunks;
            n_jchunks = (n_panels + chunk_panels - 1) / chunk_panels;
            const int64_t n_tiles = n_ic * n_jchunks;
            for (int64_t pc = 0; pc < k; pc += kcb) {
                const int64_t kc = min64(kcb, k - pc);
                const bool acc_c = pc > 0;
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
                for (int64_t q = 0; q < n_panels; q++) {
                    int64_t cols = min64(nr, nc - q * nr);
                    pack_b_panel(bp + (size_t)(q * nr * kc) * es,
                                 b + (size_t)(pc * rsb + (jc + q * nr) * csb) * es, rsb, csb, kc,
                                 cols, nr, es);
                }
                int64_t packed_ic = -1;
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(dynamic)
#endif
                for (int64_t t = 0; t < n_tiles; t++) {
                    const int64_t ic_i = t / n_jchunks, jchunk = t % n_jchunks;
                    const int64_t ic = ic_i * mcb, mc = min64(mcb, m - ic);
                    if (ic_i != packed_ic) {
                        pack_a(ap, a + (size_t)(ic * rsa + pc * csa) * es, rsa, csa, mc, kc, mr,
                               es);
                        packed_ic = ic_i;
                    }
                    const int64_t q_end = min64(n_panels, (jchunk + 1) * chunk_panels);
                    for (int64_t q = jchunk * chunk_panels; q < q_end; q++) {
                        const int64_t jr = q * nr;
                        const int ncols = (int)min64(nr, nc - jr);
                        const char *bq = bp + (size_t)(jr * kc) * es;
                        for (int64_t ir = 0; ir < mc; ir += mr) {
                            const int nrows = (int)min64(mr, mc - ir);
                            char *cp = c + (size_t)((ic + ir) * rsc + (jc + jr) * csc) * es;
                            kd->fn(kc, ap + (size_t)(ir * kc) * es, bq, cp, rsc, csc, acc_c, nrows,
                                   ncols);
                        }
                    }
                }
            }
        }
    }
    free(bp);
    free(ap_all);
}

void ts_gemm_blocked_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                         const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc,
                         int64_t csc, bool parallel) {
    gemm_driver(&kernels_f32[current_isa()], sizeof(float), m, n, k, (const char *)a, rsa, csa,
                (const char *)b, rsb, csb, (char *)c, rsc, csc, parallel);
}

void ts_gemm_blocked_f64(int64_t m, int64_t n, int64_t k, const double *a, int64_t rsa, int64_t csa,
                         const double *b, int64_t rsb, int64_t csb, double *c, int64_t rsc,
                         int64_t csc, bool parallel) {
    gemm_driver(&kernels_f64[current_isa()], sizeof(double), m, n, k, (const char *)a, rsa, csa,
                (const char *)b, rsb, csb, (char *)c, rsc, csc, parallel);
}
