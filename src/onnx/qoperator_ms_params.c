/* qoperator_ms_params.c — the per-tensor scales and zero points of com.microsoft's quantized
 * operators, and ORT's float32 quantization and lookup tables (qoperator_ms.h). */
#include <math.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"

bool tso_qms_check_q(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_U8 && ts_dtype_of(t) != TS_I8)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be uint8 or int8, got %s", what, tsi_desc(t));
    return true;
}

bool tso_qms_scale(const tso_node *n, ts_tensor *t, const char *what, float *v) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_F32 || ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one float32 (per tensor), got %s", what,
                        tsi_desc(t));
    double d;
    if (!tso_read_scalar(n, t, &d, what)) return false;
    *v = (float)d;
    return true;
}

bool tso_qms_zp(const tso_node *n, ts_tensor *t, ts_dtype dt, const char *what, int64_t *v) {
    *v = 0;
    if (!t) return true;
    if (ts_dtype_of(t) != dt || ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one %s value (per tensor), got %s", what,
                        dt == TS_I8 ? "int8" : "uint8", tsi_desc(t));
    ts_tensor *t64 = ts_to_dtype(t, TS_I64);
    return t64 ? tso_read_int(n, t64, v, what) : tso_fail_pending(n);
}

ts_tensor *tso_qms_saturate(ts_tensor *v, ts_dtype dt) {
    const bool s8 = dt == TS_I8;
    return ts_to_dtype(ts_clamp(ts_round(v), s8 ? -128 : 0, s8 ? 127 : 255), dt);
}

int tso_qms_quantize(float x, float scale, int64_t zp, ts_dtype dt) {
    const float q = x / scale; /* float32, as MLAS's divide */
    const float lo = (float)((dt == TS_I8 ? -128 : 0) - zp),
                hi = (float)((dt == TS_I8 ? 127 : 255) - zp);
    const float c = q < lo ? lo : q > hi ? hi : q;
    return (int)nearbyintf(c) + (int)zp; /* the default rounding mode: half to even */
}

ts_tensor *tso_qms_lookup(ts_tensor *x, float xs, int64_t xz, float ys, int64_t yz,
                          void (*f)(float *v, int count, const void *arg), const void *arg) {
    const ts_dtype dt = ts_dtype_of(x);
    float v[256];
    for (int i = 0; i < 256; i++) {
        const int q = dt == TS_I8 ? (int)(int8_t)(uint8_t)i : i;
        v[i] = xs * (float)(q - (int)xz);
    }
    if (f) f(v, 256, arg);
    int64_t table[256];
    for (int i = 0; i < 256; i++) table[i] = tso_qms_quantize(v[i], ys, yz, dt);
    ts_tensor *t =
        ts_tensor_i64(TS_SHAPE(256), table, (ts_opts){.dtype = TS_I64, .device = ts_device_of(x)});
    /* x's bit pattern as the index: an int8 value v at v & 255 */
    ts_tensor *idx = ts_to_dtype(x, TS_I64);
    if (dt == TS_I8) idx = ts_fmod_scalar(ts_add_scalar(idx, 256), 256);
    ts_tensor *y = ts_take(t, idx);
    return y ? ts_to_dtype(y, dt) : NULL;
}

bool tso_qms_unary_params(const tso_node *n, ts_tensor *const *in, bool caps, float *xs,
                          int64_t *xz, float *ys, int64_t *yz) {
    if (!tso_qms_check_q(n, in[0], "X")) return false;
    const ts_dtype dt = ts_dtype_of(in[0]);
    return tso_qms_scale(n, in[1], caps ? "X_scale" : "x_scale", xs) &&
           tso_qms_zp(n, tso_nn_opt(n, in, 2), dt, caps ? "X_zero_point" : "x_zero_point", xz) &&
           tso_qms_scale(n, n->n_in > 3 ? in[3] : NULL, caps ? "Y_scale" : "y_scale", ys) &&
           tso_qms_zp(n, tso_nn_opt(n, in, 4), dt, caps ? "Y_zero_point" : "y_zero_point", yz);
}
