"""tessera.distributed — torch.distributed over the C library's process group: MPI for cpu and sim
tensors, NCCL for cuda tensors. Start the ranks with a launcher:

    mpirun -np 2 python3 train.py

Without a launcher a program is a world of one and everything works (collectives copy nothing).
Every collective works in place, on the whole world (group=None), synchronously; the GIL is
released while it waits.

Submodules: tessera.distributed.device_mesh (DeviceMesh, init_device_mesh) and
tessera.distributed.tensor (DTensor and its placements) for one process (docs/DISTRIBUTED.md).
"""
import contextlib
import enum

from tessera import _C

__all__ = ["ReduceOp", "is_available", "is_initialized", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "get_local_rank", "barrier",
           "all_reduce", "broadcast", "reduce", "all_gather_into_tensor",
           "reduce_scatter_tensor", "send", "recv", "DistributedDataParallel", "describe",
           "all_to_all_single", "get_process_group_ranks", "DeviceMesh", "init_device_mesh"]


class ReduceOp(enum.IntEnum):
    """torch.distributed.ReduceOp (AVG: floating dtypes only)."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4


_KINDS = {"all_reduce": 0, "broadcast": 1, "reduce": 2, "send": 3, "recv": 4}


def _info():
    return _C._dist_info()


def is_available():
    """True when the C library was built with MPI."""
    return _info()[5]


def is_initialized():
    return _info()[4]


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Joins the world the launcher started. backend: "mpi", "nccl", "gloo" (MPI here) or None
    (MPI for cpu and sim tensors, NCCL for cuda). The launcher decides world size and rank: a
    world_size / rank that disagree with it raise ValueError."""
    if init_method not in (None, "env://") or store is not None:
        raise ValueError("init_process_group: only the launcher's world is supported (mpirun, "
                         "srun): init_method and store must be left out")
    seconds = 0.0
    if timeout is not None:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    _C._dist_init(backend, seconds)
    if world_size not in (-1, None) and world_size != get_world_size():
        raise ValueError("init_process_group: world_size=%d but the launcher started %d ranks"
                         % (world_size, get_world_size()))
    if rank not in (-1, None) and rank != get_rank():
        raise ValueError("init_process_group: rank=%d but the launcher made this rank %d"
                         % (rank, get_rank()))


def destroy_process_group(group=None):
    """Waits for outstanding work and leaves MPI (after a failed collective: aborts the job)."""
    _no_group(group)
    _C._dist_finalize()


def get_rank(group=None):
    _no_group(group)
    return _info()[0]


def get_world_size(group=None):
    _no_group(group)
    return _info()[1]


def get_local_rank():
    """This process's rank among the ranks of its machine."""
    return _info()[2]


def describe():
    """"world 2, rank 0 (local 0 of 2), backend mpi (...), host NAME" """
    return _info()[6]


def _no_group(group):
    # a one-rank DeviceMesh's group (device_mesh._MeshGroup) is the world of one
    if group is not None and not getattr(group, "_ts_world", False):
        raise NotImplementedError("tessera.distributed: subgroups (group=) are not supported "
                                  "from Python yet; use the world (group=None)")


def _sync(async_op, group):
    _no_group(group)
    if async_op:
        raise NotImplementedError("tessera.distributed: async_op=True is not supported from "
                                  "Python yet")


def barrier(group=None, async_op=False, device_ids=None):
    _sync(async_op, group)
    _C._dist_barrier()


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces tensor over every rank, in place; every rank gets the result."""
    _sync(async_op, group)
    _C._collective(_KINDS["all_reduce"], tensor, 0, int(op))


def broadcast(tensor, src, group=None, async_op=False):
    """Copies src's tensor into every rank's tensor."""
    _sync(async_op, group)
    _C._collective(_KINDS["broadcast"], tensor, int(src))


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """The reduction lands in dst's tensor; other ranks keep theirs."""
    _sync(async_op, group)
    _C._collective(_KINDS["reduce"], tensor, int(dst), int(op))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world size times input's elements) gets rank r's input at block r."""
    _sync(async_op, group)
    _C._gather_scatter(True, output_tensor, input_tensor)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """input holds world-size blocks; rank r gets block r reduced over the ranks."""
    _sync(async_op, group)
    _C._gather_scatter(False, output, input, int(op))


def send(tensor, dst, group=None, tag=0):
    _no_group(group)
    _C._collective(_KINDS["send"], tensor, int(dst), 0, int(tag))


def recv(tensor, src=None, group=None, tag=0):
    _no_group(group)
    if src is None:
        raise NotImplementedError("recv: src=None (any source) is not supported; name the rank")
    _C._collective(_KINDS["recv"], tensor, int(src), 0, int(tag))
    return src


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Block r of input (along dim 0) goes to rank r. In a world of one that is input itself: it is
    copied into output; more ranks raise NotImplementedError (no all-to-all in the C library)."""
    _sync(async_op, group)
    if get_world_size() != 1:
        raise NotImplementedError("all_to_all_single: tessera.distributed has no all-to-all over "
                                  "%d ranks (a world of one only)" % get_world_size())
    n = input.shape[0] if input.dim() else 1
    for name, sizes in (("output_split_sizes", output_split_sizes),
                        ("input_split_sizes", input_split_sizes)):
        if sizes is not None and list(sizes) != [n]:
            raise ValueError("all_to_all_single: %s=%s, but a world of one has one block of %d "
                             "rows" % (name, list(sizes), n))
    if tuple(output.shape) != tuple(input.shape):
        raise ValueError("all_to_all_single: output has shape %s, input %s (a world of one copies "
                         "input)" % (tuple(output.shape), tuple(input.shape)))
    output.copy_(input)


def get_process_group_ranks(group=None):
    """The global ranks in group: the world's (group=None, or a DeviceMesh's group, which is the
    world)."""
    if group is not None and not getattr(group, "_ts_world", False):
        _no_group(group)
    return list(range(get_world_size()))


def _ddp_class():
    from tessera import nn

    class DistributedDataParallel(nn.Module):
        """torch's DistributedDataParallel for any Module (written in Python or built in): the
        parameters and buffers are broadcast from rank 0, and at the end of each backward every
        gradient is averaged over the ranks (a hook on each parameter counts them in). Every
        parameter must receive a gradient in each backward (find_unused_parameters is not
        supported). State-dict names start with "module." as in PyTorch."""

        def __init__(self, module, device_ids=None, output_device=None, dim=0,
                     broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                     find_unused_parameters=False, gradient_as_bucket_view=False, **kwargs):
            super().__init__()
            _no_group(process_group)
            if find_unused_parameters:
                raise NotImplementedError("DistributedDataParallel: find_unused_parameters=True "
                                          "is not supported from Python yet")
            self.module = module
            for t in list(module.parameters()) + (list(module.buffers())
                                                  if broadcast_buffers else []):
                broadcast(t.detach() if t.requires_grad else t, 0)
            self._sync = _C._GradSync([p for p in module.parameters() if p.requires_grad])

        def forward(self, *args, **kwargs):
            self._sync.check()
            return self.module(*args, **kwargs)

        @contextlib.contextmanager
        def no_sync(self):
            """Backward passes inside accumulate gradients without reducing; the first one after
            it reduces the accumulated gradients."""
            old = self._sync.no_sync
            self._sync.no_sync = True
            try:
                yield
            finally:
                self._sync.no_sync = old

    return DistributedDataParallel


def __getattr__(name):
    # the class is made on first use: tessera.nn is imported after this module
    if name == "DistributedDataParallel":
        cls = _ddp_class()
        globals()[name] = cls
        return cls
    if name in ("DeviceMesh", "init_device_mesh"):
        from . import device_mesh
        return getattr(device_mesh, name)
    raise AttributeError("module 'tessera.distributed' has no attribute %r" % name)
