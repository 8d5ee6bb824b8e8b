"""tessera.jit — torch.jit's names as PyTorch eager answers them. Tessera has no TorchScript
compiler: `script` and `trace` return the module or function unchanged (trace runs it once on
the example inputs, as PyTorch's tracer does, and returns the original) and warn once that it
runs eagerly; save/load of TorchScript archives raise NotImplementedError. `ignore`, `unused`,
`export`, `Final`, `annotate`, `is_scripting`, `is_tracing` behave as outside scripting."""
import builtins as _builtins
import contextlib
import typing
import warnings

from . import annotations  # noqa: F401  (torch.jit.annotations)

Final = typing.Final  # torch.jit.Final is typing.Final
__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "Final", "annotate",
           "is_scripting", "is_tracing", "interface", "script_if_tracing", "fork", "wait",
           "freeze", "optimize_for_inference", "save", "load", "isinstance", "Attribute",
           "ScriptModule", "ScriptFunction", "Error", "TracerWarning", "optimized_execution",
           "set_fusion_strategy", "enable_onednn_fusion", "onednn_fusion_enabled", "strict_fusion"]

_warned = set()


def _warn_once(what, msg):
    if what not in _warned:
        _warned.add(what)
        warnings.warn(msg, UserWarning, stacklevel=3)


class Error(RuntimeError):
    """torch.jit.Error"""


class TracerWarning(Warning):
    """torch.jit.TracerWarning"""


class ScriptModule:
    """torch.jit.ScriptModule: no module is ever one under Tessera (script returns the original);
    here so that isinstance(m, torch.jit.ScriptModule) answers False"""


class ScriptFunction:
    """torch.jit.ScriptFunction: as ScriptModule, never an instance under Tessera"""


RecursiveScriptModule = TopLevelTracedModule = TracedModule = ScriptModule


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """torch.jit.script: returns obj unchanged (Tessera runs it eagerly; no TorchScript)"""
    _warn_once("script", "torch.jit.script: Tessera has no TorchScript compiler; the module or "
               "function runs eagerly, unchanged (tessera.jit, a documented limit)")
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """torch.jit.trace: runs func once on example_inputs (errors surface as in tracing) and returns
    it unchanged; Tessera records no graph"""
    _warn_once("trace", "torch.jit.trace: Tessera records no TorchScript graph; the module or "
               "function is returned unchanged and runs eagerly (tessera.jit, a documented limit)")
    if example_inputs is not None or example_kwarg_inputs is not None:
        args = example_inputs if _builtins.isinstance(example_inputs, tuple) else (
            () if example_inputs is None else (example_inputs,))
        func(*args, **(example_kwarg_inputs or {}))
    return func


def trace_module(mod, inputs, *args, **kwargs):
    """torch.jit.trace_module: as trace, per method in inputs"""
    _warn_once("trace", "torch.jit.trace_module: Tessera records no TorchScript graph; the module "
               "is returned unchanged and runs eagerly (tessera.jit, a documented limit)")
    for name, ex in inputs.items():
        getattr(mod, name)(*(ex if _builtins.isinstance(ex, tuple) else (ex,)))
    return mod


def script_if_tracing(fn):
    """torch.jit.script_if_tracing: fn itself (nothing is traced)"""
    return fn


def ignore(drop=False, **kwargs):
    """torch.jit.ignore: the function unchanged (usable bare or as ignore(drop=...))"""
    if callable(drop):
        return drop

    def decorator(fn):
        return fn
    return decorator


def unused(fn):
    """torch.jit.unused: the function unchanged (eager)"""
    return fn


def export(fn):
    """torch.jit.export: the method unchanged (eager)"""
    return fn


def interface(obj):
    """torch.jit.interface: the class unchanged"""
    return obj


def _overload(fn):
    return fn


def _overload_method(fn):
    return fn


def annotate(the_type, the_value):
    """torch.jit.annotate(T, v): v"""
    return the_value


def is_scripting():
    """False: Tessera never runs code under TorchScript"""
    return False


def is_tracing():
    """False: Tessera never traces"""
    return False


def isinstance(obj, target_type):  # noqa: A001  (torch.jit.isinstance)
    """torch.jit.isinstance: the builtin's check, with typing containers (List[int]...) checked
    element by element as PyTorch's eager version does"""
    import builtins
    origin = typing.get_origin(target_type)
    if origin is None:
        return builtins.isinstance(obj, target_type)
    args = typing.get_args(target_type)
    if origin is typing.Union:
        return any(isinstance(obj, a) for a in args)
    if not builtins.isinstance(obj, origin):
        return False
    if origin in (list,) and args:
        return all(isinstance(x, args[0]) for x in obj)
    if origin is tuple and args:
        return len(obj) == len(args) and all(isinstance(x, a) for x, a in zip(obj, args))
    if origin is dict and args:
        return all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    return True


class Attribute:
    """torch.jit.Attribute(value, type): outside scripting, the value"""

    def __new__(cls, value, type=None):  # noqa: A002
        return value


class Future:
    """torch.jit.Future from fork(): the value, computed when forked"""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value


def fork(func, *args, **kwargs):
    """torch.jit.fork: runs func now (eager), returns a Future holding its value"""
    return Future(func(*args, **kwargs))


def wait(future):
    """torch.jit.wait"""
    return future.wait()


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """torch.jit.freeze: a TorchScript module's freezing; Tessera has none"""
    raise NotImplementedError("torch.jit.freeze: Tessera has no TorchScript modules to freeze "
                              "(tessera.jit.script returns the eager module)")


def optimize_for_inference(mod, other_methods=None):
    """torch.jit.optimize_for_inference: the eager module in eval mode, warned once"""
    _warn_once("optimize_for_inference", "torch.jit.optimize_for_inference: Tessera does no "
               "TorchScript optimisation; returns the module in eval mode")
    return mod.eval()


def save(m, f, _extra_files=None):
    """torch.jit.save: TorchScript archives are not supported"""
    raise NotImplementedError("torch.jit.save: Tessera writes no TorchScript archives; save the "
                              "state_dict with tessera.save instead")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """torch.jit.load: TorchScript archives are not supported"""
    raise NotImplementedError("torch.jit.load: Tessera cannot run TorchScript archives (code "
                              "compiled by PyTorch); load a state_dict with tessera.load instead")


@contextlib.contextmanager
def optimized_execution(should_optimize):
    """torch.jit.optimized_execution: nothing to switch (eager)"""
    yield


@contextlib.contextmanager
def strict_fusion():
    """torch.jit.strict_fusion: nothing to fuse (eager)"""
    yield


_fusion_strategy = [("STATIC", 2), ("DYNAMIC", 10)]


def set_fusion_strategy(strategy):
    """torch.jit.set_fusion_strategy: recorded and returned (no fuser runs)"""
    global _fusion_strategy
    old, _fusion_strategy = _fusion_strategy, list(strategy)
    return old


_onednn_fusion = False


def enable_onednn_fusion(enabled):
    """torch.jit.enable_onednn_fusion: recorded (no TorchScript fuser)"""
    global _onednn_fusion
    _onednn_fusion = bool(enabled)


def onednn_fusion_enabled():
    return _onednn_fusion
