/* kern_layer_norm.c — fused layer norm on the CPU (backend.h's ts_layer_norm_args), forward and
 * backward, f32 and f64, over contiguous rows.
 *
 * Forward, per row (OpenMP over rows): the mean, then the corrected two-pass variance, both summed
 * in double; y = (x - mean) * rstd * w + b in the tensors' dtype with mean and rstd rounded to it,
 * which is what backward reads back.
 * Backward, per row: pass A sums g = dy * w and g * xhat in double and adds the row's dy * xhat
 * and dy into the partial sums of dweight and dbias; pass B writes dx = rstd * (g - mean(g) -
 * xhat * mean(g * xhat)). The rows are cut into at most LN_MAX_BLOCKS blocks of consecutive rows,
 * as a function of the shape only; each block keeps its own partial sums (in the workspace, in
 * double) and the partial sums are added in block order at the end, so dweight and dbias never
 * depend on the number of threads, and the workspace is O(cols), never O(rows * cols).
 * Variants: AVX-512, AVX2 and portable vectors (kern_layer_norm_impl.h under a target pragma), for
 * f32 and f64, chosen by ts_cpu_isa_get(); they give the same bits (no FMA contraction). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#ifdef TS_HAVE_OPENMP
#define LN_PRAGMA(x) _Pragma(x)
#else
#define LN_PRAGMA(x)
#endif

#define LN_PAR_MIN    32768 /* fewer elements than this: one thread */
#define LN_MAX_BLOCKS 64    /* blocks of rows with partial sums of dweight and dbias */
#define LN_MIN_ROWS   32    /* rows per block at least (the workspace stays small) */
#define LN_COMBINE    256   /* columns per task when the partial sums are added */
#define LN_SUB        32    /* rows whose dweight / dbias terms are summed in the dtype */

/* How backward cuts the rows: `blocks` runs of consecutive rows, balanced. With no dweight or
 * dbias wanted every row is a block of its own. */
typedef struct ln_plan {
    int64_t rows, blocks;
    int64_t ld; /* doubles of workspace per block */
} ln_plan;

static ln_plan ln_plan_for(const ts_layer_norm_args *a) {
    ln_plan pl = {.rows = a->rows, .blocks = a->rows, .ld = 2 * ((a->cols + 7) / 8 * 8)};
    if (a->dweight.data || a->dbias.data) {
        pl.blocks = a->rows / LN_MIN_ROWS;
        if (pl.blocks > LN_MAX_BLOCKS) pl.blocks = LN_MAX_BLOCKS;
        if (pl.blocks < 1) pl.blocks = 1;
    }
    return pl;
}

/* A block's partial sums interleave dweight's and dbias's eight columns at a time: column j of
 * dweight at ln_pidx(j), of dbias 8 further. Kept as two arrays, the two would sit a multiple of
 * 4 KiB apart for the common widths, and the false store-to-load dependences of such addresses
 * cost the loop half its speed. */
static inline int64_t ln_pidx(int64_t j) { return (j & ~(int64_t)7) * 2 + (j & 7); }

/* Block blk's part of the workspace: ld doubles (its sums), then ld values of the dtype (es bytes
 * each: the current sub-block's sums) */
static inline double *ln_block_sums(const ln_plan *pl, double *ws, int64_t blk, size_t es) {
    return ws + blk * (pl->ld + pl->ld * (int64_t)es / 8);
}

static inline int64_t ln_block_start(const ln_plan *pl, int64_t blk) {
    return blk * pl->rows / pl->blocks;
}

static inline bool ln_parallel(int64_t rows, int64_t cols) {
    return rows > 1 && rows * cols >= LN_PAR_MIN;
}

/* 16 lanes added in one fixed tree */
static inline double ln_sum16(double *l) {
    for (int w = 8; w > 0; w /= 2)
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return l[0];
}

#define LN_CAT2(a, b) a##_##b
#define LN_CAT(a, b)  LN_CAT2(a, b)

/* ------------------------------------------------------------------ the variants */
/* each include of kern_layer_norm_impl.h undefines its LN_ parameters again */
typedef float ln_v4f __attribute__((vector_size(16)));
typedef float ln_v2f __attribute__((vector_size(8)));
typedef double ln_v2d __attribute__((vector_size(16)));

#define LN_T       float
#define LN_V       ln_v4f
#define LN_VL      4
#define LN_VD      ln_v2d
#define LN_WD      2
#define LN_VH      ln_v2f
#define LN_NAME(x) LN_CAT(x, generic_f32)
#if defined(__GNUC__) && defined(__x86_64__) /* SSE2 */
static inline ln_v2d ln_to_d_sse2(ln_v2f v) {
    __m128 f = _mm_setzero_ps();
    memcpy(&f, &v, sizeof v);
    return (ln_v2d)_mm_cvtps_pd(f);
}
#define LN_TO_D(v) ln_to_d_sse2(v)
#endif
#include "backend/cpu/kern_layer_norm_impl.h"
#define LN_T       double
#define LN_V       ln_v2d
#define LN_VL      2
#define LN_VD      ln_v2d
#define LN_WD      2
#define LN_VH      ln_v2d
#define LN_NAME(x) LN_CAT(x, generic_f64)
#include "backend/cpu/kern_layer_norm_impl.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define LN_X86 1

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX2)
typedef float ln_v8f __attribute__((vector_size(32)));
typedef double ln_v4d __attribute__((vector_size(32)));
#define LN_T       float
#define LN_V       ln_v8f
#define LN_VL      8
#define LN_VD      ln_v4d
#define LN_WD      4
#define LN_VH      ln_v4f
#define LN_NAME(x) LN_CAT(x, avx2_f32)
#ifndef __clang__ /* clang ignores GCC target pragmas: its intrinsics would not inline */
#define LN_TO_D(v) ((ln_v4d)_mm256_cvtps_pd((__m128)(v)))
#endif
#include "backend/cpu/kern_layer_norm_impl.h"
#define LN_T       double
#define LN_V       ln_v4d
#define LN_VL      4
#define LN_VD      ln_v4d
#define LN_WD      4
#define LN_VH      ln_v4d
#define LN_NAME(x) LN_CAT(x, avx2_f64)
#include "backend/cpu/kern_layer_norm_impl.h"
#pragma GCC pop_options

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX512)
typedef float ln_v16f __attribute__((vector_size(64)));
typedef double ln_v8d __attribute__((vector_size(64)));
#define LN_T       float
#define LN_V       ln_v16f
#define LN_VL      16
#define LN_VD      ln_v8d
#define LN_WD      8
#define LN_VH      ln_v8f
#define LN_NAME(x) LN_CAT(x, avx512_f32)
#ifndef __clang__ /* clang ignores GCC target pragmas: its intrinsics would not inline */
#define LN_TO_D(v) ((ln_v8d)_mm512_cvtps_pd((__m256)(v)))
#endif
#include "backend/cpu/kern_layer_norm_impl.h"
#define LN_T       double
#define LN_V       ln_v8d
#define LN_VL      8
#define LN_VD      ln_v8d
#define LN_WD      8
#define LN_VH      ln_v8d
#define LN_NAME(x) LN_CAT(x, avx512_f64)
#include "backend/cpu/kern_layer_norm_impl.h"
#pragma GCC pop_options
#endif

typedef struct ln_variant {
    void (*forward)(const ts_layer_norm_args *a);
    void (*backward)(const ts_layer_norm_args *a, double *ws);
} ln_variant;

#define LN_VARIANT(sfx)                                                                            \
    { forward_##sfx, backward_##sfx }
static const ln_variant variants[][2] = {
    {LN_VARIANT(generic_f32), LN_VARIANT(generic_f64)},
#ifdef LN_X86
    {LN_VARIANT(avx2_f32), LN_VARIANT(avx2_f64)},
    {LN_VARIANT(avx512_f32), LN_VARIANT(avx512_f64)},
#endif
};

static const ln_variant *variant_for(ts_dtype dt) {
    int isa = (int)ts_cpu_isa_get();
#ifndef LN_X86
    isa = 0;
#endif
    return &variants[isa][dt == TS_F64];
}

static bool cpu_layer_norm_supports(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be, (void)index;
    return (a->x.dtype == TS_F32 || a->x.dtype == TS_F64) && a->rows >= 1 && a->cols >= 1;
}

static size_t cpu_layer_norm_workspace(const ts_backend *be, int index,
                                       const ts_layer_norm_args *a) {
    (void)be, (void)index;
    if (!a->dweight.data && !a->dbias.data) return 0;
    const ln_plan pl = ln_plan_for(a);
    const size_t es = a->x.dtype == TS_F64 ? 8 : 4;
    return (size_t)(pl.blocks * pl.ld) * (sizeof(double) + es);
}

static void cpu_layer_norm_forward(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)be, (void)index;
    variant_for(a->x.dtype)->forward(a);
}

static void cpu_layer_norm_backward(const ts_backend *be, int index, const ts_layer_norm_args *a,
                                    void *ws) {
    (void)be, (void)index;
    variant_for(a->x.dtype)->backward(a, (double *)ws);
}

bool ts_cpu_layer_norm_isa(ts_cpu_isa isa, const ts_layer_norm_args *a, bool backward, void *ws) {
#ifndef LN_X86
    if (isa != TS_ISA_GENERIC) return false;
#endif
    if ((int)isa < 0 || isa >= TS_ISA_COUNT || isa > ts_cpu_isa_host()) return false;
    const ln_variant *v = &variants[isa][a->x.dtype == TS_F64];
    if (backward)
        v->backward(a, (double *)ws);
    else
        v->forward(a);
    return true;
}

void ts_cpu_layer_norm_install(ts_backend *be) {
    be->layer_norm_supports = cpu_layer_norm_supports;
    be->layer_norm_workspace = cpu_layer_norm_workspace;
    be->layer_norm_forward = cpu_layer_norm_forward;
    be->layer_norm_backward = cpu_layer_norm_backward;
}
