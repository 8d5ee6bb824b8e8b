/* ops_quantize.c — ONNX's QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (per-tensor
 * or per-axis scales and zero points; uint8, int8, uint16 and int16), composed from Tessera's ops
 * so they run on any device. The integer products on quantized operands are ops_qoperator.c's. */
#include "onnx/onnx_internal.h"
#include "tessera/quant.h"

/* ------------------------------------------------------------------ quantization */
/* QuantizeLinear to uint8, int8, uint16 or int16 (the zero point's type; uint8 without one). */

/* a scale or zero point shaped to broadcast against x: one value, or one per element of axis */
static ts_tensor *quant_param(const tso_node *n, ts_tensor *v, ts_tensor *x) {
    int r = ts_ndim(x);
    int64_t count = ts_numel(v);
    int64_t axis = tso_attr_int(n, "axis", 1);
    if (axis < 0) axis += r;
    bool per_axis = ts_ndim(v) == 1 && axis >= 0 && axis < r && ts_shape_of(x).dims[axis] == count;
    if (count != 1 && !per_axis)
        return tso_fail(n, TS_ERR_SHAPE, "scale/zero point %s does not fit input %s on axis %lld",
                        tsi_desc(v), tsi_desc(x), (long long)axis),
               NULL;
    ts_shape s = {.ndim = r};
    for (int d = 0; d < r; d++) s.dims[d] = d == axis ? count : 1;
    return ts_reshape(v, s);
}

/* the quantized types and their saturation ranges */
static bool quant_range(ts_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case TS_U8:
        *lo = 0, *hi = 255;
        return true;
    case TS_I8:
        *lo = -128, *hi = 127;
        return true;
    case TS_U16:
        *lo = 0, *hi = 65535;
        return true;
    case TS_I16:
        *lo = -32768, *hi = 32767;
        return true;
    default:
        return false;
    }
}

static bool check_zero_point(const tso_node *n, ts_tensor *zp) {
    double lo, hi;
    if (!zp || quant_range(ts_dtype_of(zp), &lo, &hi)) return true;
    return tso_fail(n, TS_ERR_UNSUPPORTED,
                    "zero point of type %s (uint8, int8, uint16 and int16 are supported)",
                    tsi_desc(zp));
}

/* saturate(round_half_even(x / scale) + zp) as zp's type (uint8 without one); x / scale in the
 * scale's float type */
static ts_tensor *quantize(ts_tensor *x, ts_tensor *scale, ts_tensor *zp) {
    ts_tensor *q = ts_round(ts_div(ts_to_dtype(x, ts_dtype_of(scale)), scale));
    q = ts_to_dtype(q, TS_F64);
    if (zp) q = ts_add(q, ts_to_dtype(zp, TS_F64));
    const ts_dtype qt = zp ? ts_dtype_of(zp) : TS_U8;
    double lo = 0, hi = 255;
    quant_range(qt, &lo, &hi);
    return ts_to_dtype(ts_clamp(q, lo, hi), qt);
}

TSO_RUN(run_quantize) {
    (void)c;
    if (!check_zero_point(n, in[2])) return false;
    ts_tensor *scale = quant_param(n, in[1], in[0]);
    ts_tensor *zp = in[2] ? quant_param(n, in[2], in[0]) : NULL;
    if (!scale || (in[2] && !zp)) return tso_fail_pending(n);
    TSO_DONE(quantize(in[0], scale, zp));
}

/* (x - zp) * scale in float32, in the scale's type */
TSO_RUN(run_dequantize) {
    (void)c;
    if (in[2] && ts_dtype_of(in[2]) != ts_dtype_of(in[0]))
        return tso_fail(n, TS_ERR_ARG, "x %s and zero point %s differ in type", tsi_desc(in[0]),
                        tsi_desc(in[2]));
    ts_tensor *scale = quant_param(n, in[1], in[0]);
    ts_tensor *zp = in[2] ? quant_param(n, in[2], in[0]) : NULL;
    if (!scale || (in[2] && !zp)) return tso_fail_pending(n);
    ts_tensor *dx = ts_to_dtype(in[0], TS_F32);
    if (zp) dx = ts_sub(dx, ts_to_dtype(zp, TS_F32));
    TSO_DONE(ts_to_dtype(ts_mul(dx, ts_to_dtype(scale, TS_F32)), ts_dtype_of(in[1])));
}

/* the scale from x's range including 0 (1 when it is empty), the zero point that maps 0 exactly:
 * ts_dynamic_quantize_linear (src/ops/dynamic_quantize_linear.c) */
TSO_RUN(run_dynamic_quantize) {
    (void)c;
    out[0] = ts_dynamic_quantize_linear(ts_to_dtype(in[0], TS_F32), &out[1], &out[2]);
    if (out[1]) out[1] = ts_to_dtype(out[1], ts_dtype_of(in[0]));
    return (out[0] && out[1] && out[2]) || tso_fail_pending(n);
}

const tso_op_def tso_ops_quantize[] = {
    {"QuantizeLinear", 10, run_quantize, NULL, false},
    {"DequantizeLinear", 10, run_dequantize, NULL, false},
    {"DynamicQuantizeLinear", 11, run_dynamic_quantize, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
