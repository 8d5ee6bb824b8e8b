/* linalg_eig_grad.c — LinalgEigBackward0: PyTorch's linalg_eig_backward (FunctionsManual.cpp) for
 * a real A, written with real public ops over the (real, imaginary) parts of the complex matrices
 * (linalg_eig.c saves L and V as pairs; their complex gradients are read as pairs here):
 *
 *   gA = re( V^-H (diag(gL) + offdiag((V^H gV - V^H V diag(re diag(V^H gV))) / E)) V^H ),
 *   E_ij = conj(L_j) - conj(L_i),
 *
 * and for eigvals (no gV) gA = re(V^-H diag(gL) V^H). The solve with V^H runs as a real solve of
 * order 2n with [[Re W, -Im W], [Im W, Re W]] (W = V^H), which is W acting on (re, im) stacked. */
#include "ops/linalg_internal.h"
#include "tessera/complex.h"

typedef struct cpx {
    ts_tensor *r, *i;
} cpx;

static cpx parts(ts_tensor *pairs) {
    return (cpx){ts_select(pairs, -1, 0), ts_select(pairs, -1, 1)};
}
static cpx cmm(cpx a, cpx b) {
    return (cpx){ts_sub(ts_matmul(a.r, b.r), ts_matmul(a.i, b.i)),
                 ts_add(ts_matmul(a.r, b.i), ts_matmul(a.i, b.r))};
}
static cpx cadj(cpx a) { return (cpx){tsl_mT(a.r), ts_neg(tsl_mT(a.i))}; }
static cpx csub(cpx a, cpx b) { return (cpx){ts_sub(a.r, b.r), ts_sub(a.i, b.i)}; }
/* a / b elementwise */
static cpx cdiv(cpx a, cpx b) {
    ts_tensor *den = ts_add(ts_mul(b.r, b.r), ts_mul(b.i, b.i));
    return (cpx){ts_div(ts_add(ts_mul(a.r, b.r), ts_mul(a.i, b.i)), den),
                 ts_div(ts_sub(ts_mul(a.i, b.r), ts_mul(a.r, b.i)), den)};
}
static ts_tensor *diag_embed(ts_tensor *v) { return ts_diag_embed(v, 0, -2, -1); }

/* M = diag(gL) + offdiag(projected V^H gV / E) (either gradient may be absent) */
static cpx inner(cpx L, cpx V, cpx W, ts_tensor *gLp, ts_tensor *gVp, int64_t n, ts_tensor *like) {
    cpx M = {NULL, NULL};
    if (gVp) {
        cpx G = parts(gVp);
        cpx VhgV = cmm(W, G);
        ts_tensor *d = ts_unsqueeze(ts_diagonal(VhgV.r, 0, -2, -1), -2);
        VhgV = csub(VhgV, cmm(W, (cpx){ts_mul(V.r, d), ts_mul(V.i, d)}));
        ts_tensor *eye =
            ts_eye(n, 0, (ts_opts){.dtype = like->dtype, .device = ts_device_of(like)});
        /* E_ij = conj(L_j) - conj(L_i), its diagonal 1 (then masked) */
        cpx E = {ts_add(ts_sub(ts_unsqueeze(L.r, -2), ts_unsqueeze(L.r, -1)), eye),
                 ts_sub(ts_unsqueeze(L.i, -1), ts_unsqueeze(L.i, -2))};
        M = cdiv(VhgV, E);
        ts_tensor *off = ts_rsub_scalar(eye, 1.0);
        M = (cpx){ts_mul(M.r, off), ts_mul(M.i, off)};
    }
    if (gLp) {
        cpx g = parts(gLp);
        cpx D = {diag_embed(g.r), diag_embed(g.i)};
        M = M.r ? (cpx){ts_add(M.r, D.r), ts_add(M.i, D.i)} : D;
    }
    return M;
}

void tsl_eig_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *Lp = tsi_node_saved(n, 0), *Vp = tsi_node_saved(n, 1);
    if ((!go[0] && !go[1]) || !Lp || !Vp) return;
    if (tsi_create_graph_active()) { /* the pairs again, as views of the outputs with history */
        ts_tensor *L = tsi_node_saved(n, 2), *V = tsi_node_saved(n, 3);
        Lp = L ? ts_view_as_real(L) : NULL, Vp = V ? ts_view_as_real(V) : NULL;
        if (!Lp || !Vp) return;
    }
    ts_tensor *gLp = go[0] ? ts_view_as_real(go[0]) : NULL,
              *gVp = go[1] ? ts_view_as_real(go[1]) : NULL;
    if ((go[0] && !gLp) || (go[1] && !gVp)) return;
    const int64_t order = Lp->shape.dims[Lp->shape.ndim - 2];
    cpx L = parts(Lp), V = parts(Vp), W = cadj(V);
    if (!L.r || !L.i || !V.r || !V.i || !W.r || !W.i) return; /* the error is set */
    cpx M = inner(L, V, W, gLp, gVp, order, L.r);
    if (!M.r || !M.i) return;
    cpx C = cmm(M, W);
    /* W X = C as the real system of order 2n: [[Wr, -Wi], [Wi, Wr]] [Xr; Xi] = [Cr; Ci] */
    ts_tensor *top[2] = {W.r, ts_neg(W.i)}, *bot[2] = {W.i, W.r};
    ts_tensor *rows[2] = {ts_cat(top, 2, -1), ts_cat(bot, 2, -1)};
    ts_tensor *rhs[2] = {C.r, C.i};
    ts_tensor *X = ts_linalg_solve(ts_cat(rows, 2, -2), ts_cat(rhs, 2, -2), true);
    if (X) gi[0] = ts_narrow(X, -2, 0, order);
}
