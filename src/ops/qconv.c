/* qconv.c — the quantized 2-D convolution (ts_quantized_conv2d, include/tessera/quant.h) over the
 * backend's qconv kernel (cpu: kern_qconv.c). A channels_last input is read where it lies; the
 * output is channels_last then, and for ts_quantized_conv2d also where the device's route prefers
 * it (as PyTorch's x86 conv; any other strided input is copied contiguous first): decision 0053. */
#include <math.h>
#include <stdlib.h>

#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

#define QCONV_MAX_K 65536 /* taps a group: past it an int32 partial sum could overflow */

static bool per_tensor_q(const char *op, ts_tensor *x, const char *what) {
    if ((x->dtype == TS_QUINT8 || x->dtype == TS_QINT8) && x->quant &&
        x->quant->scheme == TS_PER_TENSOR_AFFINE)
        return true;
    return tsi_error_set(TS_ERR_DTYPE,
                         "%s: %s must be quint8 or qint8 quantized per tensor (got %s)", op, what,
                         tsi_desc(x)),
           false;
}

bool tsi_quant_binary_out(const char *op, ts_tensor *const ts[2], double scale, int64_t zp,
                          ts_device *dev) {
    return tsi_same_device(op, ts, 2, false, dev) &&
           tsi_quant_out_params(op, ts[0]->dtype, scale, zp);
}

bool tsi_quant_out_params(const char *op, ts_dtype dt, double scale, int64_t zp) {
    int64_t lo, hi;
    tsi_quant_range(dt, &lo, &hi);
    if (!(scale > 0) || !isfinite(scale) || (float)scale == 0.0f || !isfinite(1.0f / (float)scale))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: output scale must be positive, finite and a normal float32 (got "
                             "%g)",
                             op, scale),
               false;
    if (zp < lo || zp > hi)
        return tsi_error_set(TS_ERR_ARG, "%s: output zero_point %lld is outside [%lld, %lld] (%s)",
                             op, (long long)zp, (long long)lo, (long long)hi, ts_dtype_name(dt)),
               false;
    return true;
}

ts_tensor *tsi_new_quantized_pt(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                                double scale, int64_t zp) {
    tsi_quant *d = tsi_quant_new(op, TS_PER_TENSOR_AFFINE, 1);
    if (!d) return NULL;
    d->scales[0] = scale;
    d->zero_points[0] = zp;
    ts_tensor *t = tsi_new(op, s, dt, dev);
    if (!t) return tsi_quant_release(d), NULL;
    t->quant = d;
    return t;
}

static bool check_geometry(const char *op, const int64_t *stride, const int64_t *padding,
                           const int64_t *dilation, int64_t groups) {
    if (!stride || !padding || !dilation)
        return tsi_error_set(TS_ERR_ARG, "%s: stride, padding or dilation is NULL", op), false;
    for (int i = 0; i < 2; i++) {
        if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: stride (%lld) and dilation (%lld) must be >= 1 and padding "
                                 "(%lld) >= 0",
                                 op, (long long)stride[i], (long long)dilation[i],
                                 (long long)padding[i]),
                   false;
    }
    if (groups < 1) return tsi_error_set(TS_ERR_ARG, "%s: groups must be >= 1", op), false;
    return true;
}

/* both functions: fmult NULL (ts_quantized_conv2d: a quantized output of x's dtype, float64
 * requantization, or PyTorch's x86 float32 one when the bias is float32) or the float32
 * multipliers of ts_qlinear_conv2d (a plain out_dtype output, an int32 bias).
 * long: each argument's check with its own message, then the kernel's one argument block */
static ts_tensor *qconv(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                        const int64_t stride[2], const int64_t padding[2],
                        const int64_t dilation[2], int64_t groups, double out_scale,
                        int64_t out_zero_point, bool relu, ts_tensor *fmult, ts_dtype out_dtype,
                        bool cl_out) {
    tsi_init();
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, w, "weight") ||
        (bias && !tsi_check_input(op, bias, "bias")) || !per_tensor_q(op, x, "input") ||
        !check_geometry(op, stride, padding, dilation, groups))
        return NULL;
    if (x->shape.ndim != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must be [N, C, H, W] (got %s)", op,
                             tsi_desc(x)),
               NULL;
    if (w->dtype != TS_QINT8 || !w->quant || w->shape.ndim != 4)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: weight must be qint8 [Cout, C / groups, KH, KW] (got "
                             "%s)",
                             op, tsi_desc(w)),
               NULL;
    const tsi_quant *wd = w->quant;
    if (wd->scheme == TS_PER_GROUP_AFFINE || (wd->scheme == TS_PER_CHANNEL_AFFINE && wd->axis != 0))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: weight must be quantized per tensor or per channel along axis 0",
                             op),
               NULL;
    const int64_t N = x->shape.dims[0], C = x->shape.dims[1], H = x->shape.dims[2],
                  W = x->shape.dims[3], CO = w->shape.dims[0], KH = w->shape.dims[2],
                  KW = w->shape.dims[3];
    if (C % groups || CO % groups || w->shape.dims[1] != C / groups)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: groups %lld must divide the input channels %lld and the output "
                             "channels %lld, and weight %s must have C / groups input channels",
                             op, (long long)groups, (long long)C, (long long)CO, tsi_desc(w)),
               NULL;
    if (C / groups * KH * KW > QCONV_MAX_K)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: %lld taps a group are over %d, past which the int32 accumulator "
                             "could overflow",
                             op, (long long)(C / groups * KH * KW), QCONV_MAX_K),
               NULL;
    if (fmult && bias &&
        (bias->dtype != TS_I32 || bias->shape.ndim != 1 || bias->shape.dims[0] != CO))
        return tsi_error_set(TS_ERR_ARG, "%s: bias must be int32 [%lld] (got %s)", op,
                             (long long)CO, tsi_desc(bias)),
               NULL;
    if (!tsi_quant_bias_ok(op, bias, CO)) return NULL;
    /* a float32 bias: PyTorch's x86 requantization (qrequant.c), in the float32 epilogue */
    const bool x86 = bias && bias->dtype == TS_F32;
    const int64_t eh = dilation[0] * (KH - 1) + 1, ew = dilation[1] * (KW - 1) + 1;
    const int64_t OH = H + 2 * padding[0] >= eh ? (H + 2 * padding[0] - eh) / stride[0] + 1 : 0,
                  OW = W + 2 * padding[1] >= ew ? (W + 2 * padding[1] - ew) / stride[1] + 1 : 0;
    if (OH < 1 || OW < 1)
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "%s: the kernel (%lld x %lld, dilation %lld x %lld) is larger than the "
                   "padded input %s",
                   op, (long long)KH, (long long)KW, (long long)dilation[0], (long long)dilation[1],
                   tsi_desc(x)),
               NULL;
    int64_t lo, hi;
    if (fmult) {
        if (out_dtype != TS_U8 && out_dtype != TS_I8)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: the output dtype must be uint8 or int8 (got %s)", op,
                                 ts_dtype_name(out_dtype)),
                   NULL;
        lo = out_dtype == TS_U8 ? 0 : -128, hi = out_dtype == TS_U8 ? 255 : 127;
        if (out_zero_point < lo || out_zero_point > hi)
            return tsi_error_set(TS_ERR_ARG, "%s: y_zero_point %lld is outside [%lld, %lld] (%s)",
                                 op, (long long)out_zero_point, (long long)lo, (long long)hi,
                                 ts_dtype_name(out_dtype)),
                   NULL;
        if (!tsi_check_input(op, fmult, "multiplier") || fmult->dtype != TS_F32 ||
            (fmult->shape.ndim != 0 && fmult->shape.ndim != 1) ||
            (ts_numel(fmult) != 1 && ts_numel(fmult) != CO))
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: multiplier must be float32 of one value or %lld (got %s)", op,
                                 (long long)CO, tsi_desc(fmult)),
                   NULL;
    } else {
        if (!tsi_quant_out_params(op, x->dtype, out_scale, out_zero_point)) return NULL;
        tsi_quant_range(x->dtype, &lo, &hi);
    }
    ts_tensor *ts[4] = {x, w, bias ? bias : fmult, fmult};
    ts_device dev;
    if (!tsi_same_device(op, ts, 2 + (bias != NULL) + (fmult != NULL), false, &dev) ||
        !tsi_meta_refuse(op, x) || !tsi_quant_kernel_ok(op, x))
        return NULL;
    if (!tsi_be(x)->qconv)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no quantized convolution kernel on %s", op,
                             ts_device_str(dev)),
               NULL;
    double *mult = malloc((size_t)CO * sizeof *mult);
    int32_t *wzp = malloc((size_t)CO * sizeof *wzp);
    float *fm = fmult || x86 ? malloc((size_t)CO * sizeof *fm) : NULL;
    float *fb = x86 ? malloc((size_t)CO * sizeof *fb) : NULL;
    ts_tensor *out = NULL, *bc = NULL, *fc = NULL, *xc = NULL, *wc = NULL;
    /* x read where it lies when channels_last; the output channels_last then, or when cl_out
     * asks for it where the device prefers it (the kernel transposes an NCHW x as it pads) */
    const bool x_nhwc = tsi_prefers_channels_last(x),
               nhwc = x_nhwc || (cl_out && tsi_qconv_prefers_channels_last(x));
    if (!mult || !wzp || ((fmult || x86) && !fm) || (x86 && !fb)) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    for (int64_t c = 0; c < CO; c++) {
        const int64_t p = wd->scheme == TS_PER_TENSOR_AFFINE ? 0 : c;
        mult[c] = fmult ? 0 : x->quant->scales[0] * wd->scales[p] / out_scale;
        wzp[c] = (int32_t)wd->zero_points[p];
    }
    const ts_shape os = TS_SHAPE(N, CO, OH, OW);
    out = fmult ? tsi_new(op, os, out_dtype, dev)
                : tsi_new_quantized_pt(op, os, x->dtype, dev, out_scale, out_zero_point);
    if (out && nhwc) tsi_channels_last_strides(&os, out->strides);
    if (!out || N == 0 || CO == 0) goto done;
    if (bias && !x86 && !(bc = tsi_contiguous(op, bias))) goto fail;
    if (x86 && !tsi_quant_x86_requant(x->quant->scales[0], wd, CO, out_scale, bias, fm, fb))
        goto fail;
    /* the kernel reads dense NCHW or NHWC bytes, and a dense weight */
    if (!(xc = x_nhwc ? ts_retain(x) : tsi_contiguous(op, x)) || !(wc = tsi_contiguous(op, w)))
        goto fail;
    if (fmult) {
        if (!(fc = tsi_contiguous(op, fmult))) goto fail;
        const float *f = (const float *)tsi_kview(fc).data;
        const bool one = ts_numel(fc) == 1;
        for (int64_t c = 0; c < CO; c++) fm[c] = f[one ? 0 : c];
    }
    ts_qconv_args a = {.n = N,
                       .c = C,
                       .h = H,
                       .w = W,
                       .cout = CO,
                       .kh = KH,
                       .kw = KW,
                       .oh = OH,
                       .ow = OW,
                       .groups = groups,
                       .stride = {stride[0], stride[1]},
                       .pad = {padding[0], padding[1]},
                       .dil = {dilation[0], dilation[1]},
                       .x = tsi_kview(xc).data,
                       .x_unsigned = x->dtype == TS_QUINT8,
                       .x_zp = (int32_t)x->quant->zero_points[0],
                       .wt = (const int8_t *)tsi_kview(wc).data,
                       .w_zp = wzp,
                       .bias = bc ? (const int32_t *)(void *)tsi_kview(bc).data : NULL,
                       .mult = mult,
                       .fmult = fm,
                       .acc_fbias = fb,
                       .out = out->storage->data,
                       .out_unsigned = fmult ? out_dtype == TS_U8 : x->dtype == TS_QUINT8,
                       .out_zp = (int32_t)out_zero_point,
                       .out_min = (int32_t)(relu && out_zero_point > lo ? out_zero_point : lo),
                       .out_max = (int32_t)hi,
                       .x_nhwc = x_nhwc,
                       .out_nhwc = nhwc};
    {
        /* a weight that is its own storage's, not exported: its packing may be cached */
        const ts_storage *ws = w->storage;
        if (ws->alloc && !ws->release && !atomic_load(&ws->exported) && tsi_is_contiguous(w)) {
            a.w_uid = ws->uid;
            a.w_version = (uint64_t)atomic_load(&ws->version);
            a.w_offset = w->offset;
        }
    }
    if (tsi_be(x)->qconv(tsi_be(x), tsi_dev_index(x), &a)) goto done;
fail:
    ts_release(out);
    out = NULL;
done:
    free(mult);
    free(wzp);
    free(fm);
    free(fb);
    ts_release(bc);
    ts_release(fc);
    ts_release(xc);
    ts_release(wc);
    return tsi_own(out);
}

bool tsi_qconv_prefers_channels_last(const ts_tensor *x) {
    const ts_backend *be = tsi_be(x);
    return be->qconv_channels_last && be->qconv_channels_last(be, tsi_dev_index(x));
}

ts_tensor *ts_quantized_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *bias, const int64_t stride[2],
                               const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                               double out_scale, int64_t out_zero_point, bool relu) {
    /* channels_last out where the device's route prefers it, as PyTorch's x86 conv (the next
     * conv then reads it in place, the add and pools keep it: decision 0053) */
    ts_tensor *y = qconv("quantized_conv2d", x, w, bias, stride, padding, dilation, groups,
                         out_scale, out_zero_point, relu, NULL, TS_QUINT8, true);
    if (!y) return NULL;
    /* traced for ONNX export (QDQ Conv): the geometry as conv2d records it, then relu */
    const int64_t ip[8] = {stride[0],   stride[1],   padding[0], padding[1],
                           dilation[0], dilation[1], groups,     relu};
    ts_tensor *ins[3] = {x, w, bias};
    return tsi_trace("quantized_conv2d", ins, 3, y, ip, 8, NULL, 0);
}

ts_tensor *ts_qlinear_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *bias, const int64_t stride[2],
                             const int64_t padding[2], const int64_t dilation[2], int64_t groups,
                             ts_tensor *multiplier, int64_t y_zero_point, ts_dtype y_dtype,
                             bool relu) {
    if (!multiplier) return tsi_error_set(TS_ERR_ARG, "qlinear_conv2d: multiplier is NULL"), NULL;
    ts_tensor *ins[4] = {x, w, bias, multiplier}; /* traced so that ONNX export names it */
    return tsi_trace("qlinear_conv2d", ins, 4,
                     qconv("qlinear_conv2d", x, w, bias, stride, padding, dilation, groups, 1.0,
                           y_zero_point, relu, multiplier, y_dtype, false),
                     NULL, 0, NULL, 0);
}

ts_tensor *tsi_qlinear_conv2d_cl(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                 const int64_t stride[2], const int64_t padding[2],
                                 const int64_t dilation[2], int64_t groups, ts_tensor *multiplier,
                                 int64_t y_zero_point, ts_dtype y_dtype, bool relu) {
    if (!multiplier) return tsi_error_set(TS_ERR_ARG, "qlinear_conv2d: multiplier is NULL"), NULL;
    ts_tensor *ins[4] = {x, w, bias, multiplier};
    return tsi_trace("qlinear_conv2d", ins, 4,
                     qconv("qlinear_conv2d", x, w, bias, stride, padding, dilation, groups, 1.0,
                           y_zero_point, relu, multiplier, y_dtype, true),
                     NULL, 0, NULL, 0);
}
