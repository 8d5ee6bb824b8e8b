"""tessera.nn.utils.fusion — torch.nn.utils.fusion: fold an eval-mode BatchNorm into the
convolution or linear layer before it (new modules / parameters; the originals are untouched).
PyTorch's arithmetic, in C (ts_fuse_conv_bn_weights, the eval path's fold): w' = w * s per output
channel, b' = (b - mean) * s + beta, s = gamma / sqrt(var + eps), in float64 rounded once to the
layer's dtypes.
(At eval time Tessera's Sequential folds conv + bn by itself, docs/decisions/0005; these are for
code that rewrites its model explicitly, as timm's and torch.ao's fusers do.)"""
import copy

import tessera as _t

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """a copy of conv whose weight and bias include bn (both in eval mode)"""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the convolution with the batch norm folded in
    (ts_fuse_conv_bn_weights)"""
    w, b = _t._C._nn_fuse_bn_weights(0, conv_w, conv_b, bn_rm, bn_rv, float(bn_eps), bn_w, bn_b,
                                     transpose)
    b_grad = conv_b is not None and conv_b.requires_grad  # torch: zeros_like(bn_rm)
    return _t.nn.Parameter(w, conv_w.requires_grad), _t.nn.Parameter(b, b_grad)


def fuse_linear_bn_eval(linear, bn):
    """a copy of linear whose weight and bias include bn (both in eval mode; bn.num_features is
    linear.out_features or 1)"""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            "linear.out_features=%d and bn.num_features=%d" % (linear.out_features,
                                                                bn.num_features))
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer with the batch norm folded in
    (ts_fuse_linear_bn_weights)"""
    w, b = _t._C._nn_fuse_bn_weights(1, linear_w, linear_b, bn_rm, bn_rv, float(bn_eps), bn_w,
                                     bn_b, False)
    b_grad = linear_b is not None and linear_b.requires_grad
    return _t.nn.Parameter(w, linear_w.requires_grad), _t.nn.Parameter(b, b_grad)
