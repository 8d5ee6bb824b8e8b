/* gemm_blocked.c — built-in GEMM: BLIS-style blocking, packed panels, vector micro-kernels. */
/* The library is built for the baseline ISA, so each micro-kernel is compiled several times with
 * per-function target attributes and picked at run time. ISO C mode turns off FMA contraction,
 * which the micro-kernels need for full speed; rounding then matches what BLAS libraries do. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/gemm_blocked.h"

#include "backend/cpu/cpu_isa.h"

#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_GEMM_X86      1
#define TS_TARGET_AVX2   __attribute__((target(TS_ISA_TARGET_AVX2)))
#define TS_TARGET_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))
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

enum {
    ISA_GENERIC = TS_ISA_GENERIC,
    ISA_AVX2 = TS_ISA_AVX2,
    ISA_AVX512 = TS_ISA_AVX512,
    ISA_COUNT = TS_ISA_COUNT
};
static const gemm_kernel kernels_f32[ISA_COUNT] = {
    {"generic", 6, 8, 256, 240, 4096, ukr_f32_generic},
#ifdef TS_GEMM_X86
    {"avx2", 6, 16, 256, 240, 4096, ukr_f32_avx2},
    {"avx512", 12, 32, 384, 144, 4096, ukr_f32_avx512},
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
#ifndef TS_GEMM_X86
    if (isa != ISA_GENERIC) return false;
#endif
    return isa <= (int)tsi_cpu_isa_host();
}

/* The ISA every kernel family uses (TS_CPU_ISA caps it), unless a test forced one. */
static int current_isa(void) {
    if (forced_isa >= 0) return forced_isa;
#ifdef TS_GEMM_X86
    return (int)ts_cpu_isa_get();
#else
    return ISA_GENERIC;
#endif
}

const char *tsi_gemm_blocked_isa(void) { return kernels_f32[current_isa()].isa; }

bool tsi_gemm_blocked_force_isa(const char *name) {
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

/* Packing, typed so the copies are plain (vectorisable) loads and stores; each loop reads its
 * source along the contiguous direction when there is one. */
#define TS_DEFINE_PACK(SUF, T)                                                                     \
    /* rows [0, m) x cols [0, kc) of A into mr-row panels: panel r holds A[r*mr + i, p] at         \
     * [p*mr + i], zero-padded to whole panels */                                                  \
    static void pack_a_##SUF(T *restrict dst, const T *restrict a, int64_t rsa, int64_t csa,       \
                             int64_t m, int64_t kc, int mr) {                                      \
        for (int64_t r = 0; r < m; r += mr) {                                                      \
            const int64_t rows = m - r < mr ? m - r : mr;                                          \
            T *pd = dst + r * kc;                                                                  \
            const T *pa = a + r * rsa;                                                             \
            if (rsa == 1) {                                                                        \
                for (int64_t p = 0; p < kc; p++)                                                   \
                    for (int64_t i = 0; i < rows; i++) pd[p * mr + i] = pa[p * csa + i];           \
            } else if (csa == 1) {                                                                 \
                for (int64_t i = 0; i < rows; i++)                                                 \
                    for (int64_t p = 0; p < kc; p++) pd[p * mr + i] = pa[i * rsa + p];             \
            } else {                                                                               \
                for (int64_t p = 0; p < kc; p++)                                                   \
                    for (int64_t i = 0; i < rows; i++) pd[p * mr + i] = pa[i * rsa + p * csa];     \
            }                                                                                      \
            if (rows < mr)                                                                         \
                for (int64_t p = 0; p < kc; p++)                                                   \
                    for (int64_t i = rows; i < mr; i++) pd[p * mr + i] = 0;                        \
        }                                                                                          \
    }                                                                                              \
    /* one kc x nr panel of B (cols [0, cols) valid) as [p*nr + j], zero-padded */                 \
    static void pack_b_##SUF(T *restrict dst, const T *restrict b, int64_t rsb, int64_t csb,       \
                             int64_t kc, int64_t cols, int nr) {                                   \
        if (csb == 1 || rsb != 1) {                                                                \
            for (int64_t p = 0; p < kc; p++)                                                       \
                for (int64_t j = 0; j < cols; j++) dst[p * nr + j] = b[p * rsb + j * csb];         \
        } else {                                                                                   \
            for (int64_t j = 0; j < cols; j++)                                                     \
                for (int64_t p = 0; p < kc; p++) dst[p * nr + j] = b[p + j * csb];                 \
        }                                                                                          \
        if (cols < nr)                                                                             \
            for (int64_t p = 0; p < kc; p++)                                                       \
                for (int64_t j = cols; j < nr; j++) dst[p * nr + j] = 0;                           \
    }

TS_DEFINE_PACK(f32, float)
TS_DEFINE_PACK(f64, double)

static inline __attribute__((always_inline)) void pack_a(char *dst, const char *a, int64_t rsa,
                                                         int64_t csa, int64_t m, int64_t kc, int mr,
                                                         size_t es) {
    if (es == sizeof(float))
        pack_a_f32((float *)dst, (const float *)a, rsa, csa, m, kc, mr);
    else
        pack_a_f64((double *)dst, (const double *)a, rsa, csa, m, kc, mr);
}

static inline __attribute__((always_inline)) void pack_b_panel(char *dst, const char *b,
                                                               int64_t rsb, int64_t csb, int64_t kc,
                                                               int64_t cols, int nr, size_t es) {
    if (es == sizeof(float))
        pack_b_f32((float *)dst, (const float *)b, rsb, csb, kc, cols, nr);
    else
        pack_b_f64((double *)dst, (const double *)b, rsb, csb, kc, cols, nr);
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

/* Packing buffers: small ones are kept per calling thread, because for a GEMM of a few hundred
 * rows a fresh mmap'ed buffer (page faults on first touch) costs a tenth of the multiply. Large
 * ones come and go with the call, their allocation being lost in the work. */
#define TS_GEMM_KEEP_BYTES ((size_t)4 << 20)
static _Thread_local char *scratch_cache;
static _Thread_local size_t scratch_cache_bytes;
static _Thread_local bool scratch_in_use;

static char *scratch_get(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes > TS_GEMM_KEEP_BYTES || scratch_in_use) return aligned_alloc(64, bytes);
    if (scratch_cache_bytes < bytes) {
        free(scratch_cache);
        scratch_cache = aligned_alloc(64, bytes);
        scratch_cache_bytes = scratch_cache ? bytes : 0;
        if (!scratch_cache) return NULL;
    }
    scratch_in_use = true;
    return scratch_cache;
}

static void scratch_put(char *p) {
    if (p == scratch_cache)
        scratch_in_use = false;
    else
        free(p);
}

/* The five loops on one thread, with its own packing buffers (ap: mcb x kcb, bp: kcb x ncb). */
static inline __attribute__((always_inline)) void
gemm_serial(const gemm_kernel *kd, size_t es, int64_t m, int64_t n, int64_t k, const char *a,
            int64_t rsa, int64_t csa, const char *b, int64_t rsb, int64_t csb, char *c, int64_t rsc,
            int64_t csc, int64_t mcb, int64_t kcb, int64_t ncb, char *ap, char *bp) {
    const int mr = kd->mr, nr = kd->nr;
    for (int64_t jc = 0; jc < n; jc += ncb) {
        const int64_t nc = min64(ncb, n - jc);
        for (int64_t pc = 0; pc < k; pc += kcb) {
            const int64_t kc = min64(kcb, k - pc);
            const bool acc_c = pc > 0;
            for (int64_t jr = 0; jr < nc; jr += nr)
                pack_b_panel(bp + (size_t)(jr * kc) * es,
                             b + (size_t)(pc * rsb + (jc + jr) * csb) * es, rsb, csb, kc,
                             min64(nr, nc - jr), nr, es);
            for (int64_t ic = 0; ic < m; ic += mcb) {
                const int64_t mc = min64(mcb, m - ic);
                pack_a(ap, a + (size_t)(ic * rsa + pc * csa) * es, rsa, csa, mc, kc, mr, es);
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    const int ncols = (int)min64(nr, nc - jr);
                    const char *bq = bp + (size_t)(jr * kc) * es;
                    for (int64_t ir = 0; ir < mc; ir += mr)
                        kd->fn(kc, ap + (size_t)(ir * kc) * es, bq,
                               c + (size_t)((ic + ir) * rsc + (jc + jr) * csc) * es, rsc, csc,
                               acc_c, (int)min64(mr, mc - ir), ncols);
                }
            }
        }
    }
}

/* Threads split C into equal rectangles (whole micro-panels; columns first, which keeps each
 * thread's A block in its own L2) and run the serial loops on them independently: no barrier
 * inside, so a thread that loses its core for a while holds up nobody but the final join. Each
 * thread packs the A rows it needs, a small price next to its share of the multiply. */
static inline __attribute__((always_inline)) bool
gemm_driver(const gemm_kernel *kd, size_t es, int64_t m, int64_t n, int64_t k, const char *a,
            int64_t rsa, int64_t csa, const char *b, int64_t rsb, int64_t csb, char *c, int64_t rsc,
            int64_t csc, bool parallel) {
    if (m <= 0 || n <= 0) return true;
    if (k <= 0) {
        zero_c(c, m, n, rsc, csc, es);
        return true;
    }
    const int mr = kd->mr, nr = kd->nr;
    const int64_t units_m = (m + mr - 1) / mr, units_n = (n + nr - 1) / nr;
    int nthreads = 1;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
    /* below ~2 MFLOP the fork/join costs more than a second thread gains */
    if (parallel && (double)m * (double)n * (double)k >= 1e6 && !omp_in_parallel())
        nthreads = omp_get_max_threads();
#endif
    int tn = (int)min64(nthreads, units_n), tm = (int)min64(nthreads / tn, units_m);
    nthreads = tm * tn;
    /* per-thread block sizes: A blocks of equal height, B no wider than a thread's share */
    const int64_t kcb = min64(kd->kc, k);
    const int64_t rows = ((units_m + tm - 1) / tm) * mr, cols = ((units_n + tn - 1) / tn) * nr;
    const int64_t n_ic = (rows + kd->mc - 1) / kd->mc;
    const int64_t mcb = round_up((rows + n_ic - 1) / n_ic, mr);
    const int64_t ncb = min64(kd->nc, cols);
    const size_t a_bytes = (size_t)round_up((int64_t)((size_t)(kcb * mcb) * es), 64);
    const size_t b_bytes = (size_t)round_up((int64_t)((size_t)(kcb * ncb) * es), 64);
    const size_t buf_bytes = (a_bytes + b_bytes) * (size_t)nthreads;
    char *buf = scratch_get(buf_bytes);
    if (!buf) return false; /* a plain loop would round differently: the caller reports it */
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
#endif
    {
        int tid = 0;
#ifdef TS_HAVE_OPENMP
        tid = omp_get_thread_num();
#endif
        const int64_t it_m = tid / tn, it_n = tid % tn;
        const int64_t r0 = units_m * it_m / tm * mr, r1 = min64(m, units_m * (it_m + 1) / tm * mr);
        const int64_t c0 = units_n * it_n / tn * nr, c1 = min64(n, units_n * (it_n + 1) / tn * nr);
        char *ap = buf + (a_bytes + b_bytes) * (size_t)tid, *bp = ap + a_bytes;
        if (r0 < r1 && c0 < c1)
            gemm_serial(kd, es, r1 - r0, c1 - c0, k, a + (size_t)(r0 * rsa) * es, rsa, csa,
                        b + (size_t)(c0 * csb) * es, rsb, csb,
                        c + (size_t)(r0 * rsc + c0 * csc) * es, rsc, csc, mcb, kcb, ncb, ap, bp);
    }
    scratch_put(buf);
    return true;
}

bool tsi_gemm_blocked_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                          const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc,
                          int64_t csc, bool parallel) {
    return gemm_driver(&kernels_f32[current_isa()], sizeof(float), m, n, k, (const char *)a, rsa,
                       csa, (const char *)b, rsb, csb, (char *)c, rsc, csc, parallel);
}

bool tsi_gemm_blocked_f64(int64_t m, int64_t n, int64_t k, const double *a, int64_t rsa,
                          int64_t csa, const double *b, int64_t rsb, int64_t csb, double *c,
                          int64_t rsc, int64_t csc, bool parallel) {
    return gemm_driver(&kernels_f64[current_isa()], sizeof(double), m, n, k, (const char *)a, rsa,
                       csa, (const char *)b, rsb, csb, (char *)c, rsc, csc, parallel);
}
