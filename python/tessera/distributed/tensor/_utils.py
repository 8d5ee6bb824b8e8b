"""tessera.distributed.tensor._utils — compute_local_shape_and_global_offset (torch's), the shape
of this rank's shard of a DTensor and where it starts in the global tensor."""
from .placement_types import Shard, _StridedShard

__all__ = ["compute_local_shape_and_global_offset"]


def compute_local_shape_and_global_offset(global_shape, mesh, placements, skip_offset=False):
    """(local_shape, global_offset) of this rank's piece: each Shard(d) on mesh dim i cuts dim d
    into mesh.size(i) torch.chunk pieces and keeps the one at this rank's coordinate."""
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return (0,) * len(global_shape), ()
    shape = [int(s) for s in global_shape]
    offset = [0] * len(shape)
    for i, p in enumerate(placements):
        if not isinstance(p, Shard):
            continue
        if isinstance(p, _StridedShard) and mesh.size(i) > 1:
            raise NotImplementedError("compute_local_shape_and_global_offset: _StridedShard on a "
                                      "mesh dim of %d ranks" % mesh.size(i))
        d = p.dim
        if not 0 <= d < len(shape):
            raise IndexError("compute_local_shape_and_global_offset: %r on a shape of %d dims"
                             % (p, len(shape)))
        size, off = Shard.local_shard_size_and_offset(shape[d], mesh.size(i), coordinate[i])
        shape[d] = size
        offset[d] += off
    return tuple(shape), (() if skip_offset else tuple(offset))
