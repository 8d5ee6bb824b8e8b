/* conv_fold.c — torch.nn.functional.unfold (im2col) and fold (col2im): a grouped conv2d /
 * conv_transpose2d whose weight picks one kernel position per output channel (a 0/1 weight: every
 * output is one input value, or a plain sum of them for fold), so they are exact, differentiable
 * and run on every device. */
#include "nn/conv_nd_internal.h"

static bool fold_params(const char *op, const int kernel[2], ts_conv2d_opts o) {
    if (!kernel || kernel[0] < 1 || kernel[1] < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: kernel_size should be greater than zero, but got %s",
                             op, kernel ? "a non-positive size" : "NULL"),
               false;
    for (int i = 0; i < 2; i++)
        if (o.stride[i] < 0 || o.padding[i] < 0 || o.dilation[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: stride and dilation should be greater than zero and padding "
                                 "non-negative, but got stride=(%d, %d), padding=(%d, %d), "
                                 "dilation=(%d, %d)",
                                 op, o.stride[0], o.stride[1], o.padding[0], o.padding[1],
                                 o.dilation[0], o.dilation[1]),
                   false;
    if (o.groups)
        return tsi_error_set(TS_ERR_ARG, "%s: groups is not an option of %s", op, op), false;
    return true;
}

/* [C * kh * kw, 1, kh, kw]: channel c * K + k has a one at kernel position k (K = kh * kw) */
static ts_tensor *pick_weight(ts_tensor *like, int64_t C, const int kernel[2]) {
    const int64_t K = (int64_t)kernel[0] * kernel[1];
    ts_tensor *eye = ts_eye(K, K, (ts_opts){.dtype = like->dtype, .device = tsi_device(like)});
    ts_tensor *e = ts_reshape(eye, TS_SHAPE(1, K, 1, kernel[0], kernel[1]));
    ts_tensor *r = ts_expand(e, TS_SHAPE(C, K, 1, kernel[0], kernel[1]));
    return ts_reshape(r, TS_SHAPE(C * K, 1, kernel[0], kernel[1]));
}

static bool check_float(const char *op, ts_tensor *x) {
    if (!tsi_check_input(op, x, "input")) return false;
    if (tsi_is_float(x->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating input, but got %s", op, tsi_desc(x));
    return false;
}

ts_tensor *ts_im2col(ts_tensor *x, const int kernel[2], ts_conv2d_opts o) {
    const char *op = "unfold";
    tsi_init();
    if (!check_float(op, x) || !fold_params(op, kernel, o)) return NULL;
    const ts_shape s = x->shape;
    if ((s.ndim != 3 && s.ndim != 4) || s.dims[s.ndim - 3] < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected 3D or 4D (batch mode) tensor with non-zero channels "
                             "for input, but got: %s",
                             op, tsi_shape_str(s)),
               NULL;
    const int64_t C = s.dims[s.ndim - 3];
    if (C * kernel[0] * kernel[1] > INT32_MAX)
        return tsi_error_set(TS_ERR_SHAPE, "%s: too many channels (%lld) for the kernel", op,
                             (long long)C),
               NULL;
    o.groups = (int)C;
    ts_scope_begin();
    ts_tensor *y = ts_conv2d(x, pick_weight(x, C, kernel), NULL, o);
    if (y) {
        ts_shape ys = y->shape; /* [(N,) C*K, LH, LW] -> [(N,) C*K, L] */
        ys.dims[ys.ndim - 2] *= ys.dims[ys.ndim - 1];
        ys.ndim--;
        y = ts_reshape(y, ys);
    }
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_col2im(ts_tensor *x, const int64_t out_size[2], const int kernel[2],
                     ts_conv2d_opts o) {
    const char *op = "fold";
    tsi_init();
    if (!check_float(op, x) || !fold_params(op, kernel, o)) return NULL;
    if (!out_size || out_size[0] < 1 || out_size[1] < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: output_size should be greater than zero", op), NULL;
    const ts_shape s = x->shape;
    const int64_t K = (int64_t)kernel[0] * kernel[1];
    if ((s.ndim != 2 && s.ndim != 3) || s.dims[s.ndim - 2] < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected 2D or 3D (batch mode) input tensor with possibly 0 "
                             "batch size and non-zero dimensions for input, but got: %s",
                             op, tsi_shape_str(s)),
               NULL;
    if (s.dims[s.ndim - 2] % K)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected size of input's dimension 1 to be divisible by the "
                             "product of kernel_size, but got input.size(1)=%lld and "
                             "kernel_size=(%d, %d)",
                             op, (long long)s.dims[s.ndim - 2], kernel[0], kernel[1]),
               NULL;
    ts_convnd_opts t = {.groups = 0};
    int64_t blocks[2];
    for (int i = 0; i < 2; i++) {
        t.stride[i] = o.stride[i] ? o.stride[i] : 1;
        t.dilation[i] = o.dilation[i] ? o.dilation[i] : 1;
        t.padding[i] = o.padding[i];
        const int64_t span =
            out_size[i] + 2 * (int64_t)t.padding[i] - (int64_t)t.dilation[i] * (kernel[i] - 1) - 1;
        blocks[i] = span < 0 ? 0 : span / t.stride[i] + 1;
        /* the transposed convolution's size before output_padding, then the remainder */
        t.output_padding[i] = (int)(span < 0 ? 0 : span % t.stride[i]);
    }
    if (blocks[0] < 1 || blocks[1] < 1 || blocks[0] * blocks[1] != s.dims[s.ndim - 1])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Given output_size=(%lld, %lld), kernel_size=(%d, %d), "
                             "dilation=(%d, %d), padding=(%d, %d), stride=(%d, %d), expected size "
                             "of input's dimension 2 to match the calculated number of sliding "
                             "blocks %lld * %lld = %lld, but got input.size(2)=%lld.",
                             op, (long long)out_size[0], (long long)out_size[1], kernel[0],
                             kernel[1], t.dilation[0], t.dilation[1], t.padding[0], t.padding[1],
                             t.stride[0], t.stride[1], (long long)blocks[0], (long long)blocks[1],
                             (long long)(blocks[0] * blocks[1]), (long long)s.dims[s.ndim - 1]),
               NULL;
    const int64_t C = s.dims[s.ndim - 2] / K;
    if (C > INT32_MAX)
        return tsi_error_set(TS_ERR_SHAPE, "%s: too many channels (%lld)", op, (long long)C), NULL;
    t.groups = (int)C;
    ts_scope_begin();
    ts_shape xs = s; /* [(N,) C*K, L] -> [(N,) C*K, LH, LW] */
    xs.dims[xs.ndim - 1] = blocks[0];
    xs.dims[xs.ndim] = blocks[1];
    xs.ndim++;
    ts_tensor *y = ts_conv_transpose2d(ts_reshape(x, xs), pick_weight(x, C, kernel), NULL, t);
    y = y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
