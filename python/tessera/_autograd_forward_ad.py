"""tessera.autograd.forward_ad — PyTorch's forward-mode AD API (dual_level, make_dual,
unpack_dual, enter_dual_level, exit_dual_level), computed through reverse mode.

Tessera has no tangent propagation inside its ops. A dual tensor here is the primal made an input
of the autograd graph (it requires grad) together with its tangent; `unpack_dual(y)` gives y's
tangent as the Jacobian-vector product J t of y with respect to every dual tensor of the level, by
the double-vjp trick: g(u) = J^T u is linear in a dummy cotangent u, so d<g(u), t>/du = J t. The
numbers are exact (no finite differences); an op whose gradient is not differentiable again raises
the double-backward error naming it, never a tangent without its term.

Differences from PyTorch's, each raising rather than answering differently:
* tangents travel through the autograd graph, so a result computed under no_grad() has none: an
  unpack_dual under no_grad() raises instead of returning a tangent that might be missing;
* a dual tensor requires grad (it is a graph input), so in-place ops on a dual leaf raise as they do
  on any leaf that requires grad;
* custom Function's jvp / save_for_forward are not used (a Function's backward is differentiated
  instead, when it is twice differentiable).
"""
import collections

from . import _C
from ._C import Tensor

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _Level:
    def __init__(self, index):
        self.index = index
        self.duals = []  # (dual tensor, tangent), in the order made
        self.tangent_of = {}  # id(dual) -> tangent


_levels = []


def enter_dual_level():
    """Opens a new forward-AD level (dual_level's __enter__) and returns its index. PyTorch allows
    one level at a time."""
    if _levels:
        raise RuntimeError("Currently only a single dual level is supported: exit the current "
                           "level first (tessera.autograd.forward_ad)")
    _levels.append(_Level(len(_levels)))
    return _levels[-1].index


def exit_dual_level(*, level=None):
    """Closes the current level: its dual tensors lose their tangents."""
    if not _levels:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was "
                           "created. This is not supported.")
    if level is not None and level != _levels[-1].index:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was "
                           "created. This is not supported.")
    _levels.pop()


class dual_level:
    """with forward_ad.dual_level(): ... — the scope in which dual tensors carry tangents."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def _level(level, fn):
    if not _levels:
        raise RuntimeError("%s: Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first." % fn if fn == "make_dual" else
                           "%s: no forward AD level exists" % fn)
    if level is not None and level != _levels[-1].index:
        raise RuntimeError("%s: level %r is not the current forward AD level" % (fn, level))
    return _levels[-1]


def make_dual(tensor, tangent, *, level=None):
    """A tensor equal to `tensor` that carries `tangent` (of the same shape, a floating dtype) in
    the current level; results of ops on it carry tangents that unpack_dual reads."""
    lv = _level(level, "make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual: expected Tensors, got %s and %s"
                        % (type(tensor).__name__, type(tangent).__name__))
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError("Expected primal to be floating point or complex, but got: %s"
                         % tensor.dtype)
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError("Expected tangent to be floating point or complex, but got: %s"
                         % tangent.dtype)
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that "
                           "of the original Tensor, this is not supported. Tensor is of size %s "
                           "while the given forward gradient is of size %s."
                           % (list(tensor.shape), list(tangent.shape)))
    if tangent.device != tensor.device:
        raise RuntimeError("make_dual: the tangent is on %s and the primal on %s: they must be on "
                           "one device" % (tangent.device, tensor.device))
    # a graph input of its own: a view keeps the primal's reverse-mode history, a detached copy
    # of the handle (same memory) starts one
    dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach().requires_grad_(True)
    lv.duals.append((dual, tangent))
    lv.tangent_of[id(dual)] = tangent
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of tensor: tangent None when it depends on no dual tensor of the level."""
    if not isinstance(tensor, Tensor):
        raise TypeError("unpack_dual: expected a Tensor, got %s" % type(tensor).__name__)
    if not _levels:
        return UnpackedDualTensor(tensor, None)
    lv = _level(level, "unpack_dual")
    if id(tensor) in lv.tangent_of and any(d is tensor for d, _ in lv.duals):
        return UnpackedDualTensor(tensor.detach(), lv.tangent_of[id(tensor)])
    if not lv.duals or not tensor.requires_grad:
        if lv.duals and not _C.is_grad_enabled():
            raise RuntimeError("unpack_dual: Tessera carries tangents through the autograd graph, "
                               "which no_grad() turns off: compute and unpack the result with "
                               "grad mode on")
        return UnpackedDualTensor(tensor, None)
    if not _C.is_grad_enabled():
        raise RuntimeError("unpack_dual: Tessera carries tangents through the autograd graph, "
                           "which no_grad() turns off: unpack with grad mode on")
    return UnpackedDualTensor(tensor.detach(), _tangent(lv, tensor))


def _tangent(lv, y):
    """y's tangent J t over the level's duals: None when y depends on none of them; zeros when it
    does only through paths whose gradient does not involve the cotangent"""
    from ._double_vjp import double_vjp
    duals = [d for d, _ in lv.duals]
    tangents = [t for _, t in lv.duals]
    higher = any(t.requires_grad for t in tangents)
    first, (jt,) = double_vjp([y], duals, tangents, higher)
    if all(g is None for g in first):
        return None
    return _C.zeros_like(y) if jt is None else jt
