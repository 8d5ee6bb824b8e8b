"""The legacy constructors PyTorch programs still use: tessera.FloatTensor, LongTensor... (and
their tessera.cuda forms), autograd.Variable, randint_like.

`tessera.FloatTensor(2, 3)` is an uninitialised float32 tensor of that shape, `FloatTensor([1, 2])`
(or a tuple, a NumPy array) a float32 copy of the data, `FloatTensor()` an empty one,
`FloatTensor(t)` t itself as a new Tensor sharing its memory when t's dtype is float32 (another
dtype raises TypeError, as in PyTorch). `isinstance(x, tessera.FloatTensor)` is true for float32
tensors on the cpu (tessera.cuda.FloatTensor: on cuda), as in PyTorch."""
import numbers

from . import _C

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "Variable",
           "randint_like"]


def _is_size(a):
    return isinstance(a, numbers.Integral) and not isinstance(a, bool)


class _LegacyTensorType(type):
    """The metaclass of the legacy tensor types: calling one makes a tensor, isinstance checks
    the dtype and the device's type."""

    def __instancecheck__(cls, obj):
        return (isinstance(obj, _C.Tensor) and obj.dtype == cls.dtype
                and obj.device.type == cls._device_type)

    def __call__(cls, *args, device=None):
        name = cls.__name__
        if device is None:
            device = cls._device_type
        elif _C.device(device).type != cls._device_type:
            raise RuntimeError("legacy constructor %s expects device type %s, but device type %s "
                               "was passed" % (name, cls._device_type, _C.device(device).type))
        if len(args) == 1 and not _is_size(args[0]) and not isinstance(args[0], _C.Size):
            data = args[0]
            if isinstance(data, _C.Tensor):
                if data.dtype != cls.dtype:
                    raise TypeError("%s(): expected a tensor of dtype %s (got %s)"
                                    % (name, cls.dtype, data.dtype))
                if data.device.type != cls._device_type:
                    raise TypeError("%s(): expected a tensor on device type %s (got %s)"
                                    % (name, cls._device_type, data.device))
                return data.detach()
            if isinstance(data, (str, bytes, numbers.Number)):
                raise TypeError("%s(): data must be a sequence (got %s)"
                                % (name, type(data).__name__))
            return _C.tensor(data, dtype=cls.dtype, device=device)
        if len(args) == 1 and isinstance(args[0], _C.Size):
            args = tuple(args[0])
        for a in args:
            if not _is_size(a):
                raise TypeError("%s(): sizes must be ints, not %s" % (name, type(a).__name__))
        if not args:
            args = (0,)
        return _C.empty(*args, dtype=cls.dtype, device=device)

    def __repr__(cls):
        return "<class '%s'>" % cls._qualname


def _legacy_types(device_type, prefix):
    made = {}
    for name, dtype in (("FloatTensor", _C.float32), ("DoubleTensor", _C.float64),
                        ("HalfTensor", _C.float16), ("BFloat16Tensor", _C.bfloat16),
                        ("LongTensor", _C.int64), ("IntTensor", _C.int32),
                        ("ShortTensor", _C.int16), ("CharTensor", _C.int8),
                        ("ByteTensor", _C.uint8), ("BoolTensor", _C.bool)):
        made[name] = _LegacyTensorType(name, (), {
            "dtype": dtype, "_device_type": device_type, "_qualname": prefix + name,
            "__doc__": "%s(*sizes) / %s(data): a %s tensor on %s (PyTorch's legacy constructor)"
                       % (name, name, dtype, device_type)})
    return made


_cpu_types = _legacy_types("cpu", "tessera.")
FloatTensor, DoubleTensor = _cpu_types["FloatTensor"], _cpu_types["DoubleTensor"]
HalfTensor, BFloat16Tensor = _cpu_types["HalfTensor"], _cpu_types["BFloat16Tensor"]
LongTensor, IntTensor = _cpu_types["LongTensor"], _cpu_types["IntTensor"]
ShortTensor, CharTensor = _cpu_types["ShortTensor"], _cpu_types["CharTensor"]
ByteTensor, BoolTensor = _cpu_types["ByteTensor"], _cpu_types["BoolTensor"]
cuda_types = _legacy_types("cuda", "tessera.cuda.")  # tessera.cuda's, made on cuda


class _VariableType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor)


class Variable(metaclass=_VariableType):
    """torch.autograd.Variable(data, requires_grad=False): a new Tensor sharing data's memory,
    detached from its graph, with requires_grad as asked (Variables and Tensors are one thing
    since PyTorch 0.4: isinstance(any_tensor, Variable) is true). volatile= is accepted and
    ignored, as PyTorch does."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, _C.Tensor):
            raise TypeError("Variable data has to be a tensor, but got %s" % type(data).__name__)
        v = data.detach()
        if requires_grad:
            v.requires_grad_(True)
        return v


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False,
                 memory_format=None, layout=None, pin_memory=False):
    """randint_like(input, high) / randint_like(input, low, high): integers in [low, high) with
    input's shape, and its dtype and device unless given"""
    if high is None:
        low, high = 0, low
    if not isinstance(input, _C.Tensor):
        raise TypeError("randint_like(): argument 'input' must be Tensor, not %s"
                        % type(input).__name__)
    return _C.randint(low, high, tuple(input.shape),
                      dtype=input.dtype if dtype is None else dtype,
                      device=input.device if device is None else device,
                      requires_grad=requires_grad)
