/* cuda_softmax.cu — softmax / log_softmax along one dim on CUDA, max-subtracted, computed in float
 * (double for f64) over strided views.
 *
 * One read computes each row's max and sum of exp(x - max) online (cuda_softmax_state.cuh: a
 * running pair merged by a shuffle tree), a second read writes the result. Rows along a contiguous
 * dim go to a warp (short rows) or a block (long rows); when the dim is strided but the other dims
 * have a contiguous inner one, each thread takes a whole row and neighbouring threads read
 * neighbouring columns.
 * Like PyTorch (and kern_softmax.c), a row with a NaN or a +inf, or with every entry -inf, comes
 * out all NaN. */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_softmax_state.cuh"

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

} /* namespace */

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
