"""tessera.distributed.checkpoint.hf_storage — importable names only: distributed checkpointing is
not implemented (see tessera.distributed.checkpoint)."""
from . import _unsupported

__all__ = ["HuggingFaceStorageReader", "HuggingFaceStorageWriter"]


class HuggingFaceStorageReader:
    def __init__(self, *args, **kwargs):
        _unsupported("HuggingFaceStorageReader")


class HuggingFaceStorageWriter:
    def __init__(self, *args, **kwargs):
        _unsupported("HuggingFaceStorageWriter")
