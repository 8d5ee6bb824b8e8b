"""torch.finfo / torch.iinfo for Tessera's dtypes (and finfo for the float8 names), and the
float8 / float4 dtype names: attributes that exist so that code naming them imports, but Tessera has
no float8 storage, so a tensor made or cast with one raises TypeError "... is not supported by
Tessera yet" (tsp_dtype_arg in python/src/dtype_device.c)."""
import math

from . import _C

# name: (mantissa bits, exponent bits) of the IEEE-like formats (max = (2 - 2^-m) 2^emax,
# tiny = 2^(1 - emax)); the float8 variants without infinities have their own max / tiny
_IEEE = {"float16": (10, 5), "bfloat16": (7, 8), "float32": (23, 8), "float64": (52, 11)}
# float8 formats: bits, eps, max, min, tiny (= smallest_normal), resolution (PyTorch's values)
_FLOAT8 = {
    "float8_e4m3fn": (0.125, 448.0, -448.0, 2.0 ** -6),
    "float8_e5m2": (0.25, 57344.0, -57344.0, 2.0 ** -14),
    "float8_e4m3fnuz": (0.125, 240.0, -240.0, 2.0 ** -7),
    "float8_e5m2fnuz": (0.25, 57344.0, -57344.0, 2.0 ** -15),
    "float8_e8m0fnu": (1.0, 2.0 ** 127, 2.0 ** -127, 2.0 ** -127),
}
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
             "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


class unsupported_dtype:
    """a PyTorch dtype name Tessera has no tensors for (float8_e4m3fn...): it exists and compares
    by identity, finfo answers for it, and any tensor creation or cast with it raises TypeError"""
    __slots__ = ("_name", "itemsize", "is_floating_point", "is_complex", "is_signed")

    def __init__(self, name, itemsize, is_floating_point=True):
        self._name, self.itemsize = name, itemsize
        self.is_floating_point, self.is_complex, self.is_signed = is_floating_point, False, True

    @property
    def _ts_unsupported(self):
        return self._name + " is not supported by Tessera yet (no float8/float4 storage)"

    def to_real(self):
        return self

    def __repr__(self):
        return "tessera." + self._name

    def __reduce__(self):
        return (getattr, (_C, self._name)) if hasattr(_C, self._name) else (
            _unsupported, (self._name,))


def _unsupported(name):
    return UNSUPPORTED[name]


UNSUPPORTED = {n: unsupported_dtype(n, 1) for n in _FLOAT8}
UNSUPPORTED["float4_e2m1fn_x2"] = unsupported_dtype("float4_e2m1fn_x2", 1)


def _name(dt):
    if isinstance(dt, unsupported_dtype):
        return dt._name
    if not isinstance(dt, _C.dtype):
        raise TypeError("expected a tessera.dtype, got %s" % type(dt).__name__)
    return repr(dt).rpartition(".")[2]


class finfo:
    """torch.finfo(dtype=None): bits, eps, max, min, tiny, smallest_normal, resolution, dtype of a
    floating dtype (the default dtype when none is given)"""
    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):  # noqa: A002
        if type is None:
            type = _C.get_default_dtype()
        n = _name(type)
        if n in _IEEE:
            m, e = _IEEE[n]
            emax = 2 ** (e - 1) - 1
            self.bits = 1 + m + e
            self.eps = 2.0 ** -m
            self.max = (2.0 - 2.0 ** -m) * 2.0 ** emax
            self.min = -self.max
            self.tiny = 2.0 ** (1 - emax)
            digits10 = math.floor(m * math.log10(2))
        elif n in _FLOAT8:
            self.bits = 8
            self.eps, self.max, self.min, self.tiny = _FLOAT8[n]
            digits10 = 0
        else:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo "
                            "to handle 'torch.finfo'")
        self.smallest_normal = self.tiny
        self.resolution = 10.0 ** -digits10
        self.dtype = n

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return ("finfo(resolution=%g, min=%g, max=%g, eps=%g, smallest_normal=%g, tiny=%g, "
                "dtype=%s)" % (self.resolution, self.min, self.max, self.eps,
                               self.smallest_normal, self.tiny, self.dtype))


class iinfo:
    """torch.iinfo(dtype): bits, min, max, dtype of an integer dtype"""
    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type):  # noqa: A002
        n = _name(type)
        if n == "bool":
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if n not in _INT_BITS:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        b = self.bits = _INT_BITS[n]
        if n.startswith("u"):
            self.min, self.max = 0, (1 << b) - 1
        else:
            self.min, self.max = -(1 << (b - 1)), (1 << (b - 1)) - 1
        self.dtype = n

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return "iinfo(min=%g, max=%g, dtype=%s)" % (self.min, self.max, self.dtype)


def install(g):
    """adds finfo, iinfo and the float8 / float4 names to tessera's namespace g (names the C
    module already has are kept)"""
    g["finfo"], g["iinfo"] = finfo, iinfo
    for n, dt in UNSUPPORTED.items():
        g.setdefault(n, dt)
