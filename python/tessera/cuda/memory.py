"""tessera.cuda.memory — torch.cuda.memory's statistics and its memory snapshots: every segment
and block of every device's caching allocator (cuda, sim, cpu; pinned host memory as
"cpu_pinned"), with the C backtrace of each allocation made while history recording is on
(docs/PROFILING.md, "Memory snapshots")."""
import json

from tessera import _C

from . import (empty_cache, max_memory_allocated, max_memory_reserved,  # noqa: F401
               mem_get_info, memory_allocated, memory_reserved, memory_stats,
               reset_peak_memory_stats)

__all__ = ["_snapshot", "_record_memory_history", "_dump_snapshot", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
           "reset_peak_memory_stats", "empty_cache", "mem_get_info"]


def _snapshot(device=None):
    """PyTorch's _snapshot(): {"segments": [{"device", "device_name", "address", "total_size",
    "allocated_size", "active_size", "stream", "segment_type", "blocks": [{"address", "size",
    "requested_size", "state": "active_allocated" | "inactive", "frames"?}]}], "devices": [per
    device totals], "device_traces": []}. device is accepted for PyTorch's signature; every device
    is listed."""
    return json.loads(_C._memory_snapshot_json())


def _record_memory_history(enabled="all", context=None, stacks=None, max_entries=None):
    """Starts (enabled truthy, e.g. "all") or stops (None/False) recording each allocation's C
    backtrace. PyTorch's other arguments are accepted; stacks are C stacks."""
    _C._memory_record_history(bool(enabled))


def _dump_snapshot(filename="dump_snapshot.json"):
    """Writes _snapshot() to filename as JSON."""
    with open(filename, "w") as f:
        json.dump(_snapshot(), f)


def _set_oom_snapshot(filename):
    """Writes a snapshot to filename whenever an allocation fails (None: off); the environment
    variable TS_OOM_SNAPSHOT does the same from start-up."""
    _C._memory_set_oom_snapshot(filename)
