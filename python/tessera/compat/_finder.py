"""The import side of tessera.compat: a sys.meta_path finder that answers `torch` and `torchvision`
with stand-in top-level modules (attributes read through to tessera / tessera.vision) and every
submodule torch.X / torchvision.X with the module tessera.X / tessera.vision.X itself (the same
object: isinstance checks and monkeypatches agree), plus their package metadata."""
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

from ._version import TorchVersion, TORCH_VERSION, TORCHVISION_VERSION

# top-level name -> (the tessera package it stands for, its __version__)
ROOTS = {"torch": ("tessera", TORCH_VERSION), "torchvision": ("tessera.vision", TORCHVISION_VERSION)}
# submodules that are not tessera.X under the same name
SPECIAL = {"torch.version": "tessera.compat.version",
           "torch.torch_version": "tessera.compat.torch_version"}
_OWN = frozenset(("version", "torch_version"))  # attributes the stand-in keeps for itself


class StandIn(types.ModuleType):
    """the module `torch` (or `torchvision`): reads fall through to the tessera package, writes of
    ordinary names land on it too (a library's `torch.foo = ...` is seen by tessera.foo)"""

    def __init__(self, name, target, version):
        super().__init__(name, target.__doc__)
        object.__setattr__(self, "_ts_target", target)
        object.__setattr__(self, "__version__", TorchVersion(version))
        object.__setattr__(self, "__file__", getattr(target, "__file__", None))
        object.__setattr__(self, "__path__", [])  # a package: submodules come from the finder

    def __getattr__(self, name):
        special = SPECIAL.get(self.__name__ + "." + name)
        if special is not None:  # torch.version: imported with torch, as PyTorch's is
            mod = importlib.import_module(special)
            object.__setattr__(self, name, mod)
            return mod
        try:
            return getattr(object.__getattribute__(self, "_ts_target"), name)
        except AttributeError:
            raise AttributeError("module %r has no attribute %r (Tessera does not implement "
                                 "it)" % (self.__name__, name)) from None

    def __setattr__(self, name, value):
        if name.startswith("__") or name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "_ts_target"), name, value)

    def __delattr__(self, name):
        if name in self.__dict__:
            object.__delattr__(self, name)
        else:
            delattr(object.__getattribute__(self, "_ts_target"), name)

    def __dir__(self):
        return sorted(set(dir(object.__getattribute__(self, "_ts_target"))) | set(self.__dict__))


class _AliasLoader(importlib.abc.Loader):
    """hands the import system an existing module; the module keeps its own __spec__"""

    def __init__(self, module):
        self._module = module
        self._spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):
        if self._spec is not None and not isinstance(module, StandIn):
            module.__spec__ = self._spec  # _init_module_attrs replaced it with the alias's


def _target_name(fullname):
    if fullname in SPECIAL:
        return SPECIAL[fullname]
    root, _, rest = fullname.partition(".")
    base = ROOTS[root][0]
    return base + "." + rest if rest else base


def _import_target(target):
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        # only "this module does not exist" means not found; an import error inside it propagates
        if e.name is not None and (target == e.name or target.startswith(e.name + ".")):
            return None
        raise


class TorchFinder(importlib.abc.MetaPathFinder):
    """sys.meta_path entry of tessera.compat"""

    def __init__(self):
        self._standins = {}

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.partition(".")[0]
        if root not in ROOTS:
            return None
        if fullname == root:
            mod = self._standins.get(root)
            if mod is None:
                base = importlib.import_module(ROOTS[root][0])
                mod = StandIn(root, base, ROOTS[root][1])
                self._standins[root] = mod
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(mod), is_package=True)
        module = _import_target(_target_name(fullname))
        if module is None:
            return None
        if not hasattr(module, "__path__"):
            # a module that registers submodules in sys.modules itself (tessera.vision.transforms
            # and its .functional): a package to the import system, so torch.X.Y can be imported
            prefix = module.__name__ + "."
            if any(k.startswith(prefix) for k in list(sys.modules)):
                module.__path__ = []
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(module),
                                              is_package=hasattr(module, "__path__"))

    def find_distributions(self, context=None):
        from . import _metadata
        name = getattr(context, "name", None)
        dists = _metadata.distributions()
        if name is None:
            return iter(dists.values())
        norm = name.lower().replace("-", "_").replace(".", "_")
        return iter([dists[norm]] if norm in dists else [])
