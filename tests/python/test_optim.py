"""test_optim.py — tessera.optim: the first steps of SGD (momentum, nesterov, weight decay), Adam,
AdamW and RMSprop against PyTorch's update formulas computed in float64, param_groups' lr as the
schedulers write it, state dicts, clipping; schedulers' lr sequences against PyTorch's closed
forms. On cpu and sim:0.

The parameters are float32: each step's rounding is ~2^-24 relative per operation, so after three
steps the values agree with the float64 formulas to ~1e-6; ATOL 1e-6 on values of size ~1."""
import math

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
from tessera.optim import lr_scheduler  # noqa: E402

ATOL = 1e-6
P0 = np.array([1.0, -2.0, 0.5])
G = np.array([0.5, 0.25, -1.0])  # the gradient of every step: loss = sum(p * G)


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64)


def run(make_opt, device, steps=3, grad=lambda p: G):
    """steps of make_opt over one parameter P0 with the gradient grad(p)"""
    p = nn.Parameter(tessera.tensor(P0.tolist(), device=device))
    opt = make_opt([p])
    out = []
    for _ in range(steps):
        opt.zero_grad()
        g = grad(N(p))
        (p * tessera.tensor(g.tolist(), device=device)).sum().backward()
        opt.step()
        out.append(N(p))
    return out


def ref_sgd(lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, steps=3):
    p, buf, out = P0.copy(), None, []
    for _ in range(steps):
        g = G + wd * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def ref_adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False, steps=3):
    p, m, v, out = P0.copy(), 0.0, 0.0, []
    for t in range(1, steps + 1):
        g = G.copy()
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        out.append(p)
    return out


def ref_rmsprop(lr, alpha=0.99, eps=1e-8, momentum=0.0, steps=3):
    p, sq, buf, out = P0.copy(), 0.0, 0.0, []
    for _ in range(steps):
        sq = alpha * sq + (1 - alpha) * G * G
        step = G / (np.sqrt(sq) + eps)
        if momentum:
            buf = momentum * buf + step
            step = buf
        p = p - lr * step
        out.append(p)
    return out


CASES = [
    ("sgd", lambda ps: tessera.optim.SGD(ps, lr=0.1), ref_sgd(0.1)),
    ("sgd_momentum", lambda ps: tessera.optim.SGD(ps, lr=0.1, momentum=0.9),
     ref_sgd(0.1, momentum=0.9)),
    ("sgd_dampening_wd", lambda ps: tessera.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5,
                                                      weight_decay=0.01),
     ref_sgd(0.1, momentum=0.9, dampening=0.5, wd=0.01)),
    ("sgd_nesterov", lambda ps: tessera.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
     ref_sgd(0.1, momentum=0.9, nesterov=True)),
    ("adam", lambda ps: tessera.optim.Adam(ps, lr=0.01), ref_adam(0.01)),
    ("adam_wd", lambda ps: tessera.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
     ref_adam(0.01, 0.8, 0.99, wd=0.1)),
    ("adamw", lambda ps: tessera.optim.AdamW(ps, lr=0.01), ref_adam(0.01, wd=0.01, decoupled=True)),
    ("rmsprop", lambda ps: tessera.optim.RMSprop(ps, lr=0.01), ref_rmsprop(0.01)),
    ("rmsprop_momentum", lambda ps: tessera.optim.RMSprop(ps, lr=0.01, momentum=0.5),
     ref_rmsprop(0.01, momentum=0.5)),
]


@pytest.mark.parametrize("name,make,ref", CASES, ids=[c[0] for c in CASES])
def test_first_steps(name, make, ref, device):
    for got, want in zip(run(make, device), ref):
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_lr_is_read_from_param_groups(device):
    p = nn.Parameter(tessera.tensor(P0.tolist(), device=device))
    opt = tessera.optim.SGD([p], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    opt.param_groups[0]["lr"] = 0.5
    (p * tessera.tensor(G.tolist(), device=device)).sum().backward()
    opt.step()
    np.testing.assert_allclose(N(p), P0 - 0.5 * G, rtol=0, atol=ATOL)


def test_param_groups_own_lr(device):
    a = nn.Parameter(tessera.ones(2, device=device))
    b = nn.Parameter(tessera.ones(2, device=device))
    opt = tessera.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(N(a), [0.9, 0.9], atol=ATOL)
    np.testing.assert_allclose(N(b), [0.0, 0.0], atol=ATOL)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        tessera.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov"):
        tessera.optim.SGD([a], lr=0.1, nesterov=True)


def test_zero_grad(device):
    p = nn.Parameter(tessera.ones(2, device=device))
    opt = tessera.optim.Adam([p])
    p.sum().backward()
    opt.zero_grad(set_to_none=False)
    assert N(p.grad).tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip(device):
    """two momentum steps, a save, a fresh optimizer loading it: the third step continues the
    momentum (differs from a fresh optimizer's first step)"""
    p = nn.Parameter(tessera.tensor(P0.tolist(), device=device))
    g = tessera.tensor(G.tolist(), device=device)
    opt = tessera.optim.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        (p * g).sum().backward()
        opt.step()
    sd = opt.state_dict()
    assert list(sd["state"][0]) == ["momentum_buffer"]
    assert sd["param_groups"][0]["params"] == [0] and sd["param_groups"][0]["lr"] == 0.1
    opt2 = tessera.optim.SGD([p], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    opt2.zero_grad()
    (p * g).sum().backward()
    opt2.step()
    np.testing.assert_allclose(N(p), ref_sgd(0.1, momentum=0.9)[2], rtol=0, atol=ATOL)


def test_clip_grad_norm(device):
    a = nn.Parameter(tessera.ones(2, device=device))
    b = nn.Parameter(tessera.ones(1, device=device))
    (a * tessera.tensor([3.0, 0.0], device=device)).sum().backward()
    (b * 4.0).sum().backward()
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert str(total.device) == str(a.grad.device) and total.dim() == 0  # as torch: no host read
    assert abs(total.item() - 5.0) < 1e-6
    np.testing.assert_allclose(N(a.grad), [0.6, 0.0], atol=1e-6)
    np.testing.assert_allclose(N(b.grad), [0.8], atol=1e-6)


# ------------------------------------------------------------------ schedulers
def lrs(make_sched, epochs=10, lr=1.0):
    p = nn.Parameter(tessera.ones(1))
    opt = tessera.optim.SGD([p], lr=lr)
    s = make_sched(opt)
    out = []
    for _ in range(epochs):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step()
    assert s.get_last_lr() == [opt.param_groups[0]["lr"]]
    return out


def test_schedulers_follow_torch_formulas():
    """each against PyTorch's documented closed form for epoch e"""
    np.testing.assert_allclose(lrs(lambda o: lr_scheduler.StepLR(o, 3, gamma=0.5)),
                               [0.5 ** (e // 3) for e in range(10)], rtol=1e-12)
    np.testing.assert_allclose(lrs(lambda o: lr_scheduler.MultiStepLR(o, [2, 5], gamma=0.1)),
                               [0.1 ** sum(e >= m for m in (2, 5)) for e in range(10)],
                               rtol=1e-12)
    np.testing.assert_allclose(lrs(lambda o: lr_scheduler.ExponentialLR(o, 0.9)),
                               [0.9 ** e for e in range(10)], rtol=1e-12)
    np.testing.assert_allclose(
        lrs(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=0.1)),
        [0.1 + 0.9 * (1 + math.cos(math.pi * e / 8)) / 2 for e in range(10)], rtol=1e-9)
    np.testing.assert_allclose(lrs(lambda o: lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1))),
                               [1 / (e + 1) for e in range(10)], rtol=1e-12)
    np.testing.assert_allclose(
        lrs(lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4)),
        [0.25 + 0.75 * min(e, 4) / 4 for e in range(10)], rtol=1e-9)


def test_scheduler_drives_the_c_optimizer():
    """the lr a scheduler writes is the one the next step uses"""
    p = nn.Parameter(tessera.zeros(1))
    opt = tessera.optim.SGD([p], lr=1.0)
    s = lr_scheduler.StepLR(opt, 1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        p.sum().backward()  # gradient 1
        opt.step()
        s.step()
    np.testing.assert_allclose(N(p), [-(1 + 0.5 + 0.25)], atol=ATOL)
