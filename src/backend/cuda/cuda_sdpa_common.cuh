/* cuda_sdpa_common.cuh — what the two CUDA attention implementations share: the kernels' argument
 * block (SdArgs: backend.h's ts_sdpa_args with the batch dims B.. kept as a shape and per-view
 * strides, walked by sd_batch), its construction, the grid over (row tiles, batch) and the opt-in
 * to more than 48 KiB of shared memory; and the entries of the tensor-core path.
 *   cuda_sdpa.cu:    every dtype, masks, dropout, head sizes <= 128 (float math on CUDA cores);
 *   cuda_sdpa_tc.cu: f16 / bf16, head size 64 or 128, no mask, no dropout, aligned rows (tensor
 *                    cores); tsc_sdpa_tc_takes says which, cuda_sdpa.cu's entries dispatch. */
#ifndef TS_CUDA_SDPA_COMMON_CUH
#define TS_CUDA_SDPA_COMMON_CUH

#include <string.h>

#include "backend/cuda/cuda_compute.h"

#define SD_MAX_GRID_Y 65535

struct SdView {
    char *data;
    int64_t s[TS_MAX_DIMS]; /* strides: the batch dims, then rows, then columns */
    int nd;
};

struct SdArgs {
    int nb;
    int64_t bshape[TS_MAX_DIMS];
    int64_t N, L, S, E, Ev;
    SdView q, k, v, out, lse, mask, dout, dq, dk, dv;
    bool has_mask, mask_bool, causal;
    double scale, dropout_p, drop_scale;
    uint64_t seed, offset;
    /* in a CUDA graph: {seed, base} read at run time, offset relative to base (cuda_graph.cu) */
    const uint64_t *counters;
    char *D; /* backward workspace: N x L of the compute type */
};

/* the element offset of batch n (row-major over B..) in view v */
__device__ __forceinline__ int64_t sd_batch(const SdArgs &P, const SdView &v, int64_t n) {
    int64_t off = 0;
    for (int d = P.nb - 1; d >= 0; d--) {
        off += (n % P.bshape[d]) * v.s[d];
        n /= P.bshape[d];
    }
    return off;
}

template <typename T>
__device__ __forceinline__ const T *sd_row(const SdArgs &P, const SdView &v, int64_t n, int64_t r) {
    return (const T *)v.data + sd_batch(P, v, n) + r * v.s[v.nd - 2];
}

inline SdView sd_view(const ts_kview &v) {
    SdView s;
    s.data = v.data;
    s.nd = v.ndim;
    for (int d = 0; d < TS_MAX_DIMS; d++) s.s[d] = d < v.ndim ? v.strides[d] : 0;
    return s;
}

inline SdArgs sd_args(int index, const ts_sdpa_args *a) {
    SdArgs P;
    memset(&P, 0, sizeof P);
    P.nb = a->q.ndim - 2;
    P.N = 1;
    for (int d = 0; d < P.nb; d++) P.N *= P.bshape[d] = a->q.shape[d];
    P.L = a->q.shape[P.nb], P.E = a->q.shape[P.nb + 1];
    P.S = a->k.shape[P.nb], P.Ev = a->v.shape[P.nb + 1];
    P.q = sd_view(a->q), P.k = sd_view(a->k), P.v = sd_view(a->v);
    P.out = sd_view(a->out), P.lse = sd_view(a->lse), P.mask = sd_view(a->mask);
    P.dout = sd_view(a->dout), P.dq = sd_view(a->dq), P.dk = sd_view(a->dk);
    P.dv = sd_view(a->dv);
    P.has_mask = a->has_mask, P.mask_bool = a->has_mask && a->mask.dtype == TS_BOOL;
    P.causal = a->causal;
    P.scale = a->scale, P.dropout_p = a->dropout_p;
    P.drop_scale = a->dropout_p >= 1 ? 0 : 1 / (1 - a->dropout_p);
    P.seed = a->seed, P.offset = a->offset;
    P.counters = a->dropout_p > 0 ? tsc_graph_counters(index) : nullptr;
    return P;
}

/* tiles of rows along x, the batch along y (a block walks batches gridDim.y apart) */
inline dim3 sd_grid(int64_t tiles, int64_t N) {
    return dim3((unsigned)tiles, (unsigned)(N < SD_MAX_GRID_Y ? N : SD_MAX_GRID_Y));
}

/* Shared memory beyond 48 KiB must be asked for per kernel. */
template <typename K> bool sd_smem(K kernel, size_t bytes, int index, const char *what) {
    if (bytes <= 48 * 1024) return true;
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess) return true;
    tsc_launch_check(what, index);
    return false;
}

/* ---- the tensor-core path (cuda_sdpa_tc.cu) */
/* Whether it takes these arguments: f16 / bf16, E == Ev in {64, 128}, L, S >= 1, no mask, no
 * dropout, and every view present (out, dout, dq.. once filled) with unit last stride and rows
 * 16-byte aligned; and not switched off (TS_CUDA_SDPA_TC=0, tsc_sdpa_tc_force). */
bool tsc_sdpa_tc_takes(const ts_sdpa_args *a);
/* Bytes of workspace its backward needs (D: N x L floats); forward needs none. */
size_t tsc_sdpa_tc_workspace(const ts_sdpa_args *a);
void tsc_sdpa_tc_forward(int index, const ts_sdpa_args *a);
void tsc_sdpa_tc_backward(int index, const ts_sdpa_args *a, void *ws);

#endif /* TS_CUDA_SDPA_COMMON_CUH */
