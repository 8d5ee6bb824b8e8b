/* cuda_softmax_state.cuh — a row's online softmax state on CUDA: the running max and sum of
 * exp(x - max) folded one element at a time, merged across a warp or a block by a shuffle tree,
 * and the row's normaliser from it. Shared by softmax / log_softmax (cuda_softmax.cu) and the
 * fused cross-entropy (cuda_cross_entropy.cu). Computed in the accumulation type A: float, double
 * for f64. Like PyTorch (and kern_softmax.c), a row with a NaN or a +inf, or with every entry
 * -inf, gets a NaN normaliser (sm_final). */
#ifndef TS_CUDA_SOFTMAX_STATE_CUH
#define TS_CUDA_SOFTMAX_STATE_CUH

#include <math.h>

namespace {

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

} /* namespace */

#endif /* TS_CUDA_SOFTMAX_STATE_CUH */
