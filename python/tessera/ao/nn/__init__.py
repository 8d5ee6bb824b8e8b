"""tessera.ao.nn — quantized modules (torch.ao.nn)."""
from . import quantized  # noqa: F401
from . import intrinsic  # noqa: F401
from . import qat  # noqa: F401
