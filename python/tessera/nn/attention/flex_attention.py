"""tessera.nn.attention.flex_attention — importable, not implemented: Tessera has no flex
attention (score_mod / block-sparse masks compiled into a kernel). The names transformers imports
at module level exist; calling flex_attention or create_block_mask, or building a BlockMask, raises
NotImplementedError. Use scaled_dot_product_attention (attn_implementation="sdpa" or "eager")."""

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "AuxRequest", "and_masks",
           "or_masks", "noop_mask"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LIMIT = ("flex attention is not implemented by Tessera; use scaled_dot_product_attention "
          "(transformers: attn_implementation=\"sdpa\" or \"eager\")")


def _unsupported(name):
    raise NotImplementedError("%s: %s" % (name, _LIMIT))


class BlockMask:
    def __init__(self, *args, **kwargs):
        _unsupported("BlockMask")

    @classmethod
    def from_kv_blocks(cls, *args, **kwargs):
        _unsupported("BlockMask.from_kv_blocks")


class AuxRequest:
    def __init__(self, *args, **kwargs):
        _unsupported("AuxRequest")


def flex_attention(*args, **kwargs):
    _unsupported("flex_attention")


def create_block_mask(*args, **kwargs):
    _unsupported("create_block_mask")


def create_mask(*args, **kwargs):
    _unsupported("create_mask")


def and_masks(*args, **kwargs):
    _unsupported("and_masks")


def or_masks(*args, **kwargs):
    _unsupported("or_masks")


def noop_mask(*args, **kwargs):
    _unsupported("noop_mask")
