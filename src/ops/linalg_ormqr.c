/* linalg_ormqr.c — torch.ormqr: the product of Q = H_1 ... H_k (geqrf's Householder reflectors,
 * H_i = I - tau_i v_i v_i^T, v_i the i-th column of input below the diagonal with a 1 on it) with
 * another matrix, composed of public ops one reflector at a time in float64 (as geqrf's arithmetic)
 * and given in the operands' dtype: every device, and the gradients of input, tau and other from
 * the composition (PyTorch's ormqr_backward is the derivative of the same product). */
#include "core/internal.h"
#include "ops/linalg_internal.h"

static bool fail_shape(const char *msg) {
    tsi_error_set(TS_ERR_SHAPE, "torch.ormqr: %s", msg);
    return false;
}

static bool same_batch(ts_tensor *a, ts_tensor *b, int nd) {
    for (int i = 0; i < nd; i++)
        if (a->shape.dims[i] != b->shape.dims[i]) return false;
    return true;
}

static bool ormqr_check(const char *op, ts_tensor *A, ts_tensor *tau, ts_tensor *C, bool left) {
    tsi_init();
    if (!tsi_check_input(op, A, "input") || !tsi_check_input(op, tau, "tau") ||
        !tsi_check_input(op, C, "other"))
        return false;
    if (A->shape.ndim < 2) return fail_shape("input must have at least 2 dimensions.");
    if (C->shape.ndim < 2) return fail_shape("other must have at least 2 dimensions.");
    const int nd = A->shape.ndim;
    if (tau->shape.ndim != nd - 1) {
        tsi_error_set(TS_ERR_SHAPE,
                      "torch.ormqr: Expected tau to have one dimension less than input, but got "
                      "tau.ndim equal to %d and input.ndim is equal to %d",
                      tau->shape.ndim, nd);
        return false;
    }
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = tau->shape.dims[nd - 2];
    if (left && tsl_rows(C) != m)
        return fail_shape("other.shape[-2] must be equal to input.shape[-2]");
    if (!left && tsl_cols(C) != m)
        return fail_shape("other.shape[-1] must be equal to input.shape[-2]");
    if (k != (m < n ? m : n))
        return fail_shape(left ? "tau.shape[-1] must be equal to min(other.shape[-2], "
                                 "input.shape[-1])"
                               : "tau.shape[-1] must be equal to min(other.shape[-1], "
                                 "input.shape[-1])");
    if (!same_batch(tau, A, nd - 2))
        return fail_shape("Expected batch dimensions of tau to be equal to input.shape[:-2]");
    if (C->shape.ndim != nd) {
        tsi_error_set(TS_ERR_SHAPE,
                      "torch.ormqr: Expected other to have the same number of dimensions as "
                      "input, but got other.ndim equal to %d and input.ndim is equal to %d",
                      C->shape.ndim, nd);
        return false;
    }
    if (!same_batch(C, A, nd - 2))
        return fail_shape("Expected batch dimensions of other to be equal to input.shape[:-2]");
    if (A->dtype != TS_F32 && A->dtype != TS_F64) {
        tsi_error_set(TS_ERR_DTYPE, "torch.ormqr: not implemented for '%s'",
                      tsi_torch_scalar_name(A->dtype));
        return false;
    }
    ts_tensor *const others[2] = {C, tau};
    const char *names[2] = {"other", "tau"};
    for (int i = 0; i < 2; i++)
        if (others[i]->dtype != A->dtype) {
            tsi_error_set(TS_ERR_DTYPE,
                          "torch.ormqr: Expected input and %s to have the same dtype, but input "
                          "has dtype%s and %s has dtype %s",
                          names[i], tsi_torch_scalar_name(A->dtype), names[i],
                          tsi_torch_scalar_name(others[i]->dtype));
            return false;
        }
    ts_device dev;
    ts_tensor *all[3] = {A, tau, C};
    return tsi_same_device(op, all, 3, false, &dev);
}

ts_tensor *ts_ormqr(ts_tensor *input, ts_tensor *tau, ts_tensor *other, bool left, bool transpose) {
    const char *op = "ormqr";
    if (!ormqr_check(op, input, tau, other, left)) return NULL;
    ts_scope_begin();
    const int64_t m = tsl_rows(input), n = tsl_cols(input),
                  k = tau->shape.dims[tau->shape.ndim - 1];
    if (k == 0) return tsl_finish(ts_clone(other)); /* Q = I (ts_eye(m, 0) would be m x m) */
    ts_tensor *t = ts_to_dtype(tau, TS_F64), *C = ts_to_dtype(other, TS_F64);
    ts_tensor *V = ts_add(ts_tril(ts_to_dtype(input, TS_F64), -1),
                          ts_eye(m, n, (ts_opts){.dtype = TS_F64, .device = ts_device_of(input)}));
    /* Q C = H_1 (... (H_k C)); Q^T C = H_k ... H_1 C; C Q = C H_1 ... H_k; C Q^T = C H_k ... H_1 */
    const bool up = left == transpose;
    for (int64_t s = 0; s < k && C; s++) {
        const int64_t i = up ? s : k - 1 - s;
        ts_tensor *v = ts_narrow(V, -1, i, 1);                    /* [..., m, 1] */
        ts_tensor *ti = ts_unsqueeze(ts_narrow(t, -1, i, 1), -1); /* [..., 1, 1] */
        ts_tensor *tv = ts_mul(v, ti);
        C = left ? ts_sub(C, ts_matmul(tv, ts_matmul(tsl_mT(v), C)))  /* C - tau v (v^T C) */
                 : ts_sub(C, ts_matmul(ts_matmul(C, v), tsl_mT(tv))); /* C - (C v) tau v^T */
    }
    return tsl_finish(C ? ts_to_dtype(C, other->dtype) : NULL);
}
