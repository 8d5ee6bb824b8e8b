"""tessera.utils._pytree (torch.utils._pytree): every expected value below was printed by PyTorch
2.15's torch.utils._pytree on the same input (leaves, TreeSpec reprs, node counts, key paths,
treespec_dumps strings, error types and messages), so a spec dumped by one loads in the other."""
import dataclasses
import json
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest

import tessera
import tessera.utils._pytree as P

Point = namedtuple("Point", "x y")


def cases():
    return {
        "nested": {"a": [1, (2, 3)], "b": None, "c": {"d": 4}},
        "none": None,
        "empty": [(), {}, []],
        "od": OrderedDict([("z", 1), ("a", 2)]),
        "dd": defaultdict(list, {"k": [5, 6]}),
        "dq": deque([1, [2, 3]], maxlen=4),
        "nt": Point(1, [2, 3]),
        "leaf": 7,
    }


LEAF = '{"type": null, "context": null, "children_spec": []}'
# name: (leaves, repr, (num_nodes, num_leaves, num_children), dumps or None, pprint, key paths)
EXPECTED = {
    "nested": ([1, 2, 3, None, 4],
               "TreeSpec(dict, ['a', 'b', 'c'], [TreeSpec(list, None, [*,\n    TreeSpec(tuple, "
               "None, [*,\n      *])]),\n  *,\n  TreeSpec(dict, ['d'], [*])])",
               (9, 5, 3),
               '[1, {"type": "builtins.dict", "context": "[\\"a\\", \\"b\\", \\"c\\"]", '
               '"children_spec": [{"type": "builtins.list", "context": "null", "children_spec": '
               '[%s, {"type": "builtins.tuple", "context": "null", "children_spec": [%s, %s]}]}, '
               '%s, {"type": "builtins.dict", "context": "[\\"d\\"]", "children_spec": [%s]}]}]'
               % ((LEAF,) * 5),
               "{'a': [*, (*, *)], 'b': *, 'c': {'d': *}}",
               [("['a'][0]", 1), ("['a'][1][0]", 2), ("['a'][1][1]", 3), ("['b']", None),
                ("['c']['d']", 4)]),
    "none": ([None], "*", (1, 1, 0), "[1, %s]" % LEAF, "*", [("", None)]),
    "empty": ([], "TreeSpec(list, None, [TreeSpec(tuple, None, []),\n  TreeSpec(dict, [], []),\n"
                  "  TreeSpec(list, None, [])])", (4, 0, 3),
              '[1, {"type": "builtins.list", "context": "null", "children_spec": [{"type": '
              '"builtins.tuple", "context": "null", "children_spec": []}, {"type": '
              '"builtins.dict", "context": "[]", "children_spec": []}, {"type": '
              '"builtins.list", "context": "null", "children_spec": []}]}]',
              "[(), {}, []]", []),
    "od": ([1, 2], "TreeSpec(OrderedDict, ['z', 'a'], [*,\n  *])", (3, 2, 2),
           '[1, {"type": "collections.OrderedDict", "context": "[\\"z\\", \\"a\\"]", '
           '"children_spec": [%s, %s]}]' % (LEAF, LEAF),
           "OrderedDict([('z', *), ('a', *)])", [("['z']", 1), ("['a']", 2)]),
    "dd": ([5, 6], "TreeSpec(defaultdict, [<class 'list'>, ['k']], [TreeSpec(list, None, [*,\n"
                   "    *])])", (4, 2, 1),
           '[1, {"type": "collections.defaultdict", "context": {"default_factory_module": '
           '"builtins", "default_factory_name": "list", "dict_context": ["k"]}, "children_spec": '
           '[{"type": "builtins.list", "context": "null", "children_spec": [%s, %s]}]}]'
           % (LEAF, LEAF),
           "defaultdict(<class 'list'>, {'k': [*, *]})", [("['k'][0]", 5), ("['k'][1]", 6)]),
    "dq": ([1, 2, 3], "TreeSpec(deque, 4, [*,\n  TreeSpec(list, None, [*,\n    *])])", (5, 3, 2),
           '[1, {"type": "collections.deque", "context": "4", "children_spec": [%s, {"type": '
           '"builtins.list", "context": "null", "children_spec": [%s, %s]}]}]' % ((LEAF,) * 3),
           "deque([*, [*, *]], maxlen=4)", [("[0]", 1), ("[1][0]", 2), ("[1][1]", 3)]),
    "nt": ([1, 2, 3], "TreeSpec(namedtuple, %r, [*,\n  TreeSpec(list, None, [*,\n    *])])" % Point,
           (5, 3, 2), None, "Point(x=*, y=[*, *])", [(".x", 1), (".y[0]", 2), (".y[1]", 3)]),
    "leaf": ([7], "*", (1, 1, 0), "[1, %s]" % LEAF, "*", [("", 7)]),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_flatten_matches_pytorch(name):
    tree = cases()[name]
    leaves, rep, counts, dumps, pprint, paths = EXPECTED[name]
    got_leaves, spec = P.tree_flatten(tree)
    assert got_leaves == leaves
    assert repr(spec) == rep
    assert (spec.num_nodes, spec.num_leaves, spec.num_children) == counts
    assert P.treespec_pprint(spec) == pprint
    assert [(P.keystr(p), v) for p, v in P.tree_leaves_with_path(tree)] == paths
    assert P.tree_leaves(tree) == leaves
    if dumps is None:
        with pytest.raises(NotImplementedError, match="_register_namedtuple"):
            P.treespec_dumps(spec)
    else:
        assert P.treespec_dumps(spec) == dumps
        assert json.loads(P.treespec_dumps(spec)) == json.loads(dumps)
        assert P.treespec_loads(dumps) == spec
    back = P.tree_unflatten(got_leaves, spec)
    assert back == tree and type(back) is type(tree)
    if isinstance(tree, deque):
        assert back.maxlen == 4
    if isinstance(tree, defaultdict):
        assert back.default_factory is list


def test_tree_map_matches_pytorch():
    assert P.tree_map(lambda x: x * 10, {"x": 7, "y": (42, 64)}) == {"x": 70, "y": (420, 640)}
    assert P.tree_map(lambda x, y: [x] + y, [5, 6], [[7, 9], [1, 2]]) == [[5, 7, 9], [6, 1, 2]]
    assert P.tree_map(lambda x: x is None, {"x": 7, "y": (42, 64), "z": None}) == \
        {"x": False, "y": (False, False), "z": True}
    assert P.tree_map_only(int, lambda x: x + 1, [1, "a", 2.5, (3,)]) == [2, "a", 2.5, (4,)]
    assert P.tree_map_only((int, float), lambda x: -x, [1, "a", 2.5]) == [-1, "a", -2.5]
    # dict kinds accept each other when the keys agree; the result has the first tree's order
    got = P.tree_map(lambda x, y: x + y, {"a": 1, "b": 2}, OrderedDict([("b", 20), ("a", 10)]))
    assert got == {"a": 11, "b": 22} and type(got) is dict
    assert P.tree_map_with_path(lambda p, x: P.keystr(p) + str(x), {"a": [1], "b": 2}) == \
        {"a": ["['a'][0]1"], "b": "['b']2"}
    seen = []
    tree = [1, (2, 3)]
    assert P.tree_map_(seen.append, tree) is tree and seen == [1, 2, 3]


def test_is_leaf_and_predicates():
    leaves, spec = P.tree_flatten([[1, 2], [3]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1)
    assert leaves == [1, 2, [3]]
    assert repr(spec) == "TreeSpec(list, None, [TreeSpec(list, None, [*,\n    *]),\n  *])"
    assert P.tree_all(lambda x: x > 0, [1, (2,)]) and P.tree_any(lambda x: x > 1, [1, (2,)])
    assert not P.tree_all(lambda x: x > 1, [1, (2,)])
    assert P.tree_all_only(int, lambda x: x > 0, [1, "s"])
    assert P.tree_any_only(str, lambda x: x == "s", [1, "s"])
    assert P.tree_is_leaf(None) and P.tree_is_leaf(1) and not P.tree_is_leaf([])


def test_errors_match_pytorch():
    with pytest.raises(ValueError, match=r"^Node arity mismatch; expected 2, but got 3\.$"):
        P.tree_map(lambda x, y: x, [1, 2], [1, 2, 3])
    with pytest.raises(ValueError) as e:
        P.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    assert str(e.value) == "Node keys mismatch; missing key(s): {'a'}; extra key(s): {'b'}."
    with pytest.raises(ValueError) as e:
        P.tree_map(lambda x, y: x, (1, 2), [1, 2])
    assert str(e.value) == ("Node type mismatch; expected <class 'tuple'>, but got "
                            "<class 'list'>.")
    _, spec = P.tree_flatten([1, {"a": 2}])
    with pytest.raises(ValueError) as e:
        P.tree_unflatten([1], spec)
    assert str(e.value) == ("treespec.unflatten(leaves): `leaves` has length 1 but the spec "
                            "refers to a pytree that holds 2 items (TreeSpec(list, None, [*,\n"
                            "  TreeSpec(dict, ['a'], [*])])).")
    with pytest.raises(TypeError, match="PyTreeSpec"):
        P.tree_unflatten([1], [2])


def test_spec_equality_hash_and_helpers():
    s = P.tree_structure([1, {"a": 2}])
    assert s == P.tree_structure([9, {"a": 8}]) and s != P.tree_structure([9, {"b": 8}])
    assert hash(s) == hash(P.tree_structure([9, {"a": 8}]))
    assert P.treespec_loads(P.treespec_dumps(s)) == s
    assert P.tree_unflatten(s, [5, 6]) == [5, {"a": 6}]       # arguments in either order
    assert P.tree_structure([1, (2, 3)]).flatten_up_to([[9], (8, {"k": 7})]) == [[9], 8, {"k": 7}]
    spec = P.tree_structure([1, (2, 3)])
    assert P._broadcast_to_and_flatten(0, spec) == [0, 0, 0]
    assert P._broadcast_to_and_flatten([0, 1], spec) == [0, 1, 1]
    assert P._broadcast_to_and_flatten([0, 1, 2], spec) is None
    assert P._dict_flatten({"a": 1, "b": 2}) == ([1, 2], ["a", "b"])
    assert P._dict_unflatten([3, 4], ["x", "y"]) == {"x": 3, "y": 4}
    assert repr(P.treespec_dict({"a": P.treespec_leaf()})) == "TreeSpec(dict, ['a'], [*])"
    assert repr(P.treespec_tuple([P.treespec_leaf()] * 2)) == "TreeSpec(tuple, None, [*,\n  *])"
    assert P.LeafSpec() == P.treespec_leaf() and repr(P.LeafSpec()) == "*"
    assert P.tree_structure(3).is_leaf() and not P.tree_structure([3]).is_leaf()
    assert P.tree_structure([3]).children() == [P.treespec_leaf()]
    with pytest.raises(AttributeError):
        s.type = list


class Custom:
    def __init__(self, a, b):
        self.a, self.b = a, b


def test_register_custom_node_like_pytorch():
    P.register_pytree_node(
        Custom, lambda c: ([c.a, c.b], "ctx"), lambda v, ctx: Custom(*v),
        serialized_type_name="m.C",
        flatten_with_keys_fn=lambda c: ([(P.GetAttrKey("a"), c.a), (P.GetAttrKey("b"), c.b)],
                                        "ctx"))
    try:
        leaves, spec = P.tree_flatten([Custom(1, (2, 3))])
        assert leaves == [1, 2, 3]
        assert repr(spec) == ("TreeSpec(list, None, [TreeSpec(Custom, ctx, [*,\n    "
                              "TreeSpec(tuple, None, [*,\n      *])])])")
        assert P.treespec_dumps(spec) == (
            '[1, {"type": "builtins.list", "context": "null", "children_spec": [{"type": "m.C", '
            '"context": "\\"ctx\\"", "children_spec": [%s, {"type": "builtins.tuple", "context": '
            '"null", "children_spec": [%s, %s]}]}]}]' % (LEAF, LEAF, LEAF))
        assert [(P.keystr(p), v) for p, v in P.tree_leaves_with_path([Custom(1, (2, 3))])] == \
            [("[0].a", 1), ("[0].b[0]", 2), ("[0].b[1]", 3)]
        out = P.tree_map(lambda x: x * 2, Custom(1, (2, 3)))
        assert isinstance(out, Custom) and out.a == 2 and out.b == (4, 6)
        assert Custom in P.SUPPORTED_NODES
        with pytest.raises(ValueError, match="already registered as pytree node"):
            P.register_pytree_node(Custom, None, None)
        kp = P.tree_leaves_with_path([Custom(1, (2, 3))])[2][0]
        assert P.key_get([Custom(1, (2, 3))], kp) == 3
    finally:
        P._deregister_pytree_node(Custom)
    assert P.tree_leaves(Custom(1, 2))[0].__class__ is Custom      # a leaf again


def test_register_dataclass_and_constant():
    @dataclasses.dataclass
    class DC:
        x: int
        y: object = None

    P.register_dataclass(DC)
    try:
        leaves, spec = P.tree_flatten(DC(1, None))
        assert leaves == [1] and repr(spec) == "TreeSpec(DC, [['x'], ['y']], [*])"
        assert P.tree_unflatten([5], spec) == DC(5, None)
    finally:
        P._deregister_pytree_node(DC)

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        norm: str

    P.register_constant(Cfg)
    try:
        leaves, spec = P.tree_flatten([Cfg("l2"), 3])
        assert leaves == [3] and P.tree_unflatten([4], spec) == [Cfg("l2"), 4]
    finally:
        P._deregister_pytree_node(Cfg)
    with pytest.raises(TypeError, match="non-default `__eq__`"):
        P.register_constant(Custom)


def test_tensors_are_leaves():
    t = tessera.ones(2)
    leaves, spec = P.tree_flatten({"h": (t, None), "n": 3})
    assert leaves[0] is t and leaves[1:] == [None, 3]
    doubled = P.tree_map_only(tessera.Tensor, lambda x: x * 2, {"h": (t, None), "n": 3})
    assert doubled["h"][0].tolist() == [2.0, 2.0] and doubled["n"] == 3


def test_reachable_as_torch_utils_pytree():
    import tessera.utils
    assert tessera.utils._pytree is P
