/* ops_qoperator_ms_mul.c — com.microsoft's QLinearMul and QGemm as ONNX Runtime 1.32 computes them.
 *
 * QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): MLAS's x86 kernel (qlmul.cpp):
 * the int32 product p = (A - A_zp) * (B - B_zp), ratio = A_scale * B_scale / C_scale in float32,
 * C = saturate(round_half_even((float)p * ratio + (float)C_zp)), the multiply and the add each
 * rounded to float32 (SSE2, no fma). Symmetric in A and B, so ORT's broadcast order does not
 * matter: numpy broadcasting. */
#include "onnx/ops_nn.h"
#include "onnx/qoperator.h"
#include "onnx/qoperator_ms.h"

TSO_QMS_RUN(tso_qms_run_mul) {
    (void)c;
    if (!tso_qms_check_q(n, in[0], "A") || !tso_qms_check_q(n, n->n_in > 3 ? in[3] : NULL, "B"))
        return false;
    const ts_dtype dt = ts_dtype_of(in[0]);
    if (ts_dtype_of(in[3]) != dt)
        return tso_fail(n, TS_ERR_DTYPE, "A %s and B %s differ in type", tsi_desc(in[0]),
                        tsi_desc(in[3]));
    float sa, sb, sc;
    int64_t za, zb, zc;
    if (!tso_qms_scale(n, in[1], "A_scale", &sa) ||
        !tso_qms_zp(n, tso_nn_opt(n, in, 2), dt, "A_zero_point", &za) ||
        !tso_qms_scale(n, in[4], "B_scale", &sb) ||
        !tso_qms_zp(n, tso_nn_opt(n, in, 5), dt, "B_zero_point", &zb) ||
        !tso_qms_scale(n, n->n_in > 6 ? in[6] : NULL, "C_scale", &sc) ||
        !tso_qms_zp(n, tso_nn_opt(n, in, 7), dt, "C_zero_point", &zc))
        return false;
    const float ratio = sa * sb / sc;
    /* p exact in float64 (|p| <= 2^16); each float32 rounding as a cast of the float64 result */
    ts_tensor *p = ts_mul(ts_sub_scalar(ts_to_dtype(in[0], TS_F64), (double)za),
                          ts_sub_scalar(ts_to_dtype(in[3], TS_F64), (double)zb));
    ts_tensor *v = ts_to_dtype(ts_to_dtype(ts_mul_scalar(p, (double)ratio), TS_F32), TS_F64);
    TSO_DONE(tso_qms_saturate(ts_to_dtype(ts_add_scalar(v, (double)zc), TS_F32), dt));
}

/* QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): QLinearMatMul's parameters in
 * another order, the int32 bias C third from the end (ops_qoperator.c's tso_q_run_gemm, which ORT's
 * QDQ Gemm fusion makes into this very node) */
TSO_QMS_RUN(tso_qms_run_gemm) {
    (void)c;
    ts_tensor *ys = tso_nn_opt(n, in, 7);
    if (!ys)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "no y_scale (a float32 output): only the quantized output runs");
    if (n->n_in < 9 || !tso_nn_opt(n, in, 8))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "no y_zero_point: give one (uint8 or int8)");
    ts_tensor *re[9] = {in[0], in[1], in[2], in[3], in[4], in[5], ys, in[8], tso_nn_opt(n, in, 6)};
    return tso_q_run_gemm(n, re, out);
}
