"""torch.version under tessera.compat: the PyTorch API level Tessera answers; no CUDA/HIP toolkit
version is claimed (cuda is None: code that reads torch.version.cuda takes its CPU path)."""
from ._version import TorchVersion, TORCH_VERSION

__version__ = TorchVersion(TORCH_VERSION)
cuda = None
hip = None
rocm = None
xpu = None
debug = False
git_version = "tessera"
