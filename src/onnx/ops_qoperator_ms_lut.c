/* ops_qoperator_ms_lut.c — com.microsoft's QLinearSigmoid, QLinearLeakyRelu and QLinearConcat:
 * ORT computes each as a 256-entry lookup table (qlinear_lookup_table.cc), built in float32 from
 * the dequantized bit patterns and quantized by MlasQuantizeLinear (tso_qms_lookup). */
#include <math.h>
#include <stdio.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"

/* MLAS's logistic (logistic.cpp, Eigen's rational polynomial) as its FMA3 kernel on x86-64 runs
 * it: every multiply-add one fma in float32, then p / q + 0.5 clamped to [0, 1] */
static void logistic(float *v, int count, const void *arg) {
    (void)arg;
    static const float a9 = 4.37031012579801e-11f, a7 = 1.15627324459942e-07f,
                       a5 = 6.08574864600143e-05f, a3 = 8.51377133304701e-03f,
                       a1 = 2.48287947061529e-01f, b10 = 6.10247389755681e-13f,
                       b8 = 5.76102136993427e-09f, b6 = 6.29106785017040e-06f,
                       b4 = 1.70198817374094e-03f, b2 = 1.16817656904453e-01f,
                       b0 = 9.93151921023180e-01f;
    for (int i = 0; i < count; i++) {
        float x = v[i] < -18.0f ? -18.0f : v[i] > 18.0f ? 18.0f : v[i];
        const float x2 = x * x;
        float p = fmaf(x2, a9, a7);
        p = fmaf(p, x2, a5);
        p = fmaf(p, x2, a3);
        p = fmaf(p, x2, a1);
        p = p * x;
        float q = fmaf(x2, b10, b8);
        q = fmaf(q, x2, b6);
        q = fmaf(q, x2, b4);
        q = fmaf(q, x2, b2);
        q = fmaf(q, x2, b0);
        const float y = p / q + 0.5f;
        v[i] = y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y;
    }
}

static void leaky_relu(float *v, int count, const void *arg) {
    const float alpha = *(const float *)arg;
    for (int i = 0; i < count; i++) v[i] = v[i] >= 0.0f ? v[i] : alpha * v[i];
}

/* X, X_scale, X_zero_point, Y_scale, Y_zero_point */
static bool run_table(const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                      void (*f)(float *, int, const void *), const void *arg) {
    float xs, ys;
    int64_t xz, yz;
    if (!tso_qms_unary_params(n, in, true, &xs, &xz, &ys, &yz)) return false;
    TSO_DONE(tso_qms_lookup(in[0], xs, xz, ys, yz, f, arg));
}

TSO_QMS_RUN(tso_qms_run_sigmoid) {
    (void)c;
    return run_table(n, in, out, logistic, NULL);
}

TSO_QMS_RUN(tso_qms_run_leaky_relu) {
    (void)c;
    const float alpha = tso_attr_float(n, "alpha", 0.01f);
    return run_table(n, in, out, leaky_relu, &alpha);
}

/* Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input, along axis: an input with
 * Y's scale and zero point copied, each other through its identity table */
TSO_QMS_RUN(tso_qms_run_concat) {
    (void)c;
    enum { MAX_IN = 1024 };
    const int count = (n->n_in - 2) / 3;
    if (n->n_in < 5 || (n->n_in - 2) % 3 != 0)
        return tso_fail(n, TS_ERR_ARG,
                        "the inputs must be Y_scale, Y_zero_point and (X, "
                        "X_scale, X_zero_point) per input, got %d inputs",
                        n->n_in);
    if (count > MAX_IN)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%d inputs: at most %d", count, MAX_IN);
    if (!in[1]) return tso_fail(n, TS_ERR_ARG, "the input Y_zero_point is required");
    if (!tso_qms_check_q(n, in[1], "Y_zero_point")) return false;
    const ts_dtype dt = ts_dtype_of(in[1]);
    float ys;
    int64_t yz;
    if (!tso_qms_scale(n, in[0], "Y_scale", &ys) || !tso_qms_zp(n, in[1], dt, "Y_zero_point", &yz))
        return false;
    ts_tensor *parts[MAX_IN];
    for (int i = 0; i < count; i++) {
        ts_tensor *x = in[2 + 3 * i];
        char what[3][32];
        snprintf(what[0], sizeof what[0], "X%d", i);
        snprintf(what[1], sizeof what[1], "X%d_scale", i);
        snprintf(what[2], sizeof what[2], "X%d_zero_point", i);
        float xs;
        int64_t xz;
        if (!tso_qms_check_q(n, x, what[0]) || !tso_qms_scale(n, in[3 + 3 * i], what[1], &xs) ||
            !tso_qms_zp(n, in[4 + 3 * i], dt, what[2], &xz))
            return false;
        if (ts_dtype_of(x) != dt)
            return tso_fail(n, TS_ERR_DTYPE, "%s %s and Y_zero_point %s differ in type", what[0],
                            tsi_desc(x), tsi_desc(in[1]));
        parts[i] = xs == ys && xz == yz ? x : tso_qms_lookup(x, xs, xz, ys, yz, NULL, NULL);
        if (!parts[i]) return tso_fail_pending(n);
    }
    const int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(parts[0]), false);
    if (axis < 0) return false;
    TSO_DONE(ts_cat(parts, count, axis));
}
