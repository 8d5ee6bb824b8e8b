"""tessera.backends — torch.backends' switches and queries, so that programs setting them run:

* `tessera.use_deterministic_algorithms(mode, warn_only=False)` /
  `are_deterministic_algorithms_enabled()`: stored, no effect (nothing to switch).
* cudnn: `benchmark`, `deterministic`, `enabled`, `allow_tf32` are stored and read back but change
  nothing (Tessera has no cuDNN: its convolutions choose no algorithm by timing and have no
  nondeterministic variant to switch off); `is_available()` is False, `version()` None.
* cuda: `matmul.allow_tf32` is Tessera's TF32 knob (ts_cuda_set_allow_tf32: float32 matmuls and
  convolutions on CUDA use TF32 tensor cores while it is on; off by default, as PyTorch's);
  `matmul.allow_fp16_reduced_precision_reduction` / `allow_bf16_...` are stored only;
  `is_built()` says whether this Tessera was built with CUDA.
* mps: `is_available()` and `is_built()` are False. mkldnn, mkl: `is_available()` False; openmp:
  True (the cpu kernels run on OpenMP)."""
from . import cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp"]

_deterministic = [False, False]  # torch.use_deterministic_algorithms's (mode, warn_only)


def use_deterministic_algorithms(mode, *, warn_only=False):
    """tessera.use_deterministic_algorithms(mode, warn_only=False): stored and read back by
    are_deterministic_algorithms_enabled(). Tessera has no nondeterministic kernel to refuse or
    replace, so it changes nothing."""
    if not isinstance(mode, bool):
        raise TypeError("use_deterministic_algorithms(): argument 'mode' must be bool, not %s"
                        % type(mode).__name__)
    _deterministic[:] = [mode, bool(warn_only)]


def are_deterministic_algorithms_enabled():
    return _deterministic[0]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic[1]
