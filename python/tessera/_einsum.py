"""torch.einsum over Tessera's differentiable ops: each operand's repeated labels taken as
diagonals (views), its dims permuted into one common label order and unsqueezed to full rank; the
operands multiplied in turn (broadcasting), each label summed out as soon as no later operand and
not the output needs it. Exact (the same products and sums as the definition), on every device.
With two or more operands whose shared labels agree in size, the operands are contracted left to
right through batched matmul instead (each pair permuted to (batch, kept, contracted) and
reshaped to 3-d): the same sums in another order, without the broadcast product's memory."""
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


def _reshape(t, shape):
    return t.reshape(*shape) if shape else t.reshape(())


def _sum_out(t, lab, needed):
    """sum the dims of t whose labels no one needs any more"""
    dims = tuple(d for d, x in enumerate(lab) if x not in needed)
    if not dims:
        return t, lab
    return t.sum(dim=dims), [x for x in lab if x in needed]


def _contract(a, la, b, lb, needed):
    """a (labels la) times b (labels lb), summed over the shared labels not needed, as one
    batched matmul: a -> (batch, a's kept, contracted), b -> (batch, contracted, b's kept)"""
    size = dict(zip(la, a.shape))
    size.update(zip(lb, b.shape))
    batch = [x for x in la if x in lb and x in needed]
    contr = [x for x in la if x in lb and x not in needed]
    lk = [x for x in la if x not in lb]
    rk = [x for x in lb if x not in la]

    def arrange(t, lab, order, shape):
        perm = [lab.index(x) for x in order]
        if perm != list(range(len(perm))):
            t = t.permute(*perm)
        return t.reshape(*shape)

    def prod(xs):
        n = 1
        for x in xs:
            n *= size[x]
        return n
    nb, m, k, n = prod(batch), prod(lk), prod(contr), prod(rk)
    am = arrange(a, la, batch + lk + contr, (nb, m, k) if batch else (m, k))
    bm = arrange(b, lb, batch + contr + rk, (nb, k, n) if batch else (k, n))
    r = am.matmul(bm)
    lab = batch + lk + rk
    return _reshape(r, [size[x] for x in lab]), lab


def _by_matmul(ops, labs, out):
    """the operands contracted left to right by _contract; None where it does not apply (one
    operand, operands of different dtypes, a shared label whose sizes differ (broadcast ellipsis
    dims), an empty dim)"""
    if len(ops) < 2 or any(t.dtype != ops[0].dtype for t in ops):
        return None
    size = {}
    for t, lab in zip(ops, labs):
        for x, s in zip(lab, t.shape):
            if s == 0 or size.setdefault(x, s) != s:
                return None
    result, rlab = None, None
    for idx, (t, lab) in enumerate(zip(ops, labs)):
        later = set(out).union(*[set(x) for x in labs[idx + 1:]])
        t, lab = _sum_out(t, lab, later | set(rlab or ()))
        if result is None:
            result, rlab = t, lab
            continue
        result, rlab = _sum_out(result, rlab, later | set(lab))
        result, rlab = _contract(result, rlab, t, lab, later)
    perm = [rlab.index(x) for x in out]
    if perm != list(range(len(perm))):
        result = result.permute(*perm)
    return result


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
    fast = _by_matmul(ops, labs, out)
    if fast is not None:
        return fast
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
