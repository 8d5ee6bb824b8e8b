"""The copying forms of PyTorch's views (alias_copy, diagonal_copy, expand_copy, ... view_copy,
narrow_copy, split_with_sizes_copy; issue 52): each a fresh contiguous copy of the view, never an
alias of the input; unsafe_chunk / unsafe_split (Tessera's views need no unsafe form)."""
from . import _C

__all__ = ["alias_copy", "diagonal_copy", "expand_copy", "permute_copy", "squeeze_copy", "t_copy",
           "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy",
           "narrow_copy", "split_with_sizes_copy", "unsafe_chunk", "unsafe_split"]


def _contig(t):
    """a fresh contiguous copy (the *_copy ops never alias their input)"""
    return t.clone() if t.is_contiguous() else t.contiguous()


# ------------------------------------------------------------------ the views' copying forms
def alias_copy(input):
    """torch.alias_copy: a copy"""
    return _contig(input)


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return _contig(_C.diagonal(input, offset, dim1, dim2))


def expand_copy(input, size, *, implicit=False):
    return _C._expand_copy(input, size)


def permute_copy(input, dims):
    return _contig(input.permute(*dims))


def squeeze_copy(input, dim=None):
    return _C._squeeze_copy(input, dim)


def t_copy(input):
    return _contig(input.t())


def transpose_copy(input, dim0, dim1):
    return _contig(input.transpose(dim0, dim1))


def unbind_copy(input, dim=0):
    return tuple(_contig(t) for t in input.unbind(dim))


def unfold_copy(input, dimension, size, step):
    return _contig(input.unfold(dimension, size, step))


def unsqueeze_copy(input, dim):
    return _contig(input.unsqueeze(dim))


def view_copy(input, *size, dtype=None):
    if dtype is None and len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0]) if not isinstance(size[0], _C.dtype) else size[0]
    return _C._view_copy(input, size if dtype is None else dtype)


def narrow_copy(input, dim, start, length):
    return _contig(input.narrow(dim, start, length))


def split_with_sizes_copy(input, split_sizes, dim=0):
    return [_contig(t) for t in input.split(list(split_sizes), dim)]


def unsafe_chunk(input, chunks, dim=0):
    """torch.unsafe_chunk: chunk (Tessera's views need no unsafe form)"""
    return input.chunk(chunks, dim)


def unsafe_split(input, split_size_or_sections, dim=0):
    """torch.unsafe_split: split"""
    return input.split(split_size_or_sections, dim)
