"""tessera.nn.functional's rrelu and the alpha and feature dropouts (alpha_dropout,
feature_alpha_dropout, dropout1d/2d/3d): PyTorch's definitions over Tessera's C ops (issue 52)."""
import math
import warnings

from .. import _C

_SELU_ALPHA = 1.7580993408473766  # -selu's alpha * scale: the value alpha dropout drops to


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """x > 0: x; else a * x with a ~ U(lower, upper) per element in training, (lower + upper) / 2
    in evaluation (ts_rrelu, src/nn/rrelu.c)"""
    return _C._nn_rrelu(input, float(lower), float(upper), bool(training), bool(inplace))


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_impl(input, p, training, inplace, feature, alpha):
    """ATen's _dropout_impl: a Bernoulli(1 - p) mask (one per channel when feature), scaled by
    1 / (1 - p); alpha: the SELU-preserving affine form of alpha dropout"""
    _check_p(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        y = input * 0.0
    else:
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else \
            tuple(input.shape)
        if feature and input.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        noise = _C.bernoulli(_C.full(shape, 1.0 - p, dtype=input.dtype, device=input.device))
        if alpha:
            a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
            b = (noise - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
            y = input * (noise * a) + b
        else:
            y = input * (noise / (1.0 - p))
    if inplace:
        input.copy_(y)
        return input
    return y


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, True, True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """channel-wise dropout of [N, C, L] or the unbatched [C, L]"""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    # ts_feature_dropout (src/nn/feature_dropout.c): the unbatched [C, L] draws one mask of [C, 1]
    return _C._nn_feature_dropout(input, float(p), bool(training), input.ndim == 2, bool(inplace))


def dropout2d(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).")
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise"
                      " 1D dropout behavior is desired - input is interpreted as shape (N, C, L)"
                      ", where C is the channel dim. This behavior will change in a future "
                      "release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.")
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).")
    # ts_feature_dropout (src/nn/feature_dropout.c): all but a 5-D input are unbatched, as PyTorch
    return _C._nn_feature_dropout(input, float(p), bool(training), input.ndim != 5, bool(inplace))
