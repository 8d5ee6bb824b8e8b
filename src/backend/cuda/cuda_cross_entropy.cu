/* cuda_cross_entropy.cu — fused cross-entropy with class-index targets on CUDA (llm.c's fused
 * classifier; ts_cross_entropy_args in backend.h has the math): the [rows, classes]
 * log-probabilities are never written.
 *
 * Forward: one read of each row folds its online max and sum of exp(x - max) (the softmax state of
 * cuda_softmax_state.cuh, so the same NaN and infinity rules as log_softmax) and its plain sum (for
 * label smoothing); one lane then reads x[t] and writes the row's loss and log-sum-exp. Backward:
 * one read of each row writes dlogits from x, the saved lse and the row's dloss, the softmax
 * recomputed as exp(x - lse) element by element. Rows up to CE_WARP_MAX_L go to a warp, longer
 * ones (a 50257-word vocabulary) to a block of CE_BLOCK threads; both walk the row in 16-byte
 * vectors from its first 16-byte boundary, an unaligned head and the tail element by element (a row
 * of odd length leaves the next row unaligned). Float math (double for f64), each output rounded
 * once; nothing read from the host, so a captured step can replay it. */
#include "backend/cuda/cuda_compute.h"
#include "backend/cuda/cuda_softmax_state.cuh"

namespace {

#define CE_WARP_MAX_L 1024 /* rows up to this long: one warp per row */
#define CE_BLOCK      512  /* threads per longer row */

template <typename T> struct CEPlan {
    typedef typename tsc_acc<T>::type A;
    const T *x;
    T *dx;
    const int64_t *target;
    A *loss, *lse;
    const A *dloss;
    int64_t rows, classes, ignore_index;
    A eps;
};

/* 16 bytes of T: one vector load or store */
template <typename T> struct alignas(16) CEVec { T v[16 / sizeof(T)]; };

/* The elements of a row at p before its first 16-byte boundary, at most L (all L when p is not
 * even aligned to its element: no vectors then). */
template <typename T> __device__ __forceinline__ int64_t ce_head(const void *p, int64_t L) {
    const uintptr_t a = (uintptr_t)p;
    const int64_t h = a % sizeof(T) ? L : (int64_t)(((16 - (a & 15)) & 15) / sizeof(T));
    return h < L ? h : L;
}

/* Calls f(v) for this lane's share of the row x[0, L), v in the compute type. */
template <typename T, typename F>
__device__ __forceinline__ void ce_read_row(const T *x, int64_t L, int lane, int group, F &&f) {
    constexpr int V = 16 / sizeof(T);
    const int64_t head = ce_head<T>(x, L), nvec = (L - head) / V;
    for (int64_t k = lane; k < head; k += group) f(tsc_load_acc(x[k]));
    const CEVec<T> *xv = (const CEVec<T> *)(x + head);
    for (int64_t i = lane; i < nvec; i += group) {
        const CEVec<T> w = xv[i];
#pragma unroll
        for (int e = 0; e < V; e++) f(tsc_load_acc(w.v[e]));
    }
    for (int64_t k = head + nvec * V + lane; k < L; k += group) f(tsc_load_acc(x[k]));
}

/* y[k] = f(k, x[k]) for this lane's share of the row [0, L); vectors only where x and y sit alike
 * against the 16-byte boundaries. */
template <typename T, typename F>
__device__ __forceinline__ void ce_map_row(const T *x, T *y, int64_t L, int lane, int group,
                                           F &&f) {
    constexpr int V = 16 / sizeof(T);
    int64_t head = ce_head<T>(x, L);
    if (ce_head<T>(y, L) != head) head = L; /* not alike: element by element */
    const int64_t nvec = (L - head) / V;
    for (int64_t k = lane; k < head; k += group) y[k] = tsc_from_acc<T>(f(k, tsc_load_acc(x[k])));
    const CEVec<T> *xv = (const CEVec<T> *)(x + head);
    CEVec<T> *yv = (CEVec<T> *)(y + head);
    for (int64_t i = lane; i < nvec; i += group) {
        const CEVec<T> w = xv[i];
        CEVec<T> o;
        const int64_t k0 = head + i * V;
#pragma unroll
        for (int e = 0; e < V; e++) o.v[e] = tsc_from_acc<T>(f(k0 + e, tsc_load_acc(w.v[e])));
        yv[i] = o;
    }
    for (int64_t k = head + nvec * V + lane; k < L; k += group)
        y[k] = tsc_from_acc<T>(f(k, tsc_load_acc(x[k])));
}

template <typename A> __device__ __forceinline__ A ce_warp_sum(A v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v; /* in every lane */
}

/* The block's sum in every thread; all threads must call it. */
template <typename A> __device__ __forceinline__ A ce_block_sum(A v) {
    __shared__ A part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = ce_warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    A r = 0;
    for (int w = 0; w < nwarps; w++) r += part[w]; /* same order in every thread */
    __syncthreads();                               /* part is reused by the next row */
    return r;
}

/* The row's target, clamped into [0, classes) (see backend.h); -1 when ignored. */
__device__ __forceinline__ int64_t ce_target(const int64_t *target, int64_t r, int64_t classes,
                                             int64_t ignore_index) {
    const int64_t t = target[r];
    if (t == ignore_index) return -1;
    return t < 0 ? 0 : t >= classes ? classes - 1 : t;
}

template <typename T, bool BLOCK> __global__ void ce_forward_kernel(CEPlan<T> P) {
    typedef typename tsc_acc<T>::type A;
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    for (int64_t r = blockIdx.x * per_block + threadIdx.x / group; r < P.rows;
         r += (int64_t)gridDim.x * per_block) {
        const T *x = P.x + r * P.classes;
        SMState<A> st;
        st.m = -(A)INFINITY;
        st.s = 0;
        A sum = 0;
        ce_read_row(x, P.classes, lane, group, [&](A v) {
            sm_fold(st, v);
            sum += v;
        });
        st = BLOCK ? sm_block_all(st) : sm_warp_all(st);
        sum = BLOCK ? ce_block_sum(sum) : ce_warp_sum(sum);
        if (lane == 0) {
            /* lse = f.m + f.k; -log q_j = f.k - (x_j - f.m), as log_softmax writes it */
            const SMFinal<A> f = sm_final(st, true);
            const int64_t t = ce_target(P.target, r, P.classes, P.ignore_index);
            A loss = 0;
            if (t >= 0) {
                loss = ((A)1 - P.eps) * (f.k - (tsc_load_acc(x[t]) - f.m));
                if (P.eps > 0) loss += P.eps * (f.k - (sum / (A)P.classes - f.m));
            }
            P.loss[r] = loss;
            P.lse[r] = f.m + f.k;
        }
    }
}

template <typename T, bool BLOCK> __global__ void ce_backward_kernel(CEPlan<T> P) {
    typedef typename tsc_acc<T>::type A;
    const int group = BLOCK ? blockDim.x : 32;
    const int lane = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    const A on_target = (A)1 - P.eps, spread = P.eps / (A)P.classes;
    for (int64_t r = blockIdx.x * per_block + threadIdx.x / group; r < P.rows;
         r += (int64_t)gridDim.x * per_block) {
        const int64_t t = ce_target(P.target, r, P.classes, P.ignore_index);
        const A lse = P.lse[r], g = t >= 0 ? P.dloss[r] : (A)0;
        ce_map_row(P.x + r * P.classes, P.dx + r * P.classes, P.classes, lane, group,
                   [&](int64_t k, A v) -> A {
                       if (t < 0) return 0; /* ignored: 0 even where the row is NaN */
                       return g * (sm_exp<A>(v - lse) - (k == t ? on_target : (A)0) - spread);
                   });
    }
}

template <typename T> CEPlan<T> ce_plan(const ts_cross_entropy_args *a) {
    typedef typename tsc_acc<T>::type A;
    CEPlan<T> P;
    P.x = (const T *)a->logits.data;
    P.dx = (T *)a->dlogits.data;
    P.target = (const int64_t *)a->target.data;
    P.loss = (A *)a->loss.data;
    P.lse = (A *)a->lse.data;
    P.dloss = (const A *)a->dloss.data;
    P.rows = a->rows;
    P.classes = a->classes;
    P.ignore_index = a->ignore_index;
    P.eps = (A)a->label_smoothing;
    return P;
}

template <typename T> void ce_launch(int index, const ts_cross_entropy_args *a, bool backward) {
    const CEPlan<T> P = ce_plan<T>(a);
    cudaStream_t st = tsc_stream(index);
    if (P.classes > CE_WARP_MAX_L) {
        const unsigned grid = tsc_grid_size(index, P.rows * CE_BLOCK, CE_BLOCK);
        if (backward)
            ce_backward_kernel<T, true><<<grid, CE_BLOCK, 0, st>>>(P);
        else
            ce_forward_kernel<T, true><<<grid, CE_BLOCK, 0, st>>>(P);
    } else {
        const unsigned grid = tsc_grid_size(index, P.rows * 32, TSC_THREADS);
        if (backward)
            ce_backward_kernel<T, false><<<grid, TSC_THREADS, 0, st>>>(P);
        else
            ce_forward_kernel<T, false><<<grid, TSC_THREADS, 0, st>>>(P);
    }
    tsc_launch_check(backward ? "cross_entropy_backward" : "cross_entropy_forward", index);
}

void ce_run(int index, const ts_cross_entropy_args *a, bool backward) {
    if (a->rows < 1 || a->classes < 1 || !tsc_begin(index)) return;
    TSC_FLOAT_SWITCH(a->logits.dtype, T, ce_launch<T>(index, a, backward))
}

} /* namespace */

void tsc_cross_entropy_forward(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be;
    ce_run(index, a, false);
}

void tsc_cross_entropy_backward(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be;
    ce_run(index, a, true);
}
