"""tessera.distributed.tensor — torch.distributed.tensor (DTensor) in one process: DTensor,
distribute_tensor, the placements Shard / Replicate / Partial, DeviceMesh and init_device_mesh.

A mesh holds one rank (this process's), so every DTensor's local tensor is the whole tensor and
its values are PyTorch's; a mesh of more ranks raises NotImplementedError naming that limit
(docs/DISTRIBUTED.md, "DTensor"). Hugging Face transformers imports these names at module level and
uses them on its loading and tensor-parallel paths.
"""
from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import DTensor, distribute_tensor
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "distribute_tensor", "DeviceMesh", "init_device_mesh", "Shard", "Replicate",
           "Partial", "Placement"]
