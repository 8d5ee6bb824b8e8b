/* conv_fused.h — conv2d with its activation in one backend call, for inference (ONNX's fused Conv
 * + Relu / Clip). Not public. */
#ifndef TS_NN_CONV_FUSED_H
#define TS_NN_CONV_FUSED_H

#include "backend/backend.h"
#include "tessera.h"

typedef enum tsi_conv_act {
    TSI_CONV_ACT_NONE = 0,
    TSI_CONV_ACT_RELU, /* max(y, 0) */
    TSI_CONV_ACT_CLIP, /* min(max(y, lo), hi) */
    /* ONNX's HardSigmoid min(max(lo * y + hi, 0), 1) (lo, hi: its alpha and beta), and HardSwish,
     * y times HardSigmoid with lo = 1/6, hi = 1/2 */
    TSI_CONV_ACT_HARDSIGMOID,
    TSI_CONV_ACT_HARDSWISH,
} tsi_conv_act;

/* ts_conv2d(x, w, b, o) followed by the activation (lo, hi: CLIP's bounds, NAN = none; CLIP with
 * neither is the identity). When no gradient is recorded (grad mode off or nothing requires grad)
 * and no trace is on, one backend call applies the activation to the output as it is written
 * (ts_conv2d's checks, messages and autocast); otherwise it is ts_conv2d then ts_relu / ts_clamp
 * (HardSigmoid: ts_mul_scalar, ts_add_scalar, ts_clamp; HardSwish: that times y, as ONNX's ops
 * run them), with their autograd and trace. HardSigmoid and HardSwish are composed on CUDA too
 * (its convolution applies ReLU and clip alone). The result is in the current scope; NULL with
 * the error. */
ts_tensor *tsi_conv2d_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                          tsi_conv_act act, double lo, double hi);

/* The backend's activation (backend.h's ts_conv_act) for act; false for a value outside the enum.
 * CLIP without a bound is the identity (ONNX's Clip without min and max). */
bool tsi_conv_backend_act(tsi_conv_act act, double lo, double hi, ts_conv_act *out);

#endif /* TS_NN_CONV_FUSED_H */
