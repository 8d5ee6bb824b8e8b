/* kern_conv_drivers.h — between kern_conv.c (geometry, float32 / float64 drivers, entry points)
 * and kern_conv_half.c (f16 / bf16, and bf16 with a float32 output): the float32 drivers the half
 * paths run their widened copies through, and the half paths the entry points dispatch to. */
#ifndef TS_KERN_CONV_DRIVERS_H
#define TS_KERN_CONV_DRIVERS_H

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/kern_conv.h"

/* elements per chunk of the f16 / bf16 <-> float32 conversions (F16C where the CPU has it:
 * vec_kernels.h), and of the float32 buffer the activation of a half output goes through */
#define TSI_CONV_CHUNK 4096

static inline int64_t tsi_conv_numel4(const ts_kview *v) {
    return v->shape[0] * v->shape[1] * v->shape[2] * v->shape[3];
}

/* ------------------------------------------------------------------ kern_conv.c */
/* OpenMP's thread count for this call: 1 inside a parallel region. */
int tsi_conv_max_threads(void);
/* g's activation over the whole output of any float dtype (half: on the rounded values). */
void tsi_conv_act_output(const ts_cgeom *g, const ts_kview *out);
/* The activation a bf16 oneDNN convolution applies in its kernel, to the float32 sums before the
 * one rounding: ReLU, where that gives what ReLU on the rounded output gives (rounding is
 * monotone and keeps the sign, so both are round(y) for y > 0 and +0 otherwise; a NaN output
 * becomes 0, as in the float32 convolutions: conv_dnnl.c). Every other activation goes on the
 * rounded output (tsi_conv_act_output), where clip bounds or HardSigmoid's line need not round to
 * the same bits. */
static inline ts_conv_act tsi_conv_act_in_bf16_kernel(ts_conv_act act) {
    return act == TS_CONV_ACT_RELU ? act : TS_CONV_ACT_NONE;
}
/* The input gradient as a forward convolution over gy (unit strides only): false when not. */
bool tsi_conv_transposed_geom(const ts_cgeom *g, ts_cgeom *t);
/* The float32 drivers (oneDNN, direct or im2col): false when scratch memory is missing. */
bool tsi_conv_forward_f32(const ts_cgeom *g, const float *x, const float *w, const float *b,
                          float *y);
bool tsi_conv_backward_data_f32(const ts_cgeom *g, const float *gy, const float *w, float *gx);
bool tsi_conv_backward_weight_f32(const ts_cgeom *g, const float *gy, const float *x, float *gw);

/* ------------------------------------------------------------------ kern_conv_half.c */
/* n contiguous f16 / bf16 elements (dt) widened into dst, and n floats rounded into dst; on every
 * thread for large n. */
void tsi_conv_widen(float *dst, const char *src, ts_dtype dt, int64_t n);
void tsi_conv_round(char *dst, ts_dtype dt, const float *src, int64_t n);
/* out (f16 / bf16) = act(conv(x, w) + bias), operands of out's dtype; wid: the weight's identity.
 */
void tsi_conv2d_half(const ts_cgeom *g, const ts_kview *out, const ts_kview *x, const ts_kview *w,
                     const ts_kview *bias, const tsi_conv_weight_id *wid);
/* gx from gout and w, all f16 or all bf16. */
void tsi_conv2d_backward_data_half(const ts_cgeom *g, const ts_kview *gx, const ts_kview *gout,
                                   const ts_kview *w);
/* gw from gout and x, all f16 or all bf16. */
void tsi_conv2d_backward_weight_half(const ts_cgeom *g, const ts_kview *gw, const ts_kview *gout,
                                     const ts_kview *x);

#endif /* TS_KERN_CONV_DRIVERS_H */
