"""tessera.ao — torch.ao's quantization, as far as it exists (docs/QUANTIZATION.md)."""
from . import nn, quantization  # noqa: F401
