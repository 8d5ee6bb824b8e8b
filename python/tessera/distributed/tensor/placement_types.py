"""tessera.distributed.tensor.placement_types — how a DTensor lies on each dim of its mesh:
Shard(dim) (torch.chunk pieces of that tensor dim, one per rank), Replicate() (a full copy on every
rank), Partial(op) (each rank holds a part; the value is their reduction), _StridedShard (Shard
applied after another shard of the same dim). PyTorch's names, reprs and chunk arithmetic."""

__all__ = ["Placement", "Shard", "Replicate", "Partial", "_StridedShard"]


class Placement:
    """The base of the placement types."""

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self, reduce_op=None):
        return False


class Shard(Placement):
    """Shard(dim): rank r of the mesh dim holds chunk r of tensor.chunk(n, dim)."""

    __slots__ = ("dim",)

    def __init__(self, dim=0):
        self.dim = int(dim)

    def is_shard(self, dim=None):
        return dim is None or int(dim) == self.dim

    @staticmethod
    def local_shard_size_and_offset(curr_local_size, num_chunks, rank):
        """(size, offset) of rank's chunk when a dim of curr_local_size is cut as torch.chunk
        cuts it into num_chunks pieces (the last ones may be short or empty)."""
        curr_local_size, num_chunks, rank = int(curr_local_size), int(num_chunks), int(rank)
        if num_chunks <= 0:
            raise ValueError("Shard.local_shard_size_and_offset: num_chunks must be positive, "
                             "got %d" % num_chunks)
        if curr_local_size % num_chunks == 0:
            chunk = curr_local_size // num_chunks
            return chunk, chunk * rank
        chunk = (curr_local_size + num_chunks - 1) // num_chunks
        start = chunk * rank
        end = min(curr_local_size, start + chunk)
        return max(0, end - start), min(curr_local_size, start)

    def _local_shard_size_and_offset(self, curr_local_size, num_chunks, rank):
        return Shard.local_shard_size_and_offset(curr_local_size, num_chunks, rank)

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self).__name__, self.dim))

    def __repr__(self):
        return "Shard(dim=%d)" % self.dim

    def __str__(self):
        return "S(%d)" % self.dim


class _StridedShard(Shard):
    """Shard(dim) applied to each of split_factor groups of the dim (FSDP over TP layouts)."""

    __slots__ = ("split_factor",)

    def __init__(self, dim, split_factor):
        super().__init__(dim)
        self.split_factor = int(split_factor)

    def __eq__(self, other):
        return (type(other) is _StridedShard and other.dim == self.dim
                and other.split_factor == self.split_factor)

    def __hash__(self):
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self):
        return "_StridedShard(dim=%d, sf=%d)" % (self.dim, self.split_factor)

    def __str__(self):
        return "_S(%d, %d)" % (self.dim, self.split_factor)


class Replicate(Placement):
    """Every rank of the mesh dim holds the whole tensor."""

    __slots__ = ()

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """Each rank holds a part; the tensor is their reduction by reduce_op ("sum", "avg", "max",
    "min", "product")."""

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op="sum"):
        self.reduce_op = str(reduce_op)

    def is_partial(self, reduce_op=None):
        return reduce_op is None or str(reduce_op) == self.reduce_op

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return 1 + hash(self.reduce_op)

    def __repr__(self):
        return "Partial(%s)" % self.reduce_op

    def __str__(self):
        return "P(%s)" % self.reduce_op
