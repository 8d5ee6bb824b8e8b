"""torch.einsum over Tessera's differentiable ops: each operand's repeated labels taken as
diagonals (views), its dims permuted into one common label order and unsqueezed to full rank; the
operands multiplied in turn (broadcasting), each label summed out as soon as no later operand and
not the output needs it. Exact (the same products and sums as the definition), on every device;
not yet routed to matmul for the two-operand contractions, so large contractions are slow."""
import string

_LETTERS = string.ascii_letters


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs, rhs = eq, None
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError("einsum(): more operands were provided than specified in the equation"
                         if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the equation")
    return terms, rhs


def _labels(term, ndim, which):
    """a term's labels as ints: letters by their position in string.ascii_letters, the
    ellipsis' dims as -1, -2, ... counted from the right"""
    if term.count("...") > 1:
        raise ValueError("einsum(): found more than one ellipsis in operand %d" % which)
    if "..." in term:
        head, tail = term.split("...")
    else:
        head, tail = term, None
    for c in (head + (tail or "")):
        if c not in _LETTERS:
            raise ValueError("einsum(): invalid subscript given at index %d in the equation "
                             "string, subscripts must be in [a-zA-Z]" % term.index(c))
    named = len(head) + len(tail or "")
    if tail is None:
        if named != ndim:
            raise RuntimeError("einsum(): the number of subscripts in the equation (%d) does not "
                               "match the number of dimensions (%d) for operand %d and no "
                               "ellipsis was given" % (named, ndim, which))
        return [_LETTERS.index(c) for c in head], 0
    k = ndim - named
    if k < 0:
        raise RuntimeError("einsum(): the number of subscripts in the equation (%d) is more than "
                           "the number of dimensions (%d) for operand %d" % (named, ndim, which))
    return ([_LETTERS.index(c) for c in head] + [-(k - i) for i in range(k)] +
            [_LETTERS.index(c) for c in tail]), k


def _take_diagonals(t, labels):
    """repeated labels of one operand: the diagonal, which moves to the last dim"""
    labels = list(labels)
    while True:
        seen = {}
        pair = None
        for i, lab in enumerate(labels):
            if lab in seen:
                pair = (seen[lab], i)
                break
            seen[lab] = i
        if pair is None:
            return t, labels
        a, b = pair
        if t.shape[a] != t.shape[b]:
            raise RuntimeError("einsum(): subscript %s is repeated for operand but the sizes "
                               "don't match, %d != %d" % (_LETTERS[labels[a]] if labels[a] >= 0
                                                          else "...", t.shape[a], t.shape[b]))
        lab = labels[a]
        t = t.diagonal(0, a, b)
        labels = [x for i, x in enumerate(labels) if i not in (a, b)] + [lab]


def einsum(equation, *operands):
    from . import Tensor
    if not isinstance(equation, str):  # the sublist form: op, [0, 1], op, [1, 2], [0, 2]
        args = [equation] + list(operands)
        ops, subs = args[0::2], args[1::2]
        out = None
        if len(args) % 2 == 1:
            out = args[-1]
            ops = args[0:-1:2]
            subs = args[1:-1:2]

        def word(s):
            return "".join("..." if x is Ellipsis else _LETTERS[x] for x in s)
        equation = ",".join(word(s) for s in subs) + ("->" + word(out) if out is not None else "")
        operands = tuple(ops)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    for i, o in enumerate(operands):
        if not isinstance(o, Tensor):
            raise TypeError("einsum(): operand %d is %s, not a Tensor" % (i, type(o).__name__))
    terms, rhs = _parse(equation, operands)
    ops, labs, ell, counts = [], [], 0, {}
    for i, (term, t) in enumerate(zip(terms, operands)):
        lab, k = _labels(term, t.ndim, i)
        ell = max(ell, k)
        for x in lab:
            counts[x] = counts.get(x, 0) + 1
        t, lab = _take_diagonals(t, lab)
        ops.append(t)
        labs.append(lab)
    ell_labels = [-(ell - i) for i in range(ell)]
    if rhs is None:  # implicit output: the ellipsis, then the labels seen once, alphabetically
        out = ell_labels + sorted((x for x, c in counts.items() if c == 1 and x >= 0),
                                  key=lambda x: ord(_LETTERS[x]))  # ASCII: A-Z before a-z
    else:
        if rhs.count("...") > 1:
            raise ValueError("einsum(): found more than one ellipsis in the output")
        out = []
        for part_i, part in enumerate(rhs.split("...")):
            if part_i == 1:
                out += ell_labels
            for c in part:
                if c not in _LETTERS:
                    raise ValueError("einsum(): invalid subscript given at index %d in the "
                                     "equation string, subscripts must be in [a-zA-Z]" %
                                     equation.index(c))
                x = _LETTERS.index(c)
                if x in out:
                    raise ValueError("einsum(): output subscript %s appears more than once in "
                                     "the output" % c)
                if not any(x in lab for lab in labs):
                    raise ValueError("einsum(): output subscript %s does not appear in the "
                                     "equation for any input operand" % c)
                out.append(x)
    order = list(out)
    for lab in labs:
        for x in lab:
            if x not in order:
                order.append(x)
    pos = {x: i for i, x in enumerate(order)}
    n = len(order)
    result = None
    for idx, (t, lab) in enumerate(zip(ops, labs)):
        perm = sorted(range(len(lab)), key=lambda d: pos[lab[d]])
        t = t.permute(*perm) if perm != list(range(len(lab))) else t
        have = sorted(pos[x] for x in lab)
        shape = [1] * n
        for d, p in enumerate(have):
            shape[p] = t.shape[d]
        t = t.reshape(*shape) if n else t
        result = t if result is None else result * t
        later = set(x for lab2 in labs[idx + 1:] for x in lab2)
        done = [pos[x] for x in order if x not in out and x not in later
                and result.shape[pos[x]] != 1]
        if done:
            result = result.sum(dim=tuple(done), keepdim=True)
    # every contracted label is size 1 now; the ellipsis dims may still need broadcasting
    shape = list(result.shape[:len(out)])
    return result.reshape(*shape) if shape else result.reshape(())
