"""tessera.distributed.tensor._api — DTensor, distribute_tensor.

A DTensor is a Tensor (a subclass sharing its local tensor's storage) with a DeviceMesh and one
placement per mesh dim. Tessera runs DTensor in one process: the mesh holds one rank, so every
placement's local tensor is the whole tensor (Shard(d) of one chunk, Replicate, Partial of one
part) and the values are exactly PyTorch's. Meshes of more ranks are refused by DeviceMesh.

Autograd: as PyTorch's. distribute_tensor makes a leaf; from_local and redistribute of a tensor
with history (under grad mode) keep it (Tensor.as_subclass: a differentiable alias), so gradients
flow back to the local tensor; to_local() and full_tensor() are differentiable views. Ops on a
DTensor return plain Tensors (PyTorch returns DTensors).
"""
from tessera import _C

from ..device_mesh import DeviceMesh, init_device_mesh
from .placement_types import Partial, Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "distribute_tensor"]

Tensor = _C.Tensor


class TensorMeta:
    __slots__ = ("shape", "stride", "dtype")

    def __init__(self, shape, stride, dtype):
        self.shape, self.stride, self.dtype = shape, stride, dtype

    def __repr__(self):
        return "TensorMeta(shape=%s, stride=%s, dtype=%s)" % (self.shape, self.stride, self.dtype)


class DTensorSpec:
    """mesh, placements and the global shape/stride/dtype of a DTensor (torch's _spec)."""

    __slots__ = ("mesh", "placements", "tensor_meta")

    def __init__(self, mesh, placements, tensor_meta=None):
        self.mesh, self.placements, self.tensor_meta = mesh, tuple(placements), tensor_meta

    @property
    def shape(self):
        return self.tensor_meta.shape

    @property
    def stride(self):
        return self.tensor_meta.stride

    @property
    def ndim(self):
        return len(self.tensor_meta.shape)

    @property
    def device_mesh(self):
        return self.mesh

    def __eq__(self, other):
        return (isinstance(other, DTensorSpec) and self.mesh == other.mesh
                and self.placements == other.placements)

    def __hash__(self):
        return hash((self.mesh, self.placements))

    def __repr__(self):
        return "DTensorSpec(mesh=%r, placements=%r)" % (self.mesh, self.placements)


def _check_placements(op, placements, mesh, ndim):
    """placements as a tuple of mesh.ndim Placements, Shard dims made non-negative."""
    if placements is None:
        return tuple(Replicate() for _ in range(mesh.ndim))
    placements = list(placements)
    if len(placements) != mesh.ndim:
        raise ValueError("%s: `placements` must have the same length as `device_mesh.ndim`! Found "
                         "placements length: %d, and device_mesh.ndim: %d."
                         % (op, len(placements), mesh.ndim))
    partial_ops = set()
    for i, p in enumerate(placements):
        if not isinstance(p, Placement):
            raise TypeError("%s: placements[%d] is %r, not a Placement (Shard, Replicate, Partial)"
                            % (op, i, p))
        if isinstance(p, Shard):
            d = p.dim + ndim if p.dim < 0 else p.dim
            if not 0 <= d < max(ndim, 1) or ndim == 0:
                raise IndexError("%s: %r on a tensor of %d dims" % (op, p, ndim))
            placements[i] = (_StridedShard(d, p.split_factor) if isinstance(p, _StridedShard)
                             else Shard(d))
        elif isinstance(p, Partial):
            partial_ops.add(p.reduce_op)
    if len(partial_ops) > 1:
        raise ValueError("%s: placements mix Partial reduce types %s" % (op, sorted(partial_ops)))
    return tuple(placements)


def _mesh_or_default(mesh, like):
    if mesh is not None:
        if not isinstance(mesh, DeviceMesh):
            raise TypeError("device_mesh must be a DeviceMesh, got %s" % type(mesh).__name__)
        return mesh
    from tessera import distributed
    return init_device_mesh(like.device.type, (distributed.get_world_size(),))


def _to_mesh_device(t, mesh):
    if t.device.type != mesh.device_type and not t.is_meta:
        return t.to(mesh.device_type)
    return t


def _make(local, mesh, placements, shape=None, stride=None, requires_grad=False):
    if local.requires_grad and _C.is_grad_enabled():
        d = Tensor.as_subclass(local, DTensor)  # keeps the graph: gradients reach local
    else:
        d = Tensor._make_subclass(DTensor, local, requires_grad)
    shape = tuple(local.shape) if shape is None else tuple(shape)
    stride = tuple(local.stride()) if stride is None else tuple(stride)
    d._spec = DTensorSpec(mesh, placements, TensorMeta(shape, stride, local.dtype))
    return d


class DTensor(Tensor):
    """torch.distributed.tensor.DTensor in one process (see the module's doc). Make one with
    distribute_tensor(tensor, mesh, placements) or DTensor.from_local(local, mesh, placements)."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("DTensor(...) is not constructed directly; use "
                        "DTensor.from_local(local, device_mesh, placements) or "
                        "distribute_tensor(tensor, device_mesh, placements)")

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None, grad_placements=None):
        """A DTensor whose local tensor on this rank is local_tensor (sharing its storage)."""
        if isinstance(local_tensor, DTensor):
            raise RuntimeError("the local_tensor argument only accepts torch.Tensor but got %s "
                               "value." % type(local_tensor))
        mesh = _mesh_or_default(device_mesh, local_tensor)
        local_tensor = _to_mesh_device(local_tensor, mesh)
        placements = _check_placements("DTensor.from_local", placements, mesh, local_tensor.dim())
        if shape is not None and tuple(shape) != tuple(local_tensor.shape):
            raise ValueError("DTensor.from_local: shape=%s, but on a one-rank mesh the global "
                             "shape is the local tensor's %s" % (tuple(shape),
                                                                tuple(local_tensor.shape)))
        return _make(local_tensor, mesh, placements, shape, stride)

    # -- the spec
    @property
    def device_mesh(self):
        return self._spec.mesh

    @property
    def placements(self):
        return self._spec.placements

    @property
    def _local_tensor(self):
        """torch's attribute: the local shard (on one rank, the DTensor itself)."""
        return self

    def to_local(self, *, grad_placements=None):
        """This rank's local tensor: a view of the DTensor (gradients flow back to it)."""
        return Tensor.view_as(self, self)

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor: on one rank, the local tensor (a differentiable view)."""
        return Tensor.view_as(self, self)

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False,
                     forward_dtype=None, backward_dtype=None):
        """The same values under other placements (one rank: nothing moves; Partial -> Replicate
        reduces over one part)."""
        mesh = self.device_mesh if device_mesh is None else device_mesh
        if mesh != self.device_mesh:
            raise RuntimeError("redistribute: cross-mesh redistribution (%r -> %r) is not "
                               "supported" % (self.device_mesh, mesh))
        if placements is None:
            raise RuntimeError("redistribute: placements is needed")
        placements = _check_placements("redistribute", placements, mesh, self.dim())
        for new in placements:
            if isinstance(new, Partial) and not any(isinstance(p, Partial)
                                                    for p in self.placements):
                raise RuntimeError("redistribute: cannot redistribute %s to %s (a Partial "
                                   "placement cannot be made from a reduced one)"
                                   % (self.placements, placements))
        src = self
        if forward_dtype is not None and forward_dtype != self.dtype:
            src = self.to(forward_dtype)
        return _make(src, mesh, placements, self._spec.shape, self._spec.stride)

    def __repr__(self):
        return "DTensor(local_tensor=%s, device_mesh=%r, placements=%r)" % (
            Tensor.__repr__(Tensor.detach(self)), self.device_mesh, self.placements)

    def __reduce_ex__(self, proto):
        return (_rebuild_dtensor, (Tensor.detach(self).clone(), self.device_mesh.device_type,
                                   self.device_mesh.mesh_dim_names, self.placements,
                                   self.requires_grad))

    def __deepcopy__(self, memo):
        out = _make(Tensor.clone(Tensor.detach(self)), self.device_mesh, self.placements,
                    self._spec.shape, self._spec.stride, self.requires_grad)
        memo[id(self)] = out
        return out


def _rebuild_dtensor(local, device_type, names, placements, requires_grad):
    mesh = init_device_mesh(device_type, (1,) * max(len(placements), 1), mesh_dim_names=names)
    return _make(local, mesh, placements, requires_grad=requires_grad)


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """A leaf DTensor over device_mesh holding tensor's values (detached from tensor, its
    requires_grad kept), as PyTorch's distribute_tensor."""
    if isinstance(tensor, DTensor):
        mesh = tensor.device_mesh if device_mesh is None else device_mesh
        if tensor.device_mesh != mesh:
            raise ValueError("Cannot distribute a DTensor with device mesh %r to a different "
                             "device mesh %r." % (tensor.device_mesh, mesh))
        want = _check_placements("distribute_tensor", placements, mesh, tensor.dim())
        if tensor.placements != want:
            raise ValueError("Cannot distribute a DTensor with placements %s to a different "
                             "placements %s. do you want to call `redistribute` instead?"
                             % (tensor.placements, list(want)))
        return tensor
    if not tensor.is_leaf:
        raise RuntimeError("`distribute_tensor` should be used to distribute leaf tensors! but "
                           "found non-leaf tensor!")
    mesh = _mesh_or_default(device_mesh, tensor)
    local = _to_mesh_device(tensor, mesh).detach()
    placements = _check_placements("distribute_tensor", placements, mesh, local.dim())
    return _make(local, mesh, placements, requires_grad=tensor.requires_grad)
