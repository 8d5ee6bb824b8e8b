/* sim_matmul_bias_act.c — the sim devices' matmul_bias_act (backend.h, decision 0032): the cpu
 * kernels called as the composition calls them (linear's matmul_bias into the output, then
 * ts_relu's unary kernel, or ts_gelu_tanh's nine elementwise ops in its order, each rounded to the
 * dtype), so sim's outputs are the composition's bits on the cpu and the front end's use of the
 * slot (src/nn/linear_act_fused.c) runs where there is no GPU. sim memory is host memory: the
 * temporaries are malloc'd and the relu mask is packed on the host. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/sim/sim_backend.h"

static size_t elem_size(ts_dtype dt) { return dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2; }

/* a contiguous [m, n] view of dtype dt at p */
static ts_kview plain(void *p, ts_dtype dt, int64_t m, int64_t n) {
    ts_kview v = {0};
    v.data = p, v.dtype = dt, v.ndim = 2;
    v.shape[0] = m, v.shape[1] = n, v.strides[0] = n, v.strides[1] = 1;
    return v;
}

/* ts_gelu_tanh's ops on z (= o on entry), o written last, t1 and t2 [m, n] temporaries: inner =
 * (z k) ((z^2 0.044715) + 1), o = (z 0.5) (tanh(inner) + 1) */
static void gelu_tanh(const ts_backend *be, int index, const ts_kview *o, const ts_kview *t1,
                      const ts_kview *t2) {
    const double k = 0.79788456080286535588; /* sqrt(2 / pi), gelu_tanh.c's */
    be->binary_scalar(be, index, TS_B_MUL, t1, o, k);
    be->unary(be, index, TS_U_SQUARE, t2, o, 0, 0);
    be->binary_scalar(be, index, TS_B_MUL, t2, t2, 0.044715);
    be->binary_scalar(be, index, TS_B_ADD, t2, t2, 1.0);
    be->binary(be, index, TS_B_MUL, t1, t1, t2);
    be->unary(be, index, TS_U_TANH, t1, t1, 0, 0);
    be->binary_scalar(be, index, TS_B_ADD, t1, t1, 1.0);
    be->binary_scalar(be, index, TS_B_MUL, t2, o, 0.5);
    be->binary(be, index, TS_B_MUL, o, t2, t1);
}

/* the mask of y = relu(z) > 0 (the same as z > 0, NaN clear): bit i * ld + j, low bit first;
 * pos an [m, n] bool temporary */
static void relu_mask(const ts_backend *be, int index, const ts_kview *o, const ts_epi_aux *aux,
                      unsigned char *pos) {
    const int64_t m = o->shape[0], n = o->shape[1];
    const ts_kview kp = plain(pos, TS_BOOL, m, n);
    be->binary_scalar(be, index, TS_B_GT, &kp, o, 0.0);
    unsigned char *bits = (unsigned char *)aux->data;
    memset(bits, 0, (size_t)(m * aux->ld / 8));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            if (pos[i * n + j]) {
                const int64_t k = i * aux->ld + j;
                bits[k / 8] |= (unsigned char)(1u << (k % 8));
            }
}

static bool sim_matmul_bias_act(const ts_backend *be, int index, ts_epi_act act,
                                const ts_kview *out, const ts_kview *a, const ts_kview *b,
                                const ts_kview *bias, const ts_epi_aux *aux) {
    const int64_t m = out->shape[1], n = out->shape[2];
    const ts_dtype dt = out->dtype;
    const bool with_aux = aux && aux->data;
    if ((act != TS_EPI_RELU && act != TS_EPI_GELU_TANH) ||
        (dt != TS_F32 && dt != TS_F64 && dt != TS_F16 && dt != TS_BF16) || out->strides[1] != n ||
        out->strides[2] != 1 || a->shape[2] < 1 ||
        (with_aux && (aux->ld < n || aux->ld % (act == TS_EPI_RELU ? 128 : 8))))
        return false; /* the composition's output is contiguous: so must this be */
    /* the temporaries first: declining must leave the output unwritten */
    const bool relu = act == TS_EPI_RELU;
    const size_t cells = (size_t)(m * n), bytes = cells * elem_size(dt);
    void *p1 = relu ? (with_aux ? malloc(cells) : NULL) : malloc(bytes);
    void *p2 = relu ? NULL : malloc(bytes);
    if ((relu && with_aux && !p1) || (!relu && (!p1 || !p2))) {
        free(p1), free(p2);
        return false;
    }
    be->matmul_bias(be, index, out, a, b, bias); /* linear_fused.c's call */
    const ts_kview o = plain(out->data, dt, m, n);
    if (relu) {
        be->unary(be, index, TS_U_RELU, &o, &o, 0, 0);
        if (with_aux) relu_mask(be, index, &o, aux, p1);
    } else {
        if (with_aux) { /* z, before the activation overwrites it */
            ts_kview z = o;
            z.data = (char *)aux->data, z.strides[0] = aux->ld;
            be->copy(be, index, &z, &o);
        }
        const ts_kview t1 = plain(p1, dt, m, n), t2 = plain(p2, dt, m, n);
        gelu_tanh(be, index, &o, &t1, &t2);
    }
    free(p1), free(p2);
    return true;
}

void tsi_sim_install_bias_act(ts_backend *be) { be->matmul_bias_act = sim_matmul_bias_act; }
