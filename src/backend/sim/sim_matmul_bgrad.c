/* sim_matmul_bgrad.c — the sim devices' matmul_bgrad (backend.h): the cpu kernels' product and
 * reduction called with the very views linear's composition gives them (ts_mm(ts_t(g), x) and
 * tsi_sum_to(g, [N])), so sim's results are the cpu's bits and the front end's use of the slot
 * (src/nn/linear_fused.c) runs where there is no GPU. */
#include "backend/sim/sim_backend.h"

#include "backend/backend.h"

static bool sim_matmul_bgrad(const ts_backend *be, int index, const ts_kview *dw,
                             const ts_kview *db, const ts_kview *g, const ts_kview *x) {
    const int64_t m = g->shape[0], n = g->shape[1], k = x->shape[1];
    /* dw [1, N, K] = g^T [1, N, M] @ x [1, M, K], as matmul's front end passes a 2-D product */
    ts_kview o = *dw, a = *g, b = *x;
    o.ndim = a.ndim = b.ndim = 3;
    o.shape[0] = a.shape[0] = b.shape[0] = 1;
    o.strides[0] = a.strides[0] = b.strides[0] = 0;
    o.shape[1] = n, o.shape[2] = k, o.strides[1] = k, o.strides[2] = 1;
    a.shape[1] = n, a.shape[2] = m, a.strides[1] = g->strides[1], a.strides[2] = g->strides[0];
    b.shape[1] = m, b.shape[2] = k, b.strides[1] = x->strides[0], b.strides[2] = x->strides[1];
    be->matmul(be, index, &o, &a, &b);
    /* db [N] = the sum over g's rows: the kept dim first, then the reduced one (reduce.c) */
    ts_kview in = *g, out = *db;
    in.ndim = 2;
    in.shape[0] = n, in.strides[0] = g->strides[1];
    in.shape[1] = m, in.strides[1] = g->strides[0];
    out.ndim = 1, out.shape[0] = n, out.strides[0] = 1;
    be->reduce(be, index, TS_R_SUM, &out, &in, 1, 0.0);
    return true;
}

void tsi_sim_install_bgrad(ts_backend *be) { be->matmul_bgrad = sim_matmul_bgrad; }
