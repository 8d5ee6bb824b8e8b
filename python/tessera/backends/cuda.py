"""tessera.backends.cuda — `matmul.allow_tf32` (Tessera's TF32 knob), `is_built()`."""
from .. import _C


class _Matmul:
    """torch.backends.cuda.matmul: allow_tf32 reads and sets the C library's switch."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _C._cuda_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, on):
        _C._cuda_set_allow_tf32(bool(on))

    def __setattr__(self, name, value):
        if name not in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                        "allow_bf16_reduced_precision_reduction"):
            raise AttributeError("Unknown attribute " + name)
        super().__setattr__(name, value)


matmul = _Matmul()


def is_built():
    """True when this Tessera was built with CUDA (whether or not a GPU is present)."""
    return bool(getattr(_C, "_cuda_is_built", _C._cuda_is_available)())


def preferred_linalg_library(backend=None):
    return "default"


def is_flash_attention_available():
    return False
