"""Optimizer.set_master_weights (ts_optim_set_master_weights, src/optim/optim_master.c): a
bfloat16 / float16 parameter stepped with float32 masters equals, bit for bit, a float32 parameter
stepped from the same values and gradients and rounded after each step; without masters the small
updates vanish. cpu and sim:0; the state dict round trip; the errors."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402

P0 = [0.5, -1.2, 0.3, 2.0, -0.7, 1.1, 0.05, -0.4]
G0 = [0.3, -0.8, 0.5, 0.1, -0.2, 0.9, -0.6, 0.25]
STEPS = 25

CASES = {
    "sgd_momentum": lambda p: tessera.optim.SGD(p, lr=1e-4, momentum=0.9),
    "sgd_nesterov": lambda p: tessera.optim.SGD(p, lr=1e-4, momentum=0.9, nesterov=True,
                                                weight_decay=0.01),
    "adam": lambda p: tessera.optim.Adam(p, lr=1e-4),
    "adamw_amsgrad": lambda p: tessera.optim.AdamW(p, lr=1e-4, weight_decay=0.1, amsgrad=True),
    "rmsprop": lambda p: tessera.optim.RMSprop(p, lr=1e-4, momentum=0.5, centered=True),
    "nadam": lambda p: tessera.optim.NAdam(p, lr=1e-4),
    "adagrad": lambda p: tessera.optim.Adagrad(p, lr=1e-3),
}


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64)


def grad_at(s, device, dtype):
    """step s's gradient, rounded to dtype"""
    return tessera.tensor([g * (1 + (s % 5) * 0.5) - 0.02 * s for g in G0], device=device,
                          dtype=dtype)


def pair(device, dtype):
    p = nn.Parameter(tessera.tensor(P0, device=device, dtype=dtype))
    q = nn.Parameter(p.detach().float().clone())
    return p, q


def step(opt, param, g):
    opt.zero_grad()
    (param * g).sum().backward()  # the gradient is g exactly
    opt.step()


def run(make, device, dtype, masters, steps=STEPS):
    """the low-precision and the float32 parameters after each step"""
    p, q = pair(device, dtype)
    a, b = make([p]), make([q])
    if masters:
        assert a.set_master_weights(True) is a
    assert a.master_weights == masters
    out = []
    for s in range(steps):
        g = grad_at(s, device, dtype)
        step(a, p, g)
        step(b, q, g.float())
        out.append((N(p), N(q.to(dtype))))
    return a, b, p, q, out


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_float32_rounded(name, dtype, device):
    dt = getattr(tessera, dtype)
    a, _, _, q, out = run(CASES[name], device, dt, True)
    for s, (got, want) in enumerate(out):
        assert np.array_equal(got, want), (s, got, want)
    master = a.state_dict()["state"][0]["master_weight"]
    assert master.dtype == tessera.float32
    assert np.array_equal(N(master), N(q))  # the master is the float32 run, exactly
    # without masters the updates below half an ulp vanish: the runs part
    _, _, _, _, out = run(CASES[name], device, dt, False)
    assert not np.array_equal(*out[-1])


def test_state_dict_round_trip():
    make = CASES["adamw_amsgrad"]
    p, q = pair("sim:0", tessera.bfloat16)
    a, b = make([p]).set_master_weights(True), make([q])
    for s in range(8):
        g = grad_at(s, "sim:0", tessera.bfloat16)
        step(a, p, g)
        step(b, q, g.float())
    sd = a.state_dict()
    assert sd["state"][0]["exp_avg"].dtype == tessera.float32  # the state is float32 too
    r = nn.Parameter(p.detach().clone())
    c = make([r]).set_master_weights(True)
    c.load_state_dict(sd)
    for s in range(8, 16):
        g = grad_at(s, "sim:0", tessera.bfloat16)
        step(a, p, g)
        step(b, q, g.float())
        step(c, r, g)
        assert np.array_equal(N(r), N(q.to(tessera.bfloat16)))
        assert np.array_equal(N(p), N(r))
    assert np.array_equal(N(c.state_dict()["state"][0]["master_weight"]), N(q))


def test_float32_unaffected_and_off():
    p = nn.Parameter(tessera.tensor(P0))
    opt = tessera.optim.Adam([p], lr=1e-4).set_master_weights(True)
    step(opt, p, grad_at(0, "cpu", tessera.float32))
    assert "master_weight" not in opt.state_dict()["state"][0]
    h = nn.Parameter(tessera.tensor(P0, dtype=tessera.bfloat16))
    opt = tessera.optim.SGD([h], lr=1e-4).set_master_weights(True)
    step(opt, h, grad_at(0, "cpu", tessera.bfloat16))
    assert "master_weight" in opt.state_dict()["state"][0]
    opt.set_master_weights(False)
    assert not opt.master_weights
    assert "master_weight" not in opt.state_dict()["state"].get(0, {})


def test_offloaded_refused():
    p = nn.Parameter(tessera.tensor(P0, device="sim:0", dtype=tessera.bfloat16))
    opt = tessera.optim.offload(tessera.optim.Adam([p], lr=1e-4))
    with pytest.raises(Exception, match="offload"):
        opt.set_master_weights(True)
    assert not opt.master_weights
