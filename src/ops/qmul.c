/* qmul.c — quantized mul (torch.ops.quantized.mul / mul_relu, QFunctional.mul): PyTorch's x86
 * arithmetic composed of ops that exist, each step exact but the one float32 product, so the bits
 * are PyTorch's (include/tessera/quant.h). */
#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/elementwise.h"
#include "tessera/quant.h"

/* q - zp as float64 (exact for int8 / uint8) */
static ts_tensor *centred(ts_tensor *q) {
    return ts_sub(ts_to_dtype(ts_int_repr(q), TS_F64),
                  ts_full(TS_SHAPE(), (double)q->quant->zero_points[0],
                          (ts_opts){.dtype = TS_F64, .device = tsi_device(q)}));
}

ts_tensor *ts_quantized_mul(ts_tensor *a, ts_tensor *b, double out_scale, int64_t out_zero_point,
                            bool relu) {
    const char *op = relu ? "quantized_mul_relu" : "quantized_mul";
    tsi_init();
    if (!tsi_quant_pt_input(op, a, "input") || !tsi_quant_pt_input(op, b, "other")) return NULL;
    if (a->dtype != b->dtype || a->dtype == TS_QINT32)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: input %s and other %s must have one dtype, qint8 or quint8", op,
                             tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_tensor *ts[2] = {a, b};
    ts_device dev;
    if (!tsi_quant_binary_out(op, ts, out_scale, out_zero_point, &dev)) return NULL;
    int64_t lo, hi;
    tsi_quant_range(a->dtype, &lo, &hi);
    if (relu && out_zero_point > lo) lo = out_zero_point;
    /* fbgemm's multiplier, in float32 in this order */
    const float sa = (float)a->quant->scales[0], sb = (float)b->quant->scales[0];
    const float m = sa * sb * (1.0f / (float)out_scale);
    ts_tensor *r = NULL;
    ts_scope_begin();
    /* c = (a - za)(b - zb) exactly (|c| <= 2^16), as float32 (exact), times m rounded once, then
     * round half to even, + zp, clamped: requantize_from_int's steps */
    ts_tensor *c = ts_to_dtype(ts_mul(centred(a), centred(b)), TS_F32);
    ts_tensor *y = c ? ts_mul(c, ts_full(TS_SHAPE(), m, (ts_opts){.device = dev})) : NULL;
    y = y ? ts_clamp(ts_add_scalar(ts_round(y), (double)out_zero_point), (double)lo, (double)hi)
          : NULL;
    ts_tensor *ints = y ? ts_to_dtype(y, a->dtype == TS_QINT8 ? TS_I8 : TS_U8) : NULL;
    if (ints) r = ts_retain(ts_make_per_tensor_quantized_tensor(ints, out_scale, out_zero_point));
    ts_scope_end();
    /* traced for ONNX export (QDQ Mul): the records of the ops above are not read */
    return tsi_trace(op, ts, 2, tsi_own(r), NULL, 0, NULL, 0);
}
