/* qlinear.c — the int8 linear layer (ts_quantized_linear, _acc, ts_dynamic_quantized_linear) and
 * choose_qparams, over the backend's qlinear kernel (cpu: kern_qlinear.c). */
#include <math.h>
#include <stdlib.h>

#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"

#define QLINEAR_MAX_K 65536 /* past it an int32 partial sum of u8 x s8 products could overflow */

ts_status ts_choose_qparams_per_tensor(ts_tensor *x, ts_dtype dtype, bool reduce_range,
                                       double *scale, int64_t *zero_point) {
    const char *op = "choose_qparams_per_tensor";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return ts_error();
    if (!scale || !zero_point)
        return tsi_error_set(TS_ERR_ARG, "%s: scale or zero_point is NULL", op);
    if (x->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be float32 (got %s)", op, tsi_desc(x));
    if (dtype != TS_QUINT8 && dtype != TS_QINT8)
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype must be quint8 or qint8 (got %s)", op,
                             (unsigned)dtype < TS_DTYPE_COUNT ? ts_dtype_name(dtype) : "invalid");
    if (tsi_numel(x->shape) == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: input is empty (%s)", op, tsi_desc(x));
    ts_scope_begin();
    const double mn = ts_item(ts_min(x)), mx = ts_item(ts_max(x));
    ts_scope_end();
    if (ts_error() != TS_OK) return ts_error();
    if (isnan(mn) || isnan(mx))
        return tsi_error_set(TS_ERR_ARG, "%s: input %s contains NaN", op, tsi_desc(x));
    /* fbgemm's ChooseQuantizationParams (preserve_sparsity and power-of-two scales off) */
    int32_t qmin = dtype == TS_QUINT8 ? 0 : -128, qmax = dtype == TS_QUINT8 ? 255 : 127, zp;
    if (reduce_range) qmin /= 2, qmax /= 2;
    tsi_choose_qparams((float)mn, (float)mx, qmin, qmax, false, scale, &zp);
    *zero_point = zp; /* the scale double, as PyTorch's; its kernels use it as float32, as ours */
    return TS_OK;
}

/* The checks and the parameters every form shares: x [.., K] quantized per tensor (quint8 /
 * qint8), w qint8 [N, K] per tensor or per channel along 0, bias int32 (float32 when x_float, or
 * either when x86_bias_ok: ts_quantized_linear). Fills a (but its outputs) and the
 * host arrays w_zp / w_scale (malloc'ed: the caller frees). */
typedef struct qlin {
    ts_qlinear_args a;
    double *w_scale;
    int32_t *w_zp;
    ts_shape out_shape;
} qlin;

static bool check_weight(const char *op, ts_tensor *w, int64_t K) {
    if (!tsi_check_input(op, w, "weight")) return false;
    if (w->dtype != TS_QINT8 || !w->quant)
        return tsi_error_set(TS_ERR_DTYPE, "%s: weight must be qint8 (got %s)", op, tsi_desc(w)),
               false;
    if (w->shape.ndim != 2 || (K >= 0 && w->shape.dims[1] != K))
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "%s: weight must be [out_features, %lld], the input's last dim (got %s)", op,
                   (long long)K, tsi_desc(w)),
               false;
    const tsi_quant *d = w->quant;
    if (d->scheme == TS_PER_GROUP_AFFINE || (d->scheme == TS_PER_CHANNEL_AFFINE && d->axis != 0))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: weight must be quantized per tensor or per channel along axis 0 "
                             "(got %s)",
                             op, d->scheme == TS_PER_GROUP_AFFINE ? "per group" : "another axis"),
               false;
    return true;
}

static bool qlin_setup(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *bias, bool x_float,
                       bool x86_bias_ok, qlin *L) {
    *L = (qlin){0};
    if (!tsi_check_input(op, x, "input")) return false;
    if (x_float ? x->dtype != TS_F32
                : ((x->dtype != TS_QUINT8 && x->dtype != TS_QINT8) || !x->quant ||
                   x->quant->scheme != TS_PER_TENSOR_AFFINE))
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be %s (got %s)", op,
                             x_float ? "float32" : "quint8 or qint8 quantized per tensor",
                             tsi_desc(x)),
               false;
    if (x->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must have at least one dim (got %s)", op,
                             tsi_desc(x)),
               false;
    const int64_t K = x->shape.dims[x->shape.ndim - 1];
    if (!check_weight(op, w, K)) return false;
    if (K > QLINEAR_MAX_K)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: in_features %lld is over %d, past which the int32 accumulator "
                             "could overflow",
                             op, (long long)K, QLINEAR_MAX_K),
               false;
    const int64_t N = w->shape.dims[0];
    if (bias && !tsi_check_input(op, bias, "bias")) return false;
    const ts_dtype bdt = x_float ? TS_F32 : TS_I32;
    if (bias && !x86_bias_ok &&
        (bias->dtype != bdt || bias->shape.ndim != 1 || bias->shape.dims[0] != N))
        return tsi_error_set(TS_ERR_ARG, "%s: bias must be %s [%lld] (got %s)", op,
                             ts_dtype_name(bdt), (long long)N, tsi_desc(bias)),
               false;
    if (x86_bias_ok && !tsi_quant_bias_ok(op, bias, N)) return false;
    ts_tensor *ts[3] = {x, w, bias};
    ts_device dev;
    if (!tsi_same_device(op, ts, bias ? 3 : 2, false, &dev) || !tsi_meta_refuse(op, x) ||
        !tsi_quant_kernel_ok(op, x))
        return false;
    L->w_scale = malloc((size_t)(N ? N : 1) * sizeof *L->w_scale);
    L->w_zp = malloc((size_t)(N ? N : 1) * sizeof *L->w_zp);
    if (!L->w_scale || !L->w_zp)
        return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), false;
    const tsi_quant *d = w->quant;
    for (int64_t n = 0; n < N; n++) {
        const int64_t p = d->scheme == TS_PER_TENSOR_AFFINE ? 0 : n;
        L->w_scale[n] = d->scales[p];
        L->w_zp[n] = (int32_t)d->zero_points[p];
    }
    L->out_shape = x->shape;
    L->out_shape.dims[x->shape.ndim - 1] = N;
    L->a.m = K ? tsi_numel(x->shape) / K : tsi_numel(L->out_shape) / (N ? N : 1);
    L->a.n = N;
    L->a.k = K;
    L->a.w = (const int8_t *)(void *)tsi_kview(w).data;
    {
        /* a weight that is its own storage's, not exported: its packing may be cached */
        const ts_storage *ws = w->storage;
        if (ws->alloc && !ws->release && !atomic_load(&ws->exported) && tsi_is_contiguous(w)) {
            L->a.w_uid = ws->uid;
            L->a.w_version = (uint64_t)atomic_load(&ws->version);
            L->a.w_offset = w->offset;
        }
    }
    L->a.w_zp = L->w_zp;
    return true;
}

static void qlin_free(qlin *L) {
    free(L->w_scale);
    free(L->w_zp);
}

/* runs the kernel with x (quantized per tensor; read through a contiguous copy when strided: a
 * channels_last convolution's output, flattened) and bias set up; false: error set */
static bool qlin_run(const char *op, qlin *L, ts_tensor *x, ts_tensor *out) {
    if (L->a.m * L->a.n == 0) return true;
    ts_tensor *xc = tsi_contiguous(op, x);
    if (!xc) return false;
    L->a.x = tsi_kview(xc).data;
    L->a.x_unsigned = x->dtype == TS_QUINT8;
    L->a.x_zp = (int32_t)x->quant->zero_points[0];
    const bool ok = tsi_be(out)->qlinear(tsi_be(out), tsi_dev_index(out), &L->a);
    ts_release(xc);
    return ok;
}

static ts_tensor *quantized_linear_impl(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                        bool acc, double out_scale, int64_t out_zp, bool relu) {
    tsi_init();
    qlin L;
    ts_tensor *bc = NULL, *out = NULL;
    float *fm = NULL; /* x86: [fmult n][acc_fbias n] */
    const bool x86 = !acc && bias && bias->dtype == TS_F32;
    if (!qlin_setup(op, x, w, bias, false, !acc, &L)) goto done;
    if (!acc) {
        int64_t lo, hi;
        tsi_quant_range(x->dtype, &lo, &hi);
        if (!(out_scale > 0) || !isfinite(out_scale) || (float)out_scale == 0.0f) {
            tsi_error_set(TS_ERR_ARG, "%s: output scale must be positive and finite (got %g)", op,
                          out_scale);
            goto done;
        }
        if (out_zp < lo || out_zp > hi) {
            tsi_error_set(TS_ERR_ARG, "%s: output zero_point %lld is outside [%lld, %lld] (%s)", op,
                          (long long)out_zp, (long long)lo, (long long)hi, ts_dtype_name(x->dtype));
            goto done;
        }
        L.a.out_zp = (int32_t)out_zp;
        L.a.out_min = (int32_t)(relu && out_zp > lo ? out_zp : lo);
        L.a.out_max = (int32_t)hi;
        L.a.out_unsigned = x->dtype == TS_QUINT8;
        if (x86) { /* a float32 bias: PyTorch's x86 requantization (qrequant.c) */
            if (!(fm = malloc((size_t)(L.a.n ? L.a.n : 1) * 2 * sizeof *fm))) {
                tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
                goto done;
            }
            if (!tsi_quant_x86_requant(x->quant->scales[0], w->quant, L.a.n, out_scale, bias, fm,
                                       fm + L.a.n))
                goto done;
            L.a.fmult = fm;
            L.a.acc_fbias = fm + L.a.n;
        }
        /* the multiplier, reusing w_scale's array: x_scale * w_scale[n] / out_scale */
        for (int64_t n = 0; n < L.a.n; n++)
            L.w_scale[n] = x->quant->scales[0] * L.w_scale[n] / out_scale;
        L.a.mult = L.w_scale;
        tsi_quant *d = tsi_quant_new(op, TS_PER_TENSOR_AFFINE, 1);
        if (!d) goto done;
        d->scales[0] = out_scale;
        d->zero_points[0] = out_zp;
        out = tsi_new(op, L.out_shape, x->dtype, tsi_device(x));
        if (!out) {
            tsi_quant_release(d);
            goto done;
        }
        out->quant = d;
        L.a.out_q = out->storage->data;
    } else {
        out = tsi_new(op, L.out_shape, TS_I32, tsi_device(x));
        if (!out) goto done;
        L.a.out_acc = (int32_t *)(void *)out->storage->data;
    }
    if (bias && !x86) {
        if (!(bc = tsi_contiguous(op, bias))) goto fail;
        L.a.bias = (const int32_t *)(void *)tsi_kview(bc).data;
    }
    if (qlin_run(op, &L, x, out)) goto done;
fail:
    ts_release(out);
    out = NULL;
done:
    qlin_free(&L);
    free(fm);
    ts_release(bc);
    return tsi_own(out);
}

ts_tensor *ts_quantized_linear_acc(ts_tensor *x, ts_tensor *w, ts_tensor *bias) {
    ts_tensor *ins[3] = {x, w, bias}; /* traced so that ONNX export names it */
    return tsi_trace("quantized_linear_acc", ins, 3,
                     quantized_linear_impl("quantized_linear_acc", x, w, bias, true, 0, 0, false),
                     NULL, 0, NULL, 0);
}

ts_tensor *ts_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias, double out_scale,
                               int64_t out_zero_point, bool relu) {
    ts_tensor *ins[3] = {x, w, bias}; /* traced for ONNX export (QDQ Gemm) */
    const int64_t ip[1] = {relu};
    return tsi_trace("quantized_linear", ins, 3,
                     quantized_linear_impl("quantized_linear", x, w, bias, false, out_scale,
                                           out_zero_point, relu),
                     ip, 1, NULL, 0);
}

ts_tensor *ts_dynamic_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                       bool reduce_range) {
    const char *op = "dynamic_quantized_linear";
    tsi_init();
    qlin L;
    ts_tensor *out = NULL, *xq = NULL, *bc = NULL;
    double xs = 0;
    int64_t xz = 0;
    if (!qlin_setup(op, x, w, bias, true, false, &L)) goto done;
    out = tsi_new(op, L.out_shape, TS_F32, tsi_device(x));
    if (!out || L.a.m * L.a.n == 0) goto done;
    if (ts_choose_qparams_per_tensor(x, TS_QUINT8, reduce_range, &xs, &xz) != TS_OK) goto fail;
    if (!(xq = tsi_quantize_per_tensor(op, x, xs, xz, TS_QUINT8))) goto fail;
    for (int64_t n = 0; n < L.a.n; n++) L.w_scale[n] *= (double)(float)xs; /* fbgemm's float */
    L.a.fscale = L.w_scale;
    L.a.out_f = (float *)(void *)out->storage->data;
    if (bias) {
        if (!(bc = tsi_contiguous(op, bias))) goto fail;
        L.a.fbias = (const float *)(void *)tsi_kview(bc).data;
    }
    if (qlin_run(op, &L, xq, out)) goto done;
fail:
    ts_release(out);
    out = NULL;
done:
    qlin_free(&L);
    ts_release(xq);
    ts_release(bc);
    ts_tensor *ins[3] = {x, w, bias}; /* traced so that ONNX export names it */
    return tsi_trace(op, ins, 3, tsi_own(out), NULL, 0, NULL, 0);
}
