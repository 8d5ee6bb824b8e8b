"""tessera.utils — data loading (tessera.utils.data)."""
from . import data  # noqa: F401
