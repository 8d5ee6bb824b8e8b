"""Second derivatives (torch.autograd.grad with create_graph=True) through the nodes issue 52 made
twice differentiable after session 43: the sort family, diagonal / diag_embed, cdist, the scans
(logcumsumexp, cumprod), the n-d pools, embedding_bag, the FFTs, as_strided, torch.special's
functions, lu_factor and linalg.eig. Hessian-vector products against central differences of the
first derivative (float64) everywhere, and against PyTorch's own double backward on the same
inputs when PyTorch is importable (it is not under ctest's python3; /opt/torch2/bin/torch-python
has it). Then func.jvp through logcumsumexp (the double-vjp trick's cotangent of zeros, where the
signed log-space formula alone has a zero derivative) and cumprod over a zero, which stays once
differentiable and says so. DataParallel's broadcast and autocast's casts:
test_double_backward_machinery.py."""
import importlib.util

import pytest

import hv_harness
import tessera
from hv_harness import flat, head, values

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch as real_torch
else:
    real_torch = None


def _bag(mod, w, p=None):
    idx = mod.tensor([0, 2, 4, 1, 2, 3, 4], device=w.device)
    off = mod.tensor([0, 2, 5], device=w.device)
    y = mod.nn.functional.embedding_bag(idx, mod.tanh(w), off, mode="sum" if p is not None
                                        else "mean", per_sample_weights=None if p is None
                                        else p * p)
    return head(mod, y * y)


def _eye3(mod, A):
    return A + 3 * mod.eye(A.shape[-1], dtype=mod.float64, device=A.device)


def _eig(mod, A):
    D = mod.tensor([[1.0, 0, 0], [0, 2.5, 0], [0, 0, 4]], dtype=mod.float64, device=A.device)
    L, V = mod.linalg.eig(0.4 * A + D)
    return head(mod, mod.view_as_real(L)) + head(mod, mod.view_as_real(V).pow(2).sum(-1))


def _diag_embed(mod, x):
    E = mod.diag_embed(x, offset=1, dim1=0, dim2=2)
    return head(mod, E @ E.mT)


CASES = {
    "sort": ([(3, 4)], lambda m, x: head(m, m.sort(x, dim=1).values)),
    "topk": ([(3, 5)], lambda m, x: head(m, m.topk(x, 2, dim=-1).values)),
    "kthvalue": ([(3, 4)], lambda m, x: head(m, m.kthvalue(x, 2, dim=1).values)),
    "median": ([(3, 3)], lambda m, x: head(m, m.median(x.exp()))),
    "diagonal": ([(3, 4)], lambda m, x: head(m, m.diagonal(x * x, offset=1, dim1=0, dim2=1))),
    "diag_embed": ([(2, 3)], _diag_embed),
    "cdist": ([(3, 2), (4, 2)], lambda m, a, b: head(m, m.cdist(a, b))),
    # |d|^1.5 has an unbounded third derivative at 0: differences kept in (-4.5, -0.5)
    "cdist_p1.5": ([(2, 3, 3), (2, 4, 3)], lambda m, a, b: head(m, m.cdist(a, b + 2.5, p=1.5))),
    "logcumsumexp": ([(3, 5)], lambda m, x: head(m, m.logcumsumexp(3 * x, dim=1))),
    "cumprod": ([(3, 4)], lambda m, x: head(m, m.cumprod(x + 1.5, dim=1))),
    "max_pool1d": ([(2, 2, 7)], lambda m, x: head(
        m, m.nn.functional.max_pool1d(x, 3, stride=2, padding=1))),
    "avg_pool3d": ([(2, 3, 4, 4)], lambda m, x: head(
        m, m.nn.functional.avg_pool3d(x * x, (2, 3, 2), stride=(1, 1, 2), padding=(1, 1, 0)))),
    "embedding_bag": ([(5, 3), (7,)], _bag),
    "embedding_bag_mean": ([(5, 3)], _bag),
    "rfft": ([(2, 8)], lambda m, x: head(m, m.view_as_real(m.fft.rfft(m.tanh(x))))),
    "irfft": ([(2, 5), (2, 5)], lambda m, a, b: head(
        m, 0.3 * m.fft.irfft(m.complex(a, b), n=8, norm="forward"))),
    "as_strided": ([(12,)], lambda m, x: head(m, m.as_strided(x * x, (3, 3), (2, 1), 1))),
    "ndtr": ([(2, 3)], lambda m, x: head(m, m.special.ndtr(2 * x))),
    "log_ndtr": ([(2, 3)], lambda m, x: head(m, m.special.log_ndtr(3 * x))),
    "erfcx": ([(2, 3)], lambda m, x: head(m, m.special.erfcx(2 * x))),
    "bessel_j1": ([(2, 3)], lambda m, x: head(m, m.special.bessel_j1(3 * x))),
    "lu_factor": ([(3, 3)], lambda m, A: head(m, m.linalg.lu_factor(_eye3(m, A))[0])),
    "eig": ([(3, 3)], _eig),
}


# checkpoints (issue 52's last once-differentiable nodes): the recomputed saved tensors carry the
# forward's history
def _checkpoint(mod, fn, *args):
    return importlib.import_module(mod.__name__ + ".utils.checkpoint").checkpoint(
        fn, *args, use_reentrant=False)


def _ckpt_body(mod, a, b):
    ab = a * b
    return mod.tanh(ab) * mod.exp(a) + ab


def _ckpt(mod, x, w):
    # an input with a history outside (a non-leaf) and a leaf; a checkpoint inside a checkpoint
    a = mod.sin(x) * 1.5
    y = _checkpoint(mod, lambda p, q: mod.sin(_checkpoint(mod, lambda s, t: _ckpt_body(mod, s, t),
                                                          p, q)) * q, a, w)
    return (mod.cos(y) * a).sum()


CASES["checkpoint"] = ([(2, 3), (2, 3)], _ckpt)
# PyTorch has no double backward of embedding_bag ("the derivative for '_embedding_bag_backward'
# is not implemented", and none for the per-sample weights' backward)
NOT_TORCH = {"embedding_bag", "embedding_bag_mean"}


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_differences(name, device):
    hv_harness.check_differences(CASES, tessera, name, device)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not importable")
@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_TORCH))
def test_hessian_vector_against_pytorch(name):
    hv_harness.check_against(CASES, tessera, real_torch, name)


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_jvp_through_logcumsumexp(device):
    # func.jvp's double-vjp trick differentiates J^T u at u = 0: the gradient's own node gives J t
    x0, t0 = values(10, 3), values(10, 5)

    def f(x):
        return tessera.logcumsumexp(2 * x, 1)

    def at(v):
        return tessera.tensor(v, dtype=tessera.float64, device=device).reshape(2, 5)

    _, jv = tessera.func.jvp(f, (at(x0),), (at(t0),))
    e = 1e-5
    yp = flat(f(at([a + e * b for a, b in zip(x0, t0)])))
    ym = flat(f(at([a - e * b for a, b in zip(x0, t0)])))
    for g, p, m in zip(flat(jv), yp, ym):
        want = (p - m) / (2 * e)
        assert abs(g - want) <= 1e-6 * (1 + abs(want)), (g, want)


def test_cumprod_over_a_zero_stays_once_differentiable():
    x = tessera.tensor([0.5, 0.0, 2.0, -1.5], dtype=tessera.float64).requires_grad_()
    g, = tessera.autograd.grad(head(tessera, tessera.cumprod(x, 0)), x, create_graph=True)
    with pytest.raises(tessera.TesseraError, match="double backward through CumprodBackward0"):
        tessera.autograd.grad((g * g).sum(), x)
