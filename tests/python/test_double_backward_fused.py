"""Second derivatives (torch.autograd.grad with create_graph=True) through the fused nodes issue 52
made twice differentiable: nn.LSTM / nn.GRU (the sequence node), nn.LSTMCell / nn.GRUCell (the
fused cells), F.linear_cross_entropy's chunked form, scaled_dot_product_attention with dropout and
the torch.linalg backward formulas. Hessian-vector products against central differences of the
first derivative (float64) everywhere, and against PyTorch's own double backward on the same
inputs when PyTorch is importable (it is not under ctest's python3; /opt/torch2/bin/torch-python
has it; attention with dropout draws other masks there and is left out)."""
import importlib.util
import types

import pytest

import hv_harness
import tessera
from hv_harness import head, values

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch as real_torch
else:
    real_torch = None


def _fixed(mod, module, device):
    """module in float64 on device with weights from a fixed pattern (the same in both libraries)"""
    module = module.to(dtype=mod.float64, device=device)
    with mod.no_grad():
        for k, p in enumerate(module.parameters()):
            v = mod.tensor(values(p.numel(), 50 + k), dtype=mod.float64)
            p.copy_(0.6 * v.reshape(p.shape))
    return module


def _rnn(mod, kind, x, h0, c0=None):
    net = _fixed(mod, getattr(mod.nn, kind)(2, 2, num_layers=2, bidirectional=True), x.device)
    y, state = net(mod.tanh(x), (0.5 * h0, c0) if kind == "LSTM" else 0.5 * h0)
    hn, cn = state if kind == "LSTM" else (state, None)
    s = head(mod, y) + head(mod, hn)
    return s + head(mod, cn) if cn is not None else s


def _cell(mod, kind, x, h0, c0=None):
    cell = _fixed(mod, getattr(mod.nn, kind)(2, 2), x.device)
    if kind == "LSTMCell":
        h1, c1 = cell(x, (h0, c0))
        h2, c2 = cell(0.5 * x, (h1, c1))
        return head(mod, h1) + head(mod, h2) + head(mod, c2)
    h1 = cell(x, h0)
    return head(mod, h1) + head(mod, cell(0.5 * x, h1))


def _lce(mod, x, w, b, **kw):
    t = mod.tensor([2, -1, 1, 0, -1], device=x.device)
    cw = mod.tensor([0.5, 1.5, 1.0], dtype=mod.float64, device=x.device)
    opts = types.SimpleNamespace(batch_chunk_size=2) if mod is tessera else None
    extra = {"options": opts} if opts is not None else {}
    y = mod.nn.functional.linear_cross_entropy(1.5 * x, w, t, linear_bias=b, weight=cw,
                                               ignore_index=-1, label_smoothing=0.2, **kw,
                                               **extra)
    return head(mod, y) if kw.get("reduction") == "none" else y * y


def _sdpa_dropout(mod, q, k, v):
    mod.manual_seed(1234)  # the same weights dropped at every evaluation
    return head(mod, mod.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.3))


def _eye3(mod, A):
    return A + 3 * mod.eye(A.shape[-1], dtype=mod.float64, device=A.device)


def _svd(mod, A):
    U, S, Vh = mod.linalg.svd(A, full_matrices=False)
    return head(mod, S) + head(mod, U * U) + head(mod, Vh * Vh)  # invariant under the signs


def _eigh(mod, A):
    L, V = mod.linalg.eigh(A + A.mT)
    return head(mod, L) + head(mod, V * V)


def _lu(mod, A):
    _, L, U = mod.linalg.lu(_eye3(mod, A))
    return head(mod, L) + head(mod, U)


CASES = {
    "lstm": ([(3, 2, 2), (4, 2, 2), (4, 2, 2)], lambda m, x, h, c: _rnn(m, "LSTM", x, h, c)),
    "gru": ([(3, 2, 2), (4, 2, 2)], lambda m, x, h: _rnn(m, "GRU", x, h)),
    "lstm_cell": ([(3, 2), (3, 2), (3, 2)], lambda m, x, h, c: _cell(m, "LSTMCell", x, h, c)),
    "gru_cell": ([(3, 2), (3, 2)], lambda m, x, h: _cell(m, "GRUCell", x, h)),
    "linear_cross_entropy": ([(5, 4), (3, 4), (3,)], lambda m, x, w, b: _lce(m, x, w, b)),
    "linear_cross_entropy_none": ([(5, 4), (3, 4), (3,)],
                                  lambda m, x, w, b: _lce(m, x, w, b, reduction="none")),
    "sdpa_dropout": ([(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)], _sdpa_dropout),
    "inv": ([(2, 3, 3)], lambda m, A: head(m, m.linalg.inv(_eye3(m, A)))),
    "det": ([(2, 3, 3)], lambda m, A: head(m, m.linalg.det(_eye3(m, A)))),
    "slogdet": ([(3, 3)], lambda m, A: head(m, m.linalg.slogdet(2 * A)[1])),
    "solve": ([(3, 3), (3, 2)], lambda m, A, B: head(m, m.linalg.solve(_eye3(m, A), B))),
    "cholesky": ([(3, 3)], lambda m, A: head(m, m.linalg.cholesky(_eye3(m, A @ A.mT)))),
    "solve_triangular": ([(3, 3), (3, 2)], lambda m, A, B: head(m, m.linalg.solve_triangular(
        _eye3(m, A).tril(), B, upper=False))),
    "qr": ([(4, 3)], lambda m, A: sum(head(m, t) for t in m.linalg.qr(A))),
    "svd": ([(4, 3)], _svd),
    "eigh": ([(3, 3)], _eigh),
    "pinv": ([(3, 4)], lambda m, A: head(m, m.linalg.pinv(A))),
    "lu": ([(3, 3)], _lu),
}
NOT_TORCH = {"sdpa_dropout"}  # another generator, other masks


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_differences(name, device):
    hv_harness.check_differences(CASES, tessera, name, device)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not importable")
@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_TORCH))
def test_hessian_vector_against_pytorch(name):
    hv_harness.check_against(CASES, tessera, real_torch, name)


def test_lstm_with_lengths_stays_once_differentiable():
    # packed steps multiply by a detached w_hh (the weight sink): a clear error, not a wrong number
    net = _fixed(tessera, tessera.nn.LSTM(2, 2), "cpu")
    x = tessera.tensor(values(12, 3), dtype=tessera.float64).reshape(3, 2, 2).requires_grad_()
    packed = tessera.nn.utils.rnn.pack_padded_sequence(x, [3, 2])
    out, _ = net(packed)
    y = head(tessera, tessera.nn.utils.rnn.pad_packed_sequence(out)[0])
    g, = tessera.autograd.grad(y, x, create_graph=True)
    with pytest.raises(tessera.TesseraError, match="double backward through"):
        tessera.autograd.grad((g * g).sum(), x)
