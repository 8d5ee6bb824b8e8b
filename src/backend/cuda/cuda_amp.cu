/* cuda_amp.cu — GradScaler's kernels on CUDA: amp_unscale (PyTorch's
 * _amp_foreach_non_finite_check_and_unscale_: the non-finite check and the multiplication by the
 * inverse scale over every gradient in one launch) and amp_update_scale (_amp_update_scale_, one
 * thread). The scale stays on the device: nothing here synchronises with the host. */
#include <stdlib.h>

#include "backend/amp_math.h"
#include "backend/cuda/cuda_compute.h"

namespace {

#define AMP_CHUNK 4096 /* elements per block chunk */

struct AmpTensor {
    char *data;
    int dtype; /* ts_dtype: f32, f64, f16 or bf16 */
    int contiguous;
    tsc_dims dims; /* coalesced shape and strides (s0), for strided gradients */
    int64_t numel, chunk0;
};

/* Checks and scales one element. Like PyTorch the check looks at the value before scaling, the
 * product is in float (double for f64), and a scale of exactly 1 leaves the value untouched. */
template <typename T> __device__ __forceinline__ bool amp_one(T *p, float inv) {
    typedef typename tsc_acc<T>::type A;
    const A v = tsc_load_acc(*p);
    const bool bad = !isfinite(v);
    if (inv != 1.0f) *p = tsc_from_acc<T>(v * (A)inv);
    return bad;
}

template <typename T>
__device__ __forceinline__ bool amp_range(const AmpTensor &t, int64_t b, int64_t e, float inv) {
    bool bad = false;
    T *base = (T *)t.data;
    for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x)
        bad |= amp_one(base + (t.contiguous ? i : tsc_offset(t.dims, i)), inv);
    return bad;
}

__global__ void amp_unscale_kernel(const AmpTensor *tab, int n, int64_t nchunks, float *found_inf,
                                   const float *inv_scale) {
    const float inv = *inv_scale;
    bool bad = false;
    for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        int lo = 0, hi = n - 1; /* the last tensor whose first chunk is <= c */
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (tab[mid].chunk0 <= c)
                lo = mid;
            else
                hi = mid - 1;
        }
        const AmpTensor &t = tab[lo];
        const int64_t b = (c - t.chunk0) * AMP_CHUNK;
        const int64_t e = b + AMP_CHUNK < t.numel ? b + AMP_CHUNK : t.numel;
        switch (t.dtype) {
        case TS_F32:
            bad |= amp_range<float>(t, b, e, inv);
            break;
        case TS_F64:
            bad |= amp_range<double>(t, b, e, inv);
            break;
        case TS_F16:
            bad |= amp_range<tsc_f16>(t, b, e, inv);
            break;
        case TS_BF16:
            bad |= amp_range<tsc_bf16>(t, b, e, inv);
            break;
        default:
            break;
        }
    }
    /* every writer writes the same 1.0f; one per block keeps the stores few */
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

__global__ void amp_update_scale_kernel(float *scale, int32_t *tracker, const float *found_inf,
                                        double growth, double backoff, int interval) {
    ts_amp_update_scale_one(scale, tracker, *found_inf, growth, backoff, interval);
}

} /* namespace */

void tsc_amp_unscale(const ts_backend *be, int index, const ts_kview *grads, int n,
                     const ts_kview *found_inf, const ts_kview *inv_scale) {
    (void)be;
    if (n <= 0 || !tsc_begin(index)) return;
    AmpTensor *tab = (AmpTensor *)malloc((size_t)n * sizeof(AmpTensor));
    if (!tab) {
        tsi_error_set(TS_ERR_OOM, "amp_unscale: out of host memory for the tensor table");
        return;
    }
    int m = 0;
    int64_t nchunks = 0;
    for (int i = 0; i < n; i++) {
        const ts_kview *g = &grads[i];
        const int64_t numel = tsc_numel(g);
        if (numel <= 0 || !tsc_is_float(g->dtype)) continue;
        AmpTensor t;
        t.data = g->data;
        t.dtype = (int)g->dtype;
        t.dims = tsc_coalesce(g->ndim, g->shape, g->strides, NULL);
        t.contiguous = t.dims.nd == 1 && (t.dims.s0[0] == 1 || numel == 1);
        t.numel = numel;
        t.chunk0 = nchunks;
        tab[m++] = t;
        nchunks += (numel + AMP_CHUNK - 1) / AMP_CHUNK;
    }
    if (m > 0) {
        cudaStream_t st = tsc_stream(index);
        const size_t bytes = (size_t)m * sizeof(AmpTensor);
        AmpTensor *dtab = (AmpTensor *)tsc_table_alloc(index, bytes);
        /* through pinned memory kept until the copy ran, so tab can go at once */
        if (dtab &&
            tsc_copy_table_h2d(index, dtab, tab, bytes, "amp_unscale: copying the tensor table")) {
            const unsigned grid = (unsigned)(nchunks < TSC_MAX_BLOCKS ? nchunks : TSC_MAX_BLOCKS);
            amp_unscale_kernel<<<grid, TSC_THREADS, 0, st>>>(
                dtab, m, nchunks, (float *)found_inf->data, (const float *)inv_scale->data);
            tsc_launch_check("amp_unscale", index);
        }
        if (dtab) tsc_scratch_free(index, dtab);
    }
    free(tab);
}

void tsc_amp_update_scale(const ts_backend *be, int index, const ts_kview *scale,
                          const ts_kview *growth_tracker, const ts_kview *found_inf,
                          double growth_factor, double backoff_factor, int growth_interval) {
    (void)be;
    if (!tsc_begin(index)) return;
    amp_update_scale_kernel<<<1, 1, 0, tsc_stream(index)>>>(
        (float *)scale->data, (int32_t *)growth_tracker->data, (const float *)found_inf->data,
        growth_factor, backoff_factor, growth_interval);
    tsc_launch_check("amp_update_scale", index);
}
