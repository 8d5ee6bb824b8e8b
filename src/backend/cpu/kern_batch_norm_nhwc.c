/* kern_batch_norm_nhwc.c — fused batch norm in training mode on channels_last tensors on the CPU
 * (ts_batch_norm_args with channels_last: x, y, dy, dx in [n, hw, c] order), forward and
 * backward, f32, f64, f16 and bf16, with kern_batch_norm.c's arithmetic: the shifted-data moments
 * in double (k the channel's mean over its first 16 rows, mean = k + sum(d) / m, var = (sum(d^2) -
 * sum(d)^2 / m) / m), y = (x - mean) * scale + bias with scale = invstd * weight rounded once;
 * backward's sums of dy and dy * (x - mean) (products in the dtype) in double, and dx = (dy - c1 -
 * (x - mean) * c2) * scale.
 * The channels are innermost, so the vectors run across channels (kern_batch_norm_nhwc_impl.h)
 * and the n * hw rows are cut into a fixed partition of blocks (norm_select.c's
 * tsi_norm_batch_nhwc_blocks: it depends on the shape alone), each block's per-channel sums in
 * double kept apart and added in block order: the same bits with any number of threads. The
 * workspace (the blocks' sums) comes from the host scratch cache; when it cannot be had the kernel
 * reports it (tsi_kernel_oom) and writes nothing. Whether a pass runs on threads:
 * tsi_norm_parallel.
 * Variants: AVX-512, AVX2 and portable vectors (kern_norm_isa.h), the same bits (no FMA
 * contraction, each channel's operations in the same order in every variant). f16 / bf16 x, y, dy,
 * dx: tiles converted to float (the float variants), parameters and statistics float32, each
 * output rounded once, as the NCHW kernels. */
#include "backend/cpu/kern_batch_norm_nhwc.h"

#include "backend/cpu/host_scratch.h"
#include "backend/cpu/kern_norm_common.h"
#include "backend/cpu/vec_kernels.h"

/* A tile: BN_TILE_ROWS rows of up to BN_TILE_CH channels, more rows where that is under
 * BN_TILE_MIN elements. Small (8 rows of 64 channels: 2 KiB of float32) because each group of 16
 * channels reads the tile's rows at the row stride: in short tiles the lines the other groups read
 * next are still in L1 ([64, 64, 32, 32] float32 took about 1.3x as long with 32-row tiles). */
#define BN_TILE_ROWS 8
#define BN_TILE_CH   256
#define BN_TILE_MIN  512
#define BN_TILE      (BN_TILE_ROWS * BN_TILE_CH) /* a tile's elements at most (the half buffers) */

/* The partition of the rows into blocks and the workspace: part, each block's sums of the two
 * passes (2 * c doubles a block), k the shifts, t three per-channel vectors of the dtype. */
typedef struct bn_plan {
    int64_t rows, rb, nb; /* n * hw rows; rb rows a block (the last may have fewer); nb blocks */
    double *part, *k;
    void *t;
    ts_block *blk;
} bn_plan;

static bool bn_plan_begin(const ts_batch_norm_args *a, bn_plan *p) {
    const int64_t rows = a->n * a->hw, c = a->c;
    *p = (bn_plan){.rows = rows};
    tsi_norm_batch_nhwc_blocks(rows, c, &p->rb, &p->nb);
    const size_t bytes = sizeof(double) * (size_t)c * (size_t)(2 * p->nb + 4);
    p->part = tsi_host_scratch_get(bytes, &p->blk);
    if (!p->part) {
        tsi_kernel_oom("batch_norm", bytes);
        return false;
    }
    p->k = p->part + 2 * c * p->nb;
    p->t = p->k + c;
    return true;
}

static void bn_plan_end(bn_plan *p) { tsi_host_scratch_put(p->blk); }

static int64_t bn_block_end(const bn_plan *p, int64_t b) {
    return (b + 1) * p->rb < p->rows ? (b + 1) * p->rb : p->rows;
}

static bool bn_plan_parallel(const ts_batch_norm_args *a, const bn_plan *p) {
    return tsi_norm_parallel(p->rows * a->c, p->nb);
}

#define NORM_IMPL "backend/cpu/kern_batch_norm_nhwc_impl.h"
#include "backend/cpu/kern_norm_isa.h"

typedef struct bn_nhwc_variant {
    void (*forward)(const ts_batch_norm_args *a);
    void (*backward)(const ts_batch_norm_args *a);
} bn_nhwc_variant;

#define BN_VARIANT(sfx)                                                                            \
    { nhwc_forward_##sfx, nhwc_backward_##sfx }
static const bn_nhwc_variant variants[][2] = {
    {BN_VARIANT(generic_f32), BN_VARIANT(generic_f64)},
#ifdef LN_X86
    {BN_VARIANT(avx2_f32), BN_VARIANT(avx2_f64)},
    {BN_VARIANT(avx512_f32), BN_VARIANT(avx512_f64)},
#endif
};

void tsi_cpu_batch_norm_nhwc_forward(int isa, const ts_batch_norm_args *a) {
    variants[isa][a->x.dtype == TS_F64].forward(a);
}

void tsi_cpu_batch_norm_nhwc_backward(int isa, const ts_batch_norm_args *a) {
    variants[isa][a->x.dtype == TS_F64].backward(a);
}
