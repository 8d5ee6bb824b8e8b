/* kern_sdpa.c — fused scaled dot-product attention on the CPU, in the flash-attention style.
 *
 * Forward, per (batch b, block of BLK queries): the block's scaled queries are packed once; for
 * each block of BLK keys the scores S = Qs K^T (BLK x BLK) are computed, masked, and folded into
 * the running row maxima m, sums l and outputs O with the online softmax
 * (O <- O e^(m_old - m) + e^(S - m) V); at the end out = O / l and lse = m + log l. The L x S
 * matrix never exists; memory per thread is a few BLK x head-size blocks.
 * Backward recomputes the weights from lse, per (batch, group of key blocks): for each key block
 * and each query block that sees it, P^T = e^(K Qs^T - lse), dV += P^T dO, dP^T = V dO^T,
 * dS^T = P^T (dP^T - D) with D = rowsum(dO * out), dK += dS^T Qs and dQ += dS K. A batch's dq
 * sums over its key blocks: with few batches the blocks are dealt round-robin into chunks (so a
 * causal mask's uneven work evens out) whose partial dq are added in chunk order, so results
 * never depend on the number of threads.
 * Variants: AVX-512, AVX2+FMA and portable, each for f32 and f64 (the include of
 * kern_sdpa_impl.h under a target pragma), chosen by ts_cpu_isa_get(); bf16 and f16 tensors (what
 * autocast gives attention) run the f32 kernels on operands widened as they are packed, with the
 * log-sum-exp in f32 and each output and gradient element rounded once. sdpa_select.c decides
 * the path (on a host with AMX, bf16 without dropout and of few enough scores a batch goes to the
 * tiles instead: kern_sdpa_amx.c), the thread count and the backward's chunks. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_sdpa_amx.h"
#include "backend/cpu/sdpa_select.h"
#include "backend/kernel_math.h"
#include "backend/philox.h"

/* Sizes of one call, derived from the views alone (the workspace query and the kernels agree). */
typedef struct sdpa_plan {
    int nb;                          /* batch dims */
    int64_t bshape[TS_MAX_DIMS];     /* their sizes */
    int64_t N, L, S, E, Ev, Ep, Evp; /* batches; padded head sizes */
    int64_t blk, nq, nk, Lp, chunks; /* blocks of queries and keys; dq chunks per batch */
} sdpa_plan;

static int64_t sdpa_batch_offset(const ts_kview *v, const sdpa_plan *pl, int64_t n) {
    return tsi_sdpa_batch_offset(v, pl->bshape, pl->nb, n);
}

static double sdpa_dropout_scale(double p) { return p >= 1 ? 0 : 1 / (1 - p); }

static int sdpa_thread_num(void) {
#ifdef TS_HAVE_OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* keep[r * ld + c] for r < nr, c < nc: weight (n, q0 + r, c0 + c) survives dropout (the Philox
 * layout of backend.h: four neighbouring positions share one evaluation). */
static void sdpa_keep_tile(const ts_sdpa_args *a, const sdpa_plan *pl, int64_t n, int64_t q0,
                           int64_t nr, int64_t c0, int64_t nc, uint8_t *keep, int64_t ld) {
    const double p_keep = 1 - a->dropout_p;
    for (int64_t r = 0; r < nr; r++) {
        const uint64_t pos0 = a->offset + (uint64_t)(((n * pl->L) + q0 + r) * pl->S + c0);
        uint8_t *kp = keep + r * ld;
        uint64_t blk = pos0 >> 2;
        uint32_t w[4];
        ts_philox_block(a->seed, blk, 0, w);
        for (int64_t c = 0; c < nc; c++) {
            const uint64_t pos = pos0 + (uint64_t)c;
            if (pos >> 2 != blk) ts_philox_block(a->seed, blk = pos >> 2, 0, w);
            kp[c] = (double)ts_philox_u24(w[pos & 3u]) < p_keep;
        }
    }
}

/* ------------------------------------------------------------------ the variants */
#define SDPA_CAT2(a, b) a##_##b
#define SDPA_CAT(a, b)  SDPA_CAT2(a, b)

/* vec_math_impl.h's exponential, its multiply-adds left to the contraction above (fused where the
 * variant's target has FMA, not in the portable one, which then need not call fmaf per lane):
 * attention's bits differ between ISAs anyway; for the three widths below */
#define TSV_FMA(a, b, c) ((a) * (b) + (c))

typedef float ts_sdpa_v4f __attribute__((vector_size(16)));
typedef double ts_sdpa_v2d __attribute__((vector_size(16)));
typedef int32_t ts_sdpa_v4i __attribute__((vector_size(16)));

#define TSV_F       ts_sdpa_v4f
#define TSV_I       ts_sdpa_v4i
#define TSV_NAME(x) x##_generic
#include "backend/cpu/vec_math_impl.h"
#undef TSV_F
#undef TSV_I
#undef TSV_NAME

#define SDPA_T      float
#define SDPA_VT     ts_sdpa_v4f
#define SDPA_VL     4
#define SDPA_MR     4
#define SDPA_NV     2
#define SDPA_BLK    32
#define SDPA_EXP(x) tsv_exp_generic(x)
#define SDPA_ISA    generic
#include "backend/cpu/kern_sdpa_float.h"
#undef SDPA_ISA
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_EXP
#define SDPA_T       double
#define SDPA_VT      ts_sdpa_v2d
#define SDPA_VL      2
#define SDPA_NAME(x) SDPA_CAT(x, generic_f64)
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_MR
#undef SDPA_NV
#undef SDPA_BLK
#undef SDPA_NAME

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define SDPA_X86 1

#pragma GCC push_options
#pragma GCC target("avx2,fma")
typedef float ts_sdpa_v8f __attribute__((vector_size(32)));
typedef double ts_sdpa_v4d __attribute__((vector_size(32)));
typedef int32_t ts_sdpa_v8i __attribute__((vector_size(32)));
#define TSV_F       ts_sdpa_v8f
#define TSV_I       ts_sdpa_v8i
#define TSV_NAME(x) x##_avx2
#include "backend/cpu/vec_math_impl.h"
#undef TSV_F
#undef TSV_I
#undef TSV_NAME
#define SDPA_T      float
#define SDPA_VT     ts_sdpa_v8f
#define SDPA_VL     8
#define SDPA_MR     6
#define SDPA_NV     2
#define SDPA_BLK    48
#define SDPA_EXP(x) tsv_exp_avx2(x)
#define SDPA_ISA    avx2
#include "backend/cpu/kern_sdpa_float.h"
#undef SDPA_ISA
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_EXP
#define SDPA_T       double
#define SDPA_VT      ts_sdpa_v4d
#define SDPA_VL      4
#define SDPA_NAME(x) SDPA_CAT(x, avx2_f64)
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_MR
#undef SDPA_NV
#undef SDPA_BLK
#undef SDPA_NAME
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
typedef float ts_sdpa_v16f __attribute__((vector_size(64)));
typedef double ts_sdpa_v8d __attribute__((vector_size(64)));
typedef int32_t ts_sdpa_v16i __attribute__((vector_size(64)));
#define TSV_F       ts_sdpa_v16f
#define TSV_I       ts_sdpa_v16i
#define TSV_NAME(x) x##_avx512
#include "backend/cpu/vec_math_impl.h"
#undef TSV_F
#undef TSV_I
#undef TSV_NAME
#define SDPA_T      float
#define SDPA_VT     ts_sdpa_v16f
#define SDPA_VL     16
#define SDPA_MR     4
#define SDPA_NV     4
#define SDPA_BLK    64
#define SDPA_EXP(x) tsv_exp_avx512(x)
#define SDPA_ISA    avx512
#include "backend/cpu/kern_sdpa_float.h"
#undef SDPA_ISA
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_EXP
#define SDPA_T       double
#define SDPA_VT      ts_sdpa_v8d
#define SDPA_VL      8
#define SDPA_NAME(x) SDPA_CAT(x, avx512_f64)
#include "backend/cpu/kern_sdpa_impl.h"
#undef SDPA_T
#undef SDPA_VT
#undef SDPA_VL
#undef SDPA_MR
#undef SDPA_NV
#undef SDPA_BLK
#undef SDPA_NAME
#pragma GCC pop_options
#endif

typedef struct sdpa_variant {
    int blk, w; /* block rows; tile width (head sizes are padded to it) */
    size_t (*thread_bytes)(const sdpa_plan *pl, bool backward);
    void (*forward)(const sdpa_plan *pl, const ts_sdpa_args *a, char *ws);
    void (*backward)(const sdpa_plan *pl, const ts_sdpa_args *a, char *ws);
} sdpa_variant;

#define SDPA_VARIANT(blk, w, sfx)                                                                  \
    { blk, w, thread_bytes_##sfx, forward_##sfx, backward_##sfx }
/* per ISA: f32, f64, then bf16 and f16 tensors computed in float (the f32 kernels' arithmetic on
 * the widened elements, each result rounded once) */
static const sdpa_variant variants[][4] = {
    {SDPA_VARIANT(32, 8, generic_f32), SDPA_VARIANT(32, 4, generic_f64),
     SDPA_VARIANT(32, 8, generic_bf16), SDPA_VARIANT(32, 8, generic_f16)},
#ifdef SDPA_X86
    {SDPA_VARIANT(48, 16, avx2_f32), SDPA_VARIANT(48, 8, avx2_f64), SDPA_VARIANT(48, 16, avx2_bf16),
     SDPA_VARIANT(48, 16, avx2_f16)},
    {SDPA_VARIANT(64, 64, avx512_f32), SDPA_VARIANT(64, 32, avx512_f64),
     SDPA_VARIANT(64, 64, avx512_bf16), SDPA_VARIANT(64, 64, avx512_f16)},
#endif
};

static const sdpa_variant *variant_for(ts_dtype dt) {
    int isa = (int)ts_cpu_isa_get();
#ifndef SDPA_X86
    isa = 0;
#endif
    return &variants[isa][dt == TS_F64 ? 1 : dt == TS_BF16 ? 2 : dt == TS_F16 ? 3 : 0];
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* chunks: the backward's chunks of a batch's key blocks (tsi_sdpa_select's) */
static sdpa_plan make_plan(const ts_sdpa_args *a, const sdpa_variant *var, int64_t chunks) {
    sdpa_plan pl = {.nb = a->q.ndim - 2, .N = 1};
    for (int d = 0; d < pl.nb; d++) pl.N *= pl.bshape[d] = a->q.shape[d];
    pl.L = a->q.shape[pl.nb], pl.E = a->q.shape[pl.nb + 1];
    pl.S = a->k.shape[pl.nb], pl.Ev = a->v.shape[pl.nb + 1];
    pl.Ep = round_up(pl.E, var->w), pl.Evp = round_up(pl.Ev, var->w);
    pl.blk = var->blk;
    pl.nq = (pl.L + pl.blk - 1) / pl.blk, pl.nk = (pl.S + pl.blk - 1) / pl.blk;
    pl.Lp = pl.nq * pl.blk;
    pl.chunks = chunks;
    return pl;
}

static bool cpu_sdpa_supports(const ts_backend *be, int index, const ts_sdpa_args *a) {
    (void)be, (void)index;
    const ts_dtype dt = a->q.dtype;
    if (dt != TS_F32 && dt != TS_F64 && dt != TS_BF16 && dt != TS_F16) return false;
    if (a->has_mask && a->mask.dtype != TS_BOOL && a->mask.dtype != a->q.dtype) return false;
    return true;
}

/* The path, threads and chunking of the call (sdpa_select.c decides; a function of the shapes and
 * the host, so the workspace query and the kernels agree) */
static tsi_sdpa_choice choose(const ts_sdpa_args *a, const sdpa_variant *var, bool backward) {
    return tsi_sdpa_select(a, backward, var->blk, tsi_sdpa_host_now());
}

static size_t cpu_sdpa_workspace(const ts_backend *be, int index, ts_sdpa_args *a, bool backward) {
    (void)be, (void)index;
    const sdpa_variant *var = variant_for(a->q.dtype);
    const tsi_sdpa_choice c = choose(a, var, backward);
    a->threads = c.threads;
    if (c.path == TSI_SDPA_PATH_AMX) return tsi_sdpa_amx_workspace(a, c.threads, backward);
    const sdpa_plan pl = make_plan(a, var, c.chunks);
    size_t bytes = var->thread_bytes(&pl, backward) * (size_t)c.threads;
    if (backward && pl.chunks > 1)
        bytes += (size_t)(pl.N * pl.chunks * pl.Lp * pl.Ep) * (a->q.dtype == TS_F64 ? 8 : 4);
    return bytes;
}

static void cpu_sdpa_forward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be, (void)index;
    const sdpa_variant *var = variant_for(a->q.dtype);
    const tsi_sdpa_choice c = choose(a, var, false);
    if (c.path == TSI_SDPA_PATH_AMX) {
        tsi_sdpa_amx_forward(a, ws);
        return;
    }
    const sdpa_plan pl = make_plan(a, var, c.chunks);
    var->forward(&pl, a, ws);
}

static void cpu_sdpa_backward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be, (void)index;
    const sdpa_variant *var = variant_for(a->q.dtype);
    const tsi_sdpa_choice c = choose(a, var, true);
    if (c.path == TSI_SDPA_PATH_AMX) {
        tsi_sdpa_amx_backward(a, ws);
        return;
    }
    const sdpa_plan pl = make_plan(a, var, c.chunks);
    var->backward(&pl, a, ws);
}

void tsi_cpu_sdpa_install(ts_backend *be) {
    be->sdpa_supports = cpu_sdpa_supports;
    be->sdpa_workspace = cpu_sdpa_workspace;
    be->sdpa_forward = cpu_sdpa_forward;
    be->sdpa_backward = cpu_sdpa_backward;
}
