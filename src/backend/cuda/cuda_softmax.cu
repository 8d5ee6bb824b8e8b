/* cuda_softmax.cu — softmax / log_softmax along one dim on CUDA, max-subtracted, computed in float
 * (double for f64) over strided views.
 *
 * One read computes each row's max and sum of exp(x - max) online (cuda_softmax_state.cuh: a
 * running pair merged by a shuffle tree), a second read writes the result. Rows along a contiguous
 * dim go to a warp (short rows) or a block (long rows); when the dim is strided but the other dims
 * have a contiguous inner one, each thread takes a whole row and neighbouring threads read
 * neighbouring columns.
 * Like PyTorch (and kern_softmax.c), a row with a NaN or a +inf, or with every entry -inf, comes
 * out all NaN.
 *
 * The gradient (tsc_softmax_backward, kern_softmax_bwd.c's formulas: softmax gx = y * (g - sum(g *
 * y)), log_softmax gx = g - exp(y) * sum(g)) is one kernel for rows along a contiguous last dim: a
 * warp or block per row sums, then writes, the row read twice (the second time from L2); other
 * layouts decline and the front end composes it. The sum is deterministic: each thread's share in
 * order, then a fixed shuffle tree and the warps in order. */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_softmax_state.cuh"
#include "backend/kview_rows.h"

namespace {

#define SM_WARP_MAX_L 1024 /* rows up to this long: one warp per row */
#define SM_BLOCK      256
#define SM_COL_MIN    8 /* contiguous inner dim at least this long for the column path */

struct SMPlan {
    const char *in;
    char *out;
    tsc_dims other; /* the dims other than `dim`: s0 input strides, s1 output strides */
    int64_t rows, L, xs, ys;
    bool log;
};

template <typename T, bool BLOCK> __global__ void sm_rows_kernel(SMPlan P) {
    typedef typename tsc_acc<T>::type A;
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    for (int64_t r = blockIdx.x * per_block + threadIdx.x / group; r < P.rows;
         r += (int64_t)gridDim.x * per_block) {
        int64_t io, oo;
        tsc_offset2(P.other, r, &io, &oo);
        const T *x = (const T *)P.in + io;
        T *y = (T *)P.out + oo;
        SMState<A> st;
        st.m = -(A)INFINITY;
        st.s = 0;
        for (int64_t k = lane; k < P.L; k += group) sm_fold(st, tsc_load_acc(x[k * P.xs]));
        st = BLOCK ? sm_block_all(st) : sm_warp_all(st);
        const SMFinal<A> f = sm_final(st, P.log);
        for (int64_t k = lane; k < P.L; k += group)
            y[k * P.ys] = tsc_from_acc<T>(f.apply(tsc_load_acc(x[k * P.xs]), P.log));
    }
}

template <typename T> __global__ void sm_cols_kernel(SMPlan P) {
    typedef typename tsc_acc<T>::type A;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < P.rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, oo;
        tsc_offset2(P.other, r, &io, &oo);
        const T *x = (const T *)P.in + io;
        T *y = (T *)P.out + oo;
        SMState<A> st;
        st.m = -(A)INFINITY;
        st.s = 0;
        for (int64_t k = 0; k < P.L; k++) sm_fold(st, tsc_load_acc(x[k * P.xs]));
        const SMFinal<A> f = sm_final(st, P.log);
        for (int64_t k = 0; k < P.L; k++)
            y[k * P.ys] = tsc_from_acc<T>(f.apply(tsc_load_acc(x[k * P.xs]), P.log));
    }
}

template <typename T> void sm_launch(int index, const SMPlan &P, bool cols) {
    cudaStream_t st = tsc_stream(index);
    if (cols)
        sm_cols_kernel<T><<<tsc_grid(P.rows, TSC_THREADS), TSC_THREADS, 0, st>>>(P);
    else if (P.L > SM_WARP_MAX_L)
        sm_rows_kernel<T, true><<<tsc_grid(P.rows, 1), SM_BLOCK, 0, st>>>(P);
    else
        sm_rows_kernel<T, false><<<tsc_grid(P.rows, TSC_THREADS / 32), TSC_THREADS, 0, st>>>(P);
    tsc_launch_check(P.log ? "log_softmax" : "softmax", index);
}

/* ------------------------------------------------------------------ gradient */
struct SMBack {
    const char *y, *g;
    char *gx;
    int64_t rows, L;
    bool log;
};

/* x summed over the group (a warp, or the whole block when BLOCK: all threads must call it) */
template <typename A, bool BLOCK> __device__ __forceinline__ A sm_group_sum(A x) {
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    if (!BLOCK) return x;
    __shared__ A part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) part[warp] = x;
    __syncthreads();
    A s = 0;
    for (int w = 0; w < nwarps; w++) s += part[w]; /* same order in every thread */
    __syncthreads();                               /* part is reused by the next row */
    return s;
}

template <typename T, bool BLOCK> __global__ void sm_backward_kernel(SMBack P) {
    typedef typename tsc_acc<T>::type A;
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    /* every thread of a block walks the same number of rows (the block sum's barriers) */
    const int64_t steps = (P.rows + (int64_t)gridDim.x * per_block - 1) / (gridDim.x * per_block);
    for (int64_t it = 0; it < steps; it++) {
        const int64_t r = (it * gridDim.x + blockIdx.x) * per_block + threadIdx.x / group;
        const bool live = r < P.rows;
        const T *y = (const T *)P.y + (live ? r : 0) * P.L;
        const T *g = (const T *)P.g + (live ? r : 0) * P.L;
        A s = 0;
        if (live)
            for (int64_t k = lane; k < P.L; k += group)
                s += P.log ? tsc_load_acc(g[k]) : tsc_load_acc(g[k]) * tsc_load_acc(y[k]);
        s = sm_group_sum<A, BLOCK>(s);
        if (!live) continue;
        T *gx = (T *)P.gx + r * P.L;
        for (int64_t k = lane; k < P.L; k += group) {
            const A yk = tsc_load_acc(y[k]), gk = tsc_load_acc(g[k]);
            gx[k] = tsc_from_acc<T>(P.log ? gk - sm_exp<A>(yk) * s : yk * (gk - s));
        }
    }
}

template <typename T> void sm_backward_launch(int index, const SMBack &P) {
    cudaStream_t st = tsc_stream(index);
    if (P.L > SM_WARP_MAX_L)
        sm_backward_kernel<T, true><<<tsc_grid(P.rows, 1), SM_BLOCK, 0, st>>>(P);
    else
        sm_backward_kernel<T, false><<<tsc_grid(P.rows, TSC_THREADS / 32), TSC_THREADS, 0, st>>>(P);
    tsc_launch_check(P.log ? "log_softmax_backward" : "softmax_backward", index);
}

} /* namespace */

bool tsc_softmax_backward(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *y,
                          const ts_kview *g, int dim, bool log) {
    (void)be;
    const ts_dtype dt = y->dtype;
    if (!tsc_is_float(dt) || gx->dtype != dt || g->dtype != dt || y->ndim < 1) return false;
    if (!ts_kview_rows_contiguous(gx, dim) || !ts_kview_rows_contiguous(y, dim) ||
        !ts_kview_rows_contiguous(g, dim))
        return false;
    SMBack P;
    P.y = y->data, P.g = g->data, P.gx = gx->data, P.log = log;
    P.L = y->shape[dim];
    const int64_t numel = tsc_numel(y);
    if (numel == 0) return true;
    P.rows = numel / P.L;
    if (!tsc_begin(index)) return true; /* the error is recorded */
    TSC_FLOAT_SWITCH(dt, T, sm_backward_launch<T>(index, P))
    return true;
}

void tsc_softmax(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                 bool log) {
    (void)be;
    SMPlan P;
    int64_t numel = tsc_numel(in);
    if (numel == 0) return;
    P.in = in->data;
    P.out = out->data;
    P.log = log;
    if (in->ndim == 0) { /* a scalar is a row of one */
        P.L = 1;
        P.xs = P.ys = 0;
        P.rows = 1;
        P.other = tsc_coalesce(0, NULL, NULL, NULL);
    } else {
        int64_t shape[TS_MAX_DIMS], s0[TS_MAX_DIMS], s1[TS_MAX_DIMS];
        int k = 0;
        for (int d = 0; d < in->ndim; d++) {
            if (d == dim) continue;
            shape[k] = in->shape[d];
            s0[k] = in->strides[d];
            s1[k] = out->strides[d];
            k++;
        }
        P.other = tsc_coalesce(k, shape, s0, s1);
        P.L = in->shape[dim];
        P.xs = in->strides[dim];
        P.ys = out->strides[dim];
        P.rows = numel / P.L;
    }
    if (!tsc_begin(index)) return;
    const int li = P.other.nd - 1;
    const bool contig_dim = P.L == 1 || (P.xs == 1 && P.ys == 1);
    const bool inner_contig =
        P.other.s0[li] == 1 && P.other.s1[li] == 1 && P.other.shape[li] >= SM_COL_MIN;
    /* the column path keeps reads coalesced, but gives one thread a whole row: used when there
     * are enough rows to fill the GPU or the rows are short */
    const bool cols = !contig_dim && inner_contig && (P.rows >= 2048 || P.L <= SM_WARP_MAX_L);
    TSC_FLOAT_SWITCH(in->dtype, T, sm_launch<T>(index, P, cols))
}
