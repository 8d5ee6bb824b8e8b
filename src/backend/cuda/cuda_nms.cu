/* cuda_nms.cu — non-maximum suppression on CUDA (torchvision.ops, issue 75), as torchvision's
 * kernel: a bit matrix mask[i][j / 64] of which later boxes j each box i overlaps (same class for
 * batched_nms; roi_math.h's IoU, shared with the cpu), one 64-box tile per block, then the greedy
 * pass over it on the device by one block (no copy to the host), writing keep. */
#include "backend/cuda/cuda_compute.h"
#include "backend/roi_math.h"

namespace {

constexpr int NMS_TILE = 64;

template <typename T> __device__ bool nms_overlaps(const T *a, const T *b, double thr);
template <> __device__ bool nms_overlaps<float>(const float *a, const float *b, double thr) {
    return ts_nms_overlaps_f(a, b, thr);
}
template <> __device__ bool nms_overlaps<double>(const double *a, const double *b, double thr) {
    return ts_nms_overlaps_d(a, b, thr);
}

/* block (row tile, column tile): thread t sets the bits of box row * 64 + t */
template <typename T>
__global__ void nms_mask(const T *boxes, const int64_t *cls, int64_t n, int64_t words, double thr,
                         uint64_t *mask) {
    const int64_t row = blockIdx.y, col = blockIdx.x;
    if (col < row) return; /* only later boxes are suppressed */
    const int64_t i = row * NMS_TILE + threadIdx.x;
    if (i >= n) return;
    const int64_t j0 = col * NMS_TILE;
    const int64_t jn = n - j0 < NMS_TILE ? n - j0 : NMS_TILE;
    uint64_t bits = 0;
    for (int64_t t = (col == row ? threadIdx.x + 1 : 0); t < jn; t++) {
        const int64_t j = j0 + t;
        if (cls && cls[i] != cls[j]) continue;
        if (nms_overlaps<T>(boxes + i * 4, boxes + j * 4, thr)) bits |= 1ull << t;
    }
    mask[i * words + col] = bits;
}

/* the greedy pass: box i is kept unless a kept box before it suppressed it */
__global__ void nms_reduce(const uint64_t *mask, int64_t n, int64_t words, uint64_t *removed,
                           bool *keep) {
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) removed[w] = 0;
    __syncthreads();
    for (int64_t i = 0; i < n; i++) {
        const int64_t wi = i / NMS_TILE;
        const bool alive = !((removed[wi] >> (i % NMS_TILE)) & 1ull);
        __syncthreads(); /* every thread has read removed[wi] before it changes */
        if (threadIdx.x == 0) keep[i] = alive;
        if (alive)
            for (int64_t w = wi + threadIdx.x; w < words; w += blockDim.x)
                removed[w] |= mask[i * words + w];
        __syncthreads();
    }
}

} /* namespace */

bool tsc_nms(const ts_backend *be, int index, const ts_kview *keep, const ts_kview *boxes,
             const ts_kview *cls, double iou_threshold) {
    (void)be;
    const int64_t n = boxes->shape[0];
    if (n <= 0) return true;
    if (!tsc_begin(index)) return true; /* the error is recorded */
    const int64_t words = (n + NMS_TILE - 1) / NMS_TILE;
    uint64_t *mask =
        (uint64_t *)tsc_scratch_alloc(index, (size_t)(n * words + words) * sizeof(uint64_t));
    if (!mask) return false;
    cudaStream_t st = tsc_stream(index);
    const dim3 grid((unsigned)words, (unsigned)words);
    const int64_t *c = (const int64_t *)cls->data;
    if (boxes->dtype == TS_F32)
        nms_mask<float><<<grid, NMS_TILE, 0, st>>>((const float *)boxes->data, c, n, words,
                                                   iou_threshold, mask);
    else
        nms_mask<double><<<grid, NMS_TILE, 0, st>>>((const double *)boxes->data, c, n, words,
                                                    iou_threshold, mask);
    if (tsc_launch_check("nms", index)) {
        nms_reduce<<<1, 256, 0, st>>>(mask, n, words, mask + n * words, (bool *)keep->data);
        tsc_launch_check("nms_reduce", index);
    }
    tsc_scratch_free(index, mask);
    return true;
}
