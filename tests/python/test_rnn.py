"""test_rnn.py — tessera.nn.RNN / LSTM / GRU and their cells, tessera.nn.utils.rnn: PyTorch's
constructor signatures, state_dict names and shapes, forward tuples and shapes, values against a
float64 reference written here in plain Python (PyTorch's equations; no NumPy needed), packed
sequences against running each sequence alone, subclassing, errors, and a training loop that
lowers the loss; on cpu and sim:0.

Tolerances: the module runs in float64 and the reference sums the same few (<= 12) terms per dot
product in another order: differences ~1e-15; 1e-12 leaves room for tanh/exp's last bits."""
import math
import random

import pytest

import tessera
import tessera.nn as nn
from tessera.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pad_packed_sequence,
                                  pad_sequence, pack_sequence)

TOL = 1e-12


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def L(t):
    return t.detach().cpu().double().tolist()


def maxdiff(a, b):
    if isinstance(a, list):
        assert len(a) == len(b)
        return max((maxdiff(x, y) for x, y in zip(a, b)), default=0.0)
    return abs(a - b)


def rand_list(shape, rng):
    if not shape:
        return rng.uniform(-1, 1)
    return [rand_list(shape[1:], rng) for _ in range(shape[0])]


# ----------------------------------------------------------------------- the float64 reference
def sig(x):
    return 1 / (1 + math.exp(-x))


def matvec(w, v):
    return [sum(a * b for a, b in zip(row, v)) for row in w]


def cell_ref(kind, p, x, h, c, relu=False):
    """one step for one batch row; p: dict weight_ih, weight_hh, bias_ih, bias_hh, weight_hr"""
    H = len(p["weight_hh"]) // {"RNN": 1, "LSTM": 4, "GRU": 3}[kind]
    gi = matvec(p["weight_ih"], x)
    gh = matvec(p["weight_hh"], h)
    if "bias_ih" in p:
        gi = [a + b for a, b in zip(gi, p["bias_ih"])]
        gh = [a + b for a, b in zip(gh, p["bias_hh"])]
    if kind == "RNN":
        a = [u + v for u, v in zip(gi, gh)]
        return [max(v, 0.0) if relu else math.tanh(v) for v in a], None
    if kind == "GRU":
        out = []
        for j in range(H):
            r = sig(gi[j] + gh[j])
            z = sig(gi[H + j] + gh[H + j])
            n = math.tanh(gi[2 * H + j] + r * gh[2 * H + j])
            out.append((1 - z) * n + z * h[j])
        return out, None
    cn, hn = [], []
    for j in range(H):
        i, f = sig(gi[j] + gh[j]), sig(gi[H + j] + gh[H + j])
        g, o = math.tanh(gi[2 * H + j] + gh[2 * H + j]), sig(gi[3 * H + j] + gh[3 * H + j])
        cn.append(f * c[j] + i * g)
        hn.append(o * math.tanh(cn[j]))
    if "weight_hr" in p:
        hn = matvec(p["weight_hr"], hn)
    return hn, cn


def run_ref(kind, sd, x, layers, dirs, h0=None, c0=None, relu=False):
    """x [T][B][I] -> out [T][B][D*Ho], h_n [L*D][B][Ho], c_n"""
    T, B = len(x), len(x[0])
    hn, cn = [], []
    cur = x
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            p = {k[:-len(sfx)]: v for k, v in sd.items() if k.endswith(sfx) and
                 (d or not k.endswith("_reverse"))}
            Ho = len(p["weight_hh"][0])
            H = len(p["weight_hr"][0]) if "weight_hr" in p else Ho
            idx = layer * dirs + d
            h = [list(h0[idx][b]) if h0 else [0.0] * Ho for b in range(B)]
            c = [list(c0[idx][b]) if c0 else [0.0] * H for b in range(B)]
            o = [None] * T
            for s in range(T):
                t = T - 1 - s if d else s
                for b in range(B):
                    h[b], cb = cell_ref(kind, p, cur[t][b], h[b], c[b], relu)
                    if cb is not None:
                        c[b] = cb
                o[t] = [list(v) for v in h]
            outs.append(o)
            hn.append(h)
            cn.append(c)
        cur = [[sum((outs[d][t][b] for d in range(dirs)), []) for b in range(B)]
               for t in range(T)]
    return cur, hn, cn


def state(m):
    return {k: L(v) for k, v in m.state_dict().items()}


# ----------------------------------------------------------------------- names and shapes
def test_state_dict_names_and_shapes():
    m = nn.LSTM(10, 20, num_layers=2, bidirectional=True, proj_size=5)
    sd = m.state_dict()
    names = list(sd.keys())
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_hr_l0"]
    assert names[5] == "weight_ih_l0_reverse" and len(names) == 20
    assert tuple(sd["weight_ih_l1"].shape) == (80, 10)
    assert tuple(sd["weight_hh_l1_reverse"].shape) == (80, 5)
    assert tuple(sd["weight_hr_l0"].shape) == (5, 20)
    assert repr(m) == "LSTM(10, 20, proj_size=5, num_layers=2, bidirectional=True)"
    assert len(list(m.parameters())) == 20
    g = nn.GRU(4, 3, bias=False, batch_first=True)
    assert list(g.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert tuple(g.weight_ih_l0.shape) == (9, 4)
    assert isinstance(g.weight_hh_l0, nn.Parameter)
    r = nn.RNN(4, 3, 1, "relu")
    assert r.nonlinearity == "relu" and r.num_layers == 1
    assert list(nn.RNNCell(4, 3).state_dict()) == ["weight_ih", "weight_hh", "bias_ih",
                                                   "bias_hh"]
    assert tuple(nn.LSTMCell(4, 3).weight_hh.shape) == (12, 3)
    assert repr(nn.GRUCell(4, 3, bias=False)) == "GRUCell(4, 3, bias=False)"
    # init: uniform(-1/sqrt(H), 1/sqrt(H))
    k = 1 / math.sqrt(20)
    vals = sum(L(m.weight_ih_l0), [])
    assert -k <= min(vals) < -0.9 * k and 0.9 * k < max(vals) <= k


def test_load_state_dict_roundtrip():
    a, b = nn.GRU(3, 4, num_layers=2), nn.GRU(3, 4, num_layers=2)
    b.load_state_dict(a.state_dict())
    x = tessera.randn(5, 2, 3)
    assert maxdiff(L(a(x)[0]), L(b(x)[0])) == 0


# ----------------------------------------------------------------------- values
@pytest.mark.parametrize("kind,layers,bidir,proj", [
    ("RNN", 2, True, 0), ("LSTM", 1, False, 0), ("LSTM", 2, True, 2), ("GRU", 2, True, 0),
    ("GRU", 1, False, 0)])
def test_forward_vs_reference(device, kind, layers, bidir, proj):
    tessera.manual_seed(0)
    kw = {"proj_size": proj} if proj else {}
    m = getattr(nn, kind)(3, 4, num_layers=layers, bidirectional=bidir, **kw).double()
    m = m.to(device)
    rng = random.Random(1)
    D = 2 if bidir else 1
    Ho = proj or 4
    x = rand_list([5, 2, 3], rng)
    h0 = rand_list([layers * D, 2, Ho], rng)
    c0 = rand_list([layers * D, 2, 4], rng)
    X = tessera.tensor(x, dtype=tessera.float64, device=device)
    H0 = tessera.tensor(h0, dtype=tessera.float64, device=device)
    C0 = tessera.tensor(c0, dtype=tessera.float64, device=device)
    out = m(X, (H0, C0)) if kind == "LSTM" else m(X, H0)
    ro, rh, rc = run_ref(kind, state(m), x, layers, D, h0, c0 if kind == "LSTM" else None)
    if kind == "LSTM":
        y, (hn, cn) = out
        assert maxdiff(L(cn), rc) < TOL
    else:
        y, hn = out
    assert tuple(y.shape) == (5, 2, D * Ho) and tuple(hn.shape) == (layers * D, 2, Ho)
    assert maxdiff(L(y), ro) < TOL
    assert maxdiff(L(hn), rh) < TOL
    # without initial states: zeros
    y0 = m(X)[0]
    assert maxdiff(L(y0), run_ref(kind, state(m), x, layers, D)[0]) < TOL


def test_relu_batch_first_unbatched(device):
    m = nn.RNN(3, 4, nonlinearity="relu", batch_first=True).double().to(device)
    rng = random.Random(2)
    x = rand_list([2, 5, 3], rng)  # [B, T, I]
    y, hn = m(tessera.tensor(x, dtype=tessera.float64, device=device))
    xt = [[x[b][t] for b in range(2)] for t in range(5)]
    ro, rh, _ = run_ref("RNN", state(m), xt, 1, 1, relu=True)
    assert tuple(y.shape) == (2, 5, 4)
    assert maxdiff(L(y), [[ro[t][b] for t in range(5)] for b in range(2)]) < TOL
    assert maxdiff(L(hn), rh) < TOL
    # unbatched [T, I] (batch_first does not apply)
    y1, h1 = m(tessera.tensor(x[0], dtype=tessera.float64, device=device))
    assert tuple(y1.shape) == (5, 4) and tuple(h1.shape) == (1, 4)
    assert maxdiff(L(y1), L(y[0])) < TOL


def test_cells(device):
    rng = random.Random(3)
    x, h, c = rand_list([2, 3], rng), rand_list([2, 4], rng), rand_list([2, 4], rng)
    X, Hx, Cx = (tessera.tensor(v, dtype=tessera.float64, device=device) for v in (x, h, c))
    for cls, kind in ((nn.RNNCell, "RNN"), (nn.GRUCell, "GRU"), (nn.LSTMCell, "LSTM")):
        m = cls(3, 4).double().to(device)
        p = state(m)
        ref = [cell_ref(kind, p, x[b], h[b], c[b]) for b in range(2)]
        if kind == "LSTM":
            h1, c1 = m(X, (Hx, Cx))
            assert maxdiff(L(c1), [r[1] for r in ref]) < TOL
        else:
            h1 = m(X, Hx)
        assert maxdiff(L(h1), [r[0] for r in ref]) < TOL
        out = m(X[0])  # unbatched, zero state
        h1 = out[0] if kind == "LSTM" else out
        assert tuple(h1.shape) == (4,)
        assert maxdiff(L(h1), cell_ref(kind, p, x[0], [0.0] * 4, [0.0] * 4)[0]) < TOL


# ----------------------------------------------------------------------- packed sequences
def test_pad_sequence():
    a, b = tessera.tensor([[1.0], [2.0], [3.0]]), tessera.tensor([[4.0]])
    assert L(pad_sequence([a, b])) == [[[1.0], [4.0]], [[2.0], [0.0]], [[3.0], [0.0]]]
    assert L(pad_sequence([a, b], batch_first=True, padding_value=-1)) == \
        [[[1.0], [2.0], [3.0]], [[4.0], [-1.0], [-1.0]]]
    assert L(pad_sequence([a, b], batch_first=True, padding_side="left"))[1] == \
        [[0.0], [0.0], [4.0]]


def test_pack_roundtrip():
    x = tessera.arange(0, 12, dtype=tessera.float32).reshape(4, 3, 1)  # [T, B, 1]
    p = pack_padded_sequence(x, [2, 4, 1], enforce_sorted=False)
    assert isinstance(p, PackedSequence)
    assert p.batch_sizes.tolist() == [3, 2, 1, 1]
    assert p.sorted_indices.tolist() == [1, 0, 2]
    assert [v[0] for v in L(p.data)] == [1, 0, 2, 4, 3, 7, 10]
    y, lengths = pad_packed_sequence(p)
    assert lengths.tolist() == [2, 4, 1]
    xs = L(x)
    assert L(y) == [[xs[t][b] if t < n else [0.0] for b, n in enumerate([2, 4, 1])]
                    for t in range(4)]
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(x, [2, 4, 1])
    q = pack_sequence([tessera.ones(3, 2), tessera.ones(1, 2)])
    assert q.batch_sizes.tolist() == [2, 1, 1] and q.sorted_indices is None


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_equals_each_sequence_alone(device, kind):
    tessera.manual_seed(4)
    m = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    m = m.double().to(device)
    lengths = [3, 5, 2]
    rng = random.Random(5)
    seqs = [tessera.tensor(rand_list([n, 3], rng), dtype=tessera.float64, device=device)
            for n in lengths]
    packed = pack_padded_sequence(pad_sequence(seqs, batch_first=True), lengths,
                                  batch_first=True, enforce_sorted=False)
    out, hn = m(packed)
    if kind == "LSTM":
        hn = hn[0]
    assert isinstance(out, PackedSequence)
    assert out.batch_sizes.tolist() == packed.batch_sizes.tolist()
    y, lens = pad_packed_sequence(out, batch_first=True)
    assert lens.tolist() == lengths and tuple(y.shape) == (3, 5, 8)
    for b, s in enumerate(seqs):
        yb, hb = m(s)  # unbatched, alone
        if kind == "LSTM":
            hb = hb[0]
        n = lengths[b]
        assert maxdiff(L(y[b, :n]), L(yb)) < TOL
        assert maxdiff(L(y[b, n:]), [[0.0] * 8] * (5 - n)) == 0
        assert maxdiff(L(hn[:, b]), L(hb)) < TOL


# ----------------------------------------------------------------------- training, subclassing
def test_training_lowers_loss(device):
    tessera.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(2, 8, num_layers=2, batch_first=True)
            self.head = nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    net = Net().to(device)
    assert "rnn.weight_ih_l1" in net.state_dict()
    x = tessera.randn(16, 6, 2, device=device)
    target = x.sum(dim=(1, 2)).reshape(16, 1) * 0.1
    opt = tessera.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert net.rnn.weight_hh_l0.grad is not None


def test_subclass():
    class MyLSTM(nn.LSTM):
        def forward(self, x, hx=None):
            y, (h, c) = super().forward(x, hx)
            return y * 2

    m = MyLSTM(3, 4)
    x = tessera.randn(2, 1, 3)
    plain = L(nn.LSTM.forward(m, x)[0])
    assert maxdiff(L(m(x)), [[[2 * v for v in r] for r in t] for t in plain]) == 0
    assert isinstance(m, nn.Module) and m.hidden_size == 4


def test_dropout_between_layers():
    m = nn.GRU(3, 4, num_layers=2, dropout=1.0).double()
    x = tessera.randn(3, 2, 3, dtype=tessera.float64)
    m.train()
    y_train = L(m(x)[0])
    m.eval()
    y_eval = L(m(x)[0])
    ref = run_ref("GRU", state(m), L(x), 2, 1)[0]
    assert maxdiff(y_eval, ref) < TOL
    # p = 1: the second layer sees zeros
    sd = state(m)
    zero_in = [[[0.0] * 4 for _ in range(2)] for _ in range(3)]
    p1 = {k.replace("_l1", "_l0"): v for k, v in sd.items() if k.endswith("_l1")}
    assert maxdiff(y_train, run_ref("GRU", p1, zero_in, 1, 1)[0]) < TOL


# ----------------------------------------------------------------------- errors
def test_errors():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(tessera.ShapeError, match="input.size\\(-1\\) must be equal to input_size"):
        m(tessera.randn(5, 2, 7))
    with pytest.raises(tessera.ShapeError, match="Expected hidden\\[0\\] size"):
        m(tessera.randn(5, 2, 3), (tessera.zeros(1, 2, 4), tessera.zeros(2, 2, 4)))
    with pytest.raises(tessera.ShapeError, match="Expected input to be 2D or 3D"):
        m(tessera.randn(5))
    with pytest.raises(tessera.DtypeError):
        m(tessera.randn(5, 2, 3, dtype=tessera.float64))
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=2.0)
    with pytest.raises(ValueError, match="num_layers"):
        nn.GRU(3, 4, num_layers=0)
    with pytest.raises(tessera.ShapeError, match="inconsistent input_size"):
        nn.GRUCell(3, 4)(tessera.randn(2, 5))
