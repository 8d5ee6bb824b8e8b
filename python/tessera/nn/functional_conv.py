"""tessera.nn.functional's convolutions beyond conv2d (conv1d, conv3d, conv_transpose1d/2d/3d),
unfold / fold (im2col / col2im) and channel_shuffle under PyTorch's names and argument forms; each
convolution is one C call (include/tessera/conv.h, python/src/nn_conv.c)."""
import numbers

from .. import _C


def _ntuple(v, k, name, fn):
    if isinstance(v, numbers.Integral):
        return (int(v),) * k
    try:
        t = tuple(int(x) for x in v)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of {k} ints, "
                        f"not {type(v).__name__}") from None
    if len(t) == 1:
        return t * k
    if len(t) != k:
        raise ValueError(f"{fn}(): argument '{name}' must have {k} elements, got {len(t)}")
    return t


def _three(t):
    return tuple(t) + (0,) * (3 - len(t))


def _convnd(k, input, weight, bias, stride, padding, dilation, groups, fn):
    """conv1d / conv2d / conv3d in one C call (ts_conv_padded): padding='same' resolved there,
    the extra element of an uneven total after (bottom / right), as PyTorch"""
    stride = _ntuple(stride, k, "stride", fn)
    dilation = _ntuple(dilation, k, "dilation", fn)
    same = False
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string '{padding}', should be one of "
                             "{'valid', 'same'}")
        same = padding == "same"
        padding = (0,) * k
    else:
        padding = _ntuple(padding, k, "padding", fn)
    return _C._nn_conv_padded(k, input, weight, bias, _three(stride), _three(padding),
                              _three(dilation), int(groups), None, same)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(1, input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(2, input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(3, input, weight, bias, stride, padding, dilation, groups, "conv3d")


def _conv_transposend(k, input, weight, bias, stride, padding, output_padding, groups, dilation,
                      fn):
    if isinstance(padding, str):
        raise ValueError(f"{fn}(): padding must be an int or a tuple of ints, not a string")
    args = [_three(_ntuple(v, k, name, fn)) for v, name in
            ((stride, "stride"), (padding, "padding"), (dilation, "dilation"),
             (output_padding, "output_padding"))]
    return _C._nn_convnd(True, k, input, weight, bias, *args, int(groups))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transposend(1, input, weight, bias, stride, padding, output_padding, groups,
                             dilation, "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transposend(2, input, weight, bias, stride, padding, output_padding, groups,
                             dilation, "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transposend(3, input, weight, bias, stride, padding, output_padding, groups,
                             dilation, "conv_transpose3d")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    fn = "unfold"
    return _C._nn_im2col(input, _ntuple(kernel_size, 2, "kernel_size", fn),
                         _ntuple(dilation, 2, "dilation", fn), _ntuple(padding, 2, "padding", fn),
                         _ntuple(stride, 2, "stride", fn))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    fn = "fold"
    return _C._nn_col2im(input, _ntuple(output_size, 2, "output_size", fn),
                         _ntuple(kernel_size, 2, "kernel_size", fn),
                         _ntuple(dilation, 2, "dilation", fn), _ntuple(padding, 2, "padding", fn),
                         _ntuple(stride, 2, "stride", fn))


def channel_shuffle(input, groups):
    """[N, C, *] -> channels regrouped: view [N, g, C/g, *], swap the two, flatten back
    (ts_channel_shuffle, src/nn/channel_shuffle.c)"""
    return _C._nn_channel_shuffle(input, int(groups))
