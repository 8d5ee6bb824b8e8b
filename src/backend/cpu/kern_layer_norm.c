/* kern_layer_norm.c — fused layer norm on the CPU (backend.h's ts_layer_norm_args), forward and
 * backward, f32 and f64, over contiguous rows.
 *
 * Forward, per row (OpenMP over rows): the mean, then the corrected two-pass variance, both summed
 * in double; y = (x - mean) * rstd * w + b in the tensors' dtype with mean and rstd rounded to it,
 * which is what backward reads back.
 * Backward, per row: pass A sums g = dy * w and g * xhat in double and adds the row's dy * xhat
 * and dy into the partial sums of dweight and dbias; pass B writes dx = rstd * (g - mean(g) -
 * xhat * mean(g * xhat)). The rows are cut into blocks of consecutive rows (norm_select.c's
 * tsi_norm_layer_blocks: a bounded number, as a function of the shape only); each block keeps its
 * own partial sums (in the workspace, in double) and the partial sums are added in block order at
 * the end, so dweight and dbias never depend on the number of threads, and the workspace is
 * O(cols), never O(rows * cols). Whether a pass runs on threads: tsi_norm_parallel.
 * Variants: AVX-512, AVX2 and portable vectors (kern_layer_norm_impl.h under a target pragma), for
 * f32 and f64, chosen by tsi_norm_variant(); they give the same bits (no FMA contraction). Which
 * dtypes and shapes the kernels take: tsi_norm_select_layer.
 * RMSNorm (a->rms): forward sums x^2 in double instead of the two moments' passes (mean 0), y = x
 * * rstd * w; backward is layer norm's with mean 0 and without the mean(g) term, which gives dx =
 * rstd * (g - xhat * mean(g * xhat)) = rstd * (g - x * rstd^2 * mean(g * x)) and dweight = the sum
 * of dy * x * rstd.
 * Fused residual add (a->residual, decision 0031): forward first writes the row of h = x +
 * residual (one addition in the dtype, ts_add's bits) and normalises that row as above, read back
 * from L1; backward is unchanged (the front end hands it h as x). */
#include "backend/cpu/kern_norm_common.h"

#define LN_COMBINE 256 /* columns per task when the partial sums are added */
#define LN_SUB     32  /* rows whose dweight / dbias terms are summed in the dtype */
#define LN_PI      16  /* columns of dweight, then of dbias, interleaved in the partial sums */

/* How backward cuts the rows: `blocks` runs of consecutive rows, balanced. With no dweight or
 * dbias wanted every row is a block of its own. */
typedef struct ln_plan {
    int64_t rows, blocks;
    int64_t ld; /* doubles of workspace per block */
} ln_plan;

static ln_plan ln_plan_for(const ts_layer_norm_args *a) {
    return (ln_plan){.rows = a->rows,
                     .blocks = tsi_norm_layer_blocks(a->rows, a->dweight.data || a->dbias.data),
                     .ld = 2 * ((a->cols + LN_PI - 1) / LN_PI * LN_PI)};
}

/* A block's partial sums interleave dweight's and dbias's LN_PI columns at a time (a whole
 * AVX-512 vector of floats): column j of dweight at ln_pidx(j), of dbias LN_PI further. Kept as
 * two arrays, the two would sit a multiple of 4 KiB apart for the common widths, and the false
 * store-to-load dependences of such addresses cost the loop half its speed. */
static inline int64_t ln_pidx(int64_t j) {
    return (j & ~(int64_t)(LN_PI - 1)) * 2 + (j & (LN_PI - 1));
}

/* Block blk's part of the workspace: ld doubles (its sums), then ld values of the dtype (es bytes
 * each: the current sub-block's sums) */
static inline double *ln_block_sums(const ln_plan *pl, double *ws, int64_t blk, size_t es) {
    return ws + blk * (pl->ld + pl->ld * (int64_t)es / 8);
}

static inline int64_t ln_block_start(const ln_plan *pl, int64_t blk) {
    return blk * pl->rows / pl->blocks;
}

#define NORM_IMPL "backend/cpu/kern_layer_norm_impl.h"
#include "backend/cpu/kern_norm_isa.h"

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
    return &variants[tsi_norm_variant()][dt == TS_F64];
}

static bool cpu_layer_norm_supports(const ts_backend *be, int index, const ts_layer_norm_args *a) {
    (void)index;
    /* the residual form (decision 0031): the cpu declines it, as it measured no faster than
     * ts_add and then the norm (0.91-1.02x); sim runs it, so CI tests the fused front end and
     * kernel CUDA uses, with the same bits */
    if (a->residual.data && be->type == TS_CPU) return false;
    return tsi_norm_select_layer(a) == TSI_NORM_PATH_ROWS;
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

bool tsi_cpu_layer_norm_isa(ts_cpu_isa isa, const ts_layer_norm_args *a, bool backward, void *ws) {
    if (!ln_isa_available(isa)) return false;
    const ln_variant *v = &variants[isa][a->x.dtype == TS_F64];
    if (backward)
        v->backward(a, (double *)ws);
    else
        v->forward(a);
    return true;
}

void tsi_cpu_layer_norm_install(ts_backend *be) {
    be->layer_norm_supports = cpu_layer_norm_supports;
    be->layer_norm_workspace = cpu_layer_norm_workspace;
    be->layer_norm_forward = cpu_layer_norm_forward;
    be->layer_norm_backward = cpu_layer_norm_backward;
}
