"""tessera.functional — PyTorch's torch.functional module: the tensor functions that module
defines, which torch also exports at the top level (tutorials write `import torch.functional as F`).
Here they are the top-level tessera functions themselves."""
import tessera as _tessera

_NAMES = ("atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors",
          "cartesian_prod", "block_diag", "cdist", "chain_matmul", "einsum", "istft", "lu", "norm",
          "meshgrid", "pca_lowrank", "split", "stft", "svd_lowrank", "tensordot", "unique",
          "unique_consecutive", "unravel_index")

__all__ = [n for n in _NAMES if hasattr(_tessera, n)]
globals().update({n: getattr(_tessera, n) for n in __all__})
