/* kern_reduce_cols.c — the CPU reduction path for "reduce the outer dims, keep a contiguous inner
 * dim" (e.g. a column sum of a row-major matrix). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kern_reduce.h"
#include "backend/omp_if.h"
#include "core/clones.h"

/* A[c] += rows[0][c] + rows[1][c] + ... in double, added in that order (the same sums on every
 * ISA): the column path's sums of f32 and f64. The AVX2 variant keeps 16 columns in registers
 * across the rows (no load and store of A per row); the baseline is the plain loop. */
#define ACC_ROWS_GENERIC(T)                                                                        \
    static void acc_rows_##T##_generic(double *A, const T *const *rows, int64_t nr, int64_t c0,    \
                                       int64_t n) {                                                \
        for (int64_t r = 0; r < nr; r++)                                                           \
            for (int64_t c = c0; c < n; c++) A[c] += (double)rows[r][c];                           \
    }
ACC_ROWS_GENERIC(float)
ACC_ROWS_GENERIC(double)
#undef ACC_ROWS_GENERIC

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

_Static_assert(TS_R_COUNT == 11, "a ts_reduce_op was added or removed: give it its "
                                 "column-reduction fold here; then update the count");
#define ACC_AVX2 __attribute__((target(TS_ISA_TARGET_AVX2)))
ACC_AVX2 static inline __m256d acc_ld_float(const float *x) {
    return _mm256_cvtps_pd(_mm_loadu_ps(x));
}
ACC_AVX2 static inline __m256d acc_ld_double(const double *x) { return _mm256_loadu_pd(x); }
#define ACC_ROWS_AVX2(T)                                                                           \
    ACC_AVX2 static int64_t acc_rows_##T##_avx2(double *A, const T *const *rows, int64_t nr,       \
                                                int64_t n) {                                       \
        int64_t c = 0;                                                                             \
        for (; c + 16 <= n; c += 16) {                                                             \
            __m256d s0 = _mm256_loadu_pd(A + c), s1 = _mm256_loadu_pd(A + c + 4),                  \
                    s2 = _mm256_loadu_pd(A + c + 8), s3 = _mm256_loadu_pd(A + c + 12);             \
            for (int64_t r = 0; r < nr; r++) {                                                     \
                const T *x = rows[r] + c;                                                          \
                s0 = _mm256_add_pd(s0, acc_ld_##T(x));                                             \
                s1 = _mm256_add_pd(s1, acc_ld_##T(x + 4));                                         \
                s2 = _mm256_add_pd(s2, acc_ld_##T(x + 8));                                         \
                s3 = _mm256_add_pd(s3, acc_ld_##T(x + 12));                                        \
            }                                                                                      \
            _mm256_storeu_pd(A + c, s0), _mm256_storeu_pd(A + c + 4, s1);                          \
            _mm256_storeu_pd(A + c + 8, s2), _mm256_storeu_pd(A + c + 12, s3);                     \
        }                                                                                          \
        return c;                                                                                  \
    }
ACC_ROWS_AVX2(float)
ACC_ROWS_AVX2(double)
#undef ACC_ROWS_AVX2
#define ACC_ROWS_FAST(T, A, rows, nr, n)                                                           \
    (ts_cpu_isa_get() >= TS_ISA_AVX2 ? acc_rows_##T##_avx2(A, rows, nr, n) : 0)
#else
#define ACC_ROWS_FAST(T, A, rows, nr, n) 0
#endif

static void acc_rows_f32(double *A, const float *const *rows, int64_t nr, int64_t n) {
    acc_rows_float_generic(A, rows, nr, ACC_ROWS_FAST(float, A, rows, nr, n), n);
}
static void acc_rows_f64(double *A, const double *const *rows, int64_t nr, int64_t n) {
    acc_rows_double_generic(A, rows, nr, ACC_ROWS_FAST(double, A, rows, nr, n), n);
}

/* rows per batch of acc_rows (their pointers on the stack) */
#define ACC_ROWS 64

TS_CPU_BODY void accsq_f32_body(double *A, const float *row, int64_t n) {
    for (int64_t c = 0; c < n; c++) A[c] += (double)row[c] * (double)row[c];
}
TS_CPU_VARIANTS(accsq_f32, (double *A, const float *row, int64_t n), (A, row, n))

/* "Reduce the outer dims, keep a contiguous inner dim": each reduced position contributes one
 * contiguous row of tn kept columns, accumulated into per-column arrays (vectorisable), instead of
 * a strided walk per output. Columns of base .. base+tn-1 (outputs o0 ..), reduced positions
 * [p0, p1). The partial states go to fs / is when given, else the results straight to out. */
static bool col_partial(const ts_cpu_rplan *P, const char *base, int64_t tn, int64_t p0, int64_t p1,
                        ts_cpu_fstate *fs, ts_cpu_istate *is, int64_t o0) {
    ts_reduce_op op = P->op;
    ts_cpu_odo o;
    /* on the heap: a tile of 4096 columns needs 128 KiB, too much for a worker thread's stack */
    char *mem = malloc((size_t)tn * 4 * sizeof(double));
    if (!mem) return false; /* reported by the caller, outside the parallel loop */
    if (P->ints) {
        int64_t *V = (int64_t *)mem, *I = V + tn, *x = I + tn;
        ts_cpu_istate init = tsi_cpu_red_is_init(op);
        for (int64_t c = 0; c < tn; c++) V[c] = init.v, I[c] = -1;
        tsi_cpu_red_odo_init(&o, &P->red, p0);
        for (int64_t p = p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
            tsi_cpu_red_conv_run_i64(x, base + (size_t)o.off * P->es, P->dt, 1, tn);
            switch (op) {
            case TS_R_SUM:
                for (int64_t c = 0; c < tn; c++) V[c] = (int64_t)((uint64_t)V[c] + (uint64_t)x[c]);
                break;
            case TS_R_PROD:
                for (int64_t c = 0; c < tn; c++) V[c] = (int64_t)((uint64_t)V[c] * (uint64_t)x[c]);
                break;
            case TS_R_MAX:
                for (int64_t c = 0; c < tn; c++) V[c] = x[c] > V[c] ? x[c] : V[c];
                break;
            case TS_R_MIN:
                for (int64_t c = 0; c < tn; c++) V[c] = x[c] < V[c] ? x[c] : V[c];
                break;
            default: /* arg */
                for (int64_t c = 0; c < tn; c++)
                    if (I[c] < 0 || (op == TS_R_ARGMAX ? x[c] > V[c] : x[c] < V[c]))
                        V[c] = x[c], I[c] = p;
                break;
            }
        }
        if (is) {
            for (int64_t c = 0; c < tn; c++) is[c] = (ts_cpu_istate){V[c], I[c]};
        } else { /* one store of the tile's results (a call per output cost more than the sum) */
            tsi_cpu_red_store_run_i(P->out, o0, ts_cpu_red_is_arg(op) ? I : V, tn);
        }
        free(mem);
        return true;
    }
    double *A = (double *)mem, *B = A + tn, *x = B + tn;
    int64_t *I = (int64_t *)(x + tn);
    ts_cpu_fstate init = tsi_cpu_red_fs_init(op);
    for (int64_t c = 0; c < tn; c++) A[c] = init.a, B[c] = 0.0, I[c] = -1;
    tsi_cpu_red_odo_init(&o, &P->red, p0);
    /* sums of f32/f64 read the input directly: a converted copy would double the bytes that must
     * stay in L1 next to the accumulators */
    bool direct = (op == TS_R_SUM || op == TS_R_MEAN || op == TS_R_VAR || op == TS_R_STD) &&
                  (P->dt == TS_F32 || P->dt == TS_F64);
    bool direct_sq = op == TS_R_NORM2 && P->dt == TS_F32;
    if (direct) { /* the rows' addresses a batch at a time, then their sums column-block-wise */
        const char *rows[ACC_ROWS];
        for (int64_t p = p0; p < p1;) {
            int64_t nr = 0;
            for (; nr < ACC_ROWS && p < p1; nr++, p++, ts_cpu_odo_next(&o, &P->red))
                rows[nr] = base + (size_t)o.off * P->es;
            if (P->dt == TS_F32)
                acc_rows_f32(A, (const float *const *)rows, nr, tn);
            else
                acc_rows_f64(A, (const double *const *)rows, nr, tn);
        }
    }
    for (int64_t p = direct ? p1 : p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
        const char *row = base + (size_t)o.off * P->es;
        if (direct_sq) {
            accsq_f32(A, (const float *)row, tn);
            continue;
        }
        tsi_cpu_red_conv_run_f64(x, row, P->dt, 1, tn);
        switch (op) {
        case TS_R_SUM:
        case TS_R_MEAN:
        case TS_R_VAR:
        case TS_R_STD:
            for (int64_t c = 0; c < tn; c++) A[c] += x[c];
            break;
        case TS_R_PROD:
            for (int64_t c = 0; c < tn; c++) A[c] *= x[c];
            break;
        case TS_R_NORM2:
            for (int64_t c = 0; c < tn; c++) A[c] += x[c] * x[c];
            break;
        case TS_R_MAX:
        case TS_R_LOGSUMEXP:
            for (int64_t c = 0; c < tn; c++) A[c] = (x[c] > A[c] || x[c] != x[c]) ? x[c] : A[c];
            break;
        case TS_R_MIN:
            for (int64_t c = 0; c < tn; c++) A[c] = (x[c] < A[c] || x[c] != x[c]) ? x[c] : A[c];
            break;
        default: { /* arg: a NaN best is final; a NaN candidate wins */
            bool mx = op == TS_R_ARGMAX;
            for (int64_t c = 0; c < tn; c++)
                if (I[c] < 0 ||
                    (A[c] == A[c] && (x[c] != x[c] || (mx ? x[c] > A[c] : x[c] < A[c]))))
                    A[c] = x[c], I[c] = p;
            break;
        }
        }
    }
    int64_t cnt = p1 - p0;
    if (op == TS_R_VAR || op == TS_R_STD || op == TS_R_LOGSUMEXP) { /* second pass */
        bool var = op != TS_R_LOGSUMEXP;
        if (var)
            for (int64_t c = 0; c < tn; c++) A[c] /= (double)cnt;
        tsi_cpu_red_odo_init(&o, &P->red, p0);
        for (int64_t p = p0; p < p1; p++, ts_cpu_odo_next(&o, &P->red)) {
            tsi_cpu_red_conv_run_f64(x, base + (size_t)o.off * P->es, P->dt, 1, tn);
            if (var)
                for (int64_t c = 0; c < tn; c++) B[c] += (x[c] - A[c]) * (x[c] - A[c]);
            else
                for (int64_t c = 0; c < tn; c++) B[c] += exp(x[c] - A[c]);
        }
    }
    if (!fs && op == TS_R_SUM) { /* the results as they are (tsi_cpu_red_fs_finish's) */
        tsi_cpu_red_store_run_d(P->out, o0, A, tn);
        free(mem);
        return true;
    }
    for (int64_t c = 0; c < tn; c++) {
        ts_cpu_fstate st = op == TS_R_LOGSUMEXP ? tsi_cpu_red_lse_make(A[c], B[c])
                                                : (ts_cpu_fstate){A[c], B[c], cnt, I[c]};
        if (fs)
            fs[c] = st;
        else
            x[c] = tsi_cpu_red_fs_finish(op, &st, P->n, P->corr);
    }
    if (!fs) tsi_cpu_red_store_run_d(P->out, o0, x, tn); /* one store for the tile */
    free(mem);
    return true;
}

void tsi_cpu_red_cols(const ts_cpu_rplan *P) {
    int64_t C = P->lead.shape[P->lead.nd - 1];
    ts_cpu_rdims rest = P->lead;
    rest.nd--;
    int64_t nq = P->outputs / C, ntiles = (C + RED_TILE - 1) / RED_TILE, items = nq * ntiles;
    int64_t tw = C < RED_TILE ? C : RED_TILE; /* partial states kept per work item */
    int64_t nb = 1, bs = P->n;
    if (items < RED_FEW_ITEMS && P->outputs * P->n >= 2 * RED_PAR_MIN) {
        nb = (P->n + RED_COL_BLOCK - 1) / RED_COL_BLOCK;
        if (nb > RED_COL_BLOCKS) nb = RED_COL_BLOCKS;
        bs = (P->n + nb - 1) / nb;
        nb = (P->n + bs - 1) / bs;
    }
    bool par = P->outputs * P->n >= RED_PAR_MIN;
    ts_cpu_fstate *fs = NULL;
    ts_cpu_istate *is = NULL;
    if (nb > 1) {
        if (P->ints)
            is = malloc((size_t)(items * nb * tw) * sizeof *is);
        else
            fs = malloc((size_t)(items * nb * tw) * sizeof *fs);
        if (!fs && !is) {
            tsi_kernel_oom("reduce", (size_t)(items * nb * tw) * sizeof *fs);
            return;
        }
    }
    atomic_bool failed = false;
    TS_PARALLEL_FOR_DYNAMIC_IF(
        par, for (int64_t w = 0; w < items * nb; w++) {
            int64_t it = w / nb, b = w % nb, q = it / ntiles, c0 = (it % ntiles) * RED_TILE;
            int64_t tn = C - c0 < RED_TILE ? C - c0 : RED_TILE;
            int64_t p0 = b * bs, p1 = p0 + bs < P->n ? p0 + bs : P->n;
            const char *base = P->base + (size_t)(tsi_cpu_red_lin_offset(&rest, q) + c0) * P->es;
            if (!col_partial(P, base, tn, p0, p1, fs ? fs + w * tw : NULL, is ? is + w * tw : NULL,
                             q * C + c0))
                atomic_store_explicit(&failed, true, memory_order_relaxed);
        });
    if (atomic_load(&failed)) {
        tsi_kernel_oom("reduce", (size_t)tw * 4 * sizeof(double));
        nb = 1; /* nothing to combine */
    }
    if (nb == 1) {
        free(fs);
        free(is);
        return;
    }
    for (int64_t it = 0; it < items; it++) {
        int64_t q = it / ntiles, c0 = (it % ntiles) * RED_TILE;
        int64_t tn = C - c0 < RED_TILE ? C - c0 : RED_TILE;
        for (int64_t c = 0; c < tn; c++) {
            int64_t first = it * nb * tw + c;
            for (int64_t b = 1; b < nb; b++) {
                if (fs)
                    tsi_cpu_red_fs_combine(P->op, &fs[first], &fs[first + b * tw]);
                else
                    tsi_cpu_red_is_combine(P->op, &is[first], &is[first + b * tw]);
            }
            if (fs)
                tsi_cpu_red_fs_store(P->op, P->out, q * C + c0 + c, &fs[first], P->n, P->corr);
            else
                tsi_cpu_red_is_store(P->op, P->out, q * C + c0 + c, &is[first]);
        }
    }
    free(fs);
    free(is);
}
