/* cuda_embedding_bag.cu — embedding_bag on CUDA: one thread per output element (bag, column)
 * walks its bag's positions and adds the rows' column straight into the output (float32 in
 * float32, float64 in float64, as the cpu kernel), mean dividing by the bag's kept count once
 * (embedding_bag_math.h's bags, shared with the cpu). */
#include "backend/cuda/cuda_compute.h"
#include "backend/embedding_bag_math.h"

namespace {

struct EbPlan {
    char *out;
    const char *w, *idx, *psw;
    const int64_t *off;
    bool i32;
    int mode;
    int64_t pad, width, B, D, rs, cs;
};

template <typename T> __global__ void eb_kernel(EbPlan c) {
    const int64_t n = c.B * c.D;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e / c.D, j = e % c.D;
        int64_t s, end, kept = 0;
        ts_bag_range(c.off, c.width, b, &s, &end);
        T acc = 0;
        for (int64_t p = s; p < end; p++) {
            const int64_t r = ts_bag_index(c.idx, c.i32, p);
            if (r == c.pad) continue;
            kept++;
            const T v = ((const T *)c.w)[r * c.rs + j * c.cs];
            acc += c.psw ? ((const T *)c.psw)[p] * v : v;
        }
        const double div = ts_bag_divisor(c.mode, kept);
        ((T *)c.out)[e] = div != 1.0 ? acc / (T)div : acc;
    }
}

} /* namespace */

void tsc_embedding_bag(const ts_backend *be, int index, const ts_kview *out, const ts_bag_args *a) {
    (void)be;
    EbPlan c;
    c.out = out->data, c.w = a->weight.data, c.idx = a->idx.data, c.psw = a->psw.data;
    c.off = (const int64_t *)a->offsets.data, c.i32 = a->idx.dtype == TS_I32, c.mode = a->mode;
    c.pad = a->padding_idx, c.width = a->width, c.B = a->bags, c.D = out->shape[1];
    c.rs = a->weight.strides[0], c.cs = a->weight.strides[1];
    const int64_t n = c.B * c.D;
    if (n <= 0 || !tsc_begin(index)) return;
    if (out->dtype == TS_F64)
        eb_kernel<double><<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(c);
    else
        eb_kernel<float><<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(c);
    tsc_launch_check("embedding_bag", index);
}
