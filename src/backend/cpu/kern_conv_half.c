/* kern_conv_half.c — f16 / bf16 convolutions on the CPU: bf16 natively through oneDNN where the
 * CPU multiplies bf16, otherwise through float32 copies run by kern_conv.c's drivers. */
#include <stdlib.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/conv_select.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/omp_if.h"

typedef ts_cgeom cgeom;

/* ------------------------------------------------------------------ conversions */
/* The conversions run on every thread for large tensors: serial, they held back f16/bf16
 * convolutions (autocast's) on more than one core. */
#define CONVERT_PARALLEL(n) ((n) >= 32768 && tsi_conv_max_threads() > 1)

/* chunks of the conversion, F16C where the CPU has it (vec_kernels.h) */
#define CONVERT_CHUNK TSI_CONV_CHUNK

/* f: n floats; h: n halves of dtype dt; widen: h -> f, else f -> h (rounded) */
static void convert(float *f, char *h, ts_dtype dt, int64_t n, bool widen) {
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    const int64_t chunks = (n + CONVERT_CHUNK - 1) / CONVERT_CHUNK;
    TS_PARALLEL_FOR_IF(
        CONVERT_PARALLEL(n), for (int64_t c = 0; c < chunks; c++) {
            const int64_t i = c * CONVERT_CHUNK, m = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
            if (widen)
                ts_vec_load_f32(vk, f + i, h + 2 * i, dt, 2, m);
            else
                ts_vec_store_f32(vk, h + 2 * i, dt, 2, f + i, m);
        });
}

void tsi_conv_widen(float *dst, const char *src, ts_dtype dt, int64_t n) {
    convert(dst, (char *)src, dt, n, true);
}

void tsi_conv_round(char *dst, ts_dtype dt, const float *src, int64_t n) {
    convert((float *)src, dst, dt, n, false);
}

static float *to_f32(const ts_kview *v, int64_t n) {
    float *dst = malloc((size_t)n * sizeof(float) + 1);
    if (dst) tsi_conv_widen(dst, v->data, v->dtype, n);
    return dst;
}

static void from_f32(const float *src, int64_t n, const ts_kview *v) {
    tsi_conv_round(v->data, v->dtype, src, n);
}

/* bf16 convolutions in bf16 (oneDNN) where the CPU multiplies bf16 natively and conv_select.c
 * gives the pass to oneDNN (not the shapes the direct kernels take, as LeNet's, where oneDNN's
 * per-call reorders cost more than the bf16 arithmetic saves; TS_CONV=dnnl|builtin forces either
 * way): every operand as it is, float32 sums, one rounding. */
static bool bf16_native(ts_dtype dt, const cgeom *g, tsi_conv_pass pass) {
    return dt == TS_BF16 && tsi_conv_select(g, pass, TS_BF16, 0) == TSI_CONV_PATH_DNNL &&
           tsi_dnnl_bf16_native();
}

/* ------------------------------------------------------------------ f16 / bf16 */
/* f16 / bf16: through float32 copies (or bf16 natively, above), the activation on the rounded
 * result */
void tsi_conv2d_half(const cgeom *g, const ts_kview *out, const ts_kview *x, const ts_kview *w,
                     const ts_kview *bias, const tsi_conv_weight_id *wid) {
    cgeom gf = *g;
    gf.act = TS_CONV_ACT_NONE;
    cgeom gk = *g; /* the bf16 kernel applies ReLU itself */
    gk.act = tsi_conv_act_in_bf16_kernel(g->act);
    if (bf16_native(out->dtype, &gf, TSI_CONV_PASS_FORWARD) &&
        tsi_dnnl_conv_forward_bf16(&gk, (const uint16_t *)x->data, (const uint16_t *)w->data, wid,
                                   bias ? (const uint16_t *)bias->data : NULL,
                                   (uint16_t *)out->data)) {
        if (gk.act != g->act) tsi_conv_act_output(g, out);
        return;
    }
    float *fx = to_f32(x, tsi_conv_numel4(x)), *fw = fx ? to_f32(w, tsi_conv_numel4(w)) : NULL;
    float *fb = fw && bias ? to_f32(bias, bias->shape[0]) : NULL;
    float *fy = fw && (fb || !bias) ? malloc((size_t)tsi_conv_numel4(out) * sizeof(float)) : NULL;
    if (fy && tsi_conv_forward_f32(&gf, fx, fw, fb, fy))
        from_f32(fy, tsi_conv_numel4(out), out);
    else
        tsi_conv_naive_forward(&gf, out->dtype, x->data, w->data, bias ? bias->data : NULL,
                               out->data);
    free(fx), free(fw), free(fb), free(fy);
    tsi_conv_act_output(g, out);
}

void tsi_conv2d_backward_data_half(const cgeom *g, const ts_kview *gx, const ts_kview *gout,
                                   const ts_kview *w) {
    const ts_dtype dt = gx->dtype;
    if (bf16_native(dt, g, TSI_CONV_PASS_DATA) &&
        tsi_dnnl_conv_backward_data_bf16(g, (const uint16_t *)gout->data, (const uint16_t *)w->data,
                                         (uint16_t *)gx->data))
        return;
    float *fy = to_f32(gout, tsi_conv_numel4(gout)),
          *fw = fy ? to_f32(w, tsi_conv_numel4(w)) : NULL;
    float *fx = fw ? malloc((size_t)tsi_conv_numel4(gx) * sizeof(float)) : NULL;
    if (fx && tsi_conv_backward_data_f32(g, fy, fw, fx))
        from_f32(fx, tsi_conv_numel4(gx), gx);
    else
        tsi_conv_naive_backward_data(g, dt, gout->data, w->data, gx->data);
    free(fx), free(fw), free(fy);
}

void tsi_conv2d_backward_weight_half(const cgeom *g, const ts_kview *gw, const ts_kview *gout,
                                     const ts_kview *x) {
    const ts_dtype dt = gw->dtype;
    if (bf16_native(dt, g, TSI_CONV_PASS_WEIGHT) &&
        tsi_dnnl_conv_backward_weight_bf16(g, (const uint16_t *)gout->data,
                                           (const uint16_t *)x->data, (uint16_t *)gw->data))
        return;
    float *fy = to_f32(gout, tsi_conv_numel4(gout)),
          *fx = fy ? to_f32(x, tsi_conv_numel4(x)) : NULL;
    float *fw = fx ? malloc((size_t)tsi_conv_numel4(gw) * sizeof(float)) : NULL;
    if (fw && tsi_conv_backward_weight_f32(g, fy, fx, fw))
        from_f32(fw, tsi_conv_numel4(gw), gw);
    else
        tsi_conv_naive_backward_weight(g, dt, gout->data, x->data, gw->data);
    free(fx), free(fw), free(fy);
}
