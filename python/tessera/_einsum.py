"""torch.einsum: the equation string form, the list form and the sublist form
(op, [0, 1], op, [1, 2], [0, 2]) turned into one call of ts_einsum (src/ops/einsum.c), which parses
the equation, takes diagonals, broadcasts and contracts the operands as batched matmuls."""
import string

from . import _C

_LETTERS = string.ascii_letters


def _sublist_equation(args):
    """the equation and operands of the sublist form: op, [0, 1], op, [1, 2][, [0, 2]]"""
    out = args.pop() if len(args) % 2 else None
    ops, subs = args[0::2], args[1::2]

    def word(s):
        for x in s:
            if x is not Ellipsis and not (isinstance(x, int) and 0 <= x < len(_LETTERS)):
                raise ValueError("einsum(): subscript in subscript list is not within the valid "
                                 "range [0, 52)")
        return "".join("..." if x is Ellipsis else _LETTERS[x] for x in s)
    eq = ",".join(word(s) for s in subs) + ("->" + word(out) if out is not None else "")
    return eq, ops


def einsum(equation, *operands):
    if not isinstance(equation, str):
        equation, operands = _sublist_equation([equation] + list(operands))
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return _C._einsum(equation, list(operands))
