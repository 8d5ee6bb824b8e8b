/* cuda_sdpa.cu — fused scaled dot-product attention on CUDA (flash attention: tiles of 32 keys in
 * shared memory, online softmax, no L x S matrix; backward recomputes the weights from the saved
 * log-sum-exp). The semantics are backend.h's ts_sdpa_args, the same as the CPU kernels
 * (kern_sdpa.c): masks, causal, rows with every key masked (output 0, lse +inf), dropout with
 * Philox at the reference's positions. f16/bf16 compute in float, f64 in double; head sizes up to
 * 128 (larger ones take the reference composition).
 *
 * Forward: a block of 4 warps owns 32 query rows (8 per warp); for each tile of 32 keys the warp
 * scores a row with lane c on key c, folds the tile into the row's running max, sum and output
 * (each lane owns output columns lane, lane + 32, ...), the weights broadcast by shuffles.
 * Backward, three kernels and no atomics (results independent of scheduling): D = rowsum(dO * out);
 * dK, dV per tile of 32 keys (up to 4 warps take the query rows that see the tile in turn, lane c
 * recomputing weight and gradient of key c, each warp's sums in shared memory, added in warp
 * order); dQ per block of 32 query rows over the key tiles, as the forward.
 *
 * f16 / bf16 attention without mask or dropout at head size 64 or 128 takes the tensor-core
 * kernels of cuda_sdpa_tc.cu instead (tsc_sdpa_tc_takes; TS_CUDA_SDPA_TC=0 switches them off). */
#include <math.h>

#include "backend/cuda/cuda_sdpa_common.cuh"
#include "backend/philox.h"

namespace {

#define SD_TILE      32  /* keys per tile; rows per forward/dQ block */
#define SD_WARPS     4   /* warps of a forward/dQ block */
#define SD_ROWS      8   /* query rows per warp: SD_WARPS * SD_ROWS == SD_TILE */
#define SD_MAXD      128 /* head sizes E and Ev */
#define SD_MAXD_LANE (SD_MAXD / 32)

template <typename A> __device__ __forceinline__ A sd_exp(A x) { return exp(x); }
template <> __device__ __forceinline__ float sd_exp<float>(float x) { return __expf(x); }

template <typename A> __device__ __forceinline__ A sd_warp_max(A x) {
    for (int off = 16; off > 0; off >>= 1) {
        A o = __shfl_xor_sync(0xffffffffu, x, off);
        x = o > x ? o : x;
    }
    return x;
}
template <typename A> __device__ __forceinline__ A sd_warp_sum(A x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* the weight (n, i, j) survives dropout */
__device__ __forceinline__ bool sd_keep(const SdArgs &P, int64_t n, int64_t i, int64_t j) {
    uint64_t seed = P.seed, base = P.offset;
    tsc_philox_at(P.counters, &seed, &base);
    const uint64_t pos = base + (uint64_t)((n * P.L + i) * P.S + j);
    return (double)ts_philox_u24(ts_philox_word(seed, pos, 0)) < 1.0 - P.dropout_p;
}

/* The score of query row i (pre-scaled, in qrow) with key j held in krow, masked: -inf when key j
 * is out of range, after row i (causal) or masked out by a bool mask; plus an additive mask. */
template <typename T, typename A>
__device__ __forceinline__ A sd_score(const SdArgs &P, int64_t n, int64_t i, int64_t j,
                                      const A *qrow, const A *krow) {
    if (j >= P.S || (P.causal && j > i)) return -(A)INFINITY;
    A s = 0;
    for (int64_t e = 0; e < P.E; e++) s += qrow[e] * krow[e];
    if (P.has_mask) {
        const int64_t off =
            sd_batch(P, P.mask, n) + i * P.mask.s[P.mask.nd - 2] + j * P.mask.s[P.mask.nd - 1];
        if (P.mask_bool) {
            if (!((const uint8_t *)P.mask.data)[off]) return -(A)INFINITY;
        } else {
            s += tsc_load_acc(((const T *)P.mask.data)[off]);
        }
    }
    return s;
}

/* Rows [j0, j0 + 32) of k and v (zero past S) into shared tiles of row pitch E + 1 and Ev + 1. */
template <typename T, typename A>
__device__ void sd_load_kv(const SdArgs &P, int64_t n, int64_t j0, A *ks, A *vs) {
    const int64_t kp = P.E + 1, vp = P.Ev + 1;
    const T *k = sd_row<T>(P, P.k, n, j0), *v = sd_row<T>(P, P.v, n, j0);
    const int64_t krs = P.k.s[P.k.nd - 2], vrs = P.v.s[P.v.nd - 2];
    for (int64_t t = threadIdx.x; t < SD_TILE * P.E; t += blockDim.x) {
        const int64_t c = t / P.E, e = t % P.E;
        ks[c * kp + e] = j0 + c < P.S ? tsc_load_acc(k[c * krs + e]) : (A)0;
    }
    for (int64_t t = threadIdx.x; t < SD_TILE * P.Ev; t += blockDim.x) {
        const int64_t c = t / P.Ev, e = t % P.Ev;
        vs[c * vp + e] = j0 + c < P.S ? tsc_load_acc(v[c * vrs + e]) : (A)0;
    }
}

/* --------------------------------------------------------------------------- forward */
template <typename T, typename A> __global__ void sd_forward_kernel(SdArgs P) {
    extern __shared__ unsigned char sd_smem[];
    A *ks = (A *)sd_smem, *vs = ks + SD_TILE * (P.E + 1), *qs = vs + SD_TILE * (P.Ev + 1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t q0 = (int64_t)blockIdx.x * SD_TILE;
    const int64_t last = (q0 + SD_TILE < P.L ? q0 + SD_TILE : P.L) - 1;
    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads();
        for (int64_t t = threadIdx.x; t < SD_TILE * P.E; t += blockDim.x) {
            const int64_t r = t / P.E, e = t % P.E;
            qs[t] =
                q0 + r < P.L ? tsc_load_acc(sd_row<T>(P, P.q, n, q0 + r)[e]) * (A)P.scale : (A)0;
        }
        A m[SD_ROWS], l[SD_ROWS], o[SD_ROWS][SD_MAXD_LANE];
        for (int i = 0; i < SD_ROWS; i++) {
            m[i] = -(A)INFINITY, l[i] = 0;
            for (int t = 0; t < SD_MAXD_LANE; t++) o[i][t] = 0;
        }
        const int64_t tiles = P.causal ? (last < P.S ? last / SD_TILE + 1 : (P.S + 31) / 32)
                                       : (P.S + SD_TILE - 1) / SD_TILE;
        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * SD_TILE, j = j0 + lane;
            __syncthreads();
            sd_load_kv<T, A>(P, n, j0, ks, vs);
            __syncthreads();
            for (int i = 0; i < SD_ROWS; i++) {
                const int r = warp * SD_ROWS + i;
                const int64_t gi = q0 + r;
                if (gi >= P.L) break; /* the same for the whole warp */
                const A s = sd_score<T, A>(P, n, gi, j, qs + r * P.E, ks + lane * (P.E + 1));
                const A mt = sd_warp_max(s), mnew = mt > m[i] ? mt : m[i];
                if (mnew == -(A)INFINITY) continue; /* nothing seen yet */
                A p = s == -(A)INFINITY ? (A)0 : sd_exp(s - mnew);
                const A alpha = m[i] == -(A)INFINITY ? (A)0 : sd_exp(m[i] - mnew);
                l[i] = l[i] * alpha + sd_warp_sum(p);
                m[i] = mnew;
                if (P.dropout_p > 0) p = j < P.S && sd_keep(P, n, gi, j) ? p * (A)P.drop_scale : 0;
                for (int t = 0; t < SD_MAXD_LANE; t++) o[i][t] *= alpha;
                for (int c = 0; c < SD_TILE; c++) {
                    const A pc = __shfl_sync(0xffffffffu, p, c);
                    for (int t = 0; t < SD_MAXD_LANE; t++) {
                        const int64_t e = lane + 32 * t;
                        if (e < P.Ev) o[i][t] += pc * vs[c * (P.Ev + 1) + e];
                    }
                }
            }
        }
        for (int i = 0; i < SD_ROWS; i++) {
            const int64_t gi = q0 + warp * SD_ROWS + i;
            if (gi >= P.L) break;
            T *orow = (T *)sd_row<T>(P, P.out, n, gi);
            const A inv = l[i] > 0 ? (A)1 / l[i] : (A)0;
            for (int t = 0; t < SD_MAXD_LANE; t++) {
                const int64_t e = lane + 32 * t;
                if (e < P.Ev) orow[e] = tsc_from_acc<T>(o[i][t] * inv);
            }
            if (lane == 0) {
                A *lse = (A *)P.lse.data + sd_batch(P, P.lse, n) + gi;
                *lse = l[i] > 0 ? m[i] + log(l[i]) : (A)INFINITY;
            }
        }
    }
}

/* --------------------------------------------------------------------------- backward */
/* D[n][i] = sum_e dO[n][i][e] * out[n][i][e] */
template <typename T, typename A> __global__ void sd_rowdot_kernel(SdArgs P) {
    A *D = (A *)P.D;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < P.N * P.L;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = t / P.L, i = t % P.L;
        const T *g = sd_row<T>(P, P.dout, n, i), *o = sd_row<T>(P, P.out, n, i);
        A d = 0;
        for (int64_t e = 0; e < P.Ev; e++) d += tsc_load_acc(g[e]) * tsc_load_acc(o[e]);
        D[t] = d;
    }
}

/* The weight of (i, j) recomputed from the score, and dS, for lane-owned key j; lse_n and D_n are
 * batch n's rows of the log-sum-exp and of D. */
template <typename A> struct SdGrad {
    A pd; /* the weight after dropout (dV's factor) */
    A ds; /* dS = P (dP - D) */
};
template <typename T, typename A>
__device__ __forceinline__ SdGrad<A> sd_grad(const SdArgs &P, int64_t n, int64_t i, int64_t j,
                                             const A *qrow, const A *krow, const A *dorow,
                                             const A *vrow, const A *lse_n, const A *D_n) {
    SdGrad<A> g = {0, 0};
    const A s = sd_score<T, A>(P, n, i, j, qrow, krow);
    const A lse = lse_n[i];
    if (s == -(A)INFINITY || lse == (A)INFINITY) return g;
    const A p = sd_exp(s - lse);
    A dp = 0;
    for (int64_t e = 0; e < P.Ev; e++) dp += dorow[e] * vrow[e];
    const A D = D_n[i];
    if (P.dropout_p > 0) {
        const bool keep = sd_keep(P, n, i, j);
        g.pd = keep ? p * (A)P.drop_scale : 0;
        dp = keep ? dp * (A)P.drop_scale : 0;
    } else {
        g.pd = p;
    }
    g.ds = p * (dp - D);
    return g;
}

/* Shared memory of the dK/dV kernel: the key and value tiles, then per warp its partial dK and dV
 * of the tile and its current query and dO rows. */
__host__ __device__ inline size_t sd_dkdv_tile_elems(const SdArgs &P) {
    return (size_t)SD_TILE * (P.E + 1 + P.Ev + 1);
}
__host__ __device__ inline size_t sd_dkdv_warp_elems(const SdArgs &P) {
    return (size_t)SD_TILE * (P.E + P.Ev) + (size_t)(P.E + P.Ev);
}

/* dK (from the pre-scaled queries) and dV of a tile of 32 keys, lane c on key c. The block's warps
 * take the query rows that see the tile in turn (warp w rows w, w + W, ...), each summing its rows
 * into its own partials; the partials are then added in warp order, so the result does not
 * depend on scheduling. */
template <typename T, typename A> __global__ void sd_dkdv_kernel(SdArgs P) {
    extern __shared__ unsigned char sd_smem[];
    const int64_t kp = P.E + 1, vp = P.Ev + 1;
    const int W = (int)(blockDim.x >> 5), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    A *ks = (A *)sd_smem, *vs = ks + SD_TILE * kp, *warps = vs + SD_TILE * vp;
    const size_t per_warp = sd_dkdv_warp_elems(P);
    A *dks = warps + warp * per_warp, *dvs = dks + SD_TILE * P.E;
    A *qrow = dvs + SD_TILE * P.Ev, *dorow = qrow + P.E;
    const int64_t j0 = (int64_t)blockIdx.x * SD_TILE, j = j0 + lane;
    const int64_t qs = P.q.s[P.q.nd - 2], gs = P.dout.s[P.dout.nd - 2];
    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads();
        sd_load_kv<T, A>(P, n, j0, ks, vs);
        for (int64_t t = lane; t < SD_TILE * P.E; t += 32) dks[t] = 0;
        for (int64_t t = lane; t < SD_TILE * P.Ev; t += 32) dvs[t] = 0;
        const T *q_n = sd_row<T>(P, P.q, n, 0), *g_n = sd_row<T>(P, P.dout, n, 0);
        const A *lse_n = (const A *)P.lse.data + sd_batch(P, P.lse, n);
        const A *D_n = (const A *)P.D + n * P.L;
        __syncthreads();
        for (int64_t i = (P.causal ? j0 : 0) + warp; i < P.L; i += W) {
            __syncwarp();
            const T *q = q_n + i * qs, *g = g_n + i * gs;
            for (int64_t e = lane; e < P.E; e += 32) qrow[e] = tsc_load_acc(q[e]) * (A)P.scale;
            for (int64_t e = lane; e < P.Ev; e += 32) dorow[e] = tsc_load_acc(g[e]);
            __syncwarp();
            const SdGrad<A> gr =
                sd_grad<T, A>(P, n, i, j, qrow, ks + lane * kp, dorow, vs + lane * vp, lse_n, D_n);
            if (!__any_sync(0xffffffffu, gr.pd != 0 || gr.ds != 0)) continue;
            for (int c = 0; c < SD_TILE; c++) {
                const A pdc = __shfl_sync(0xffffffffu, gr.pd, c);
                const A dsc = __shfl_sync(0xffffffffu, gr.ds, c);
                for (int64_t e = lane; e < P.Ev; e += 32) dvs[c * P.Ev + e] += pdc * dorow[e];
                for (int64_t e = lane; e < P.E; e += 32) dks[c * P.E + e] += dsc * qrow[e];
            }
        }
        __syncthreads();
        for (int64_t t = threadIdx.x; t < SD_TILE * P.E; t += blockDim.x) {
            const int64_t c = t / P.E, e = t % P.E;
            if (j0 + c >= P.S) continue;
            A sum = 0;
            for (int w = 0; w < W; w++) sum += warps[w * per_warp + t];
            ((T *)sd_row<T>(P, P.dk, n, j0 + c))[e] = tsc_from_acc<T>(sum);
        }
        for (int64_t t = threadIdx.x; t < SD_TILE * P.Ev; t += blockDim.x) {
            const int64_t c = t / P.Ev, e = t % P.Ev;
            if (j0 + c >= P.S) continue;
            A sum = 0;
            for (int w = 0; w < W; w++) sum += warps[w * per_warp + SD_TILE * P.E + t];
            ((T *)sd_row<T>(P, P.dv, n, j0 + c))[e] = tsc_from_acc<T>(sum);
        }
    }
}

/* dQ per block of 32 query rows (8 per warp), over the key tiles they see. */
template <typename T, typename A> __global__ void sd_dq_kernel(SdArgs P) {
    extern __shared__ unsigned char sd_smem[];
    const int64_t kp = P.E + 1, vp = P.Ev + 1;
    A *ks = (A *)sd_smem, *vs = ks + SD_TILE * kp, *qs = vs + SD_TILE * vp;
    A *dos = qs + SD_TILE * P.E;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t q0 = (int64_t)blockIdx.x * SD_TILE;
    const int64_t last = (q0 + SD_TILE < P.L ? q0 + SD_TILE : P.L) - 1;
    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads();
        for (int64_t t = threadIdx.x; t < SD_TILE * P.E; t += blockDim.x) {
            const int64_t r = t / P.E, e = t % P.E;
            qs[t] =
                q0 + r < P.L ? tsc_load_acc(sd_row<T>(P, P.q, n, q0 + r)[e]) * (A)P.scale : (A)0;
        }
        for (int64_t t = threadIdx.x; t < SD_TILE * P.Ev; t += blockDim.x) {
            const int64_t r = t / P.Ev, e = t % P.Ev;
            dos[t] = q0 + r < P.L ? tsc_load_acc(sd_row<T>(P, P.dout, n, q0 + r)[e]) : (A)0;
        }
        const A *lse_n = (const A *)P.lse.data + sd_batch(P, P.lse, n);
        const A *D_n = (const A *)P.D + n * P.L;
        A dq[SD_ROWS][SD_MAXD_LANE];
        for (int i = 0; i < SD_ROWS; i++)
            for (int t = 0; t < SD_MAXD_LANE; t++) dq[i][t] = 0;
        const int64_t tiles = P.causal ? (last < P.S ? last / SD_TILE + 1 : (P.S + 31) / 32)
                                       : (P.S + SD_TILE - 1) / SD_TILE;
        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * SD_TILE, j = j0 + lane;
            __syncthreads();
            sd_load_kv<T, A>(P, n, j0, ks, vs);
            __syncthreads();
            for (int i = 0; i < SD_ROWS; i++) {
                const int r = warp * SD_ROWS + i;
                const int64_t gi = q0 + r;
                if (gi >= P.L) break;
                const SdGrad<A> gr = sd_grad<T, A>(P, n, gi, j, qs + r * P.E, ks + lane * kp,
                                                   dos + r * P.Ev, vs + lane * vp, lse_n, D_n);
                for (int c = 0; c < SD_TILE; c++) {
                    const A dsc = __shfl_sync(0xffffffffu, gr.ds, c);
                    for (int t = 0; t < SD_MAXD_LANE; t++) {
                        const int64_t e = lane + 32 * t;
                        if (e < P.E) dq[i][t] += dsc * ks[c * kp + e];
                    }
                }
            }
        }
        for (int i = 0; i < SD_ROWS; i++) {
            const int64_t gi = q0 + warp * SD_ROWS + i;
            if (gi >= P.L) break;
            T *row = (T *)sd_row<T>(P, P.dq, n, gi);
            for (int t = 0; t < SD_MAXD_LANE; t++) {
                const int64_t e = lane + 32 * t;
                if (e < P.E) row[e] = tsc_from_acc<T>(dq[i][t] * (A)P.scale);
            }
        }
    }
}

/* --------------------------------------------------------------------------- launches */
template <typename T> void sd_forward(int index, const SdArgs &P) {
    typedef typename tsc_acc<T>::type A;
    const size_t smem = sizeof(A) * (size_t)(SD_TILE * (P.E + 1 + P.Ev + 1 + P.E));
    if (!sd_smem(sd_forward_kernel<T, A>, smem, index, "scaled_dot_product_attention")) return;
    sd_forward_kernel<T, A>
        <<<sd_grid((P.L + SD_TILE - 1) / SD_TILE, P.N), 32 * SD_WARPS, smem, tsc_stream(index)>>>(
            P);
    tsc_launch_check("scaled_dot_product_attention", index);
}

template <typename T> void sd_backward(int index, const SdArgs &P) {
    typedef typename tsc_acc<T>::type A;
    const char *what = "scaled_dot_product_attention backward";
    cudaStream_t st = tsc_stream(index);
    sd_rowdot_kernel<T, A><<<tsc_grid(P.N * P.L, TSC_THREADS), TSC_THREADS, 0, st>>>(P);
    tsc_launch_check(what, index);
    /* as many warps (up to 4) as the device's shared memory per block holds partials for */
    const size_t kv = sd_dkdv_tile_elems(P), per_warp = sd_dkdv_warp_elems(P);
    const cudaDeviceProp *prop = tsc_props(index);
    const size_t limit = prop ? prop->sharedMemPerBlockOptin : 48 * 1024;
    int warps = SD_WARPS;
    while (warps > 1 && sizeof(A) * (kv + warps * per_warp) > limit) warps--;
    const size_t smem_kv = sizeof(A) * (kv + warps * per_warp);
    if (!sd_smem(sd_dkdv_kernel<T, A>, smem_kv, index, what)) return;
    sd_dkdv_kernel<T, A>
        <<<sd_grid((P.S + SD_TILE - 1) / SD_TILE, P.N), 32 * warps, smem_kv, st>>>(P);
    tsc_launch_check(what, index);
    const size_t smem_q = sizeof(A) * (kv + (size_t)SD_TILE * (P.E + P.Ev));
    if (!sd_smem(sd_dq_kernel<T, A>, smem_q, index, what)) return;
    sd_dq_kernel<T, A>
        <<<sd_grid((P.L + SD_TILE - 1) / SD_TILE, P.N), 32 * SD_WARPS, smem_q, st>>>(P);
    tsc_launch_check(what, index);
}

} /* namespace */

bool tsc_sdpa_supports(const ts_backend *be, int index, const ts_sdpa_args *a) {
    (void)be, (void)index;
    if (!tsc_is_float(a->q.dtype)) return false;
    if (a->has_mask && a->mask.dtype != TS_BOOL && a->mask.dtype != a->q.dtype) return false;
    const int nb = a->q.ndim - 2;
    return a->q.shape[nb + 1] <= SD_MAXD && a->v.shape[nb + 1] <= SD_MAXD;
}

size_t tsc_sdpa_workspace(const ts_backend *be, int index, ts_sdpa_args *a, bool backward) {
    (void)be, (void)index;
    a->threads = 1;
    if (!backward) return 0;
    int64_t rows = 1;
    for (int d = 0; d < a->q.ndim - 1; d++) rows *= a->q.shape[d];
    const size_t bytes = (size_t)rows * (a->q.dtype == TS_F64 ? sizeof(double) : sizeof(float));
    if (!tsc_sdpa_tc_takes(a)) return bytes;
    const size_t tc = tsc_sdpa_tc_workspace(a);
    return tc > bytes ? tc : bytes;
}

void tsc_sdpa_forward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be, (void)ws;
    if (tsc_sdpa_tc_takes(a)) return tsc_sdpa_tc_forward(index, a); /* tensor cores */
    SdArgs P = sd_args(index, a);
    if (!tsc_begin(index)) return;
    TSC_FLOAT_SWITCH(a->q.dtype, T, sd_forward<T>(index, P))
}

void tsc_sdpa_backward(const ts_backend *be, int index, const ts_sdpa_args *a, void *ws) {
    (void)be;
    if (tsc_sdpa_tc_takes(a)) return tsc_sdpa_tc_backward(index, a, ws); /* tensor cores */
    SdArgs P = sd_args(index, a);
    P.D = (char *)ws;
    if (!tsc_begin(index)) return;
    TSC_FLOAT_SWITCH(a->q.dtype, T, sd_backward<T>(index, P))
}
