/* matmul_select.c — the CPU matrix products' cut-offs, each row with the measurement behind it,
 * and the choice of path for one float32 / float64 product (matmul_select.h). The figures come
 * from bench/results/cpu-matmul.md (the providers, gemm_small, batches of small products, the
 * plain loop; "Path sweep": bench/bench_mm_paths.c, each path against the others on the same
 * shapes, one Zen 5 core, CPU time), bench/results/autocast.md (AMX) and
 * bench/results/threads.md; decision 0001 says who multiplies, 0044 what was retired. */
#include "backend/cpu/matmul_select.h"

static const tsi_mm_limits limits = {
    /* The plain loop up to 4096 multiply-adds (a linear regression's are 1000): a library's call,
     * packing and threading cost several times the arithmetic there; a linear regression step
     * went from 4.5 to 3.3 us (bench/results/cpu-matmul.md, "GEMM and convolution providers").
     * Path sweep, float32 and float64 alike: it wins the tiniest (2x2x2 1.3x, 4x4x4 1.2x) and one
     * column or row times a short matrix (10x1x100 1.8x, 100x1x10 NT 1.5-2.1x), ties at 8^3, and
     * loses at the top of its range to OpenBLAS (16^3 0.44x, 4x64x16 0.32x, 8x8x64 NT 0.56x): a
     * lower cut-off for those shapes is issue 76's next step, not measured in a model yet. */
    .direct_max_macs = 4096,
    /* Many small matrices: one GEMM per thread beats threading each GEMM under 4e6 multiply-adds
     * a product. NOT MEASURED here (the code's reasoning: one big GEMM keeps the library's own
     * threads). */
    .batch_per_thread_max_macs = 4e6,
    /* gemm_small's own threads above 2^15 multiply-adds: the library's grain for a parallel
     * region (bench/results/threads.md). */
    .parallel_min_macs = 32768,
    /* oneDNN's batched primitive (`bench_bmm sweep`, Zen 4, one thread, one by one / batched:
     * 32 x 128x128x64 Q K^T 1.72x, 32 x 64^3 1.18x, 32 x 16^3 6.3x, 8 x 256^3 1.03x). Not under
     * 2^17 in all (the call's 2-3 us: 2 x 16x16x64 0.58x, 2 x 32^3 0.73x), nor for products of
     * (direct_max, 2^15) multiply-adds, which OpenBLAS's small-matrix path runs one by one (8 x
     * 24^3 0.71x, 16 x 7x33x65 0.68x, 32 x 24^3 0.94x); products of one row or column go to
     * gemv.c (256 x 1x256x64 0.42x, 256 x 64x1x64 0.71x) (bench/results/cpu-matmul.md, "Batches
     * of small products"). */
    .batch_prim_min_macs = 131072,
    .batch_prim_tiny_macs = 32768,
    /* gemm_provider.c: oneDNN's call costs ~0.3 us more than OpenBLAS's, so under 2^15
     * multiply-adds a product stays with the BLAS; from 2^20 oneDNN's matmul primitive takes a
     * product from its sgemm (below, the primitive's per-call set-up is a visible share); from
     * 2^25 it takes gemm_small's products too (measured when gemm_small had TN weight gradients:
     * the MLP's 1024 x 1024 x 256 went to the primitive, its GEMMs 6.3 ms against 7.2). */
    .lib_tiny_macs = 32768,
    .prim_min_macs = 1048576,
    .near_peak_macs = 33554432,
    /* Path sweep (oneDNN the provider): OpenBLAS under 2^15 1.5-3.4x faster than oneDNN's sgemm
     * (8^3 .. 17x16x16; 32x32x16 0.87x); sgemm over OpenBLAS 1.4-2.0x from 32^3; the primitive
     * from 2^20 ties sgemm (0.89-1.09x; 1024 x 10 x 1024: NN 0.68x, TN 1.22x) and keeps the
     * thread-independent sums (brgemm never splits k); under 2^20 it loses (64^3 0.73-0.95x). */
    /* OpenBLAS the provider (AVX2 kernels): a dimension under 32 (a 10-class output layer):
     * OpenBLAS's Haswell kernels 33-66 GFLOP/s on two threads, oneDNN's sgemm 69-110. A^T B
     * goes to oneDNN's primitive only over a short reduction into wide rows (1024 x 1024 x 256
     * 166-180 / 91-168 GFLOP/s, 4096 x 512 x 256 171 / 151); a long reduction or 256-wide rows
     * run at half OpenBLAS's speed there (1024 x 256 x 4096 75 / 151, 4096 x 256 x 256 79 / 136;
     * two Zen 3 cores, bench/results/cpu-matmul.md). */
    .thin = 32,
    .tn_prim_max_k = 256,
    .tn_prim_min_n = 512,
    /* gemm_small: the blocks (4 x 6 with AVX-512) want 16 rows and columns; NT for the batches of
     * a linear layer's forward (m <= 128) over k >= 64, where a BLAS spends a third of the time
     * packing and zeroing (bench/results/cpu-matmul.md, "Small batches"). Path sweep: 1.5x the
     * library at 16x16x64 and 16x64x64, 1.14-1.22x at 32x128x256, a tie at 64x256x512, and
     * behind it at m = 128 (128x128x64 0.57-0.61x, 128x512x256 0.83x; AVX2 0.78x, 0.96x): a
     * lower small_nt_max_m is issue 76's next step. Its TN kernels (weight gradients) were
     * retired: no shape preferred them (decision 0044). */
    .small_min_mn = 16,
    .small_nt_max_m = 128,
    .small_nt_min_k = 64,
    /* gemv.c, path sweep: 2.6-5.6x the library on one row or column of up to 240 x 64 and on
     * GPT-2's 768 <-> 3072, 1.03-1.21x on 576 -> 1024 and 1024 -> 1000, 8x on 1024 x 1 x 1024;
     * 3-12x the plain loop. Threads from 2^14 multiply-adds, a 64 KB weight (the
     * squeeze-excitation's 240 x 64 and larger), about 2 us on one Zen 4 core against about 1 us
     * to wake the second thread (MobileNetV3-Small at batch 1 ran these on one thread while the
     * other waited). */
    .gemv_parallel_min_macs = 16384,
    /* AMX tiles from 2^31 multiply-adds (not swept: the sweep's host has no AMX): measured on an
     * AMX host against oneDNN 2.6.3's AMX kernel (bench/bench_amx_gemm.c,
     * bench/results/autocast.md), 1.1-1.8x faster there in every layout, as fast or slower below
     * (small operands, where packing costs more than it saves). */
    .amx_min_macs = 2147483648.0,
};

const tsi_mm_limits *tsi_mm_limits_get(void) { return &limits; }

/* benchmarks' override (tsi_mm_select_force): -1 the table's choice */
static _Atomic int forced = -1;

void tsi_mm_select_force(int path) {
    forced = path == TSI_MM_DIRECT || path == TSI_MM_LIB ? path : -1;
}

bool tsi_mm_small_nt(int64_t m, int64_t n, int64_t k, const int64_t sa[2], const int64_t sb[2],
                     const int64_t sc[2]) {
    return m >= limits.small_min_mn && n >= limits.small_min_mn && sc[1] == 1 && sc[0] >= n &&
           sa[1] == 1 && sb[0] == 1 && sa[0] >= k && sb[1] >= k && m <= limits.small_nt_max_m &&
           k >= limits.small_nt_min_k;
}

tsi_mm_path tsi_mm_select(bool dbl, int64_t m, int64_t n, int64_t k, const int64_t sa[2],
                          const int64_t sb[2], const int64_t sc[2], bool near_peak) {
    const double macs = (double)m * (double)n * (double)k;
    const int force = forced;
    if (force >= 0) return (tsi_mm_path)force;
    if (!dbl && macs > limits.direct_max_macs && (m == 1 || n == 1)) {
        /* A's rows and B's columns along k (any layout when k is 1) */
        const bool a_rows = sa[1] == 1 || k == 1, b_cols = sb[0] == 1 || k == 1;
        if (a_rows && b_cols) return TSI_MM_GEMV;
    }
    if (!dbl && !near_peak && tsi_mm_small_nt(m, n, k, sa, sb, sc)) return TSI_MM_SMALL;
    /* A^T B (A's columns along m) of at least small_min_mn rows and columns, a weight gradient:
     * the library even within the plain loop's size, where the loop reads A across its rows
     * (path sweep: 16 x 16 x 16 0.15x float32, 0.25x float64); the retired TN kernels took these
     * products before */
    const bool tn =
        sa[0] == 1 && sa[1] != 1 && m >= limits.small_min_mn && n >= limits.small_min_mn;
    return macs <= limits.direct_max_macs && !tn ? TSI_MM_DIRECT : TSI_MM_LIB;
}
