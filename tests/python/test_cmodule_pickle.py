"""Whole modules over C modules pickle (torch.save(model), copy.deepcopy): RNN/LSTM/GRU, their
cells, MultiheadAttention, TransformerEncoderLayer, GPT, the ResNets (nn/models.py: CModule's
recipe); torch.nn.modules.X.Y paths for safe_globals lists (issue 53)."""
import copy
import io

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn


def _roundtrip(m, **kw):
    b = io.BytesIO()
    torch.save(m, b)
    b.seek(0)
    return torch.load(b, **kw)


@pytest.mark.parametrize("make", [
    lambda: nn.GRU(4, 5, 2), lambda: nn.LSTM(4, 5, bidirectional=True), lambda: nn.RNN(4, 3),
    lambda: nn.GRUCell(3, 4), lambda: nn.MultiheadAttention(8, 2),
    lambda: nn.TransformerEncoderLayer(8, 2, 16), lambda: nn.GPT(16, 8, 1, 2, 8),
    lambda: nn.models.resnet20(num_classes=3, width=4),
])
def test_whole_module_roundtrip(make):
    torch.manual_seed(1)
    m = make()
    m.eval()
    for m2 in (_roundtrip(m, weights_only=False), copy.deepcopy(m)):
        assert type(m2) is type(m) and not m2.training
        a, b = m.state_dict(), m2.state_dict()
        assert list(a) == list(b)
        for k in a:
            assert torch.equal(a[k], b[k]), k
        assert [n for n, _ in m.named_parameters()] == [n for n, _ in m2.named_parameters()]
        for p in m2.parameters():  # its own storage, not the first module's
            assert all(p is not q for q in m.parameters())


def test_loaded_rnn_runs_the_saved_weights_and_only_them():
    torch.manual_seed(2)
    g = nn.GRU(3, 4)
    x = torch.randn(5, 2, 3)
    g2 = _roundtrip(g, weights_only=False)
    np.testing.assert_array_equal(g(x)[0].detach().numpy(), g2(x)[0].detach().numpy())
    with torch.no_grad():
        g2.weight_hh_l0.add_(1.0)  # the C forward reads the Parameter the state_dict shows
    assert not torch.equal(g(x)[0], g2(x)[0])


def test_weights_only_with_safe_globals_by_pytorch_paths():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 4)
            self.fc = nn.Linear(4, 2)

    globals()["Net"] = Net  # picklable by name
    Net.__qualname__ = "Net"
    n = Net()
    with pytest.raises(Exception, match="Unsupported global"):
        _roundtrip(n)
    with torch.serialization.safe_globals([Net, torch.nn.modules.rnn.LSTM,
                                           torch.nn.modules.linear.Linear]):
        n2 = _roundtrip(n)
    assert torch.equal(n2.rnn.weight_ih_l0, n.rnn.weight_ih_l0)
    assert torch.nn.modules.sparse.Embedding is nn.Embedding
    assert issubclass(torch.nn.modules.linear.NonDynamicallyQuantizableLinear, nn.Linear)


def test_a_module_pytorch_pickled_is_rebuilt_from_its_attributes():
    """torch.save(model) in PyTorch pickles a GRU as its __dict__: mode, sizes, flags and
    _parameters (no recipe); unpickling builds the C module from those attributes"""
    import collections
    torch.manual_seed(3)
    ref = nn.GRU(3, 4, 2, batch_first=True)
    params = collections.OrderedDict(
        (k, nn.Parameter(v.detach().clone())) for k, v in ref.state_dict().items())
    state = {"training": True, "_parameters": params, "_buffers": collections.OrderedDict(),
             "_modules": collections.OrderedDict(), "mode": "GRU", "input_size": 3,
             "hidden_size": 4, "num_layers": 2, "bias": True, "batch_first": True,
             "dropout": 0.0, "bidirectional": False, "proj_size": 0,
             "_flat_weights_names": list(params)}
    g = nn.GRU.__new__(nn.GRU)
    g.__setstate__(state)
    x = torch.randn(2, 5, 3)
    np.testing.assert_array_equal(g(x)[0].detach().numpy(), ref(x)[0].detach().numpy())
    assert [n for n, _ in g.named_parameters()] == list(params)
    cell = nn.RNNCell.__new__(nn.RNNCell)
    cell.__setstate__({"_parameters": collections.OrderedDict(
        (k, nn.Parameter(torch.ones(v.shape))) for k, v in nn.RNNCell(2, 3).state_dict().items()),
        "_buffers": collections.OrderedDict(), "_modules": collections.OrderedDict(),
        "training": False, "input_size": 2, "hidden_size": 3, "bias": True,
        "nonlinearity": "relu"})
    h = cell(torch.ones(1, 2)).detach().numpy()  # relu(W_ih 1 + b_ih + W_hh 0 + b_hh) = 2 + 1 + 1
    np.testing.assert_allclose(h, [[4.0, 4.0, 4.0]])
