"""test_optim_adaptive.py — tessera.optim's Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop:
N steps of each, for several option combinations, compared after every step with a float64 NumPy
rewrite of torch.optim's single-tensor update (written here from PyTorch's formulas, not from
Tessera's code); state_dict names, values and round trips; errors. On cpu and sim:0.

Tolerance: the parameters are float32 (relative rounding 2^-24 ~ 6e-8 per operation). A step does
at most ~20 rounded operations on values of size <= ~3, so one step's error is below ~4e-6 and N = 6
steps' below ~2.5e-5 (the states are rounded too, but each enters the update with a factor <= 1).
ATOL = 3e-5 on values of size ~1; a wrong coefficient, sign or order of operations moves a
parameter by ~1e-3 or more within the first steps."""
import math

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
from tessera import optim  # noqa: E402

ATOL = 3e-5
STEPS = 6
P0 = np.array([0.5, -1.2, 0.3, 2.0, -0.7, 1.1])
P1 = np.array([0.05, -0.4, 0.9, -1.5])
G0 = np.array([0.3, -0.8, 0.5, 0.1, -0.2, 0.9])
G1 = np.array([-0.6, 0.25, 0.4, 0.0])
C = [1.0, -2.5, 0.5, 1.5, -0.25, 2.0]  # sign changes for Rprop, sizes for the accumulators


def grads(s):
    """the gradients of step s (independent of the parameters: no feedback of rounding)"""
    return [G0 * C[s] - 0.1 * s, G1 * C[s] + 0.05 * s * (s % 2)]


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64)


def make_params(device):
    return [nn.Parameter(tessera.tensor(P0.reshape(2, 3).tolist(), device=device)),
            nn.Parameter(tessera.tensor(P1.tolist(), device=device))]


def run(make_opt, device, steps=STEPS):
    """the parameters (flattened, float64) after each step"""
    ps = make_params(device)
    opt = make_opt(ps)
    out = []
    for s in range(steps):
        opt.zero_grad()
        for p, g in zip(ps, grads(s)):
            (p * tessera.tensor(g.reshape(tuple(p.shape)).tolist(), device=device)).sum().backward()
        opt.step()
        out.append([N(p).ravel() for p in ps])
    return out, opt, ps


def ref_run(update, state_init, steps=STEPS):
    """update(p, g, st, step) -> p over both parameters, in float64"""
    ps = [P0.copy(), P1.copy()]
    sts = [state_init(p) for p in ps]
    out = []
    for s in range(steps):
        gs = grads(s)
        for i in range(2):
            sts[i]["step"] += 1
            ps[i] = update(ps[i], gs[i].copy(), sts[i], sts[i]["step"])
        out.append([p.copy() for p in ps])
    return out


# ------------------------------------------------------------------ float64 references of torch's
def ref_adagrad(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                eps=1e-10, maximize=False):
    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        clr = lr / (1 + (step - 1) * lr_decay)
        st["sum"] = st["sum"] + g * g
        return p - clr * g / (np.sqrt(st["sum"]) + eps)
    return ref_run(upd, lambda p: {"step": 0, "sum": np.full_like(p, initial_accumulator_value)})


def ref_adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        st["sq"] = rho * st["sq"] + (1 - rho) * g * g
        delta = np.sqrt(st["acc"] + eps) / np.sqrt(st["sq"] + eps) * g
        st["acc"] = rho * st["acc"] + (1 - rho) * delta * delta
        return p - lr * delta
    return ref_run(upd, lambda p: {"step": 0, "sq": 0 * p, "acc": 0 * p})


def ref_adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas

    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        st["m"] = b1 * st["m"] + (1 - b1) * g
        st["u"] = np.maximum(b2 * st["u"], np.abs(g) + eps)
        return p - lr / (1 - b1 ** step) * st["m"] / st["u"]
    return ref_run(upd, lambda p: {"step": 0, "m": 0 * p, "u": 0 * p})


def ref_nadam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas

    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            if decoupled_weight_decay:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (step * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
        st["mu_product"] *= mu
        st["m"] = b1 * st["m"] + (1 - b1) * g
        st["v"] = b2 * st["v"] + (1 - b2) * g * g
        denom = np.sqrt(st["v"] / (1 - b2 ** step)) + eps
        p = p - lr * (1 - mu) / (1 - st["mu_product"]) * g / denom
        return p - lr * mu_next / (1 - st["mu_product"] * mu_next) * st["m"] / denom
    return ref_run(upd, lambda p: {"step": 0, "mu_product": 1.0, "m": 0 * p, "v": 0 * p})


def ref_radam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas

    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            if decoupled_weight_decay:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        st["m"] = b1 * st["m"] + (1 - b1) * g
        st["v"] = b2 * st["v"] + (1 - b2) * g * g
        mhat = st["m"] / (1 - b1 ** step)
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * b2 ** step / (1 - b2 ** step)
        if rho_t > 5:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                             ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(1 - b2 ** step) / (np.sqrt(st["v"]) + eps)
            return p - mhat * lr * adaptive * rect
        return p - mhat * lr
    return ref_run(upd, lambda p: {"step": 0, "m": 0 * p, "v": 0 * p})


def ref_asgd(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    def upd(p, g, st, step):
        g = -g if maximize else g
        if weight_decay:
            g = g + weight_decay * p
        eta, mu = st["eta"], st["mu"]
        p = p * (1 - lambd * eta) - eta * g
        st["ax"] = st["ax"] + (p - st["ax"]) * mu if mu != 1 else p.copy()
        st["eta"] = lr / (1 + lambd * lr * step) ** alpha
        st["mu"] = 1 / max(1, step - t0)
        return p
    return ref_run(upd, lambda p: {"step": 0, "eta": lr, "mu": 1.0, "ax": 0 * p})


def ref_rprop(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    em, ep = etas
    lo, hi = step_sizes

    def upd(p, g, st, step):
        g = -g if maximize else g
        s = np.sign(g * st["prev"])
        f = np.where(s > 0, ep, np.where(s < 0, em, 1.0))
        st["ss"] = np.clip(st["ss"] * f, lo, hi)
        g = np.where(f == em, 0.0, g)
        st["prev"] = g
        return p - np.sign(g) * st["ss"]
    return ref_run(upd, lambda p: {"step": 0, "prev": 0 * p, "ss": np.full_like(p, lr)})


CASES = [
    ("Adagrad", {}, ref_adagrad),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5),
     ref_adagrad),
    ("Adagrad", dict(lr=0.05, eps=1e-3, maximize=True), ref_adagrad),
    ("Adadelta", {}, ref_adadelta),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.2, maximize=True), ref_adadelta),
    ("Adamax", {}, ref_adamax),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, maximize=True),
     ref_adamax),
    ("NAdam", {}, ref_nadam),
    ("NAdam", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1, momentum_decay=0.5), ref_nadam),
    ("NAdam", dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True, maximize=True),
     ref_nadam),
    # rho_t is 1 at step 1 for every beta2; with 0.999 it passes 5 at step 6 (rectified)
    ("RAdam", dict(lr=0.05), ref_radam),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1), ref_radam),  # 5.39 at step 6
    ("RAdam", dict(lr=0.05, betas=(0.7, 0.6), weight_decay=0.3, decoupled_weight_decay=True,
                   maximize=True), ref_radam),  # never rectified (rho_inf = 4)
    ("ASGD", {}, ref_asgd),
    ("ASGD", dict(lr=0.1, lambd=0.5, alpha=0.5, t0=2, weight_decay=0.1), ref_asgd),
    ("ASGD", dict(lr=0.05, lambd=0.1, t0=0, maximize=True), ref_asgd),
    ("Rprop", {}, ref_rprop),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(0.02, 0.1), maximize=True), ref_rprop),
]


def close(got, want, what):
    for s, (gs, ws) in enumerate(zip(got, want)):
        for i, (g, w) in enumerate(zip(gs, ws)):
            err = np.abs(g - w)
            assert np.all(err <= ATOL), (f"{what}: step {s + 1}, parameter {i}: max error "
                                         f"{err.max():.3g}\n got {g}\nwant {w}")


@pytest.mark.parametrize("name,opts,ref", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_steps_match_torch_formula(device, name, opts, ref):
    got, _, _ = run(lambda ps: getattr(optim, name)(ps, **opts), device)
    close(got, ref(**opts), f"{name}({opts})")


def test_radam_both_branches():
    """beta2 0.9: rho_t <= 5 for steps 1-5, rectified at step 6"""
    def rho_t(b2, t):
        rho_inf = 2 / (1 - b2) - 1
        return rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    got, _, _ = run(lambda ps: optim.RAdam(ps, lr=0.05, betas=(0.9, 0.9)), "cpu")
    assert any(rho_t(0.9, t) <= 5 for t in range(1, STEPS + 1))
    assert any(rho_t(0.9, t) > 5 for t in range(1, STEPS + 1))
    close(got, ref_radam(lr=0.05, betas=(0.9, 0.9)), "RAdam betas (0.9, 0.9)")


def test_float64_params_tight():
    """float64 parameters follow the float64 formula to ~1e-12"""
    for name, opts, ref in CASES:
        ps = [nn.Parameter(tessera.tensor(P0.reshape(2, 3).tolist(), dtype=tessera.float64)),
              nn.Parameter(tessera.tensor(P1.tolist(), dtype=tessera.float64))]
        opt = getattr(optim, name)(ps, **opts)
        want = ref(**opts)
        for s in range(STEPS):
            for p, g in zip(ps, grads(s)):
                p.grad = tessera.tensor(g.reshape(tuple(p.shape)).tolist(), dtype=tessera.float64)
            opt.step()
            for i, p in enumerate(ps):
                err = np.abs(N(p).ravel() - want[s][i]).max()
                # NAdam's mu_product and ASGD's eta/mu are float32 state in torch (1e-7 relative)
                tol = 1e-6 if name in ("NAdam", "ASGD") else 1e-12
                assert err <= tol, (name, opts, s, i, err)


# ------------------------------------------------------------------ state dicts
STATE_NAMES = {
    "Adagrad": {"step", "sum"},
    "Adadelta": {"step", "square_avg", "acc_delta"},
    "Adamax": {"step", "exp_avg", "exp_inf"},
    "NAdam": {"step", "mu_product", "exp_avg", "exp_avg_sq"},
    "RAdam": {"step", "exp_avg", "exp_avg_sq"},
    "ASGD": {"step", "eta", "mu", "ax"},
    "Rprop": {"step", "prev", "step_size"},
}


@pytest.mark.parametrize("name", sorted(STATE_NAMES))
def test_state_dict_names_and_round_trip(device, name):
    opts = {"lr": 0.05}
    got, opt, ps = run(lambda p: getattr(optim, name)(p, **opts), device, steps=3)
    sd = opt.state_dict()
    assert set(sd["state"]) == {0, 1}
    for i in range(2):
        st = sd["state"][i]
        assert set(st) == STATE_NAMES[name], (name, set(st))
        assert st["step"].dtype == tessera.float32 and tuple(st["step"].shape) == ()
        assert float(st["step"]) == 3.0
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert sd["param_groups"][0]["lr"] == 0.05
    # resume: a fresh optimizer loaded with the state continues exactly like the original
    ps2 = make_params(device)
    with tessera.no_grad():
        for p, q in zip(ps2, ps):
            p.copy_(q)
    opt2 = getattr(optim, name)(ps2, lr=0.05)
    opt2.load_state_dict(sd)
    for s in range(3, STEPS):
        for o, qs in ((opt, ps), (opt2, ps2)):
            o.zero_grad()
            for p, g in zip(qs, grads(s)):
                p.grad = tessera.tensor(g.reshape(tuple(p.shape)).tolist(), device=device)
            o.step()
    for p, q in zip(ps, ps2):
        assert N(p).tolist() == N(q).tolist()
    # and the resumed run is the reference's
    want = {"Adagrad": ref_adagrad, "Adadelta": ref_adadelta, "Adamax": ref_adamax,
            "NAdam": ref_nadam, "RAdam": ref_radam, "ASGD": ref_asgd,
            "Rprop": ref_rprop}[name](**opts)[-1]
    for p, w in zip(ps2, want):
        assert np.abs(N(p).ravel() - w).max() <= ATOL


def test_state_values():
    """the scalar state as PyTorch keeps it: NAdam's mu_product, ASGD's eta and mu"""
    _, opt, _ = run(lambda p: optim.NAdam(p, lr=0.05), "cpu", steps=3)
    mp = 1.0
    for t in range(1, 4):
        mp *= 0.9 * (1 - 0.5 * 0.96 ** (t * 4e-3))
    assert abs(float(opt.state_dict()["state"][0]["mu_product"]) - mp) <= 1e-6
    _, opt, _ = run(lambda p: optim.ASGD(p, lr=0.1, lambd=0.5, alpha=0.5, t0=1), "cpu", steps=3)
    st = opt.state_dict()["state"][1]
    assert abs(float(st["eta"]) - 0.1 / (1 + 0.5 * 0.1 * 3) ** 0.5) <= 1e-7
    assert float(st["mu"]) == 0.5  # 1 / max(1, 3 - 1)
    _, opt, _ = run(lambda p: optim.Rprop(p, lr=0.05), "cpu", steps=1)
    # first step: prev was 0, so every factor is 1 and step_size stays lr
    assert np.allclose(N(opt.state_dict()["state"][0]["step_size"]), 0.05, atol=1e-9)


def test_adagrad_state_before_step():
    """PyTorch's Adagrad makes its state when built: step 0 and sum = initial_accumulator_value"""
    ps = make_params("cpu")
    opt = optim.Adagrad(ps, initial_accumulator_value=0.25)
    sd = opt.state_dict()
    assert float(sd["state"][1]["step"]) == 0
    assert N(sd["state"][1]["sum"]).tolist() == [0.25] * 4
    opt.load_state_dict(sd)  # and it loads: the next step is step 1
    for p, g in zip(ps, grads(0)):
        p.grad = tessera.tensor(g.reshape(tuple(p.shape)).tolist())
    opt.step()
    want = ref_adagrad(initial_accumulator_value=0.25)[0]
    for p, w in zip(ps, want):
        assert np.abs(N(p).ravel() - w).max() <= ATOL


def test_load_state_dict_errors():
    _, opt, _ = run(lambda p: optim.NAdam(p), "cpu", steps=1)
    sd = opt.state_dict()
    del sd["state"][0]["mu_product"]
    fresh = optim.NAdam(make_params("cpu"))
    with pytest.raises(Exception, match="mu_product is missing"):
        fresh.load_state_dict(sd)
    _, opt, _ = run(lambda p: optim.Rprop(p), "cpu", steps=1)
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"] = sd["state"][0]["prev"]
    with pytest.raises(Exception, match="exp_avg"):
        optim.Rprop(make_params("cpu")).load_state_dict(sd)


def test_param_groups_and_lr_schedule():
    """a second group with its own lr; a scheduler's lr reaches the C step"""
    ps = make_params("cpu")
    opt = optim.Adagrad([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.1}], lr=0.01)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    st = [np.zeros(6), np.zeros(4)]
    want = [P0.copy(), P1.copy()]
    for s in range(3):
        for p, g in zip(ps, grads(s)):
            p.grad = tessera.tensor(g.reshape(tuple(p.shape)).tolist())
        opt.step()
        for i, (lr0, g) in enumerate(zip((0.01, 0.1), grads(s))):
            st[i] = st[i] + g * g
            want[i] = want[i] - lr0 * 0.5 ** s * g / (np.sqrt(st[i]) + 1e-10)
        sched.step()
    for p, w in zip(ps, want):
        assert np.abs(N(p).ravel() - w).max() <= ATOL


def test_errors():
    ps = make_params("cpu")
    with pytest.raises(ValueError, match="Invalid rho value"):
        optim.Adadelta(ps, rho=1.5)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.NAdam(ps, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid eta values"):
        optim.Rprop(ps, etas=(1.2, 0.5))
    with pytest.raises(ValueError, match="momentum_decay"):
        optim.NAdam(ps, momentum_decay=-1)
    with pytest.raises(ValueError, match="lr_decay"):
        optim.Adagrad(ps, lr_decay=-1)
    with pytest.raises(NotImplementedError, match="differentiable"):
        optim.RAdam(ps, differentiable=True)
    # foreach / capturable / fused are accepted (they do not change the numbers)
    optim.Adamax(ps, foreach=True, capturable=True)
    optim.Adagrad(make_params("cpu"), fused=True)


def test_zero_lr_and_zero_options():
    """zeros are literal (not "the default"): lr 0 leaves the parameters, rho 0 is Adadelta's
    memoryless form"""
    got, _, _ = run(lambda p: optim.Adagrad(p, lr=0.0), "cpu", steps=2)
    assert np.all(got[-1][0] == P0.astype(np.float32).astype(np.float64))
    got, _, _ = run(lambda p: optim.Adadelta(p, rho=0.0), "cpu")
    close(got, ref_adadelta(rho=0.0), "Adadelta rho=0")


# ------------------------------------------------------------------ schedulers
# lr sequences against closed forms derived here (float64; the recursive forms PyTorch uses agree
# with them to ~1e-15 relative per step: RTOL 1e-12)
sched = optim.lr_scheduler
RTOL = 1e-12


def sgd(lr=0.1, momentum=0.9, groups=1):
    ps = make_params("cpu")
    if groups == 2:
        return optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": lr * 2}], lr=lr,
                         momentum=momentum)
    return optim.SGD(ps, lr=lr, momentum=momentum)


def lrs_of(s, opt, n, metric=None):
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(n):
        opt.step()
        s.step() if metric is None else s.step(metric)
        out.append([g["lr"] for g in opt.param_groups])
        assert s.get_last_lr() == out[-1]
    return out


def same(got, want):
    assert len(got) == len(want)
    for t, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert abs(a - b) <= RTOL * max(1.0, abs(b)), (t, g, w)


def test_polynomial_lr():
    opt = sgd(groups=2)
    s = sched.PolynomialLR(opt, total_iters=4, power=2.0)
    want = [[b * (1 - min(t, 4) / 4) ** 2 for b in (0.1, 0.2)] for t in range(7)]
    same(lrs_of(s, opt, 6), want)


@pytest.mark.parametrize("T_0,T_mult", [(3, 1), (2, 2), (3, 3)])
def test_cosine_annealing_warm_restarts(T_0, T_mult):
    opt = sgd()
    s = sched.CosineAnnealingWarmRestarts(opt, T_0=T_0, T_mult=T_mult, eta_min=0.01)
    want, start, length = [], 0, T_0
    for t in range(20):
        while t >= start + length:  # the restarts: cycles of T_0, T_0 T_mult, ...
            start, length = start + length, length * T_mult
        want.append([0.01 + (0.1 - 0.01) * (1 + math.cos(math.pi * (t - start) / length)) / 2])
    same(lrs_of(s, opt, 19), want)
    # and the epoch form (closed) gives the same values
    s.step(7)
    start, length = 0, T_0
    while 7 >= start + length:
        start, length = start + length, length * T_mult
    assert abs(opt.param_groups[0]["lr"] - (0.01 + 0.09 * (1 + math.cos(
        math.pi * (7 - start) / length)) / 2)) <= 1e-12


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_lr(mode):
    opt = sgd(groups=2)
    s = sched.CyclicLR(opt, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3, mode=mode,
                       gamma=0.9, base_momentum=0.8, max_momentum=0.9)
    want, moms = [], []
    for t in range(15):  # the triangle of Smith's paper
        cycle = math.floor(1 + t / 6)
        x = abs(t / 3 - 2 * cycle + 1)
        scale = {"triangular": 1.0, "triangular2": 1 / 2 ** (cycle - 1),
                 "exp_range": 0.9 ** t}[mode]
        h = max(0.0, 1 - x) * scale
        want.append([0.01 + (m - 0.01) * h for m in (0.1, 0.2)])
        moms.append(0.9 - 0.1 * h)
    got = [[g["lr"] for g in opt.param_groups]]
    got_m = [opt.param_groups[0]["momentum"]]
    for _ in range(14):
        opt.step()
        s.step()
        got.append([g["lr"] for g in opt.param_groups])
        got_m.append(opt.param_groups[0]["momentum"])
    same(got, want)
    same([[m] for m in got_m], [[m] for m in moms])


def test_cyclic_lr_asymmetric_and_errors():
    opt = sgd()
    s = sched.CyclicLR(opt, 0.0, 1.0, step_size_up=2, step_size_down=4, cycle_momentum=False)
    want = [[v] for v in (0, 0.5, 1, 0.75, 0.5, 0.25, 0, 0.5)]
    same(lrs_of(s, opt, 7), want)
    with pytest.raises(ValueError, match="support momentum or beta1"):
        sched.CyclicLR(optim.Adagrad(make_params("cpu")), 0.01, 0.1)


@pytest.mark.parametrize("three_phase,anneal", [(False, "cos"), (False, "linear"), (True, "cos")])
def test_one_cycle_lr(three_phase, anneal):
    opt = optim.Adam(make_params("cpu"), lr=0.1)
    T, mx = 20, 0.5
    s = sched.OneCycleLR(opt, max_lr=mx, total_steps=T, pct_start=0.25, three_phase=three_phase,
                         anneal_strategy=anneal)
    lo, end = mx / 25, mx / 25 / 1e4

    def ann(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) if anneal == "cos" else \
            (b - a) * pct + a
    phases = ([(0.25 * T - 1, lo, mx, 0.95, 0.85), (2 * 0.25 * T - 2, mx, lo, 0.85, 0.95),
               (T - 1, lo, end, 0.95, 0.95)] if three_phase else
              [(0.25 * T - 1, lo, mx, 0.95, 0.85), (T - 1, mx, end, 0.85, 0.95)])
    want, moms = [], []
    for t in range(T):
        start = 0.0
        for i, (e, a, b, ma, mb) in enumerate(phases):
            if t <= e or i == len(phases) - 1:
                want.append([ann(a, b, (t - start) / (e - start))])
                moms.append(ann(ma, mb, (t - start) / (e - start)))
                break
            start = e
    got, got_m = [[opt.param_groups[0]["lr"]]], [opt.param_groups[0]["betas"][0]]
    for _ in range(T - 1):
        opt.step()
        s.step()
        got.append([opt.param_groups[0]["lr"]])
        got_m.append(opt.param_groups[0]["betas"][0])
    same(got, want)
    same([[m] for m in got_m], [[m] for m in moms])
    assert abs(want[0][0] - lo) < 1e-15 and abs(want[-1][0] - end) < 1e-15
    s.step()  # step T is allowed, T + 1 is not (PyTorch's rule)
    with pytest.raises(ValueError, match="Tried to step 21 times"):
        s.step()


def test_one_cycle_momentum_reaches_the_step():
    """OneCycleLR's momentum is the one SGD steps with: parameters against a float64 SGD"""
    ps = make_params("cpu")
    opt = optim.SGD(ps, lr=0.1, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=0.3, total_steps=6, pct_start=0.5)
    p, buf = [P0.copy(), P1.copy()], [None, None]
    for t in range(5):
        lr, mom = opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]
        for q, g in zip(ps, grads(t)):
            q.grad = tessera.tensor(g.reshape(tuple(q.shape)).tolist())
        opt.step()
        for i, g in enumerate(grads(t)):
            buf[i] = g.copy() if buf[i] is None else mom * buf[i] + g
            p[i] = p[i] - lr * buf[i]
        s.step()
    for q, w in zip(ps, p):
        assert np.abs(N(q).ravel() - w).max() <= ATOL


def test_sequential_lr():
    opt = sgd()
    s = sched.SequentialLR(opt, [sched.ConstantLR(opt, factor=0.1, total_iters=2),
                                 sched.ExponentialLR(opt, gamma=0.9)], milestones=[2])
    want = [[0.1 * (0.1 if t < 2 else 0.9 ** (t - 2))] for t in range(8)]
    same(lrs_of(s, opt, 7), want)


def test_sequential_lr_warmup_cosine():
    opt = sgd()
    s = sched.SequentialLR(opt, [sched.LinearLR(opt, start_factor=0.25, total_iters=4),
                                 sched.CosineAnnealingLR(opt, T_max=5)], milestones=[4])
    want = [[0.1 * (0.25 + 0.75 * t / 4)] if t < 4 else
            [0.1 * (1 + math.cos(math.pi * (t - 4) / 5)) / 2] for t in range(10)]
    same(lrs_of(s, opt, 9), want)


def test_chained_scheduler():
    opt = sgd(groups=2)
    s = sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.1, total_iters=2),
                                sched.ExponentialLR(opt, gamma=0.9)])
    want = [[b * 0.9 ** t * (0.1 if t < 2 else 1) for b in (0.1, 0.2)] for t in range(8)]
    same(lrs_of(s, opt, 7), want)
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        sched.ChainedScheduler([sched.ReduceLROnPlateau(opt)])


def test_lambda_and_multiplicative():
    opt = sgd(groups=2)
    s = sched.LambdaLR(opt, [lambda t: 1 / (t + 1), lambda t: 0.5 ** t])
    same(lrs_of(s, opt, 5), [[0.1 / (t + 1), 0.2 * 0.5 ** t] for t in range(6)])
    opt = sgd()
    s = sched.MultiplicativeLR(opt, lambda t: 0.9)
    same(lrs_of(s, opt, 5), [[0.1 * 0.9 ** t] for t in range(6)])
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        sched.MultiplicativeLR(sgd(), 0.9)


def test_reduce_lr_on_plateau():
    opt = sgd(groups=2)
    s = sched.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, cooldown=1,
                                min_lr=[0.0, 0.09])
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0]
    # bad epochs: 3rd (1), 4th (2 > 1: reduce, cooldown 1), 5th (cooldown), 6th (1), 7th (reduce)
    got = []
    for m in metrics:
        s.step(m)
        got.append([g["lr"] for g in opt.param_groups])
    want_a = [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    want_b = [0.2, 0.2, 0.2, 0.1, 0.1, 0.1, 0.09, 0.09]
    same(got, [[a, b] for a, b in zip(want_a, want_b)])
    sd = s.state_dict()
    assert sd["best"] == 0.9 and sd["num_bad_epochs"] == 0 and sd["cooldown_counter"] == 0
    s2 = sched.ReduceLROnPlateau(sgd(groups=2))
    s2.load_state_dict(sd)
    assert s2.mode == "min" and s2.patience == 1 and s2.best == 0.9


@pytest.mark.parametrize("make", [
    lambda o: sched.OneCycleLR(o, max_lr=0.5, total_steps=30),
    lambda o: sched.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="triangular2"),
    lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    lambda o: sched.PolynomialLR(o, total_iters=8, power=0.5),
    lambda o: sched.SequentialLR(o, [sched.LinearLR(o, 0.5, total_iters=3),
                                     sched.StepLR(o, 2, 0.5)], [3]),
    lambda o: sched.ChainedScheduler([sched.StepLR(o, 2, 0.5), sched.ExponentialLR(o, 0.95)]),
], ids=["onecycle", "cyclic", "warm_restarts", "polynomial", "sequential", "chained"])
def test_scheduler_state_dict_resume(make):
    """a scheduler saved after 5 steps and loaded into a new one continues identically"""
    opt = sgd()
    s = make(opt)
    for _ in range(5):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd
    opt2 = sgd()
    opt2.load_state_dict(opt.state_dict())
    s2 = make(opt2)
    s2.load_state_dict(sd)
    for _ in range(6):
        opt.step()
        s.step()
        opt2.step()
        s2.step()
        assert s.get_last_lr() == s2.get_last_lr()
        assert opt.param_groups[0]["momentum"] == opt2.param_groups[0]["momentum"]


# ------------------------------------------------------------------ LBFGS
QA = np.array([[3.0, 0.5, -0.2, 0.1], [0.5, 2.0, 0.3, 0.0], [-0.2, 0.3, 1.0, 0.2],
               [0.1, 0.0, 0.2, 1.5]])
QB = np.array([1.0, -2.0, 0.5, 0.3])
QX0 = np.array([0.3, -0.7, 1.2, 0.4])


def ref_lbfgs(x, lr, max_iter, history_size, n_steps, tolerance_grad=1e-7,
              tolerance_change=1e-9):
    """torch.optim.LBFGS (no line search) on f(x) = x'Ax/2 - b'x, in float64"""
    def fg(v):
        return 0.5 * v @ QA @ v - QB @ v, QA @ v - QB
    st = {"n_iter": 0}
    for _ in range(n_steps):
        loss, g = fg(x)
        if np.abs(g).max() <= tolerance_grad:
            continue
        n, evals = 0, 1  # closure evaluations in this step (max_eval = max_iter * 5 // 4)
        while n < max_iter:
            n += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d, dirs, stps, ro, H = -g, [], [], [], 1.0
            else:
                y, s = g - st["pg"], st["d"] * st["t"]
                ys = y @ s
                dirs, stps, ro, H = st["dirs"], st["stps"], st["ro"], st["H"]
                if ys > 1e-10:
                    if len(dirs) == history_size:
                        dirs.pop(0), stps.pop(0), ro.pop(0)
                    dirs.append(y), stps.append(s), ro.append(1 / ys)
                    H = ys / (y @ y)
                q, al = -g, [0.0] * len(dirs)
                for i in range(len(dirs) - 1, -1, -1):
                    al[i] = (stps[i] @ q) * ro[i]
                    q = q - al[i] * dirs[i]
                r = q * H
                for i in range(len(dirs)):
                    r = r + (al[i] - (dirs[i] @ r) * ro[i]) * stps[i]
                d = r
            st.update(pg=g.copy(), dirs=dirs, stps=stps, ro=ro, H=H)
            prev_loss = loss
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if st["n_iter"] == 1 else lr
            st["d"], st["t"] = d, t
            if g @ d > -tolerance_change:
                break
            x = x + t * d
            if n != max_iter:
                loss, g = fg(x)
                evals += 1
            if n == max_iter or evals >= max_iter * 5 // 4 or np.abs(g).max() <= tolerance_grad:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
    return x


def lbfgs_run(n_steps, dtype, **kw):
    x = nn.Parameter(tessera.tensor(QX0.tolist(), dtype=dtype))
    A = tessera.tensor(QA.tolist(), dtype=dtype)
    b = tessera.tensor(QB.tolist(), dtype=dtype)
    opt = optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * (A @ x)).sum() - (b * x).sum()
        loss.backward()
        return loss
    losses = [float(opt.step(closure)) for _ in range(n_steps)]
    return N(x), losses, opt


@pytest.mark.parametrize("kw", [dict(lr=1, max_iter=3), dict(lr=0.5, max_iter=4, history_size=2),
                                dict(lr=0.8, max_iter=20)])
def test_lbfgs_matches_reference(kw):
    """float64: the iterates of a float64 rewrite of torch's two-loop recursion, to 1e-12"""
    got, _, _ = lbfgs_run(2, tessera.float64, **kw)
    want = ref_lbfgs(QX0.copy(), kw["lr"], kw["max_iter"], kw.get("history_size", 100), 2)
    assert np.abs(got - want).max() <= 1e-12, (got, want)


@pytest.mark.parametrize("ls", [None, "strong_wolfe"])
def test_lbfgs_converges(ls):
    """to the minimiser A^-1 b of the quadratic (float64 with tight tolerances: 1e-9; float32
    with the defaults: 1e-4 — tolerance_change 1e-9 on the loss stops at |x - x*| ~ 3e-5)"""
    xstar = np.linalg.solve(QA, QB)
    got, losses, opt = lbfgs_run(3, tessera.float64, line_search_fn=ls, max_iter=50,
                                 tolerance_grad=1e-13, tolerance_change=1e-15)
    assert np.abs(got - xstar).max() <= 1e-9
    assert losses[0] > losses[-1]
    got, _, _ = lbfgs_run(3, tessera.float32, line_search_fn=ls, max_iter=50)
    assert np.abs(got - xstar).max() <= 1e-4
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and sd["state"][0]["n_iter"] >= 1
    assert sd["param_groups"][0]["line_search_fn"] == ls


def test_lbfgs_errors():
    x = nn.Parameter(tessera.tensor([1.0]))
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS([x], line_search_fn="backtracking")
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [x]}, {"params": [nn.Parameter(tessera.tensor([2.0]))]}])
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([x]).step(None)
