"""A frozen Parameter (requires_grad=False) through the .pt format (issue 76): tessera.save writes
torch._utils._rebuild_parameter(data, False, ...) as PyTorch does, and tessera.load gives back a
Parameter that still does not require grad, alone, in containers and inside a whole module
(python/tessera/serialization.py). Planted bugs this catches: the writer always writing True, the
reader building Parameter(data) with its default requires_grad=True, a whole module's frozen
layer coming back trainable."""
import io
import pickle
import zipfile

import pytest

import tessera
import tessera.nn as nn


def _round_trip(obj, weights_only=True):
    buf = io.BytesIO()
    tessera.save(obj, buf)
    buf.seek(0)
    return tessera.load(buf, weights_only=weights_only), buf.getvalue()


class _Anything:
    """any other class or function of the pickle: built, called and given state alike"""

    def __new__(cls, *a, **k):
        return object.__new__(cls)

    def __init__(self, *a, **k):
        pass

    def __setstate__(self, state):
        pass


class _Recorder(pickle.Unpickler):
    """Reads data.pkl without Tessera's reader: records the arguments of every
    _rebuild_parameter call (storages and tensors stand in as None)."""

    def __init__(self, f):
        super().__init__(f)
        self.calls = []

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_parameter"):
            return lambda data, requires_grad, hooks: self.calls.append(requires_grad)
        if module == "collections" and name == "OrderedDict":
            import collections
            return collections.OrderedDict
        return _Anything

    def persistent_load(self, pid):
        return None


def _written_flags(raw):
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        r = _Recorder(io.BytesIO(z.read(pkl)))
        r.load()
        return r.calls


@pytest.mark.parametrize("requires_grad", [False, True])
def test_parameter_round_trip(requires_grad):
    p = nn.Parameter(tessera.arange(6.0).reshape(2, 3), requires_grad=requires_grad)
    q, raw = _round_trip(p)
    assert type(q) is nn.Parameter
    assert q.requires_grad is requires_grad
    assert q.tolist() == p.tolist()
    assert _written_flags(raw) == [requires_grad]  # what PyTorch would read


def test_frozen_and_trainable_in_one_container():
    frozen = nn.Parameter(tessera.ones(3), requires_grad=False)
    live = nn.Parameter(tessera.zeros(2))
    d, raw = _round_trip({"frozen": frozen, "live": live, "list": [frozen, live]})
    assert not d["frozen"].requires_grad and d["live"].requires_grad
    assert not d["list"][0].requires_grad and d["list"][1].requires_grad
    assert d["list"][0] is d["frozen"]  # one object pickled once (memo)
    assert sorted(_written_flags(raw)) == [False, True]


def test_whole_module_with_a_frozen_layer():
    tessera.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    net[0].weight.requires_grad_(False)
    net[0].bias.requires_grad_(False)
    net2, raw = _round_trip(net, weights_only=False)
    assert [p.requires_grad for p in net2.parameters()] == [False, False, True, True]
    assert sorted(_written_flags(raw)) == [False, False, True, True]
    # fine-tuning the copy: only the last layer gets gradients
    x = tessera.randn(5, 3)
    net2(x).sum().backward()
    assert net2[0].weight.grad is None and net2[0].bias.grad is None
    assert net2[2].weight.grad is not None
    assert net2(x).tolist() == net(x).tolist()
