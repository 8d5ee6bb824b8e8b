"""tessera.utils.tensorboard: torch.utils.tensorboard's SummaryWriter, writing TensorBoard event
files without the tensorboard or protobuf packages (the C library frames the records)."""
from .writer import FileWriter, SummaryWriter  # noqa: F401

__all__ = ["FileWriter", "SummaryWriter"]
