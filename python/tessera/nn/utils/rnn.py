"""tessera.nn.utils.rnn — torch.nn.utils.rnn: pad_sequence, PackedSequence, pack_padded_sequence,
pad_packed_sequence, pack_sequence, unpack_sequence, composed from differentiable tensor ops (the
recurrent layers take a PackedSequence: nn/rnn.py)."""
from collections import namedtuple

from ... import _C

Tensor = _C.Tensor


def _ints(lengths):
    if isinstance(lengths, Tensor):
        lengths = lengths.tolist()
    return [int(v) for v in lengths]


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """torch.nn.utils.rnn.PackedSequence: data [sum(lengths), *] (time step after time step, each
    step's live sequences in sorted order), batch_sizes int64 [T] on the cpu, the permutation
    to sorted order and back (None when the input was sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes,
                                                         self.sorted_indices,
                                                         self.unsorted_indices)

    @property
    def is_cuda(self):
        return str(self.data.device).startswith("cuda")


def _invert(perm):
    p = _ints(perm)
    inv = [0] * len(p)
    for i, v in enumerate(p):
        inv[v] = i
    return _C.tensor(inv, dtype=_C.int64)


def _pack(input, lengths, batch_first, sorted_indices):
    """input [T, B, *] ([B, T, *]) with lengths (original order) -> PackedSequence"""
    if batch_first:
        input = input.transpose(0, 1)
    if sorted_indices is not None:
        input = input.index_select(1, sorted_indices.to(input.device))
        lengths = [lengths[i] for i in _ints(sorted_indices)]
    if any(n <= 0 for n in lengths):
        raise ValueError("Length of all samples has to be greater than 0, but found an element "
                         f"in 'lengths' that is <= 0: {lengths}")
    if lengths[0] > input.shape[0]:
        raise ValueError(f"pack_padded_sequence: a length {lengths[0]} is longer than the "
                         f"input's {input.shape[0]} time steps")
    sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = _C.cat([input[t, :b] for t, b in enumerate(sizes)])
    return PackedSequence(data, _C.tensor(sizes, dtype=_C.int64), sorted_indices, None)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    lengths = _ints(lengths)
    if len(lengths) != input.shape[0 if batch_first else 1]:
        raise ValueError(f"pack_padded_sequence: {len(lengths)} lengths for a batch of "
                         f"{input.shape[0 if batch_first else 1]}")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = _C.tensor(order, dtype=_C.int64)
    return _pack(input, lengths, batch_first, sorted_indices)


def _pack_like(padded, lengths, batch_first, like):
    """a layer's padded output packed with the input's order and batch sizes"""
    return _pack(padded, _ints(lengths), batch_first, like.sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    sizes = _ints(sequence.batch_sizes)
    data = sequence.data
    T, B = len(sizes), sizes[0]
    if total_length is not None:
        if total_length < T:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {T}")
    rows = data.split(sizes) if T > 1 else (data,)
    tail = tuple(data.shape[1:])
    steps = []
    for t, r in enumerate(rows):
        if sizes[t] < B:
            pad = _C.full((B - sizes[t],) + tail, padding_value, dtype=data.dtype,
                          device=data.device)
            r = _C.cat([r, pad])
        steps.append(r)
    for _ in range((total_length or T) - T):
        steps.append(_C.full((B,) + tail, padding_value, dtype=data.dtype, device=data.device))
    padded = _C.stack(steps)
    lengths = [sum(1 for s in sizes if s > b) for b in range(B)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices.to(data.device))
        lengths = [lengths[i] for i in _ints(sequence.unsorted_indices)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _C.tensor(lengths, dtype=_C.int64)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """[L_i, *] tensors -> [max L, B, *] ([B, max L, *] batch_first), padded with padding_value"""
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    n = max(s.shape[0] for s in sequences)
    out = []
    for s in sequences:
        if s.shape[0] < n:
            pad = _C.full((n - s.shape[0],) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                          device=s.device)
            s = _C.cat([s, pad] if padding_side == "right" else [pad, s])
        out.append(s)
    return _C.stack(out, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[i, :n] for i, n in enumerate(_ints(lengths))]


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :n] for i, n in enumerate(_ints(lengths))]
