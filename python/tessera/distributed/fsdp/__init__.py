"""tessera.distributed.fsdp — torch.distributed.fsdp's names. Tessera's FSDP is the C library's
(ts_fsdp_new, docs/DISTRIBUTED.md) and is not bound to Python yet: FullyShardedDataParallel and
fully_shard raise NotImplementedError naming that limit. The policies are plain records, as
PyTorch's, so code that builds them (Hugging Face transformers' FSDP config) imports and runs."""
import dataclasses

__all__ = ["FullyShardedDataParallel", "fully_shard", "CPUOffloadPolicy", "MixedPrecisionPolicy",
           "OffloadPolicy"]

_LIMIT = ("Tessera's FSDP (ts_fsdp_new in the C library) has no Python binding yet; "
          "use DistributedDataParallel")


@dataclasses.dataclass(frozen=True)
class MixedPrecisionPolicy:
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclasses.dataclass
class OffloadPolicy:
    """No offloading."""


@dataclasses.dataclass
class CPUOffloadPolicy(OffloadPolicy):
    pin_memory: bool = True


class FullyShardedDataParallel:
    """torch's FSDP1 wrapper: not available from Python (see the module's doc)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("FullyShardedDataParallel: " + _LIMIT)


def fully_shard(module, *args, **kwargs):
    """torch's FSDP2: not available from Python (see the module's doc)."""
    raise NotImplementedError("fully_shard: " + _LIMIT)
