/* cuda_iter.cuh — the elementwise launch machinery: operands over one shape with dims merged like
 * the CPU's iterator, then one of three kernels: a linear one for dense operands (4-wide vector
 * loads when aligned; a broadcast scalar operand allowed), or a strided one with per-element
 * offsets from fast 32-bit division, or 64-bit division when the tensor is that large. */
#ifndef TS_CUDA_ITER_CUH
#define TS_CUDA_ITER_CUH

#include <cstdint>
#include <cstring>

#include "backend/cuda/cuda_dtype.cuh"
#include "backend/cuda/cuda_internal.h"

#define TSC_MAX_OPS 4
#define TSC_THREADS 256
#define TSC_VEC     4

/* Kernels are written once for two executors. On the GPU: __global__ functions launched with
 * <<<>>>. Under TSC_HOST_EMULATION (tests/support/cuda_emulation.cu, a test that needs no GPU):
 * host functions called once per thread index, so the kernels' logic, grid-stride loops and launch
 * decisions run in CI against the CPU backend. Kernel bodies therefore use TSC_TID / TSC_NTHREADS
 * and every function they call is __host__ __device__ (TS_HD). */
#ifdef TSC_HOST_EMULATION
#define TSC_KERNEL        static inline void
#define TSC_THREAD_PARAMS , uint64_t tsc_tid_, uint64_t tsc_nthreads_
#define TSC_TID           tsc_tid_
#define TSC_NTHREADS      tsc_nthreads_
#define TSC_LAUNCH(kernel, grid, stream, ...)                                                      \
    for (uint64_t t_ = 0, n_ = (uint64_t)(grid)*TSC_THREADS; t_ < n_; t_++)                        \
    kernel(__VA_ARGS__, t_, n_)
/* Bit 0: no vector accesses; bit 1: no linear kernel (everything strided); bit 2: 64-bit offsets
 * for the strided kernel. Small chunks make the linear path split its launches. */
extern int tsc_emulation_mode;
#define TSC_CHUNK ((int64_t)4 * 37)
/* The host compiler keeps an op's per-element function whole: GCC 13 at -O3 (Ubuntu 24.04's, on
 * the GPU machine) turned the emulated uint8 negation in the unrolled vector loop into a copy,
 * which GCC 12 and nvcc's device code do not. */
#define TSC_EMU_NOINLINE __attribute__((noinline))
#else
#define TSC_EMU_NOINLINE
#define TSC_KERNEL __global__ void __launch_bounds__(TSC_THREADS)
#define TSC_THREAD_PARAMS
#define TSC_TID      ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)
#define TSC_NTHREADS ((uint64_t)gridDim.x * blockDim.x)
#define TSC_LAUNCH(kernel, grid, stream, ...)                                                      \
    kernel<<<(grid), TSC_THREADS, 0, (stream)>>>(__VA_ARGS__)
#define tsc_emulation_mode 0
/* Linear launches cover at most this many elements (32-bit indices inside a kernel); larger
 * tensors go in several launches. A multiple of TSC_VEC, so every chunk keeps the alignment. */
#define TSC_CHUNK          ((int64_t)1 << 30)
#endif

/* Device memory copies and fills on a stream (plain memcpy/memset under emulation). */
static inline cudaError_t tsc_memcpy_async(void *dst, const void *src, size_t n, cudaStream_t s) {
#ifdef TSC_HOST_EMULATION
    memcpy(dst, src, n);
    return cudaSuccess;
#else
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
#endif
}

static inline cudaError_t tsc_memset_async(void *dst, int byte, size_t n, cudaStream_t s) {
#ifdef TSC_HOST_EMULATION
    memset(dst, byte, n);
    return cudaSuccess;
#else
    return cudaMemsetAsync(dst, byte, n, s);
#endif
}

/* ------------------------------------------------------------------ host: the iteration space */
typedef struct tsc_iter {
    int nops, ndim;
    int64_t numel;
    int64_t shape[TS_MAX_DIMS];
    int64_t strides[TSC_MAX_OPS][TS_MAX_DIMS]; /* bytes */
    int64_t esz[TSC_MAX_OPS];
    char *data[TSC_MAX_OPS];
} tsc_iter;

/* True when inner dim i should be walked outside dim o (the first operand with both strides
 * non-zero decides, the output first), as in ts_cpu_iter_init. */
static inline bool tsc_dim_outer(const tsc_iter *it, int o, int i) {
    for (int k = 0; k < it->nops; k++) {
        int64_t so = it->strides[k][o], si = it->strides[k][i];
        if (so == 0 || si == 0) continue;
        return si > so;
    }
    return false;
}

/* views[0] is the output; all views have its shape (broadcast inputs carry stride 0). Size-1 dims
 * are dropped, dims ordered by decreasing output stride unless keep_order (random numbers follow
 * the row-major order of the output), and adjacent dims merged where every operand allows. */
static inline void tsc_iter_init(tsc_iter *it, int nops, const ts_kview *const *views,
                                 bool keep_order) {
    const ts_kview *v0 = views[0];
    it->nops = nops;
    it->numel = 1;
    for (int k = 0; k < nops; k++) {
        it->data[k] = views[k]->data;
        it->esz[k] = (int64_t)tsc_dtype_size(views[k]->dtype);
    }
    int nd = 0;
    for (int d = 0; d < v0->ndim; d++) {
        it->numel *= v0->shape[d];
        if (v0->shape[d] == 1) continue;
        it->shape[nd] = v0->shape[d];
        for (int k = 0; k < nops; k++) it->strides[k][nd] = views[k]->strides[d] * it->esz[k];
        nd++;
    }
    for (int i = 1; i < nd && !keep_order; i++) {
        for (int j = i; j > 0 && tsc_dim_outer(it, j - 1, j); j--) {
            int64_t t = it->shape[j];
            it->shape[j] = it->shape[j - 1], it->shape[j - 1] = t;
            for (int k = 0; k < nops; k++) {
                t = it->strides[k][j];
                it->strides[k][j] = it->strides[k][j - 1], it->strides[k][j - 1] = t;
            }
        }
    }
    int m = 0;
    for (int d = 0; d < nd; d++) {
        bool merge = m > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = it->strides[k][m - 1] == it->strides[k][d] * it->shape[d];
        if (merge) {
            it->shape[m - 1] *= it->shape[d];
        } else {
            it->shape[m] = it->shape[d];
            m++;
        }
        for (int k = 0; k < nops; k++) it->strides[k][m - 1] = it->strides[k][d];
    }
    if (m == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        m = 1;
    }
    it->ndim = m;
}

/* Linear: one dense run where the output and every input are contiguous, or an input is one
 * broadcast element (stride 0: its bit in *bcast). */
static inline bool tsc_iter_linear(const tsc_iter *it, unsigned *bcast) {
    *bcast = 0;
    if (it->ndim != 1) return false;
    if (it->numel == 1) return true;
    if (it->strides[0][0] != it->esz[0]) return false;
    for (int k = 1; k < it->nops; k++) {
        if (it->strides[k][0] == 0)
            *bcast |= 1u << k;
        else if (it->strides[k][0] != it->esz[k])
            return false;
    }
    return true;
}

/* The linear kernel serves it (tsc_iter_linear), unless an emulation test wants it strided. */
static inline bool tsc_use_linear(const tsc_iter *it, unsigned *bcast) {
    return tsc_iter_linear(it, bcast) && !(tsc_emulation_mode & 2);
}

/* Every element index and byte offset fits in 31 bits. */
static inline bool tsc_iter_fits32(const tsc_iter *it) {
    if (it->numel > INT32_MAX) return false;
    for (int k = 0; k < it->nops; k++) {
        int64_t span = it->esz[k];
        for (int d = 0; d < it->ndim; d++) span += (it->shape[d] - 1) * it->strides[k][d];
        if (span > INT32_MAX) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ device: offsets */
template <int N> struct tsc_ptrs { char *p[N]; };

/* n / d for n < 2^31 by multiply-high and shift (Granlund-Montgomery, as PyTorch's IntDivider):
 * shift = ceil(log2 d), magic = floor(2^32 (2^shift - d) / d) + 1. */
struct tsc_divmod32 {
    uint32_t d, magic, shift;
    __host__ void init(uint32_t divisor) {
        d = divisor;
        for (shift = 0; shift < 32; shift++)
            if ((1ull << shift) >= divisor) break;
        uint64_t one = 1;
        magic = (uint32_t)(((one << 32) * ((one << shift) - divisor)) / divisor + 1);
    }
    __host__ __device__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
        uint32_t t = __umulhi(n, magic);
#else
        uint32_t t = (uint32_t)(((uint64_t)n * magic) >> 32);
#endif
        return (t + n) >> shift;
    }
};

template <int N> struct tsc_offsets32 {
    int ndim;
    tsc_divmod32 dim[TS_MAX_DIMS];
    uint32_t stride[TS_MAX_DIMS][N];
    __host__ __device__ void get(uint32_t i, uint32_t *off) const {
        TSC_UNROLL
        for (int k = 0; k < N; k++) off[k] = 0;
        for (int d = ndim - 1; d > 0; d--) {
            uint32_t q = dim[d].div(i), r = i - q * dim[d].d;
            TSC_UNROLL
            for (int k = 0; k < N; k++) off[k] += r * stride[d][k];
            i = q;
        }
        TSC_UNROLL
        for (int k = 0; k < N; k++) off[k] += i * stride[0][k];
    }
};

template <int N> struct tsc_offsets64 {
    int ndim;
    uint64_t dim[TS_MAX_DIMS];
    uint64_t stride[TS_MAX_DIMS][N];
    __host__ __device__ void get(uint64_t i, uint64_t *off) const {
        TSC_UNROLL
        for (int k = 0; k < N; k++) off[k] = 0;
        for (int d = ndim - 1; d > 0; d--) {
            uint64_t q = i / dim[d], r = i - q * dim[d];
            TSC_UNROLL
            for (int k = 0; k < N; k++) off[k] += r * stride[d][k];
            i = q;
        }
        TSC_UNROLL
        for (int k = 0; k < N; k++) off[k] += i * stride[0][k];
    }
};

template <int N> static inline tsc_offsets32<N> tsc_make_offsets32(const tsc_iter *it) {
    tsc_offsets32<N> o;
    o.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        o.dim[d].init((uint32_t)it->shape[d]);
        for (int k = 0; k < N; k++) o.stride[d][k] = (uint32_t)it->strides[k][d];
    }
    return o;
}

template <int N> static inline tsc_offsets64<N> tsc_make_offsets64(const tsc_iter *it) {
    tsc_offsets64<N> o;
    o.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        o.dim[d] = (uint64_t)it->shape[d];
        for (int k = 0; k < N; k++) o.stride[d][k] = (uint64_t)it->strides[k][d];
    }
    return o;
}

/* ------------------------------------------------------------------ device: vectors */
template <typename T, int V> struct alignas(sizeof(T) * V) tsc_vec { T v[V]; };

/* Elements i .. i+V-1 of a dense operand, or V copies of a broadcast one's single element. */
template <typename T, int V>
TS_HD inline tsc_vec<T, V> tsc_ldv(const char *base, uint32_t i, bool bcast) {
    tsc_vec<T, V> r;
    if (bcast) {
        T x = *(const T *)base;
        TSC_UNROLL
        for (int k = 0; k < V; k++) r.v[k] = x;
    } else {
#ifdef __CUDA_ARCH__
        r = *((const tsc_vec<T, V> *)((const T *)base + i));
#else /* the host emulation: no access through a type the buffer does not hold */
        memcpy(&r, (const T *)base + i, sizeof r);
#endif
    }
    return r;
}

template <typename T, int V>
TS_HD inline void tsc_stv(char *base, uint32_t i, const tsc_vec<T, V> &x) {
#ifdef __CUDA_ARCH__
    *((tsc_vec<T, V> *)((T *)base + i)) = x;
#else
    memcpy((T *)base + i, &x, sizeof x);
#endif
}

/* ------------------------------------------------------------------ kernels
 * A functor F has NOPS operands (0 = output) and two entries: vec<V>(ptrs, i, bcast) does the
 * dense elements i .. i+V-1, one(p) one element at byte pointers p. */
template <class F, int V>
TSC_KERNEL tsc_k_linear(F f, uint32_t n, tsc_ptrs<F::NOPS> base, unsigned bcast TSC_THREAD_PARAMS) {
    const uint32_t step = (uint32_t)TSC_NTHREADS, t = (uint32_t)TSC_TID;
    const uint32_t nvec = n / V;
    for (uint32_t v = t; v < nvec; v += step) f.template vec<V>(base, v * V, bcast);
    if (V > 1) { /* fewer than V elements left: one each for the first threads */
        uint32_t i = nvec * V + t;
        if (i < n) f.template vec<1>(base, i, bcast);
    }
}

template <class F, typename I, class O>
TSC_KERNEL tsc_k_strided(F f, I n, tsc_ptrs<F::NOPS> base, O offsets TSC_THREAD_PARAMS) {
    const I step = (I)TSC_NTHREADS;
    for (I i = (I)TSC_TID; i < n; i += step) {
        I off[F::NOPS];
        offsets.get(i, off);
        char *p[F::NOPS];
        TSC_UNROLL
        for (int k = 0; k < F::NOPS; k++) p[k] = base.p[k] + off[k];
        f.one(p);
    }
}

/* ------------------------------------------------------------------ host: launches */
/* Launches the linear kernel over a linear iteration space (tsc_iter_linear true). */
template <class F>
static inline void tsc_launch_linear(int dev, const F &f, const tsc_iter *it, unsigned bcast) {
    cudaStream_t s = tsc_stream(dev);
    bool vec = !(tsc_emulation_mode & 1); /* every dense operand aligned for vector accesses */
    for (int k = 0; k < F::NOPS; k++)
        if (!(bcast >> k & 1u) && (uintptr_t)it->data[k] % (uintptr_t)(it->esz[k] * TSC_VEC))
            vec = false;
    for (int64_t start = 0; start < it->numel; start += TSC_CHUNK) {
        int64_t left = it->numel - start;
        uint32_t n = (uint32_t)(left < TSC_CHUNK ? left : TSC_CHUNK);
        tsc_ptrs<F::NOPS> p;
        for (int k = 0; k < F::NOPS; k++)
            p.p[k] = it->data[k] + ((bcast >> k & 1u) ? 0 : start * it->esz[k]);
        if (vec) {
            auto kernel = &tsc_k_linear<F, TSC_VEC>;
            TSC_LAUNCH(kernel, tsc_grid_size(dev, n / TSC_VEC + 1, TSC_THREADS), s, f, n, p, bcast);
        } else {
            auto kernel = &tsc_k_linear<F, 1>;
            TSC_LAUNCH(kernel, tsc_grid_size(dev, n, TSC_THREADS), s, f, n, p, bcast);
        }
    }
}

template <class F> static inline void tsc_launch_strided(int dev, const F &f, const tsc_iter *it) {
    cudaStream_t s = tsc_stream(dev);
    tsc_ptrs<F::NOPS> p;
    for (int k = 0; k < F::NOPS; k++) p.p[k] = it->data[k];
    unsigned grid = tsc_grid_size(dev, it->numel, TSC_THREADS);
    if (tsc_iter_fits32(it) && !(tsc_emulation_mode & 4)) {
        auto kernel = &tsc_k_strided<F, uint32_t, tsc_offsets32<F::NOPS>>;
        TSC_LAUNCH(kernel, grid, s, f, (uint32_t)it->numel, p, tsc_make_offsets32<F::NOPS>(it));
    } else {
        auto kernel = &tsc_k_strided<F, uint64_t, tsc_offsets64<F::NOPS>>;
        TSC_LAUNCH(kernel, grid, s, f, (uint64_t)it->numel, p, tsc_make_offsets64<F::NOPS>(it));
    }
}

/* The whole elementwise call: views[0] is the output. `what` names the kernel in error messages. */
template <class F>
static inline void tsc_run(const char *what, int dev, const F &f, const ts_kview *const *views) {
    tsc_iter it;
    tsc_iter_init(&it, F::NOPS, views, false);
    if (it.numel <= 0) return;
    unsigned bcast;
    if (tsc_use_linear(&it, &bcast))
        tsc_launch_linear(dev, f, &it, bcast);
    else
        tsc_launch_strided(dev, f, &it);
    tsc_launch_check(what, dev);
}

#endif /* TS_CUDA_ITER_CUH */
