"""torch.fake_quantize_per_tensor_affine / fake_quantize_per_channel_affine (quantization-aware
training): the C ops ts_fake_quantize_* (include/tessera/quant.h), their gradient the
straight-through estimator. A scale or zero point given as a one-element tensor (FakeQuantize's
buffers, PyTorch's tensor_qparams overload) is read as a number."""
from . import _C

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
           "fake_quantize_per_tensor_affine_cachemask", "fake_quantize_per_channel_affine_cachemask"]


def _number(v, cast):
    if isinstance(v, _C.Tensor):
        if v.numel() != 1:
            raise RuntimeError("fake_quantize_per_tensor_affine: scale and zero_point must have "
                               f"one element (got {tuple(v.shape)})")
        return cast(v.reshape(-1)[0].item())
    return cast(v)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """(clamp(round(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale in
    PyTorch's float32 arithmetic; the gradient passes where the rounded value is in range"""
    return _C._fake_quantize_per_tensor_affine(input, _number(scale, float),
                                               _number(zero_point, int), quant_min, quant_max)


def fake_quantize_per_tensor_affine_cachemask(input, scale, zero_point, quant_min, quant_max):
    """(output, mask): the mask (bool) where the rounded value lies in [quant_min, quant_max]"""
    return _C._fake_quantize_per_tensor_affine(input, _number(scale, float),
                                               _number(zero_point, int), quant_min, quant_max,
                                               cachemask=True)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """one (scale, zero_point) per index along axis: scale a 1-D float tensor, zero_point a 1-D
    integer tensor"""
    return _C._fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min,
                                                quant_max)


def fake_quantize_per_channel_affine_cachemask(input, scale, zero_point, axis, quant_min,
                                               quant_max):
    return _C._fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min,
                                                quant_max, cachemask=True)
