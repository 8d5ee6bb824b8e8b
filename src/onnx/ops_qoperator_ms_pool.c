/* ops_qoperator_ms_pool.c — com.microsoft's QLinearGlobalAveragePool as ONNX Runtime 1.32's MLAS
 * (qlgavgpool.cpp) computes it: per channel the int32 sum of X less X_zp * image_size, scale =
 * X_scale / (Y_scale * (float)image_size) in float32, Y = saturate(round_half_even((float)acc *
 * scale) + Y_zp), acc wrapping as int32 does; channels_last 1 reads X as NHWC (N, spatial...,
 * C). MLAS refuses image sizes from 2^24 and scales outside [2^-32, 256): so does this. */
#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"

TSO_QMS_RUN(tso_qms_run_global_average_pool) {
    (void)c;
    ts_tensor *x = in[0];
    float xs, ys;
    int64_t xz, yz;
    if (!tso_qms_unary_params(n, in, &xs, &xz, &ys, &yz)) return false;
    const ts_dtype dt = ts_dtype_of(x);
    const int nd = ts_ndim(x);
    if (nd < 3)
        return tso_fail(n, TS_ERR_SHAPE, "X must have a batch, a channel and spatial dims, got %s",
                        tsi_desc(x));
    const bool last = tso_attr_int(n, "channels_last", 0) != 0;
    ts_dims dims = {.n = nd - 2};
    int64_t image = 1;
    for (int d = 0; d < nd - 2; d++) {
        dims.d[d] = last ? d + 1 : d + 2;
        image *= ts_size(x, dims.d[d]);
    }
    const float scale = xs / (ys * (float)image);
    if (image <= 0 || image >= (1 << 24) || !(scale >= 0x1.0p-32f && scale < 256.0f))
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "image size %lld and x_scale / (y_scale * size) %g: ONNX Runtime computes "
                        "sizes under 2^24 and ratios in [2^-32, 256) only",
                        (long long)image, (double)scale);
    /* the sums exact in float64 (|acc| < 255 * 2^24); MLAS's int32 accumulator wraps past 2^31
     * (images from 2^31 / 255 values: ORT 1.32 gives 0 for 4095 x 4097 values 255, zero point 100)
     * so acc is wrapped the same; acc to float32 (exact under 2^24, else rounded as cvtdq2ps) */
    ts_tensor *acc =
        ts_sub_scalar(ts_sum_dims(ts_to_dtype(x, TS_F64), dims, true), (double)(xz * image));
    acc = ts_sub_scalar(ts_fmod_scalar(ts_add_scalar(acc, 0x1.8p32), 0x1.0p32), 0x1.0p31);
    ts_tensor *v = ts_to_dtype(ts_to_dtype(acc, TS_F32), TS_F64);
    v = ts_to_dtype(ts_to_dtype(ts_mul_scalar(v, (double)scale), TS_F32), TS_F64);
    TSO_DONE(tso_qms_saturate(ts_add_scalar(ts_round(v), (double)yz), dt));
}
