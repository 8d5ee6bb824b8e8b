/* cuda_cdist.cu — cdist and gather_dims (pad's reflect, replicate and circular modes) on CUDA, one
 * thread per output element: cdist sums in double whatever the dtype (as the cpu kernel does, so
 * the two agree to the output's rounding); gather_dims reads each output element's source through
 * the padded dims' index tables. */
#include "backend/cdist_math.h"
#include "backend/cuda/cuda_compute.h"

namespace {

struct CdPlan {
    char *out;
    const char *x1, *x2;
    ts_dtype dt;
    ts_cdist_kind kind;
    double p;
    int64_t B, P, R, M;
    int64_t s1[3], s2[3];
};

__device__ __forceinline__ double cd_load(const char *base, ts_dtype dt, int64_t e) {
    switch (dt) {
    case TS_F32:
        return ((const float *)base)[e];
    case TS_F64:
        return ((const double *)base)[e];
    case TS_F16:
        return ts_f16_to_f32(((const ts_f16_bits *)base)[e]);
    case TS_BF16:
        return ts_bf16_to_f32(((const ts_bf16_bits *)base)[e]);
    default:
        return 0;
    }
}

__global__ void cd_kernel(CdPlan c) {
    const int64_t n = c.B * c.P * c.R;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = e % c.R, i = e / c.R % c.P, b = e / (c.R * c.P);
        const int64_t o1 = b * c.s1[0] + i * c.s1[1], o2 = b * c.s2[0] + j * c.s2[1];
        double acc = 0;
        for (int64_t m = 0; m < c.M; m++) {
            const double d =
                cd_load(c.x1, c.dt, o1 + m * c.s1[2]) - cd_load(c.x2, c.dt, o2 + m * c.s2[2]);
            acc = ts_cdist_fold(c.kind, acc, d, c.p);
        }
        acc = ts_cdist_finish(c.kind, acc, c.p);
        switch (c.dt) {
        case TS_F32:
            ((float *)c.out)[e] = (float)acc;
            break;
        case TS_F64:
            ((double *)c.out)[e] = acc;
            break;
        case TS_F16:
            ((ts_f16_bits *)c.out)[e] = ts_f32_to_f16((float)acc);
            break;
        case TS_BF16:
            ((ts_bf16_bits *)c.out)[e] = ts_f32_to_bf16((float)acc);
            break;
        default:
            break;
        }
    }
}

struct GdPlan {
    char *out;
    const char *in;
    int nd, k;
    int64_t numel;
    int64_t shape[TS_MAX_DIMS], in_s[TS_MAX_DIMS];
    const int64_t *idx[3];
    int64_t idx_s[3];
};

template <typename U> __global__ void gd_kernel(GdPlan g) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < g.numel;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e, src = 0;
        for (int d = g.nd - 1; d >= 0; d--) {
            const int64_t c = r % g.shape[d];
            r /= g.shape[d];
            const int t = g.nd - 1 - d;
            src += (t < g.k ? g.idx[t][c * g.idx_s[t]] : c) * g.in_s[d];
        }
        ((U *)g.out)[e] = ((const U *)g.in)[src];
    }
}

} /* namespace */

void tsc_cdist(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
               const ts_kview *x2, double p) {
    (void)be;
    CdPlan c;
    c.out = out->data, c.x1 = x1->data, c.x2 = x2->data, c.dt = out->dtype, c.p = p;
    c.kind = ts_cdist_kind_of(p);
    c.B = out->shape[0], c.P = x1->shape[1], c.R = x2->shape[1], c.M = x1->shape[2];
    for (int d = 0; d < 3; d++) c.s1[d] = x1->strides[d], c.s2[d] = x2->strides[d];
    const int64_t n = c.B * c.P * c.R;
    if (n <= 0 || !tsc_begin(index)) return;
    cd_kernel<<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(c);
    tsc_launch_check("cdist", index);
}

void tsc_gather_dims(const ts_backend *be, int index, const ts_kview *out, const ts_kview *in,
                     int k, const ts_kview *idx) {
    (void)be;
    GdPlan g;
    g.out = out->data, g.in = in->data, g.nd = out->ndim, g.k = k < 3 ? k : 3, g.numel = 1;
    for (int d = 0; d < g.nd; d++) {
        g.shape[d] = out->shape[d], g.in_s[d] = in->strides[d];
        g.numel *= out->shape[d];
    }
    for (int i = 0; i < 3; i++) {
        g.idx[i] = i < g.k ? (const int64_t *)idx[i].data : nullptr;
        g.idx_s[i] = i < g.k ? idx[i].strides[0] : 0;
    }
    if (g.numel <= 0 || g.nd < 1 || !tsc_begin(index)) return;
    const unsigned grid = tsc_grid(g.numel, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    switch (tsc_dtype_size(out->dtype)) {
    case 1:
        gd_kernel<uint8_t><<<grid, TSC_THREADS, 0, st>>>(g);
        break;
    case 2:
        gd_kernel<uint16_t><<<grid, TSC_THREADS, 0, st>>>(g);
        break;
    case 4:
        gd_kernel<uint32_t><<<grid, TSC_THREADS, 0, st>>>(g);
        break;
    default:
        gd_kernel<unsigned long long><<<grid, TSC_THREADS, 0, st>>>(g);
        break;
    }
    tsc_launch_check("gather_dims", index);
}
