"""The pytrees tessera.func's transforms walk (PyTorch's torch.utils._pytree, the part they use):
tuples, lists, dicts and namedtuples are nodes, everything else (a Tensor, a number, None) is a
leaf. A spec is (kind, context, children specs) for a node and None for a leaf."""
from collections import OrderedDict

_LEAF = None


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _kind(x):
    if _is_namedtuple(x):
        return "namedtuple"
    if isinstance(x, tuple):
        return "tuple"
    if isinstance(x, list):
        return "list"
    if isinstance(x, OrderedDict):
        return "odict"
    if isinstance(x, dict):
        return "dict"
    return None


def tree_flatten(tree):
    """(leaves in order, spec)"""
    leaves = []

    def walk(x):
        kind = _kind(x)
        if kind is None:
            leaves.append(x)
            return _LEAF
        if kind in ("dict", "odict"):
            keys = list(x.keys())
            return (kind, keys, [walk(x[k]) for k in keys])
        ctx = type(x) if kind == "namedtuple" else None
        return (kind, ctx, [walk(v) for v in x])
    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, spec):
    it = iter(leaves)

    def build(s):
        if s is _LEAF:
            return next(it)
        kind, ctx, children = s
        vals = [build(c) for c in children]
        if kind == "tuple":
            return tuple(vals)
        if kind == "list":
            return vals
        if kind == "namedtuple":
            return ctx(*vals)
        if kind == "odict":
            return OrderedDict(zip(ctx, vals))
        return dict(zip(ctx, vals))
    return build(spec)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def spec_str(spec):
    """a spec as PyTorch prints a TreeSpec (error messages)"""
    if spec is _LEAF:
        return "*"
    kind, ctx, children = spec
    name = {"odict": "OrderedDict", "namedtuple": getattr(ctx, "__name__", "namedtuple")}.get(
        kind, kind)
    keys = ctx if kind in ("dict", "odict") else None
    return f"TreeSpec({name}, {keys}, [{', '.join(spec_str(c) for c in children)}])"


def broadcast_prefix(prefix, tree, spec=None):
    """the leaves of `prefix` (a pytree whose leaves are ints or None, a prefix of `tree`'s
    structure) repeated over the leaves of `tree` each covers; None when the structures do not
    match"""
    if spec is None:
        spec = tree_flatten(tree)[1]
    out = []

    def walk(p, s):
        if _kind(p) is None:
            out.extend([p] * _count(s))
            return True
        if s is _LEAF:
            return False
        kind, ctx, children = s
        pk = _kind(p)
        if (pk in ("dict", "odict")) != (kind in ("dict", "odict")):
            return False
        if pk in ("dict", "odict"):
            if set(p.keys()) != set(ctx):
                return False
            return all(walk(p[k], c) for k, c in zip(ctx, children))
        if len(p) != len(children):
            return False
        return all(walk(pv, c) for pv, c in zip(p, children))
    return out if walk(prefix, spec) else None


def _count(spec):
    if spec is _LEAF:
        return 1
    return sum(_count(c) for c in spec[2])
