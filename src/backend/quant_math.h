/* quant_math.h — the per-element quantization formulas (PyTorch's x86 kernels, as
 * include/tessera/quant.h states them), shared by the CPU loops (cpu/kern_quant.c) and the CUDA
 * kernels (cuda/cuda_quant.cu), so that the two backends cannot drift apart numerically.
 *
 * On the GPU every product, sum and quotient goes through the _rn intrinsics, as optim_math.h's:
 * nvcc would otherwise fuse x * inv + zp into an FMA (one rounding instead of two). */
#ifndef TS_QUANT_MATH_H
#define TS_QUANT_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/kernel_math.h"

#ifdef __CUDA_ARCH__
#define TS_QM_FMUL(a, b) __fmul_rn((a), (b))
#define TS_QM_FADD(a, b) __fadd_rn((a), (b))
#define TS_QM_FSUB(a, b) __fsub_rn((a), (b))
#define TS_QM_FDIV(a, b) __fdiv_rn((a), (b))
#define TS_QM_DMUL(a, b) __dmul_rn((a), (b))
#define TS_QM_DADD(a, b) __dadd_rn((a), (b))
#define TS_QM_DSUB(a, b) __dsub_rn((a), (b))
#define TS_QM_RINT(v)    rintf(v)
#else
#define TS_QM_FMUL(a, b) ((a) * (b))
#define TS_QM_FADD(a, b) ((a) + (b))
#define TS_QM_FSUB(a, b) ((a) - (b))
#define TS_QM_FDIV(a, b) ((a) / (b))
#define TS_QM_DMUL(a, b) ((a) * (b))
#define TS_QM_DADD(a, b) ((a) + (b))
#define TS_QM_DSUB(a, b) ((a) - (b))
#define TS_QM_RINT(v)    nearbyintf(v)
#endif

/* the multiplier of a scale: 1.0f / (float)scale, in float32 */
static inline TS_HD float ts_qm_inv(double scale) { return TS_QM_FDIV(1.0f, (float)scale); }

/* PyTorch's qvalue before its clamp: zero_point + nearbyint(x * inv) in float32 (an integer,
 * +-inf or NaN) */
static inline TS_HD float ts_qm_qvalue(float x, float inv, float zp) {
    return TS_QM_FADD(zp, TS_QM_RINT(TS_QM_FMUL(x, inv)));
}

/* the quantized value, clamped in double; NaN gives nan_to (qmax for 8 and 4 bits, qmin for
 * qint32, as PyTorch's x86 kernels) */
static inline TS_HD int64_t ts_qm_quantize(float x, float inv, float zp, double qmin, double qmax,
                                           int64_t nan_to) {
    const float v = ts_qm_qvalue(x, inv, zp);
    if (v != v) return nan_to;
    const double d = v;
    return (int64_t)(d < qmin ? qmin : d > qmax ? qmax : d);
}

/* the same for 8-bit outputs, branch-free so that it vectorizes: the clamp in float32 is the same
 * as in double (v an integer or +-inf, the ends 8-bit integers); the caller casts to its byte */
static inline TS_HD float ts_qm_quantize8(float x, float inv, float zp, float lo, float hi,
                                          float nan_to) {
    const float v = ts_qm_qvalue(x, inv, zp);
    return v != v ? nan_to : v < lo ? lo : v > hi ? hi : v;
}

/* PyTorch's fake_quantize_*_cachemask CPU kernels, one element: qval = zp + nearbyint(x * inv)
 * (the sum in float32), y = (clamp(qval, qmin, qmax) - zp) * sc in double, rounded to float32 once,
 * *m = qmin <= qval <= qmax. Where the float32 sum is outside int64 (+-inf, huge x) PyTorch's cast
 * is undefined: here it saturates (y the range's end, mask 0); NaN gives y NaN (0x7fc00000) and
 * mask 0 (PyTorch's x86 gives (qmin - zp) * scale). */
static inline TS_HD float ts_qm_fake(float x, float sc, float inv, int64_t zp, double lo, double hi,
                                     uint8_t *m) {
    const float v = ts_qm_qvalue(x, inv, (float)zp);
    if (v != v) {
        *m = 0;
        return ts_u32_as_f32(0x7fc00000u);
    }
    const double d = v; /* an integer (or +-inf): exact in double */
    *m = (uint8_t)(d >= lo && d <= hi);
    const double c = d < lo ? lo : d > hi ? hi : d;
    return (float)TS_QM_DMUL(TS_QM_DSUB(c, (double)zp), (double)sc);
}

/* the float32 requantization of an int32 sum, less the output zero point: ONNX Runtime's
 * QLinearConv (fb 0) and PyTorch's x86 engine (fbgemm: fb its float bias in units of the sum),
 * clamp(nearbyintf(((float)acc + fb) * m)) to [lo, hi] (the output range less the zero point),
 * each step one float32 rounding (adding 0.0f changes no value). Clamped before the rounding, as
 * the vector kernels' max / min do (the bounds are integers: the same value), NaN to lo. */
static inline TS_HD float ts_qm_requant_f32(int32_t acc, float fb, float m, float lo, float hi) {
    const float f = TS_QM_FMUL(TS_QM_FADD((float)acc, fb), m);
    return TS_QM_RINT(!(f >= lo) ? lo : f > hi ? hi : f);
}

/* dequantize one value: per tensor fbgemm's float scale times the int32 difference; per channel
 * PyTorch's dequantize_val, the float difference times the double scale */
static inline TS_HD float ts_qm_dequantize(int64_t q, int64_t zp, double scale, bool per_tensor) {
    if (per_tensor) return TS_QM_FMUL((float)scale, (float)(q - zp));
    return (float)TS_QM_DMUL((double)TS_QM_FSUB((float)q, (float)zp), scale);
}

#endif /* TS_QUANT_MATH_H */
