/* quant_internal.h — what quantize.c and qlinear.c share. */
#ifndef TS_OPS_QUANT_INTERNAL_H
#define TS_OPS_QUANT_INTERNAL_H

#include "core/internal.h"

/* Whether t's device has the quantized kernels and is not capturing a graph (they are not
 * recorded): TS_ERR_UNSUPPORTED / TS_ERR_STATE naming op and t otherwise. */
bool tsi_quant_kernel_ok(const char *op, const ts_tensor *t);
/* t (argument `what`) checked: quantized per tensor (qint8 / quint8 / qint32; TS_ERR_DTYPE "<op>:
 * <what> must be ... (got ...)"), not a meta tensor, on a device with the kernels */
bool tsi_quant_pt_input(const char *op, ts_tensor *t, const char *what);

/* ts_quantize_per_tensor's work under op's name, x float32 checked: a reference the caller holds,
 * in no scope */
ts_tensor *tsi_quantize_per_tensor(const char *op, ts_tensor *x, double scale, int64_t zero_point,
                                   ts_dtype dtype);

/* fbgemm's ChooseQuantizationParams (force_scale_power_of_two off; reduce_range is the caller's
 * qmin / 2, qmax / 2) over [lo, hi]: PyTorch's choose_qparams, its dynamic quantization's and its
 * fused moving-average fake quant's (preserve_sparsity: symmetric). *scale double. */
void tsi_choose_qparams(float lo, float hi, int32_t qmin, int32_t qmax, bool preserve_sparsity,
                        double *scale, int32_t *zero_point);

/* PyTorch's x86 requantization constants (fbgemm's float bias; qrequant.c), per output channel c
 * of n: fmult[c] and acc_fbias[c] as ts_qlinear_args / ts_qconv_args take them (host arrays). wd:
 * the qint8 weight's parameters (per tensor, or per channel along 0); bias float32 [n] on any
 * device, or NULL (acc_fbias then left alone). false: the bias could not be read (error set). */
bool tsi_quant_x86_requant(double x_scale, const struct tsi_quant *wd, int64_t n, double out_scale,
                           ts_tensor *bias, float *fmult, float *acc_fbias);
/* A weighted quantized op's bias (ts_quantized_linear / _conv2d): NULL, int32 [n] (float64
 * requantization) or float32 [n] (PyTorch's x86 one); TS_ERR_ARG naming op otherwise */
bool tsi_quant_bias_ok(const char *op, const ts_tensor *bias, int64_t n);

/* Whether scale / zp are usable as an output's parameters for dtype dt (TS_ERR_ARG naming op) */
bool tsi_quant_out_params(const char *op, ts_dtype dt, double scale, int64_t zp);
/* a binary quantized op's inputs on one device (*dev) and its output parameters usable for the
 * first input's dtype (each error naming op) */
bool tsi_quant_binary_out(const char *op, ts_tensor *const ts[2], double scale, int64_t zp,
                          ts_device *dev);

/* A new contiguous tensor of dtype dt (qint8 / quint8 / qint32) quantized per tensor with scale
 * and zp (checked by the caller); NULL with the error set */
ts_tensor *tsi_new_quantized_pt(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                                double scale, int64_t zp);

/* Whether x's device runs quantized convolutions fastest on channels_last activations (backend.h's
 * qconv_channels_last): the ONNX importer then keeps a chain of them NHWC (decision 0053). */
bool tsi_qconv_prefers_channels_last(const ts_tensor *x);
/* ts_qlinear_conv2d whose output is channels_last where x's device prefers it
 * (tsi_qconv_prefers_channels_last) whatever x's layout: a chain's first convolution reads its
 * NCHW input as it is (the kernel transposes it as it pads) instead of a channels_last copy. */
ts_tensor *tsi_qlinear_conv2d_cl(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                 const int64_t stride[2], const int64_t padding[2],
                                 const int64_t dilation[2], int64_t groups, ts_tensor *multiplier,
                                 int64_t y_zero_point, ts_dtype y_dtype, bool relu);

/* A quantized tensor (per tensor: scale, zp, checked as make_per_tensor's) viewing r's integers
 * (int8 / uint8 / int32) where they lie, r's strides kept: no copy. Scoped as a ts_* result; NULL
 * with the error set. */
ts_tensor *tsi_quantized_view(const char *op, ts_tensor *r, double scale, int64_t zp);
/* The plain integers of quantized q (qint8 / quint8 / qint32) as a view of q's memory, q's
 * strides kept: no copy. Scoped as a ts_* result; NULL with the error set. */
ts_tensor *tsi_int_view(const char *op, ts_tensor *q);

#endif /* TS_OPS_QUANT_INTERNAL_H */
