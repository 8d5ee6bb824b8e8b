/* ops_quantize.c — ONNX's QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (per-tensor
 * or per-axis scales and zero points; uint8, int8, uint16 and int16), composed from Tessera's ops
 * so they run on any device. The integer products on quantized operands are ops_qoperator.c's. */
#include <math.h>
#include <stdlib.h>

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

/* ------------------------------------------------------------------ 4-bit and blocked (opset 21)
 * INT4 / UINT4 initializers are held one value a byte as int8 / uint8 (tensor_proto.c); the
 * value's onnx_type says which, and QuantizeLinear saturates to [-8, 7] / [0, 15] for them (or
 * for opset 21's output_dtype). block_size > 0: a scale and zero point of x's rank, x's dims but
 * ceil(D / block_size) on axis, each value for block_size consecutive elements along axis. */

/* an initializer's INT4 / UINT4 (through enclosing graphs), else 0 */
static int32_t value_onnx_type(const tso_ctx *c, int v) {
    while (c && v >= 0 && v < c->graph->n_values) {
        const tso_value *tv = &c->graph->values[v];
        if (tv->kind != TSO_V_OUTER) return tv->onnx_type;
        v = tv->outer, c = c->outer;
    }
    return 0;
}

/* the ONNX element type QuantizeLinear writes: the zero point's, else output_dtype (uint8 when
 * 0); 0 with the error naming the node when output_dtype is one Tessera lacks or disagrees */
static int32_t quant_out_onnx_type(const tso_ctx *c, const tso_node *n, ts_tensor *zp) {
    const int64_t od = tso_attr_int(n, "output_dtype", 0);
    int32_t zt = 0;
    if (zp)
        zt = value_onnx_type(c, n->in[2]) ? value_onnx_type(c, n->in[2])
                                          : tso_dtype_to_onnx(ts_dtype_of(zp));
    if (zp && od && od != zt)
        return tso_fail(n, TS_ERR_ARG, "output_dtype %lld and the zero point's type %s differ",
                        (long long)od, tso_onnx_type_name(zt)),
               0;
    if (zp) return zt;
    switch (od) {
    case 0:
        return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case TSO_ONNX_UINT4:
    case TSO_ONNX_INT4:
        return (int32_t)od;
    default:
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "output_dtype %lld (%s): uint8, int8, uint16, int16, uint4 and int4 "
                        "are supported",
                        (long long)od, tso_onnx_type_name((int32_t)od)),
               0;
    }
}

/* QuantizeLinear takes the path below: a 4-bit output, output_dtype or block_size */
static bool quant_special(const tso_ctx *c, const tso_node *n) {
    const int32_t zt = n->n_in > 2 && n->in[2] >= 0 ? value_onnx_type(c, n->in[2]) : 0;
    return zt || tso_attr_int(n, "output_dtype", 0) || tso_attr_int(n, "block_size", 0);
}

/* v (a scale or zero point, named what) for x: per tensor / per axis (quant_param), or in blocks
 * of block_size along axis, repeated to x's shape */
static ts_tensor *block_param(const tso_node *n, ts_tensor *v, ts_tensor *x, const char *what) {
    const int64_t bs = tso_attr_int(n, "block_size", 0);
    if (bs == 0) return quant_param(n, v, x);
    const int r = ts_ndim(x);
    const int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 1), r, false);
    if (axis < 0) return NULL;
    if (bs < 0) return tso_fail(n, TS_ERR_ARG, "block_size %lld is negative", (long long)bs), NULL;
    const ts_shape xs = ts_shape_of(x), vs = ts_shape_of(v);
    const int64_t nb = (xs.dims[axis] + bs - 1) / bs;
    bool fits = vs.ndim == r;
    for (int d = 0; fits && d < r; d++) fits = vs.dims[d] == (d == axis ? nb : xs.dims[d]);
    if (!fits)
        return tso_fail(n, TS_ERR_SHAPE,
                        "%s %s does not fit input %s in blocks of %lld on axis %d (x's dims with "
                        "ceil(%lld / %lld) = %lld on axis %d)",
                        what, tsi_desc(v), tsi_desc(x), (long long)bs, axis,
                        (long long)xs.dims[axis], (long long)bs, (long long)nb, axis),
               NULL;
    ts_tensor *t = ts_narrow(ts_repeat_interleave(v, bs, true, axis), axis, 0, xs.dims[axis]);
    return t ? t : (tso_fail_pending(n), NULL);
}

/* QuantizeLinear to a 4-bit, output_dtype or blocked output: saturate(round_half_even(x / scale)
 * + zp) in the output type's range; a zero or non-finite scale is refused (x / 0 is no value) */
static bool run_quantize_special(tso_ctx *c, const tso_node *n, ts_tensor *const *in,
                                 ts_tensor **out) {
    const int32_t ot = quant_out_onnx_type(c, n, in[2]);
    if (!ot) return false;
    double lo, hi;
    const bool four = ot == TSO_ONNX_INT4 || ot == TSO_ONNX_UINT4;
    const ts_dtype qt = four ? (ot == TSO_ONNX_INT4 ? TS_I8 : TS_U8) : tso_dtype_from_onnx(ot);
    if (!quant_range(qt, &lo, &hi))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "zero point of type %s", tsi_desc(in[2]));
    if (four) lo = ot == TSO_ONNX_INT4 ? -8 : 0, hi = ot == TSO_ONNX_INT4 ? 7 : 15;
    if (!ts_dtype_is_floating(ts_dtype_of(in[1])))
        return tso_fail(n, TS_ERR_DTYPE, "y_scale %s must be floating point", tsi_desc(in[1]));
    ts_tensor *scale = block_param(n, in[1], in[0], "y_scale");
    ts_tensor *zp = in[2] ? block_param(n, in[2], in[0], "y_zero_point") : NULL;
    if (!scale || (in[2] && !zp)) return false;
    /* the scale's values on the host: none zero or non-finite */
    const int64_t ns = ts_numel(in[1]);
    double *sv = malloc((size_t)(ns ? ns : 1) * sizeof *sv);
    if (!sv) return tso_fail(n, TS_ERR_OOM, "out of host memory for y_scale");
    ts_status st =
        ts_copy_to_host(ts_to(ts_to_dtype(in[1], TS_F64), ts_cpu()), sv, (size_t)ns * sizeof *sv);
    int64_t bad = -1;
    for (int64_t i = 0; st == TS_OK && i < ns && bad < 0; i++)
        if (sv[i] == 0 || !isfinite(sv[i])) bad = i;
    const double badv = bad >= 0 ? sv[bad] : 0;
    free(sv);
    if (st != TS_OK) return tso_fail_pending(n);
    if (bad >= 0)
        return tso_fail(n, TS_ERR_ARG, "y_scale[%lld] is %g: a scale must be finite and nonzero",
                        (long long)bad, badv);
    ts_tensor *q = ts_round(ts_div(ts_to_dtype(in[0], ts_dtype_of(scale)), scale));
    q = ts_to_dtype(q, TS_F64);
    if (zp) q = ts_add(q, ts_to_dtype(zp, TS_F64));
    TSO_DONE(ts_to_dtype(ts_clamp(q, lo, hi), qt));
}

/* DequantizeLinear in blocks: (x - zp) * scale in float32, in the scale's type */
static bool run_dequantize_blocked(const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    ts_tensor *scale = block_param(n, in[1], in[0], "x_scale");
    ts_tensor *zp = in[2] ? block_param(n, in[2], in[0], "x_zero_point") : NULL;
    if (!scale || (in[2] && !zp)) return false;
    ts_tensor *dx = ts_to_dtype(in[0], TS_F32);
    if (zp) dx = ts_sub(dx, ts_to_dtype(zp, TS_F32));
    TSO_DONE(ts_to_dtype(ts_mul(dx, ts_to_dtype(scale, TS_F32)), ts_dtype_of(in[1])));
}

TSO_RUN(run_quantize) {
    if (quant_special(c, n)) return run_quantize_special(c, n, in, out);
    if (!check_zero_point(n, in[2])) return false;
    /* float32 to uint8 / int8 on the cpu: one pass, the same bytes (src/ops/quantize_linear.c) */
    const ts_dtype zt = in[2] ? ts_dtype_of(in[2]) : TS_U8;
    if (ts_dtype_of(in[0]) == TS_F32 && ts_dtype_of(in[1]) == TS_F32 &&
        (zt == TS_U8 || zt == TS_I8) && tsi_device(in[0]).type == TS_CPU &&
        tsi_device(in[1]).type == TS_CPU && (!in[2] || tsi_device(in[2]).type == TS_CPU))
        TSO_DONE(ts_quantize_linear(in[0], in[1], in[2], (int)tso_attr_int(n, "axis", 1)));
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
    if (tso_attr_int(n, "block_size", 0)) return run_dequantize_blocked(n, in, out);
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
