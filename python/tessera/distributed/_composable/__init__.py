"""tessera.distributed._composable — torch.distributed._composable.fsdp (fully_shard)."""
