/* qactivation.c — hardswish and hardsigmoid of quantized tensors (nn.quantized.Hardswish,
 * F.hardsigmoid on a quantized tensor: torchvision's quantized MobileNetV3), PyTorch's
 * definitions composed of ops that exist: dequantize, the float op, quantize per tensor
 * (include/tessera/quant.h says which bits). */
#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/nn.h"
#include "tessera/quant.h"

static ts_tensor *unary(const char *op, ts_tensor *x, ts_tensor *(*fn)(ts_tensor *), double scale,
                        int64_t zp) {
    ts_tensor *r = NULL;
    ts_scope_begin();
    ts_tensor *y = fn(ts_dequantize(x));
    if (y) r = tsi_quantize_per_tensor(op, y, scale, zp, x->dtype);
    ts_scope_end();
    /* traced so that an ONNX export names the op it refuses (export_ops_quant.c) */
    return tsi_trace(op, &x, 1, tsi_own(r), NULL, 0, NULL, 0);
}

ts_tensor *ts_quantized_hardswish(ts_tensor *x, double out_scale, int64_t out_zero_point) {
    const char *op = "quantized_hardswish";
    tsi_init();
    if (!tsi_quant_pt_input(op, x, "input") ||
        !tsi_quant_out_params(op, x->dtype, out_scale, out_zero_point))
        return NULL;
    return unary(op, x, ts_hardswish, out_scale, out_zero_point);
}

ts_tensor *ts_quantized_hardsigmoid(ts_tensor *x) {
    const char *op = "quantized_hardsigmoid";
    tsi_init();
    if (!tsi_quant_pt_input(op, x, "input")) return NULL;
    /* PyTorch's fixed output parameters: [0, 1] in 2^8 steps (qint32: 2^32), qint8 from -128 */
    const double scale = x->dtype == TS_QINT32 ? 0x1p-32 : 0x1p-8;
    return unary(op, x, ts_hardsigmoid, scale, x->dtype == TS_QINT8 ? -128 : 0);
}
