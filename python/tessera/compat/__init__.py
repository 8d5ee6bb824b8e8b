"""tessera.compat — run code that says `import torch` / `import torchvision`, unmodified, with
Tessera underneath (docs/COMPAT.md, docs/decisions/0034-torch-compat.md).

    python -m tessera.compat script.py [args]      # or -m module, or -c code
    import tessera.compat; tessera.compat.install()  # before the library imports torch

install() puts a finder first on sys.meta_path: `torch` is a stand-in module whose attributes are
tessera's (torch.__version__ is TORCH_VERSION, a TorchVersion), every `torch.X` is the module
tessera.X itself and every `torchvision.X` is tessera.vision.X; importlib.metadata answers the
distributions `torch` and `torchvision` at the same versions. A real PyTorch is never hidden
unless asked: install() raises RealTorchError when one is importable, unless force=True or the
environment variable TESSERA_COMPAT_FORCE=1.
"""
import importlib.machinery
import importlib.metadata
import os
import sys

from ._version import (TorchVersion, TORCH_VERSION, TORCHVISION_VERSION,  # noqa: F401
                       TORCH_API_VERSION, TORCHVISION_API_VERSION)
from ._finder import TorchFinder, StandIn

__all__ = ["install", "uninstall", "is_installed", "real_torch_location", "RealTorchError",
           "TorchVersion", "TORCH_VERSION", "TORCHVISION_VERSION"]

FORCE_ENV = "TESSERA_COMPAT_FORCE"
_finder = None


class RealTorchError(ImportError):
    """a real PyTorch is importable, and tessera.compat will not hide it unless asked"""


def _real_location(name):
    """where a real `name` package would be imported from (no import), or None"""
    mod = sys.modules.get(name)
    if mod is not None and not isinstance(mod, StandIn):
        return getattr(mod, "__file__", None) or repr(mod)
    for finder in sys.meta_path:
        if isinstance(finder, TorchFinder) or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(name, None)
        if spec is not None:
            return spec.origin or (list(spec.submodule_search_locations or []) or [name])[0]
    return None


def real_torch_location():
    """the path of a real PyTorch (or torchvision) that `import torch` would load, or None"""
    return _real_location("torch") or _real_location("torchvision")


def is_installed():
    """whether the finder is on sys.meta_path"""
    return _finder is not None and _finder in sys.meta_path


def install(force=False):
    """make `import torch` / `import torchvision` (and their submodules and package metadata)
    answer with Tessera. Raises RealTorchError if a real PyTorch is importable, unless force=True
    or TESSERA_COMPAT_FORCE=1 (then Tessera shadows it; a real torch already imported cannot be
    shadowed). Idempotent; returns the finder."""
    global _finder
    if is_installed():
        return _finder
    force = force or os.environ.get(FORCE_ENV, "") not in ("", "0")
    for name in ("torch", "torchvision"):
        mod = sys.modules.get(name)
        if mod is not None and not isinstance(mod, StandIn):
            raise RealTorchError(
                "tessera.compat.install(): the real %s is already imported (%s); Tessera cannot "
                "stand in for it in this process" % (name, getattr(mod, "__file__", mod)))
    real = real_torch_location()
    if real is not None and not force:
        raise RealTorchError(
            "tessera.compat.install(): a real PyTorch is importable (%s); tessera.compat does not "
            "hide it unless asked: install(force=True), %s=1, or `python -m tessera.compat "
            "--force`" % (real, FORCE_ENV))
    import tessera  # noqa: F401  (fail here, not at the user's `import torch`)
    _finder = TorchFinder()
    sys.meta_path.insert(0, _finder)
    return _finder


def uninstall():
    """remove the finder and the torch / torchvision entries it put in sys.modules"""
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None
    for name in list(sys.modules):
        root = name.partition(".")[0]
        if root in ("torch", "torchvision"):
            mod = sys.modules[name]
            if isinstance(mod, StandIn) or getattr(mod, "__name__", "").startswith("tessera"):
                del sys.modules[name]
    importlib.invalidate_caches()
