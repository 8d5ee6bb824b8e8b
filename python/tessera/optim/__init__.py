"""tessera.optim — optimizers and learning-rate schedulers over the C core's."""
from .optimizer import Optimizer, SGD, Adam, AdamW, RMSprop
from .optimizer import Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop
from .lbfgs import LBFGS
from .offload import offload, is_offloaded
from . import lr_scheduler  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "ASGD", "Rprop", "LBFGS", "lr_scheduler", "offload",
           "is_offloaded"]
