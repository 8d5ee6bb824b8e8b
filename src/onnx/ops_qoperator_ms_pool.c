/* ops_qoperator_ms_pool.c — com.microsoft's QLinearGlobalAveragePool as ONNX Runtime 1.32's MLAS
 * (qlgavgpool.cpp) computes it, in ts_qlinear_global_average_pool (src/ops): per channel the int32
 * sum of X less X_zp * image_size, scale = X_scale / (Y_scale * (float)image_size) in float32,
 * Y = saturate(round_half_even((float)acc * scale) + Y_zp), acc wrapping as int32 does;
 * channels_last 1 reads X as NHWC (N, spatial..., C). MLAS refuses image sizes from 2^24 and
 * scales outside [2^-32, 256): so does this. */
#include "onnx/ops_nn.h"
#include "onnx/qoperator_ms.h"
#include "tessera/quant.h"

TSO_QMS_RUN(tso_qms_run_global_average_pool) {
    (void)c;
    ts_tensor *x = in[0];
    float xs, ys;
    int64_t xz, yz;
    if (!tso_qms_unary_params(n, in, false, &xs, &xz, &ys, &yz)) return false;
    const int nd = ts_ndim(x);
    if (nd < 3)
        return tso_fail(n, TS_ERR_SHAPE, "X must have a batch, a channel and spatial dims, got %s",
                        tsi_desc(x));
    const bool last = tso_attr_int(n, "channels_last", 0) != 0;
    int64_t image = 1;
    for (int d = 0; d < nd - 2; d++) image *= ts_size(x, last ? d + 1 : d + 2);
    const float scale = xs / (ys * (float)image);
    if (image <= 0 || image >= (1 << 24) || !(scale >= 0x1.0p-32f && scale < 256.0f))
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "image size %lld and x_scale / (y_scale * size) %g: ONNX Runtime computes "
                        "sizes under 2^24 and ratios in [2^-32, 256) only",
                        (long long)image, (double)scale);
    /* ts_qlinear_global_average_pool reads [N, C, spatial...]: an NHWC X is viewed so */
    ts_dims perm = {.n = nd};
    perm.d[0] = 0, perm.d[1] = last ? nd - 1 : 1;
    for (int d = 2; d < nd; d++) perm.d[d] = last ? d - 1 : d;
    ts_tensor *y = ts_qlinear_global_average_pool(last ? ts_permute(x, perm) : x, xs, xz, ys, yz);
    if (y && last) { /* back to [N, 1, ..., C] */
        ts_dims back = {.n = nd};
        back.d[0] = 0, back.d[nd - 1] = 1;
        for (int d = 1; d < nd - 1; d++) back.d[d] = d + 1;
        y = ts_contiguous(ts_permute(y, back));
    }
    TSO_DONE(y);
}
