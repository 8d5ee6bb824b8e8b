/* qlinear_global_average_pool.c — com.microsoft's QLinearGlobalAveragePool as ONNX Runtime 1.32's
 * MLAS (qlgavgpool.cpp) computes it (ts_qlinear_global_average_pool, include/tessera/quant.h):
 * per image and channel the int32 sum of x less x_zp * image_size (wrapping as int32 does),
 * scale = x_scale / (y_scale * (float)image_size) in float32, y = saturate(round_half_even(
 * (float)acc * scale) + y_zp). The cpu sums the bytes where they lie (NCHW or channels_last) in
 * int64; other devices take the same arithmetic in tensor ops. */
#include <math.h>
#include <stdlib.h>

#include "core/internal.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"

/* acc wrapped to int32, then y as MLAS makes it */
static int64_t requant_one(int64_t sum, int64_t xz_image, float scale, int64_t yz, int64_t lo,
                           int64_t hi) {
    const int32_t acc = (int32_t)(uint32_t)(uint64_t)(sum - xz_image);
    const int64_t v = (int64_t)rintf((float)acc * scale) + yz;
    return v < lo ? lo : v > hi ? hi : v;
}

/* the channel sums of one image: NCHW (c_stride = image, p_stride = 1) or channels_last
 * (c_stride = 1, p_stride = channels); T the accumulator (int32 when image * 255 fits: the
 * compiler widens the bytes 16 at a time) */
#define IMAGE_SUMS(NAME, T)                                                                        \
    static void NAME(const void *x, bool sg, int64_t channels, int64_t image, bool nhwc,           \
                     T *sums) {                                                                    \
        const uint8_t *u = (const uint8_t *)x;                                                     \
        const int8_t *s = (const int8_t *)x;                                                       \
        if (nhwc) {                                                                                \
            for (int64_t c = 0; c < channels; c++) sums[c] = 0;                                    \
            for (int64_t p = 0; p < image; p++) {                                                  \
                if (sg)                                                                            \
                    for (int64_t c = 0; c < channels; c++) sums[c] += (T)s[p * channels + c];      \
                else                                                                               \
                    for (int64_t c = 0; c < channels; c++) sums[c] += (T)u[p * channels + c];      \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t c = 0; c < channels; c++) {                                                   \
            T t = 0;                                                                               \
            if (sg)                                                                                \
                for (int64_t p = 0; p < image; p++) t += (T)s[c * image + p];                      \
            else                                                                                   \
                for (int64_t p = 0; p < image; p++) t += (T)u[c * image + p];                      \
            sums[c] = t;                                                                           \
        }                                                                                          \
    }
IMAGE_SUMS(image_sums32, int32_t)
IMAGE_SUMS(image_sums64, int64_t)

/* x's dims 2.. (the spatial dims) are channels_last-dense: channels innermost, then the spatial
 * dims row-major, then the batch */
static bool nhwc_dense(const ts_tensor *x) {
    const int r = x->shape.ndim;
    const int64_t ch = x->shape.dims[1];
    int64_t want = ch;
    if (ch > 1 && x->strides[1] != 1) return false;
    for (int d = r - 1; d >= 2; d--) {
        if (x->shape.dims[d] > 1 && x->strides[d] != want) return false;
        want *= x->shape.dims[d];
    }
    return x->shape.dims[0] <= 1 || x->strides[0] == want;
}

ts_tensor *ts_qlinear_global_average_pool(ts_tensor *x, float x_scale, int64_t x_zp, float y_scale,
                                          int64_t y_zp) {
    const char *op = "qlinear_global_average_pool";
    tsi_init();
    if (!tsi_check_input(op, x, "x")) return NULL;
    if (x->dtype != TS_U8 && x->dtype != TS_I8)
        return tsi_error_set(TS_ERR_DTYPE, "%s: x must be uint8 or int8 (got %s)", op, tsi_desc(x)),
               NULL;
    const bool sg = x->dtype == TS_I8;
    const int64_t lo = sg ? -128 : 0, hi = sg ? 127 : 255;
    if (x_zp < lo || x_zp > hi || y_zp < lo || y_zp > hi)
        return tsi_error_set(TS_ERR_ARG, "%s: x_zp %lld and y_zp %lld must lie in [%lld, %lld]", op,
                             (long long)x_zp, (long long)y_zp, (long long)lo, (long long)hi),
               NULL;
    const int r = x->shape.ndim;
    if (r < 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: x must have a batch, a channel and spatial dims, got %s", op,
                             tsi_desc(x)),
               NULL;
    int64_t image = 1;
    for (int d = 2; d < r; d++) image *= x->shape.dims[d];
    const float scale = x_scale / (y_scale * (float)image);
    if (image <= 0 || image >= (1 << 24) || !(scale >= 0x1.0p-32f && scale < 256.0f))
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: image size %lld and x_scale / (y_scale * size) %g: ONNX "
                             "Runtime computes sizes under 2^24 and ratios in [2^-32, 256) only",
                             op, (long long)image, (double)scale),
               NULL;
    ts_shape os = x->shape;
    for (int d = 2; d < r; d++) os.dims[d] = 1;
    const int64_t batch = x->shape.dims[0], channels = x->shape.dims[1];
    if (tsi_device(x).type != TS_CPU) {
        /* the sums exact in float64 (|acc| < 255 * 2^24), wrapped to int32, as float32, times
         * scale in float32, rounded, + y_zp, saturated */
        ts_dims dims = {.n = r - 2};
        for (int d = 2; d < r; d++) dims.d[d - 2] = d;
        ts_scope_begin();
        ts_tensor *acc =
            ts_sub_scalar(ts_sum_dims(ts_to_dtype(x, TS_F64), dims, true), (double)(x_zp * image));
        acc = ts_sub_scalar(ts_fmod_scalar(ts_add_scalar(acc, 0x1.8p32), 0x1.0p32), 0x1.0p31);
        ts_tensor *v = ts_to_dtype(ts_to_dtype(acc, TS_F32), TS_F64);
        v = ts_to_dtype(ts_to_dtype(ts_mul_scalar(v, (double)scale), TS_F32), TS_F64);
        v = ts_clamp(ts_add_scalar(ts_round(v), (double)y_zp), (double)lo, (double)hi);
        ts_tensor *y = ts_keep(ts_to_dtype(v, x->dtype));
        ts_scope_end();
        return y;
    }
    const bool nhwc = !tsi_is_contiguous(x) && nhwc_dense(x);
    ts_tensor *xc = nhwc ? ts_retain(x) : tsi_contiguous(op, x);
    ts_tensor *y = xc ? tsi_new(op, os, x->dtype, tsi_device(x)) : NULL;
    const bool narrow = image < ((int64_t)1 << 23); /* |sum| <= 255 * image < 2^31 */
    int64_t *sums = y ? malloc(sizeof(int64_t) * (size_t)(channels ? channels : 1)) : NULL;
    if (y && !sums) {
        ts_release(y), y = NULL;
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    }
    if (y && batch * channels > 0) {
        const uint8_t *xd = (const uint8_t *)tsi_kview(xc).data;
        uint8_t *yd = (uint8_t *)y->storage->data;
        for (int64_t b = 0; b < batch; b++) {
            const uint8_t *xb = xd + b * channels * image;
            if (narrow)
                image_sums32(xb, sg, channels, image, nhwc, (int32_t *)sums);
            else
                image_sums64(xb, sg, channels, image, nhwc, sums);
            for (int64_t c = 0; c < channels; c++) {
                const int64_t sum = narrow ? ((int32_t *)sums)[c] : sums[c];
                const int64_t v = requant_one(sum, x_zp * image, scale, y_zp, lo, hi);
                yd[b * channels + c] = sg ? (uint8_t)(int8_t)v : (uint8_t)v;
            }
        }
    }
    free(sums);
    ts_release(xc);
    return tsi_own(y);
}
