"""tessera.distributed.checkpoint — torch.distributed.checkpoint (DCP) is not implemented: the
names transformers imports at module level exist (hf_storage's HuggingFaceStorageReader / Writer)
and raise NotImplementedError when used. Save and load whole state dicts with tessera.save /
tessera.load or safetensors instead."""

_LIMIT = ("torch.distributed.checkpoint (distributed checkpointing) is not implemented by Tessera; "
          "save and load full state dicts (tessera.save / tessera.load, safetensors, "
          "save_pretrained) instead")


def _unsupported(name):
    raise NotImplementedError("%s: %s" % (name, _LIMIT))


def save(*args, **kwargs):
    _unsupported("torch.distributed.checkpoint.save")


def load(*args, **kwargs):
    _unsupported("torch.distributed.checkpoint.load")
