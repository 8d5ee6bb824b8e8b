"""tessera.multiprocessing: torch.multiprocessing for Tessera.

Python's multiprocessing, re-exported whole (Process, Queue, Pool, set_start_method, get_context...),
with pickling reductions that send a shared-memory tensor (Tensor.share_memory_, Module.share_memory)
to another process as its memory, not a copy (reductions.py): Hogwild training, where several
processes update one model's parameters in place. `spawn` starts processes running fn(i, *args)
and joins them, raising when one fails (torch.multiprocessing.spawn). Only the "file_descriptor"
sharing strategy exists (Linux)."""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from .reductions import init_reductions
from .spawn import (ProcessContext, ProcessExitedException, ProcessRaisedException,  # noqa: F401
                    spawn, start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
           "ProcessExitedException"]
__all__ += multiprocessing.__all__

_sharing_strategy = "file_descriptor"
_all_sharing_strategies = {"file_descriptor"}


def set_sharing_strategy(new_strategy):
    """only "file_descriptor" (fds of memfd mappings) exists"""
    if new_strategy not in _all_sharing_strategies:
        raise ValueError(f"tessera.multiprocessing: sharing strategy {new_strategy!r} is not "
                         f"supported; the strategies are {sorted(_all_sharing_strategies)}")


def get_sharing_strategy():
    return _sharing_strategy


def get_all_sharing_strategies():
    return set(_all_sharing_strategies)


init_reductions()
