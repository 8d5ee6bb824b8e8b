/* cuda_index.cu — index_select, gather and scatter_add on CUDA over strided views of any dtype.
 * One thread per element of the index's extent. scatter_add accumulates with atomics (native for
 * f32, f64, i32, i64; a compare-and-swap on the enclosing 32-bit word for f16, bf16, u8 and bool,
 * which rounds after every addition exactly like the CPU kernel), so the order in which several
 * sources meet one destination — and hence the last bits of a float sum — is not fixed. */
#include "backend/cuda/cuda_compute.h"

namespace {

/* The element walk: coalesced dims, with the indexed dim `jd` kept apart. Stride sets: 0 = the
 * written / read view (out for selects, src for scatter), 1 = the indexed view (in for selects,
 * dst for scatter; its stride along jd is unused), 2 = the index (zero where it does not vary). */
struct IxPlan {
    int nd, jd;
    int64_t shape[TS_MAX_DIMS];
    int64_t s[3][TS_MAX_DIMS];
    int64_t numel;
    int64_t dim_stride; /* the indexed view's stride along the indexed dim */
    char *v0;
    char *v1;
    const int64_t *idx;
};

/* A 0-dim view is a 1-element 1-D view, so every op has a dim to index (kern_index.c does too). */
static ts_kview ix_as_1d(const ts_kview *v) {
    ts_kview r = *v;
    if (r.ndim == 0) {
        r.ndim = 1;
        r.shape[0] = 1;
        r.strides[0] = 0;
    }
    return r;
}

/* Dims of `shape` with strides st[0..2]; dims other than `dim` merge where all three allow. */
static IxPlan ix_plan(int nd, const int64_t *shape, int dim, const int64_t *st0, const int64_t *st1,
                      const int64_t *st2) {
    IxPlan P;
    P.nd = 0;
    P.jd = -1;
    P.numel = 1;
    for (int d = 0; d < nd; d++) P.numel *= shape[d];
    const int64_t *st[3] = {st0, st1, st2};
    for (int d = 0; d < nd; d++) {
        if (d != dim && shape[d] == 1) continue;
        const bool can_merge =
            d != dim && P.nd > 0 && P.nd - 1 != P.jd && P.s[0][P.nd - 1] == st[0][d] * shape[d] &&
            P.s[1][P.nd - 1] == st[1][d] * shape[d] && P.s[2][P.nd - 1] == st[2][d] * shape[d];
        if (can_merge) {
            P.shape[P.nd - 1] *= shape[d];
            for (int k = 0; k < 3; k++) P.s[k][P.nd - 1] = st[k][d];
        } else {
            if (d == dim) P.jd = P.nd;
            P.shape[P.nd] = shape[d];
            for (int k = 0; k < 3; k++) P.s[k][P.nd] = st[k][d];
            P.nd++;
        }
    }
    P.dim_stride = st1[dim];
    return P;
}

/* Offsets of element `lin`: o0 in view 0, o1 in view 1 without the indexed dim, ox in the index.
 */
__device__ __forceinline__ void ix_offsets(const IxPlan &P, int64_t lin, int64_t *o0, int64_t *o1,
                                           int64_t *ox) {
    int64_t a = 0, b = 0, c = 0;
    for (int k = P.nd - 1; k >= 0; k--) {
        const int64_t n = P.shape[k], i = lin % n;
        lin /= n;
        a += i * P.s[0][k];
        if (k != P.jd) b += i * P.s[1][k];
        c += i * P.s[2][k];
    }
    *o0 = a;
    *o1 = b;
    *ox = c;
}

/* out[e] = in[e with the indexed coordinate replaced by idx[e]]; U is a same-size bit type */
template <typename U> __global__ void ix_select_kernel(IxPlan P) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < P.numel;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t o0, o1, ox;
        ix_offsets(P, e, &o0, &o1, &ox);
        const int64_t j = P.idx[ox];
        ((U *)P.v0)[o0] = ((const U *)P.v1)[o1 + j * P.dim_stride];
    }
}

static void ix_select(int index, const char *what, IxPlan P, size_t es) {
    if (P.numel == 0 || !tsc_begin(index)) return;
    const unsigned grid = tsc_grid(P.numel, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    switch (es) {
    case 1:
        ix_select_kernel<uint8_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case 2:
        ix_select_kernel<uint16_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case 4:
        ix_select_kernel<uint32_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    default:
        ix_select_kernel<unsigned long long><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    }
    tsc_launch_check(what, index);
}

/* ------------------------------------------------------------------ atomic additions */
/* Read-modify-write of the 8- or 16-bit lane of an aligned 32-bit word. Allocations are rounded
 * to 512 bytes, so the enclosing word is always inside the tensor's storage. */
template <typename F> __device__ __forceinline__ void ix_atomic_lane(void *addr, int bits, F f) {
    const uintptr_t a = (uintptr_t)addr;
    unsigned int *word = (unsigned int *)(a & ~(uintptr_t)3);
    const unsigned shift = (unsigned)(a & 3) * 8u;
    const unsigned mask = (bits == 8 ? 0xffu : 0xffffu) << shift;
    unsigned old = *word, assumed;
    do {
        assumed = old;
        const unsigned lane = (assumed & mask) >> shift;
        const unsigned upd = ((unsigned)f(lane) << shift) & mask;
        old = atomicCAS(word, assumed, (assumed & ~mask) | upd);
    } while (assumed != old);
}

__device__ __forceinline__ void ix_add(float *d, float v) { atomicAdd(d, v); }
__device__ __forceinline__ void ix_add(double *d, double v) { atomicAdd(d, v); }
__device__ __forceinline__ void ix_add(int64_t *d, int64_t v) {
    atomicAdd((unsigned long long *)d, (unsigned long long)v); /* wraps */
}
__device__ __forceinline__ void ix_add(int32_t *d, int32_t v) { atomicAdd((int *)d, (int)v); }
__device__ __forceinline__ void ix_add(tsc_f16 *d, tsc_f16 v) {
    const float fv = ts_f16_to_f32(v.bits);
    ix_atomic_lane(d, 16, [fv](unsigned h) {
        return (unsigned)ts_f32_to_f16(ts_f16_to_f32((uint16_t)h) + fv);
    });
}
__device__ __forceinline__ void ix_add(tsc_bf16 *d, tsc_bf16 v) {
    const float fv = ts_bf16_to_f32(v.bits);
    ix_atomic_lane(d, 16, [fv](unsigned h) {
        return (unsigned)ts_f32_to_bf16(ts_bf16_to_f32((uint16_t)h) + fv);
    });
}
__device__ __forceinline__ void ix_add(uint8_t *d, uint8_t v) {
    ix_atomic_lane(d, 8, [v](unsigned b) { return (b + v) & 0xffu; });
}
__device__ __forceinline__ void ix_add(int8_t *d, int8_t v) {
    ix_atomic_lane(d, 8, [v](unsigned b) { return (b + (unsigned)(uint8_t)v) & 0xffu; });
}
__device__ __forceinline__ void ix_add(uint16_t *d, uint16_t v) {
    ix_atomic_lane(d, 16, [v](unsigned h) { return (h + v) & 0xffffu; });
}
__device__ __forceinline__ void ix_add(int16_t *d, int16_t v) {
    ix_atomic_lane(d, 16, [v](unsigned h) { return (h + (unsigned)(uint16_t)v) & 0xffffu; });
}
__device__ __forceinline__ void ix_add(uint32_t *d, uint32_t v) { atomicAdd((unsigned *)d, v); }
__device__ __forceinline__ void ix_add(uint64_t *d, uint64_t v) {
    atomicAdd((unsigned long long *)d, (unsigned long long)v);
}
__device__ __forceinline__ void ix_add(tsc_b8 *d, tsc_b8 v) {
    if (v.v != 0) ix_atomic_lane(d, 8, [](unsigned) { return 1u; }); /* logical or */
}

/* dst[e with the indexed coordinate replaced by idx[e]] += src[e] */
template <typename T> __global__ void ix_scatter_add_kernel(IxPlan P) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < P.numel;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t o0, o1, ox;
        ix_offsets(P, e, &o0, &o1, &ox);
        const int64_t j = P.idx[ox];
        ix_add((T *)P.v1 + o1 + j * P.dim_stride, ((const T *)P.v0)[o0]);
    }
}

} /* namespace */

void tsc_index_select(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                      int dim, const ts_kview *idx) {
    (void)be;
    const ts_kview o = ix_as_1d(out), i = ix_as_1d(in);
    int64_t xs[TS_MAX_DIMS] = {0};
    xs[dim] = idx->ndim > 0 ? idx->strides[0] : 0;
    IxPlan P = ix_plan(o.ndim, o.shape, dim, o.strides, i.strides, xs);
    P.v0 = o.data;
    P.v1 = i.data;
    P.idx = (const int64_t *)idx->data;
    ix_select(index, "index_select", P, tsc_dtype_size(out->dtype));
}

void tsc_gather(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in, int dim,
                const ts_kview *idx) {
    (void)be;
    const ts_kview o = ix_as_1d(out), i = ix_as_1d(in), x = ix_as_1d(idx);
    IxPlan P = ix_plan(o.ndim, o.shape, dim, o.strides, i.strides, x.strides);
    P.v0 = o.data;
    P.v1 = i.data;
    P.idx = (const int64_t *)x.data;
    ix_select(index, "gather", P, tsc_dtype_size(out->dtype));
}

void tsc_scatter_add(const ts_backend *be, int index, const ts_kview *dst, int dim,
                     const ts_kview *idx, const ts_kview *src) {
    (void)be;
    const ts_kview d = ix_as_1d(dst), x = ix_as_1d(idx), s = ix_as_1d(src);
    IxPlan P = ix_plan(x.ndim, x.shape, dim, s.strides, d.strides, x.strides);
    P.v0 = s.data;
    P.v1 = d.data;
    P.idx = (const int64_t *)x.data;
    if (P.numel == 0 || !tsc_begin(index)) return;
    const unsigned grid = tsc_grid(P.numel, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    switch (dst->dtype) {
    case TS_F32:
        ix_scatter_add_kernel<float><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_F64:
        ix_scatter_add_kernel<double><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_F16:
        ix_scatter_add_kernel<tsc_f16><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_BF16:
        ix_scatter_add_kernel<tsc_bf16><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_I64:
        ix_scatter_add_kernel<int64_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_I32:
        ix_scatter_add_kernel<int32_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_U8:
        ix_scatter_add_kernel<uint8_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_I8:
        ix_scatter_add_kernel<int8_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_I16:
        ix_scatter_add_kernel<int16_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_U16:
        ix_scatter_add_kernel<uint16_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_U32:
        ix_scatter_add_kernel<uint32_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_U64:
        ix_scatter_add_kernel<uint64_t><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    case TS_BOOL:
        ix_scatter_add_kernel<tsc_b8><<<grid, TSC_THREADS, 0, st>>>(P);
        break;
    default:
        return;
    }
    tsc_launch_check("scatter_add", index);
}
