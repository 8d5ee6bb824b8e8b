"""tessera.utils._pytree — torch.utils._pytree: nested containers (pytrees) flattened to a list of
leaves and a TreeSpec that rebuilds them.

The behaviour is PyTorch's (its Python implementation, protocol 1 of treespec_dumps included):

- Nodes: tuple, list, dict, every namedtuple class, OrderedDict, defaultdict, deque, and the
  types given to register_pytree_node / register_dataclass / register_constant. Everything else
  is a leaf, None included (tree_flatten(None) == ([None], *)).
- A namedtuple's TreeSpec has type `collections.namedtuple` and the class as its context.
- dict keys keep insertion order (no sorting); dict, OrderedDict and defaultdict accept each
  other in flatten_up_to (the rests of tree_map) when the keys agree.
- treespec_dumps(spec) == PyTorch's string, so a spec dumped by one loads in the other.

Hugging Face transformers registers its Cache classes here (register_pytree_node with
flatten_with_keys_fn) and maps over model inputs with tree_map_only.
"""
import dataclasses
import functools
import importlib
import json
import threading
import types
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from enum import Enum
from typing import Any, Callable, NamedTuple, Optional

__all__ = [
    "PyTree", "Context", "FlattenFunc", "UnflattenFunc", "DumpableContext", "ToDumpableContextFn",
    "FromDumpableContextFn", "TreeSpec", "LeafSpec", "keystr", "key_get", "register_pytree_node",
    "register_dataclass", "register_constant", "tree_is_leaf", "tree_flatten",
    "tree_flatten_with_path", "tree_unflatten", "tree_iter", "tree_leaves",
    "tree_leaves_with_path", "tree_structure", "tree_map", "tree_map_with_path", "tree_map_",
    "tree_map_only", "tree_map_only_", "tree_all", "tree_any", "tree_all_only", "tree_any_only",
    "treespec_dumps", "treespec_loads", "treespec_pprint", "treespec_leaf", "treespec_tuple",
    "treespec_dict", "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance",
    "is_structseq", "is_structseq_class", "is_structseq_instance", "SequenceKey", "MappingKey",
    "GetAttrKey", "map_only", "arg_tree_leaves",
]

Context = Any
PyTree = Any
DumpableContext = Any
FlattenFn = Callable[[PyTree], "tuple[list, Context]"]
UnflattenFn = Callable[[Any, Context], PyTree]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
FlattenWithKeysFn = Callable[[PyTree], "tuple[list, Any]"]
FlattenFunc, UnflattenFunc, FlattenWithKeysFunc = FlattenFn, UnflattenFn, FlattenWithKeysFn
KeyPath = tuple

DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


class NodeDef(NamedTuple):
    type: type
    flatten_fn: Callable
    unflatten_fn: Callable
    flatten_with_keys_fn: Optional[Callable]


class _SerializeNodeDef(NamedTuple):
    typ: type
    serialized_type_name: str
    to_dumpable_context: Optional[Callable]
    from_dumpable_context: Optional[Callable]


_NODE_REGISTRY_LOCK = threading.RLock()
SUPPORTED_NODES: "dict[type, NodeDef]" = {}
SUPPORTED_SERIALIZED_TYPES: "dict[type, _SerializeNodeDef]" = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: "dict[str, type]" = {}
CONSTANT_NODES: "set[type]" = set()


class EnumEncoder(json.JSONEncoder):
    """JSON for Enum values in contexts, as PyTorch writes them."""

    def default(self, obj):
        if isinstance(obj, Enum):
            return {"__enum__": True,
                    "fqn": "%s:%s" % (obj.__class__.__module__, obj.__class__.__qualname__),
                    "name": obj.name}
        return super().default(obj)


# ------------------------------------------------------------------ registration

def _private_register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                                  to_dumpable_context=None, from_dumpable_context=None,
                                  flatten_with_keys_fn=None):
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            warnings.warn("%s is already registered as pytree node. Overwriting the previous "
                          "registration." % (cls,), stacklevel=3)
        if (to_dumpable_context is None) ^ (from_dumpable_context is None):
            raise ValueError("Both to_dumpable_context and from_dumpable_context for %s must be "
                             "None or registered." % (cls,))
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        if serialized_type_name is None:
            serialized_type_name = NO_SERIALIZED_TYPE_NAME_FOUND
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(
            cls, serialized_type_name, to_dumpable_context, from_dumpable_context)
        SERIALIZED_TYPE_TO_PYTHON_TYPE[serialized_type_name] = cls


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """Registers a container type as a pytree node: flatten_fn(obj) -> (children, context),
    unflatten_fn(children, context) -> obj. A type registered twice raises ValueError."""
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError("%s is already registered as pytree node." % (cls,))
    _private_register_pytree_node(cls, flatten_fn, unflatten_fn,
                                  serialized_type_name=serialized_type_name,
                                  to_dumpable_context=to_dumpable_context,
                                  from_dumpable_context=from_dumpable_context,
                                  flatten_with_keys_fn=flatten_with_keys_fn)


def _register_pytree_node(cls, flatten_fn, unflatten_fn, to_str_fn=None, maybe_from_str_fn=None,
                          *, serialized_type_name=None, to_dumpable_context=None,
                          from_dumpable_context=None, flatten_with_keys_fn=None):
    """The deprecated form: a second registration overwrites the first with a warning."""
    if to_str_fn is not None or maybe_from_str_fn is not None:
        warnings.warn("`to_str_fn` and `maybe_from_str_fn` is deprecated. Please use "
                      "`to_dumpable_context` and `from_dumpable_context` instead.",
                      FutureWarning, stacklevel=2)
    _private_register_pytree_node(cls, flatten_fn, unflatten_fn,
                                  serialized_type_name=serialized_type_name,
                                  to_dumpable_context=to_dumpable_context,
                                  from_dumpable_context=from_dumpable_context,
                                  flatten_with_keys_fn=flatten_with_keys_fn)


def _deregister_pytree_node(cls):
    with _NODE_REGISTRY_LOCK:
        del SUPPORTED_NODES[cls]
        node_def = SUPPORTED_SERIALIZED_TYPES.pop(cls)
        SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(node_def.serialized_type_name, None)
        CONSTANT_NODES.discard(cls)


def register_dataclass(cls, *, field_names=None, drop_field_names=None,
                       serialized_type_name=None):
    """A dataclass (or a class built from keyword fields) as a node: its non-None fields are the
    children; fields that are None are rebuilt as None."""
    drop_field_names = drop_field_names or []
    if not dataclasses.is_dataclass(cls):
        if field_names is None:
            raise ValueError("field_names must be specified with a list of all fields used to "
                             "initialize %s, as it is not a dataclass." % (cls,))
    elif field_names is None:
        field_names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        init_fields = {f.name for f in dataclasses.fields(cls) if f.init}
        init_fields.difference_update(drop_field_names)
        if init_fields != set(field_names):
            msg = "field_names does not include all dataclass fields.\n"
            missing = init_fields - set(field_names)
            unexpected = set(field_names) - init_fields
            if missing:
                msg += "Missing fields in `field_names`: %s.\n" % (missing,)
            if unexpected:
                msg += "Unexpected fields in `field_names`: %s.\n" % (unexpected,)
            raise ValueError(msg)

    def flatten(obj):
        values, names, nones = [], [], []
        for name in field_names:
            val = getattr(obj, name)
            if val is None:
                nones.append(name)
            else:
                values.append(val)
                names.append(name)
        return values, [names, nones]

    def unflatten(values, context):
        names, nones = context
        return cls(**dict(zip(names, values, strict=True)), **dict.fromkeys(nones))

    def flatten_with_keys(obj):
        values, (names, _) = flatten(obj)
        return [(GetAttrKey(k), v) for k, v in zip(names, values, strict=True)], names

    _private_register_pytree_node(cls, flatten, unflatten,
                                  serialized_type_name=serialized_type_name,
                                  flatten_with_keys_fn=flatten_with_keys)


@dataclasses.dataclass(frozen=True)
class ConstantNode:
    value: Any


def register_constant(cls):
    """A type whose instances are nodes with no leaves: the instance rides in the context."""
    if cls.__eq__ is object.__eq__:
        raise TypeError("register_constant(cls) expects `cls` to have a non-default `__eq__` "
                        "implementation.")
    if cls.__hash__ is None:
        raise TypeError("register_constant(cls) expects `cls` to have a non-default `__hash__` "
                        "implementation.")

    def flatten(x):
        return [], ConstantNode(x)

    with _NODE_REGISTRY_LOCK:
        _private_register_pytree_node(cls, flatten, lambda _, ctx: ctx.value,
                                      flatten_with_keys_fn=flatten)
        CONSTANT_NODES.add(cls)


def is_constant_class(cls):
    return isinstance(cls, type) and cls in CONSTANT_NODES


# ------------------------------------------------------------------ keys

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return "[%r]" % (self.idx,)

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    key: Any

    def __str__(self):
        return "[%r]" % (self.key,)

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return "." + self.name

    def get(self, obj):
        return getattr(obj, self.name)


# ------------------------------------------------------------------ namedtuple / structseq

def is_namedtuple_class(cls):
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(f) is str for f in cls._fields)
            and callable(getattr(cls, "_make", None))
            and callable(getattr(cls, "_asdict", None)))


def is_namedtuple(obj):
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_namedtuple_instance(obj):
    return is_namedtuple_class(type(obj))


_Py_TPFLAGS_BASETYPE = 1 << 10


def is_structseq_class(cls):
    """A CPython PyStructSequence type (os.stat_result, time.struct_time): a leaf here, as in
    PyTorch's Python pytree."""
    return (isinstance(cls, type) and cls.__bases__ == (tuple,)
            and isinstance(getattr(cls, "n_fields", None), int)
            and isinstance(getattr(cls, "n_sequence_fields", None), int)
            and isinstance(getattr(cls, "n_unnamed_fields", None), int)
            and not bool(cls.__flags__ & _Py_TPFLAGS_BASETYPE))


def is_structseq(obj):
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_instance(obj):
    return is_structseq_class(type(obj))


# ------------------------------------------------------------------ the built-in nodes

def _tuple_flatten(d):
    return list(d), None


def _tuple_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _tuple_unflatten(values, context):
    return tuple(values)


def _list_flatten(d):
    return d, None


def _list_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _list_unflatten(values, context):
    return list(values)


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


def _dict_flatten_with_keys(d):
    values, keys = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(keys, values, strict=True)], keys


def _dict_unflatten(values, context):
    return dict(zip(context, values, strict=True))


def _namedtuple_flatten(d):
    return list(d), type(d)


def _namedtuple_flatten_with_keys(d):
    values, cls = _namedtuple_flatten(d)
    return [(GetAttrKey(f), v) for f, v in zip(cls._fields, values, strict=True)], cls


def _namedtuple_unflatten(values, context):
    return context(*values)


def _namedtuple_serialize(context):
    node = SUPPORTED_SERIALIZED_TYPES.get(context)
    if node is None or node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            "Can't serialize TreeSpec of namedtuple class %s because we didn't register a "
            "serialized_type_name. Please register using `_register_namedtuple`." % (context,))
    return node.serialized_type_name


def _namedtuple_deserialize(dumpable_context):
    if dumpable_context not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError("Can't deserialize TreeSpec of namedtuple class %s because we "
                                  "couldn't find a serialized name." % (dumpable_context,))
    return SERIALIZED_TYPE_TO_PYTHON_TYPE[dumpable_context]


def _register_namedtuple(cls, *, serialized_type_name):
    """Makes a namedtuple class serializable by treespec_dumps under serialized_type_name."""
    _private_register_pytree_node(cls, _namedtuple_flatten, _namedtuple_unflatten,
                                  serialized_type_name=serialized_type_name,
                                  to_dumpable_context=_namedtuple_serialize,
                                  from_dumpable_context=_namedtuple_deserialize,
                                  flatten_with_keys_fn=_namedtuple_flatten_with_keys)


def _ordereddict_flatten(d):
    return list(d.values()), list(d.keys())


def _ordereddict_flatten_with_keys(d):
    values, keys = _ordereddict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(keys, values, strict=True)], keys


def _ordereddict_unflatten(values, context):
    return OrderedDict((k, v) for k, v in zip(context, values, strict=True))


_odict_flatten, _odict_unflatten = _ordereddict_flatten, _ordereddict_unflatten


def _defaultdict_flatten(d):
    values, keys = _dict_flatten(d)
    return values, [d.default_factory, keys]


def _defaultdict_flatten_with_keys(d):
    values, context = _defaultdict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context[1], values, strict=True)], context


def _defaultdict_unflatten(values, context):
    factory, keys = context
    return defaultdict(factory, _dict_unflatten(values, keys))


def _defaultdict_serialize(context):
    factory, keys = context
    return {"default_factory_module": factory.__module__,
            "default_factory_name": factory.__qualname__, "dict_context": keys}


def _defaultdict_deserialize(dumpable_context):
    expected = {"default_factory_module", "default_factory_name", "dict_context"}
    if not isinstance(dumpable_context, dict) or set(dumpable_context) != expected:
        raise ValueError("treespec_loads: a defaultdict context needs the keys %s, got %r"
                         % (sorted(expected), dumpable_context))
    module = importlib.import_module(dumpable_context["default_factory_module"])
    return [getattr(module, dumpable_context["default_factory_name"]),
            dumpable_context["dict_context"]]


def _deque_flatten(d):
    return list(d), d.maxlen


def _deque_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], d.maxlen


def _deque_unflatten(values, context):
    return deque(values, maxlen=context)


_private_register_pytree_node(tuple, _tuple_flatten, _tuple_unflatten,
                              serialized_type_name="builtins.tuple",
                              flatten_with_keys_fn=_tuple_flatten_with_keys)
_private_register_pytree_node(list, _list_flatten, _list_unflatten,
                              serialized_type_name="builtins.list",
                              flatten_with_keys_fn=_list_flatten_with_keys)
_private_register_pytree_node(dict, _dict_flatten, _dict_unflatten,
                              serialized_type_name="builtins.dict",
                              flatten_with_keys_fn=_dict_flatten_with_keys)
_private_register_pytree_node(namedtuple, _namedtuple_flatten, _namedtuple_unflatten,
                              serialized_type_name="collections.namedtuple",
                              to_dumpable_context=_namedtuple_serialize,
                              from_dumpable_context=_namedtuple_deserialize,
                              flatten_with_keys_fn=_namedtuple_flatten_with_keys)
_private_register_pytree_node(OrderedDict, _ordereddict_flatten, _ordereddict_unflatten,
                              serialized_type_name="collections.OrderedDict",
                              flatten_with_keys_fn=_ordereddict_flatten_with_keys)
_private_register_pytree_node(defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                              serialized_type_name="collections.defaultdict",
                              to_dumpable_context=_defaultdict_serialize,
                              from_dumpable_context=_defaultdict_deserialize,
                              flatten_with_keys_fn=_defaultdict_flatten_with_keys)
_private_register_pytree_node(deque, _deque_flatten, _deque_unflatten,
                              serialized_type_name="collections.deque",
                              flatten_with_keys_fn=_deque_flatten_with_keys)

STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES = frozenset({tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque})


def _get_node_type(tree):
    t = type(tree)
    # every namedtuple class is the one node type `namedtuple` (its class is the context)
    return namedtuple if is_namedtuple_class(t) else t


def tree_is_leaf(tree, is_leaf=None):
    if is_leaf is not None and is_leaf(tree):
        return True
    return _get_node_type(tree) not in SUPPORTED_NODES


def _is_leaf(tree, is_leaf=None):
    return tree_is_leaf(tree, is_leaf=is_leaf)


# ------------------------------------------------------------------ TreeSpec

class TreeSpec:
    """The structure of a pytree: the root's node type (None for a leaf), the context its
    flatten function returned, and one TreeSpec per child."""

    __slots__ = ("type", "_context", "_children", "num_nodes", "num_leaves", "num_children")

    def __init__(self, type, context, children_specs):
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "_context", context)
        object.__setattr__(self, "_children", list(children_specs))
        if type is None:
            if context is not None:
                raise ValueError("TreeSpec: a leaf (type None) has no context")
            if self._children:
                raise ValueError("TreeSpec: a leaf (type None) has no children")
            nodes = leaves = 1
        else:
            nodes, leaves = 1, 0
            for c in self._children:
                nodes += c.num_nodes
                leaves += c.num_leaves
        object.__setattr__(self, "num_nodes", nodes)
        object.__setattr__(self, "num_leaves", leaves)
        object.__setattr__(self, "num_children", len(self._children))

    def __setattr__(self, name, value):
        raise AttributeError("TreeSpec is immutable (cannot assign %r)" % name)

    def __repr__(self, indent=0):
        if self.type is None:
            return "*"
        out = "TreeSpec(%s, %s, [" % (self.type.__name__, self._context)
        if self.num_children:
            indent += 2
            out += self._children[0].__repr__(indent)
            out += "," if self.num_children > 1 else ""
            out += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self._children[1:])
        return out + "])"

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (str(self.type) == str(other.type) and self._context == other._context
                and self._children == other._children)

    def __hash__(self):
        t = self.type
        if t is defaultdict:
            ctx = (self._context[0], tuple(self._context[1]))
        elif t in (dict, OrderedDict):
            ctx = tuple(self._context)
        elif t is None or t in BUILTIN_TYPES:
            ctx = self._context
        elif isinstance(self._context, ConstantNode):
            ctx = self._context.value
        else:
            ctx = None          # user contexts may be unhashable
        return hash((t, ctx, tuple(self._children)))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        if self.type is None:
            return (treespec_leaf, ())
        return (TreeSpec, (self.type, self._context, self._children))

    @property
    def context(self):
        return self._context

    @property
    def children_specs(self):
        return self._children

    def is_leaf(self):
        return self.num_nodes == 1 and self.num_leaves == 1

    def children(self):
        return list(self._children)

    def child(self, index):
        return self._children[index]

    def flatten_up_to(self, tree):
        """The subtrees of tree at this spec's leaves (tree must have this spec as a prefix)."""
        out = []
        self._flatten_up_to(tree, out)
        return out

    def _flatten_up_to(self, node, out):
        if self.is_leaf():
            out.append(node)
            return
        node_type = _get_node_type(node)
        if self.type not in BUILTIN_TYPES:
            if node_type != self.type:
                raise ValueError("Type mismatch; expected %r, but got %r." % (self.type,
                                                                              node_type))
            children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
            if len(children) != self.num_children:
                raise ValueError("Node arity mismatch; expected %d, but got %d."
                                 % (self.num_children, len(children)))
            if context != self._context:
                raise ValueError("Node context mismatch for custom node type %r." % (self.type,))
        else:
            both_dicts = self.type in STANDARD_DICT_TYPES and node_type in STANDARD_DICT_TYPES
            if not both_dicts and node_type != self.type:
                raise ValueError("Node type mismatch; expected %r, but got %r."
                                 % (self.type, node_type))
            if len(node) != self.num_children:
                raise ValueError("Node arity mismatch; expected %d, but got %d."
                                 % (self.num_children, len(node)))
            if both_dicts:
                keys = self._context if self.type is not defaultdict else self._context[1]
                got, want = set(node), set(keys)
                if got != want:
                    msg = ""
                    if want - got:
                        msg += "; missing key(s): %s" % (want - got,)
                    if got - want:
                        msg += "; extra key(s): %s" % (got - want,)
                    raise ValueError("Node keys mismatch%s." % msg)
                children = [node[k] for k in keys]
            else:
                children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
                if node_type is not deque and context != self._context:
                    raise ValueError("Node context mismatch for node type %r; expected %r, but "
                                     "got %r." % (self.type, self._context, context))
        for sub, spec in zip(children, self._children, strict=True):
            spec._flatten_up_to(sub, out)

    def unflatten(self, leaves):
        """The pytree of this structure holding leaves (in flatten order)."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError("treespec.unflatten(leaves): `leaves` has length %d but the spec "
                             "refers to a pytree that holds %d items (%s)."
                             % (len(leaves), self.num_leaves, self))
        return self._unflatten(leaves, 0)

    def _unflatten(self, leaves, start):
        if self.is_leaf():
            return leaves[start]
        children = []
        for spec in self._children:
            children.append(spec._unflatten(leaves, start))
            start += spec.num_leaves
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self._context)


PyTreeSpec = TreeSpec


class LeafSpec(TreeSpec):
    """The spec of a leaf (deprecated in PyTorch in favour of treespec_leaf())."""

    __slots__ = ()

    def __init__(self):
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()


def treespec_leaf():
    return _LEAF_SPEC


def treespec_tuple(iterable=(), /):
    children = list(iterable)
    if any(not isinstance(c, TreeSpec) for c in children):
        raise ValueError("Expected a tuple of TreeSpec values, got: %r." % (children,))
    return TreeSpec(tuple, None, children)


def treespec_dict(mapping=(), /, **kwargs):
    d = dict(mapping, **kwargs)
    if any(not isinstance(c, TreeSpec) for c in d.values()):
        raise ValueError("Expected a dictionary of TreeSpec values, got: %r." % (d,))
    return TreeSpec(dict, list(d.keys()), list(d.values()))


# ------------------------------------------------------------------ flatten / map

def tree_flatten(tree, is_leaf=None):
    """(leaves, TreeSpec): the leaves in depth-first, left-to-right order."""
    leaves = []

    def helper(node):
        if tree_is_leaf(node, is_leaf=is_leaf):
            leaves.append(node)
            return _LEAF_SPEC
        node_type = _get_node_type(node)
        children, context = SUPPORTED_NODES[node_type].flatten_fn(node)
        return TreeSpec(node_type, context, [helper(c) for c in children])

    spec = helper(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        if not isinstance(leaves, TreeSpec):
            raise TypeError("Expected `treespec` to be an instance of PyTreeSpec but got item of "
                            "type %s." % (type(treespec),))
        leaves, treespec = treespec, leaves
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    if tree_is_leaf(tree, is_leaf=is_leaf):
        yield tree
        return
    children, _ = SUPPORTED_NODES[_get_node_type(tree)].flatten_fn(tree)
    for c in children:
        yield from tree_iter(c, is_leaf=is_leaf)


def tree_leaves(tree, is_leaf=None):
    return list(tree_iter(tree, is_leaf=is_leaf))


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf=is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """A new pytree of tree's structure with func(leaf, *matching subtrees of rests) at each
    leaf; each of rests must have tree's structure as a prefix."""
    leaves, spec = tree_flatten(tree, is_leaf=is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(map(func, *flat))


def tree_map_(func, tree, *rests, is_leaf=None):
    """tree_map for func's side effects: returns tree itself."""
    leaves, spec = tree_flatten(tree, is_leaf=is_leaf)
    flat = [leaves] + [spec.flatten_up_to(r) for r in rests]
    deque(map(func, *flat), maxlen=0)
    return tree


def map_only(type_or_types_or_pred, /):
    """Decorator: the function applies to leaves of the given type(s) (or that pass the
    predicate); other leaves pass through unchanged."""
    if isinstance(type_or_types_or_pred, (type, tuple, types.UnionType)):
        def pred(x):
            return isinstance(x, type_or_types_or_pred)
    elif callable(type_or_types_or_pred):
        pred = type_or_types_or_pred
    else:
        raise TypeError("Argument must be a type, a tuple of types, or a callable.")

    def wrapper(func):
        @functools.wraps(func)
        def wrapped(x):
            return func(x) if pred(x) else x
        return wrapped

    return wrapper


def tree_map_only(type_or_types_or_pred, /, func, tree, is_leaf=None):
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred, /, func, tree, is_leaf=None):
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf=is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf=is_leaf)))


def tree_all_only(type_or_types, /, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf=is_leaf)
               if isinstance(x, type_or_types))


def tree_any_only(type_or_types, /, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf=is_leaf)
               if isinstance(x, type_or_types))


def _broadcast_to_and_flatten(tree, treespec, is_leaf=None):
    """tree (a prefix of treespec's structure) with each leaf repeated over the leaves of its
    subtree, flattened; None when tree is no prefix."""
    full = tree_unflatten([0] * treespec.num_leaves, treespec)
    out = []
    try:
        tree_map_(lambda x, sub: out.extend([x] * tree_structure(sub, is_leaf).num_leaves),
                  tree, full, is_leaf=is_leaf)
    except ValueError:
        return None
    return out


def arg_tree_leaves(*args, **kwargs):
    leaves = []
    for a in args:
        leaves.extend(tree_iter(a))
    for a in kwargs.values():
        leaves.extend(tree_iter(a))
    return leaves


# ------------------------------------------------------------------ key paths

def _generate_key_paths(key_path, tree, is_leaf=None):
    if is_leaf and is_leaf(tree):
        yield key_path, tree
        return
    node_type = _get_node_type(tree)
    handler = SUPPORTED_NODES.get(node_type)
    if handler is None:
        yield key_path, tree
        return
    if handler.flatten_with_keys_fn is None:
        raise ValueError("Did not find a flatten_with_keys_fn for type: %s. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node." % (node_type,))
    key_children, _ = handler.flatten_with_keys_fn(tree)
    for k, c in key_children:
        yield from _generate_key_paths((*key_path, k), c, is_leaf)


def tree_flatten_with_path(tree, is_leaf=None):
    _, spec = tree_flatten(tree, is_leaf)
    return list(_generate_key_paths((), tree, is_leaf)), spec


def tree_leaves_with_path(tree, is_leaf=None):
    return list(_generate_key_paths((), tree, is_leaf))


def tree_map_with_path(func, tree, *rests, is_leaf=None):
    kp_leaves, spec = tree_flatten_with_path(tree, is_leaf)
    columns = list(zip(*kp_leaves, strict=True)) if kp_leaves else [(), ()]
    columns += [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(*columns, strict=True))


def keystr(kp):
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    for k in kp:
        obj = k.get(obj)
    return obj


# ------------------------------------------------------------------ serialization

def _treespec_to_json(spec):
    if spec.is_leaf():
        return {"type": None, "context": None, "children_spec": []}
    node = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if node is None:
        raise NotImplementedError("Serializing %s in pytree is not registered." % (spec.type,))
    if node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(
            "No registered serialization name for %s found. Please update your "
            "_register_pytree_node call with a `serialized_type_name` kwarg." % (spec.type,))
    if node.to_dumpable_context is None:
        try:
            context = json.dumps(spec._context, cls=EnumEncoder)
        except TypeError as e:
            raise TypeError("Unable to serialize context. Please make the context json "
                            "dump-able, or register a custom serializer using "
                            "_register_pytree_node.") from e
    else:
        context = node.to_dumpable_context(spec._context)
    return {"type": node.serialized_type_name, "context": context,
            "children_spec": [_treespec_to_json(c) for c in spec._children]}


def enum_object_hook(obj):
    if "__enum__" in obj:
        modname, _, classname = obj["fqn"].partition(":")
        cls = importlib.import_module(modname)
        for attr in classname.split("."):
            cls = getattr(cls, attr)
        return cls[obj["name"]]
    return obj


def _json_to_treespec(schema):
    if schema["type"] is None and schema["context"] is None and not schema["children_spec"]:
        return _LEAF_SPEC
    name = schema["type"]
    if name not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(
            "Deserializing %s in pytree failed because the serialized type is not registered in "
            "this process; register it with register_pytree_node(..., serialized_type_name=%r) "
            "before loading." % (name, name))
    typ = SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    node = SUPPORTED_SERIALIZED_TYPES[typ]
    if node.from_dumpable_context is None:
        context = json.loads(schema["context"], object_hook=enum_object_hook)
    else:
        context = node.from_dumpable_context(schema["context"])
    return TreeSpec(typ, context, [_json_to_treespec(c) for c in schema["children_spec"]])


def treespec_dumps(treespec, protocol=None):
    """The spec as PyTorch's JSON string (protocol 1)."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError("Expected `treespec` to be an instance of PyTreeSpec but got item of "
                        "type %s." % (type(treespec),))
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol != 1:
        raise ValueError("Unknown protocol %s. Available protocols: [1]" % (protocol,))
    return json.dumps((protocol, _treespec_to_json(treespec)), cls=EnumEncoder)


@functools.lru_cache
def treespec_loads(serialized):
    protocol, schema = json.loads(serialized)
    if protocol != 1:
        raise ValueError("Unknown protocol %s. Available protocols: [1]" % (protocol,))
    return _json_to_treespec(schema)


class _Asterisk(str):
    __slots__ = ()

    def __new__(cls):
        return super().__new__(cls, "*")

    def __repr__(self):
        return "*"


_asterisk = _Asterisk()


def treespec_pprint(treespec):
    return repr(tree_unflatten([_asterisk] * treespec.num_leaves, treespec))
