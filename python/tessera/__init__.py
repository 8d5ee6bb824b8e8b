"""tessera — deep learning on Tessera's C core, with PyTorch's names and habits.

Tensors live on a device ("cpu", "cuda:N", or the host-simulated "sim:N"); moving data is explicit
(`.to(device)`) and differentiable; an op that mixes devices raises tessera.DeviceError.
"""
from . import _C
from ._C import *  # noqa: F401,F403  (Tensor, factories, dtypes, devices, errors)
from ._C import _make_per_channel_quantized_tensor, _make_per_tensor_quantized_tensor  # noqa

from . import autograd, nn, optim, amp, utils, cuda  # noqa: E402,F401

# --- autograd (py-tensor): grad modes at the top level, as torch has them
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: E402,F401

# --- data, io, devices, distributed (py-data): device_scope (tf.device), tessera.sim, tessera.vision
from . import sim, vision, distributed, onnx  # noqa: E402,F401
from . import special  # noqa: E402,F401  (torch.special's names, issue 52)
from . import fft  # noqa: E402,F401  (torch.fft, issue 52)
from . import serialization  # noqa: E402,F401  (PyTorch's .pt format, issue 53)
from .serialization import save, load  # noqa: E402,F401
from . import linalg  # noqa: E402,F401  (torch.linalg's norms and products, issue 52)
from ._linalg_torch import *  # noqa: E402,F401,F403  (torch.det, svd, qr, lu... issue 52)
from . import profiler  # noqa: E402,F401  (torch.profiler, issue 56)
from ._stacking import *  # noqa: E402,F401,F403  (hstack, meshgrid... issue 52)
from ._method_functions import *  # noqa: E402,F401,F403  (clamp_min, clone, rsub... issue 52)
from ._numeric_forms import *  # noqa: E402,F401,F403  (trapezoid, pdist, histogram... issue 76)
from ._view_copies import *  # noqa: E402,F401,F403  (the views' *_copy forms, issue 52)
from ._real_forms import *  # noqa: E402,F401,F403  (real / conj on real tensors, scalar_tensor...)
from ._windows import *  # noqa: E402,F401,F403  (torch.hann_window ...)
from ._random_fill import *  # noqa: E402,F401,F403  (normal; Tensor.cauchy_... issue 52)
from ._index_put import *  # noqa: E402,F401,F403  (index_put, nonzero_static, scatter_add)
from ._strided import *  # noqa: E402,F401,F403  (as_strided_copy, empty_strided, layout...)
from ._grid_sampler import *  # noqa: E402,F401,F403  (torch.grid_sampler, affine_grid_generator)
from ._storage import TypedStorage, UntypedStorage  # noqa: E402,F401  (issue 53)
from ._generator import Generator, default_generator  # noqa: E402,F401  (torch.Generator)
from . import masked  # noqa: E402,F401  (torch.masked's reductions, issue 52)
from . import signal  # noqa: E402,F401  (torch.signal.windows, issue 52)
from . import ops  # noqa: E402,F401  (torch.ops.aten's overloads Tessera answers)
from . import library  # noqa: E402,F401  (torch.library.custom_op: torch.ops.<ns>.<name>)
from ._fake_quantize import *  # noqa: E402,F401,F403  (QAT's fake quantization, issue 78)


def is_floating_point(input):
    """torch.is_floating_point: the Tensor method as a function"""
    return input.is_floating_point()

from ._native_norm import *  # noqa: E402,F401,F403  (native_batch_norm... issue 52)
# the activations PyTorch also has at the top level (torch.selu, torch.prelu...), issue 52
from .nn.functional_act import (selu, selu_, celu, celu_, prelu,  # noqa: E402,F401
                                threshold, threshold_, hardshrink)


def chain_matmul(*matrices, out=None):
    """torch.chain_matmul: linalg.multi_dot of 2-D tensors (one: a copy)"""
    if out is not None:
        raise TypeError("chain_matmul(): out= is not supported")
    if len(matrices) == 1:
        if matrices[0].ndim != 2:
            raise RuntimeError("chain_matmul(): Tensor dimension is %d, expected 2 instead."
                               % matrices[0].ndim)
        return matrices[0].clone()
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError("chain_matmul(): Tensor %d has %d dimensions, expected 2 instead."
                               % (i, m.ndim))
    return linalg.multi_dot(matrices)
from .device_scope import device_scope, get_default_device  # noqa: E402,F401
# --- device idioms and legacy constructors (issue 53): torch.accelerator, torch.backends,
# FloatTensor / LongTensor..., randint_like, use_deterministic_algorithms
from . import accelerator, backends  # noqa: E402,F401
from ._legacy import *  # noqa: E402,F401,F403
from .backends import (use_deterministic_algorithms,  # noqa: E402,F401
                       are_deterministic_algorithms_enabled,
                       is_deterministic_algorithms_warn_only_enabled)

# --- nn, optim, amp (py-nn): torch.autocast at the top level
from .amp import autocast  # noqa: E402,F401


class memory_format:
    """torch.memory_format: how a 4-D tensor's elements lie in memory. contiguous_format (NCHW),
    channels_last (NHWC: the same shape and values; convolutions, batch-norms and elementwise ops
    keep it, the CPU's without oneDNN reorders), preserve_format (keep the input's)."""
    __slots__ = ("_name", "_ts_memory_format")

    def __init__(self, name, code):
        self._name, self._ts_memory_format = name, code

    def __repr__(self):
        return "tessera." + self._name


contiguous_format = memory_format("contiguous_format", 0)
channels_last = memory_format("channels_last", 1)
preserve_format = memory_format("preserve_format", -1)
# torch.pi / e / inf / nan / newaxis: Python's constants (timm's csatv2 multiplies by torch.pi)
import math as _math  # noqa: E402 (float is tessera.float here)
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None

if "get_num_threads" not in globals():
    get_num_threads, set_num_threads = _C._get_num_threads, _C._set_num_threads
from ._einsum import einsum  # noqa: E402,F401
from ._inplace_fns import install as _install_inplace  # noqa: E402 (torch.sin_(x)...)
_install_inplace(globals())
# sparse COO tensors (issue 53): tessera.sparse; mm / matmul / add / sum... take a sparse operand
from . import sparse  # noqa: E402
from . import multiprocessing  # noqa: E402,F401  (torch.multiprocessing: shared tensors, issue 53)
from . import func; from .func import vmap  # noqa: E402,E702,F401  (torch.func, torch.vmap)
from .sparse import sparse_coo_tensor, sparse_coo, smm, spmm  # noqa: E402,F401
sparse.install(globals())
# __version__, multiply, range, manual_seed(seed=) (issue 53: the course programs)
from ._course_aliases import install as _install_course  # noqa: E402
_install_course(globals())
# torch.jit / fx / compiler / hub, compile, _assert, finfo / iinfo and the float8 names: what
# libraries that import torch call outside tracing (issue 75; tessera.compat runs them)
from . import jit, fx, compiler, hub  # noqa: E402,F401
from .compiler import compile  # noqa: E402,F401
from .fx import _assert  # noqa: E402,F401
from ._dtype_info import install as _install_dtype_info  # noqa: E402
_install_dtype_info(globals())
# torch.greater / less / not_equal / subtract / divide...: the same functions (issue 75)
from ._op_aliases import install as _install_op_aliases  # noqa: E402
_install_op_aliases(globals())
# out= on the common ops (issue 53): one wrapper (_out.py) over the functions above; keep it last
from ._out import install as _install_out, can_cast  # noqa: E402,F401
_install_out(globals(), (special,))
