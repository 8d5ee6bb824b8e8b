/* linalg_grad.c — the backward formulas of torch.linalg's decompositions (linalg_internal.h),
 * PyTorch's (FunctionsManual.cpp) for real matrices, written with public ops so that they are
 * differentiable again. Grad mode is off here and results belong to the engine's scope. */
#include <string.h>

#include "ops/linalg_internal.h"

#define mT tsl_mT

static ts_tensor *eye_of(ts_tensor *like, int64_t n) {
    return ts_eye(n, 0, (ts_opts){.dtype = like->dtype, .device = ts_device_of(like)});
}
static ts_tensor *add_or(ts_tensor *a, ts_tensor *b) { return a ? (b ? ts_add(a, b) : a) : b; }
static ts_tensor *diag_embed(ts_tensor *v) { return ts_diag_embed(v, 0, -2, -1); }
/* g with one trailing [..., 1, 1] for a scalar per matrix */
static ts_tensor *per_matrix(ts_tensor *g) { return ts_unsqueeze(ts_unsqueeze(g, -1), -1); }

/* inv: gA = -X^T g X^T */
void tsl_inv_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *X = tsi_node_saved(n, 0);
    if (!go[0] || !X) return;
    ts_tensor *Xt = mT(X);
    gi[0] = ts_neg(ts_matmul(ts_matmul(Xt, go[0]), Xt));
}

/* solve (A X = B, one batch shape): gB = A^-T gX, gA = -gB X^T */
void tsl_solve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *A = tsi_node_saved(n, 0), *X = tsi_node_saved(n, 1);
    if (!go[0] || !A || !X) return;
    ts_tensor *gB = ts_linalg_solve(mT(A), go[0], true);
    if (!gB) return;
    if (tsi_node_needs(n, 0)) gi[0] = ts_neg(ts_matmul(gB, mT(X)));
    if (tsi_node_needs(n, 1)) gi[1] = gB;
}

/* det: gA = g det A^-T (A must be invertible here) */
void tsl_det_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *A = tsi_node_saved(n, 0), *D = tsi_node_saved(n, 1);
    if (!go[0] || !A || !D) return;
    ts_tensor *inv = ts_linalg_inv(A);
    if (inv) gi[0] = ts_mul(per_matrix(ts_mul(go[0], D)), mT(inv));
}

/* slogdet: only logabsdet has a gradient: gA = g A^-T */
void tsl_slogdet_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *A = tsi_node_saved(n, 0);
    if (!go[1] || !A) return;
    ts_tensor *inv = ts_linalg_inv(A);
    if (inv) gi[0] = ts_mul(per_matrix(go[1]), mT(inv));
}

/* cholesky (lower L): phi = tril(L^T gL) with its diagonal halved, gA = L^-T phi L^-1,
 * symmetrized */
void tsl_cholesky_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *L = tsi_node_saved(n, 0);
    if (!go[0] || !L) return;
    ts_tensor *phi = ts_tril(ts_matmul(mT(L), ts_tril(go[0], 0)), 0);
    if (!phi) return;
    phi = ts_sub(phi, ts_mul_scalar(diag_embed(ts_diagonal(phi, 0, -2, -1)), 0.5));
    ts_tensor *y = phi ? ts_linalg_solve_triangular(mT(L), phi, true, true, false) : NULL;
    ts_tensor *g = y ? ts_linalg_solve_triangular(L, y, false, false, false) : NULL;
    if (g) gi[0] = ts_mul_scalar(ts_add(g, mT(g)), 0.5);
}

/* solve_triangular (left, A X = B): gB = A^-T gX (the other triangle), gA = -gB X^T restricted
 * to A's triangle (without the diagonal when unitriangular) */
void tsl_trisolve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *A = tsi_node_saved(n, 0), *X = tsi_node_saved(n, 1);
    if (!go[0] || !A || !X) return;
    const bool upper = n->ip[0], unit = n->ip[1];
    ts_tensor *gB = ts_linalg_solve_triangular(mT(A), go[0], !upper, true, unit);
    if (!gB) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *g = ts_neg(ts_matmul(gB, mT(X)));
        gi[0] = upper ? ts_triu(g, unit ? 1 : 0) : ts_tril(g, unit ? -1 : 0);
    }
    if (tsi_node_needs(n, 1)) gi[1] = gB;
}

/* cholesky_solve (B, L): gB = cholesky_solve(gX, L), gL = -(C L) (upper: -(L C)) with
 * C = gB X^T + X gB^T, dense over both triangles as PyTorch's cholesky_solve_backward */
void tsl_cholesky_solve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *L = tsi_node_saved(n, 0), *X = tsi_node_saved(n, 1);
    if (!go[0] || !L || !X) return;
    const bool upper = n->ip[0];
    ts_tensor *gB = ts_cholesky_solve(go[0], L, upper);
    if (!gB) return;
    if (tsi_node_needs(n, 1)) {
        ts_tensor *c = ts_matmul(gB, mT(X));
        c = c ? ts_add(c, mT(c)) : NULL;
        if (c) gi[1] = ts_neg(upper ? ts_matmul(L, c) : ts_matmul(c, L));
    }
    if (tsi_node_needs(n, 0)) gi[0] = gB;
}

/* copyltu(M): the lower triangle mirrored above the diagonal */
static ts_tensor *copyltu(ts_tensor *M) {
    ts_tensor *l = ts_tril(M, -1);
    return l ? ts_add(ts_add(l, mT(l)), diag_embed(ts_diagonal(M, 0, -2, -1))) : NULL;
}

/* the QR gradient for m >= n (R square): gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q */
static ts_tensor *qr_tall(ts_tensor *Q, ts_tensor *R, ts_tensor *gQ, ts_tensor *gR) {
    ts_tensor *M =
        add_or(gR ? ts_matmul(R, mT(gR)) : NULL, gQ ? ts_neg(ts_matmul(mT(gQ), Q)) : NULL);
    ts_tensor *Y = M ? add_or(gQ, ts_matmul(Q, copyltu(M))) : NULL;
    return Y ? ts_linalg_solve_triangular(mT(R), Y, false, false, false) : NULL;
}

void tsl_qr_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *Q = tsi_node_saved(n, 0), *R = tsi_node_saved(n, 1);
    ts_tensor *gQ = go[0], *gR = go[1];
    if ((!gQ && !gR) || !Q || !R) return;
    const int64_t m = tsl_rows(Q), k = tsl_cols(Q), nc = tsl_cols(R);
    if (k > nc || tsl_rows(R) != k) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "linalg.qr: The QR decomposition is not differentiable when mode='complete' "
                      "and nrows > ncols.");
        return;
    }
    if (m >= nc) {
        gi[0] = qr_tall(Q, R, gQ, gR);
        return;
    }
    /* m < n: A = Q (R1 | R2), A1 = Q R1 square, R2 = Q^T A2 */
    ts_tensor *R1 = ts_narrow(R, -1, 0, m), *R2 = ts_narrow(R, -1, m, nc - m);
    ts_tensor *gR1 = gR ? ts_narrow(gR, -1, 0, m) : NULL;
    ts_tensor *gR2 = gR ? ts_narrow(gR, -1, m, nc - m) : NULL;
    ts_tensor *A2 = ts_matmul(Q, R2);
    ts_tensor *gQ1 = add_or(gQ, gR2 ? ts_matmul(A2, mT(gR2)) : NULL);
    ts_tensor *g1 = qr_tall(Q, R1, gQ1, gR1);
    ts_tensor *g2 = gR2 ? ts_matmul(Q, gR2) : ts_zeros_like(A2);
    if (g1 && g2) {
        ts_tensor *parts[2] = {g1, g2};
        gi[0] = ts_cat(parts, 2, -1);
    }
}

/* svd (real): PyTorch's svd_backward on the reduced factors */
void tsl_svd_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *U = tsi_node_saved(n, 0), *S = tsi_node_saved(n, 1), *Vh = tsi_node_saved(n, 2);
    ts_tensor *gU = go[0], *gS = go[1], *gVh = go[2];
    if (!U || !S || !Vh || (!gU && !gS && !gVh)) return;
    const int64_t m = tsl_rows(U), nc = tsl_cols(Vh), k = ts_shape_of(S).dims[S->shape.ndim - 1];
    if (n->ip[0]) { /* full_matrices: only the first k columns carry the decomposition */
        U = ts_narrow(U, -1, 0, k), Vh = ts_narrow(Vh, -2, 0, k);
        if (gU) gU = ts_narrow(gU, -1, 0, k);
        if (gVh) gVh = ts_narrow(gVh, -2, 0, k);
    }
    if (!gU && !gVh) {
        gi[0] = ts_matmul(ts_matmul(U, diag_embed(gS)), Vh);
        return;
    }
    ts_tensor *Sr = ts_unsqueeze(S, -2), *Sc = ts_unsqueeze(S, -1), *S2 = ts_mul(S, S);
    ts_tensor *E = ts_add(ts_sub(ts_unsqueeze(S2, -2), ts_unsqueeze(S2, -1)), eye_of(S, k));
    ts_tensor *g = NULL;
    if (gU) {
        ts_tensor *x = ts_matmul(mT(U), gU);
        g = ts_mul(ts_sub(x, mT(x)), Sr);
    }
    if (gVh) {
        ts_tensor *x = ts_matmul(Vh, mT(gVh));
        g = add_or(g, ts_mul(Sc, ts_sub(x, mT(x))));
    }
    g = g ? ts_div(g, E) : NULL;
    if (g && gS) g = ts_add(g, diag_embed(gS));
    if (!g) return;
    if (m > k && gU) {
        g = ts_matmul(U, g);
        ts_tensor *gUSinv = ts_div(gU, Sr);
        g = ts_sub(ts_add(g, gUSinv), ts_matmul(U, ts_matmul(mT(U), gUSinv)));
        gi[0] = ts_matmul(g, Vh);
    } else if (nc > k && gVh) {
        g = ts_matmul(g, Vh);
        ts_tensor *SinvgVh = ts_div(gVh, Sc);
        g = ts_sub(ts_add(g, SinvgVh), ts_matmul(ts_matmul(SinvgVh, mT(Vh)), Vh));
        gi[0] = ts_matmul(U, g);
    } else {
        gi[0] = ts_matmul(U, ts_matmul(g, Vh));
    }
}

/* eigh: gA = V (diag(gL) + skew(V^T gV) / E) V^T, E[i][j] = L[j] - L[i] */
void tsl_eigh_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *L = tsi_node_saved(n, 0), *V = tsi_node_saved(n, 1);
    ts_tensor *gL = go[0], *gV = go[1];
    if (!L || !V || (!gL && !gV)) return;
    ts_tensor *r = NULL;
    if (gV) {
        ts_tensor *x = ts_matmul(mT(V), gV);
        x = ts_mul_scalar(ts_sub(x, mT(x)), 0.5);
        const int64_t k = tsl_rows(V);
        ts_tensor *E = ts_add(ts_sub(ts_unsqueeze(L, -2), ts_unsqueeze(L, -1)), eye_of(L, k));
        r = x && E ? ts_div(x, E) : NULL;
        if (!r) return;
    }
    if (gL) r = add_or(r, diag_embed(gL));
    if (r) gi[0] = ts_matmul(V, ts_matmul(r, mT(V)));
}

/* pinv: PyTorch's pinv_backward */
void tsl_pinv_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *A = tsi_node_saved(n, 0), *P = tsi_node_saved(n, 1), *g = go[0];
    if (!A || !P || !g) return;
    const int64_t m = tsl_rows(A), nc = tsl_cols(A);
    ts_tensor *Ph = mT(P), *gh = mT(g);
    if (m <= nc) {
        ts_tensor *K = ts_matmul(gh, P), *KPh = ts_matmul(K, Ph);
        ts_tensor *t1 = ts_neg(mT(ts_matmul(P, K)));
        ts_tensor *t3 = ts_matmul(ts_matmul(A, P), KPh);
        ts_tensor *t4 = ts_matmul(ts_matmul(Ph, P), ts_sub(gh, ts_matmul(K, A)));
        gi[0] = ts_add(ts_sub(ts_add(t1, KPh), t3), t4);
    } else {
        ts_tensor *K = ts_matmul(P, gh), *PhK = ts_matmul(Ph, K);
        ts_tensor *t1 = ts_neg(mT(ts_matmul(K, P)));
        ts_tensor *t2 = ts_matmul(ts_matmul(ts_sub(gh, ts_matmul(A, K)), P), Ph);
        ts_tensor *t4 = ts_matmul(ts_matmul(PhK, P), A);
        gi[0] = ts_sub(ts_add(ts_add(t1, t2), PhK), t4);
    }
}

/* the square LU gradient without P: L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T */
static ts_tensor *lu_square(ts_tensor *L, ts_tensor *U, ts_tensor *gL, ts_tensor *gU) {
    ts_tensor *gR = add_or(gL ? ts_tril(ts_matmul(mT(L), gL), -1) : NULL,
                           gU ? ts_triu(ts_matmul(gU, mT(U)), 0) : NULL);
    ts_tensor *y = gR ? ts_linalg_solve_triangular(mT(L), gR, true, true, true) : NULL;
    return y ? ts_linalg_solve_triangular(mT(U), y, false, false, false) : NULL;
}

/* A = P L U (L m x k unit lower, U k x n): wide, A2 = P L U2 makes U2 depend on L; tall,
 * L2 = (P^T A)_2 U^-1 makes L2 depend on U; then the square case */
static void lu_grad(ts_tensor *P, ts_tensor *L, ts_tensor *U, ts_tensor *gL, ts_tensor *gU,
                    ts_tensor **gA) {
    const int64_t m = tsl_rows(L), k = tsl_cols(L), nc = tsl_cols(U);
    ts_tensor *g = NULL;
    if (m == nc) {
        g = lu_square(L, U, gL, gU);
    } else if (m < nc) {
        ts_tensor *U1 = ts_narrow(U, -1, 0, k), *U2 = ts_narrow(U, -1, k, nc - k);
        ts_tensor *gU1 = gU ? ts_narrow(gU, -1, 0, k) : NULL;
        ts_tensor *gU2 = gU ? ts_narrow(gU, -1, k, nc - k) : NULL;
        ts_tensor *LgU2 = gU2 ? ts_linalg_solve_triangular(mT(L), gU2, true, true, true) : NULL;
        ts_tensor *gLe = add_or(gL, LgU2 ? ts_neg(ts_matmul(LgU2, mT(U2))) : NULL);
        ts_tensor *g1 = lu_square(L, U1, gLe, gU1);
        ts_tensor *g2 = LgU2 ? LgU2 : ts_zeros_like(U2);
        ts_tensor *parts[2] = {g1, g2};
        g = g1 && g2 ? ts_cat(parts, 2, -1) : NULL;
    } else {
        ts_tensor *L1 = ts_narrow(L, -2, 0, k), *L2 = ts_narrow(L, -2, k, m - k);
        ts_tensor *gL1 = gL ? ts_narrow(gL, -2, 0, k) : NULL;
        ts_tensor *gL2 = gL ? ts_narrow(gL, -2, k, m - k) : NULL;
        ts_tensor *gL2U = gL2 ? ts_linalg_solve_triangular(mT(U), gL2, false, false, false) : NULL;
        ts_tensor *gUe = add_or(gU, gL2U ? ts_neg(ts_matmul(mT(L2), gL2U)) : NULL);
        ts_tensor *g1 = lu_square(L1, U, gL1, gUe);
        ts_tensor *g2 = gL2U ? gL2U : ts_zeros_like(L2);
        ts_tensor *parts[2] = {g1, g2};
        g = g1 && g2 ? ts_cat(parts, 2, -2) : NULL;
    }
    if (g) *gA = ts_matmul(P, g);
}

/* lu: outputs P (no gradient), L, U */
void tsl_lu_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *P = tsi_node_saved(n, 0), *L = tsi_node_saved(n, 1), *U = tsi_node_saved(n, 2);
    if (!P || !L || !U || (!go[1] && !go[2])) return;
    lu_grad(P, L, U, go[1], go[2], &gi[0]);
}

/* lu_factor: the packed LU's gradient is L's below the diagonal and U's on and above it. The saved
 * L and U were unpacked without a graph: under create_graph they are unpacked again from the saved
 * LU (its node's output), so that the gradient depends on A through them. */
void tsl_lu_factor_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *P = tsi_node_saved(n, 0), *L = tsi_node_saved(n, 1), *U = tsi_node_saved(n, 2);
    if (!P || !L || !U || !go[0]) return;
    const int64_t k = tsl_cols(L);
    if (tsi_create_graph_active() && k > 0) {
        ts_tensor *LU = tsi_node_saved(n, 3);
        if (!LU) return;
        const ts_opts o = {.dtype = LU->dtype, .device = ts_device_of(LU)};
        L = ts_add(ts_tril(ts_narrow(LU, -1, 0, k), -1), ts_eye(tsl_rows(LU), k, o));
        U = ts_triu(ts_narrow(LU, -2, 0, k), 0);
        if (!L || !U) return;
    }
    ts_tensor *gL = ts_tril(ts_narrow(go[0], -1, 0, k), -1);
    ts_tensor *gU = ts_triu(ts_narrow(go[0], -2, 0, k), 0);
    if (gL && gU) lu_grad(P, L, U, gL, gU, &gi[0]);
}
