"""How Tensors cross process boundaries (torch.multiprocessing.reductions' role).

Registered with multiprocessing.reduction.ForkingPickler, which pickles what a Process receives
under the spawn and forkserver start methods and everything a multiprocessing Queue / Pipe
carries (a fork child inherits its arguments without pickling; a shared mapping stays shared
across fork). A cpu tensor whose storage is in shared memory (Tensor.share_memory_) travels as a
file descriptor of that memory (multiprocessing's DupFd: passed to a spawned child with its
command line, or through the resource sharer over a Unix socket, PyTorch's "file_descriptor"
strategy) plus its geometry, and the receiver maps the same pages: writes on either side reach the
other. Any other tensor travels by value, an ordinary copy (its normal pickling). PyTorch instead
moves a cpu tensor that is not shared into shared memory as it sends it; Tessera leaves the
sender's tensor where it is. The tensor's class comes back (an nn.Parameter stays one, with its
requires_grad)."""
import multiprocessing
import os
from multiprocessing.reduction import ForkingPickler

from .. import _C
from .._C import Tensor


def _refuse_non_leaf(t):
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the "
            "queue).")


def rebuild_shared_tensor(cls, dupfd, storage_nbytes, dtype, size, stride, storage_offset,
                          requires_grad, attrs):
    """the receiving side: a tensor over the sender's shared memory"""
    fd = dupfd.detach()
    try:
        t = _C._from_shared_fd(fd, storage_nbytes, dtype, size, stride, storage_offset)
    finally:
        os.close(fd)  # the tensor's storage holds its own duplicate
    if cls is not Tensor:
        t = Tensor._make_subclass(cls, t, requires_grad)
    elif requires_grad:
        t.requires_grad_(True)
    if attrs:
        t.__dict__.update(attrs)
    return t


def reduce_tensor(t):
    _refuse_non_leaf(t)
    if t.device.type == "cuda":
        raise RuntimeError("tessera.multiprocessing: a cuda tensor cannot be sent to another "
                           "process (that needs CUDA IPC, which Tessera does not have); send "
                           "t.cpu() instead")
    if t.device.type != "cpu" or not t.is_shared():
        return t.__reduce_ex__(2)  # by value
    fd, storage_nbytes, byte_offset = t._shared_fd()
    attrs = {k: v for k, v in getattr(t, "__dict__", {}).items()}
    return (rebuild_shared_tensor,
            (type(t), multiprocessing.reduction.DupFd(fd), storage_nbytes, t.dtype,
             tuple(t.shape), tuple(t.stride()), byte_offset // t.element_size(),
             t.requires_grad, attrs))


def init_reductions():
    """registers reduce_tensor for Tensor and nn.Parameter (the pickler's table is looked up by
    exact class); a subclass of its own registers itself with
    ForkingPickler.register(cls, reduce_tensor)"""
    from ..nn.parameter import Parameter
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
