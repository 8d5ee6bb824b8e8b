/* tessera/conv.h — the convolution family beyond conv2d: conv1d, conv3d, the transposed
 * convolutions, im2col / col2im (unfold / fold) and their modules. */
#ifndef TESSERA_CONV_H
#define TESSERA_CONV_H

#include "tessera.h"

/* Options of a k-dim convolution (k = 1, 2 or 3): the first k entries of each array are used.
 * Zero means PyTorch's default: stride 1, padding 0, dilation 1, output_padding 0, groups 1.
 * output_padding is for the transposed convolutions only (each < its stride or its dilation). */
typedef struct ts_convnd_opts {
    int stride[3], padding[3], dilation[3], output_padding[3];
    int groups;
    /* modules only: no bias parameter; padding_mode (TS_PAD_CONSTANT = 'zeros', REFLECT,
     * REPLICATE, CIRCULAR; not for transposed convolutions); padding_same: padding='same' (stride
     * 1; the extra element of an uneven total on the right, as PyTorch) instead of padding[] */
    bool no_bias;
    ts_pad_mode padding_mode;
    bool padding_same;
} ts_convnd_opts;

/* x [N, C, L] (or unbatched [C, L]), w [O, C/groups, k], b [O] or NULL: conv2d over a height-1
 * view (the same kernels, autograd, every device). */
TS_API ts_tensor *ts_conv1d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o);
/* x [N, C, D, H, W] (or unbatched [C, D, H, W]), w [O, C/groups, kd, kh, kw], b [O] or NULL: a
 * sum over the kernel's depth of conv2d over depth slices (autograd, every device). */
TS_API ts_tensor *ts_conv3d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o);

/* A convolution (k = w's dims - 2: conv1d, conv2d or conv3d; x, w, b as those) with its own zero
 * padding on each side: pad[2 i] before and pad[2 i + 1] after spatial dim i (the first spatial
 * dim first; o.padding must be 0). pad NULL: o.padding on both sides. o.padding_same (pad NULL,
 * o.padding 0, stride 1): PyTorch's padding='same', a total of dilation * (kernel - 1) with its odd
 * element after (right / bottom). The padding both sides share is the convolution's own; the rest
 * pads x first (ts_pad), so autograd and every device are the convolution's. padding_mode and
 * no_bias are the modules' (refused). */
TS_API ts_tensor *ts_conv_padded(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o,
                                 const int pad[6]);

/* The transposed convolutions (the input gradient of the convolution): x [N, Cin, *in] (or
 * unbatched), w [Cin, Cout/groups, *kernel], b [Cout] or NULL; out [N, Cout, *out] with out =
 * (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1. 2d runs the
 * backend's conv2d backward-data kernel (its backward: conv2d and the weight-gradient kernel);
 * 1d over a height-1 view, 3d as a sum over the kernel's depth of 2d over depth slices. */
TS_API ts_tensor *ts_conv_transpose1d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o);
TS_API ts_tensor *ts_conv_transpose2d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o);
TS_API ts_tensor *ts_conv_transpose3d(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_convnd_opts o);

/* torch.nn.functional.unfold (im2col): x [N, C, H, W] (or [C, H, W]) -> [N, C*kh*kw, L], the
 * kernel's patches as columns (channel-major, then kernel row, column), L the output positions;
 * fold (col2im) is its adjoint: x [N, C*kh*kw, L] -> [N, C, out_h, out_w], overlapping values
 * summed. kernel[2] required (> 0); stride, padding, dilation as ts_conv2d_opts (0: default).
 * A conv2d / conv_transpose2d with a 0/1 weight (exact), so differentiable on every device. */
TS_API ts_tensor *ts_im2col(ts_tensor *x, const int kernel[2], ts_conv2d_opts o);
TS_API ts_tensor *ts_col2im(ts_tensor *x, const int64_t out_size[2], const int kernel[2],
                            ts_conv2d_opts o);

/* Modules Conv1d / Conv3d / ConvTranspose1d / 2d / 3d with PyTorch's parameter names (weight,
 * bias), shapes and default init (kaiming_uniform_(a=sqrt(5)); bias U(+-1/sqrt(fan_in)), fan_in
 * from weight.shape[1:]); kernel holds k sizes; forward applies padding_mode / padding_same as
 * PyTorch (ts_pad, then the convolution without padding). The Lazy* modules are Python's alone. */
TS_API ts_module *ts_conv1d_new(int64_t in_channels, int64_t out_channels, const int kernel[1],
                                ts_convnd_opts o);
TS_API ts_module *ts_conv3d_new(int64_t in_channels, int64_t out_channels, const int kernel[3],
                                ts_convnd_opts o);
TS_API ts_module *ts_conv_transpose1d_new(int64_t in_channels, int64_t out_channels,
                                          const int kernel[1], ts_convnd_opts o);
TS_API ts_module *ts_conv_transpose2d_new(int64_t in_channels, int64_t out_channels,
                                          const int kernel[2], ts_convnd_opts o);
TS_API ts_module *ts_conv_transpose3d_new(int64_t in_channels, int64_t out_channels,
                                          const int kernel[3], ts_convnd_opts o);

#endif /* TESSERA_CONV_H */
