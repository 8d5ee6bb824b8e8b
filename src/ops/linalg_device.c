/* linalg_device.c — torch.linalg's factorizations through the operand's backend's linalg slot
 * (linalg_device.h): the operands made contiguous on their device, the outputs allocated there in
 * their dtype, one slot call; the infos come back to the host (the op's one wait, reported to the
 * sync debug mode as the host path's copies are) only when the caller asks for them. */
#include "ops/linalg_device.h"

#include "backend/backend.h"
#include "core/internal.h"
#include "core/sync_debug.h"
#include "ops/linalg_internal.h"

bool tsl_dev_ok(ts_tensor *A, ts_tensor *B) {
    if (!A || tsi_capture_graph) return false; /* a capture records kernels: the host path */
    const ts_backend *be = A->storage->be;
    if (!be || !be->linalg || (A->dtype != TS_F32 && A->dtype != TS_F64)) return false;
    if (tsi_numel(A->shape) == 0) return false;
    return !B || (B->dtype == A->dtype && tsi_numel(B->shape) > 0 &&
                  tsi_device_eq(tsi_device(A), tsi_device(B)));
}

/* a new tensor of shape s in A's dtype on A's device, in the caller's scope */
static ts_tensor *fresh(const char *op, ts_tensor *A, ts_shape s) {
    return tsi_own(tsi_new(op, s, A->dtype, tsi_device(A)));
}

/* fills the sizes and a of the call from A, then runs it (b, outputs and flags already set) */
static bool call(const char *op, ts_tensor *A, ts_linalg_args *a, int32_t *info) {
    ts_tensor *Ac = ts_contiguous(A);
    if (!Ac) return false;
    a->name = op;
    a->dtype = A->dtype;
    a->batch = tsi_numel(tsl_batch(A->shape));
    a->m = tsl_rows(A), a->n = tsl_cols(A);
    a->a = tsi_kview(Ac).data;
    a->info = info;
    if (info && !tsi_sync_point(op, tsi_device(A), NULL)) return false;
    const ts_backend *be = A->storage->be;
    return be->linalg(be, tsi_dev_index(Ac), a);
}

static void *data_of(ts_tensor *t) { return t ? tsi_kview(t).data : NULL; }

bool tsl_dev_lu(const char *op, ts_tensor *A, ts_tensor **LU, ts_tensor **piv, int32_t *info) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A);
    ts_linalg_args a = {.op = TS_LINALG_LU};
    *LU = fresh(op, A, A->shape);
    *piv = tsi_own(
        tsi_new(op, tsl_batch_vec(tsl_batch(A->shape), m < n ? m : n), TS_I32, tsi_device(A)));
    if (!*LU || !*piv) return false;
    a.out = data_of(*LU), a.piv = data_of(*piv);
    return call(op, A, &a, info);
}

ts_tensor *tsl_dev_inv(const char *op, ts_tensor *A, int32_t *info) {
    ts_linalg_args a = {.op = TS_LINALG_INV};
    ts_tensor *X = fresh(op, A, A->shape);
    if (!X) return NULL;
    a.out = data_of(X);
    return call(op, A, &a, info) ? X : NULL;
}

ts_tensor *tsl_dev_solve(const char *op, ts_tensor *A, ts_tensor *B, int32_t *info) {
    ts_linalg_args a = {.op = TS_LINALG_SOLVE};
    ts_tensor *Bc = ts_contiguous(B);
    ts_tensor *X = Bc ? fresh(op, A, B->shape) : NULL;
    if (!X) return NULL;
    a.b = data_of(Bc), a.out = data_of(X), a.nrhs = tsl_cols(B);
    return call(op, A, &a, info) ? X : NULL;
}

bool tsl_dev_det(const char *op, ts_tensor *A, ts_tensor **det, ts_tensor **sign,
                 ts_tensor **logabs) {
    ts_linalg_args a = {.op = TS_LINALG_DET};
    const ts_shape b = tsl_batch(A->shape);
    if (det) {
        if (!(*det = fresh(op, A, b))) return false;
        a.out = data_of(*det);
    } else {
        *sign = fresh(op, A, b);
        *logabs = fresh(op, A, b);
        if (!*sign || !*logabs) return false;
        a.out = data_of(*sign), a.out2 = data_of(*logabs);
    }
    return call(op, A, &a, NULL);
}

ts_tensor *tsl_dev_cholesky(const char *op, ts_tensor *A, int32_t *info) {
    ts_linalg_args a = {.op = TS_LINALG_CHOLESKY};
    ts_tensor *L = fresh(op, A, A->shape);
    if (!L) return NULL;
    a.out = data_of(L);
    return call(op, A, &a, info) ? L : NULL;
}

bool tsl_dev_eigh(const char *op, ts_tensor *A, bool upper, ts_tensor **L, ts_tensor **V,
                  int32_t *info) {
    ts_linalg_args a = {.op = TS_LINALG_EIGH, .upper = upper};
    *L = fresh(op, A, tsl_batch_vec(tsl_batch(A->shape), tsl_rows(A)));
    if (!*L) return false;
    a.out2 = data_of(*L);
    if (V) {
        if (!(*V = fresh(op, A, A->shape))) return false;
        a.out = data_of(*V);
    }
    return call(op, A, &a, info);
}

bool tsl_dev_svd(const char *op, ts_tensor *A, bool full, ts_tensor **U, ts_tensor **S,
                 ts_tensor **Vh, int32_t *info) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = m < n ? m : n;
    const ts_shape b = tsl_batch(A->shape);
    ts_linalg_args a = {.op = TS_LINALG_SVD, .full = full};
    *S = fresh(op, A, tsl_batch_vec(b, k));
    if (!*S) return false;
    a.out2 = data_of(*S);
    if (U) {
        *U = fresh(op, A, tsl_shape(b, m, full ? m : k));
        *Vh = fresh(op, A, tsl_shape(b, full ? n : k, n));
        if (!*U || !*Vh) return false;
        a.out = data_of(*U), a.out3 = data_of(*Vh);
    }
    return call(op, A, &a, info);
}

bool tsl_dev_qr(const char *op, ts_tensor *A, bool complete, ts_tensor **Q, ts_tensor **R) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A), kq = complete ? m : (m < n ? m : n);
    const ts_shape b = tsl_batch(A->shape);
    ts_linalg_args a = {.op = TS_LINALG_QR, .full = complete};
    *R = fresh(op, A, tsl_shape(b, kq, n));
    if (!*R) return false;
    a.out2 = data_of(*R);
    if (Q) {
        if (!(*Q = fresh(op, A, tsl_shape(b, m, kq)))) return false;
        a.out = data_of(*Q);
    }
    return call(op, A, &a, NULL);
}
