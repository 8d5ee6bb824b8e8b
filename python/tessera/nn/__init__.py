"""tessera.nn — Module (subclassable as PyTorch's), the C library's layers, losses."""
from .parameter import Parameter, Buffer  # noqa: F401
from .module import Module
from .container import Sequential, ModuleList, ModuleDict, ParameterList
from .layers import (Identity, Linear, Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, ReLU,
                     SiLU, Sigmoid, Tanh, GELU, LeakyReLU, Softplus, Softmax, LogSoftmax, Flatten,
                     Dropout, BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm, Embedding)
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, BCELoss,
                   BCEWithLogitsLoss)
from .loss import LinearCrossEntropyLoss, LinearCrossEntropyOptions  # noqa: F401
from .loss import (KLDivLoss, HuberLoss, SoftMarginLoss, MarginRankingLoss, HingeEmbeddingLoss,
                   CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
                   PoissonNLLLoss, GaussianNLLLoss, MultiLabelMarginLoss,
                   MultiLabelSoftMarginLoss, MultiMarginLoss)
from .models import MultiheadAttention, TransformerEncoderLayer, GPT
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .parallel import DataParallel
from .resample import (ConstantPad1d, ConstantPad2d, ConstantPad3d, ZeroPad1d, ZeroPad2d,
                       ZeroPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                       ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, CircularPad1d,
                       CircularPad2d, CircularPad3d, Upsample, UpsamplingNearest2d,
                       UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle)
from .resample import __all__ as _resample_all
from .activation import (ELU, CELU, SELU, Hardtanh, ReLU6, Hardshrink, Softshrink, Tanhshrink,
                         Softsign, Threshold, LogSigmoid, Mish, Hardsigmoid, Hardswish, GLU, PReLU,
                         Softmin, Softmax2d)
from .activation import __all__ as _activation_all
from .layers import (Bilinear, EmbeddingBag, AlphaDropout, FeatureAlphaDropout, Dropout1d,
                     Dropout2d, Dropout3d)
from .activation import RReLU  # noqa: F401
from .loss import CTCLoss
from .conv import (Conv1d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d,
                   LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
                   LazyConvTranspose3d, Unfold, Fold, ChannelShuffle)
from .conv import __all__ as _conv_all
from .transformer import (TransformerEncoder, TransformerDecoderLayer, TransformerDecoder,
                          Transformer)
from .pool_norm import *  # noqa: F401,F403 (1-d / 3-d pools, GroupNorm, InstanceNorm...)
from .pool_norm import __all__ as _pool_norm_all
from .functional_fractional import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: F401
from . import functional, init, utils, models  # noqa: F401
from .lazy import (LazyLinear, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d,  # noqa: F401
                   UninitializedParameter, UninitializedBuffer)  # (issue 53: d2l's models)
from . import parameter as _parameter  # noqa: E402 (torch.nn.parameter.UninitializedParameter)
_parameter.UninitializedParameter = UninitializedParameter
_parameter.UninitializedBuffer = UninitializedBuffer
from .sync_batchnorm import SyncBatchNorm  # noqa: E402,F401  (issue 75)
from . import modules  # noqa: F401,E402 (torch.nn.modules.X.Y paths; after the classes)

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
__all__ += _resample_all
__all__ += _activation_all
__all__ += ["KLDivLoss", "HuberLoss", "SoftMarginLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
            "CosineEmbeddingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
            "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
            "MultiMarginLoss"]
__all__ += ["TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
__all__ += ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]
__all__ += ["Bilinear", "EmbeddingBag", "AlphaDropout", "FeatureAlphaDropout", "Dropout1d",
            "Dropout2d", "Dropout3d", "CTCLoss"]
__all__ += _conv_all
__all__ += _pool_norm_all
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d"]
__all__ += ["LazyLinear", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "UninitializedParameter", "UninitializedBuffer"]
__all__ += ["SyncBatchNorm"]
