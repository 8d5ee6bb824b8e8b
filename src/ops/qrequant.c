/* qrequant.c — the requantization constants of PyTorch's x86 quantized engine, which
 * ts_quantized_linear and ts_quantized_conv2d use when their bias is float32 (quant_args.h,
 * docs/QUANTIZATION.md). PyTorch holds the bias in float32 and hands it to fbgemm, which adds it to
 * the int32 sum in float32 before one float32 multiply:
 *   atws[c]  = (float)x_scale * (float)w_scale[c]           (act_times_w_scale)
 *   fmult[c] = atws[c] / (float)out_scale                    (C_multiplier)
 *   fb[c]    = bias[c] / atws[c]                             (weights per channel)
 *            = bias[c] * (float)(1.0 / (double)atws[0])      (per tensor: one reciprocal)
 *   y        = clamp(zp + round_half_even(((float)acc + fb[c]) * fmult[c]))
 * each line one float32 rounding (no contraction: C11 keeps these expressions as written). */
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera.h"

bool tsi_quant_x86_requant(double x_scale, const struct tsi_quant *wd, int64_t n, double out_scale,
                           ts_tensor *bias, float *fmult, float *acc_fbias) {
    if (bias) { /* its values on the host (the bias may be on any device) */
        ts_scope_begin();
        ts_tensor *c = ts_contiguous(ts_to(bias, ts_cpu()));
        const bool ok = c && ts_copy_to_host(c, acc_fbias, (size_t)n * sizeof *acc_fbias) == TS_OK;
        ts_scope_end();
        if (!ok) return false;
    }
    const bool per_tensor = wd->scheme == TS_PER_TENSOR_AFFINE;
    const float xs = (float)x_scale, os = (float)out_scale;
    const float rcp = (float)(1.0 / (double)(xs * (float)wd->scales[0]));
    for (int64_t c = 0; c < n; c++) {
        const float atws = xs * (float)wd->scales[per_tensor ? 0 : c];
        fmult[c] = atws / os;
        if (bias) acc_fbias[c] = per_tensor ? acc_fbias[c] * rcp : acc_fbias[c] / atws;
    }
    return true;
}

bool tsi_quant_bias_ok(const char *op, const ts_tensor *bias, int64_t n) {
    if (!bias || ((bias->dtype == TS_I32 || bias->dtype == TS_F32) && bias->shape.ndim == 1 &&
                  bias->shape.dims[0] == n))
        return true;
    return tsi_error_set(TS_ERR_ARG, "%s: bias must be int32 or float32 [%lld] (got %s)", op,
                         (long long)n, tsi_desc(bias)),
           false;
}
