"""tessera.optim — optimizers and learning-rate schedulers over the C core's."""
from .optimizer import Optimizer, SGD, Adam, AdamW, RMSprop
from . import lr_scheduler  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
