"""torch.torch_version under tessera.compat"""
from ._version import TorchVersion, InvalidVersion, TORCH_VERSION  # noqa: F401

__all__ = ["TorchVersion"]
__version__ = TorchVersion(TORCH_VERSION)
