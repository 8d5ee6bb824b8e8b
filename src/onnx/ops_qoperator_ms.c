/* ops_qoperator_ms.c — ONNX Runtime's com.microsoft quantized operators that its quantizer writes
 * in QOperator format (docs/QUANTIZATION.md, "ONNX"): QLinearAdd, in ORT's own arithmetic.
 *
 * QLinearAdd(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): MLAS's x86 kernel (qladd.cpp) in
 * float32: rAC = A_scale / C_scale, rBC = B_scale / C_scale, fixed = (float)C_zp - (rAC * A_zp +
 * rBC * B_zp), C = saturate(round_half_even((fixed + A * rAC) + B * rBC)); where B is one value
 * along the innermost output dim past 1 and A is not (a bias over channels, a scalar), ORT's
 * broadcast hands MLAS a scalar B and the order is (fixed + B * rBC) + A * rAC. */
#include <stdlib.h>

#include "onnx/ops_nn.h"
#include "onnx/qoperator.h"
#include "onnx/qoperator_ms.h"
#include "tessera/quant.h"

static bool check_q(const tso_node *n, ts_tensor *t, const char *what, bool one) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_U8 && ts_dtype_of(t) != TS_I8)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be uint8 or int8, got %s", what, tsi_desc(t));
    if (one && ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one value (per tensor), got %s", what,
                        tsi_desc(t));
    return true;
}

static bool check_s(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_F32 || ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one float32 (per tensor), got %s", what,
                        tsi_desc(t));
    return true;
}

/* one value to the host as float / int64 */
static bool read_f(const tso_node *n, ts_tensor *t, float *v, const char *what) {
    double d;
    if (!tso_read_scalar(n, t, &d, what)) return false;
    *v = (float)d;
    return true;
}

static bool read_z(const tso_node *n, ts_tensor *t, int64_t *v, const char *what) {
    if (!t) return *v = 0, true;
    if (tso_q_host_byte(t, v)) return true; /* one cpu byte: read where it lies */
    ts_tensor *t64 = ts_to_dtype(t, TS_I64);
    return t64 ? tso_read_int(n, t64, v, what) : tso_fail_pending(n);
}

static bool same_shape(ts_tensor *a, ts_tensor *b) {
    if (ts_ndim(a) != ts_ndim(b)) return false;
    for (int d = 0; d < ts_ndim(a); d++)
        if (ts_size(a, d) != ts_size(b, d)) return false;
    return true;
}

bool tso_q_run_linear_add(const tso_node *n, ts_tensor *const *in, ts_tensor **out) {
    ts_tensor *az = tso_nn_opt(n, in, 2), *bz = tso_nn_opt(n, in, 5), *cz = tso_nn_opt(n, in, 7);
    if (!check_q(n, in[0], "A", false) || !check_s(n, in[1], "A_scale") ||
        (az && !check_q(n, az, "A_zero_point", true)) || !check_q(n, in[3], "B", false) ||
        !check_s(n, in[4], "B_scale") || (bz && !check_q(n, bz, "B_zero_point", true)) ||
        !check_s(n, in[6], "C_scale") || (cz && !check_q(n, cz, "C_zero_point", true)))
        return false;
    if (ts_dtype_of(in[3]) != ts_dtype_of(in[0]))
        return tso_fail(n, TS_ERR_DTYPE, "A %s and B %s differ in type", tsi_desc(in[0]),
                        tsi_desc(in[3]));
    float sa, sb, sc;
    int64_t za, zb, zc;
    if (!read_f(n, in[1], &sa, "A_scale") || !read_f(n, in[4], &sb, "B_scale") ||
        !read_f(n, in[6], &sc, "C_scale") || !read_z(n, az, &za, "A_zero_point") ||
        !read_z(n, bz, &zb, "B_zero_point") || !read_z(n, cz, &zc, "C_zero_point"))
        return false;
    ts_tensor *a = in[0], *b = in[3];
    float ra = sa / sc, rb = sb / sc;
    /* fixed = (float)C_zp - (rAC * A_zp + rBC * B_zp), each step in float32 */
    float fixed = (float)zc - (ra * (float)za + rb * (float)zb);
    /* ORT's broadcast swaps a one-value A into B's place */
    if (ts_numel(a) == 1 && ts_numel(b) != 1) {
        ts_tensor *t = a;
        a = b, b = t;
        float r = ra;
        ra = rb, rb = r;
    }
    /* v = fma(A, rAC, fma(B, rBC, fixed)) in float32: each fma as float32(double(x) * y + z), exact
     * here (x an 8-bit integer, y and z float32 in MLAS's ratio range [2^-14, 256): the double sum
     * spans < 53 bits), so rounded once, as the AVX2 kernel's vfmadd */
    /* one pass in C (ts_qlinear_add) on the host's kernels; broadcasting and other devices: the
     * same arithmetic in tensor ops */
    const ts_device_type dt = ts_device_of(a).type;
    if ((dt == TS_CPU || dt == TS_SIM) &&
        (ts_numel(b) == 1 ? ts_ndim(b) <= ts_ndim(a) : same_shape(a, b)))
        TSO_DONE(ts_qlinear_add(a, b, ra, rb, fixed));
    ts_tensor *t = ts_to_dtype(
        ts_add_scalar(ts_mul_scalar(ts_to_dtype(b, TS_F64), (double)rb), (double)fixed), TS_F32);
    ts_tensor *v = ts_to_dtype(
        ts_add(ts_mul_scalar(ts_to_dtype(a, TS_F64), (double)ra), ts_to_dtype(t, TS_F64)), TS_F32);
    const bool s8 = ts_dtype_of(in[0]) == TS_I8;
    TSO_DONE(ts_to_dtype(ts_clamp(ts_round(v), s8 ? -128 : 0, s8 ? 127 : 255), s8 ? TS_I8 : TS_U8));
}

TSO_RUN(run_qlinear_add) {
    (void)c;
    return tso_q_run_linear_add(n, in, out);
}

const tso_op_def tso_ops_ms[] = {
    {"QLinearAdd", 1, run_qlinear_add, NULL, false},
    /* ops_qoperator_ms_mul.c, _pool.c, _avgpool.c, _lut.c */
    {"QLinearMul", 1, tso_qms_run_mul, NULL, false},
    {"QGemm", 1, tso_qms_run_gemm, NULL, false},
    {"QLinearGlobalAveragePool", 1, tso_qms_run_global_average_pool, NULL, false},
    {"QLinearAveragePool", 1, tso_qms_run_average_pool, NULL, false},
    {"QLinearSigmoid", 1, tso_qms_run_sigmoid, NULL, false},
    {"QLinearLeakyRelu", 1, tso_qms_run_leaky_relu, NULL, false},
    {"QLinearConcat", 1, tso_qms_run_concat, NULL, false},
    {"QLinearSoftmax", 1, tso_qms_run_softmax, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
