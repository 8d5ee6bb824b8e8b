/* cuda_sdpa_tc.cu — flash attention (FlashAttention-2's schedule) on tensor cores for the common
 * case: f16 / bf16, head size E == Ev of 64 or 128, no mask, no dropout, causal or not, rows
 * 16-byte aligned (tsc_sdpa_tc_takes; cuda_sdpa.cu's entries dispatch here, everything else
 * stays on its CUDA-core kernels). Same semantics as those (backend.h's ts_sdpa_args).
 *
 * Every product is a raw m16n8k16 mma.sync (operands in the input dtype, float accumulators) fed
 * by ldmatrix from shared memory. Its fragment layout is the PTX ISA's (lane = 4 g + q holds rows g
 * and g + 8, columns 2q and 2q + 1 of an accumulator tile), so scores, weights and gradients never
 * leave registers: the accumulators of two 8-column tiles, packed to the dtype, are the A operand
 * of the next product. The walked tiles sit in two shared stages, the next one copied by cp.async
 * while this one is used.
 * Forward: a block of 4 warps owns 64 query rows, 16 per warp, its Q as A fragments in registers;
 * per K, V tile of 64 keys (zero past S): S = Q K^T, the online softmax per row (running max m in
 * base-2 units over the four lanes that share a row; sum l of the float weights), O scaled by
 * exp(m_old - m_new) and O += P V with P rounded to the dtype. At the end O / l in the dtype and
 * lse = m + log l (float). Causal (top-left): tiles past a block's last row are not loaded, tiles
 * and 16-key slices past a warp's last row not multiplied.
 * Backward, three kernels, no atomics (deterministic): D = rowsum(dO * out) (a warp per row);
 * dK, dV: a block owns 64 keys (16 a warp) and walks the query tiles of 64 that see them, 32
 * queries at a time: S^T = K Q^T, dP^T = V dO^T, P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D),
 * dV += P^T dO, dK += dS^T Q (times scale at the end); dQ: a block owns 64 queries (Q and dO as A
 * fragments) and walks the key tiles 32 keys at a time, recomputing dS and dQ += dS K * scale.
 * Arithmetic against exact: the products exact in float, sums in float, and beyond the CUDA-core
 * kernels P (forward and dV) and dS (dQ, dK) rounded once to the dtype as operands.
 *
 * TS_CUDA_SDPA_TC=0 (read once) sends everything to the CUDA-core kernels; tests switch with
 * tsc_sdpa_tc_force (cuda_bridge.h). */
#include <math.h>
#include <stdlib.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/cuda/cuda_sdpa_common.cuh"
#include "backend/env_config.h"

namespace {

#define TC_WARPS 4  /* warps of a block */
#define TC_TILE  64 /* rows a block owns (queries, or keys for dK/dV); rows of a walked tile */
#define TC_PAD   8  /* elements of padding per shared row of the dtype (16 bytes) */
#define TC_LOG2E 1.4426950408889634f
#define TC_LN2   0.6931471805599453f

/* the CUDA element type of a storage type */
template <typename T> struct TcType;
template <> struct TcType<tsc_f16> { typedef __half type; };
template <> struct TcType<tsc_bf16> { typedef __nv_bfloat16 type; };

template <typename T>
__device__ __forceinline__ const T *tc_base(const SdArgs &P, const SdView &v, int64_t n) {
    return (const T *)v.data + sd_batch(P, v, n);
}
__device__ __forceinline__ int64_t tc_rstride(const SdView &v) { return v.s[v.nd - 2]; }

/* the causal mask hides all of keys [j0, j0 + 16 * cnt) from queries [i0, i0 + 16) */
__device__ __forceinline__ bool tc_hidden(const SdArgs &P, int64_t i0, int64_t j0) {
    return P.causal && j0 > i0 + 15;
}

/* --------------------------------------------------------------------------- raw mma */
/* The forward uses the m16n8k16 instruction directly: its fragment layout is fixed by the PTX ISA
 * (lane = 4 g + q; A: rows g, g + 8, columns 2q, 2q + 1 (+ 8); B: rows (k) 2q, 2q + 1 (+ 8), column
 * g; C: rows g, g + 8, columns 2q, 2q + 1), so scores, weights and outputs stay in registers: the
 * score accumulators of a 16-key slice are, packed to the dtype, the A operand of P V. */
__device__ __forceinline__ uint32_t tc_saddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* four 8x8 tiles of 16-bit elements: lanes 8t .. 8t + 7 give the row addresses of tile t; register
 * t gets its (row g, columns 2q, 2q + 1), or with trans (rows 2q, 2q + 1, column g) */
__device__ __forceinline__ void tc_ldsm(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tc_saddr(p)));
}
__device__ __forceinline__ void tc_ldsm_trans(uint32_t *r, const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tc_saddr(p)));
}
/* d += a b: a 16 x 16 (4 registers), b 16 x 8 (2), d 16 x 8 floats (4) */
template <typename H>
__device__ __forceinline__ void tc_mma(float *d, const uint32_t *a, const uint32_t *b);
template <>
__device__ __forceinline__ void tc_mma<__half>(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void tc_mma<__nv_bfloat16>(float *d, const uint32_t *a,
                                                      const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* two floats rounded to the dtype, the first in the low half (the lower column) */
template <typename H> __device__ __forceinline__ uint32_t tc_pack(float lo, float hi);
template <> __device__ __forceinline__ uint32_t tc_pack<__half>(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}
template <> __device__ __forceinline__ uint32_t tc_pack<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
/* 16 bytes global -> shared without passing through registers; zeros when !valid */
__device__ __forceinline__ void tc_cp16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tc_saddr(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void tc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void tc_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
/* tc_load_rows through cp.async (the caller commits and waits) */
template <typename T, int E, typename H>
__device__ __forceinline__ void tc_load_rows_async(const T *base, int64_t rstride, int64_t r0,
                                                   int64_t limit, int rows, H *dst, int ld, int tid,
                                                   int nthreads) {
    constexpr int per_row = E / 8;
    for (int t = tid; t < rows * per_row; t += nthreads) {
        const int r = t / per_row, c = (t % per_row) * 8;
        const bool in = r0 + r < limit;
        tc_cp16(dst + r * ld + c, in ? (const void *)(base + (r0 + r) * rstride + c) : base, in);
    }
}

/* Fragments from shared memory (rows of pitch LDH elements; lm = lane / 8, lr = lane % 8):
 * tc_lda: the A fragment of 16 rows (from `rows`), columns 16 kf ..;
 * tc_ldb_t: the B fragments of X^T for two 8-column tiles, X's rows from `rows` (16 of them) being
 *   those columns, k = X's columns 16 kf ..;
 * tc_ldb: the B fragments of X for its columns 8 f .. 8 f + 15 (two tiles), k = X's 16 rows from
 *   `rows`. */
template <int LDH, typename H>
__device__ __forceinline__ void tc_lda(uint32_t *a, const H *rows, int kf, int lm, int lr) {
    tc_ldsm(a, rows + ((lm & 1) * 8 + lr) * LDH + kf * 16 + (lm >> 1) * 8);
}
template <int LDH, typename H>
__device__ __forceinline__ void tc_ldb_t(uint32_t *b, const H *rows, int kf, int lm, int lr) {
    tc_ldsm(b, rows + ((lm >> 1) * 8 + lr) * LDH + kf * 16 + (lm & 1) * 8);
}
template <int LDH, typename H>
__device__ __forceinline__ void tc_ldb(uint32_t *b, const H *rows, int f, int lm, int lr) {
    tc_ldsm_trans(b, rows + ((lm & 1) * 8 + lr) * LDH + (f + (lm >> 1)) * 8);
}

/* A warp's 16 rows of accumulators (the C fragments of E / 8 column tiles; the lane's rows r0 + g
 * and r0 + g + 8, columns 2q, 2q + 1 of each), row r times mul[r], at those rows of a view that
 * come before `limit`. */
template <typename T, int E>
__device__ __forceinline__ void tc_store_frags(const SdArgs &P, const SdView &v, int64_t n,
                                               int64_t r0, int64_t limit, const float (*acc)[4],
                                               const float *mul, int g, int q) {
    T *b = (T *)tc_base<T>(P, v, n);
    const int64_t rs = tc_rstride(v);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int64_t row = r0 + g + 8 * r;
        if (row >= limit) continue;
#pragma unroll
        for (int f = 0; f < E / 8; f++) {
            T *dst = b + row * rs + f * 8 + 2 * q;
            dst[0] = tsc_from_acc<T>(acc[f][2 * r] * mul[r]);
            dst[1] = tsc_from_acc<T>(acc[f][2 * r + 1] * mul[r]);
        }
    }
}

/* Which elements of a lane's accumulator tiles are visible scores (bit 4 nt + c for element c of
 * 8-column tile nt): all of them unless `edge` (the tiles cross S or the causal diagonal). The lane
 * holds rows rows[0], rows[1] and columns col0 + 8 nt + 2q, + 1; rows are queries and columns keys,
 * or with KEY_ROWS the other way round. */
template <int NT, bool KEY_ROWS>
__device__ __forceinline__ uint32_t tc_visible(const SdArgs &P, const int64_t *rows, int64_t col0,
                                               int q, bool edge) {
    if (!edge) return ~0u;
    uint32_t keep = 0;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int64_t r = rows[c >> 1], col = col0 + nt * 8 + 2 * q + (c & 1);
            const int64_t i = KEY_ROWS ? col : r, j = KEY_ROWS ? r : col;
            if (j < P.S && !(P.causal && j > i)) keep |= 1u << (nt * 4 + c);
        }
    return keep;
}

/* --------------------------------------------------------------------------- forward */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_forward_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16, NT = TC_TILE / 8, OT = E / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *qs = (H *)tc_smem, *kbuf = qs + TC_TILE * LDH, *vbuf = kbuf + 2 * TC_TILE * LDH;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3;   /* fragment row group, column pair */
    const int lm = lane >> 3, lr = lane & 7; /* ldmatrix: the tile a lane addresses, its row */
    const float sl2 = (float)P.scale * TC_LOG2E;
    const int64_t q0 = (int64_t)blockIdx.x * TC_TILE, w0 = q0 + warp * 16;
    const int64_t qlast = (q0 + TC_TILE < P.L ? q0 + TC_TILE : P.L) - 1;
    const int64_t klast = P.causal && qlast < P.S - 1 ? qlast : P.S - 1;
    const int64_t tiles = klast / TC_TILE + 1;
    const int64_t rows[2] = {w0 + g, w0 + g + 8}; /* the two query rows a lane holds */

    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        const T *kb = tc_base<T>(P, P.k, n), *vb = tc_base<T>(P, P.v, n);
        __syncthreads(); /* the previous batch's stages are read */
        tc_load_rows_async<T, E>(tc_base<T>(P, P.q, n), tc_rstride(P.q), q0, P.L, TC_TILE, qs, LDH,
                                 threadIdx.x, 32 * TC_WARPS);
        tc_load_rows_async<T, E>(kb, tc_rstride(P.k), 0, P.S, TC_TILE, kbuf, LDH, threadIdx.x,
                                 32 * TC_WARPS);
        tc_load_rows_async<T, E>(vb, tc_rstride(P.v), 0, P.S, TC_TILE, vbuf, LDH, threadIdx.x,
                                 32 * TC_WARPS);
        tc_cp_commit();

        uint32_t qa[KF][4];
        float o[OT][4];
#pragma unroll
        for (int f = 0; f < OT; f++) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* base-2 running max, sum */

        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * TC_TILE;
            const int st = (int)(tile & 1);
            if (tile + 1 < tiles) { /* the other stage was released at the end of the last tile */
                H *kn = kbuf + (st ^ 1) * TC_TILE * LDH, *vn = vbuf + (st ^ 1) * TC_TILE * LDH;
                tc_load_rows_async<T, E>(kb, tc_rstride(P.k), j0 + TC_TILE, P.S, TC_TILE, kn, LDH,
                                         threadIdx.x, 32 * TC_WARPS);
                tc_load_rows_async<T, E>(vb, tc_rstride(P.v), j0 + TC_TILE, P.S, TC_TILE, vn, LDH,
                                         threadIdx.x, 32 * TC_WARPS);
                tc_cp_commit();
                tc_cp_wait<1>();
            } else {
                tc_cp_wait<0>();
            }
            __syncthreads();
            if (tile == 0) {
#pragma unroll
                for (int kf = 0; kf < KF; kf++)
                    tc_lda<LDH>(qa[kf], qs + warp * 16 * LDH, kf, lm, lr);
            }
            if (w0 < P.L && !tc_hidden(P, w0, j0)) { /* the same for the whole warp */
                const H *ks = kbuf + st * TC_TILE * LDH, *vs = vbuf + st * TC_TILE * LDH;
                float s[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt += 2) { /* S = Q K^T, keys j0 + 8 nt .. + 16 */
                    if (tc_hidden(P, w0, j0 + nt * 8)) continue; /* masked below */
#pragma unroll
                    for (int kf = 0; kf < KF; kf++) {
                        uint32_t b[4];
                        tc_ldb_t<LDH>(b, ks + nt * 8 * LDH, kf, lm, lr);
                        tc_mma<H>(s[nt], qa[kf], b);
                        tc_mma<H>(s[nt + 1], qa[kf], b + 2);
                    }
                }
                const uint32_t keep = tc_visible<NT, false>(
                    P, rows, j0, q, j0 + TC_TILE > P.S || (P.causal && j0 + TC_TILE - 1 > w0));
                /* scores to base-2 exponents, masked; the rows' maxima over the tile */
                float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        s[nt][c] = keep >> (nt * 4 + c) & 1 ? s[nt][c] * sl2 : -INFINITY;
                        mt[c >> 1] = fmaxf(mt[c >> 1], s[nt][c]);
                    }
                float mref[2], alpha[2];
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
                    mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));
                    const float mnew = fmaxf(m[r], mt[r]);
                    mref[r] = mnew == -INFINITY ? 0.0f : mnew;
                    alpha[r] = exp2f(m[r] - mref[r]); /* 0 while m is -inf */
                    m[r] = mnew;
                }
                /* P: its float sum, and its dtype values as the A fragments of 16-key slices */
                uint32_t pa[NT / 2][4];
                float sum[2] = {0.0f, 0.0f};
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const float p0 = exp2f(s[nt][0] - mref[0]), p1 = exp2f(s[nt][1] - mref[0]);
                    const float p2 = exp2f(s[nt][2] - mref[1]), p3 = exp2f(s[nt][3] - mref[1]);
                    sum[0] += p0 + p1;
                    sum[1] += p2 + p3;
                    pa[nt >> 1][(nt & 1) * 2] = tc_pack<H>(p0, p1);
                    pa[nt >> 1][(nt & 1) * 2 + 1] = tc_pack<H>(p2, p3);
                }
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
                    sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
                    l[r] = l[r] * alpha[r] + sum[r];
                }
#pragma unroll
                for (int f = 0; f < OT; f++) {
                    o[f][0] *= alpha[0], o[f][1] *= alpha[0];
                    o[f][2] *= alpha[1], o[f][3] *= alpha[1];
                }
#pragma unroll
                for (int kk = 0; kk < NT / 2; kk++) { /* O += P V over keys j0 + 16 kk .. */
                    if (tc_hidden(P, w0, j0 + kk * 16)) continue; /* P is 0 there */
#pragma unroll
                    for (int f = 0; f < OT; f += 2) {
                        uint32_t b[4];
                        tc_ldb<LDH>(b, vs + kk * 16 * LDH, f, lm, lr);
                        tc_mma<H>(o[f], pa[kk], b);
                        tc_mma<H>(o[f + 1], pa[kk], b + 2);
                    }
                }
            }
            __syncthreads(); /* this stage is read before the next tile's copy overwrites it */
        }
        if (w0 >= P.L) continue;
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            inv[r] = l[r] > 0 ? 1.0f / l[r] : 0.0f;
            if (q == 0 && rows[r] < P.L)
                ((float *)P.lse.data)[sd_batch(P, P.lse, n) + rows[r]] =
                    l[r] > 0 ? (m[r] + log2f(l[r])) * TC_LN2 : INFINITY;
        }
        tc_store_frags<T, E>(P, P.out, n, w0, P.L, o, inv, g, q);
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

/* query row i's lse times log2 e (+inf past L: its weights are 0) and D (0 past L) */
__device__ __forceinline__ void tc_lse_d(const SdArgs &P, int64_t n, int64_t i, float *lse2,
                                         float *d) {
    const bool in = i < P.L;
    *lse2 = in ? ((const float *)P.lse.data)[sd_batch(P, P.lse, n) + i] * TC_LOG2E : INFINITY;
    *d = in ? ((const float *)P.D)[n * P.L + i] : 0.0f;
}

/* One stage of the dK/dV walk: query rows [i0, i0 + 64) of Q and dO (cp.async, the caller commits)
 * and their lse / D (stored). */
template <typename T, int E, typename H>
__device__ __forceinline__ void tc_query_stage(const SdArgs &P, int64_t n, int64_t i0, H *qs, H *gs,
                                               float *lse2, float *dsum) {
    tc_load_rows_async<T, E>(tc_base<T>(P, P.q, n), tc_rstride(P.q), i0, P.L, TC_TILE, qs,
                             E + TC_PAD, threadIdx.x, 32 * TC_WARPS);
    tc_load_rows_async<T, E>(tc_base<T>(P, P.dout, n), tc_rstride(P.dout), i0, P.L, TC_TILE, gs,
                             E + TC_PAD, threadIdx.x, 32 * TC_WARPS);
    for (int t = threadIdx.x; t < TC_TILE; t += blockDim.x)
        tc_lse_d(P, n, i0 + t, lse2 + t, dsum + t);
}

/* dK, dV of a block's 64 keys (16 a warp, accumulators in registers) over the query tiles that see
 * them, 32 queries at a time: S^T = K Q^T and dP^T = V dO^T in registers, P^T = exp2(S^T scale
 * log2 e - lse log2 e), dS^T = P^T (dP^T - D), both packed to the dtype as A fragments of
 * dV += P^T dO and dK += dS^T Q. */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_dkdv_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16, OT = E / 8, QH = 32, NT = QH / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *ks = (H *)tc_smem, *vs = ks + TC_TILE * LDH, *qbuf = vs + TC_TILE * LDH;
    H *gbuf = qbuf + 2 * TC_TILE * LDH;
    float *lbuf = (float *)(gbuf + 2 * TC_TILE * LDH), *dbuf = lbuf + 2 * TC_TILE;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3, lm = lane >> 3, lr = lane & 7;
    const float sl2 = (float)P.scale * TC_LOG2E;
    const int64_t j0 = (int64_t)blockIdx.x * TC_TILE, wk0 = j0 + warp * 16;
    const int64_t keys[2] = {wk0 + g, wk0 + g + 8}; /* the two key rows a lane holds */
    const H *kw = ks + warp * 16 * LDH, *vw = vs + warp * 16 * LDH;
    /* causal: queries before j0 see none of the block's keys */
    const int64_t first = P.causal ? j0 : 0;
    const int64_t tiles = first < P.L ? (P.L - first + TC_TILE - 1) / TC_TILE : 0;

    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        __syncthreads(); /* the previous batch's tiles are read */
        tc_load_rows_async<T, E>(tc_base<T>(P, P.k, n), tc_rstride(P.k), j0, P.S, TC_TILE, ks, LDH,
                                 threadIdx.x, 32 * TC_WARPS);
        tc_load_rows_async<T, E>(tc_base<T>(P, P.v, n), tc_rstride(P.v), j0, P.S, TC_TILE, vs, LDH,
                                 threadIdx.x, 32 * TC_WARPS);
        if (tiles > 0) tc_query_stage<T, E>(P, n, first, qbuf, gbuf, lbuf, dbuf);
        tc_cp_commit();
        float dk[OT][4], dv[OT][4];
#pragma unroll
        for (int f = 0; f < OT; f++)
#pragma unroll
            for (int c = 0; c < 4; c++) dk[f][c] = dv[f][c] = 0.0f;

        for (int64_t t = 0; t < tiles; t++) {
            const int64_t i0 = first + t * TC_TILE;
            const int st = (int)(t & 1);
            if (t + 1 < tiles) {
                const int o = (st ^ 1) * TC_TILE;
                tc_query_stage<T, E>(P, n, i0 + TC_TILE, qbuf + o * LDH, gbuf + o * LDH, lbuf + o,
                                     dbuf + o);
                tc_cp_commit();
                tc_cp_wait<1>();
            } else {
                tc_cp_wait<0>();
            }
            __syncthreads();
            const H *qs = qbuf + st * TC_TILE * LDH, *gs = gbuf + st * TC_TILE * LDH;
            const float *lse2 = lbuf + st * TC_TILE, *dsum = dbuf + st * TC_TILE;
#pragma unroll 1
            for (int h = 0; h < TC_TILE / QH && wk0 < P.S; h++) { /* queries i0 + 32 h .. */
                const int64_t ih = i0 + h * QH;
                if (tc_hidden(P, ih + QH - 16, wk0)) continue; /* the same for the whole warp */
                float s[NT][4], dp[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
                for (int kf = 0; kf < KF; kf++) {
                    uint32_t ka[4], va[4];
                    tc_lda<LDH>(ka, kw, kf, lm, lr);
                    tc_lda<LDH>(va, vw, kf, lm, lr);
#pragma unroll
                    for (int nt = 0; nt < NT; nt += 2) {
                        if (tc_hidden(P, ih + nt * 8, wk0)) continue; /* masked below */
                        uint32_t b[4];
                        tc_ldb_t<LDH>(b, qs + (h * QH + nt * 8) * LDH, kf, lm, lr);
                        tc_mma<H>(s[nt], ka, b);
                        tc_mma<H>(s[nt + 1], ka, b + 2);
                        tc_ldb_t<LDH>(b, gs + (h * QH + nt * 8) * LDH, kf, lm, lr);
                        tc_mma<H>(dp[nt], va, b);
                        tc_mma<H>(dp[nt + 1], va, b + 2);
                    }
                }
                /* queries past L need no mask: their lse is +inf */
                const uint32_t keep = tc_visible<NT, true>(
                    P, keys, ih, q, wk0 + 16 > P.S || (P.causal && wk0 + 15 > ih));
                uint32_t pa[NT / 2][4], da[NT / 2][4];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        float p[2], ds[2];
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int qi = h * QH + nt * 8 + 2 * q + e;
                            p[e] = keep >> (nt * 4 + 2 * r + e) & 1
                                       ? exp2f(s[nt][2 * r + e] * sl2 - lse2[qi])
                                       : 0.0f;
                            ds[e] = p[e] * (dp[nt][2 * r + e] - dsum[qi]);
                        }
                        pa[nt >> 1][(nt & 1) * 2 + r] = tc_pack<H>(p[0], p[1]);
                        da[nt >> 1][(nt & 1) * 2 + r] = tc_pack<H>(ds[0], ds[1]);
                    }
#pragma unroll
                for (int kk = 0; kk < NT / 2; kk++) {              /* dV += P^T dO, dK += dS^T Q */
                    if (tc_hidden(P, ih + kk * 16, wk0)) continue; /* P, dS are 0 there */
#pragma unroll
                    for (int f = 0; f < OT; f += 2) {
                        uint32_t b[4];
                        tc_ldb<LDH>(b, gs + (h * QH + kk * 16) * LDH, f, lm, lr);
                        tc_mma<H>(dv[f], pa[kk], b);
                        tc_mma<H>(dv[f + 1], pa[kk], b + 2);
                        tc_ldb<LDH>(b, qs + (h * QH + kk * 16) * LDH, f, lm, lr);
                        tc_mma<H>(dk[f], da[kk], b);
                        tc_mma<H>(dk[f + 1], da[kk], b + 2);
                    }
                }
            }
            __syncthreads(); /* this stage is read before the next tile's copy overwrites it */
        }
        tc_cp_wait<0>(); /* no tile: the K, V copies are still owed */
        if (wk0 >= P.S) continue;
        const float sc[2] = {(float)P.scale, (float)P.scale}, one[2] = {1.0f, 1.0f};
        tc_store_frags<T, E>(P, P.dk, n, wk0, P.S, dk, sc, g, q);
        tc_store_frags<T, E>(P, P.dv, n, wk0, P.S, dv, one, g, q);
    }
}

/* dQ of a block's 64 queries (16 a warp, its Q and dO as A fragments in registers) over the key
 * tiles they see, 32 keys at a time: S = Q K^T, dP = dO V^T in registers, dS = P (dP - D) packed
 * as the A fragments of dQ += dS K (times scale at the end). K, V in two shared stages. */
template <typename T, int E>
__global__ void __launch_bounds__(32 * TC_WARPS) tc_dq_kernel(SdArgs P) {
    typedef typename TcType<T>::type H;
    constexpr int LDH = E + TC_PAD, KF = E / 16, OT = E / 8, KH = 32, NT = KH / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    H *qs = (H *)tc_smem, *gs = qs + TC_TILE * LDH, *kbuf = gs + TC_TILE * LDH;
    H *vbuf = kbuf + 2 * TC_TILE * LDH;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3, lm = lane >> 3, lr = lane & 7;
    const float sl2 = (float)P.scale * TC_LOG2E;
    const int64_t q0 = (int64_t)blockIdx.x * TC_TILE, w0 = q0 + warp * 16;
    const int64_t qlast = (q0 + TC_TILE < P.L ? q0 + TC_TILE : P.L) - 1;
    const int64_t klast = P.causal && qlast < P.S - 1 ? qlast : P.S - 1;
    const int64_t tiles = klast / TC_TILE + 1;
    const int64_t rows[2] = {w0 + g, w0 + g + 8};

    for (int64_t n = blockIdx.y; n < P.N; n += gridDim.y) {
        const T *kb = tc_base<T>(P, P.k, n), *vb = tc_base<T>(P, P.v, n);
        __syncthreads(); /* the previous batch's tiles are read */
        tc_load_rows_async<T, E>(tc_base<T>(P, P.q, n), tc_rstride(P.q), q0, P.L, TC_TILE, qs, LDH,
                                 threadIdx.x, 32 * TC_WARPS);
        tc_load_rows_async<T, E>(tc_base<T>(P, P.dout, n), tc_rstride(P.dout), q0, P.L, TC_TILE, gs,
                                 LDH, threadIdx.x, 32 * TC_WARPS);
        tc_load_rows_async<T, E>(kb, tc_rstride(P.k), 0, P.S, TC_TILE, kbuf, LDH, threadIdx.x,
                                 32 * TC_WARPS);
        tc_load_rows_async<T, E>(vb, tc_rstride(P.v), 0, P.S, TC_TILE, vbuf, LDH, threadIdx.x,
                                 32 * TC_WARPS);
        tc_cp_commit();
        float lse2[2], dsum[2];
#pragma unroll
        for (int r = 0; r < 2; r++) tc_lse_d(P, n, rows[r], &lse2[r], &dsum[r]);
        uint32_t qa[KF][4], ga[KF][4];
        float dq[OT][4];
#pragma unroll
        for (int f = 0; f < OT; f++) dq[f][0] = dq[f][1] = dq[f][2] = dq[f][3] = 0.0f;

        for (int64_t tile = 0; tile < tiles; tile++) {
            const int64_t j0 = tile * TC_TILE;
            const int st = (int)(tile & 1);
            if (tile + 1 < tiles) {
                H *kn = kbuf + (st ^ 1) * TC_TILE * LDH, *vn = vbuf + (st ^ 1) * TC_TILE * LDH;
                tc_load_rows_async<T, E>(kb, tc_rstride(P.k), j0 + TC_TILE, P.S, TC_TILE, kn, LDH,
                                         threadIdx.x, 32 * TC_WARPS);
                tc_load_rows_async<T, E>(vb, tc_rstride(P.v), j0 + TC_TILE, P.S, TC_TILE, vn, LDH,
                                         threadIdx.x, 32 * TC_WARPS);
                tc_cp_commit();
                tc_cp_wait<1>();
            } else {
                tc_cp_wait<0>();
            }
            __syncthreads();
            if (tile == 0) {
#pragma unroll
                for (int kf = 0; kf < KF; kf++) {
                    tc_lda<LDH>(qa[kf], qs + warp * 16 * LDH, kf, lm, lr);
                    tc_lda<LDH>(ga[kf], gs + warp * 16 * LDH, kf, lm, lr);
                }
            }
            const H *ks = kbuf + st * TC_TILE * LDH, *vs = vbuf + st * TC_TILE * LDH;
#pragma unroll 1
            for (int h = 0; h < TC_TILE / KH && w0 < P.L; h++) { /* keys j0 + 32 h .. */
                const int64_t jh = j0 + h * KH;
                if (tc_hidden(P, w0, jh)) continue; /* the same for the whole warp */
                float s[NT][4], dp[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int c = 0; c < 4; c++) s[nt][c] = dp[nt][c] = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt += 2) {
                    if (tc_hidden(P, w0, jh + nt * 8)) continue; /* masked below */
#pragma unroll
                    for (int kf = 0; kf < KF; kf++) {
                        uint32_t b[4];
                        tc_ldb_t<LDH>(b, ks + (h * KH + nt * 8) * LDH, kf, lm, lr);
                        tc_mma<H>(s[nt], qa[kf], b);
                        tc_mma<H>(s[nt + 1], qa[kf], b + 2);
                        tc_ldb_t<LDH>(b, vs + (h * KH + nt * 8) * LDH, kf, lm, lr);
                        tc_mma<H>(dp[nt], ga[kf], b);
                        tc_mma<H>(dp[nt + 1], ga[kf], b + 2);
                    }
                }
                /* rows past L need no mask: their lse is +inf */
                const uint32_t keep = tc_visible<NT, false>(
                    P, rows, jh, q, jh + KH > P.S || (P.causal && jh + KH - 1 > w0));
                uint32_t da[NT / 2][4];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        float ds[2];
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const float p = keep >> (nt * 4 + 2 * r + e) & 1
                                                ? exp2f(s[nt][2 * r + e] * sl2 - lse2[r])
                                                : 0.0f;
                            ds[e] = p * (dp[nt][2 * r + e] - dsum[r]);
                        }
                        da[nt >> 1][(nt & 1) * 2 + r] = tc_pack<H>(ds[0], ds[1]);
                    }
#pragma unroll
                for (int kk = 0; kk < NT / 2; kk++) {             /* dQ += dS K */
                    if (tc_hidden(P, w0, jh + kk * 16)) continue; /* dS is 0 there */
#pragma unroll
                    for (int f = 0; f < OT; f += 2) {
                        uint32_t b[4];
                        tc_ldb<LDH>(b, ks + (h * KH + kk * 16) * LDH, f, lm, lr);
                        tc_mma<H>(dq[f], da[kk], b);
                        tc_mma<H>(dq[f + 1], da[kk], b + 2);
                    }
                }
            }
            __syncthreads(); /* this stage is read before the next tile's copy overwrites it */
        }
        if (w0 >= P.L) continue;
        const float sc[2] = {(float)P.scale, (float)P.scale};
        tc_store_frags<T, E>(P, P.dq, n, w0, P.L, dq, sc, g, q);
    }
}

/* --------------------------------------------------------------------------- launches */
template <int E> constexpr size_t tc_tile_bytes() { return (size_t)TC_TILE * (E + TC_PAD) * 2; }

template <typename T, int E> void tc_forward(int index, const SdArgs &P) {
    const char *what = "scaled_dot_product_attention";
    const size_t smem = 5 * tc_tile_bytes<E>(); /* Q, two stages of K and of V */
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
    /* K, V; two stages of Q, dO and of the queries' lse and D */
    const size_t smem_kv = 6 * tc_tile_bytes<E>() + 4 * TC_TILE * sizeof(float);
    if (!sd_smem(tc_dkdv_kernel<T, E>, smem_kv, index, what)) return;
    tc_dkdv_kernel<T, E>
        <<<sd_grid((P.S + TC_TILE - 1) / TC_TILE, P.N), 32 * TC_WARPS, smem_kv, st>>>(P);
    tsc_launch_check(what, index);
    const size_t smem_q = 6 * tc_tile_bytes<E>(); /* Q, dO; two stages of K and of V */
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
        from_env = tsi_env_is(TSI_ENV_CUDA_SDPA_TC, "0") ? 0 : 1;
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
