/* qoperator_ms.h — what the com.microsoft quantized operator files (ops_qoperator_ms*.c) share:
 * their run functions, listed in ops_qoperator_ms.c's table, and the per-tensor parameter helpers
 * (qoperator_ms_params.c). Every formula is ONNX Runtime 1.32's CPU kernel's, in float32. */
#ifndef TS_ONNX_QOPERATOR_MS_H
#define TS_ONNX_QOPERATOR_MS_H

#include "onnx/onnx_internal.h"

#define TSO_QMS_RUN(name)                                                                          \
    bool name(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out)

/* a quantized tensor (uint8 or int8) named what; false with the error naming the node */
bool tso_qms_check_q(const tso_node *n, ts_tensor *t, const char *what);
/* one float32 scale (required) / one zero point of type dt (NULL: 0), read to the host */
bool tso_qms_scale(const tso_node *n, ts_tensor *t, const char *what, float *v);
bool tso_qms_zp(const tso_node *n, ts_tensor *t, ts_dtype dt, const char *what, int64_t *v);
/* a unary quantized node's X (checked) and its (X, x_scale, x_zero_point, y_scale, y_zero_point)
 * parameters; caps: the inputs are named X_scale ... Y_zero_point in the operator's schema (the
 * table operators and QLinearSoftmax), else x_scale ... (the pools) */
bool tso_qms_unary_params(const tso_node *n, ts_tensor *const *in, bool caps, float *xs,
                          int64_t *xz, float *ys, int64_t *yz);
/* v (any float or integer tensor holding integers or not) rounded half to even, clamped to dt's
 * range (uint8 / int8) and cast */
ts_tensor *tso_qms_saturate(ts_tensor *v, ts_dtype dt);
/* MLAS's MlasQuantizeLinear of one float32: saturate(round_half_even(x / scale) + zp) */
int tso_qms_quantize(float x, float scale, int64_t zp, ts_dtype dt);
/* ORT's QlinearBuildLookupTable: table[i] = quantize(f(x_scale * ((T)i - x_zp))) for the 256 bit
 * patterns i of T (f NULL: identity; f gets the 256 dequantized values in place), then x's values
 * looked up: the output, of x's type and shape */
ts_tensor *tso_qms_lookup(ts_tensor *x, float xs, int64_t xz, float ys, int64_t yz,
                          void (*f)(float *v, int count, const void *arg), const void *arg);

TSO_QMS_RUN(tso_qms_run_sigmoid);
TSO_QMS_RUN(tso_qms_run_leaky_relu);
TSO_QMS_RUN(tso_qms_run_concat);
TSO_QMS_RUN(tso_qms_run_mul);
TSO_QMS_RUN(tso_qms_run_global_average_pool);
TSO_QMS_RUN(tso_qms_run_average_pool);
TSO_QMS_RUN(tso_qms_run_gemm);
TSO_QMS_RUN(tso_qms_run_softmax); /* ops_qoperator_ms_softmax.c */

#endif /* TS_ONNX_QOPERATOR_MS_H */
