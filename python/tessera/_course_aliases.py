"""Top-level names the course programs use (issue 53: mrdbourke/pytorch-deep-learning's notebooks):
tessera.__version__ (and tessera.vision.__version__), torch.multiply (mul's alias),
torch.range (deprecated, end included), manual_seed(seed=...) as a keyword, the module
tessera.random (torch.random) and tessera.seed."""
import warnings

from . import _C

__version__ = "0.1.0"  # python/pyproject.toml's


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad=False):
    """torch.range (deprecated): floor((end - start) / step) + 1 values start + i * step, end
    included; the default dtype unless dtype is given (also for whole numbers)"""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use torch.arange, "
                  "which produces values in [start, end).", UserWarning, stacklevel=2)
    if end is None:
        raise TypeError("range(): missing required argument 'end'")
    if out is not None:
        raise TypeError("range(): out= is not supported")
    dt = _C.get_default_dtype() if dtype is None else dtype
    return _C._range(start, end, step, dt, device, requires_grad)


def install(g):
    """adds the names to tessera's namespace g (before _out's install, which gives multiply out=)"""
    g["__version__"] = __version__
    g["range"] = range
    g["multiply"] = g["mul"]
    c_manual_seed = g["manual_seed"]

    def manual_seed(seed):
        """torch.manual_seed(seed): seeds the default generator (seed may be given by name)"""
        c_manual_seed(seed)
        return g.get("default_generator")
    manual_seed.__doc__ = c_manual_seed.__doc__ or manual_seed.__doc__
    g["manual_seed"] = manual_seed
    g["vision"].__version__ = __version__
    from . import random as _random  # torch.random (a module, as in PyTorch)
    g["random"] = _random
    g["seed"] = _random.seed
    from . import distributions  # noqa: F401  (torch.distributions: Categorical, Normal)
    g["distributions"] = distributions
