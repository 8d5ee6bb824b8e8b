/* quant_internal.h — what quantize.c and qlinear.c share. */
#ifndef TS_OPS_QUANT_INTERNAL_H
#define TS_OPS_QUANT_INTERNAL_H

#include "core/internal.h"

/* Whether t's device has the quantized kernels and is not capturing a graph (they are not
 * recorded): TS_ERR_UNSUPPORTED / TS_ERR_STATE naming op and t otherwise. */
bool tsi_quant_kernel_ok(const char *op, const ts_tensor *t);

/* ts_quantize_per_tensor's work under op's name, x float32 checked: a reference the caller holds,
 * in no scope */
ts_tensor *tsi_quantize_per_tensor(const char *op, ts_tensor *x, double scale, int64_t zero_point,
                                   ts_dtype dtype);

/* Whether scale / zp are usable as an output's parameters for dtype dt (TS_ERR_ARG naming op) */
bool tsi_quant_out_params(const char *op, ts_dtype dt, double scale, int64_t zp);

/* A new contiguous tensor of dtype dt (qint8 / quint8 / qint32) quantized per tensor with scale
 * and zp (checked by the caller); NULL with the error set */
ts_tensor *tsi_new_quantized_pt(const char *op, ts_shape s, ts_dtype dt, ts_device dev,
                                double scale, int64_t zp);

#endif /* TS_OPS_QUANT_INTERNAL_H */
