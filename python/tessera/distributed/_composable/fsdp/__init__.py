"""tessera.distributed._composable.fsdp — fully_shard and its policies (tessera.distributed.fsdp)."""
from ...fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy,  # noqa: F401
                     fully_shard)
