/* conv_fused.c — conv2d + activation (conv_fused.h): one backend call in inference, the composed
 * differentiable ops whenever autograd or an ONNX export trace must see them. */
#include <math.h>

#include "nn/conv_fused.h"

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "nn/conv_internal.h"

bool tsi_conv_backend_act(tsi_conv_act act, double lo, double hi, ts_conv_act *out) {
    switch (act) {
    case TSI_CONV_ACT_NONE:
        *out = TS_CONV_ACT_NONE;
        return true;
    case TSI_CONV_ACT_RELU:
        *out = TS_CONV_ACT_RELU;
        return true;
    case TSI_CONV_ACT_CLIP:
        *out = isnan(lo) && isnan(hi) ? TS_CONV_ACT_NONE : TS_CONV_ACT_CLIP;
        return true;
    case TSI_CONV_ACT_HARDSIGMOID:
        *out = TS_CONV_ACT_HARDSIGMOID;
        return true;
    case TSI_CONV_ACT_HARDSWISH:
        *out = TS_CONV_ACT_HARDSWISH;
        return true;
    }
    return false;
}

/* min(max(alpha * y + beta, 0), 1), and y times it: ONNX's HardSigmoid and HardSwish as its ops
 * run them (onnx/ops_elementwise.c) */
static ts_tensor *hard_sigmoid(ts_tensor *y, double alpha, double beta) {
    return ts_clamp(ts_add_scalar(ts_mul_scalar(y, alpha), beta), 0, 1);
}

/* ts_conv2d then the activation, each recording its autograd node and trace entry. */
static ts_tensor *composed(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                           ts_conv_act act, double lo, double hi) {
    ts_tensor *y = ts_conv2d(x, w, b, o);
    if (!y || act == TS_CONV_ACT_NONE) return y;
    if (act == TS_CONV_ACT_HARDSIGMOID) return hard_sigmoid(y, lo, hi);
    if (act == TS_CONV_ACT_HARDSWISH) return ts_mul(y, hard_sigmoid(y, lo, hi));
    return act == TS_CONV_ACT_RELU ? ts_relu(y) : ts_clamp(y, lo, hi);
}

/* The backend applies a in the convolution's kernel on x's device */
static bool backend_applies(ts_tensor *x, ts_conv_act a) {
    return a <= TS_CONV_ACT_CLIP || ts_device_of(x).type != TS_CUDA;
}

ts_tensor *tsi_conv2d_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                          tsi_conv_act act, double lo, double hi) {
    ts_conv_act a;
    if (!tsi_conv_backend_act(act, lo, hi, &a))
        return tsi_error_set(TS_ERR_ARG, "conv2d: unknown activation %d", (int)act), NULL;
    ts_tensor *const ins[3] = {x, w, b};
    if (a == TS_CONV_ACT_NONE || tsi_trace_active || tsi_needs_graph(ins, 3) ||
        !backend_applies(x, a))
        return composed(x, w, b, o, a, lo, hi);
    tsi_ac_frame ac; /* autocast: lower precision, as ts_conv2d */
    TSI_AUTOCAST_ENTER(&ac, "conv2d", &x, &w, &b);
    return tsi_autocast_exit(&ac, tsi_conv2d_forward_act(x, w, b, o, a, lo, hi));
}
