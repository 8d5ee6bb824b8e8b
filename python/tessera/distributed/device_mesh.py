"""tessera.distributed.device_mesh — torch.distributed.device_mesh: DeviceMesh (an n-d array of
ranks, optionally with named dims) and init_device_mesh.

Tessera's DTensor runs in one process: a mesh holds exactly one rank, this process's, so each of
its dims has size 1 (a world of one, or the mesh of this rank alone). A mesh of more ranks raises
NotImplementedError naming the limit; a mesh bigger than the world raises RuntimeError as
PyTorch's does. The mesh's group is the world's (tessera.distributed's collectives take it).
"""
import math

from tessera import _C

__all__ = ["DeviceMesh", "init_device_mesh"]


class _MeshGroup:
    """The process group of a one-rank mesh: the world of one (collectives accept it as
    group=None)."""

    _ts_world = True

    def size(self):
        return 1

    def rank(self):
        return 0

    def __repr__(self):
        return "<tessera.distributed mesh group: the world of one>"


_GROUP = _MeshGroup()


def _world():
    from tessera import distributed
    return distributed.get_rank(), distributed.get_world_size()


def _nested(x):
    """A nested list of ints from a Tensor, list or tuple."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [_nested(v) for v in x]
    return int(x)


def _shape_of(nested):
    shape = []
    while isinstance(nested, list):
        shape.append(len(nested))
        nested = nested[0] if nested else None
    return tuple(shape)


def _flat(nested):
    if isinstance(nested, list):
        return [v for item in nested for v in _flat(item)]
    return [nested]


class DeviceMesh:
    """DeviceMesh(device_type, mesh, *, mesh_dim_names=None): the ranks of mesh (a nested list or
    an int Tensor) laid out in its shape. Tessera: one rank only (this process's)."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None, backend_override=None,
                 _init_backend=True, **kwargs):
        nested = _nested(mesh)
        if not isinstance(nested, list):
            nested = [nested]
        shape = _shape_of(nested)
        ranks = _flat(nested)
        if len(ranks) != math.prod(shape):
            raise ValueError("DeviceMesh: mesh %r is ragged" % (nested,))
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != len(shape):
                raise ValueError("DeviceMesh: mesh_dim_names %s has %d names for a %d-d mesh"
                                 % (mesh_dim_names, len(mesh_dim_names), len(shape)))
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise RuntimeError("DeviceMesh: mesh_dim_names %s repeats a name"
                                   % (mesh_dim_names,))
        rank, world = _world()
        if len(ranks) > world:
            raise RuntimeError("Mesh should not be bigger than default world size %d, but found "
                               "%d ranks!" % (world, len(ranks)))
        if len(ranks) != 1:
            raise NotImplementedError(
                "DeviceMesh: a mesh of %d ranks %s; tessera.distributed.tensor runs DTensor in one "
                "process only (a mesh of this rank alone, every dim of size 1)" % (len(ranks),
                                                                                   shape))
        if ranks[0] != rank:
            raise RuntimeError("DeviceMesh: the mesh %s does not hold this process's rank %d"
                               % (nested, rank))
        self.device_type = str(device_type)
        self.mesh = _C.tensor(nested, dtype=_C.int32)
        self.mesh_dim_names = mesh_dim_names
        self._shape = shape
        self._rank = rank

    # -- shape
    @property
    def ndim(self):
        return len(self._shape)

    @property
    def shape(self):
        return self._shape

    def size(self, mesh_dim=None):
        if mesh_dim is None:
            return math.prod(self._shape)
        return self._shape[self._dim_index(mesh_dim)]

    def __len__(self):
        return self._shape[0] if self._shape else 1

    def _dim_index(self, mesh_dim):
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError("Mesh dimension '%s' does not exist. Available mesh dimensions "
                               "are: mesh_dim_names=%s" % (mesh_dim, self.mesh_dim_names))
            return self.mesh_dim_names.index(mesh_dim)
        d = int(mesh_dim)
        if not -self.ndim <= d < self.ndim:
            raise IndexError("DeviceMesh: mesh_dim %d out of range for a %d-d mesh"
                             % (d, self.ndim))
        return d % self.ndim

    # -- ranks
    def get_rank(self):
        return self._rank

    def get_local_rank(self, mesh_dim=None):
        if mesh_dim is None and self.ndim > 1:
            raise RuntimeError("Found the DeviceMesh have %d dimensions; Optional kwarg "
                               "`mesh_dim` needs to be specified when device_mesh.ndim > 1."
                               % self.ndim)
        self._dim_index(0 if mesh_dim is None else mesh_dim)
        return 0

    def get_coordinate(self):
        return [0] * self.ndim

    def get_group(self, mesh_dim=None):
        if mesh_dim is None and self.ndim > 1:
            raise RuntimeError("Found the DeviceMesh have %d dimensions; Optional kwarg "
                               "`mesh_dim` needs to be specified when device_mesh.ndim > 1."
                               % self.ndim)
        if mesh_dim is not None:
            self._dim_index(mesh_dim)
        return _GROUP

    def get_all_groups(self):
        return [_GROUP] * self.ndim

    # -- sub-meshes
    def __getitem__(self, names):
        if isinstance(names, str):
            names = (names,)
        names = tuple(names)
        dims = [self._dim_index(n) for n in names]
        if not all(isinstance(n, str) for n in names):
            raise TypeError("DeviceMesh[...]: mesh dims are selected by name")
        return DeviceMesh(self.device_type, _C.tensor([self._rank]).reshape([1] * len(dims)),
                          mesh_dim_names=names)

    def _flatten(self, mesh_dim_name=None, backend_override=None):
        name = mesh_dim_name or "_".join(self.mesh_dim_names or ())
        return DeviceMesh(self.device_type, [self._rank], mesh_dim_names=(name,) if name else None)

    # -- identity
    def __eq__(self, other):
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return (self.device_type == other.device_type and self._shape == other._shape
                and self.mesh_dim_names == other.mesh_dim_names)

    def __hash__(self):
        return hash((self.device_type, self._shape, self.mesh_dim_names))

    def __repr__(self):
        if self.mesh_dim_names:
            dims = ", ".join("%s=%d" % (n, s) for n, s in zip(self.mesh_dim_names, self._shape))
        else:
            dims = ", ".join(str(s) for s in self._shape)
        return "DeviceMesh((%s), '%s')" % (dims, self.device_type)


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A DeviceMesh of mesh_shape over the world's ranks in order (prod(mesh_shape) must be the
    world size; tessera: 1)."""
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if mesh_dim_names is not None and len(mesh_dim_names) != len(mesh_shape):
        raise RuntimeError("mesh_shape and mesh_dim_names should have same length! Found len(%s) "
                           "and len(%s)." % (mesh_shape, tuple(mesh_dim_names)))
    if device_type and not str(device_type).isalpha():
        raise RuntimeError("Device type with index is not supported but got %s. If you maintained "
                           "a 'torch.device' object, it's recommended to pass in 'device.type'."
                           % (device_type,))
    rank, world = _world()
    n = math.prod(mesh_shape)
    if n > world:
        raise RuntimeError("Mesh should not be bigger than default world size %d, but found %d "
                           "ranks!" % (world, n))
    if n != world:
        raise RuntimeError("init_device_mesh: mesh_shape %s holds %d ranks but the world has %d"
                           % (mesh_shape, n, world))
    mesh = _C.arange(n, dtype=_C.int32).reshape(list(mesh_shape))
    return DeviceMesh(device_type, mesh, mesh_dim_names=mesh_dim_names,
                      backend_override=backend_override)
