"""tessera.nn — Module (subclassable as PyTorch's), the C library's layers, losses."""
from .parameter import Parameter
from .module import Module
from .container import Sequential, ModuleList, ModuleDict, ParameterList
from .layers import (Identity, Linear, Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, ReLU,
                     SiLU, Sigmoid, Tanh, GELU, LeakyReLU, Softplus, Softmax, LogSoftmax, Flatten,
                     Dropout, BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm, Embedding)
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, BCELoss,
                   BCEWithLogitsLoss)
from .models import MultiheadAttention, TransformerEncoderLayer, GPT
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .parallel import DataParallel
from . import functional, init, utils, models  # noqa: F401

__all__ = [
    "Parameter", "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "Identity",
    "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "ReLU", "SiLU", "Sigmoid",
    "Tanh", "GELU", "LeakyReLU", "Softplus", "Softmax", "LogSoftmax", "Flatten", "Dropout",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "RMSNorm", "Embedding", "CrossEntropyLoss",
    "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "BCELoss", "BCEWithLogitsLoss",
    "MultiheadAttention", "TransformerEncoderLayer", "GPT", "DataParallel", "functional", "init",
    "utils", "models", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
    "GRUCell",
]
