/* qoperator.h — ops_qoperator.c's QLinearMatMul and QLinearConv for the QDQ rewrite
 * (rewrite_qdq.c), whose fused nodes run them. */
#ifndef TS_ONNX_QOPERATOR_H
#define TS_ONNX_QOPERATOR_H

#include "onnx/onnx_internal.h"

/* QLinearMatMul's inputs (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> out[0]; relu:
 * the lower bound of the saturation raised to y_zp. false with the error naming the node. */
bool tso_q_run_linear_matmul(const tso_node *n, ts_tensor *const *in, ts_tensor **out, bool relu);
/* QLinearConv's inputs (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]) and the node's
 * Conv attributes -> out[0]; relu as above */
bool tso_q_run_linear_conv(const tso_node *n, ts_tensor *const *in, ts_tensor **out, bool relu);

/* Gemm with QLinearMatMul's eight inputs and an int32 bias C [N] (ninth, optional): a per tensor,
 * b [K, N] or (transB) [N, K] per tensor or per column, alpha = beta = 1, transA = 0 (else
 * TS_ERR_UNSUPPORTED naming them); what ORT's QGemm computes for them */
bool tso_q_run_gemm(const tso_node *n, ts_tensor *const *in, ts_tensor **out);

/* com.microsoft's QLinearAdd (ops_qoperator_ms.c): A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
 * C_zp, all per tensor, in ORT's float32 arithmetic */
bool tso_q_run_linear_add(const tso_node *n, ts_tensor *const *in, ts_tensor **out);

/* a zero point of one uint8 / int8 value on the cpu read where it lies into *v (the per-run
 * parameter reads of the quantized nodes, without a converted copy); false (nothing read, no error)
 * for anything else */
static inline bool tso_q_host_byte(ts_tensor *t, int64_t *v) {
    if (!t || tsi_numel(t->shape) != 1 || tsi_device(t).type != TS_CPU) return false;
    if (t->dtype != TS_U8 && t->dtype != TS_I8) return false;
    const uint8_t b = *(const uint8_t *)tsi_kview(t).data;
    *v = t->dtype == TS_I8 ? (int64_t)(int8_t)b : (int64_t)b;
    return true;
}

#endif /* TS_ONNX_QOPERATOR_H */
