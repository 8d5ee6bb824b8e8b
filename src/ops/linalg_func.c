/* linalg_func.c — torch.linalg's ops composed of the decompositions (issue 52), so their
 * gradients follow: matrix_power, matrix_exp (Pade 13 with scaling and squaring, in float64),
 * cond, matrix_norm's singular-value orders (nuc, 2, -2), lu_unpack, lu, lu_solve. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_internal.h"

static ts_tensor *eye_like(ts_tensor *A, ts_dtype dt) {
    ts_tensor *I = ts_eye(tsl_rows(A), 0, (ts_opts){.dtype = dt, .device = ts_device_of(A)});
    return I && A->shape.ndim > 2 ? ts_contiguous(ts_expand(I, A->shape)) : I;
}

/* ------------------------------------------------------------------ matrix_power */
ts_tensor *ts_linalg_matrix_power(ts_tensor *A, int64_t n) {
    const char *op = "linalg.matrix_power";
    tsi_init();
    if (!tsi_check_input(op, A, "A")) return NULL;
    if (A->shape.ndim < 2 || tsl_rows(A) != tsl_cols(A)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: A must be batches of square matrices, but they are %s matrices", op,
                      tsi_shape_str(A->shape));
        return NULL;
    }
    if (n < 0 && !tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    ts_tensor *y = NULL;
    if (n == 0) { /* the identity written into a copy of A: PyTorch's (zero) gradient */
        ts_tensor *I = eye_like(A, A->dtype);
        y = I ? ts_clone(A) : NULL;
        if (y && !ts_copy_(y, I)) y = NULL;
    } else {
        ts_tensor *base = n < 0 ? ts_linalg_inv(A) : A;
        uint64_t e = n < 0 ? (uint64_t)(-(n + 1)) + 1 : (uint64_t)n;
        bool failed = !base;
        while (!failed && e) { /* binary powering */
            if (e & 1) failed = !(y = y ? ts_matmul(y, base) : base);
            e >>= 1;
            if (e && !failed) failed = !(base = ts_matmul(base, base));
        }
        if (failed) y = NULL;
        if (y == A) y = ts_clone(A);
    }
    return tsl_finish(y);
}

/* ------------------------------------------------------------------ matrix_exp */
ts_tensor *ts_linalg_matrix_exp(ts_tensor *A) {
    const char *op = "linalg.matrix_exp";
    if (!tsl_check(op, A, "A", true)) return NULL;
    static const double b[14] = {64764752532480000.0,
                                 32382376266240000.0,
                                 7771770303897600.0,
                                 1187353796428800.0,
                                 129060195264000.0,
                                 10559470521600.0,
                                 670442572800.0,
                                 33522128640.0,
                                 1323241920.0,
                                 40840800.0,
                                 960960.0,
                                 16380.0,
                                 182.0,
                                 1.0};
    const double theta13 = 5.371920351148152;
    ts_scope_begin();
    /* the largest 1-norm in the batch sets the scaling (one s for every matrix) */
    double norm = 0;
    tsl_mats h;
    ts_tensor *y = NULL;
    const bool meta = tsl_is_meta(A); /* no values: s = 0, the same ops and shapes */
    if (meta || tsl_read(op, A, &h)) {
        for (int64_t i = 0; !meta && i < h.batch; i++)
            for (int64_t c = 0; c < h.n; c++) {
                double s = 0;
                for (int64_t r = 0; r < h.n; r++) s += fabs(h.a[(i * h.n + r) * h.n + c]);
                norm = s > norm ? s : norm;
            }
        if (!meta) tsl_free(&h);
        int s = norm > theta13 ? (int)ceil(log2(norm / theta13)) : 0;
        if (!isfinite(norm)) s = 0; /* NaN or inf propagate as they are */
        ts_tensor *X = ts_to_dtype(A, TS_F64);
        if (X && s > 0) X = ts_mul_scalar(X, ldexp(1.0, -s));
        ts_tensor *I = X ? eye_like(A, TS_F64) : NULL;
        ts_tensor *X2 = I ? ts_matmul(X, X) : NULL, *X4 = X2 ? ts_matmul(X2, X2) : NULL;
        ts_tensor *X6 = X4 ? ts_matmul(X4, X2) : NULL;
        if (X6) {
#define LIN3(c6, c4, c2)                                                                           \
    ts_add(ts_add(ts_mul_scalar(X6, c6), ts_mul_scalar(X4, c4)), ts_mul_scalar(X2, c2))
            ts_tensor *u = ts_matmul(X6, LIN3(b[13], b[11], b[9]));
            u = ts_add(u, ts_add(LIN3(b[7], b[5], b[3]), ts_mul_scalar(I, b[1])));
            u = ts_matmul(X, u);
            ts_tensor *v = ts_matmul(X6, LIN3(b[12], b[10], b[8]));
            v = ts_add(v, ts_add(LIN3(b[6], b[4], b[2]), ts_mul_scalar(I, b[0])));
#undef LIN3
            ts_tensor *r = u && v ? ts_linalg_solve(ts_sub(v, u), ts_add(u, v), true) : NULL;
            for (int i = 0; r && i < s; i++) r = ts_matmul(r, r);
            y = r ? ts_to_dtype(r, A->dtype) : NULL;
        }
    }
    return tsl_finish(y);
}

/* ------------------------------------------------------------------ matrix_norm (svd orders) */
/* ||t|| over dims (a, b) from the singular values: nuc their sum, 2 the largest, -2 the smallest
 * (reduce_norm.c's matrix_norm calls it with a != b wrapped) */
ts_tensor *tsl_matrix_norm_sv(const char *op, ts_tensor *t, const char *ord, int a, int b,
                              bool keepdim, ts_dtype dtype) {
    ts_scope_begin();
    ts_tensor *x = dtype != TS_DTYPE_DEFAULT && dtype != t->dtype ? ts_to_dtype(t, dtype) : t;
    const int nd = t->shape.ndim;
    ts_tensor *y = NULL;
    if (x)
        x = ts_movedim(x, (ts_dims){.n = 2, .d = {a, b}}, (ts_dims){.n = 2, .d = {nd - 2, nd - 1}});
    if (x && tsl_check(op, x, "A", false)) {
        ts_tensor *s = ts_linalg_svdvals(x);
        if (s)
            y = !strcmp(ord, "nuc") ? ts_sum_dim(s, -1, false)
                : ord[0] == '-'     ? ts_amin_dim(s, -1, false)
                                    : ts_amax_dim(s, -1, false);
        if (y && keepdim) {
            y = ts_unsqueeze(y, a < b ? a : b);
            y = y ? ts_unsqueeze(y, a < b ? b : a) : NULL;
        }
    }
    return tsl_finish(y);
}

/* ------------------------------------------------------------------ cond */
ts_tensor *ts_linalg_cond(ts_tensor *A, const char *p) {
    const char *op = "linalg.cond";
    if (!p) p = "2";
    const bool sv = !strcmp(p, "2") || !strcmp(p, "-2");
    if (!tsl_check(op, A, "A", !sv)) return NULL;
    static const char *const ok[] = {"fro", "nuc", "inf", "-inf", "1", "-1"};
    bool known = sv;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) known |= !strcmp(p, ok[i]);
    if (!known) {
        tsi_error_set(TS_ERR_ARG, "%s: Order %s not supported (fro, nuc, inf, -inf, 1, -1, 2, -2)",
                      op, p);
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *y = NULL;
    if (sv) {
        ts_tensor *s = ts_linalg_svdvals(A);
        const int64_t k = s ? ts_shape_of(s).dims[ts_shape_of(s).ndim - 1] : 0;
        if (s && k > 0) {
            ts_tensor *hi = ts_select(s, -1, 0), *lo = ts_select(s, -1, k - 1);
            y = p[0] == '-' ? ts_div(lo, hi) : ts_div(hi, lo);
        } else if (s) {
            y = ts_zeros(tsl_batch(A->shape),
                         (ts_opts){.dtype = A->dtype, .device = ts_device_of(A)});
        }
    } else { /* ||A|| ||A^-1||, inf where A is singular (as PyTorch) */
        ts_tensor *info = NULL, *inv = ts_linalg_inv_ex(A, &info);
        ts_tensor *na = inv ? ts_matrix_norm(A, p, -2, -1, false, TS_DTYPE_DEFAULT) : NULL;
        ts_tensor *ni = na ? ts_matrix_norm(inv, p, -2, -1, false, TS_DTYPE_DEFAULT) : NULL;
        ts_tensor *bad = ni ? ts_gt_scalar(info, 0) : NULL;
        y = bad ? ts_masked_fill(ts_mul(na, ni), bad, INFINITY) : NULL;
    }
    return tsl_finish(y);
}

/* ------------------------------------------------------------------ LU: unpack, lu, lu_solve */
ts_tensor *ts_lu_unpack(ts_tensor *LU, ts_tensor *pivots, ts_tensor **L, ts_tensor **U) {
    const char *op = "lu_unpack";
    if (L) *L = NULL;
    if (U) *U = NULL;
    if (!tsl_check(op, LU, "LU_data", false) || !tsi_check_input(op, pivots, "LU_pivots"))
        return NULL;
    const int64_t m = tsl_rows(LU), n = tsl_cols(LU), k = m < n ? m : n;
    const ts_shape bs = tsl_batch(LU->shape);
    if (pivots->dtype != TS_I32 && pivots->dtype != TS_I64) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: LU_pivots is expected to be a contiguous tensor of "
                      "torch.int32 dtype. Note: this function is intended to be used with the "
                      "output produced by torch.linalg.lu_factor",
                      op);
        return NULL;
    }
    if (pivots->shape.ndim != bs.ndim + 1 || pivots->shape.dims[bs.ndim] != k ||
        tsi_numel(pivots->shape) != tsi_numel(bs) * k) {
        tsi_error_set(TS_ERR_SHAPE, "%s: LU_pivots of shape %s do not fit LU_data of shape %s", op,
                      tsi_shape_str(pivots->shape), tsi_shape_str(LU->shape));
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *P = NULL;
    int64_t *piv = NULL;
    const int64_t nb = tsi_numel(bs);
    double *p = NULL;
    int64_t *perm = NULL;
    bool ok = false;
    if (tsl_is_meta(LU)) { /* no pivots to read: P's shape */
        P = tsl_meta(LU, tsl_shape(bs, m, m), LU->dtype);
        goto factors;
    }
    {
        ts_tensor *pv = ts_contiguous(ts_to(ts_to_dtype(pivots, TS_I64), ts_cpu()));
        const int64_t np = tsi_numel(pivots->shape);
        piv = malloc((size_t)(np > 0 ? np : 1) * sizeof *piv);
        if (!piv)
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        else if (pv && np && ts_copy_to_host(pv, piv, (size_t)np * sizeof *piv) != TS_OK)
            free(piv), piv = NULL;
    }
    p = piv ? calloc((size_t)(nb * m * m + 1), sizeof *p) : NULL;
    perm = p ? malloc((size_t)(m + 1) * sizeof *perm) : NULL;
    ok = perm != NULL;
    for (int64_t i = 0; ok && i < nb; i++) {
        for (int64_t r = 0; r < m; r++) perm[r] = r;
        for (int64_t r = 0; r < k; r++) {
            const int64_t s = piv[i * k + r] - 1;
            if (s < 0 || s >= m) {
                tsi_error_set(TS_ERR_ARG, "%s: pivot %lld out of range [1, %lld]", op,
                              (long long)(s + 1), (long long)m);
                ok = false;
                break;
            }
            const int64_t t = perm[r];
            perm[r] = perm[s], perm[s] = t;
        }
        /* A = P L U: row r of L U is row perm[r] of A, so P[perm[r], r] = 1 */
        for (int64_t r = 0; ok && r < m; r++) p[i * m * m + perm[r] * m + r] = 1.0;
    }
    if (ok) P = tsl_write(LU, tsl_shape(bs, m, m), p, LU->dtype);
    free(piv), free(p), free(perm);
factors:
    if (P && L) {
        ts_tensor *l = ts_tril(ts_narrow(LU, -1, 0, k), -1);
        ts_tensor *I = ts_eye(m, k, (ts_opts){.dtype = LU->dtype, .device = ts_device_of(LU)});
        *L = l && I ? ts_keep(ts_add(l, I)) : NULL;
    }
    if (P && U) *U = ts_keep(ts_triu(ts_narrow(LU, -2, 0, k), 0));
    return tsl_finish(P);
}

ts_tensor *ts_linalg_lu(ts_tensor *A, ts_tensor **L, ts_tensor **U) {
    const char *op = "linalg.lu";
    if (L) *L = NULL;
    if (U) *U = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    ts_scope_begin();
    ts_tensor *piv = NULL, *info = NULL, *Lt = NULL, *Ut = NULL, *P = NULL;
    ts_no_grad_begin();
    ts_tensor *LU = ts_linalg_lu_factor_ex(A, &piv, &info);
    if (LU) P = ts_lu_unpack(LU, piv, &Lt, &Ut);
    ts_no_grad_end();
    if (P && Lt && Ut) {
        ts_tensor *outs[3] = {NULL, Lt, Ut}, *saves[3] = {P, Lt, Ut};
        tsl_twice(tsl_record("LinalgLuBackward0", op, tsl_lu_backward, &A, 1, outs, 3, saves, 3));
    }
    if (ts_error() == TS_OK) {
        if (L && Lt) *L = ts_keep(Lt);
        if (U && Ut) *U = ts_keep(Ut);
    }
    return tsl_finish(P);
}

/* X with A X = B from A = P L U: X = U^-1 L^-1 P^T B (composed: B's gradient follows) */
ts_tensor *ts_linalg_lu_solve(ts_tensor *LU, ts_tensor *pivots, ts_tensor *B, bool left,
                              bool adjoint) {
    const char *op = "linalg.lu_solve";
    if (!tsl_check(op, LU, "LU", true) || !tsl_check(op, B, "B", false)) return NULL;
    const int64_t n = tsl_rows(LU);
    if ((left ? tsl_rows(B) : tsl_cols(B)) != n) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Incompatible shapes of A and B for the equation %s "
                      "(%lldx%lld and %lldx%lld)",
                      op, left ? "AX = B" : "XA = B", (long long)n, (long long)n,
                      (long long)tsl_rows(B), (long long)tsl_cols(B));
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *L = NULL, *U = NULL, *P = ts_lu_unpack(LU, pivots, &L, &U), *X = NULL;
    if (P && L && U) {
        /* op(A) X = B with op(A) = A (left, !adjoint) ... reduced to left solves of A or A^T */
        const bool trans = left ? adjoint : !adjoint;
        ts_tensor *b = left ? B : tsl_mT(B);
        if (!trans) { /* A X = b: X = U^-1 L^-1 P^T b */
            ts_tensor *y = ts_matmul(tsl_mT(P), b);
            y = y ? ts_linalg_solve_triangular(L, y, false, true, true) : NULL;
            X = y ? ts_linalg_solve_triangular(U, y, true, true, false) : NULL;
        } else { /* A^T X = b: X = P L^-T U^-T b */
            ts_tensor *y = ts_linalg_solve_triangular(tsl_mT(U), b, false, true, false);
            y = y ? ts_linalg_solve_triangular(tsl_mT(L), y, true, true, true) : NULL;
            X = y ? ts_matmul(P, y) : NULL;
        }
        if (X && !left) X = tsl_mT(X);
    }
    return tsl_finish(X);
}
