"""PyTorch's in-place Tensor methods that the C core has no in-place op for (issue 53): sin_,
atan2_, lerp_, eq_, nan_to_num_, cumsum_... and the out-of-place aliases arccos, greater...

One generic path (python/src/tensor_inplace.c forwards each method here by name):
`x.NAME_(*args)` checks what PyTorch checks before an in-place op (`ts_check_inplace`: a leaf
that requires grad, a view of one, a view made under no_grad or by split; a write through another
view reaches its base's history, PyTorch's CopySlices), computes the out-of-place op `x.NAME(*args)` — on a clone of x when the graph is
recorded, so that what the op saves for backward is not the tensor about to change — and writes
the result back with `copy_`. So autograd is PyTorch's: the version counter goes up once (a tensor
saved for backward by an earlier op then makes that backward raise), the gradient flows through
the op to x's earlier history, views write through to the tensor they view, and the result's
dtype must cast to x's (PyTorch's "result type Float can't be cast to the desired output type
Long"). The grad_fn is CopyBackwards rather than PyTorch's per-op name.
"""
from itertools import chain

from . import _C
from ._C import Tensor

# in-place aliases of in-place methods the C core has
_ALIAS_INPLACE = {"absolute_": "abs_", "negative_": "neg_", "multiply_": "mul_",
                  "subtract_": "sub_", "divide_": "div_", "true_divide_": "div_",
                  "clip_": "clamp_"}
# out-of-place names PyTorch gives to the same op (all but arctan2 are methods through
# tensor_inplace.c; arctan2 is the C core's own)
_ALIAS = {"absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
          "arcsinh": "asinh", "arctan": "atan", "arctanh": "atanh", "arctan2": "atan2",
          "divide": "div", "greater": "gt", "greater_equal": "ge", "less": "lt",
          "less_equal": "le", "not_equal": "ne", "multiply": "mul", "subtract": "sub"}

# every in-place name: the out-of-place Tensor method it writes back (by default name without _)
INPLACE = ("acos_", "acosh_", "addcdiv_", "addcmul_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
           "arctan2_", "arctan_", "arctanh_", "asin_", "asinh_", "atan2_", "atan_", "atanh_",
           "bernoulli_", "bitwise_not_", "ceil_", "clamp_max_", "clamp_min_", "conj_physical_",
           "copysign_", "cos_", "cosh_", "cumprod_", "cumsum_", "deg2rad_", "digamma_", "eq_",
           "erf_", "erfc_", "erfinv_", "exp2_", "expm1_", "fix_", "float_power_", "floor_",
           "floor_divide_", "fmod_", "frac_", "gcd_", "ge_", "greater_", "greater_equal_", "gt_",
           "heaviside_", "hypot_", "i0_", "igamma_", "igammac_", "lcm_", "ldexp_", "le_", "lerp_",
           "less_", "less_equal_", "lgamma_", "log10_", "log1p_", "log2_", "logical_and_",
           "logical_not_", "logical_or_", "logical_xor_", "logit_", "lt_", "mvlgamma_",
           "nan_to_num_", "ne_", "nextafter_", "not_equal_", "polygamma_", "rad2deg_",
           "reciprocal_", "remainder_", "renorm_", "round_", "rsqrt_", "sgn_", "sign_", "sin_",
           "sinc_", "sinh_", "square_", "tan_", "trunc_", "xlogy_", "fill_diagonal_", "random_")


def _renorm(self, p, dim, maxnorm):
    from . import renorm
    return renorm(self, p, dim, maxnorm)


def _bernoulli(self, p=0.5, *, generator=None):
    """draws of probability p (a number or a tensor broadcast to self), in self's dtype"""
    from ._generator import use
    with use(generator, "bernoulli_"):
        return _bernoulli_draw(self, p)


def _bernoulli_draw(self, p):
    from . import bernoulli, full
    if isinstance(p, Tensor):
        probs = p.to(device=self.device, dtype=_C.float64).expand(self.shape).contiguous()
    else:
        probs = full(tuple(self.shape), float(p), dtype=_C.float64, device=self.device)
    return bernoulli(probs)


def _fill_diagonal(self, fill_value, wrap=False):
    """PyTorch's fill_diagonal_: the elements (i, i, ..., i); a 2-D matrix taller than wide with
    wrap=True starts again N + 1 rows down (row-major positions j (N + 1))"""
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and any(d != shape[0] for d in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    numel = self.numel()
    if len(shape) == 2:
        n, m = shape
        step = m + 1
        count = min(n, m) if not (wrap and n > m + 1) else (numel + step - 1) // step
    else:
        step = sum(shape[0] ** k for k in range(len(shape)))
        count = shape[0]
    idx = _C.arange(numel, device=self.device).reshape(shape)
    mask = (idx % step == 0) & (idx < (count - 1) * step + 1) if count > 0 else idx < 0
    return self.masked_fill(mask, fill_value)


def _random(self, *args, generator=None, **kw):
    """random_(from=0, to=None): integers in [from, to - 1]; to None: up to 2^mantissa (floats)
    or the dtype's largest value"""
    from ._generator import use
    with use(generator, "random_"):
        return _random_draw(self, *args, **kw)


def _random_draw(self, *args, **kw):
    names = ("from", "to")
    if len(args) > 2 or any(k not in names for k in kw):
        raise TypeError("random_() takes (from=0, to=None)")
    vals = dict(zip(names, args), **kw)
    lo, hi = vals.get("from", 0), vals.get("to")
    if len(args) == 1 and not kw:  # random_(to)
        lo, hi = 0, args[0]
    if hi is None:
        dt = self.dtype
        bits = {_C.float16: 11, _C.bfloat16: 8, _C.float32: 24, _C.float64: 53}
        if dt in bits:
            hi = 2 ** bits[dt] + 1
        elif dt == _C.bool:
            hi = 2
        else:
            top = {_C.int8: 2 ** 7, _C.int16: 2 ** 15, _C.int32: 2 ** 31, _C.uint8: 2 ** 8,
                   _C.uint16: 2 ** 16, _C.uint32: 2 ** 32}
            hi = top.get(dt, 2 ** 63)
    if hi <= lo:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got from=%d >= "
                           "to=%d" % (lo, hi))
    from . import randint
    return randint(int(lo), int(min(hi, 2 ** 63 - 1)), tuple(self.shape), dtype=_C.int64,
                   device=self.device)


def _out_of_place(name):
    if name == "renorm_":
        return _renorm
    if name == "bernoulli_":
        return _bernoulli
    if name == "fill_diagonal_":
        return _fill_diagonal
    if name == "random_":
        return _random
    base = name[:-1]
    return getattr(Tensor, _ALIAS.get(base, base))


def _shape_str(s):
    return "[" + ", ".join(str(d) for d in s) + "]"


def _python_map(name, self, args, kw):
    """apply_(callable), map_(tensor, callable), map2_(x, y, callable): the callable on each element
    (and the broadcast tensors' elements) in Python, cpu tensors that need no grad only"""
    n_t = {"apply_": 0, "map_": 1, "map2_": 2}[name]
    if len(args) != n_t + 1 or kw:
        raise TypeError(f"{name}() takes {n_t} tensor(s) and a callable")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    others, fn = args[:n_t], args[n_t]
    for o in (self,) + tuple(others):
        if not isinstance(o, Tensor):
            raise TypeError(f"{name}(): expected a Tensor, got {type(o).__name__}")
        if o.device.type != "cpu":
            raise RuntimeError(f"{name} is only implemented on CPU tensors")
    shape = tuple(self.shape)
    cols = [self.reshape(-1).tolist()] + [o.expand(shape).reshape(-1).tolist() for o in others]
    vals = [fn(*e) for e in zip(*cols)]
    self.copy_(_C.tensor(vals, dtype=self.dtype).reshape(shape))
    return self


# in-place draws whose out-of-place op never reads self (so never refuses a complex self itself)
_DRAWS = ("bernoulli_", "random_")


def _apply(name, self, args, kw):
    """self.NAME(*args, **kw), from python/src/tensor_inplace.c"""
    kw = kw or {}
    if name in ("apply_", "map_", "map2_"):
        return _python_map(name, self, args, kw)
    if name in _ALIAS_INPLACE:
        return getattr(self, _ALIAS_INPLACE[name])(*args, **kw)
    if not name.endswith("_"):
        if name == "renorm":
            return _renorm(self, *args, **kw)
        if name == "bernoulli":
            from . import bernoulli
            return bernoulli(self, *args, **kw)
        return getattr(self, _ALIAS[name])(*args, **kw)
    fn = _out_of_place(name)
    operand_grad = any(isinstance(a, Tensor) and a.requires_grad
                       for a in chain(args, kw.values()))
    graph = _C.is_grad_enabled() and (self.requires_grad or operand_grad)
    self._check_inplace(name, operand_grad)
    if name in _DRAWS and self.dtype.is_complex:  # they ignore self's values: no gate of theirs
        kind = "ComplexFloat" if self.dtype == _C.complex64 else "ComplexDouble"
        raise NotImplementedError('"%s" not implemented for \'%s\'' % (name, kind))
    if name == "conj_physical_" and self.dtype.is_complex and not graph:
        self.imag.neg_()  # no graph: the imaginary parts negated where they lie
        return self
    if name == "float_power_" and self.dtype != _C.float64:
        raise RuntimeError("the base given to float_power_ has dtype %s but the operation's "
                           "result requires dtype Double" % _scalar_name(self.dtype))
    res = fn(self.clone() if graph else self, *args, **kw)
    if tuple(res.shape) != tuple(self.shape):
        raise RuntimeError("output with shape %s doesn't match the broadcast shape %s"
                           % (_shape_str(self.shape), _shape_str(res.shape)))
    if name not in ("bernoulli_", "random_"):
        from ._out import can_cast
        if not can_cast(res.dtype, self.dtype):
            raise RuntimeError("result type %s can't be cast to the desired output type %s"
                               % (_scalar_name(res.dtype), _scalar_name(self.dtype)))
    self.copy_(res)
    return self


def _scalar_name(dt):
    from ._out import _SCALAR, _short
    return _SCALAR[_short(dt)]
