/* cuda_sdpa_tc.cu — flash attention (FlashAttention-2's schedule) on tensor cores for the common
 * case: f16 / bf16, head size E == Ev of 64 or 128, no mask, no dropout, causal or not, rows
 * 16-byte aligned (tsc_sdpa_tc_takes; cuda_sdpa.cu's entries dispatch here, everything else
 * stays on its CUDA-core kernels). Same semantics as those (backend.h's ts_sdpa_args).
 *
 * Products go through nvcuda::wmma 16x16x16 fragments with float accumulators (operands in the
 * input dtype). wmma leaves the place of an accumulator element in its 16 x 16 tile unspecified
 * but fixed per fragment type (load_matrix_sync, mma_sync and store_matrix_sync agree on it): each
 * lane learns it once by loading a tile whose elements are their own row (column) index
 * (tc_positions), and then scales rows, masks and scatters the elements it holds.
 *
 * Forward: a block of 4 warps owns 64 query rows, 16 per warp, its Q in registers as fragments;
 * per tile of 64 keys (K, V staged in shared memory, zero past S): S = Q K^T into the warp's
 * float tile in shared memory, the online softmax per row (two lanes a row: running max m in
 * base-2 units, sum l of the float weights), the weights P rounded to the dtype, the output
 * accumulators scaled by exp(m_old - m_new) per row and O += P V. At the end O / l in the dtype
 * and lse = m + log l (float). Causal (top-left): tiles past a block's last row are not loaded,
 * tiles and 16-key slices past a warp's last row not multiplied.
 * Backward, three kernels, no atomics (deterministic): D = rowsum(dO * out) (a warp per row);
 * dK, dV: a block owns 64 keys (16 a warp, accumulators in registers) and walks the query tiles
 * of 64 that see them: P^T = exp(scale K Q^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - D), both
 * rounded to the dtype into shared memory, dV += P^T dO, dK += dS^T Q (times scale at the end);
 * dQ: a block owns 64 queries and walks the key tiles, recomputing dS and dQ += dS K * scale.
 * Arithmetic against exact: the products exact in float, sums in float, and beyond the CUDA-core
 * kernels P (forward and dV) and dS (dQ, dK) rounded once to the dtype as operands.
 *
 * TS_CUDA_SDPA_TC=0 (read once) sends everything to the CUDA-core kernels; tests switch with
 * tsc_sdpa_tc_force (cuda_bridge.h). */
#include <math.h>
#include <stdlib.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_sdpa_common.cuh"

namespace {

namespace wmma = nvcuda::wmma;

#define TC_WARPS 4  /* warps of a block */
#define TC_TILE  64 /* rows a block owns (queries, or keys for dK/dV); rows of a walked tile */
#define TC_PAD   8  /* elements of padding per shared row of the dtype (16 bytes) */
#define TC_FPAD  4  /* per shared row of floats */
#define TC_LDP   (TC_TILE + TC_PAD)  /* row pitch of the warps' P / dS tiles */
#define TC_LDS   (TC_TILE + TC_FPAD) /* row pitch of the warps' float score tiles */
#define TC_LOG2E 1.4426950408889634f
#define TC_LN2   0.6931471805599453f

/* the wmma element type of a storage type, and rounding to it */
template <typename T> struct TcType;
template <> struct TcType<tsc_f16> {
    typedef __half type;
    static __device__ __forceinline__ __half round(float x) { return __float2half_rn(x); }
};
template <> struct TcType<tsc_bf16> {
    typedef __nv_bfloat16 type;
    static __device__ __forceinline__ __nv_bfloat16 round(float x) {
        return __float2bfloat16_rn(x);
    }
};

template <typename H> using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major>;
template <typename H>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::row_major>;
template <typename H>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major>;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;
#define TC_NEL (FragC::num_elements)

/* Where the elements a lane holds in an accumulator fragment sit in their 16 x 16 tile: rows[t],
 * cols[t] for element t. scratch: 256 floats of the warp's own, 32-byte aligned. */
__device__ __forceinline__ void tc_positions(float *scratch, int lane, int *rows, int *cols) {
    FragC f;
    __syncwarp();
    for (int t = lane; t < 256; t += 32) scratch[t] = (float)(t / 16);
    __syncwarp();
    wmma::load_matrix_sync(f, scratch, 16, wmma::mem_row_major);
#pragma unroll
    for (int t = 0; t < TC_NEL; t++) rows[t] = (int)f.x[t];
    __syncwarp();
    for (int t = lane; t < 256; t += 32) scratch[t] = (float)(t % 16);
    __syncwarp();
    wmma::load_matrix_sync(f, scratch, 16, wmma::mem_row_major);
#pragma unroll
    for (int t = 0; t < TC_NEL; t++) cols[t] = (int)f.x[t];
    __syncwarp();
}

/* Rows [r0, r0 + rows) of a view (base: its batch's first element, rstride: its row stride) into
 * shared memory of row pitch ld, zero from row `limit` on; E columns, 16 bytes at a time, by
 * threads tid, tid + nthreads, ... */
template <typename T, int E, typename H>
__device__ __forceinline__ void tc_load_rows(const T *base, int64_t rstride, int64_t r0,
                                             int64_t limit, int rows, H *dst, int ld, int tid,
                                             int nthreads) {
    constexpr int per_row = E / 8; /* 8 elements of 2 bytes in 16 */
    for (int t = tid; t < rows * per_row; t += nthreads) {
        const int r = t / per_row, c = (t % per_row) * 8;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (r0 + r < limit) x = *(const uint4 *)(base + (r0 + r) * rstride + c);
        *(uint4 *)(dst + r * ld + c) = x;
    }
}

template <typename T>
__device__ __forceinline__ const T *tc_base(const SdArgs &P, const SdView &v, int64_t n) {
    return (const T *)v.data + sd_batch(P, v, n);
}
__device__ __forceinline__ int64_t tc_rstride(const SdView &v) { return v.s[v.nd - 2]; }

/* the causal mask hides all of keys [j0, j0 + 16 * cnt) from queries [i0, i0 + 16) */
__device__ __forceinline__ bool tc_hidden(const SdArgs &P, int64_t i0, int64_t j0) {
    return P.causal && j0 > i0 + 15;
}

/* --------------------------------------------------------------------------- forward */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_forward_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16;
    static_assert(16 * LDH * sizeof(H) <= 16 * TC_LDS * sizeof(float), "Q staging fits");
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *ks = (H *)tc_smem, *vs = ks + TC_TILE * LDH;
    float *ss = (float *)(vs + TC_TILE * LDH);
    H *ps = (H *)(ss + TC_WARPS * 16 * TC_LDS);
    float *rowv = (float *)(ps + TC_WARPS * 16 * TC_LDP);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float *sw = ss + warp * 16 * TC_LDS, *rw = rowv + warp * 16;
    H *pw = ps + warp * 16 * TC_LDP;
    int prow[TC_NEL], pcol[TC_NEL];
    tc_positions(sw, lane, prow, pcol);

    const float sl2 = (float)P.scale * TC_LOG2E; /* scores to base-2 exponents */
    const int64_t q0 = (int64_t)blockIdx.x * TC_TILE, w0 = q0 + warp * 16;
    const int64_t qlast = (q0 + TC_TILE < P.L ? q0 + TC_TILE : P.L) - 1;
    const int64_t klast = P.causal && qlast < P.S - 1 ? qlast : P.S - 1;
    const int64_t tiles = klast / TC_TILE + 1;
    const int r = lane >> 1, h = lane & 1; /* softmax: lanes 2r, 2r + 1 share row r */
    const int64_t i = w0 + r;

    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        /* the warp's 16 query rows as fragments, staged through its score tile */
        __syncwarp();
        tc_load_rows<T, E>(tc_base<T>(P, P.q, n), tc_rstride(P.q), w0, P.L, 16, (H *)sw, LDH, lane,
                           32);
        __syncwarp();
        FragA<H> qf[KF];
#pragma unroll
        for (int kf = 0; kf < KF; kf++) wmma::load_matrix_sync(qf[kf], (H *)sw + kf * 16, LDH);
        FragC o[KF];
#pragma unroll
        for (int f = 0; f < KF; f++) wmma::fill_fragment(o[f], 0.0f);
        float m = -INFINITY, l = 0; /* row r's running max (base 2) and sum */

        const T *kb = tc_base<T>(P, P.k, n), *vb = tc_base<T>(P, P.v, n);
        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * TC_TILE;
            __syncthreads(); /* the previous tile's K and V are read */
            tc_load_rows<T, E>(kb, tc_rstride(P.k), j0, P.S, TC_TILE, ks, LDH, threadIdx.x,
                               32 * TC_WARPS);
            tc_load_rows<T, E>(vb, tc_rstride(P.v), j0, P.S, TC_TILE, vs, LDH, threadIdx.x,
                               32 * TC_WARPS);
            __syncthreads();
            if (w0 >= P.L || tc_hidden(P, w0, j0)) continue; /* the same for the whole warp */
            __syncwarp();                                    /* the previous softmax read sw */
#pragma unroll 1
            for (int nf = 0; nf < TC_TILE / 16; nf++) {
                if (tc_hidden(P, w0, j0 + nf * 16)) continue; /* masked below, never read */
                FragC s;
                wmma::fill_fragment(s, 0.0f);
#pragma unroll
                for (int kf = 0; kf < KF; kf++) {
                    FragBCol<H> kt; /* K^T: element (e, j) at ks[j * LDH + e] */
                    wmma::load_matrix_sync(kt, ks + nf * 16 * LDH + kf * 16, LDH);
                    wmma::mma_sync(s, qf[kf], kt, s);
                }
                wmma::store_matrix_sync(sw + nf * 16, s, TC_LDS, wmma::mem_row_major);
            }
            __syncwarp();
            /* online softmax of row r; lane h takes columns h, h + 2, ... */
            float mt = -INFINITY;
            for (int c = h; c < TC_TILE; c += 2) {
                const int64_t j = j0 + c;
                if (j < P.S && !(P.causal && j > i)) mt = fmaxf(mt, sw[r * TC_LDS + c] * sl2);
            }
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
            const float mnew = fmaxf(m, mt), mref = mnew == -INFINITY ? 0.0f : mnew;
            const float alpha = exp2f(m - mref); /* 0 while m is -inf */
            float sum = 0;
            for (int c = h; c < TC_TILE; c += 2) {
                const int64_t j = j0 + c;
                float p = 0;
                if (j < P.S && !(P.causal && j > i)) p = exp2f(sw[r * TC_LDS + c] * sl2 - mref);
                sum += p;
                pw[r * TC_LDP + c] = TcType<T>::round(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            l = l * alpha + sum;
            m = mnew;
            if (h == 0) rw[r] = alpha;
            __syncwarp();
            /* O = alpha O + P V */
#pragma unroll
            for (int f = 0; f < KF; f++)
#pragma unroll
                for (int t = 0; t < TC_NEL; t++) o[f].x[t] *= rw[prow[t]];
#pragma unroll 1
            for (int kk = 0; kk < TC_TILE / 16; kk++) {
                if (tc_hidden(P, w0, j0 + kk * 16)) continue; /* P is 0 there */
                FragA<H> pa;
                wmma::load_matrix_sync(pa, pw + kk * 16, TC_LDP);
#pragma unroll
                for (int f = 0; f < KF; f++) {
                    FragBRow<H> vf;
                    wmma::load_matrix_sync(vf, vs + kk * 16 * LDH + f * 16, LDH);
                    wmma::mma_sync(o[f], pa, vf, o[f]);
                }
            }
        }
        if (w0 >= P.L) continue;
        __syncwarp(); /* rw's alphas are used */
        if (h == 0) {
            rw[r] = l > 0 ? 1.0f / l : 0.0f;
            if (i < P.L)
                ((float *)P.lse.data)[sd_batch(P, P.lse, n) + i] =
                    l > 0 ? (m + log2f(l)) * TC_LN2 : INFINITY;
        }
        __syncwarp();
        T *ob = (T *)tc_base<T>(P, P.out, n);
        const int64_t ors = tc_rstride(P.out);
#pragma unroll
        for (int f = 0; f < KF; f++)
#pragma unroll
            for (int t = 0; t < TC_NEL; t++) {
                const int64_t row = w0 + prow[t];
                if (row < P.L)
                    ob[row * ors + f * 16 + pcol[t]] = tsc_from_acc<T>(o[f].x[t] * rw[prow[t]]);
            }
    }
}

/* --------------------------------------------------------------------------- backward */
/* D[n * L + i] = sum_e dO[n][i][e] * out[n][i][e], a warp per row */
template <typename T> __global__ void tc_rowdot_kernel(SdArgs P) {
    float *D = (float *)P.D;
    const int lane = threadIdx.x & 31;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < P.N * P.L;
         t += warps) {
        const int64_t n = t / P.L, i = t % P.L;
        const T *g = sd_row<T>(P, P.dout, n, i), *o = sd_row<T>(P, P.out, n, i);
        float d = 0;
        for (int64_t e = lane; e < P.Ev; e += 32) d += tsc_load_acc(g[e]) * tsc_load_acc(o[e]);
        for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
        if (lane == 0) D[t] = d;
    }
}

/* The rows' lse (times log2 e; +inf past L) and D of query rows [i0, i0 + 64) into shared memory.
 */
__device__ __forceinline__ void tc_load_lse_d(const SdArgs &P, int64_t n, int64_t i0, float *lse_s,
                                              float *d_s) {
    const float *lse = (const float *)P.lse.data + sd_batch(P, P.lse, n);
    const float *D = (const float *)P.D + n * P.L;
    for (int t = threadIdx.x; t < TC_TILE; t += blockDim.x) {
        const bool in = i0 + t < P.L;
        lse_s[t] = in ? lse[i0 + t] * TC_LOG2E : INFINITY;
        d_s[t] = in ? D[i0 + t] : 0.0f;
    }
}

/* A 16 x 16 tile of weights and their gradients from its scores s and dP: p = exp(scale s - lse)
 * of row/column positions, ds = p (dP - D), rounded to H into pt / dst (either may be NULL) at
 * [rows][cols] of pitch TC_LDP. trans: the tile's rows are keys, its columns queries. */
template <typename T, typename H>
__device__ __forceinline__ void tc_grad_tile(const SdArgs &P, const FragC &s, const FragC &dp,
                                             const int *prow, const int *pcol, bool trans,
                                             int64_t i0, int64_t j0, const float *lse_s,
                                             const float *d_s, float sl2, H *pt, H *dst) {
#pragma unroll
    for (int t = 0; t < TC_NEL; t++) {
        const int qi = trans ? pcol[t] : prow[t], kj = trans ? prow[t] : pcol[t];
        const int64_t i = i0 + qi, j = j0 + kj;
        float p = 0;
        if (j < P.S && !(P.causal && j > i)) p = exp2f(s.x[t] * sl2 - lse_s[qi]);
        const float ds = p * (dp.x[t] - d_s[qi]);
        if (pt) pt[prow[t] * TC_LDP + pcol[t]] = TcType<T>::round(p);
        dst[prow[t] * TC_LDP + pcol[t]] = TcType<T>::round(ds);
    }
}

/* zeros into the 16 x 16 tiles at pt and dst (either may be NULL) */
template <typename T, typename H>
__device__ __forceinline__ void tc_zero_tile(const int *prow, const int *pcol, H *pt, H *dst) {
    const H zero = TcType<T>::round(0.0f);
#pragma unroll
    for (int t = 0; t < TC_NEL; t++) {
        if (pt) pt[prow[t] * TC_LDP + pcol[t]] = zero;
        dst[prow[t] * TC_LDP + pcol[t]] = zero;
    }
}

/* Stores 16 rows of accumulators (times mul) at rows r0 + prow of a view, those before `limit`. */
template <typename T, int KF>
__device__ __forceinline__ void tc_store_rows(const SdArgs &P, const SdView &v, int64_t n,
                                              int64_t r0, int64_t limit, const FragC *acc,
                                              const int *prow, const int *pcol, float mul) {
    T *b = (T *)tc_base<T>(P, v, n);
    const int64_t rs = tc_rstride(v);
#pragma unroll
    for (int f = 0; f < KF; f++)
#pragma unroll
        for (int t = 0; t < TC_NEL; t++) {
            const int64_t row = r0 + prow[t];
            if (row < limit) b[row * rs + f * 16 + pcol[t]] = tsc_from_acc<T>(acc[f].x[t] * mul);
        }
}

/* dK, dV of a block's 64 keys (16 a warp) over the query tiles that see them. */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_dkdv_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *ks = (H *)tc_smem, *vs = ks + TC_TILE * LDH, *qs = vs + TC_TILE * LDH;
    H *dos = qs + TC_TILE * LDH, *pts = dos + TC_TILE * LDH, *dss = pts + TC_WARPS * 16 * TC_LDP;
    float *lse_s = (float *)(dss + TC_WARPS * 16 * TC_LDP), *d_s = lse_s + TC_TILE;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    H *ptw = pts + warp * 16 * TC_LDP, *dsw = dss + warp * 16 * TC_LDP;
    int prow[TC_NEL], pcol[TC_NEL];
    tc_positions((float *)ptw, lane, prow, pcol);

    const float sl2 = (float)P.scale * TC_LOG2E;
    const int64_t j0 = (int64_t)blockIdx.x * TC_TILE, wk0 = j0 + warp * 16;
    const H *kw = ks + warp * 16 * LDH, *vw = vs + warp * 16 * LDH;
    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads(); /* the previous batch's tiles are read */
        tc_load_rows<T, E>(tc_base<T>(P, P.k, n), tc_rstride(P.k), j0, P.S, TC_TILE, ks, LDH,
                           threadIdx.x, 32 * TC_WARPS);
        tc_load_rows<T, E>(tc_base<T>(P, P.v, n), tc_rstride(P.v), j0, P.S, TC_TILE, vs, LDH,
                           threadIdx.x, 32 * TC_WARPS);
        FragC dk[KF], dv[KF];
#pragma unroll
        for (int f = 0; f < KF; f++)
            wmma::fill_fragment(dk[f], 0.0f), wmma::fill_fragment(dv[f], 0.0f);
        const T *qb = tc_base<T>(P, P.q, n), *gb = tc_base<T>(P, P.dout, n);
        /* causal: queries before j0 see none of the block's keys */
        for (int64_t i0 = P.causal ? j0 : 0; i0 < P.L; i0 += TC_TILE) {
            __syncthreads(); /* the previous query tile is read */
            tc_load_rows<T, E>(qb, tc_rstride(P.q), i0, P.L, TC_TILE, qs, LDH, threadIdx.x,
                               32 * TC_WARPS);
            tc_load_rows<T, E>(gb, tc_rstride(P.dout), i0, P.L, TC_TILE, dos, LDH, threadIdx.x,
                               32 * TC_WARPS);
            tc_load_lse_d(P, n, i0, lse_s, d_s);
            __syncthreads();
            if (wk0 >= P.S) continue; /* the warp's keys are all padding */
#pragma unroll 1
            for (int nf = 0; nf < TC_TILE / 16; nf++) { /* queries i0 + 16 nf .. */
                H *pt = ptw + nf * 16, *dst = dsw + nf * 16;
                if (tc_hidden(P, i0 + nf * 16, wk0)) {
                    tc_zero_tile<T, H>(prow, pcol, pt, dst);
                    continue;
                }
                FragC s, dp; /* S^T = K Q^T, dP^T = V dO^T */
                wmma::fill_fragment(s, 0.0f);
                wmma::fill_fragment(dp, 0.0f);
#pragma unroll
                for (int kf = 0; kf < KF; kf++) {
                    FragA<H> a;
                    FragBCol<H> b;
                    wmma::load_matrix_sync(a, kw + kf * 16, LDH);
                    wmma::load_matrix_sync(b, qs + nf * 16 * LDH + kf * 16, LDH);
                    wmma::mma_sync(s, a, b, s);
                    wmma::load_matrix_sync(a, vw + kf * 16, LDH);
                    wmma::load_matrix_sync(b, dos + nf * 16 * LDH + kf * 16, LDH);
                    wmma::mma_sync(dp, a, b, dp);
                }
                tc_grad_tile<T, H>(P, s, dp, prow, pcol, true, i0 + nf * 16, wk0, lse_s + nf * 16,
                                   d_s + nf * 16, sl2, pt, dst);
            }
            __syncwarp();
#pragma unroll 1
            for (int kk = 0; kk < TC_TILE / 16; kk++) { /* dV += P^T dO, dK += dS^T Q */
                if (tc_hidden(P, i0 + kk * 16, wk0)) continue;
                FragA<H> pa, da;
                wmma::load_matrix_sync(pa, ptw + kk * 16, TC_LDP);
                wmma::load_matrix_sync(da, dsw + kk * 16, TC_LDP);
#pragma unroll
                for (int f = 0; f < KF; f++) {
                    FragBRow<H> b;
                    wmma::load_matrix_sync(b, dos + kk * 16 * LDH + f * 16, LDH);
                    wmma::mma_sync(dv[f], pa, b, dv[f]);
                    wmma::load_matrix_sync(b, qs + kk * 16 * LDH + f * 16, LDH);
                    wmma::mma_sync(dk[f], da, b, dk[f]);
                }
            }
            __syncwarp(); /* the tiles are read before the next query tile writes them */
        }
        tc_store_rows<T, KF>(P, P.dk, n, wk0, P.S, dk, prow, pcol, (float)P.scale);
        tc_store_rows<T, KF>(P, P.dv, n, wk0, P.S, dv, prow, pcol, 1.0f);
    }
}

/* dQ of a block's 64 queries (16 a warp) over the key tiles they see. */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_dq_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *qs = (H *)tc_smem, *dos = qs + TC_TILE * LDH, *ks = dos + TC_TILE * LDH;
    H *vs = ks + TC_TILE * LDH, *dss = vs + TC_TILE * LDH;
    float *lse_s = (float *)(dss + TC_WARPS * 16 * TC_LDP), *d_s = lse_s + TC_TILE;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    H *dsw = dss + warp * 16 * TC_LDP;
    int prow[TC_NEL], pcol[TC_NEL];
    tc_positions((float *)dsw, lane, prow, pcol);

    const float sl2 = (float)P.scale * TC_LOG2E;
    const int64_t q0 = (int64_t)blockIdx.x * TC_TILE, w0 = q0 + warp * 16;
    const int64_t qlast = (q0 + TC_TILE < P.L ? q0 + TC_TILE : P.L) - 1;
    const int64_t klast = P.causal && qlast < P.S - 1 ? qlast : P.S - 1;
    const int64_t tiles = klast / TC_TILE + 1;
    const H *qw = qs + warp * 16 * LDH, *gw = dos + warp * 16 * LDH;
    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads(); /* the previous batch's tiles are read */
        tc_load_rows<T, E>(tc_base<T>(P, P.q, n), tc_rstride(P.q), q0, P.L, TC_TILE, qs, LDH,
                           threadIdx.x, 32 * TC_WARPS);
        tc_load_rows<T, E>(tc_base<T>(P, P.dout, n), tc_rstride(P.dout), q0, P.L, TC_TILE, dos, LDH,
                           threadIdx.x, 32 * TC_WARPS);
        tc_load_lse_d(P, n, q0, lse_s, d_s);
        FragC dq[KF];
#pragma unroll
        for (int f = 0; f < KF; f++) wmma::fill_fragment(dq[f], 0.0f);
        const T *kb = tc_base<T>(P, P.k, n), *vb = tc_base<T>(P, P.v, n);
        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * TC_TILE;
            __syncthreads(); /* the previous key tile is read */
            tc_load_rows<T, E>(kb, tc_rstride(P.k), j0, P.S, TC_TILE, ks, LDH, threadIdx.x,
                               32 * TC_WARPS);
            tc_load_rows<T, E>(vb, tc_rstride(P.v), j0, P.S, TC_TILE, vs, LDH, threadIdx.x,
                               32 * TC_WARPS);
            __syncthreads();
            if (w0 >= P.L || tc_hidden(P, w0, j0)) continue;
#pragma unroll 1
            for (int nf = 0; nf < TC_TILE / 16; nf++) { /* keys j0 + 16 nf .. */
                H *dst = dsw + nf * 16;
                if (tc_hidden(P, w0, j0 + nf * 16)) {
                    tc_zero_tile<T, H>(prow, pcol, (H *)nullptr, dst);
                    continue;
                }
                FragC s, dp; /* S = Q K^T, dP = dO V^T */
                wmma::fill_fragment(s, 0.0f);
                wmma::fill_fragment(dp, 0.0f);
#pragma unroll
                for (int kf = 0; kf < KF; kf++) {
                    FragA<H> a;
                    FragBCol<H> b;
                    wmma::load_matrix_sync(a, qw + kf * 16, LDH);
                    wmma::load_matrix_sync(b, ks + nf * 16 * LDH + kf * 16, LDH);
                    wmma::mma_sync(s, a, b, s);
                    wmma::load_matrix_sync(a, gw + kf * 16, LDH);
                    wmma::load_matrix_sync(b, vs + nf * 16 * LDH + kf * 16, LDH);
                    wmma::mma_sync(dp, a, b, dp);
                }
                tc_grad_tile<T, H>(P, s, dp, prow, pcol, false, w0, j0 + nf * 16, lse_s + warp * 16,
                                   d_s + warp * 16, sl2, (H *)nullptr, dst);
            }
            __syncwarp();
#pragma unroll 1
            for (int kk = 0; kk < TC_TILE / 16; kk++) { /* dQ += dS K */
                if (tc_hidden(P, w0, j0 + kk * 16)) continue;
                FragA<H> da;
                wmma::load_matrix_sync(da, dsw + kk * 16, TC_LDP);
#pragma unroll
                for (int f = 0; f < KF; f++) {
                    FragBRow<H> b;
                    wmma::load_matrix_sync(b, ks + kk * 16 * LDH + f * 16, LDH);
                    wmma::mma_sync(dq[f], da, b, dq[f]);
                }
            }
            __syncwarp();
        }
        if (w0 < P.L) tc_store_rows<T, KF>(P, P.dq, n, w0, P.L, dq, prow, pcol, (float)P.scale);
    }
}

/* --------------------------------------------------------------------------- launches */
template <int E> constexpr size_t tc_tile_bytes() { return (size_t)TC_TILE * (E + TC_PAD) * 2; }
constexpr size_t TC_WARP_TILE_BYTES = (size_t)TC_WARPS * 16 * TC_LDP * 2;

template <typename T, int E> void tc_forward(int index, const SdArgs &P) {
    const char *what = "scaled_dot_product_attention";
    const size_t smem = 2 * tc_tile_bytes<E>() + (size_t)TC_WARPS * 16 * TC_LDS * sizeof(float) +
                        TC_WARP_TILE_BYTES + TC_WARPS * 16 * sizeof(float);
    if (!sd_smem(tc_forward_kernel<T, E>, smem, index, what)) return;
    tc_forward_kernel<T, E>
        <<<sd_grid((P.L + TC_TILE - 1) / TC_TILE, P.N), 32 * TC_WARPS, smem, tsc_stream(index)>>>(
            P);
    tsc_launch_check(what, index);
}

template <typename T, int E> void tc_backward(int index, const SdArgs &P) {
    const char *what = "scaled_dot_product_attention backward";
    cudaStream_t st = tsc_stream(index);
    tc_rowdot_kernel<T><<<tsc_grid(P.N * P.L * 32, TSC_THREADS), TSC_THREADS, 0, st>>>(P);
    tsc_launch_check(what, index);
    const size_t rows = 2 * TC_TILE * sizeof(float); /* lse and D of a tile */
    const size_t smem_kv = 4 * tc_tile_bytes<E>() + 2 * TC_WARP_TILE_BYTES + rows;
    if (!sd_smem(tc_dkdv_kernel<T, E>, smem_kv, index, what)) return;
    tc_dkdv_kernel<T, E>
        <<<sd_grid((P.S + TC_TILE - 1) / TC_TILE, P.N), 32 * TC_WARPS, smem_kv, st>>>(P);
    tsc_launch_check(what, index);
    const size_t smem_q = 4 * tc_tile_bytes<E>() + TC_WARP_TILE_BYTES + rows;
    if (!sd_smem(tc_dq_kernel<T, E>, smem_q, index, what)) return;
    tc_dq_kernel<T, E>
        <<<sd_grid((P.L + TC_TILE - 1) / TC_TILE, P.N), 32 * TC_WARPS, smem_q, st>>>(P);
    tsc_launch_check(what, index);
}

/* -1: TS_CUDA_SDPA_TC decides; 0, 1: a test's tsc_sdpa_tc_force */
int tc_forced = -1;
long long tc_runs = 0;

bool tc_enabled() {
    static int from_env = -1; /* read once */
    if (tc_forced >= 0) return tc_forced != 0;
    if (from_env < 0) {
        const char *e = getenv("TS_CUDA_SDPA_TC");
        from_env = e && !strcmp(e, "0") ? 0 : 1;
    }
    return from_env != 0;
}

/* A view the kernels read 16 bytes at a time (or write): cols columns of unit stride, its first
 * element and the steps of its other dims 16-byte aligned. An absent view (data NULL) passes. */
bool tc_view_ok(const ts_kview &v, int64_t cols) {
    if (!v.data) return true;
    if (v.ndim < 2 || v.shape[v.ndim - 1] != cols || v.strides[v.ndim - 1] != 1) return false;
    if ((uintptr_t)v.data % 16) return false;
    for (int d = 0; d < v.ndim - 1; d++)
        if (v.shape[d] > 1 && (v.strides[d] * 2) % 16) return false;
    return true;
}

} /* namespace */

bool tsc_sdpa_tc_takes(const ts_sdpa_args *a) {
    if (!tc_enabled()) return false;
    if (a->q.dtype != TS_F16 && a->q.dtype != TS_BF16) return false;
    if (a->has_mask || a->dropout_p != 0 || a->q.ndim < 2) return false;
    const int nb = a->q.ndim - 2;
    const int64_t E = a->q.shape[nb + 1];
    if (E != 64 && E != 128) return false;
    if (a->k.shape[nb + 1] != E || a->v.shape[nb + 1] != E) return false;
    if (a->q.shape[nb] < 1 || a->k.shape[nb] < 1) return false; /* L, S */
    for (int d = 0; d < nb; d++)
        if (a->q.shape[d] < 1) return false;
    const ts_kview *views[] = {&a->q, &a->k, &a->v, &a->out, &a->dout, &a->dq, &a->dk, &a->dv};
    for (const ts_kview *v : views)
        if (!tc_view_ok(*v, E)) return false;
    return a->q.data && a->k.data && a->v.data;
}

size_t tsc_sdpa_tc_workspace(const ts_sdpa_args *a) {
    int64_t rows = 1;
    for (int d = 0; d < a->q.ndim - 1; d++) rows *= a->q.shape[d];
    return (size_t)rows * sizeof(float);
}

void tsc_sdpa_tc_forward(int index, const ts_sdpa_args *a) {
    SdArgs P = sd_args(index, a);
    if (!tsc_begin(index)) return;
    __atomic_add_fetch(&tc_runs, 1, __ATOMIC_RELAXED);
    const bool bf = a->q.dtype == TS_BF16;
    if (P.E == 64)
        bf ? tc_forward<tsc_bf16, 64>(index, P) : tc_forward<tsc_f16, 64>(index, P);
    else
        bf ? tc_forward<tsc_bf16, 128>(index, P) : tc_forward<tsc_f16, 128>(index, P);
}

void tsc_sdpa_tc_backward(int index, const ts_sdpa_args *a, void *ws) {
    SdArgs P = sd_args(index, a);
    P.D = (char *)ws;
    if (!tsc_begin(index)) return;
    __atomic_add_fetch(&tc_runs, 1, __ATOMIC_RELAXED);
    const bool bf = a->q.dtype == TS_BF16;
    if (P.E == 64)
        bf ? tc_backward<tsc_bf16, 64>(index, P) : tc_backward<tsc_f16, 64>(index, P);
    else
        bf ? tc_backward<tsc_bf16, 128>(index, P) : tc_backward<tsc_f16, 128>(index, P);
}

void tsc_sdpa_tc_force(int mode) { tc_forced = mode < 0 ? -1 : mode != 0; }

long long tsc_sdpa_tc_runs(void) { return __atomic_load_n(&tc_runs, __ATOMIC_RELAXED); }
