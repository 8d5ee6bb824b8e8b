/* norm_select.c — the CPU normalisations' choice of kernel and of threads (norm_select.h): the
 * table of thresholds, each row with the measurement behind it, and the functions that read it.
 * The figures come from bench/results/normalization.md, bench/results/resnet.md ("Batch norm in
 * training", "The batch-norm kernels alone") and bench/results/threads.md (hosts and load
 * described there); decision 0027 says why the choice is made here. */
#include "backend/cpu/norm_select.h"

#include "backend/cpu/kern_norm_common.h"

static const tsi_norm_limits limits = {
    /* One thread below 32768 elements: the library's grain for memory-bound kernels
     * (TS_CPU_GRAIN, PyTorch's too); a parallel region costs 0.4 us to enter even with a team of
     * one (bench/results/threads.md, hence TS_PARALLEL_FOR_IF). At the cut-off one thread takes
     * 0.95-1.21x the time of two over layer norm and both batch norms, at twice it 1.26-1.49x
     * (bench_norm_select, bench/results/normalization.md "The selector's rows", Zen 4 under
     * load 12: indicative), so the break-even sits about here; below it is not timed (the kernels
     * never split there). */
    .parallel_min_elems = 32768,
    /* Layer norm's backward with dweight / dbias: blocks of at least 32 rows, at most 64 blocks,
     * by the shape alone, so the workspace is O(64 cols) and the sums the same bits on any thread
     * count (bench/results/normalization.md, "Layer norm": its *Limit* is that under 64 rows the
     * backward runs on one thread). NOT MEASURED: the code's reasoning (a bounded workspace, and
     * blocks enough for any thread count the host has); moving either value changes the bits of
     * dweight and dbias. */
    .ln_block_min_rows = 32,
    .ln_max_blocks = 64,
    /* NCHW batch norm: a task takes consecutive channels enough for 512 contiguous elements of
     * each sample (4 x 4 channels would otherwise be read in 64-byte pieces 32 KiB apart), at most
     * 64, and there are at least 4 tasks where there are 4 channels. The kernel is measured
     * (bench/results/resnet.md, "Batch norm in training": forward + backward of [64, 64, 32, 32]
     * 1.05 + 1.42 ms against the composition's 3.54 + 8.70, [64, 256, 8, 8] 0.089 + 0.126 against
     * 0.47 + 1.11, two threads, Zen 5); the three values are NOT MEASURED (the code's reasoning). A
     * channel's sums never depend on its task: they change no bits. */
    .bn_group_min_elems = 512,
    .bn_max_group = TSI_NORM_BN_MAX_GROUP,
    .bn_min_tasks = 4,
    /* NHWC batch norm: blocks of rows of at least 32768 elements (the grain above), at most 32
     * blocks, so the workspace of 2 * c double sums a block stays small. NOT MEASURED (the code's
     * reasoning); the partition fixes the bits of the statistics and gradients. */
    .bn_nhwc_block_min_elems = 32768,
    .bn_nhwc_max_blocks = 32,
};

const tsi_norm_limits *tsi_norm_limits_get(void) { return &limits; }

/* Layer norm: the fused kernels for float32 and float64 against the composition's 15.6 ms, 1.40
 * (weight and bias) on [16, 256, 1024] forward + backward (bench/results/normalization.md, "Layer
 * norm", Zen 5). float16 / bfloat16 are declined: src/nn/norm.c then runs these kernels on float32
 * copies (decision 0007: float16 35.3-36.7 ms -> 10.0-10.6), and group_norm, which asks in the
 * input's own dtype, composes. RMSNorm (a->rms) takes the same row: float32 / float64, halves
 * through float32 copies (src/nn/rms_norm.c); the composition took 2.9-5.8x the time forward +
 * backward on [4096, 4096] and [8192, 768] float32 (bench/results/normalization.md, "RMSNorm",
 * Zen 4 under load 6-7: indicative; decision 0028). The residual form (a->residual, decision 0031)
 * takes the same row, float32 / float64 only (halves compose: ts_add, then the path above); it
 * measured 0.91-1.02x the time of ts_add + the norm on [8192, 768] float32, one thread
 * (bench/results/normalization.md, "Residual add + norm", Zen 4 under load 5: indicative). */
tsi_norm_path tsi_norm_select_layer(const ts_layer_norm_args *a) {
    const ts_dtype d = a->x.dtype;
    if ((d != TS_F32 && d != TS_F64) || a->rows < 1 || a->cols < 1) return TSI_NORM_PATH_COMPOSED;
    return TSI_NORM_PATH_ROWS;
}

/* Batch norm in training: the fused kernels for float32, float64 and, read through float chunks,
 * float16 / bfloat16 (docs/AMP.md, "Kernels"; bench/results/autocast.md, "Batch-norm on bf16
 * activations"), against the composition's several passes (the figures at bn_group_min_elems). At
 * least two values a channel (one has no variance: src/nn/norm.c refuses it before asking). A
 * channels_last tensor runs the NHWC kernels on the data as it lies: they take 0.84x the NCHW
 * kernels' time on [64, 64, 32, 32] float32 and up to 1.18x on [64, 512, 4, 4]
 * (bench/results/resnet.md, AVX-512, 2 threads), where the NCHW kernels would add a reorder of x,
 * y, dy and dx (each a read and a write of the tensor, beside the kernels' seven passes). */
tsi_norm_path tsi_norm_select_batch(const ts_batch_norm_args *a) {
    const ts_dtype d = a->x.dtype;
    if (d != TS_F32 && d != TS_F64 && d != TS_F16 && d != TS_BF16) return TSI_NORM_PATH_COMPOSED;
    if (a->n < 1 || a->c < 1 || a->hw < 1 || a->n * a->hw < 2) return TSI_NORM_PATH_COMPOSED;
    /* hw == 1 ([n, c], BatchNorm1d on a matrix: LeViT's and the MLPs' norms over tokens): the
     * contiguous tensor is already [n, 1, c] channels-last, and the NCHW kernels' segments would be
     * one element long (a call and a 16-lane sum per element): 1568 x 384 float32, forward +
     * backward on one thread, 45 ms by the NCHW kernels (PyTorch 2.15: 4.9), NHWC ones 0.7
     * (bench/results/normalization.md, "BatchNorm1d on a matrix", Zen 4 under load 5: indicative)
     */
    return a->channels_last || a->hw == 1 ? TSI_NORM_PATH_NHWC : TSI_NORM_PATH_CHANNELS;
}

/* The best variant the CPU has, capped by TS_CPU_ISA (ts_cpu_isa_get); all give the same bits.
 * One thread, forward + backward (bench_norm_select, bench/results/normalization.md "The
 * selector's rows", Zen 4): AVX2 1.7-3.0x faster than the portable vectors and AVX-512 1.1-1.8x
 * faster than AVX2 over layer norm and both batch norms; [16, 256, 1024] layer norm 1.40 ms
 * against AVX2's 1.77 on Zen 5. The portable variant is the only one outside x86. */
int tsi_norm_variant(void) {
#ifdef LN_X86
    return (int)ts_cpu_isa_get();
#else
    return 0;
#endif
}

bool tsi_norm_parallel(int64_t elems, int64_t tasks) {
    return tasks > 1 && elems >= limits.parallel_min_elems;
}

int64_t tsi_norm_layer_blocks(int64_t rows, bool sums) {
    if (!sums) return rows;
    int64_t b = rows / limits.ln_block_min_rows;
    if (b > limits.ln_max_blocks) b = limits.ln_max_blocks;
    return b < 1 ? 1 : b;
}

int64_t tsi_norm_batch_group(int64_t c, int64_t hw) {
    int64_t g = (limits.bn_group_min_elems + hw - 1) / hw;
    if (g > limits.bn_max_group) g = limits.bn_max_group;
    const int64_t per_task = (c + limits.bn_min_tasks - 1) / limits.bn_min_tasks;
    if (g > per_task) g = per_task;
    return g < 1 ? 1 : g;
}

void tsi_norm_batch_nhwc_blocks(int64_t rows, int64_t c, int64_t *rb, int64_t *nb) {
    int64_t n = (rows * c + limits.bn_nhwc_block_min_elems - 1) / limits.bn_nhwc_block_min_elems;
    if (n > limits.bn_nhwc_max_blocks) n = limits.bn_nhwc_max_blocks;
    if (n < 1) n = 1;
    /* rows a block rounded up, then the blocks that takes: never more than the rows */
    *rb = (rows + n - 1) / n;
    *nb = (rows + *rb - 1) / *rb;
}
