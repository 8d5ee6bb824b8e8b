/* linalg_householder.c — torch.linalg.householder_product (orgqr): the first n columns of
 * H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i the i-th column of A below the diagonal with a 1 on
 * it. Composed reflector by reflector of tril, matmul and mul, so differentiable in A and tau on
 * every device (issue 76). */
#include "ops/linalg_internal.h"

ts_tensor *ts_linalg_householder_product(ts_tensor *A, ts_tensor *tau) {
    const char *op = "linalg.householder_product";
    tsi_init();
    if (!tsi_check_input(op, A, "input") || !tsi_check_input(op, tau, "tau")) return NULL;
    if (A->shape.ndim < 2) {
        tsi_error_set(TS_ERR_SHAPE, "torch.%s: input must have at least 2 dimensions.", op);
        return NULL;
    }
    if (tau->shape.ndim != A->shape.ndim - 1) {
        tsi_error_set(TS_ERR_SHAPE,
                      "torch.%s: Expected tau to have one dimension less than input, but got "
                      "tau.ndim equal to %d and input.ndim is equal to %d",
                      op, tau->shape.ndim, A->shape.ndim);
        return NULL;
    }
    for (int i = 0; i < tau->shape.ndim - 1; i++)
        if (tau->shape.dims[i] != A->shape.dims[i]) {
            tsi_error_set(TS_ERR_SHAPE,
                          "torch.%s: Expected batch dimensions of tau to be equal to "
                          "input.shape[:-2], but dimension %d of tau is %lld, of input %lld",
                          op, i, (long long)tau->shape.dims[i], (long long)A->shape.dims[i]);
            return NULL;
        }
    if (!tsi_is_float(A->dtype) || tau->dtype != A->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "torch.%s: input and tau must be floating point tensors of one dtype, got "
                      "%s and %s",
                      op, ts_dtype_name(A->dtype), ts_dtype_name(tau->dtype));
        return NULL;
    }
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = tau->shape.dims[tau->shape.ndim - 1];
    if (n > m || k > n) {
        tsi_error_set(TS_ERR_SHAPE,
                      "torch.%s: input.shape[-2] must be greater than or equal to input.shape[-1] "
                      "and input.shape[-1] must be greater than or equal to tau.shape[-1]",
                      op);
        return NULL;
    }
    ts_scope_begin();
    const ts_opts o = {.dtype = A->dtype, .device = ts_device_of(A)};
    ts_tensor *below = ts_add(ts_tril(A, -1), ts_eye(m, n, o));
    ts_tensor *Q = ts_expand(ts_eye(m, m, o), tsl_shape(tsl_batch(A->shape), m, m));
    if (k == 0) /* the identity, still attached to A and tau (zero gradient), as PyTorch's */
        Q = ts_add(ts_add(Q, ts_mul_scalar(ts_sum(A), 0.0)), ts_mul_scalar(ts_sum(tau), 0.0));
    for (int64_t i = 0; i < k && Q; i++) {
        ts_tensor *v = ts_narrow(below, -1, i, 1);
        ts_tensor *t = ts_unsqueeze(ts_narrow(tau, -1, i, 1), -1);
        Q = ts_sub(Q, ts_matmul(ts_mul(ts_matmul(Q, v), t), tsl_mT(v)));
    }
    return tsl_finish(Q ? ts_narrow(Q, -1, 0, n) : NULL);
}
