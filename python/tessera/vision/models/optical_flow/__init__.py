"""tessera.vision.models.optical_flow — torchvision.models.optical_flow: RAFT (raft_large,
raft_small) with torchvision's module and state-dict names (weights=None only)."""
from .raft import RAFT, raft_large, raft_small

__all__ = ["RAFT", "raft_large", "raft_small"]
