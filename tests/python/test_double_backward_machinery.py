"""Second derivatives (torch.autograd.grad with create_graph=True) through the graph's machinery
nodes issue 52 made twice differentiable: nn.DataParallel's broadcast of the parameters (over two
sim devices, Hessian-vector products against central differences of the data-parallel first
derivative) and autocast's casts (the cast cache's and an uncached one; exact integers that
bfloat16 holds). Checkpoints: test_double_backward_ops.py; the C side:
tests/test_double_backward_machinery.c."""
import random

import pytest

import tessera


def _values(n, seed):
    rng = random.Random(seed)
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def _flat(t):
    return t.detach().reshape(-1).tolist()


def test_data_parallel_hessian_vector():
    # nn.DataParallel over two sim devices (sim:0 and sim:1), the model's parameters' H v against
    # central differences of the data-parallel first derivative
    if tessera._C._device_count("sim") < 2:
        pytest.skip("needs two sim devices (TS_SIM_DEVICES=2)")
    device = "sim:0"
    tessera.manual_seed(3)
    net = tessera.nn.Sequential(tessera.nn.Linear(3, 4), tessera.nn.Tanh(),
                                tessera.nn.Linear(4, 2)).double().to(device)
    dp = tessera.nn.DataParallel(net, device_ids=["sim:0", "sim:1"])
    ps = list(net.parameters())
    x = tessera.tensor(_values(15, 21), dtype=tessera.float64, device=device).reshape(5, 3)
    point = [_values(p.numel(), 31 + k) for k, p in enumerate(ps)]
    direction = [_values(p.numel(), 41 + k) for k, p in enumerate(ps)]

    def at(values, create=False):
        with tessera.no_grad():
            for p, v in zip(ps, values):
                p.copy_(tessera.tensor(v, dtype=tessera.float64, device=device).reshape(p.shape))
        return tessera.autograd.grad((dp(x) ** 2).sum(), ps, create_graph=create)

    gs = at(point, create=True)
    gv = sum((g * tessera.tensor(v, dtype=tessera.float64, device=device).reshape(g.shape)).sum()
             for g, v in zip(gs, direction))
    hv = [_flat(h) for h in tessera.autograd.grad(gv, ps)]
    e = 1e-5
    gp = [_flat(g) for g in at([[p + e * v for p, v in zip(pk, vk)]
                                for pk, vk in zip(point, direction)])]
    gm = [_flat(g) for g in at([[p - e * v for p, v in zip(pk, vk)]
                                for pk, vk in zip(point, direction)])]
    for k in range(len(ps)):
        for i, h in enumerate(hv[k]):
            want = (gp[k][i] - gm[k][i]) / (2 * e)
            assert abs(h - want) <= 1e-6 * (1 + abs(want)), (k, i, h, want)


@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_autocast_casts_differentiable_again(device, cache):
    # L = sum((x w)^2), w a float32 parameter cast to bfloat16 by mm (the cast cache when enabled)
    # and the product cast back to float32 by mse_loss (sum against zeros; float32 on the CPU's
    # and CUDA's lists): dL/dw = 2 X^T X W, its derivative along V
    # 2 X^T X V; integers below 256 throughout, which bfloat16 holds exactly
    X = [[1.0, 0.0], [2.0, 1.0], [-1.0, 1.0]]
    W = [[1.0, 2.0], [-1.0, 3.0]]
    V = [[2.0, -1.0], [0.0, 1.0]]
    x = tessera.tensor(X, device=device)
    w = tessera.tensor(W, device=device).requires_grad_()
    with tessera.autocast(device.split(":")[0], dtype=tessera.bfloat16, cache_enabled=cache):
        y = x @ w
        loss = tessera.nn.functional.mse_loss(y, tessera.zeros_like(y), reduction="sum")
    assert y.dtype == tessera.bfloat16 and loss.dtype == tessera.float32
    g, = tessera.autograd.grad(loss, w, create_graph=True)
    hv, = tessera.autograd.grad((g * tessera.tensor(V, device=device)).sum(), w)
    xtx = [[sum(X[i][a] * X[i][b] for i in range(3)) for b in range(2)] for a in range(2)]
    want_g = [2 * sum(xtx[a][b] * W[b][j] for b in range(2)) for a in range(2) for j in range(2)]
    want_hv = [2 * sum(xtx[a][b] * V[b][j] for b in range(2)) for a in range(2) for j in range(2)]
    assert _flat(g) == want_g and _flat(hv) == want_hv
