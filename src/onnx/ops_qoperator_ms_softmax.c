/* ops_qoperator_ms_softmax.c — com.microsoft's QLinearSoftmax as ONNX Runtime 1.32's CPU kernel
 * (contrib_ops/cpu/quantization/qlinear_softmax.cc) computes it, bit for bit:
 *   a table of 256 float32 exponentials over the code distance k = 255 - (xmax - x):
 *     shift = max(0, log(FLT_MAX / (float)D) - 5) / X_scale     (double; the float log)
 *     e[k] = (float)exp((k - 255 + shift) * X_scale)            (double)
 *   per row of D values (opset < 13: the dims from axis flattened; else axis, moved last):
 *     sum = e[x_0] + e[x_1] + ... in float32, in row order
 *     y = saturate(nearbyintf((e[x] / sum) * floorf(1.0f / Y_scale)) + Y_zero_point)
 *   (ORT 1.32's outputs, tests/data/onnx_quant/gen_ort_qlinear_softmax.py: the source of some
 *   versions computes (e[x] * Ys) / sum and wraps int8, which overflows at D = 1 where ORT 1.32
 *   gives Ys + Y_zero_point saturated; e[x] * (Ys / sum) gave the same integers on every case
 *   tried, no input told the two apart).
 * X_zero_point does not enter (the softmax is shift-free). Computed on the host. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"

/* ORT's table, indexed by k = 255 - (xmax - x) */
static void exp_table(float *e, float xs, size_t d) {
    double shift = logf(FLT_MAX / (float)d);
    shift = fmax(0.0, shift - 5.0) / (double)xs;
    for (int k = 0; k < 256; k++) e[k] = (float)exp(((double)k - 255 + shift) * (double)xs);
}

/* rows of d values of x (uint8 or int8 bytes) into y */
static void softmax_rows(const uint8_t *x, uint8_t *y, size_t rows, size_t d, bool s8,
                         const float *e, float ys, int yz) {
    const int lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    for (size_t r = 0; r < rows; r++, x += d, y += d) {
        int xmax = -1000;
        for (size_t i = 0; i < d; i++) {
            const int v = s8 ? (int8_t)x[i] : x[i];
            if (v > xmax) xmax = v;
        }
        float sum = 0;
        for (size_t i = 0; i < d; i++) sum += e[255 - (xmax - (s8 ? (int8_t)x[i] : x[i]))];
        for (size_t i = 0; i < d; i++) {
            const float vt = e[255 - (xmax - (s8 ? (int8_t)x[i] : x[i]))];
            const float q = nearbyintf((vt / sum) * ys); /* two float32 steps */
            const int v = q > 1e6f ? 1000000 : (int)q;   /* q >= 0: vt > 0, sum >= vt */
            const int y8 = v + yz < lo ? lo : v + yz > hi ? hi : v + yz;
            y[i] = (uint8_t)(y8 & 255);
        }
    }
}

/* X, X_scale, X_zero_point, Y_scale, Y_zero_point; attributes opset (required) and axis */
TSO_QMS_RUN(tso_qms_run_softmax) {
    (void)c;
    ts_tensor *x = in[0];
    float xs, ys;
    int64_t xz, yz;
    if (!tso_qms_unary_params(n, in, true, &xs, &xz, &ys, &yz)) return false;
    const ts_dtype dt = ts_dtype_of(x);
    const bool s8 = dt == TS_I8;
    if (!tso_attr(n, "opset"))
        return tso_fail(n, TS_ERR_ARG, "the attribute opset is required (ORT's too)");
    if (!(xs > 0) || !isfinite(xs))
        return tso_fail(n, TS_ERR_ARG, "X_scale %g: it must be positive and finite", (double)xs);
    if (!(ys > 0) || !isfinite(ys))
        return tso_fail(n, TS_ERR_ARG, "Y_scale %g: it must be positive and finite", (double)ys);
    const bool old = tso_attr_int(n, "opset", 13) < 13;
    const int r = ts_ndim(x);
    if (r == 0) return tso_fail(n, TS_ERR_SHAPE, "X is a scalar: softmax needs an axis");
    const int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", old ? 1 : -1), r, false);
    if (axis < 0) return false;
    /* rows of d values, contiguous: opset < 13 the dims from axis flattened; else axis last */
    const bool moved = !old && axis != r - 1;
    ts_tensor *xt = ts_contiguous(ts_to(moved ? ts_transpose(x, axis, r - 1) : x, ts_cpu()));
    if (!xt) return tso_fail_pending(n);
    const ts_shape s = ts_shape_of(xt);
    size_t d = 1;
    for (int k = old ? axis : r - 1; k < r; k++) d *= (size_t)s.dims[k];
    const size_t count = (size_t)ts_numel(xt);
    uint8_t *buf = malloc(2 * (count ? count : 1));
    if (!buf) return tso_fail(n, TS_ERR_OOM, "out of host memory (%zu bytes)", 2 * count);
    if (ts_copy_to_host(xt, buf, count) != TS_OK) {
        free(buf);
        return tso_fail_pending(n);
    }
    if (count && d) {
        float e[256];
        exp_table(e, xs, d);
        softmax_rows(buf, buf + count, count / d, d, s8, e, floorf(1.0f / ys), (int)yz);
    }
    ts_tensor *y = tsi_from_host("QLinearSoftmax", s, dt, buf + count, ts_cpu());
    free(buf);
    if (!y) return tso_fail_pending(n);
    y = tsi_own(y);
    if (y && moved) y = ts_contiguous(ts_transpose(y, axis, r - 1));
    TSO_DONE(y ? ts_to(y, ts_device_of(x)) : NULL);
}
