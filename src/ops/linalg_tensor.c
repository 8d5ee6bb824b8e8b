/* linalg_tensor.c — the tensor forms of the solvers: torch.linalg.tensorinv and
 * torch.linalg.tensorsolve, the matrix inverse / solve of a tensor reshaped into a matrix
 * (PyTorch's LinearAlgebra.cpp), composed of reshape, permute and linalg.inv / solve, so their
 * gradients are those of inv and solve (issue 76). */
#include "ops/linalg_internal.h"

static int64_t prod_dims(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

ts_tensor *ts_linalg_tensorinv(ts_tensor *A, int64_t ind) {
    const char *op = "linalg.tensorinv";
    tsi_init();
    if (!tsi_check_input(op, A, "A")) return NULL;
    if (ind <= 0) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: Expected a strictly positive integer for 'ind', but got %lld", op,
                      (long long)ind);
        return NULL;
    }
    const int nd = A->shape.ndim;
    if (ind > nd) {
        tsi_error_set(TS_ERR_ARG, "%s: 'ind' (%lld) exceeds the %d dims of A", op, (long long)ind,
                      nd);
        return NULL;
    }
    const int k = (int)ind;
    const int64_t rows = prod_dims(A->shape.dims, k), cols = prod_dims(A->shape.dims + k, nd - k);
    if (rows != cols) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                      "prod(self.shape[:ind]), but got %lld != %lld",
                      op, (long long)cols, (long long)rows);
        return NULL;
    }
    ts_shape out = {.ndim = nd};
    for (int i = 0; i < nd - k; i++) out.dims[i] = A->shape.dims[k + i];
    for (int i = 0; i < k; i++) out.dims[nd - k + i] = A->shape.dims[i];
    ts_scope_begin();
    ts_tensor *inv = ts_linalg_inv(ts_reshape(A, TS_SHAPE(rows, cols)));
    return tsl_finish(inv ? ts_reshape(inv, out) : NULL);
}

ts_tensor *ts_linalg_tensorsolve(ts_tensor *A, ts_tensor *B, const ts_dims *dims) {
    const char *op = "linalg.tensorsolve";
    tsi_init();
    if (!tsi_check_input(op, A, "A") || !tsi_check_input(op, B, "B")) return NULL;
    const int nd = A->shape.ndim;
    ts_dims perm = {.n = nd};
    if (dims) { /* the dims of A moved to the end, in the order given */
        bool used[TS_MAX_DIMS] = {false};
        if (dims->n < 0 || dims->n > nd) {
            tsi_error_set(TS_ERR_ARG, "%s: dims lists %d dims, A has %d", op, dims->n, nd);
            return NULL;
        }
        int j = 0;
        for (int i = 0; i < dims->n; i++) {
            const int d = tsi_wrap_dim(op, dims->d[i], nd);
            if (d < 0) return NULL;
            if (used[d]) {
                tsi_error_set(TS_ERR_ARG, "%s: dim %d appears twice in dims", op, dims->d[i]);
                return NULL;
            }
            used[d] = true;
        }
        for (int d = 0; d < nd; d++)
            if (!used[d]) perm.d[j++] = d;
        for (int i = 0; i < dims->n; i++) perm.d[j++] = tsi_wrap_dim(op, dims->d[i], nd);
    } else {
        for (int d = 0; d < nd; d++) perm.d[d] = d;
    }
    const int nb = B->shape.ndim;
    if (nb > nd) {
        tsi_error_set(TS_ERR_SHAPE, "%s: B has %d dims, more than A's %d", op, nb, nd);
        return NULL;
    }
    ts_shape rhs = {.ndim = nd - nb};
    for (int i = nb; i < nd; i++) rhs.dims[i - nb] = A->shape.dims[perm.d[i]];
    const int64_t nr = prod_dims(rhs.dims, rhs.ndim), nbel = ts_numel(B);
    ts_scope_begin();
    ts_tensor *Ap = dims ? ts_permute(A, perm) : A;
    ts_tensor *X = Ap ? ts_linalg_solve(ts_reshape(Ap, TS_SHAPE(nbel, nr)),
                                        ts_reshape(B, TS_SHAPE(nbel)), true)
                      : NULL;
    return tsl_finish(X ? ts_reshape(X, rhs) : NULL);
}
