"""The `out=` keyword of PyTorch's functions (issue 53), one wrapper for all of them: the op runs,
then its result is written into `out` (cast as PyTorch's rule for that op allows), and `out` is
returned. PyTorch's semantics:

* `out` of the wrong shape is resized; one that had elements gets PyTorch's UserWarning, an empty
  one is resized silently. The Tensor object stays the same (Tensor.data's in-place swap).
* dtype, by the op's kind: "cast" ops (elementwise, mean, cat, stack: PyTorch's TensorIterator)
  write into any dtype the result can be cast to (not float -> integer, nor anything -> bool);
  "exact" ops (mm, matmul, bmm, where, argmax, max/min with dim...) need out's dtype to be the
  result's; "dtype" reductions (sum, prod, cumsum, cumprod) compute in out's dtype, as
  `dtype=out.dtype` would.
* no autograd through out=: with grad mode on, an input or `out` that requires grad raises.
* ops returning (values, indices) take a tuple of two tensors and return them as the op's
  named tuple."""
import functools
import warnings

from . import _C

_CAST, _EXACT, _DTYPE = "cast", "exact", "dtype"

# op -> kind (and the message of an exact op's dtype check where PyTorch words it its own way)
_OPS = {
    **{n: _CAST for n in (
        "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
        "floor_divide", "pow", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt",
        "rsqrt", "abs", "neg", "negative", "sigmoid", "tanh", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "floor", "ceil", "round", "trunc", "frac", "sign",
        "reciprocal", "square", "erf", "erfc", "maximum", "minimum", "fmax", "fmin",
        "remainder", "fmod", "atan2", "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "gt",
        "le", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and",
        "bitwise_or", "bitwise_xor", "bitwise_not", "mean", "cat", "concat", "concatenate",
        "stack", "hstack", "vstack", "max", "min")},
    **{n: _EXACT for n in (
        "mm", "matmul", "bmm", "mv", "dot", "addmm", "baddbmm", "addbmm", "outer", "argmax",
        "argmin", "where", "clamp", "clip", "sort", "topk")},
    **{n: _DTYPE for n in ("sum", "prod", "cumsum", "cumprod", "nansum")},
}

# PyTorch's two spellings of a dtype in its messages: ScalarType (Float) and C++ (float)
_SCALAR = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
           "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
           "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64", "bool": "Bool"}
_CPP = {"float32": "float", "float64": "double", "float16": "c10::Half",
        "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int", "int16": "short int",
        "int8": "signed char", "uint8": "unsigned char", "uint16": "uint16_t",
        "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool"}


def _short(dt):
    return repr(dt).rsplit(".", 1)[-1]


def _category(dt):
    """0 bool, 1 integer, 2 floating (PyTorch's can_cast order)"""
    if dt == _C.bool:
        return 0
    return 2 if dt.is_floating_point else 1


def can_cast(from_, to):
    """torch.can_cast: False only where the cast would lose the kind of number (float ->
    integer, a number -> bool)"""
    return _category(from_) <= _category(to)


def _tensors(xs):
    for x in xs:
        if isinstance(x, _C.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from _tensors(x)


def _check_outs(name, out, n):
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != n:
        raise TypeError(f"{name}(): argument 'out' must be a tuple of {n} Tensors"
                        if n > 1 else f"{name}(): argument 'out' must be Tensor, not "
                        f"{type(out).__name__}")
    for o in outs:
        if not isinstance(o, _C.Tensor):
            raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(o).__name__}")
    return outs


def _check_dtype(name, kind, res, o):
    r, d = res.dtype, o.dtype
    if r == d:
        return
    if kind == _CAST or kind == _DTYPE:
        if can_cast(r, d):
            return
        if name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack"):
            raise TypeError(f"torch.{name}(): input types can't be cast to the desired output "
                            f"type {_SCALAR[_short(d)]}")
        raise RuntimeError(f"result type {_SCALAR[_short(r)]} can't be cast to the desired "
                           f"output type {_SCALAR[_short(d)]}")
    if name in ("clamp", "clip"):
        raise RuntimeError(f"Found dtype {_SCALAR[_short(d)]} but expected {_SCALAR[_short(r)]}")
    if name == "where":
        raise RuntimeError(f"Expected out type to be {_SCALAR[_short(r)]} but got "
                           f"{_SCALAR[_short(d)]}")
    raise RuntimeError(f"Expected out tensor to have dtype {_CPP[_short(r)]}, but got "
                       f"{_CPP[_short(d)]} instead")


def _write(res, o):
    """res into o: cast, o resized (in place, the same object) when the shapes differ"""
    if o.device != res.device:
        raise RuntimeError(f"Expected out tensor to have device {res.device}, but got "
                           f"{o.device} instead")
    if tuple(o.shape) != tuple(res.shape):
        if o.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(o.shape)}, which does not match the required output shape "
                f"{list(res.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                "with t.resize_(0).", UserWarning, stacklevel=3)
        o.data = res.to(o.dtype) if res.dtype != o.dtype else res.clone()
    else:
        o.copy_(res)


# name -> (accepts(args, kwargs), op): a second implementation for operands the first refuses with
# TypeError / NotImplementedError (tessera.sparse registers its ops on sparse operands); try/except
# costs nothing on the dense path
FALLBACK = {}


def with_out(name, fn, kind):
    """fn with PyTorch's out= keyword (kind: _CAST, _EXACT or _DTYPE, see the module's doc)"""

    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        if out is None:
            try:
                return fn(*args, **kwargs)
            except (TypeError, NotImplementedError):
                alt = FALLBACK.get(name)
                if alt is None or not alt[0](args, kwargs):
                    raise
            return alt[1](*args, **kwargs)
        from .autograd import no_grad
        if _C.is_grad_enabled():
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values()) +
                                                     list(outs))):
                raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                                   "automatic differentiation, but one of the arguments "
                                   "requires grad.")
        if isinstance(out, _C.Tensor) and (
                kind == _DTYPE or name == "mean" and out.dtype.is_floating_point):
            want = kwargs.get("dtype")
            if want is not None and want != out.dtype:
                raise RuntimeError(f"Expected out tensor to have dtype {_CPP[_short(want)]}, "
                                   f"but got {_CPP[_short(out.dtype)]} instead")
            kwargs["dtype"] = out.dtype
        with no_grad():
            res = fn(*args, **kwargs)
        multi = isinstance(res, tuple)
        results = tuple(res) if multi else (res,)
        outs = _check_outs(name, out, len(results))
        for r, o in zip(results, outs):
            _check_dtype(name, _EXACT if multi else kind, r, o)
        with no_grad():
            for r, o in zip(results, outs):
                _write(r, o)
        if not multi:
            return outs[0]
        try:
            return type(res)(outs)
        except TypeError:
            return outs

    op._ts_out = True
    return op


def install(namespace, aliases=()):
    """wraps each op of _OPS found in namespace (tessera's globals) once; a module of `aliases`
    (tessera.special...) naming the same function gets the wrapper too (expit is sigmoid)"""
    wrapped = {}
    for name, kind in _OPS.items():
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "_ts_out", False):
            namespace[name] = wrapped[id(fn)] = with_out(name, fn, kind)
    for mod in aliases:
        for k, v in list(vars(mod).items()):
            if id(v) in wrapped and v is wrapped[id(v)].__wrapped__:
                setattr(mod, k, wrapped[id(v)])
