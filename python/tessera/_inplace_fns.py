"""PyTorch's module-level in-place functions (torch.sin_(x), torch.relu_(x), torch.zero_(x)...),
issue 53: tutorials call them this way. Each calls the Tensor method of the same name where the
Tensor has it; otherwise it computes the out-of-place function and copies the result back into
`input` (cast under PyTorch's rule for in-place results), which has no gradient: with grad mode
on, an input that requires grad raises instead of giving a wrong gradient."""
from . import _C

_NAMES = ("abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
          "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
          "clamp_min_", "clip_", "conj_physical_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_",
          "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
          "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
          "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_",
          "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
          "trunc_", "xlogy_", "zero_")


def _make(name):
    method = getattr(_C.Tensor, name)

    def fn(input, *args, **kwargs):
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not "
                            f"{type(input).__name__}")
        return method(input, *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"tessera.{name}(input, ...): input.{name}(...) (in place)"
    return fn


def _make_copying(name, outofplace):
    def fn(input, *args, **kwargs):
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not "
                            f"{type(input).__name__}")
        if _C.is_grad_enabled() and input.requires_grad:
            raise RuntimeError(f"tessera.{name}: not supported on a tensor that requires grad "
                               f"(write input = input.{name[:-1]}() instead)")
        from ._out import can_cast, _SCALAR, _short
        from .autograd import no_grad
        with no_grad():
            res = outofplace(input, *args, **kwargs)
            if not can_cast(res.dtype, input.dtype):
                raise RuntimeError(f"result type {_SCALAR[_short(res.dtype)]} can't be cast to "
                                   f"the desired output type {_SCALAR[_short(input.dtype)]}")
            input.copy_(res)
        return input

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"tessera.{name}(input, ...): input = {name[:-1]}(input, ...), in place"
    return fn


def install(namespace):
    """adds each name namespace lacks: the Tensor method, or the out-of-place function copied
    back"""
    for name in _NAMES:
        if name in namespace:
            continue
        if hasattr(_C.Tensor, name):
            namespace[name] = _make(name)
        elif callable(namespace.get(name[:-1])):
            namespace[name] = _make_copying(name, namespace[name[:-1]])
