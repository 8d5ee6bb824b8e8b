/* kern_matmul.c — the CPU batched matmul kernel: BLAS or blocked GEMM, f16 via f32, integers. */
/* f16/bf16 go through f32 scratch; integers use a plain loop with int64 (wrapping) accumulation.
 * Scratch that cannot be had is TS_ERR_OOM (tsi_kernel_oom), never a differently rounded result. */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/blas_threads.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/gemm_blocked.h"
#include "backend/cpu/gemm_small.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/matmul_select.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#include "backend/cpu/gemm_provider.h"
#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

/* One batch of the problem: C[m,n] = A[m,k] @ B[k,n], strides in elements. */
typedef struct mm_desc {
    int64_t bsz, m, n, k;
    int64_t sa[3], sb[3], sc[3]; /* batch, row, column strides */
} mm_desc;

static mm_desc mm_desc_of(const ts_kview *out, const ts_kview *a, const ts_kview *b) {
    mm_desc d = {.bsz = out->shape[0], .m = out->shape[1], .n = out->shape[2], .k = a->shape[2]};
    for (int i = 0; i < 3; i++) {
        d.sa[i] = a->strides[i];
        d.sb[i] = b->strides[i];
        d.sc[i] = out->strides[i];
    }
    return d;
}

static bool run_in_parallel(double work) {
#ifdef TS_HAVE_OPENMP
    return work > tsi_mm_limits_get()->parallel_min_macs && omp_get_max_threads() > 1 &&
           !omp_in_parallel();
#else
    (void)work;
    return false;
#endif
}

/* ------------------------------------------------------------------ f32 / f64 */
/* A rows x cols matrix BLAS can read in place: row-major (ld = row stride) or column-major
 * (ld = column stride). A stride of a size-1 dim is arbitrary and so is ignored. */
typedef enum { LAYOUT_NONE, LAYOUT_ROW, LAYOUT_COL } mat_layout;

static mat_layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *ld) {
    int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= c1) && (rows == 1 ? c1 : rs) <= INT_MAX) {
        *ld = (int)(rows == 1 ? c1 : rs);
        return LAYOUT_ROW;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= r1) && (cols == 1 ? r1 : cs) <= INT_MAX) {
        *ld = (int)(cols == 1 ? r1 : cs);
        return LAYOUT_COL;
    }
    return LAYOUT_NONE;
}

/* Copy a strided matrix into contiguous row-major scratch. */
static void *pack_rows(const char *p, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                       size_t es) {
    char *dst = malloc((size_t)(rows * cols) * es + 1);
    if (!dst) return NULL;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            memcpy(dst + (size_t)(i * cols + j) * es, p + (size_t)(i * rs + j * cs) * es, es);
    return dst;
}

/* One GEMM through a library (gemm_provider.c): BLAS_DONE; BLAS_CANNOT when none takes it (none
 * built in or chosen, sizes beyond it, an output layout it cannot write), leaving the caller to
 * use the blocked GEMM; BLAS_NO_MEMORY when an operand could not be packed for it (the blocked
 * GEMM would round differently: an error instead). */
enum { BLAS_NO_MEMORY = -1, BLAS_CANNOT = 0, BLAS_DONE = 1 };
static int blas_gemm(bool dbl, int64_t m, int64_t n, int64_t k, const char *a, int64_t rsa,
                     int64_t csa, const char *b, int64_t rsb, int64_t csb, char *c, int64_t rsc,
                     int64_t csc) {
    if (!tsi_lib_gemm_present(dbl)) return BLAS_CANNOT; /* nothing to pack for */
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    int lda, ldb, ldc;
    mat_layout la = layout_of(m, k, rsa, csa, &lda), lb = layout_of(k, n, rsb, csb, &ldb);
    mat_layout lc = layout_of(m, n, rsc, csc, &ldc);
    if (lc == LAYOUT_NONE) return BLAS_CANNOT; /* only exotic outputs: blocked GEMM writes any */
    void *sa = NULL, *sb = NULL;
    if (la == LAYOUT_NONE) {
        if (!(sa = pack_rows(a, m, k, rsa, csa, es))) return BLAS_NO_MEMORY;
        a = sa, la = LAYOUT_ROW, lda = (int)(k > 1 ? k : 1);
    }
    if (lb == LAYOUT_NONE) {
        if (!(sb = pack_rows(b, k, n, rsb, csb, es))) {
            free(sa);
            return BLAS_NO_MEMORY;
        }
        b = sb, lb = LAYOUT_ROW, ldb = (int)(n > 1 ? n : 1);
    }
    /* Row-major C: an operand stored by rows is "no transpose". Column-major C: compute its
     * transpose, C^T = B^T A^T, whose operands swap roles (and storage senses). */
    bool ok;
    if (lc == LAYOUT_ROW) {
        const bool ta = la != LAYOUT_ROW, tb = lb != LAYOUT_ROW;
        ok = dbl ? tsi_lib_dgemm(ta, tb, m, n, k, (const double *)a, lda, (const double *)b, ldb,
                                 0.0, (double *)c, ldc)
                 : tsi_lib_sgemm(ta, tb, m, n, k, (const float *)a, lda, (const float *)b, ldb,
                                 0.0f, (float *)c, ldc);
    } else {
        const bool ta = lb != LAYOUT_COL, tb = la != LAYOUT_COL;
        ok = dbl ? tsi_lib_dgemm(ta, tb, n, m, k, (const double *)b, ldb, (const double *)a, lda,
                                 0.0, (double *)c, ldc)
                 : tsi_lib_sgemm(ta, tb, n, m, k, (const float *)b, ldb, (const float *)a, lda,
                                 0.0f, (float *)c, ldc);
    }
    free(sa);
    free(sb);
    return ok ? BLAS_DONE : BLAS_CANNOT;
}

/* Products of at most direct_max_macs multiply-adds (matmul_select.c): a plain loop over the
 * strided operands. Each element sums over k in order, in the operands' type; the loop runs over
 * rows innermost, so the sums of different rows are independent chains (unit-stride vectors when
 * A's and C's rows are adjacent) instead of one latency-bound chain per element. */
/* W rows i0.. of column j of C, each summed over k in order in W registers (A's rows adjacent) */
#define GEMM_DIRECT_ROWS(T, W)                                                                     \
    do {                                                                                           \
        T acc_[W] = {0};                                                                           \
        const T *ai_ = a + i0;                                                                     \
        for (int64_t p = 0; p < k; p++) {                                                          \
            const T bv_ = bj[p * sb1];                                                             \
            for (int r_ = 0; r_ < (W); r_++) acc_[r_] += ai_[p * sa2 + r_] * bv_;                  \
        }                                                                                          \
        for (int r_ = 0; r_ < (W); r_++) cj[i0 + r_] = acc_[r_];                                   \
    } while (0)
#define GEMM_DIRECT(T)                                                                             \
    static void gemm_direct_##T(const mm_desc *d, const T *a, const T *b, T *c) {                  \
        const int64_t m = d->m, k = d->k, sa1 = d->sa[1], sa2 = d->sa[2], sc1 = d->sc[1];          \
        for (int64_t j = 0; j < d->n; j++) {                                                       \
            const T *bj = b + j * d->sb[2];                                                        \
            const int64_t sb1 = d->sb[1];                                                          \
            T *cj = c + j * d->sc[2];                                                              \
            if (sa2 == 1) { /* rows of A along k: eight (then four) rows' sums at once */          \
                int64_t i = 0;                                                                     \
                for (; i + 8 <= m; i += 8) {                                                       \
                    T s[8] = {0};                                                                  \
                    for (int64_t p = 0; p < k; p++) {                                              \
                        const T bv = bj[p * sb1];                                                  \
                        for (int r = 0; r < 8; r++) s[r] += a[(i + r) * sa1 + p] * bv;             \
                    }                                                                              \
                    for (int r = 0; r < 8; r++) cj[(i + r) * sc1] = s[r];                          \
                }                                                                                  \
                for (; i + 4 <= m; i += 4) {                                                       \
                    const T *a0 = a + i * sa1, *a1 = a0 + sa1, *a2 = a1 + sa1, *a3 = a2 + sa1;     \
                    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                              \
                    for (int64_t p = 0; p < k; p++) {                                              \
                        const T bv = bj[p * sb1];                                                  \
                        s0 += a0[p] * bv, s1 += a1[p] * bv, s2 += a2[p] * bv, s3 += a3[p] * bv;    \
                    }                                                                              \
                    cj[i * sc1] = s0, cj[(i + 1) * sc1] = s1;                                      \
                    cj[(i + 2) * sc1] = s2, cj[(i + 3) * sc1] = s3;                                \
                }                                                                                  \
                for (; i < m; i++) {                                                               \
                    T s0 = 0;                                                                      \
                    for (int64_t p = 0; p < k; p++) s0 += a[i * sa1 + p] * bj[p * sb1];            \
                    cj[i * sc1] = s0;                                                              \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            /* otherwise rows innermost: independent sums, kept in registers 16, 8, 4 or 1 rows at \
             * a time when A's and C's rows are adjacent */                                        \
            if (sa1 == 1 && sc1 == 1) {                                                            \
                int64_t i0 = 0;                                                                    \
                for (; i0 + 16 <= m; i0 += 16) GEMM_DIRECT_ROWS(T, 16);                            \
                for (; i0 + 8 <= m; i0 += 8) GEMM_DIRECT_ROWS(T, 8);                               \
                for (; i0 + 4 <= m && m < 8; i0 += 4) GEMM_DIRECT_ROWS(T, 4);                      \
                /* the last rows: one group ending at m, overlapping rows already done (their sums \
                 * come out the same), instead of one latency-bound chain per row */               \
                if (i0 < m && m >= 8) {                                                            \
                    i0 = m - 8;                                                                    \
                    GEMM_DIRECT_ROWS(T, 8);                                                        \
                    i0 = m;                                                                        \
                }                                                                                  \
                if (i0 < m && m >= 4) {                                                            \
                    i0 = m - 4;                                                                    \
                    GEMM_DIRECT_ROWS(T, 4);                                                        \
                    i0 = m;                                                                        \
                }                                                                                  \
                for (; i0 < m; i0++) GEMM_DIRECT_ROWS(T, 1);                                       \
                continue;                                                                          \
            }                                                                                      \
            for (int64_t i = 0; i < m; i++) cj[i * sc1] = 0;                                       \
            for (int64_t p = 0; p < k; p++) {                                                      \
                const T bv = bj[p * sb1];                                                          \
                const T *ap = a + p * sa2;                                                         \
                for (int64_t i = 0; i < m; i++) cj[i * sc1] += ap[i * sa1] * bv;                   \
            }                                                                                      \
        }                                                                                          \
    }
GEMM_DIRECT(float)
GEMM_DIRECT(double)

/* A row times a matrix (m == 1, B's columns contiguous along k: x @ W^T of a linear layer on one
 * row) or a matrix times a column (n == 1, A's rows contiguous along k), where tsi_mm_select chose
 * TSI_MM_GEMV: gemv.c's dot products, + bias[j * sbias] where bias is given. False where the
 * selector chose another path or the kernel declines (nothing written). */
static bool gemv_one(const mm_desc *d, const float *a, const float *b, float *c, const float *bias,
                     int64_t sbias, bool parallel) {
    if (tsi_mm_select(false, d->m, d->n, d->k, d->sa + 1, d->sb + 1, d->sc + 1, true) !=
        TSI_MM_GEMV)
        return false;
    if (d->m == 1)
        return tsi_gemv_f32(d->n, d->k, a, b, d->sb[2], bias, sbias, c, d->sc[2], parallel);
    /* n == 1: one bias element for every row */
    return tsi_gemv_f32(d->m, d->k, b, a, d->sa[1], bias, 0, c, d->sc[1], parallel);
}

/* false: no scratch memory (nothing sensible written) */
static bool gemm_one(bool dbl, const mm_desc *d, const char *a, const char *b, char *c,
                     bool parallel) {
    const double macs = (double)d->m * (double)d->n * (double)d->k;
    /* matmul_select.c's path; a kernel that declines (no ISA, turned off) leaves the product to
     * the plain loop where that is sized for it, else to the library */
    const tsi_mm_path path = tsi_mm_select(dbl, d->m, d->n, d->k, d->sa + 1, d->sb + 1, d->sc + 1,
                                           !dbl && tsi_lib_sgemm_near_peak(macs));
    if (path == TSI_MM_GEMV &&
        gemv_one(d, (const float *)a, (const float *)b, (float *)c, NULL, 0, parallel))
        return true;
    if (path == TSI_MM_SMALL &&
        tsi_gemm_small_f32(d->m, d->n, d->k, (const float *)a, d->sa[1], d->sa[2], (const float *)b,
                           d->sb[1], d->sb[2], (float *)c, d->sc[1], d->sc[2],
                           parallel && run_in_parallel(macs)))
        return true;
    if (path == TSI_MM_DIRECT ||
        (path != TSI_MM_LIB && macs <= tsi_mm_limits_get()->direct_max_macs)) {
        if (dbl)
            gemm_direct_double(d, (const double *)a, (const double *)b, (double *)c);
        else
            gemm_direct_float(d, (const float *)a, (const float *)b, (float *)c);
        return true;
    }
    int r = blas_gemm(dbl, d->m, d->n, d->k, a, d->sa[1], d->sa[2], b, d->sb[1], d->sb[2], c,
                      d->sc[1], d->sc[2]);
    if (r != BLAS_CANNOT) return r == BLAS_DONE;
    if (dbl)
        return tsi_gemm_blocked_f64(d->m, d->n, d->k, (const double *)a, d->sa[1], d->sa[2],
                                    (const double *)b, d->sb[1], d->sb[2], (double *)c, d->sc[1],
                                    d->sc[2], parallel);
    return tsi_gemm_blocked_f32(d->m, d->n, d->k, (const float *)a, d->sa[1], d->sa[2],
                                (const float *)b, d->sb[1], d->sb[2], (float *)c, d->sc[1],
                                d->sc[2], parallel);
}

/* A batch of float32 products goes to oneDNN's matmul primitive in one call where that primitive is
 * the provider (tsi_lib_sgemm_primitive_provider: AVX-512): its brgemm kernels thread over the
 * batch and the blocks of C, where one by one each product paid a call, and attention's Q K^T
 * (k = 64) went to gemm_small's dot-product blocks, whose 24 horizontal sums cost as much as 64
 * steps of k. Not for products of one row or column (gemv.c's) nor under matmul_select.c's
 * batch_prim_* cut-offs (the measurements are there). */
static bool batch_to_primitive(const mm_desc *d) {
    const tsi_mm_limits *l = tsi_mm_limits_get();
    const double macs = (double)d->m * (double)d->n * (double)d->k;
    return d->bsz > 1 && d->m > 1 && d->n > 1 && macs * (double)d->bsz >= l->batch_prim_min_macs &&
           (macs <= l->direct_max_macs || macs >= l->batch_prim_tiny_macs) &&
           tsi_lib_sgemm_primitive_provider();
}

static void zero_out(const mm_desc *d, char *c, size_t es) {
    for (int64_t bi = 0; bi < d->bsz; bi++)
        for (int64_t i = 0; i < d->m; i++)
            for (int64_t j = 0; j < d->n; j++)
                memset(c + (size_t)(bi * d->sc[0] + i * d->sc[1] + j * d->sc[2]) * es, 0, es);
}

/* false: out of scratch memory (the caller reports it) */
static bool matmul_float(bool dbl, const mm_desc *d, const char *a, const char *b, char *c) {
    const size_t es = dbl ? sizeof(double) : sizeof(float);
    if (d->bsz == 0 || d->m == 0 || d->n == 0) return true;
    if (d->k == 0) {
        zero_out(d, c, es);
        return true;
    }
    const double flops = (double)d->m * (double)d->n * (double)d->k;
    if (!dbl && batch_to_primitive(d)) {
        const int r = tsi_dnnl_matmul_batched_f32(d->bsz, d->m, d->n, d->k, (const float *)a, d->sa,
                                                  (const float *)b, d->sb, (float *)c, d->sc);
        if (r != 0) return r > 0; /* -1: out of memory (a slower path would round differently) */
    }
    /* Many small matrices: one GEMM per thread beats threading each GEMM. One big GEMM keeps the
     * library's own threads. */
    if (d->bsz > 1 && flops < tsi_mm_limits_get()->batch_per_thread_max_macs &&
        run_in_parallel(flops * (double)d->bsz)) {
#ifdef TS_HAVE_OPENMP
        tsi_blas_single_begin(); /* one GEMM per thread: OpenBLAS's own threads stay out */
        const int64_t bsz = d->bsz;
        atomic_bool ok = true;
#pragma omp parallel for schedule(static)
        for (int64_t bi = 0; bi < bsz; bi++)
            if (!gemm_one(dbl, d, a + (size_t)(bi * d->sa[0]) * es,
                          b + (size_t)(bi * d->sb[0]) * es, c + (size_t)(bi * d->sc[0]) * es,
                          false))
                atomic_store_explicit(&ok, false, memory_order_relaxed);
        tsi_blas_single_end();
        return atomic_load(&ok);
#endif
    }
    bool ok = true;
    for (int64_t bi = 0; ok && bi < d->bsz; bi++)
        ok = gemm_one(dbl, d, a + (size_t)(bi * d->sa[0]) * es, b + (size_t)(bi * d->sb[0]) * es,
                      c + (size_t)(bi * d->sc[0]) * es, true);
    return ok;
}

/* ------------------------------------------------------------------ f16 / bf16 */
static inline float half_load(const char *p, bool bf) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return bf ? ts_bf16_to_f32(h) : ts_f16_to_f32(h);
}

static inline void half_store(char *p, float v, bool bf) {
    uint16_t h = bf ? ts_f32_to_bf16(v) : ts_f32_to_f16(v);
    memcpy(p, &h, sizeof h);
}

/* [nb, rows, cols] strided halves -> contiguous f32 dst (nb is 1 for a broadcast operand). */
static void halves_to_f32(float *dst, const char *p, bool bf, int64_t nb, int64_t rows,
                          int64_t cols, const int64_t *s) {
    const int64_t total_rows = nb * rows;
    TS_PARALLEL_FOR_IF(
        run_in_parallel((double)(total_rows * cols)),
        for (int64_t r = 0; r < total_rows;
             r++) { /* F16C where the CPU has it (vec_kernels.h) */
                    const char *src = p + 2 * (size_t)((r / rows) * s[0] + (r % rows) * s[1]);
                    ts_vec_load_f32(tsi_vec_kernels_get(), dst + r * cols, src,
                                    bf ? TS_BF16 : TS_F16, 2 * s[2], cols);
        });
}

/* One operand [nb, rows, cols] (strides s) widened into the contiguous floats dst, in the order
 * that reads its halves contiguously: row-major, or column-major where the operand is a transposed
 * view (linear's weight W^T, its backward's transposes; gathering those along rows cost more than
 * the product at MLP sizes). fs: the copy's strides for the float32 product. */
static void widen_operand(float *dst, const char *p, bool bf, int64_t nb, int64_t rows,
                          int64_t cols, const int64_t *s, int64_t *fs) {
    fs[0] = nb == 1 ? 0 : rows * cols;
    if (s[2] != 1 && s[1] == 1 && rows > 1) {
        halves_to_f32(dst, p, bf, nb, cols, rows, (const int64_t[3]){s[0], s[2], s[1]});
        fs[1] = 1, fs[2] = rows;
        return;
    }
    halves_to_f32(dst, p, bf, nb, rows, cols, s);
    fs[1] = cols, fs[2] = 1;
}

/* false: out of scratch memory (the caller reports it). bf16 on a CPU that multiplies it natively
 * (AMX, AVX512-BF16): on AMX tiles by gemm_amx.c for the large products (matmul_select.c's
 * amx_min_macs; TS_AMX_GEMM=off|all), the others by oneDNN's bf16 matmul on the operands as they
 * are (exact products, float32 sums, one rounding); elsewhere, and for f16, the operands widened to
 * float32, the float32 kernels, and one rounding — the same arithmetic, summed in another order. A
 * bias [n] (halves at element stride sbias; NULL: none) joins the float32 sums before that one
 * rounding, on both paths (PyTorch's addmm: oneDNN's bias argument). */
static bool matmul_half(bool bf, const mm_desc *d, const char *a, const char *b, char *c,
                        const char *bias, int64_t sbias) {
    if (d->bsz == 0 || d->m == 0 || d->n == 0) return true;
    const double macs = (double)d->bsz * (double)d->m * (double)d->n * (double)d->k;
    if (bf && d->k > 0 && (!bias || sbias == 1) && tsi_amx_gemm_takes(macs) &&
        tsi_amx_gemm_bf16(d->bsz, d->m, d->n, d->k, (const uint16_t *)a, d->sa, (const uint16_t *)b,
                          d->sb, (uint16_t *)c, d->sc, (const uint16_t *)bias))
        return true;
    if (bf && d->k > 0 && tsi_dnnl_bf16_native() && (!bias || sbias == 1) &&
        tsi_dnnl_matmul_strided_bias(TS_BF16, d->bsz, d->m, d->n, d->k, a, d->sa, b, d->sb, c,
                                     d->sc, bias))
        return true;
    /* the widened operands, product and bias in one cached scratch block (host_scratch.h: not
     * mapped and faulted in afresh at every call, which cost as much as the conversions) */
    const int64_t nba = d->sa[0] == 0 ? 1 : d->bsz, nbb = d->sb[0] == 0 ? 1 : d->bsz;
    const size_t ba = tsi_scratch_float_bytes(nba * d->m * d->k),
                 bb = tsi_scratch_float_bytes(nbb * d->k * d->n);
    const size_t bc = tsi_scratch_float_bytes(d->bsz * d->m * d->n),
                 bbias = bias ? tsi_scratch_float_bytes(d->n) : 0;
    ts_block *block;
    char *scratch = tsi_host_scratch_get(ba + bb + bc + bbias, &block);
    if (!scratch) return false;
    float *fa = (float *)scratch, *fb = (float *)(scratch + ba), *fc = (float *)(scratch + ba + bb);
    float *fbias = bias ? (float *)(scratch + ba + bb + bc) : NULL;
    mm_desc f = {.bsz = d->bsz, .m = d->m, .n = d->n, .k = d->k};
    widen_operand(fa, a, bf, nba, d->m, d->k, d->sa, f.sa);
    widen_operand(fb, b, bf, nbb, d->k, d->n, d->sb, f.sb);
    if (bias) halves_to_f32(fbias, bias, bf, 1, 1, d->n, (const int64_t[3]){0, 0, sbias});
    f.sc[0] = d->m * d->n, f.sc[1] = d->n, f.sc[2] = 1;
    if (!matmul_float(false, &f, (const char *)fa, (const char *)fb, (char *)fc)) {
        tsi_host_scratch_put(block);
        return false;
    }
    const int64_t rows = d->bsz * d->m, n = d->n;
    TS_PARALLEL_FOR_IF(
        run_in_parallel((double)(rows * n)), for (int64_t r = 0; r < rows; r++) {
            char *dst = c + 2 * (size_t)((r / d->m) * d->sc[0] + (r % d->m) * d->sc[1]);
            if (fbias)
                for (int64_t j = 0; j < n; j++) fc[r * n + j] += fbias[j];
            ts_vec_store_f32(tsi_vec_kernels_get(), dst, bf ? TS_BF16 : TS_F16, 2 * d->sc[2],
                             fc + r * n, n);
        });
    tsi_host_scratch_put(block);
    return true;
}

bool tsi_cpu_half_products_native(const ts_backend *be, int index, ts_dtype dt) {
    (void)be, (void)index;
    return dt == TS_BF16 && tsi_dnnl_bf16_native();
}

/* ------------------------------------------------------------------ integers */
/* PyTorch's integer mm wraps on overflow; unsigned arithmetic gives that without UB. Rows
 * [r0, r1) of the flattened [bsz * m] output. */
#define TS_DEFINE_INT_MM(NAME, T)                                                                  \
    static void NAME(const mm_desc *d, const char *a_, const char *b_, char *c_, int64_t r0,       \
                     int64_t r1) {                                                                 \
        const T *a = (const T *)a_, *b = (const T *)b_;                                            \
        T *c = (T *)c_;                                                                            \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            const int64_t bi = r / d->m, i = r % d->m;                                             \
            const T *ar = a + bi * d->sa[0] + i * d->sa[1];                                        \
            const T *bb = b + bi * d->sb[0];                                                       \
            T *cr = c + bi * d->sc[0] + i * d->sc[1];                                              \
            for (int64_t j = 0; j < d->n; j++) {                                                   \
                uint64_t s = 0;                                                                    \
                for (int64_t p = 0; p < d->k; p++)                                                 \
                    s += (uint64_t)(int64_t)ar[p * d->sa[2]] *                                     \
                         (uint64_t)(int64_t)bb[p * d->sb[1] + j * d->sb[2]];                       \
                cr[j * d->sc[2]] = (T)(int64_t)s;                                                  \
            }                                                                                      \
        }                                                                                          \
    }

TS_DEFINE_INT_MM(int_rows_i64, int64_t)
TS_DEFINE_INT_MM(int_rows_i32, int32_t)
TS_DEFINE_INT_MM(int_rows_u8, uint8_t)
TS_DEFINE_INT_MM(int_rows_i8, int8_t)
TS_DEFINE_INT_MM(int_rows_i16, int16_t)
TS_DEFINE_INT_MM(int_rows_u16, uint16_t)
TS_DEFINE_INT_MM(int_rows_u32, uint32_t)
TS_DEFINE_INT_MM(int_rows_u64, uint64_t) /* through int64: the same bits modulo 2^64 */

typedef void (*int_rows_fn)(const mm_desc *d, const char *a, const char *b, char *c, int64_t r0,
                            int64_t r1);

static void matmul_int(int_rows_fn fn, const mm_desc *d, const char *a, const char *b, char *c) {
    const int64_t rows = d->bsz * d->m;
    if (rows == 0 || d->n == 0) return;
#ifdef TS_HAVE_OPENMP
    if (run_in_parallel((double)rows * (double)d->n * (double)d->k)) {
#pragma omp parallel
        {
            int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t chunk = (rows + nt - 1) / nt, r0 = t * chunk;
            int64_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
            if (r0 < r1) fn(d, a, b, c, r0, r1);
        }
        return;
    }
#endif
    fn(d, a, b, c, 0, rows);
}

void tsi_cpu_matmul(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                    const ts_kview *b) {
    (void)be, (void)index;
    mm_desc d = mm_desc_of(out, a, b);
    bool ok = true;
    switch (out->dtype) {
    case TS_F32:
        ok = matmul_float(false, &d, a->data, b->data, out->data);
        break;
    case TS_F64:
        ok = matmul_float(true, &d, a->data, b->data, out->data);
        break;
    case TS_F16:
        ok = matmul_half(false, &d, a->data, b->data, out->data, NULL, 0);
        break;
    case TS_BF16:
        ok = matmul_half(true, &d, a->data, b->data, out->data, NULL, 0);
        break;
    case TS_I64:
        matmul_int(int_rows_i64, &d, a->data, b->data, out->data);
        break;
    case TS_I32:
        matmul_int(int_rows_i32, &d, a->data, b->data, out->data);
        break;
    case TS_U8:
        matmul_int(int_rows_u8, &d, a->data, b->data, out->data);
        break;
    case TS_I8:
        matmul_int(int_rows_i8, &d, a->data, b->data, out->data);
        break;
    case TS_I16:
        matmul_int(int_rows_i16, &d, a->data, b->data, out->data);
        break;
    case TS_U16:
        matmul_int(int_rows_u16, &d, a->data, b->data, out->data);
        break;
    case TS_U32:
        matmul_int(int_rows_u32, &d, a->data, b->data, out->data);
        break;
    case TS_U64:
        matmul_int(int_rows_u64, &d, a->data, b->data, out->data);
        break;
    default: /* bool and others are rejected by the front end */
        break;
    }
    /* a slower loop without scratch would round differently: the same numbers or an error */
    if (!ok) tsi_kernel_oom("matmul", 0);
}

/* c[j] += bias[j] along a row of n (element strides sc and sb) */
#define ADD_ROW(NAME, T)                                                                           \
    static void NAME(T *c, int64_t sc, const T *bias, int64_t sb, int64_t n) {                     \
        if (sc == 1 && sb == 1)                                                                    \
            for (int64_t j = 0; j < n; j++) c[j] += bias[j];                                       \
        else                                                                                       \
            for (int64_t j = 0; j < n; j++) c[j * sc] += bias[j * sb];                             \
    }
ADD_ROW(add_row_f32, float)
ADD_ROW(add_row_f64, double)

/* out = a @ b + bias (backend.h): oneDNN's bias argument where the product goes to its matmul
 * primitive anyway (the bias added to the rounded product as it is stored), else the product and
 * then the bias added row by row: the same bits either way (tests/test_xformer_paths.c). f16 and
 * bf16 add the bias to the float32 sums and round once (matmul_half). */
void tsi_cpu_matmul_bias(const ts_backend *be, int index, const ts_kview *out, const ts_kview *a,
                         const ts_kview *b, const ts_kview *bias) {
    const mm_desc d = mm_desc_of(out, a, b);
    if (out->dtype == TS_F16 || out->dtype == TS_BF16) {
        if (!matmul_half(out->dtype == TS_BF16, &d, a->data, b->data, out->data, bias->data,
                         bias->strides[bias->ndim - 1]))
            tsi_kernel_oom("linear", 0);
        return;
    }
    if (out->dtype == TS_F32 && d.bsz == 1 && d.k > 0 &&
        gemv_one(&d, (const float *)a->data, (const float *)b->data, (float *)out->data,
                 (const float *)bias->data, bias->strides[bias->ndim - 1], true))
        return;
    if (out->dtype == TS_F32 && d.bsz == 1 && d.k > 0 && d.sc[2] == 1) {
        const double macs = (double)d.m * (double)d.n * (double)d.k;
        const bool ta = d.sa[2] != 1 && d.m > 1, tb = d.sb[2] != 1 && d.n > 1;
        if (bias->strides[bias->ndim - 1] == 1 && tsi_lib_sgemm_near_peak(macs) &&
            tsi_lib_sgemm_primitive(ta, tb, d.m, d.n, d.k) &&
            tsi_dnnl_matmul_strided_bias(TS_F32, 1, d.m, d.n, d.k, a->data, d.sa, b->data, d.sb,
                                         out->data, d.sc, bias->data))
            return;
    }
    tsi_cpu_matmul(be, index, out, a, b);
    const int64_t rows = d.bsz * d.m, esz = (int64_t)ts_dtype_size(out->dtype);
    TS_PARALLEL_FOR_IF(
        run_in_parallel((double)(rows * d.n)), for (int64_t r = 0; r < rows; r++) {
            char *c = out->data + ((r / d.m) * d.sc[0] + (r % d.m) * d.sc[1]) * esz;
            if (out->dtype == TS_F64)
                add_row_f64((double *)c, d.sc[2], (const double *)bias->data,
                            bias->strides[bias->ndim - 1], d.n);
            else
                add_row_f32((float *)c, d.sc[2], (const float *)bias->data,
                            bias->strides[bias->ndim - 1], d.n);
        });
}
