/* qpool.c — max_pool2d, avg_pool2d and adaptive_avg_pool2d of quantized tensors
 * (include/tessera/quant.h) over the backend's qpool kernel (cpu: kern_qpool.c). Both keep the
 * input's parameters. */
#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"

/* x: quantized per tensor, qint8 / quint8 / qint32, [N, C, H, W] or [C, H, W], on a device with the
 * kernel. *planes, *h, *w: its layout. */
static bool pool_input(const char *op, ts_tensor *x, int64_t *planes, int64_t *h, int64_t *w) {
    tsi_init();
    if (!tsi_quant_pt_input(op, x, "input")) return false;
    const int nd = x->shape.ndim;
    if (nd != 3 && nd != 4)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input must be [N, C, H, W] or [C, H, W] (got %s)",
                             op, tsi_desc(x)),
               false;
    if (!tsi_be(x)->qpool)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no quantized pooling kernel on %s", op,
                             ts_device_str(tsi_device(x))),
               false;
    *h = x->shape.dims[nd - 2], *w = x->shape.dims[nd - 1];
    const int64_t hw = (*h) * (*w);
    *planes = hw > 0 ? tsi_numel(x->shape) / hw : 0;
    return true;
}

/* a channels_last input pools in NHWC into a channels_last output; other strided inputs are
 * copied contiguous first */
static ts_tensor *run_pool(const char *op, ts_tensor *x, ts_qpool_args *a) {
    ts_shape s = x->shape;
    s.dims[s.ndim - 2] = a->oh, s.dims[s.ndim - 1] = a->ow;
    const bool nhwc = s.ndim == 4 && tsi_prefers_channels_last(x);
    ts_tensor *out = tsi_new_quantized_pt(op, s, x->dtype, tsi_device(x), x->quant->scales[0],
                                          x->quant->zero_points[0]);
    if (out && nhwc) tsi_channels_last_strides(&s, out->strides);
    if (!out || tsi_numel(s) == 0) return tsi_own(out);
    ts_tensor *xc = nhwc ? ts_retain(x) : tsi_contiguous(op, x);
    if (!xc) return ts_release(out), NULL;
    a->qdtype = x->dtype;
    a->nhwc = nhwc;
    a->c = nhwc ? s.dims[1] : 1;
    a->x = tsi_kview(xc).data;
    a->out = out->storage->data;
    tsi_be(x)->qpool(tsi_be(x), tsi_dev_index(x), a);
    ts_release(xc);
    return tsi_own(out);
}

/* PyTorch's pooling_output_shape: floor or ceil, and a last window that starts in the padding
 * dropped */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                        bool ceil_mode) {
    const int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    if (span < 0) return 0;
    int64_t o = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (o - 1) * stride >= in + pad) o--;
    return o;
}

ts_tensor *ts_quantized_max_pool2d(ts_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                   const int64_t padding[2], const int64_t dilation[2],
                                   bool ceil_mode) {
    const char *op = "quantized_max_pool2d";
    int64_t planes, h, w;
    if (!pool_input(op, x, &planes, &h, &w)) return NULL;
    if (!kernel || !stride || !padding || !dilation)
        return tsi_error_set(TS_ERR_ARG, "%s: kernel, stride, padding or dilation is NULL", op),
               NULL;
    ts_qpool_args a = {.planes = planes, .h = h, .w = w};
    for (int i = 0; i < 2; i++) {
        if (kernel[i] < 1 || stride[i] < 1 || dilation[i] < 1 || padding[i] < 0 ||
            2 * padding[i] > kernel[i])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: kernel_size (%lld), stride (%lld) and dilation (%lld) must "
                                 "be >= 1 and padding (%lld) between 0 and half the kernel",
                                 op, (long long)kernel[i], (long long)stride[i],
                                 (long long)dilation[i], (long long)padding[i]),
                   NULL;
        a.kernel[i] = kernel[i], a.stride[i] = stride[i], a.pad[i] = padding[i],
        a.dil[i] = dilation[i];
    }
    a.oh = pool_out(h, kernel[0], padding[0], stride[0], dilation[0], ceil_mode);
    a.ow = pool_out(w, kernel[1], padding[1], stride[1], dilation[1], ceil_mode);
    if (a.oh < 1 || a.ow < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the output of input %s would be empty", op,
                             tsi_desc(x)),
               NULL;
    /* traced for ONNX export (QDQ MaxPool): max_pool2d's record layout */
    const int64_t ip[9] = {kernel[0],  kernel[1],   stride[0],   stride[1], padding[0],
                           padding[1], dilation[0], dilation[1], ceil_mode};
    return tsi_trace(op, &x, 1, run_pool(op, x, &a), ip, 9, NULL, 0);
}

ts_tensor *ts_quantized_adaptive_avg_pool2d(ts_tensor *x, int64_t out_h, int64_t out_w) {
    const char *op = "quantized_adaptive_avg_pool2d";
    int64_t planes, h, w;
    if (!pool_input(op, x, &planes, &h, &w)) return NULL;
    if (out_h < 1 || out_w < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: output_size (%lld, %lld) must be positive", op,
                             (long long)out_h, (long long)out_w),
               NULL;
    if (h == 0 || w == 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input %s has an empty plane", op, tsi_desc(x)),
               NULL;
    ts_qpool_args a = {
        .adaptive_avg = true, .planes = planes, .h = h, .w = w, .oh = out_h, .ow = out_w};
    const int64_t ip[2] = {out_h, out_w}; /* traced for ONNX export (QDQ average pool) */
    return tsi_trace(op, &x, 1, run_pool(op, x, &a), ip, 2, NULL, 0);
}

ts_tensor *ts_quantized_avg_pool2d(ts_tensor *x, const int64_t kernel[2], const int64_t stride[2],
                                   const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                                   int64_t divisor_override) {
    const char *op = "quantized_avg_pool2d";
    int64_t planes, h, w;
    if (!pool_input(op, x, &planes, &h, &w)) return NULL;
    if (!kernel || !stride || !padding)
        return tsi_error_set(TS_ERR_ARG, "%s: kernel, stride or padding is NULL", op), NULL;
    if (divisor_override < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: divisor_override must be positive, but got %lld", op,
                             (long long)divisor_override),
               NULL;
    ts_qpool_args a = {.avg = true,
                       .count_include_pad = count_include_pad,
                       .divisor = divisor_override,
                       .zp = x->quant->zero_points[0],
                       .planes = planes,
                       .h = h,
                       .w = w};
    for (int i = 0; i < 2; i++) {
        if (kernel[i] < 1 || stride[i] < 1 || padding[i] < 0 || 2 * padding[i] > kernel[i])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: kernel_size (%lld) and stride (%lld) must be >= 1 and "
                                 "padding (%lld) between 0 and half the kernel",
                                 op, (long long)kernel[i], (long long)stride[i],
                                 (long long)padding[i]),
                   NULL;
        a.kernel[i] = kernel[i], a.stride[i] = stride[i], a.pad[i] = padding[i], a.dil[i] = 1;
    }
    a.oh = pool_out(h, kernel[0], padding[0], stride[0], 1, ceil_mode);
    a.ow = pool_out(w, kernel[1], padding[1], stride[1], 1, ceil_mode);
    if (a.oh < 1 || a.ow < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the output of input %s would be empty", op,
                             tsi_desc(x)),
               NULL;
    /* traced for ONNX export (QDQ AveragePool): avg_pool2d's record layout */
    const int64_t ip[11] = {kernel[0],       kernel[1], stride[0], stride[1], padding[0],
                            padding[1],      1,         1,         ceil_mode, !count_include_pad,
                            divisor_override};
    return tsi_trace(op, &x, 1, run_pool(op, x, &a), ip, 11, NULL, 0);
}
