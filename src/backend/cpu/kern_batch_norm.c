/* kern_batch_norm.c — fused batch norm in training mode on the CPU (backend.h's
 * ts_batch_norm_args), forward and backward, f32, f64, f16 and bf16, over contiguous [n, c, hw]
 * tensors.
 *
 * Forward, per channel: one pass sums d = x - k and d^2 in double (16 logical lanes), k the mean of
 * the channel's first segments (at least 16 elements where there are): mean = k + sum(d) / m and
 * var = (sum(d^2) - sum(d)^2 / m) / m, m = n * hw, the shifted-data method, whose cancellation is
 * that of the distance between k and the mean in units of the standard deviation, in double. A
 * second pass writes y = (x - mean) * scale + bias, scale = invstd * weight rounded to the dtype
 * once, with mean and invstd rounded to the dtype, which is what backward reads back.
 * Backward, per channel: pass A sums dy and dy * (x - mean) in double lanes (the products in the
 * dtype), giving dbias and dweight; pass B writes dx = (dy - sum(dy) / m - (x - mean) * invstd^2
 * sum(dy (x - mean)) / m) * invstd * weight.
 * Tasks (OpenMP) are groups of consecutive channels (norm_select.c's tsi_norm_batch_group), so
 * that narrow channels (4 x 4 images) still read memory in long stretches; a channel's sums never
 * depend on its group or the thread count, and nothing needs a workspace. A lone channel runs on
 * one thread.
 * Variants: AVX-512, AVX2 and portable vectors (kern_norm_isa.h), for f32 and f64, chosen by
 * tsi_norm_variant(); they give the same bits (no FMA contraction).
 * f16 / bf16 (PyTorch's CPU batch norm on half input, autocast's): x, y, dy and dx in the half
 * dtype, the parameters, their gradients and the statistics float32; the float variants read the
 * segments through float chunks (kern_batch_norm_impl.h), so the result is the float kernel's
 * on the widened input, rounded once to the half dtype, with half the memory traffic.
 * channels_last arguments ([n, hw, c]) go to kern_batch_norm_nhwc.c's kernels, same arithmetic
 * (tsi_norm_select_batch decides both that and which dtypes and shapes the kernels take). */
#include "backend/cpu/kern_batch_norm_nhwc.h"
#include "backend/cpu/kern_norm_common.h"
#include "backend/omp_if.h"

#include "backend/cpu/vec_kernels.h"

#define BN_MAX_GROUP TSI_NORM_BN_MAX_GROUP /* channels of one task at most */
/* elements of an f16 / bf16 segment converted to float at a time (a multiple of 16) */
#define BN_HALF_CHUNK 512

/* Channels per task (norm_select.c) */
static int64_t bn_group(const ts_batch_norm_args *a) { return tsi_norm_batch_group(a->c, a->hw); }

static bool bn_parallel(const ts_batch_norm_args *a, int64_t groups) {
    return tsi_norm_parallel(a->n * a->c * a->hw, groups);
}

/* Samples whose segments give the shift: 16 elements or more, where there are */
static int64_t bn_shift_samples(int64_t n, int64_t hw) {
    const int64_t s = (16 + hw - 1) / hw;
    return s < n ? s : n;
}

#define NORM_IMPL "backend/cpu/kern_batch_norm_impl.h"
#include "backend/cpu/kern_norm_isa.h"

typedef struct bn_variant {
    void (*forward)(const ts_batch_norm_args *a);
    void (*backward)(const ts_batch_norm_args *a);
} bn_variant;

#define BN_VARIANT(sfx)                                                                            \
    { bn_forward_##sfx, bn_backward_##sfx }
static const bn_variant variants[][2] = {
    {BN_VARIANT(generic_f32), BN_VARIANT(generic_f64)},
#ifdef LN_X86
    {BN_VARIANT(avx2_f32), BN_VARIANT(avx2_f64)},
    {BN_VARIANT(avx512_f32), BN_VARIANT(avx512_f64)},
#endif
};

static bool cpu_batch_norm_supports(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be, (void)index;
    return tsi_norm_select_batch(a) != TSI_NORM_PATH_COMPOSED;
}

static void cpu_batch_norm_forward(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be, (void)index;
    if (tsi_norm_select_batch(a) == TSI_NORM_PATH_NHWC) {
        tsi_cpu_batch_norm_nhwc_forward(tsi_norm_variant(), a);
        return;
    }
    variants[tsi_norm_variant()][a->x.dtype == TS_F64].forward(a);
}

static void cpu_batch_norm_backward(const ts_backend *be, int index, const ts_batch_norm_args *a) {
    (void)be, (void)index;
    if (tsi_norm_select_batch(a) == TSI_NORM_PATH_NHWC) {
        tsi_cpu_batch_norm_nhwc_backward(tsi_norm_variant(), a);
        return;
    }
    variants[tsi_norm_variant()][a->x.dtype == TS_F64].backward(a);
}

bool tsi_cpu_batch_norm_isa(ts_cpu_isa isa, const ts_batch_norm_args *a, bool backward) {
    if (!ln_isa_available(isa)) return false;
    if (tsi_norm_select_batch(a) == TSI_NORM_PATH_NHWC) {
        if (backward)
            tsi_cpu_batch_norm_nhwc_backward((int)isa, a);
        else
            tsi_cpu_batch_norm_nhwc_forward((int)isa, a);
        return true;
    }
    const bn_variant *v = &variants[isa][a->x.dtype == TS_F64];
    if (backward)
        v->backward(a);
    else
        v->forward(a);
    return true;
}

void tsi_cpu_batch_norm_install(ts_backend *be) {
    be->batch_norm_supports = cpu_batch_norm_supports;
    be->batch_norm_forward = cpu_batch_norm_forward;
    be->batch_norm_backward = cpu_batch_norm_backward;
}
