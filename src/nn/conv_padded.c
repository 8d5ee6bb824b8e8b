/* conv_padded.c — ts_conv_padded: conv1d / conv2d / conv3d with a zero padding of its own size on
 * each side of each spatial dim, and PyTorch's padding='same' (the odd element of an uneven total
 * after, on the right / bottom). The part both sides share is the convolution's own padding; the
 * rest is ts_pad of the input first, so the result is differentiable on every device. */
#include "nn/conv_nd_internal.h"

static const char *OP = "conv_padded";

static ts_tensor *conv_k(int k, ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o) {
    if (k == 2) {
        const ts_conv2d_opts o2 = {.stride = {o.stride[0], o.stride[1]},
                                   .padding = {o.padding[0], o.padding[1]},
                                   .dilation = {o.dilation[0], o.dilation[1]},
                                   .groups = o.groups};
        return ts_conv2d(x, w, b, o2);
    }
    return k == 1 ? ts_conv1d(x, w, b, o) : ts_conv3d(x, w, b, o);
}

ts_tensor *ts_conv_padded(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o,
                          const int pad[6]) {
    tsi_init();
    if (!tsi_check_input(OP, x, "input") || !tsi_check_input(OP, w, "weight")) return NULL;
    const int k = w->shape.ndim - 2;
    if (k < 1 || k > 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected a 3-D, 4-D or 5-D weight [out_channels, "
                             "in_channels/groups, *kernel], but got weight of size %s",
                             OP, tsi_shape_str(w->shape)),
               NULL;
    static const char *const names[3] = {"conv1d", "conv2d", "conv3d"};
    const char *op = names[k - 1]; /* PyTorch's op name in the messages below */
    if (x->shape.ndim != k + 1 && x->shape.ndim != k + 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected %dD (unbatched) or %dD (batched) input to %s, but got "
                             "input of size: %s",
                             op, k + 1, k + 2, op, tsi_shape_str(x->shape)),
               NULL;
    if (o.padding_mode != TS_PAD_CONSTANT)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: padding_mode is the module's (pad the input with ts_pad first); "
                             "the functional convolution pads with zeros",
                             op),
               NULL;
    if (o.no_bias)
        return tsi_error_set(TS_ERR_ARG, "%s: no_bias is for modules only (pass b = NULL)", op),
               NULL;
    int before[3] = {0, 0, 0}, after[3] = {0, 0, 0};
    for (int i = 0; i < k; i++) {
        if (o.padding_same || pad) {
            if (o.padding[i] != 0)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: padding (%d in dim %d) must be 0 when %s gives the "
                                     "padding",
                                     op, o.padding[i], i,
                                     o.padding_same ? "padding='same'" : "pad"),
                       NULL;
        }
        if (o.padding_same) {
            if (pad)
                return tsi_error_set(TS_ERR_ARG, "%s: pad must be NULL with padding='same'", op),
                       NULL;
            if (o.stride[i] > 1)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: padding='same' is not supported for strided "
                                     "convolutions",
                                     op),
                       NULL;
            const int64_t d = o.dilation[i] > 0 ? o.dilation[i] : 1;
            const int64_t total = d * (w->shape.dims[2 + i] - 1);
            if (total > INT32_MAX)
                return tsi_error_set(TS_ERR_ARG, "%s: padding='same' of %lld is too large", op,
                                     (long long)total),
                       NULL;
            before[i] = (int)(total / 2), after[i] = (int)(total - total / 2);
        } else if (pad) {
            before[i] = pad[2 * i], after[i] = pad[2 * i + 1];
            if (before[i] < 0 || after[i] < 0)
                return tsi_error_set(TS_ERR_ARG,
                                     "%s: negative padding is not supported, got (%d, %d) in dim "
                                     "%d",
                                     op, before[i], after[i], i),
                       NULL;
        } else {
            before[i] = after[i] = o.padding[i]; /* the convolution checks its sign */
        }
    }
    /* the shared part: the convolution's own padding; the rest: ts_pad (last dim first) */
    int64_t extra[6] = {0, 0, 0, 0, 0, 0};
    bool uneven = false;
    for (int i = 0; i < k; i++) {
        const int both = before[i] < after[i] ? before[i] : after[i];
        const int j = 2 * (k - 1 - i);
        extra[j] = before[i] - both, extra[j + 1] = after[i] - both;
        uneven |= extra[j] || extra[j + 1];
        o.padding[i] = both;
    }
    o.padding_same = false;
    if (!uneven) return conv_k(k, x, w, b, o);
    ts_scope_begin();
    ts_tensor *y = conv_k(k, ts_pad(x, extra, 2 * k, TS_PAD_CONSTANT, 0.0), w, b, o);
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
