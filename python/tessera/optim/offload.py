"""tessera.optim.offload: optimizer offload (DeepSpeed's ZeRO-Offload) over ts_optim_offload
(src/optim/offload.c; docs/MEMORY_PLANNING.md)."""


def _c_of(optimizer, fn):
    c = getattr(optimizer, "_c", None)
    if c is None or not hasattr(c, "offload"):
        raise TypeError(f"tessera.optim.{fn}(): expected one of tessera.optim's optimizers "
                        f"(SGD, Adam, AdamW, ...), got {type(optimizer).__name__}")
    return c


def offload(optimizer):
    """Keeps optimizer's float32 master weights and state on the host (pinned where CUDA is
    available): each step() copies the gradients to the host, steps there with the CPU kernels
    (the device step's math) and copies the weights back in each parameter's dtype. zero_grad,
    schedulers, clip_grad_norm_, GradScaler and state dicts keep working (saved state is float32
    on the cpu and loads with or without offload). Parameters must be on an accelerator (cuda, sim)
    and contiguous. Returns optimizer."""
    _c_of(optimizer, "offload").offload()
    return optimizer


def is_offloaded(optimizer):
    """Whether offload(optimizer) was called."""
    return _c_of(optimizer, "is_offloaded").is_offloaded()
