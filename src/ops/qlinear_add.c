/* qlinear_add.c — ONNX Runtime's QLinearAdd (ts_qlinear_add, include/tessera/quant.h) over the
 * backend's qlinear_add kernel (cpu: kern_qlinear_add.c). The output keeps a channels_last a's
 * format (decision 0053). */
#include <math.h>

#include "core/internal.h"
#include "tessera/quant.h"

ts_tensor *ts_qlinear_add(ts_tensor *a, ts_tensor *b, float a_rate, float b_rate, float fixed) {
    const char *op = "qlinear_add";
    tsi_init();
    if (!tsi_check_input(op, a, "a") || !tsi_check_input(op, b, "b")) return NULL;
    if ((a->dtype != TS_U8 && a->dtype != TS_I8) || b->dtype != a->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: a and b must be both uint8 or both int8 (got %s, %s)", op,
                             tsi_desc(a), tsi_desc(b)),
               NULL;
    const int64_t n = tsi_numel(a->shape), nb = tsi_numel(b->shape);
    if (nb != 1 && !tsi_shape_equal(a->shape, b->shape))
        return tsi_error_set(TS_ERR_SHAPE, "%s: b %s must have a's shape %s or one value", op,
                             tsi_desc(b), tsi_desc(a)),
               NULL;
    if (!isfinite(a_rate) || !isfinite(b_rate) || !isfinite(fixed))
        return tsi_error_set(TS_ERR_ARG, "%s: the rates and the fixed term must be finite", op),
               NULL;
    ts_tensor *ts[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, ts, 2, false, &dev) || !tsi_meta_refuse(op, a)) return NULL;
    if (!tsi_be(a)->qlinear_add)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no kernel on %s", op, ts_device_str(dev)),
               NULL;
    /* a channels_last operand (a convolution's output, decision 0053): both made so (nothing to
     * do for one that already is), the output likewise, the same pass over the memory */
    const bool nhwc = nb != 1 && (tsi_prefers_channels_last(a) || tsi_prefers_channels_last(b));
    ts_tensor *ac = nhwc ? tsi_channels_last(op, a) : tsi_contiguous(op, a);
    ts_tensor *bc = !ac ? NULL : nhwc ? tsi_channels_last(op, b) : tsi_contiguous(op, b);
    ts_tensor *out = !bc    ? NULL
                     : nhwc ? tsi_new_channels_last(op, a->shape, a->dtype, dev)
                            : tsi_new(op, a->shape, a->dtype, dev);
    if (out && n) {
        const ts_qlinear_add_args args = {.n = n,
                                          .a = tsi_kview(ac).data,
                                          .b = tsi_kview(bc).data,
                                          .out = out->storage->data,
                                          .is_signed = a->dtype == TS_I8,
                                          .b_scalar = nb == 1 && n != 1,
                                          .ra = a_rate,
                                          .rb = b_rate,
                                          .fixed = fixed};
        tsi_be(a)->qlinear_add(tsi_be(a), tsi_dev_index(a), &args);
    }
    ts_release(ac);
    ts_release(bc);
    return tsi_own(out);
}
