"""tessera.signal — torch.signal's names (issue 52): the window functions in tessera.signal.windows."""
from . import windows  # noqa: F401

__all__ = ["windows"]
