"""tessera.utils — data loading (tessera.utils.data), activation checkpointing
(tessera.utils.checkpoint)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
