/* qadd.c — quantized add (ts_quantized_add) and cat (ts_quantized_cat), PyTorch's arithmetic:
 * dequantize, the float op, quantize per tensor (include/tessera/quant.h says which bits). The
 * add of two operands of one dense layout (NCHW, or channels_last: the output then too) runs in
 * one pass on devices with the qlinear_add kernel (cpu, sim: kern_qlinear_add.c's torch mode, the
 * same formulas element by element); elsewhere, and for mixed layouts, the ops themselves run. */
#include <stdlib.h>

#include "autograd/trace.h"
#include "backend/quant_math.h"
#include "core/internal.h"
#include "core/quant_desc.h"
#include "ops/quant_internal.h"
#include "tessera/elementwise.h"
#include "tessera/indexing.h"
#include "tessera/quant.h"

ts_tensor *ts_quantized_add(ts_tensor *a, ts_tensor *b, double out_scale, int64_t out_zero_point,
                            bool relu) {
    const char *op = relu ? "quantized_add_relu" : "quantized_add";
    tsi_init();
    if (!tsi_quant_pt_input(op, a, "input") || !tsi_quant_pt_input(op, b, "other")) return NULL;
    if (a->dtype != b->dtype || !tsi_shape_equal(a->shape, b->shape))
        return tsi_error_set(TS_ERR_ARG, "%s: input %s and other %s must have one dtype and shape",
                             op, tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_tensor *ts[2] = {a, b};
    ts_device dev;
    if (!tsi_quant_binary_out(op, ts, out_scale, out_zero_point, &dev)) return NULL;
    ts_tensor *r = NULL;
    /* one pass over 8-bit operands of one dense layout: NCHW, or channels_last (convolutions'
     * outputs) with a channels_last output; qint32 and mixed layouts take the ops */
    const bool cl = tsi_prefers_channels_last(a) && tsi_is_channels_last(b);
    if (tsi_be(a)->qlinear_add && a->dtype != TS_QINT32 &&
        (cl || (tsi_is_contiguous(a) && tsi_is_contiguous(b)))) {
        r = tsi_new_quantized_pt(op, a->shape, a->dtype, dev, out_scale, out_zero_point);
        if (r && cl) tsi_channels_last_strides(&a->shape, r->strides);
        const ts_qlinear_add_args args = {.n = tsi_numel(a->shape),
                                          .a = tsi_kview(a).data,
                                          .b = tsi_kview(b).data,
                                          .out = r ? r->storage->data : NULL,
                                          .is_signed = a->dtype == TS_QINT8,
                                          .torch = true,
                                          .relu = relu,
                                          .sa = (float)a->quant->scales[0],
                                          .sb = (float)b->quant->scales[0],
                                          .inv = ts_qm_inv(out_scale),
                                          .zp = (float)out_zero_point,
                                          .za = (int32_t)a->quant->zero_points[0],
                                          .zb = (int32_t)b->quant->zero_points[0]};
        if (r && args.n) tsi_be(a)->qlinear_add(tsi_be(a), tsi_dev_index(a), &args);
    } else {
        ts_scope_begin();
        ts_tensor *s = ts_add(ts_dequantize(a), ts_dequantize(b));
        if (s && relu) s = ts_relu(s);
        if (s) r = tsi_quantize_per_tensor(op, s, out_scale, out_zero_point, a->dtype);
        ts_scope_end();
    }
    /* traced for ONNX export (QDQ Add): the records of the ops above are not read */
    return tsi_trace(op, ts, 2, tsi_own(r), NULL, 0, NULL, 0);
}

ts_tensor *ts_quantized_cat(ts_tensor *const *ts, int n, int dim, double out_scale,
                            int64_t out_zero_point) {
    const char *op = "quantized_cat";
    tsi_init();
    if (!ts || n < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: expected at least one tensor", op), NULL;
    for (int i = 0; i < n; i++) {
        if (!tsi_quant_pt_input(op, ts[i], "tensors")) return NULL;
        if (ts[i]->dtype != ts[0]->dtype)
            return tsi_error_set(TS_ERR_DTYPE, "%s: tensors must have one dtype (%s and %s)", op,
                                 tsi_desc(ts[0]), tsi_desc(ts[i])),
                   NULL;
    }
    if (!tsi_quant_out_params(op, ts[0]->dtype, out_scale, out_zero_point)) return NULL;
    ts_tensor *fl[64], **f = n <= 64 ? fl : malloc((size_t)n * sizeof *f);
    if (!f) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    ts_tensor *r = NULL;
    ts_scope_begin();
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = (f[i] = ts_dequantize(ts[i])) != NULL;
    ts_tensor *c = ok ? ts_cat(f, n, dim) : NULL;
    if (c) r = tsi_quantize_per_tensor(op, c, out_scale, out_zero_point, ts[0]->dtype);
    ts_scope_end();
    if (f != fl) free(f);
    const int64_t ip[1] = {dim}; /* traced for ONNX export (QDQ Concat) */
    return tsi_trace(op, ts, n, tsi_own(r), ip, 1, NULL, 0);
}
