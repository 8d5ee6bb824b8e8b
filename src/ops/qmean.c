/* qmean.c — the mean of a quantized tensor (torch.mean on a quantized tensor, the global pool of
 * torchvision's quantized ShuffleNetV2): PyTorch's reference path composed of ops that exist,
 * dequantize, the float mean, quantize per tensor with the input's parameters
 * (include/tessera/quant.h says which bits). */
#include "autograd/trace.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"

ts_tensor *ts_quantized_mean(ts_tensor *q, ts_dims dims, bool keepdim) {
    const char *op = "quantized_mean";
    tsi_init();
    if (!tsi_quant_pt_input(op, q, "input")) return NULL;
    if (tsi_numel(q->shape) == 0) /* a mean of nothing is NaN, which no integer holds */
        return tsi_error_set(TS_ERR_ARG, "%s: input %s is empty", op, tsi_desc(q)), NULL;
    unsigned mask = 0; /* the reduced dims as a bit mask, as the float mean's trace record */
    for (int i = 0; i < dims.n; i++) {
        const int d = tsi_wrap_dim(op, dims.d[i], q->shape.ndim);
        if (d < 0) return NULL;
        mask |= 1u << d;
    }
    if (dims.n == 0) mask = (1u << q->shape.ndim) - 1;
    ts_tensor *r = NULL;
    ts_scope_begin();
    ts_tensor *m = ts_mean_dims(ts_dequantize(q), dims, keepdim);
    if (m)
        r = tsi_quantize_per_tensor(op, m, q->quant->scales[0], q->quant->zero_points[0], q->dtype);
    ts_scope_end();
    /* traced for ONNX export (DQ -> ReduceMean -> Q): the records of the ops above are not read */
    const double param = 0;
    return tsi_trace(op, &q, 1, tsi_own(r), (int64_t[]){mask, keepdim}, 2, &param, 1);
}
