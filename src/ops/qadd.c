/* qadd.c — quantized add (ts_quantized_add) and cat (ts_quantized_cat), PyTorch's arithmetic
 * composed of ops that exist: dequantize, the float op, quantize per tensor (include/tessera/
 * quant.h says which bits). */
#include <stdlib.h>

#include "autograd/trace.h"
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
    ts_scope_begin();
    ts_tensor *s = ts_add(ts_dequantize(a), ts_dequantize(b));
    if (s && relu) s = ts_relu(s);
    if (s) r = tsi_quantize_per_tensor(op, s, out_scale, out_zero_point, a->dtype);
    ts_scope_end();
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
