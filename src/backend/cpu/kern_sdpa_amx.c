/* kern_sdpa_amx.c — bf16 attention on AMX tiles, one batch (b, h) at a time per thread.
 *
 * The flash kernels (kern_sdpa_impl.h) widen bf16 operands and multiply in float32 FMAs, a
 * sixteenth of what the tiles do on a host with AMX. Here each batch's block products are
 * gemm_amx.c's tile products (bf16 operands, float32 sums), and for sequences whose L x S scores
 * fit a thread's cache (sdpa_select.c's amx_max_scores) the whole score matrix is formed at once,
 * so no online rescaling is needed.
 *
 * Forward: S = Q K^T (float32); per row x = scale S (+ mask), P = e^(x - m) / l and
 * lse = m + log l; out = round(P) V.
 * Backward: P = e^(scale Q K^T (+ mask) - lse) again; dV^T = dO^T round(P); dP = dO V^T
 * (float32); D = rowsum(dO out); dS = round(scale P (dP - D)); dK^T = Q^T dS; dQ = dS K.
 *
 * The operands of every product are bf16: q, k, v and dO as they are, the weights P and the
 * scores' gradients dS rounded to bf16 once (as PyTorch's CPU flash attention rounds them for
 * its bf16 products); scores, softmax, lse, dP and D are float32, and each output and gradient
 * element is rounded once, by the product that writes it. The products run by blocks of ROWS
 * query rows (or keys), and a causal mask's hidden blocks are skipped. Each batch is one
 * thread's from start to end, so results never depend on the thread count. */
#include "backend/cpu/kern_sdpa_amx.h"

#include <math.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/sdpa_select.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"

bool tsi_sdpa_amx_takes(const ts_sdpa_args *a) {
    const tsi_sdpa_host host = {.threads = 1, .tiles = tsi_amx_gemm_ready()};
    return tsi_sdpa_select(a, false, 1, host).path == TSI_SDPA_PATH_AMX;
}

/* sizes of one call */
typedef struct amx_sizes {
    int nb;
    int64_t N, L, S, E, Ev;
} amx_sizes;

static amx_sizes sizes_of(const ts_sdpa_args *a) {
    amx_sizes z = {.nb = a->q.ndim - 2, .N = 1};
    for (int d = 0; d < z.nb; d++) z.N *= a->q.shape[d];
    z.L = a->q.shape[z.nb], z.E = a->q.shape[z.nb + 1];
    z.S = a->k.shape[z.nb], z.Ev = a->v.shape[z.nb + 1];
    return z;
}

/* element offset of batch n in view v (its batch dims broadcast to q's by stride 0) */
static int64_t batch_offset(const ts_kview *v, const ts_kview *q, int nb, int64_t n) {
    return tsi_sdpa_batch_offset(v, q->shape, nb, n);
}

/* rows (or keys) of one block product: a causal mask's hidden blocks are skipped */
#define ROWS 64

static size_t line(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* the largest packing space of the call's products */
static size_t gemm_bytes(const amx_sizes *z, bool backward) {
    size_t b = max_size(tsi_amx_gemm_serial_bytes(z->L, z->S, z->E),
                        tsi_amx_gemm_serial_bytes(z->L, z->Ev, z->S));
    if (backward) {
        b = max_size(b, tsi_amx_gemm_serial_bytes(z->L, z->S, z->Ev));
        b = max_size(b, tsi_amx_gemm_serial_bytes(z->Ev, z->S, z->L));
        b = max_size(b, tsi_amx_gemm_serial_bytes(z->E, z->S, z->L));
        b = max_size(b, tsi_amx_gemm_serial_bytes(z->L, z->E, z->S));
    }
    return line(b);
}

/* the batch's operands packed once for the tiles: K^T and V forward; K^T, V^T and K backward */
static size_t packs_bytes(const amx_sizes *z, bool backward) {
    const size_t kt = line(tsi_amx_pack_b_bytes(z->E, z->S));
    return backward ? kt + line(tsi_amx_pack_b_bytes(z->Ev, z->S)) +
                          line(tsi_amx_pack_b_bytes(z->S, z->E))
                    : kt + line(tsi_amx_pack_b_bytes(z->S, z->Ev));
}

/* per thread: the float32 scores (and, backward, dP), the bf16 weights (then dS), D, the
 * transposes, the packed operands and the products' packing space */
static size_t thread_bytes(const amx_sizes *z, bool backward) {
    const size_t ls = (size_t)(z->L * z->S);
    size_t b = line(ls * 4) + line(ls * 2) + gemm_bytes(z, backward) + packs_bytes(z, backward);
    if (backward)
        b += line(ls * 4) + line((size_t)z->L * 4) + line((size_t)(z->Ev * z->L) * 2) +
             line((size_t)(z->E * z->L) * 2);
    return b;
}

size_t tsi_sdpa_amx_workspace(const ts_sdpa_args *a, int threads, bool backward) {
    const amx_sizes z = sizes_of(a);
    return thread_bytes(&z, backward) * (size_t)threads;
}

/* the visible keys of row r: all S, or (causal) those up to r */
static int64_t visible(const ts_sdpa_args *a, const amx_sizes *z, int64_t r) {
    return a->causal ? (r + 1 < z->S ? r + 1 : z->S) : z->S;
}

/* x[c] = scale x[c] plus row r's mask (a false bool hides the key: -inf; a bf16 value is added) */
static void scale_mask_row(const ts_sdpa_args *a, const amx_sizes *z, int64_t n, int64_t r,
                           float *x, int64_t cols) {
    const float scale = (float)a->scale;
    for (int64_t c = 0; c < cols; c++) x[c] *= scale;
    if (!a->has_mask) return;
    const ts_kview *m = &a->mask;
    const int64_t si = m->strides[m->ndim - 2], sj = m->strides[m->ndim - 1];
    const int64_t base = batch_offset(m, &a->q, z->nb, n) + r * si;
    if (m->dtype == TS_BOOL) {
        const uint8_t *mp = (const uint8_t *)m->data + base;
        for (int64_t c = 0; c < cols; c++)
            if (!mp[c * sj]) x[c] = -INFINITY;
    } else {
        const uint16_t *mp = (const uint16_t *)m->data + base;
        for (int64_t c = 0; c < cols; c++) x[c] += ts_bf16_to_f32(mp[c * sj]);
    }
}

/* Product C = A B of one batch (gemm_amx.c's serial tile kernel); the strides are {rows,
 * columns}. */
static void product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t sa0, int64_t sa1,
                    const uint16_t *b, int64_t sb0, int64_t sb1, void *c, int64_t sc0, int64_t sc1,
                    bool c_f32, void *ws) {
    const int64_t sa[2] = {sa0, sa1}, sb[2] = {sb0, sb1}, sc[2] = {sc0, sc1};
    tsi_amx_gemm_serial(m, n, k, a, sa, b, sb, c, sc, c_f32, ws);
}

/* C = A B with B packed before (kp rows) */
static void packed_product(int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t sa0,
                           const uint16_t *bp, int64_t kp, void *c, int64_t sc0, bool c_f32,
                           void *ws) {
    const int64_t sa[2] = {sa0, 1}, sc[2] = {sc0, 1};
    tsi_amx_gemm_serial_packed(m, n, k, a, sa, bp, kp, c, sc, c_f32, ws);
}

/* B [k x n] with strides {sb0, sb1} packed at dst; returns the space after it */
static char *pack(char *dst, int64_t k, int64_t n, const uint16_t *b, int64_t sb0, int64_t sb1) {
    const int64_t sb[2] = {sb0, sb1};
    tsi_amx_pack_b(k, n, b, sb, (uint16_t *)dst);
    return dst + line(tsi_amx_pack_b_bytes(k, n));
}

typedef struct amx_batch {
    const uint16_t *q, *k, *v;
    int64_t qrs, krs, vrs;
} amx_batch;

static amx_batch batch_of(const ts_sdpa_args *a, const amx_sizes *z, int64_t n) {
    amx_batch t;
    t.q = (const uint16_t *)a->q.data + batch_offset(&a->q, &a->q, z->nb, n);
    t.k = (const uint16_t *)a->k.data + batch_offset(&a->k, &a->q, z->nb, n);
    t.v = (const uint16_t *)a->v.data + batch_offset(&a->v, &a->q, z->nb, n);
    t.qrs = a->q.strides[z->nb], t.krs = a->k.strides[z->nb], t.vrs = a->v.strides[z->nb];
    return t;
}

/* the keys rows [r0, r1) see: all S, or (causal) up to r1 - 1 */
static int64_t visible_to(const ts_sdpa_args *a, const amx_sizes *z, int64_t r1) {
    return a->causal ? (r1 < z->S ? r1 : z->S) : z->S;
}

static void forward_batch(const ts_sdpa_args *a, const amx_sizes *z, int64_t n, char *ws) {
    const int64_t L = z->L, S = z->S;
    float *Sc = (float *)ws;
    uint16_t *Pb = (uint16_t *)(ws + line((size_t)(L * S) * 4));
    char *Ktp = ws + line((size_t)(L * S) * 4) + line((size_t)(L * S) * 2);
    const amx_batch t = batch_of(a, z, n);
    /* K^T (B of the scores: pairs along the head dim) and V, packed once */
    char *Vp = pack(Ktp, z->E, S, t.k, 1, t.krs);
    void *gw = pack(Vp, S, z->Ev, t.v, t.vrs, 1);
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    float *lse = (float *)a->lse.data + batch_offset(&a->lse, &a->q, z->nb, n);
    uint16_t *out = (uint16_t *)a->out.data + batch_offset(&a->out, &a->q, z->nb, n);
    const int64_t ors = a->out.strides[z->nb];
    for (int64_t r0 = 0; r0 < L; r0 += ROWS) {
        const int64_t r1 = r0 + ROWS < L ? r0 + ROWS : L, cmax = visible_to(a, z, r1);
        /* S = Q K^T over the keys the block sees */
        packed_product(r1 - r0, cmax, z->E, t.q + r0 * t.qrs, t.qrs, (uint16_t *)Ktp, z->E,
                       Sc + r0 * S, S, true, gw);
        for (int64_t r = r0; r < r1; r++) {
            float *x = Sc + r * S;
            const int64_t cols = visible(a, z, r);
            scale_mask_row(a, z, n, r, x, cols);
            const float m = cols ? vk->max_f32(x, cols) : -INFINITY;
            double l = 0;
            if (m > -INFINITY) l = vk->exp_sum_f32(x, x, m, cols);
            /* a row that sees no key: weights 0, output 0, lse +inf (as the flash kernels) */
            if (l > 0) {
                const float inv = (float)(1 / l);
                for (int64_t c = 0; c < cols; c++) x[c] *= inv;
            } else {
                memset(x, 0, (size_t)cols * sizeof *x);
            }
            vk->f32_to_bf16(Pb + r * S, x, cols);
            memset(Pb + r * S + cols, 0, (size_t)(cmax - cols) * sizeof *Pb);
            lse[r] = l > 0 ? m + (float)log(l) : INFINITY;
        }
        /* out = round(P) V, rounded to bf16 once as it is stored */
        packed_product(r1 - r0, z->Ev, cmax, Pb + r0 * S, S, (uint16_t *)Vp, S, out + r0 * ors, ors,
                       false, gw);
    }
}

/* dst [cols x rows] = src [rows x cols] (row stride rs) transposed */
static void transpose(uint16_t *dst, const uint16_t *src, int64_t rs, int64_t rows, int64_t cols) {
    /* in 16 x 16 blocks: the block's rows and columns each stay in a few cache lines */
    for (int64_t r0 = 0; r0 < rows; r0 += 16)
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            const int64_t r1 = r0 + 16 < rows ? r0 + 16 : rows,
                          c1 = c0 + 16 < cols ? c0 + 16 : cols;
            for (int64_t c = c0; c < c1; c++)
                for (int64_t r = r0; r < r1; r++) dst[c * rows + r] = src[r * rs + c];
        }
}

/* sum_e x_e y_e over bf16 rows, in 16 lanes of partial sums added in order at the end */
static float dot_bf16(const uint16_t *x, const uint16_t *y, int64_t n) {
    float lane[16] = {0};
    int64_t e = 0;
    for (; e + 16 <= n; e += 16)
        for (int l = 0; l < 16; l++) lane[l] += ts_bf16_to_f32(x[e + l]) * ts_bf16_to_f32(y[e + l]);
    float d = 0;
    for (int l = 0; l < 16; l++) d += lane[l];
    for (; e < n; e++) d += ts_bf16_to_f32(x[e]) * ts_bf16_to_f32(y[e]);
    return d;
}

static void backward_batch(const ts_sdpa_args *a, const amx_sizes *z, int64_t n, char *ws) {
    const int64_t L = z->L, S = z->S, E = z->E, Ev = z->Ev, nb = z->nb;
    const size_t f32s = line((size_t)(L * S) * 4), b16s = line((size_t)(L * S) * 2);
    float *P = (float *)ws;
    uint16_t *Pb = (uint16_t *)(ws + f32s); /* round(P), then dS */
    float *dP = (float *)(ws + f32s + b16s), *D = (float *)(ws + 2 * f32s + b16s);
    uint16_t *dOt = (uint16_t *)(ws + 2 * f32s + b16s + line((size_t)L * 4));
    uint16_t *Qt = dOt + line((size_t)(Ev * L) * 2) / 2;
    char *Ktp = (char *)Qt + line((size_t)(E * L) * 2);
    const amx_batch t = batch_of(a, z, n);
    /* K^T (B of the scores), V^T (of dP) and K (of dQ), packed once */
    char *Vtp = pack(Ktp, E, S, t.k, 1, t.krs);
    char *Kp = pack(Vtp, Ev, S, t.v, 1, t.vrs);
    void *gw = pack(Kp, S, E, t.k, t.krs, 1);
    const ts_vec_kernels *vk = tsi_vec_kernels_get();
    const float *lse = (const float *)a->lse.data + batch_offset(&a->lse, &a->q, nb, n);
    const uint16_t *o = (const uint16_t *)a->out.data + batch_offset(&a->out, &a->q, nb, n);
    const uint16_t *go = (const uint16_t *)a->dout.data + batch_offset(&a->dout, &a->q, nb, n);
    const int64_t ors = a->out.strides[nb], grs = a->dout.strides[nb];
    /* per block of rows, over the keys it sees: P = e^(scale Q K^T (+ mask) - lse) and its
     * rounding, dP = dO V^T; the keys it does not see weigh 0 */
    for (int64_t r0 = 0; r0 < L; r0 += ROWS) {
        const int64_t r1 = r0 + ROWS < L ? r0 + ROWS : L, cmax = visible_to(a, z, r1);
        packed_product(r1 - r0, cmax, E, t.q + r0 * t.qrs, t.qrs, (uint16_t *)Ktp, E, P + r0 * S, S,
                       true, gw);
        packed_product(r1 - r0, cmax, Ev, go + r0 * grs, grs, (uint16_t *)Vtp, Ev, dP + r0 * S, S,
                       true, gw);
        for (int64_t r = r0; r < r1; r++) {
            float *x = P + r * S;
            const int64_t cols = visible(a, z, r);
            scale_mask_row(a, z, n, r, x, cols);
            if (lse[r] < INFINITY)
                vk->exp_sum_f32(x, x, lse[r], cols);
            else
                memset(x, 0, (size_t)cols * sizeof *x);
            memset(x + cols, 0, (size_t)(S - cols) * sizeof *x);
            vk->f32_to_bf16(Pb + r * S, x, S);
        }
    }
    /* dO^T and Q^T once, the first operands of dV^T and dK^T */
    transpose(dOt, go, grs, L, Ev);
    transpose(Qt, t.q, t.qrs, L, E);
    /* dV^T = dO^T round(P) by blocks of keys, over the rows that see them: dv's rows are C's
     * columns */
    uint16_t *dv = (uint16_t *)a->dv.data + batch_offset(&a->dv, &a->q, nb, n);
    const int64_t dvrs = a->dv.strides[nb], dkrs = a->dk.strides[nb];
    for (int64_t c0 = 0; c0 < S; c0 += ROWS) {
        const int64_t c1 = c0 + ROWS < S ? c0 + ROWS : S, rmin = a->causal ? c0 : 0;
        if (rmin < L)
            product(Ev, c1 - c0, L - rmin, dOt + rmin, L, 1, Pb + rmin * S + c0, S, 1,
                    dv + c0 * dvrs, 1, dvrs, false, gw);
        else /* keys no query sees (causal, S > L) */
            for (int64_t c = c0; c < c1; c++) memset(dv + c * dvrs, 0, (size_t)Ev * sizeof *dv);
    }
    /* D = rowsum(dO out) */
    for (int64_t r = 0; r < L; r++) {
        D[r] = dot_bf16(go + r * grs, o + r * ors, Ev);
    }
    /* dS = round(scale P (dP - D)) over round(P)'s space: the scale of S = scale Q K^T taken
     * into dS, so dQ = dS K and dK = dS^T Q */
    const float scale = (float)a->scale;
    for (int64_t r = 0; r < L; r++) {
        const int64_t cols = visible(a, z, r);
        float *x = dP + r * S;
        const float *p = P + r * S, Dr = D[r];
        for (int64_t c = 0; c < cols; c++) x[c] = scale * p[c] * (x[c] - Dr);
        vk->f32_to_bf16(Pb + r * S, x, cols);
        memset(Pb + r * S + cols, 0, (size_t)(S - cols) * sizeof *Pb);
    }
    uint16_t *dk = (uint16_t *)a->dk.data + batch_offset(&a->dk, &a->q, nb, n);
    for (int64_t c0 = 0; c0 < S; c0 += ROWS) {
        const int64_t c1 = c0 + ROWS < S ? c0 + ROWS : S, rmin = a->causal ? c0 : 0;
        if (rmin < L)
            product(E, c1 - c0, L - rmin, Qt + rmin, L, 1, Pb + rmin * S + c0, S, 1, dk + c0 * dkrs,
                    1, dkrs, false, gw);
        else
            for (int64_t c = c0; c < c1; c++) memset(dk + c * dkrs, 0, (size_t)E * sizeof *dk);
    }
    uint16_t *dq = (uint16_t *)a->dq.data + batch_offset(&a->dq, &a->q, nb, n);
    const int64_t dqrs = a->dq.strides[nb];
    for (int64_t r0 = 0; r0 < L; r0 += ROWS) {
        const int64_t r1 = r0 + ROWS < L ? r0 + ROWS : L, cmax = visible_to(a, z, r1);
        if (cmax > 0)
            packed_product(r1 - r0, E, cmax, Pb + r0 * S, S, (uint16_t *)Kp, S, dq + r0 * dqrs,
                           dqrs, false, gw);
    }
}

static void run(const ts_sdpa_args *a, void *ws, bool backward) {
    const amx_sizes z = sizes_of(a);
    const size_t tb = thread_bytes(&z, backward);
#ifdef TS_HAVE_OPENMP
#pragma omp parallel num_threads(a->threads) if (a->threads > 1)
#endif
    {
        int me = 0;
#ifdef TS_HAVE_OPENMP
        me = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t n = 0; n < z.N; n++) {
            char *mine = (char *)ws + tb * (size_t)me;
            if (backward)
                backward_batch(a, &z, n, mine);
            else
                forward_batch(a, &z, n, mine);
        }
    }
}

void tsi_sdpa_amx_forward(const ts_sdpa_args *a, void *ws) { run(a, ws, false); }
void tsi_sdpa_amx_backward(const ts_sdpa_args *a, void *ws) { run(a, ws, true); }
