"""tessera.distributed.tensor (torch.distributed.tensor) and tessera.distributed.device_mesh in one
process: placements, DeviceMesh, DTensor, distribute_tensor, compute_local_shape_and_global_offset.
Expected values were printed by PyTorch 2.15 in a world of one (gloo); what Tessera refuses (meshes
of several ranks) raises an error naming the limit; gradients flow through from_local,
redistribute, to_local and full_tensor as PyTorch's."""
import copy
import pickle

import pytest

import tessera
import tessera.distributed as dist
from tessera.distributed.device_mesh import DeviceMesh, init_device_mesh
from tessera.distributed.tensor import (DTensor, Partial, Placement, Replicate, Shard,
                                        distribute_tensor)
from tessera.distributed.tensor._utils import compute_local_shape_and_global_offset
from tessera.distributed.tensor.placement_types import _StridedShard

pytestmark = pytest.mark.skipif(dist.get_world_size() != 1,
                                reason="these tests run in a world of one (no launcher)")


def test_placements_match_pytorch():
    assert [repr(p) for p in (Shard(0), Replicate(), Partial(), Partial("max"),
                              _StridedShard(0, split_factor=2))] == \
        ["Shard(dim=0)", "Replicate()", "Partial(sum)", "Partial(max)", "_StridedShard(dim=0, sf=2)"]
    assert [str(p) for p in (Shard(0), Replicate(), Partial())] == ["S(0)", "R", "P(sum)"]
    assert Shard(0) == Shard(0) and Shard(0) != Shard(1) and Replicate() == Replicate()
    assert _StridedShard(0, split_factor=2) != Shard(0)
    assert Shard(1).is_shard() and Shard(1).is_shard(1) and not Shard(1).is_shard(0)
    assert Replicate().is_replicate() and Partial().is_partial() and not Shard(0).is_replicate()
    assert hash(Shard(0)) == hash(Shard(0)) and len({Shard(0), Shard(0), Replicate()}) == 2
    assert all(isinstance(p, Placement) for p in (Shard(0), Replicate(), Partial()))


@pytest.mark.parametrize("n,k,r,expected", [
    (10, 4, 0, (3, 0)), (10, 4, 1, (3, 3)), (10, 4, 2, (3, 6)), (10, 4, 3, (1, 9)),
    (8, 4, 3, (2, 6)), (3, 4, 3, (0, 3)), (0, 2, 1, (0, 0)), (5, 1, 0, (5, 0))])
def test_shard_size_and_offset_match_pytorch(n, k, r, expected):
    assert Shard.local_shard_size_and_offset(n, k, r) == expected


def test_device_mesh_of_one():
    m = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    assert (m.ndim, m.size(), m.shape, m.get_local_rank(), m.get_rank()) == (1, 1, (1,), 0, 0)
    assert m.mesh.tolist() == [0] and m.mesh.dtype == tessera.int32 and m.device_type == "cpu"
    m2 = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    assert (m2.ndim, m2.size(), m2.size(1), m2.shape) == (2, 1, 1, (1, 1))
    assert m2.get_local_rank("tp") == 0 and m2.get_coordinate() == [0, 0]
    assert m2.mesh.tolist() == [[0]] and m2.mesh_dim_names == ("dp", "tp")
    sub = m2["tp"]
    assert sub.ndim == 1 and sub.mesh_dim_names == ("tp",) and sub == m
    assert m == init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    assert m != init_device_mesh("cpu", (1,), mesh_dim_names=("dp",))
    assert repr(m) == "DeviceMesh((tp=1), 'cpu')"
    with pytest.raises(RuntimeError, match="`mesh_dim` needs to be specified"):
        m2.get_local_rank()
    with pytest.raises(KeyError, match="Mesh dimension 'ep' does not exist"):
        m2["ep"]
    assert DeviceMesh("cpu", [0]) == init_device_mesh("cpu", (1,))
    assert dist.DeviceMesh is DeviceMesh and dist.init_device_mesh is init_device_mesh


def test_mesh_of_several_ranks_names_the_limit():
    with pytest.raises(RuntimeError, match=r"^Mesh should not be bigger than default world size "
                                           r"1, but found 2 ranks!$"):
        init_device_mesh("cpu", (2,))
    with pytest.raises(RuntimeError, match="world size 1, but found 4 ranks"):
        DeviceMesh("cpu", [[0, 1], [2, 3]])
    with pytest.raises(RuntimeError, match="should have same length"):
        init_device_mesh("cpu", (1,), mesh_dim_names=("a", "b"))
    with pytest.raises(RuntimeError, match="Device type with index is not supported"):
        init_device_mesh("cuda:0", (1,))


def test_mesh_group_is_the_world_of_one():
    m = init_device_mesh("cpu", (1,))
    g = m.get_group()
    assert dist.get_process_group_ranks(g) == [0]
    t = tessera.tensor([1.0, 2.0])
    if dist.is_initialized():
        dist.all_reduce(t, group=g)                     # a world of one: unchanged
        assert t.tolist() == [1.0, 2.0]
    else:                                               # the group is taken; the call needs init
        with pytest.raises(tessera.StateError, match="ts_dist_init"):
            dist.all_reduce(t, group=g)
    out = tessera.empty(2)
    dist.all_to_all_single(out, t, group=g)
    assert out.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="one block of 2 rows"):
        dist.all_to_all_single(out, t, input_split_sizes=[1, 1])
    with pytest.raises(NotImplementedError, match="subgroups"):
        dist.all_reduce(t, group=object())


@pytest.mark.parametrize("placement", [Shard(1), Shard(-1), Replicate(), Partial()])
def test_distribute_tensor(device, placement):
    m = init_device_mesh("cpu" if device == "cpu" else "sim", (1,), mesh_dim_names=("tp",))
    x = tessera.arange(12.0, device=device).reshape(3, 4)
    d = distribute_tensor(x, m, [placement])
    assert type(d) is DTensor and isinstance(d, tessera.Tensor)
    assert tuple(d.shape) == (3, 4) and d.dtype == tessera.float32 and not d.requires_grad
    assert d.placements == ((Shard(1),) if isinstance(placement, Shard) else (placement,))
    assert d.device_mesh == m and d.is_leaf
    assert d.to_local().tolist() == x.tolist() and d.full_tensor().tolist() == x.tolist()
    assert tuple(d._local_tensor.shape) == (3, 4)
    assert (d + 1).tolist() == (x + 1).tolist()        # ops see the whole tensor
    r = d.redistribute(m, [Replicate()])
    assert r.placements == (Replicate(),) and r.tolist() == x.tolist()
    assert repr(d).startswith("DTensor(local_tensor=tensor([[ 0.,  1.,  2.,  3.],")
    assert repr(d).endswith("device_mesh=%r, placements=%r)" % (m, d.placements))


def test_distribute_tensor_errors():
    m = init_device_mesh("cpu", (1,))
    x = tessera.ones(2, 3)
    with pytest.raises(ValueError, match="`placements` must have the same length as "
                                         "`device_mesh.ndim`"):
        distribute_tensor(x, m, [Shard(0), Shard(1)])
    with pytest.raises(IndexError, match="Shard"):
        distribute_tensor(x, m, [Shard(2)])
    with pytest.raises(RuntimeError, match="should be used to distribute leaf tensors"):
        distribute_tensor(tessera.ones(2, requires_grad=True) * 2, m, [Replicate()])
    with pytest.raises(ValueError, match="mix Partial reduce types"):
        distribute_tensor(x, init_device_mesh("cpu", (1, 1)), [Partial("sum"), Partial("max")])
    with pytest.raises(TypeError, match="not constructed directly"):
        DTensor(x)
    d = distribute_tensor(x, m, [Shard(0)])
    assert distribute_tensor(d, m, [Shard(0)]) is d
    with pytest.raises(ValueError, match="do you want to call `redistribute` instead"):
        distribute_tensor(d, m, [Replicate()])
    with pytest.raises(RuntimeError, match="cannot redistribute"):
        d.redistribute(m, [Partial()])


def test_compute_local_shape_and_global_offset_matches_pytorch():
    m = init_device_mesh("cpu", (1,))
    m2 = init_device_mesh("cpu", (1, 1))
    assert compute_local_shape_and_global_offset((3, 4), m, [Shard(1)]) == ((3, 4), (0, 0))
    assert compute_local_shape_and_global_offset((3, 4), m2, [Replicate(), Shard(0)]) == \
        ((3, 4), (0, 0))


def test_autograd_through_dtensor():
    m = init_device_mesh("cpu", (1,))
    leaf = tessera.ones(2, 3, requires_grad=True)
    d = distribute_tensor(leaf, m, [Replicate()])
    assert d.requires_grad and d.is_leaf and d is not leaf     # PyTorch: a new leaf
    (d.to_local() * 3).sum().backward()
    assert d.grad.tolist() == [[3.0] * 3] * 2 and leaf.grad is None
    (d.full_tensor() * 2).sum().backward()
    assert d.grad.tolist() == [[5.0] * 3] * 2
    # from_local and redistribute keep the graph to the local tensor, as PyTorch's
    f = DTensor.from_local(leaf * 2, m, [Replicate()])
    assert type(f) is DTensor and not f.is_leaf and f.requires_grad
    (f.to_local() * 3).sum().backward()
    assert leaf.grad.tolist() == [[6.0] * 3] * 2
    (DTensor.from_local(leaf, m, [Shard(0)]).full_tensor() ** 2).sum().backward()
    assert leaf.grad.tolist() == [[8.0] * 3] * 2                 # + 2 x leaf
    r = d.redistribute(m, [Shard(1)])
    assert type(r) is DTensor and r.placements == (Shard(1),) and not r.is_leaf
    (r.to_local() * 4).sum().backward()
    assert d.grad.tolist() == [[9.0] * 3] * 2                    # 5 + 4
    h = d.redistribute(m, [Replicate()], forward_dtype=tessera.float64)
    assert h.dtype == tessera.float64
    (h.full_tensor() * 0.5).sum().backward()
    assert d.grad.dtype == tessera.float32 and d.grad.tolist() == [[9.5] * 3] * 2
    with pytest.raises(TypeError, match="subclass of Tensor"):
        leaf.as_subclass(int)
    with tessera.no_grad():
        g = DTensor.from_local(leaf * 2, m, [Replicate()])
    assert type(g) is DTensor and g.tolist() == [[2.0] * 3] * 2 and not g.requires_grad


def test_from_local_and_copies():
    m = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    local = tessera.tensor([[1.0, 2.0], [3.0, 4.0]])
    d = DTensor.from_local(local, m, [Shard(-1)], run_check=False, shape=(2, 2), stride=(2, 1))
    assert d.placements == (Shard(1),) and d.stride() == (2, 1)
    local[0, 0] = 9.0                                    # shares the local tensor's storage
    assert d.tolist()[0][0] == 9.0
    with pytest.raises(RuntimeError, match="only accepts torch.Tensor"):
        DTensor.from_local(d, m, [Replicate()])
    with pytest.raises(ValueError, match="global shape"):
        DTensor.from_local(local, m, [Shard(0)], shape=(4, 2))
    c = copy.deepcopy(d)
    assert type(c) is DTensor and c.placements == d.placements and c.tolist() == d.tolist()
    c[0, 0] = 0.0
    assert d.tolist()[0][0] == 9.0
    p = pickle.loads(pickle.dumps(d))
    assert type(p) is DTensor and p.placements == (Shard(1),) and p.tolist() == d.tolist()
    assert p.device_mesh.mesh_dim_names == ("tp",)


def test_functional_collectives_and_checkpoint_limits():
    from tessera.distributed._functional_collectives import (all_to_all_single_autograd,
                                                             wait_tensor)
    from tessera.distributed.checkpoint.hf_storage import HuggingFaceStorageReader
    t = tessera.tensor([1.0, 2.0], requires_grad=True)
    assert wait_tensor(t) is t
    y = all_to_all_single_autograd(t, [2], [2])
    assert y.tolist() == [1.0, 2.0] and y is not t
    y.sum().backward()
    assert t.grad.tolist() == [1.0, 1.0]
    with pytest.raises(NotImplementedError, match="distributed checkpointing"):
        HuggingFaceStorageReader("/tmp")
