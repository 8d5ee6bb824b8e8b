"""tessera.serialization — tessera.save / tessera.load in PyTorch's own checkpoint format.

The format is the zip archive `torch.save` has written since PyTorch 1.6:

    <archive>/data.pkl                 pickle (protocol 2) of the object; each tensor is
                                       torch._utils._rebuild_tensor_v2(storage, offset, size,
                                       stride, requires_grad, backward_hooks), its storage a
                                       persistent id ('storage', torch.FloatStorage, key,
                                       location, numel)
    <archive>/data/<key>               the storage's raw little-endian bytes (zip STORED, 64-byte
                                       aligned)
    <archive>/.format_version, .storage_alignment, byteorder, version, .data/serialization_id

A meta tensor has no data and no storage record: it is written as PyTorch writes it,
torch._utils._rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad), and loads as a
meta tensor of that size and stride whatever map_location says (PyTorch's behaviour both ways).

Loading is safe by default (`weights_only=True`, PyTorch 2.6+'s default): the unpickler resolves
only PyTorch's allow-list of globals (tensor rebuilders, storages, dtypes, Size, device,
OrderedDict, Counter, set, bytearray, complex, _codecs.encode) and what `add_safe_globals` adds;
anything else (os.system, an arbitrary class) raises pickle.UnpicklingError before it runs.
Every size in a file is checked against the bytes the file holds before memory is taken.

Pure Python (zipfile, pickle); NumPy carries the loaded bytes into tensors (tessera.from_numpy),
so two tensors that view one storage share their memory after loading, as in PyTorch.
"""
import collections
import contextlib
import ctypes
import io
import os
import pickle
import random
import struct
import sys
import tempfile
import zipfile
import zlib
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING

from . import _C

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2
_ALIGNMENT = 64
_CHUNK = 1 << 24
_MAX_DIMS = 8  # TS_MAX_DIMS
_MAX_BYTES = 1 << 62
# deflate cannot expand data more than ~1032x: a larger claim is a zip bomb or a lie
_MAX_DEFLATE_RATIO = 1100

# Tessera dtype name -> (PyTorch storage class name or None for an untyped storage, NumPy code)
_DTYPES = {
    "float32": ("FloatStorage", "f4"),
    "float64": ("DoubleStorage", "f8"),
    "float16": ("HalfStorage", "f2"),
    "bfloat16": ("BFloat16Storage", "u2"),  # bits; widened to float32 then narrowed exactly
    "int64": ("LongStorage", "i8"),
    "int32": ("IntStorage", "i4"),
    "int16": ("ShortStorage", "i2"),
    "int8": ("CharStorage", "i1"),
    "uint8": ("ByteStorage", "u1"),
    "bool": ("BoolStorage", "?"),
    "uint16": (None, "u2"),
    "uint32": (None, "u4"),
    "uint64": (None, "u8"),
}
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "uint16": 2, "uint32": 4, "uint64": 8}
# PyTorch dtypes and storages Tessera has no tensors for: loadable as names, refused as tensors
_FOREIGN_DTYPES = {"complex32": 4, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
                   "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
                   "float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1, "qint8": 1, "quint8": 1,
                   "qint32": 4, "quint4x2": 1, "quint2x4": 1, "bits1x8": 1, "bits2x4": 1,
                   "bits4x2": 1, "bits8": 1, "bits16": 2,
                   **{"uint%d" % i: 1 for i in range(1, 8)},
                   **{"int%d" % i: 1 for i in range(1, 8)}}
_FOREIGN_STORAGES = {"ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
                     "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
                     "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4"}
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                  "int": "int32", "short": "int16"}


def _dtype_name(dt):
    return str(dt).rsplit(".", 1)[-1]


def _np():
    try:
        import numpy
    except ImportError:  # pragma: no cover - NumPy is part of every Tessera install we test
        raise ImportError("tessera.load: loading tensors from a PyTorch checkpoint needs NumPy "
                          "(pip install numpy)") from None
    return numpy


# ==================================================================== safe globals (allow-list)

_BLOCKED_MODULES = ("sys", "os", "posix", "nt", "subprocess", "builtins.eval", "builtins.exec")
_user_safe = {}


def _norm_name(full):
    # numpy 2 moved numpy.core to numpy._core; one name for both
    return full.replace("numpy._core.", "numpy.core.")


def _qualified(obj):
    return "%s.%s" % (obj.__module__, obj.__qualname__)


def add_safe_globals(safe_globals):
    """torch.serialization.add_safe_globals: trust these classes / functions (or (obj, "full.name")
    pairs) when loading with weights_only=True."""
    for g in safe_globals:
        if isinstance(g, tuple):
            if len(g) != 2 or not isinstance(g[1], str):
                raise TypeError("add_safe_globals(): expected (global, 'full.name') pairs")
            _user_safe[_norm_name(g[1])] = g[0]
        else:
            _user_safe[_norm_name(_qualified(g))] = g


def get_safe_globals():
    return list(_user_safe.values())


def clear_safe_globals():
    _user_safe.clear()


@contextlib.contextmanager
def safe_globals(globals_):
    """with tessera.serialization.safe_globals([...]): trusted only inside the block"""
    before = dict(_user_safe)
    add_safe_globals(globals_)
    try:
        yield
    finally:
        _user_safe.clear()
        _user_safe.update(before)


# ==================================================================== load: storages and rebuilders

class _StorageType:
    """Stands for torch.FloatStorage & co. (and torch.UntypedStorage: dtype uint8)."""

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype

    def __repr__(self):
        return "torch." + self.name


class _Dtype:
    """A PyTorch dtype Tessera has no tensors for (complex64, float8...): it loads as a value."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


class _Storage:
    """A loaded storage: its raw bytes (writable, shared by every tensor that views it), its dtype
    and where its tensors go. map_location callables receive it as PyTorch's storage."""

    def __init__(self, raw, dtype, location, byteorder):
        self._raw, self.dtype, self._loc, self._byteorder = raw, dtype, location, byteorder
        self.device = location
        self._arrays = {}

    def nbytes(self):
        return len(self._raw)

    def size(self):
        return len(self._raw) // _ITEMSIZE.get(self.dtype, 1)

    __len__ = size

    # the storage methods map_location callables use
    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = "cuda:%d" % device
        return self.to(device)

    def to(self, device, non_blocking=False):
        s = _Storage(self._raw, self.dtype, self._loc, self._byteorder)
        s._arrays = self._arrays
        s.device = _device_str(device)
        return s

    def __repr__(self):
        return "<storage of %d bytes (%s) on %s>" % (len(self._raw), self.dtype, self.device)

    def array(self, code):
        """the bytes as a 1-D NumPy array of `code` elements (memory shared, cached per code)"""
        a = self._arrays.get(code)
        if a is None:
            np = _np()
            dt = np.dtype(code).newbyteorder("<" if self._byteorder == "little" else ">")
            n = len(self._raw) // dt.itemsize
            a = np.frombuffer(self._raw, dtype=dt, count=n)
            if dt.byteorder not in ("=", "|") and dt.byteorder != ("<" if sys.byteorder ==
                                                                  "little" else ">"):
                a = a.astype(dt.newbyteorder("="))  # a checkpoint of the other byte order
            if code == "?":
                u8 = np.frombuffer(self._raw, dtype=np.uint8, count=n)
                if (u8 > 1).any():  # a bool is 0 or 1: other bytes would read as wrong numbers
                    a = u8 != 0
            self._arrays[code] = a
        return a


def _check_ints(what, xs):
    if not isinstance(xs, (tuple, list)) or not all(isinstance(v, int) and not
                                                    isinstance(v, bool) for v in xs):
        raise pickle.UnpicklingError("tensor %s must be a tuple of ints, not %r" % (what, xs))
    return tuple(xs)


def _build_tensor(storage, offset, size, stride, dtype, requires_grad=False):
    """The tensor of `storage` at (offset, size, stride) in elements of `dtype`, each bound
    checked against the bytes the storage holds."""
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor's storage must come from the archive, not %r"
                                     % type(storage).__name__)
    if dtype in _FOREIGN_DTYPES or dtype not in _DTYPES:
        raise _C.UnsupportedError("tessera.load: the checkpoint holds a torch.%s tensor; Tessera "
                                  "has no %s dtype" % (dtype, dtype))
    size, stride = _check_ints("size", size), _check_ints("stride", stride)
    if not isinstance(offset, int) or offset < 0:
        raise pickle.UnpicklingError("tensor storage offset must be an int >= 0, not %r" % offset)
    if len(size) != len(stride):
        raise pickle.UnpicklingError("tensor size %s and stride %s differ in length"
                                     % (size, stride))
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError("tensor size %s / stride %s has a negative entry"
                                     % (size, stride))
    if len(size) > _MAX_DIMS:
        raise _C.UnsupportedError("tessera.load: a tensor of %d dimensions; Tessera has at most "
                                  "%d" % (len(size), _MAX_DIMS))
    numel = 1
    for s in size:
        numel *= s
    if numel * _ITEMSIZE[dtype] >= _MAX_BYTES or offset >= _MAX_BYTES or any(
            v >= _MAX_BYTES for v in stride + size):
        raise _C.FormatError("tessera.load: a tensor of size %s, stride %s at offset %d is "
                             "larger than any memory" % (list(size), list(stride), offset))
    tdtype = getattr(_C, dtype)
    if numel == 0:
        t = _C.empty(size, dtype=tdtype)
    else:
        itemsize = _ITEMSIZE[dtype]
        last = offset + sum((n - 1) * st for n, st in zip(size, stride))
        have = storage.nbytes() // itemsize
        if last >= have:
            raise _C.FormatError(
                "tessera.load: a tensor of size %s, stride %s at offset %d needs %d elements of "
                "%s, but its storage holds %d" % (list(size), list(stride), offset, last + 1,
                                                  dtype, have))
        np = _np()
        code = _DTYPES[dtype][1]
        base = storage.array(code)
        view = np.lib.stride_tricks.as_strided(base[offset:], shape=size,
                                               strides=[st * base.itemsize for st in stride])
        if dtype == "bfloat16":  # no NumPy bf16: the bits widened to float32 are exact
            wide = (view.astype(np.uint32).reshape(-1) << 16).view(np.float32)
            t = _C.from_numpy(wide.reshape(size)).to(_C.bfloat16)
        else:
            t = _C.from_numpy(view)
    device = storage.device
    if device is not None and str(device) != "cpu":
        t = t.to(_C.device(device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _storage_dtype(storage):
    if not isinstance(storage, _Storage):
        raise pickle.UnpicklingError("a tensor's storage must come from the archive, not %r"
                                     % type(storage).__name__)
    return storage.dtype


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _build_tensor(storage, storage_offset, size, stride, _storage_dtype(storage))


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    return _build_tensor(storage, storage_offset, size, stride, _storage_dtype(storage),
                         bool(requires_grad))


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    name = dtype.name if isinstance(dtype, _Dtype) else _dtype_name(dtype)
    return _build_tensor(storage, storage_offset, size, stride, name, bool(requires_grad))


_QUANT_PLAIN = {"qint8": "int8", "quint8": "uint8", "qint32": "int32"}
_QUANT_STORAGE = {"qint8": "QInt8Storage", "quint8": "QUInt8Storage", "qint32": "QInt32Storage"}


def _rebuild_qtensor(storage, storage_offset, size, stride, quantizer_params, requires_grad=False,
                     backward_hooks=None):
    """PyTorch's quantized tensor: its integers (a QInt8 / QUInt8 / QInt32 storage) and
    quantizer_params (per_tensor_affine, scale, zero_point) or (per_channel_affine, scales,
    zero_points, axis), made with _C._make_per_tensor / _per_channel_quantized_tensor."""
    dtype = _storage_dtype(storage)
    if dtype not in _QUANT_PLAIN:
        raise _C.UnsupportedError("tessera.load: a quantized tensor of %s storage is not "
                                  "supported (qint8, quint8, qint32)" % dtype)
    ints = _build_tensor(storage, storage_offset, size, stride, _QUANT_PLAIN[dtype])
    if not isinstance(quantizer_params, tuple) or not quantizer_params:
        raise pickle.UnpicklingError("malformed quantizer_params %r" % (quantizer_params,))
    scheme = getattr(quantizer_params[0], "name", None)
    if scheme == "per_tensor_affine" and len(quantizer_params) == 3:
        return _C._make_per_tensor_quantized_tensor(ints, float(quantizer_params[1]),
                                                    int(quantizer_params[2]))
    if scheme in ("per_channel_affine", "per_channel_symmetric") and len(quantizer_params) == 4:
        return _C._make_per_channel_quantized_tensor(ints, quantizer_params[1],
                                                     quantizer_params[2], int(quantizer_params[3]))
    raise _C.UnsupportedError("tessera.load: quantized tensors of scheme %s are not supported "
                              "(per_tensor_affine, per_channel_affine)" % scheme)


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad=False):
    """a meta tensor (no storage in the file: PyTorch writes none for a meta tensor); it stays on
    meta whatever map_location says, as in PyTorch"""
    name = dtype.name if isinstance(dtype, _Dtype) else _dtype_name(dtype)
    if name in _FOREIGN_DTYPES or name not in _DTYPES:
        raise _C.UnsupportedError("tessera.load: the checkpoint holds a torch.%s tensor; Tessera "
                                  "has no %s dtype" % (name, name))
    size, stride = _check_ints("size", size), _check_ints("stride", stride)
    if len(size) != len(stride):
        raise pickle.UnpicklingError("tensor size %s and stride %s differ in length"
                                     % (size, stride))
    if any(v < 0 for v in size + stride):
        raise pickle.UnpicklingError("tensor size %s / stride %s has a negative entry"
                                     % (size, stride))
    if len(size) > _MAX_DIMS:
        raise _C.UnsupportedError("tessera.load: a tensor of %d dimensions; Tessera has at most "
                                  "%d" % (len(size), _MAX_DIMS))
    if any(v >= _MAX_BYTES for v in size + stride):
        raise _C.FormatError("tessera.load: a meta tensor of size %s, stride %s is larger than "
                             "any memory" % (list(size), list(stride)))
    return _C._rebuild_meta_tensor(_C.Tensor, name, size, stride, bool(requires_grad), None)


def _parameter(data, requires_grad=True):
    from .nn.parameter import Parameter
    if not isinstance(data, _C.Tensor):
        raise pickle.UnpicklingError("Parameter data must be a tensor, not %r"
                                     % type(data).__name__)
    return Parameter(data, bool(requires_grad))


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return _parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    p = _parameter(data, requires_grad)
    _set_state(p, state)
    return p


def _set_state(obj, state):
    if not state:
        return obj
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for d in (state, slots):
        if d:
            if not isinstance(d, dict):
                raise pickle.UnpicklingError("tensor state must be a dict, not %r"
                                             % type(d).__name__)
            for k, v in d.items():
                setattr(obj, k, v)
    return obj


def _rebuild_from_type_v2(func, new_type, args, state):
    ret = func(*args)
    return _set_state(ret, state)


def _rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad):
    t = data.to(_C.device(str(device))) if str(device) != "cpu" else data
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_device_tensor_from_numpy(data, dtype, device, requires_grad):
    t = _C.from_numpy(data.copy())
    return _rebuild_device_tensor_from_cpu_tensor(t, dtype, device, requires_grad)


def _unsupported(kind):
    def refuse(*args, **kwargs):
        raise _C.UnsupportedError("tessera.load: the checkpoint holds a %s, which Tessera does "
                                  "not have" % kind)
    refuse.__name__ = "_rebuild_" + kind.replace(" ", "_")
    return refuse


def _get_layout(name):
    if name != "torch.strided":
        raise _C.UnsupportedError("tessera.load: layout %s is not supported (only strided)"
                                  % name)
    return name


def _bytearray(*args):
    """bytearray of bytes / str only: bytearray(2**40) from a file would take a terabyte"""
    if args and not isinstance(args[0], (bytes, bytearray, str, list)):
        raise pickle.UnpicklingError("bytearray() of %s is refused" % type(args[0]).__name__)
    return bytearray(*args)


def _legacy_tensor(*args):
    raise _C.UnsupportedError("tessera.load: torch.Tensor() built by the pickle (PyTorch's "
                              "legacy tensor pickling) is not supported")


def _size(*args):
    return _C.Size(*args)


def _device(*args):
    return _C.device(*args)


def _allowed():
    """PyTorch's weights_only allow-list, each name bound to Tessera's counterpart"""
    from .nn.parameter import Parameter
    rc = {
        "collections.OrderedDict": collections.OrderedDict,
        "collections.Counter": collections.Counter,
        "torch.nn.parameter.Parameter": Parameter,
        "torch.serialization._get_layout": _get_layout,
        "torch.Size": _size,
        "torch.Tensor": _legacy_tensor,
        "torch.device": _device,
        "_codecs.encode": _codecs_encode,
        "builtins.bytearray": _bytearray,
        "builtins.set": set,
        "builtins.complex": complex,
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._utils._rebuild_device_tensor_from_cpu_tensor":
            _rebuild_device_tensor_from_cpu_tensor,
        "torch._utils._rebuild_device_tensor_from_numpy": _rebuild_device_tensor_from_numpy,
        "torch._utils._rebuild_qtensor": _rebuild_qtensor,
        "torch._utils._rebuild_sparse_tensor": _unsupported("sparse tensor"),
        "torch._utils._rebuild_meta_tensor_no_storage": _rebuild_meta_tensor_no_storage,
        "torch._utils._rebuild_wrapper_subclass": _unsupported("tensor subclass"),
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.storage.UntypedStorage": _StorageType("UntypedStorage", "uint8"),
        "torch.UntypedStorage": _StorageType("UntypedStorage", "uint8"),
    }
    for name, (storage, _) in _DTYPES.items():
        rc["torch." + name] = getattr(_C, name)
        if storage:
            rc["torch." + storage] = _StorageType(storage, name)
    for alias, name in _DTYPE_ALIASES.items():
        rc["torch." + alias] = getattr(_C, name)
    for name in _FOREIGN_DTYPES:
        rc["torch." + name] = _Dtype(name)
    for storage, name in _FOREIGN_STORAGES.items():
        rc["torch." + storage] = _StorageType(storage, name)
    for name in _QUANT_PLAIN:  # Tessera's quantized dtypes (docs/QUANTIZATION.md)
        rc["torch." + name] = getattr(_C, name)
    for q in ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
              "per_channel_symmetric", "per_channel_affine_float_qparams"):
        rc["torch." + q] = _Dtype(q)
    return rc


def _codecs_encode(obj, encoding="utf-8", errors="strict"):
    import codecs
    return codecs.encode(obj, encoding, errors)


_ALLOWED = None


def _allowed_globals():
    global _ALLOWED
    if _ALLOWED is None:
        _ALLOWED = _allowed()
    return _ALLOWED


def _display(full):
    if full.startswith("builtins."):
        return full[len("builtins."):]
    return full


_DICTS = (dict, collections.OrderedDict, collections.Counter)


class _Unpickler(pickle._Unpickler):
    """data.pkl's unpickler: storages come from the archive; with weights_only only the
    allow-list resolves, otherwise classes resolve as pickle does (torch.* to Tessera's).
    pickle's Python unpickler: its memo is a dict (the C one sizes an array by the largest
    memo index a file names: a hostile LONG_BINPUT would take gigabytes)."""

    def __init__(self, file, archive, weights_only, **kwargs):
        super().__init__(file, **kwargs)
        self._archive, self._weights_only = archive, weights_only
        self._size = len(file.getbuffer())

    dispatch = dict(pickle._Unpickler.dispatch)

    def load_bytearray8(self):
        # pickle's Python version allocates the claimed length before reading it
        (n,) = struct.unpack("<Q", self.read(8))
        if n > self._size:
            raise pickle.UnpicklingError("BYTEARRAY8 claims %d bytes; data.pkl has %d"
                                         % (n, self._size))
        b = bytearray(n)
        self.readinto(b)
        self.append(b)

    dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8

    # weights_only: PyTorch's limits on what the stack-changing opcodes may touch
    def _buildable(self, inst):
        from .nn.parameter import Parameter
        t = type(inst)
        return (t in (_C.Tensor, Parameter, collections.OrderedDict) or
                any(t is g for g in _user_safe.values()))

    def load_build(self):
        if self._weights_only and not self._buildable(self.stack[-2]):
            raise pickle.UnpicklingError(
                "Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
                "`add_safe_globals`, but got %s" % type(self.stack[-2]))
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build

    def _check_target(self, target, kinds, opcode):
        if self._weights_only and type(target) not in kinds:
            raise pickle.UnpicklingError("Can only %s for %s, but got %s" % (
                opcode, " / ".join(k.__name__ for k in kinds), type(target)))

    def load_append(self):
        self._check_target(self.stack[-2], (list,), "APPEND")
        super().load_append()

    def load_appends(self):
        self._check_target(self.metastack[-1][-1] if self.metastack and self.metastack[-1]
                           else None, (list,), "APPENDS")
        super().load_appends()

    def load_setitem(self):
        self._check_target(self.stack[-3], _DICTS, "SETITEM")
        super().load_setitem()

    def load_setitems(self):
        self._check_target(self.metastack[-1][-1] if self.metastack and self.metastack[-1]
                           else None, _DICTS, "SETITEMS")
        super().load_setitems()

    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def find_class(self, module, name):
        if (module, name) in NAME_MAPPING:
            module, name = NAME_MAPPING[(module, name)]
        elif module in IMPORT_MAPPING:
            module = IMPORT_MAPPING[module]
        full = "%s.%s" % (module, name)
        if module == "torch.tensor":  # PyTorch < 1.9 wrote this name
            full = "torch._tensor." + name
        allowed = _allowed_globals()
        if full in allowed:
            return allowed[full]
        if self._weights_only:
            top = module.split(".")[0]
            if top in _BLOCKED_MODULES or full in _BLOCKED_MODULES:
                raise pickle.UnpicklingError(
                    "Trying to load unsupported GLOBAL %s whose module %s is blocked." % (
                        full, module))
            user = _user_safe.get(_norm_name(full))
            if user is not None:
                return user
            raise pickle.UnpicklingError(
                "Unsupported global: GLOBAL %s was not an allowed global by default. Please use "
                "`tessera.serialization.add_safe_globals([%s])` or the "
                "`tessera.serialization.safe_globals([%s])` context manager to allowlist this "
                "global if you trust this class/function." % ((_display(full),) * 3))
        if full == "torch.ScriptObject":  # TorchScript custom classes' objects (packed params)
            from ._script_object import ScriptObject
            return ScriptObject
        if module == "torch" or module.startswith("torch."):
            return _torch_class(module, name)
        if module.startswith("numpy._core") and not _has_module(module):
            module = module.replace("numpy._core", "numpy.core", 1)  # a NumPy 2 file on NumPy 1
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 5:
            raise pickle.UnpicklingError("persistent_load id must be a 5-tuple ('storage', type, "
                                         "key, location, numel), got %r" % (pid,))
        typename, stype, key, location, numel = pid
        if isinstance(typename, bytes):
            typename = typename.decode("ascii")
        if typename != "storage":
            raise pickle.UnpicklingError("Only persistent_load of storage is allowed, but got %r"
                                         % (typename,))
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError("unknown storage type %r" % (stype,))
        if isinstance(key, bytes):
            key = key.decode("ascii")
        if isinstance(location, bytes):
            location = location.decode("ascii")
        if not isinstance(key, str) or not isinstance(location, str):
            raise pickle.UnpicklingError("storage key and location must be strings")
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0:
            raise pickle.UnpicklingError("storage numel must be an int >= 0, not %r" % (numel,))
        return self._archive.storage(stype.dtype, key, location, numel)


def _has_module(name):
    import importlib.util
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _torch_class(module, name):
    """weights_only=False: a torch.* global as Tessera's counterpart (torch.nn.modules.linear
    .Linear -> tessera.nn.Linear, torch.optim.adam.Adam -> tessera.optim.Adam...)"""
    import importlib
    parts = module.split(".")
    candidates = ["tessera" + module[len("torch"):]]
    if len(parts) >= 2:
        candidates.append("tessera." + parts[1])  # torch.nn.modules.linear -> tessera.nn
    candidates.append("tessera")
    for cand in candidates:
        try:
            mod = importlib.import_module(cand)
        except ImportError:
            continue
        obj = getattr(mod, name, None)
        if obj is not None:
            return obj
    raise pickle.UnpicklingError("tessera.load: the checkpoint needs %s.%s, which Tessera does "
                                 "not have" % (module, name))


class _Archive:
    """The zip archive being loaded: records read with their sizes checked first."""

    def __init__(self, zf, prefix, total, map_location, mapped=None):
        self._zf, self._prefix, self._total = zf, prefix, total
        self._mapped = mapped  # load(mmap=True): the file's private memory map
        self._map_location = map_location
        self._storages = {}
        self.byteorder = "little"
        if self.has("byteorder"):
            bo = self.read("byteorder", limit=16).decode("ascii", "replace")
            if bo not in ("little", "big"):
                raise _C.FormatError("tessera.load: unknown byte order %r in the checkpoint" % bo)
            self.byteorder = bo

    def has(self, name):
        try:
            self._zf.getinfo(self._prefix + name)
            return True
        except KeyError:
            return False

    def info(self, name):
        try:
            info = self._zf.getinfo(self._prefix + name)
        except KeyError:
            raise _C.FormatError("tessera.load: the checkpoint has no record '%s%s' (a storage "
                                 "or data.pkl is missing)" % (self._prefix, name)) from None
        if info.compress_type == zipfile.ZIP_STORED:
            ok = info.file_size == info.compress_size <= self._total
        else:
            ok = (info.compress_size <= self._total and
                  info.file_size <= max(info.compress_size, 1) * _MAX_DEFLATE_RATIO)
        if not ok:
            raise _C.FormatError("tessera.load: record '%s' claims %d bytes, more than the "
                                 "%d-byte file can hold" % (info.filename, info.file_size,
                                                            self._total))
        return info

    def read(self, name, nbytes=None, limit=None):
        """the record's bytes as a bytearray; nbytes: the size data.pkl claims for it"""
        info = self.info(name)
        if limit is not None and info.file_size > limit:
            raise _C.FormatError("tessera.load: record '%s' is %d bytes, at most %d expected"
                                 % (info.filename, info.file_size, limit))
        if nbytes is not None and info.file_size != nbytes:
            raise _C.FormatError(
                "tessera.load: storage '%s' holds %d bytes, but data.pkl claims %d" % (
                    info.filename, info.file_size, nbytes))
        buf = bytearray(info.file_size)
        pos = 0
        try:
            with self._zf.open(info) as f, memoryview(buf) as view:
                while pos < len(buf):
                    chunk = f.read(min(_CHUNK, len(buf) - pos))
                    if not chunk:
                        break
                    view[pos:pos + len(chunk)] = chunk
                    pos += len(chunk)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError,
                RuntimeError, OverflowError, zlib.error) as e:  # RuntimeError: encrypted
            raise _C.FormatError("tessera.load: record '%s' is damaged or truncated (%s)"
                                 % (info.filename, e)) from None
        if pos != len(buf):
            raise _C.FormatError("tessera.load: record '%s' is truncated (%d of %d bytes)"
                                 % (info.filename, pos, len(buf)))
        return buf

    def mapped(self, name, nbytes):
        """load(mmap=True): the record's bytes as a writable view of the file's private map (the
        record must be stored uncompressed, as torch.save and tessera.save write them)"""
        info = self.info(name)
        if info.file_size != nbytes:
            raise _C.FormatError("tessera.load: storage '%s' holds %d bytes, but data.pkl claims "
                                 "%d" % (info.filename, info.file_size, nbytes))
        if info.compress_type != zipfile.ZIP_STORED:
            raise _C.FormatError("tessera.load(mmap=True): record '%s' is compressed; a memory "
                                 "map needs the uncompressed records torch.save writes (load it "
                                 "without mmap)" % info.filename)
        mm, at = self._mapped, info.header_offset
        head = mm[at:at + 30]  # the record's local header: its name and extra field come next
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise _C.FormatError("tessera.load: record '%s' has no local header where the zip "
                                 "directory says" % info.filename)
        start = at + 30 + sum(struct.unpack("<HH", head[26:30]))
        if start + nbytes > len(mm):
            raise _C.FormatError("tessera.load: record '%s' runs past the end of the file"
                                 % info.filename)
        return memoryview(mm)[start:start + nbytes]

    def storage(self, dtype, key, location, numel):
        itemsize = _ITEMSIZE.get(dtype) or _FOREIGN_DTYPES.get(dtype, 1)
        nbytes = numel * itemsize
        st = self._storages.get(key)
        if st is None:
            if "/" in key or key in ("", ".", ".."):
                raise pickle.UnpicklingError("bad storage key %r" % key)
            if self._mapped is not None:
                raw = self.mapped("data/" + key, nbytes)
            else:
                raw = self.read("data/" + key, nbytes=nbytes)
            st = _Storage(raw, dtype, location, self.byteorder)
            st = _restore(st, location, self._map_location)
            self._storages[key] = st
        elif st.dtype != dtype:
            if st.nbytes() != nbytes:
                raise _C.FormatError("tessera.load: storage '%s' is used as %s and as %s with "
                                     "different sizes" % (key, st.dtype, dtype))
            twin = _Storage(st._raw, dtype, st._loc, st._byteorder)
            twin.device = st.device
            return twin
        elif st.nbytes() != nbytes:
            raise _C.FormatError("tessera.load: storage '%s' is claimed with %d and %d bytes"
                                 % (key, st.nbytes(), nbytes))
        return st


def _device_str(d):
    if isinstance(d, bytes):
        d = d.decode("ascii")
    if isinstance(d, (str, _C.device)):
        return str(_C.device(d))
    raise TypeError("load(): map_location must be a str, a tessera.device, a dict or a callable, "
                    "not %s" % type(d).__name__)


class _MapLocationError(Exception):
    """carries an error of the user's map_location out of the unpickler unchanged"""


def _restore(st, location, map_location):
    try:
        return _restore_to(st, location, map_location)
    except Exception as e:
        raise _MapLocationError(e) from e


def _restore_to(st, location, map_location):
    """Where a storage's tensors go, as PyTorch's map_location rules"""
    loc = location
    if map_location is None:
        pass
    elif isinstance(map_location, dict):
        loc = map_location.get(location, location)
    elif isinstance(map_location, (str, bytes, _C.device)):
        loc = map_location
    elif callable(map_location):
        res = map_location(st, location)
        if isinstance(res, _Storage):
            return res
        if res is not None:
            loc = res
    else:
        _device_str(map_location)  # raises TypeError
    if isinstance(loc, bytes):
        loc = loc.decode("ascii")
    if isinstance(loc, _C.device):
        loc = str(loc)
    if not isinstance(loc, str):
        raise TypeError("load(): a device in map_location must be a str or tessera.device, not "
                        "%s" % type(loc).__name__)
    if loc.startswith("cuda") and not _C._cuda_is_available():
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but tessera.cuda.is_available() "
            "is False. If you are running on a CPU-only machine, please use tessera.load with "
            "map_location='cpu' to map your storages to the CPU.")
    try:
        dev = _device_str(loc)
    except ValueError:
        if loc is not location:
            raise  # the caller's map_location
        raise _C.FormatError("tessera.load: don't know how to restore data location %r of a "
                             "storage; pass map_location (e.g. 'cpu')" % (location,)) from None
    moved = _Storage(st._raw, st.dtype, location, st._byteorder)
    moved._arrays = st._arrays
    moved.device = dev
    return moved


# ==================================================================== load: the entry point

_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."


class _FileNotFound(_C.FileError, FileNotFoundError):
    """tessera.FileError that is also the FileNotFoundError PyTorch raises"""


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """load(f, map_location=None, *, weights_only=None): an object saved by tessera.save or
    torch.save (a path or a binary file object), or a safetensors file. weights_only=None is
    True (False with a pickle_module; the TORCH_FORCE_[NO_]WEIGHTS_ONLY_LOAD variables as in
    PyTorch).

    map_location: as PyTorch's: a device (str or tessera.device) for every tensor, a dict from
    the file's location tags to devices, or a callable(storage, location) returning None, a
    storage (storage.cpu() / .cuda(i) / .to(d)) or a device. weights_only=True (the default)
    resolves only PyTorch's allow-list of globals; weights_only=False resolves any class (only
    for files you trust: unpickling runs code). mmap=True (f must be a path): as PyTorch's, the
    tensors' storages are a private (copy-on-write) memory map of the file, read from disk when
    touched; writes to them stay in memory. Tensors that map_location sends to another device
    are copies, as in PyTorch."""
    weights_only = _weights_only_default(weights_only, pickle_module)
    if pickle_module is not None and weights_only:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if mmap and not _is_path(f):
        raise ValueError("f must be a file path in order to use the mmap argument")
    if not (map_location is None or callable(map_location) or
            isinstance(map_location, (str, bytes, _C.device, dict))):
        raise TypeError("load(): map_location must be a str, a tessera.device, a dict or a "
                        "callable, not %s" % type(map_location).__name__)
    if _is_path(f):
        path = os.fsdecode(f)
        if path.endswith(".safetensors"):
            return _load_safetensors(path, map_location)
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            raise _FileNotFound("load(): no such file: '%s'" % path) from None
        except IsADirectoryError:
            raise _C.FileError("load(): '%s' is a directory" % path) from None
        with fh:
            return _load_file(fh, map_location, weights_only, path, pickle_load_args,
                              bool(mmap))
    if not hasattr(f, "read"):
        raise TypeError("load(): argument 'f' must be a path or a binary file object, not %s"
                        % type(f).__name__)
    if isinstance(f, io.TextIOBase):
        raise TypeError("load(): the file must be opened in binary mode ('rb')")
    seekable = getattr(f, "seekable", None)
    if not (hasattr(f, "seek") and hasattr(f, "tell")) or (seekable and not seekable()):
        f = io.BytesIO(f.read())  # a pipe or socket: zip needs to seek
    return _load_file(f, map_location, weights_only, None, pickle_load_args)


_TRUE = ("1", "y", "yes", "true")


def _weights_only_default(weights_only, pickle_module):
    """torch.load's rule: weights_only=None means True, False when a pickle_module is given; the
    environment's TORCH_FORCE_WEIGHTS_ONLY_LOAD forces True, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns
    an unspecified weights_only to False"""
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in _TRUE
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or "
                           "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` should be set, but both were set.")
    if force:
        return True
    if weights_only is None:
        return not force_no and pickle_module is None
    return bool(weights_only)


def _load_safetensors(path, map_location):
    if isinstance(map_location, dict) or (callable(map_location) and
                                          not isinstance(map_location, (str, _C.device))):
        raise RuntimeError("Loading safetensors file with %s map_location is not supported. Use "
                           "a device string or tessera.device instead."
                           % ("dict" if isinstance(map_location, dict) else "callable"))
    return _C.load(path, map_location=map_location)


def _load_file(fh, map_location, weights_only, path, pickle_load_args, mmap=False):
    start = fh.tell()
    head = fh.read(len(_LEGACY_MAGIC))
    if not isinstance(head, bytes):
        raise TypeError("load(): the file must be opened in binary mode ('rb')")
    fh.seek(start)
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return _load_zip(fh, map_location, weights_only, pickle_load_args, mmap)
    if head.startswith(_LEGACY_MAGIC):
        raise _C.UnsupportedError(
            "load(): this checkpoint is in PyTorch's legacy format (torch < 1.6 or "
            "_use_new_zipfile_serialization=False), which Tessera does not read; re-save it with "
            "torch.save in a current PyTorch")
    if len(head) >= 9 and head[8:9] == b"{":
        if path is None:  # safetensors from a file object: through a temporary file
            with tempfile.NamedTemporaryFile(suffix=".safetensors") as tmp:
                tmp.write(fh.read())
                tmp.flush()
                return _load_safetensors(tmp.name, map_location)
        return _load_safetensors(path, map_location)
    if not head:
        raise _C.FormatError("load(): the file is empty")
    raise _C.FormatError("load(): not a PyTorch checkpoint (zip) or safetensors file")


def _map_file(fh):
    """a private (copy-on-write) memory map of the whole file: PyTorch's mmap=True with its
    default MAP_PRIVATE; it stays open while tensors view it"""
    import mmap
    return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)


def _load_zip(fh, map_location, weights_only, pickle_load_args, mmap=False):
    start = fh.tell()
    fh.seek(0, io.SEEK_END)
    total = fh.tell() - start
    fh.seek(start)
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, OverflowError,
            NotImplementedError) as e:
        raise _C.FormatError("load(): the checkpoint's zip archive is damaged or truncated (%s)"
                             % e) from None
    with zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkl:
            if any(n.endswith("/constants.pkl") for n in names):
                raise _C.UnsupportedError("load(): this is a TorchScript archive "
                                          "(torch.jit.save); Tessera does not load TorchScript")
            raise _C.FormatError("load(): the zip archive has no <archive>/data.pkl: not a "
                                 "PyTorch checkpoint")
        prefix = pkl[0][:-len("data.pkl")]
        archive = _Archive(zf, prefix, total, map_location, _map_file(fh) if mmap else None)
        data = archive.read("data.pkl")
        kwargs = {"encoding": pickle_load_args.get("encoding", "utf-8")}
        if "errors" in pickle_load_args:
            kwargs["errors"] = pickle_load_args["errors"]
        up = _Unpickler(io.BytesIO(bytes(data)), archive, weights_only, **kwargs)
        try:
            return up.load()
        except _MapLocationError as e:
            raise e.args[0] from None
        except pickle.UnpicklingError as e:
            if weights_only:
                raise pickle.UnpicklingError(
                    "Weights only load failed. Re-running `tessera.load` with `weights_only` set "
                    "to `False` will likely succeed, but it can result in arbitrary code "
                    "execution. Do it only if you got the file from a trusted source.\n\t"
                    "WeightsUnpickler error: %s" % e) from None
            raise
        except (EOFError, IndexError, KeyError, struct.error, ValueError, TypeError,
                AttributeError, OverflowError, RecursionError, LookupError,
                RuntimeError) as e:
            if isinstance(e, _C.TesseraError):
                raise
            raise _C.FormatError("load(): data.pkl is damaged (%s: %s)"
                                 % (type(e).__name__, e)) from e


# ==================================================================== save

class _TorchGlobal:
    """A global written by name (torch._utils._rebuild_tensor_v2, torch.FloatStorage...):
    PyTorch need not be installed to write a file PyTorch reads."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle wants reduce's function callable; it is only written
        raise TypeError("%s.%s is a name written into a checkpoint" % (self.module, self.name))


_OD = collections.OrderedDict
_GLOBALS = {}


def _g(module, name):
    """one _TorchGlobal per name, so pickle's memo writes each GLOBAL once"""
    g = _GLOBALS.get((module, name))
    if g is None:
        g = _GLOBALS[(module, name)] = _TorchGlobal(module, name)
    return g


class _Group:
    """a storage to write: the bytes [lo, hi) of cpu memory, or a cpu copy's"""

    def __init__(self, key, dtype, location, lo, hi, keep):
        self.key, self.dtype, self.location = key, dtype, location
        self.lo, self.hi, self.keep = lo, hi, keep

    def bytes_view(self):
        n = self.hi - self.lo
        if n == 0:
            return memoryview(b"")
        return memoryview((ctypes.c_char * n).from_address(self.lo)).cast("B")


def _extent(shape, stride):
    """elements spanned by a strided layout (0 when empty)"""
    last = 0
    for n, st in zip(shape, stride):
        if n == 0:
            return 0
        last += (n - 1) * st
    return last + 1


class _Collector(pickle._Pickler):
    """pass 1: finds every tensor the object holds (without writing their bytes)"""

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.tensors = []

    def reducer_override(self, obj):
        if isinstance(obj, _C.Tensor):
            self.tensors.append(obj)
            return (int, ())
        return _common_reduce(obj)

    dispatch = dict(pickle._Pickler.dispatch)


def _common_reduce(obj):
    if isinstance(obj, _C.device):
        return (_g("torch", "device"), (str(obj),))
    if isinstance(obj, _C.Size):
        return (_g("torch", "Size"), (tuple(obj),))
    return NotImplemented


def _plan(tensors):
    """Storages for the tensors: cpu tensors whose memory overlaps share one (as their PyTorch
    storage), others get a cpu copy each. -> ({id(tensor): (group, offset, shape, stride)},
    [groups])"""
    groups, where = [], {}
    spans = []
    seen = set()
    for t in tensors:
        if id(t) in seen:
            continue
        seen.add(id(t))
        dtype = _dtype_name(t.dtype)
        if dtype in _QUANT_PLAIN and t.qscheme() != "per_group_affine":
            # a quantized tensor: its integers in a QInt8 / QUInt8 / QInt32 storage of their own
            c = t.int_repr().contiguous()
            shape = tuple(t.shape)
            ptr = _C._data_ptr(c)
            g = _Group(str(len(groups)), dtype, "cpu", ptr, ptr + c.numel() * _ITEMSIZE[
                _QUANT_PLAIN[dtype]], c)
            groups.append(g)
            where[id(t)] = (g, 0, shape, _contiguous_stride(shape))
            continue
        if dtype not in _DTYPES:
            raise _C.UnsupportedError("save(): tensors of dtype %s cannot be written" % dtype)
        shape, stride = tuple(t.shape), tuple(t.stride())
        dev = t.device
        if dev.type == "meta":  # no storage: _rebuild_meta_tensor_no_storage (_Writer)
            continue
        n = _extent(shape, stride)
        if dev.type == "cpu" and n > 0 and all(s >= 0 for s in stride):
            ptr = _C._data_ptr(t)
            size = _ITEMSIZE[dtype]
            spans.append((ptr, ptr + n * size, dtype, t, shape, stride))
        else:
            location = str(dev) if dev.type == "cuda" else "cpu"
            c = t.detach().to("cpu").contiguous()
            if n == 0:
                g = _Group(str(len(groups)), dtype, location, 0, 0, None)
                groups.append(g)
                where[id(t)] = (g, 0, shape, stride)
                continue
            ptr = _C._data_ptr(c)
            g = _Group(str(len(groups)), dtype, location, ptr,
                       ptr + c.numel() * _ITEMSIZE[dtype], c)
            groups.append(g)
            where[id(t)] = (g, 0, shape, _contiguous_stride(shape))
    spans.sort(key=lambda s: (s[0], -s[1]))
    cur = None
    members = []

    def close():
        if cur is None:
            return
        g = _Group(str(len(groups)), cur[2], "cpu", cur[0], cur[1], [m[3] for m in members])
        groups.append(g)
        size = _ITEMSIZE[cur[2]]
        for ptr, _, dtype, t, shape, stride in members:
            if dtype != cur[2] or (ptr - cur[0]) % size:
                raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                                   "data as different types")
            where[id(t)] = (g, (ptr - cur[0]) // size, shape, stride)

    for s in spans:
        if cur is not None and s[0] < cur[1]:
            cur = (cur[0], max(cur[1], s[1]), cur[2])
            members.append(s)
        else:
            close()
            cur, members = (s[0], s[1], s[2]), [s]
    close()
    return where, groups


def _contiguous_stride(shape):
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(stride))


class _Writer(pickle._Pickler):
    """pass 2: data.pkl as torch.save writes it"""

    def __init__(self, file, protocol, where, groups):
        super().__init__(file, protocol)
        self._where, self._groups = where, groups

    def persistent_id(self, obj):
        if isinstance(obj, _Group):
            if obj.dtype in _QUANT_PLAIN:  # PyTorch's QInt8Storage & co.
                return ("storage", _g("torch", _QUANT_STORAGE[obj.dtype]), obj.key,
                        obj.location, (obj.hi - obj.lo) // _ITEMSIZE[_QUANT_PLAIN[obj.dtype]])
            storage, _ = _DTYPES[obj.dtype]
            itemsize = _ITEMSIZE[obj.dtype]
            nbytes = obj.hi - obj.lo
            if storage is None:
                return ("storage", _g("torch.storage", "UntypedStorage"), obj.key,
                        obj.location, nbytes)
            return ("storage", _g("torch", storage), obj.key, obj.location,
                    nbytes // itemsize)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, _C.Tensor):
            from .nn.parameter import Parameter
            if isinstance(obj, Parameter):
                return (_g("torch._utils", "_rebuild_parameter"),
                        (_PlainTensor(obj), obj.requires_grad, _OD()))
            return self._tensor_reduce(obj)
        if isinstance(obj, _PlainTensor):
            return self._tensor_reduce(obj.t)
        return _common_reduce(obj)

    def _tensor_reduce(self, t):
        if t.device.type == "meta":  # no data, no storage: PyTorch's form
            return (_g("torch._utils", "_rebuild_meta_tensor_no_storage"),
                    (t.dtype, tuple(t.shape), tuple(t.stride()), bool(t.requires_grad)))
        if id(t) not in self._where:  # made while pickling (a __getstate__'s fresh tensor)
            where, groups = _plan([t])
            for g in groups:
                g.key = str(len(self._groups))
                self._groups.append(g)
            self._where.update(where)
        g, offset, shape, stride = self._where[id(t)]
        rg = bool(t.requires_grad)
        if g.dtype in _QUANT_PLAIN:  # PyTorch's _rebuild_qtensor with its quantizer_params
            if t.qscheme() == "per_tensor_affine":
                qp = (_Dtype("per_tensor_affine"), t.q_scale(), t.q_zero_point())
            else:
                qp = (_Dtype("per_channel_affine"), t.q_per_channel_scales(),
                      t.q_per_channel_zero_points(), t.q_per_channel_axis())
            return (_g("torch._utils", "_rebuild_qtensor"),
                    (g, offset, shape, stride, qp, False, _OD()))
        if _DTYPES[g.dtype][0] is None:
            return (_g("torch._utils", "_rebuild_tensor_v3"),
                    (g, offset, shape, stride, rg, _OD(), getattr(_C, g.dtype)))
        return (_g("torch._utils", "_rebuild_tensor_v2"),
                (g, offset, shape, stride, rg, _OD()))

    dispatch = dict(pickle._Pickler.dispatch)


class _PlainTensor:
    def __init__(self, t):
        self.t = t


def _save_torch_global(self, obj):
    self.write(pickle.GLOBAL + ("%s\n%s\n" % (obj.module, obj.name)).encode("utf-8"))
    self.memoize(obj)


def _save_dtype(self, obj):
    """torch.float32 & co. as PyTorch pickles them: GLOBAL torch float32"""
    name = obj.name if isinstance(obj, _Dtype) else _dtype_name(obj)
    self.write(pickle.GLOBAL + ("torch\n%s\n" % name).encode("utf-8"))
    self.memoize(obj)


for _cls in (_Collector, _Writer):
    _cls.dispatch[_TorchGlobal] = _save_torch_global
    _cls.dispatch[_C.dtype] = _save_dtype
    _cls.dispatch[_Dtype] = _save_dtype


def _write_record(zf, name, data, offset_hint=True):
    """a STORED record whose data starts on a 64-byte boundary (an 'FB' padding extra field, as
    PyTorch's writer)"""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = 0
    n = len(data)
    zip64 = n >= zipfile.ZIP64_LIMIT
    header = zf.fp.tell() + 30 + len(name.encode("utf-8")) + (20 if zip64 else 0)
    pad = (-(header + 4)) % _ALIGNMENT
    info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
    with zf.open(info, "w", force_zip64=zip64) as w:
        for i in range(0, n, _CHUNK):
            w.write(data[i:i + _CHUNK])


class _Discard:
    def write(self, b):
        return len(b)


def _write_zip(fh, obj, archive, protocol):
    col = _Collector(_Discard(), protocol)
    col.dump(obj)
    where, groups = _plan(col.tensors)
    buf = io.BytesIO()
    _Writer(buf, protocol, where, groups).dump(obj)
    del col
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        _write_record(zf, archive + "/data.pkl", buf.getvalue())
        _write_record(zf, archive + "/.format_version", b"1")
        _write_record(zf, archive + "/.storage_alignment", b"64")
        _write_record(zf, archive + "/byteorder", sys.byteorder.encode("ascii"))
        for g in groups:
            _write_record(zf, "%s/data/%s" % (archive, g.key), g.bytes_view())
        _write_record(zf, archive + "/version", b"3\n")
        sid = "".join(random.choice("0123456789") for _ in range(40))
        _write_record(zf, archive + "/.data/serialization_id", sid.encode("ascii"))
    del groups, where


def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """save(obj, f): writes obj in PyTorch's checkpoint format (torch.load reads it): tensors of
    any device (views of one cpu storage stay one storage), state dicts, optimizer state,
    numbers, strings, containers, NumPy arrays, whole modules. f: a path or a binary file object.
    A path ending in .safetensors writes safetensors instead (a Tensor or a dict of str to
    Tensor), as before."""
    if pickle_module is not None and pickle_module is not pickle:
        raise _C.UnsupportedError("save(): only the standard pickle module is supported")
    if not _use_new_zipfile_serialization:
        raise _C.UnsupportedError("save(): the legacy format (_use_new_zipfile_serialization="
                                  "False) is not written")
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError("save(): pickle_protocol must be an int in [2, %d]"
                         % pickle.HIGHEST_PROTOCOL)
    if _is_path(f):
        path = os.fsdecode(f)
        if path.endswith(".safetensors"):
            return _C.save(obj, path)
        archive = os.path.splitext(os.path.basename(path))[0] or "archive"
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".tessera-save-", dir=d)
        try:
            with os.fdopen(fd, "wb") as fh:
                _write_zip(fh, obj, archive, pickle_protocol)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return None
    if not hasattr(f, "write"):
        raise TypeError("save(): argument 'f' must be a path or a binary file object, not %s"
                        % type(f).__name__)
    _write_zip(f, obj, "archive", pickle_protocol)
    return None
