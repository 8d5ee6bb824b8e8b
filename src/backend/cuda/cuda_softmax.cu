/* cuda_softmax.cu — softmax / log_softmax along one dim on CUDA, max-subtracted, computed in float
 * (double for f64) over strided views.
 *
 * One read computes each row's max and sum of exp(x - max) online (a running pair merged by a
 * shuffle tree), a second read writes the result. Rows along a contiguous dim go to a warp (short
 * rows) or a block (long rows); when the dim is strided but the other dims have a contiguous inner
 * one, each thread takes a whole row and neighbouring threads read neighbouring columns.
 * Like PyTorch (and kern_softmax.c), a row with a NaN or a +inf, or with every entry -inf, comes
 * out all NaN. */
#include "backend/cuda/cuda_compute.h"

namespace {

#define SM_WARP_MAX_L 1024 /* rows up to this long: one warp per row */
#define SM_BLOCK      256
#define SM_COL_MIN    8 /* contiguous inner dim at least this long for the column path */

template <typename A> struct SMState { A m, s; /* running max, sum of exp(x - m) */ };

template <typename A> __device__ __forceinline__ A sm_exp(A x) { return exp(x); }
template <> __device__ __forceinline__ float sm_exp<float>(float x) { return expf(x); }
template <typename A> __device__ __forceinline__ A sm_log(A x) { return log(x); }
template <> __device__ __forceinline__ float sm_log<float>(float x) { return logf(x); }

/* The sum the plain algorithm would see: exp(NaN - m) and exp(inf - inf) are NaN, so a NaN or a
 * +inf anywhere makes the sum NaN; -inf entries add 0 (all of them -inf: m stays -inf, s 0, and
 * exp(-inf - -inf) makes the outputs NaN). */
template <typename A> __device__ __forceinline__ void sm_fold(SMState<A> &st, A x) {
    if (x != x || st.m != st.m) {
        st.m = st.s = (A)NAN;
    } else if (x == (A)INFINITY || st.m == (A)INFINITY) {
        st.m = (A)INFINITY;
        st.s = (A)NAN;
    } else if (x == -(A)INFINITY) {
        /* adds exp(-inf) = 0 */
    } else if (x > st.m) {
        st.s = st.s * sm_exp<A>(st.m - x) + (A)1; /* st.m = -inf: 0 * 0 + 1 */
        st.m = x;
    } else {
        st.s += sm_exp<A>(x - st.m);
    }
}

template <typename A>
__device__ __forceinline__ void sm_combine(SMState<A> &L, const SMState<A> &R) {
    if (L.m != L.m || R.m != R.m) {
        L.m = L.s = (A)NAN;
        return;
    }
    const A m = L.m > R.m ? L.m : R.m;
    if (m == -(A)INFINITY) return; /* both still empty */
    if (m == (A)INFINITY) {
        L.m = m;
        L.s = (A)NAN;
        return;
    }
    L.s = L.s * sm_exp<A>(L.m - m) + R.s * sm_exp<A>(R.m - m);
    L.m = m;
}

template <typename A> __device__ __forceinline__ SMState<A> sm_warp_all(SMState<A> st) {
    for (int off = 16; off > 0; off >>= 1) {
        SMState<A> o;
        o.m = __shfl_xor_sync(0xffffffffu, st.m, off);
        o.s = __shfl_xor_sync(0xffffffffu, st.s, off);
        sm_combine(st, o);
    }
    return st; /* every lane holds the row's state (xor butterfly) */
}

/* Every thread of the block gets the block's state; all threads must call it. */
template <typename A> __device__ __forceinline__ SMState<A> sm_block_all(SMState<A> st) {
    __shared__ SMState<A> sm[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    st = sm_warp_all(st);
    if (lane == 0) sm[warp] = st;
    __syncthreads();
    SMState<A> r;
    r.m = -(A)INFINITY;
    r.s = 0;
    for (int w = 0; w < nwarps; w++) sm_combine(r, sm[w]); /* same order in every thread */
    __syncthreads();                                       /* sm is reused by the next row */
    return r;
}

struct SMPlan {
    const char *in;
    char *out;
    tsc_dims other; /* the dims other than `dim`: s0 input strides, s1 output strides */
    int64_t rows, L, xs, ys;
    bool log;
};

/* y = softmax or log_softmax of x, given the row's state */
template <typename A> struct SMFinal {
    A m, k; /* k = 1/s (softmax) or log(s) (log_softmax) */
    __device__ __forceinline__ A apply(A x, bool lg) const {
        return lg ? (x - m) - k : sm_exp<A>(x - m) * k;
    }
};

template <typename A> __device__ __forceinline__ SMFinal<A> sm_final(SMState<A> st, bool lg) {
    SMFinal<A> f;
    if (!(st.m > -(A)INFINITY && st.m < (A)INFINITY)) st.s = (A)NAN; /* see sm_fold */
    f.m = st.m;
    f.k = lg ? sm_log<A>(st.s) : (A)1 / st.s;
    return f;
}

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
