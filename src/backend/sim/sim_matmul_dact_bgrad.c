/* sim_matmul_dact_bgrad.c — the sim devices' matmul_dact_bgrad (backend.h, decision 0032): the
 * cpu kernels called as the front end's composed backward of Linear, act, Linear calls them
 * (src/nn/mlp_fused.c): dh = g @ w with ts_mm's views; relu's gradient as threshold_backward's
 * kernel (TS_B_RELU_BWD) on a 0 / 1 copy of the mask; gelu_tanh's as autograd differentiates its
 * nine ops, each rounded to the dtype; then db as sum_to's reduction. So sim gives the
 * composition's bits (a NaN pre-activation through relu aside: the mask has it clear where the
 * composition passes the gradient through) and the front end's use of the slot runs where there
 * is no GPU. */
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/sim/sim_backend.h"

enum { N_TEMPS = 5 };

static size_t elem_size(ts_dtype dt) { return dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2; }

/* a contiguous [m, n] view of dtype dt at p, row stride ld */
static ts_kview plain(void *p, ts_dtype dt, int64_t m, int64_t n, int64_t ld) {
    ts_kview v = {0};
    v.data = p, v.dtype = dt, v.ndim = 2;
    v.shape[0] = m, v.shape[1] = n, v.strides[0] = ld, v.strides[1] = 1;
    return v;
}

/* dz (= dh on entry) *= the relu mask, through threshold_backward's kernel on the mask as 0 / 1 */
static void relu_grad(const ts_backend *be, int index, const ts_kview *dz, const ts_epi_aux *aux,
                      void *t) {
    const int64_t m = dz->shape[0], n = dz->shape[1];
    const unsigned char *bits = (const unsigned char *)aux->data;
    /* the temporary: the mask in dz's dtype first (malloc's alignment), then m * n bytes of bool */
    unsigned char *pos = (unsigned char *)t + (size_t)(m * n) * elem_size(dz->dtype);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            const int64_t k = i * aux->ld + j;
            pos[i * n + j] = (unsigned char)((bits[k / 8] >> (k % 8)) & 1u);
        }
    const ts_kview kp = plain(pos, TS_BOOL, m, n, n);
    const ts_kview v = plain(t, dz->dtype, m, n, n);
    be->copy(be, index, &v, &kp);
    be->binary(be, index, TS_B_RELU_BWD, dz, dz, &v);
}

/* dz (= dh on entry) = the gradient of ts_gelu_tanh at z (the aux) as autograd gives it for its
 * nine ops (gelu_tanh.c), t[0..5) temporaries. The forward's values: S = z^2, Q = S c + 1,
 * P = z k, T = tanh(P Q), B = T + 1, A = z 0.5, y = A B; the nodes' gradients in the engine's
 * order (its ready stack: y's second input first): gB = g A, gI = tanh_backward(gB, T), then
 * Q's branch, gQ = gI P, gS = gQ c, cS = gS (z 2) (square's backward), then cP = (gI Q) k, then
 * cA = (g B) 0.5, summed as they arrive: (cS + cP) + cA. */
static void gelu_grad(const ts_backend *be, int index, const ts_kview *dz, const ts_kview *z,
                      const ts_kview *t) {
    const double k = 0.79788456080286535588, c = 0.044715; /* gelu_tanh.c's */
    const ts_kview *q = &t[0], *p = &t[1], *tt = &t[2], *bb = &t[3], *a = &t[4];
    be->unary(be, index, TS_U_SQUARE, q, z, 0, 0);
    be->binary_scalar(be, index, TS_B_MUL, q, q, c);
    be->binary_scalar(be, index, TS_B_ADD, q, q, 1.0); /* Q */
    be->binary_scalar(be, index, TS_B_MUL, p, z, k);   /* P */
    be->binary(be, index, TS_B_MUL, tt, p, q);
    be->unary(be, index, TS_U_TANH, tt, tt, 0, 0);       /* T */
    be->binary_scalar(be, index, TS_B_ADD, bb, tt, 1.0); /* B */
    be->binary_scalar(be, index, TS_B_MUL, a, z, 0.5);   /* A */
    be->binary(be, index, TS_B_MUL, a, dz, a);           /* gB */
    be->binary(be, index, TS_B_TANH_BWD, a, a, tt);      /* gI */
    be->binary(be, index, TS_B_MUL, tt, a, p);           /* gQ */
    be->binary_scalar(be, index, TS_B_MUL, tt, tt, c);   /* gS */
    be->binary_scalar(be, index, TS_B_MUL, p, z, 2.0);
    be->binary(be, index, TS_B_MUL, tt, tt, p);          /* cS */
    be->binary(be, index, TS_B_MUL, a, a, q);            /* gP */
    be->binary_scalar(be, index, TS_B_MUL, a, a, k);     /* cP */
    be->binary(be, index, TS_B_ADD, tt, tt, a);          /* cS + cP */
    be->binary(be, index, TS_B_MUL, bb, dz, bb);         /* gA */
    be->binary_scalar(be, index, TS_B_MUL, bb, bb, 0.5); /* cA */
    be->binary(be, index, TS_B_ADD, dz, tt, bb);
}

static bool sim_matmul_dact_bgrad(const ts_backend *be, int index, ts_epi_act act,
                                  const ts_kview *dz, const ts_kview *db, const ts_kview *g,
                                  const ts_kview *w, const ts_epi_aux *aux) {
    const ts_dtype dt = dz->dtype;
    const bool relu = act == TS_EPI_RELU;
    if ((!relu && act != TS_EPI_GELU_TANH) || !aux || !aux->data || g->ndim != 2 || w->ndim != 2 ||
        dz->ndim != 2 || db->ndim != 1)
        return false;
    const int64_t m = g->shape[0], n2 = g->shape[1], n1 = w->shape[1];
    if ((dt != TS_F32 && dt != TS_F64 && dt != TS_F16 && dt != TS_BF16) || g->dtype != dt ||
        w->dtype != dt || db->dtype != dt || m < 1 || n1 < 1 || n2 < 1 || w->shape[0] != n2 ||
        dz->shape[0] != m || dz->shape[1] != n1 || dz->strides[0] != n1 || dz->strides[1] != 1 ||
        db->shape[0] != n1 || db->strides[0] != 1 || aux->ld < n1 || aux->ld % (relu ? 128 : 8))
        return false;
    /* the temporaries first: declining must leave dz and db unwritten */
    const size_t cells = (size_t)(m * n1), bytes = cells * elem_size(dt);
    const int nt = relu ? 1 : N_TEMPS;
    void *p[N_TEMPS] = {0};
    bool ok = true;
    for (int i = 0; i < nt; i++) ok = ok && (p[i] = malloc(relu ? cells + bytes : bytes));
    if (!ok) {
        for (int i = 0; i < nt; i++) free(p[i]);
        return false;
    }
    /* dh [1, M, N1] = g [1, M, N2] @ w [1, N2, N1], as ts_mm passes a 2-D product */
    ts_kview o = *dz, a = *g, b = *w;
    o.ndim = a.ndim = b.ndim = 3;
    o.shape[0] = a.shape[0] = b.shape[0] = 1;
    o.strides[0] = a.strides[0] = b.strides[0] = 0;
    o.shape[1] = m, o.shape[2] = n1, o.strides[1] = n1, o.strides[2] = 1;
    a.shape[1] = m, a.shape[2] = n2, a.strides[1] = g->strides[0], a.strides[2] = g->strides[1];
    b.shape[1] = n2, b.shape[2] = n1, b.strides[1] = w->strides[0], b.strides[2] = w->strides[1];
    be->matmul(be, index, &o, &a, &b);
    const ts_kview d = plain(dz->data, dt, m, n1, n1);
    if (relu) {
        relu_grad(be, index, &d, aux, p[0]);
    } else {
        ts_kview t[N_TEMPS];
        for (int i = 0; i < N_TEMPS; i++) t[i] = plain(p[i], dt, m, n1, n1);
        const ts_kview z = plain(aux->data, dt, m, n1, aux->ld);
        gelu_grad(be, index, &d, &z, t);
    }
    /* db [N1] = the sum over dz's rows: the kept dim first, then the reduced one (reduce.c) */
    ts_kview in = d, out = *db;
    in.shape[0] = n1, in.strides[0] = 1;
    in.shape[1] = m, in.strides[1] = n1;
    be->reduce(be, index, TS_R_SUM, &out, &in, 1, 0.0);
    for (int i = 0; i < nt; i++) free(p[i]);
    return true;
}

void tsi_sim_install_dact_bgrad(ts_backend *be) { be->matmul_dact_bgrad = sim_matmul_dact_bgrad; }
