"""The model-zoo judge itself (tools/model_zoo_common.py: judge_tensor, KinkMatch; issue 75), on
synthetic values, without PyTorch: a one-hidden-layer ReLU network in numpy whose float32 run
flips one ReLU against float64 (the dla34 / hrnet case), a wrong number in both precisions, a
wrong number in float32 only, and KinkMatch's record / replay on a small Tessera model."""
import importlib.util
import os

import numpy as np
import pytest

import tessera

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "model_zoo_common", os.path.join(ROOT, "tools", "model_zoo_common.py"))
zc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zc)


def relu_net(dtype, mask=None, scale=1.0):
    """y = w2 . relu(W1 x) for 64 inputs, hidden unit 0's pre-activation ~1e-7 of the scale
    (within float32 noise of the kink); returns (y, dy/dW1, the ReLU mask used). mask: impose
    that mask (a branch-matched run); scale: a planted wrong factor on the gradient"""
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((16, 8))
    x = rng.standard_normal((8, 64))
    w2 = rng.standard_normal(16)
    h64 = w1 @ x
    w1[0, 0] -= (h64[0, 3] - 1e-7 * np.abs(h64).max() * np.sign(h64[0, 3])) / x[0, 3]
    w1, x, w2 = w1.astype(dtype), x.astype(dtype), w2.astype(dtype)
    h = w1 @ x
    m = (h > 0) if mask is None else mask
    y = (w2[:, None] * (h * m)).sum(axis=0)
    g = ((w2[:, None] * m) @ x.T) * dtype(scale)
    return y.astype(np.float64), g.astype(np.float64), m


def errors(tess32, tess64, tess64bm, torch32, r64, r64bm):
    return dict(err=zc.rel_err(tess32, r64), err_torch=zc.rel_err(torch32, r64),
                err64=zc.rel_err(tess64, r64), err_bm=zc.rel_err(tess32, tess64bm),
                err_torch_bm=zc.rel_err(torch32, r64bm))


def flipped_float32_run():
    """the float32 run as if its rounding put hidden unit 0, column 3, on the other side"""
    _, _, m64 = relu_net(np.float64)
    m = m64.copy()
    m[0, 3] = not m[0, 3]
    return m


def verdict(key, e):
    return zc.judge_tensor(key, e["err"], e["err_torch"], e["err64"], e["err_bm"],
                           e["err_torch_bm"])


def test_rounding_only_passes_rule_2():
    y64, g64, m64 = relu_net(np.float64)
    y32, g32, _ = relu_net(np.float32, mask=m64)  # rounding only: the same branches
    v = zc.judge_tensor("grad:param:w1", zc.rel_err(g32, g64), zc.rel_err(g32, g64) * 0.5)
    assert v["ok"] and not v["kink"] and v["ratio"] <= zc.K


def test_kink_flip_fails_rule_2_and_passes_rule_3():
    y64, g64, m64 = relu_net(np.float64)
    m = flipped_float32_run()
    _, tess32, _ = relu_net(np.float32, mask=m)
    _, tess64bm, _ = relu_net(np.float64, mask=m)
    # PyTorch's float32 run did not flip (by chance): its error is rounding only
    _, torch32, _ = relu_net(np.float32, mask=m64)
    e = errors(tess32, g64, tess64bm, torch32, g64, g64)
    assert e["err"] > 1e3 * zc.bound(e["err_torch"]), "the flip must be far beyond rounding"
    assert not zc.judge(e["err"], e["err_torch"])[1]  # the old judge: a false alarm
    v = verdict("grad:param:w1", e)
    assert v["ok"] and v["kink"] and v["ratio_max"] > zc.K and v["ratio"] <= zc.K, v
    # the forward is continuous: the flip moves the output by |pre-activation| only
    y32, _, _ = relu_net(np.float32, mask=m)
    assert zc.judge(zc.rel_err(y32, y64), zc.rel_err(relu_net(np.float32, mask=m64)[0], y64))[1]


def test_forward_is_never_exempt():
    """a forward tensor beyond rule 2 fails even when the float64 gate and the branch-matched
    comparison would pass"""
    v = zc.judge_tensor("train:out", 1e-3, 1e-6, err64=1e-16, err_bm=1e-7, err_torch_bm=1e-6)
    assert not v["ok"] and v["why"] == "max"
    v = zc.judge_tensor("eval:out", 1e-3, 1e-6, err64=1e-16, err_bm=1e-7, err_torch_bm=1e-6)
    assert not v["ok"]


@pytest.mark.parametrize("f32_only", [False, True])
def test_wrong_number_with_a_kink_is_caught(f32_only):
    """a gradient x (1 + 1e-4) in a run that also flipped a kink: in both precisions the
    float64 gate (rule 1) fails; in float32 only, the branch-matched comparison (rule 3)"""
    _, g64, m64 = relu_net(np.float64)
    m = flipped_float32_run()
    _, tess32, _ = relu_net(np.float32, mask=m, scale=1 + 1e-4)
    _, tess64, _ = relu_net(np.float64, scale=1.0 if f32_only else 1 + 1e-4)
    _, tess64bm, _ = relu_net(np.float64, mask=m, scale=1.0 if f32_only else 1 + 1e-4)
    _, torch32, _ = relu_net(np.float32, mask=m64)
    e = errors(tess32, tess64, tess64bm, torch32, g64, g64)
    v = verdict("grad:param:w1", e)
    assert not v["ok"], v
    assert v["why"] == ("max" if f32_only else "float64"), v


def test_wrong_number_without_a_kink_is_caught():
    _, g64, m64 = relu_net(np.float64)
    _, tess32, _ = relu_net(np.float32, mask=m64, scale=1 + 1e-4)
    _, torch32, _ = relu_net(np.float32, mask=m64)
    assert not zc.judge_tensor("grad:input", zc.rel_err(tess32, g64),
                               zc.rel_err(torch32, g64))["ok"]
    # the float64 gate alone catches an error far below float32's resolution
    v = zc.judge_tensor("grad:input", 0.0, 1e-6, err64=1e-9)
    assert not v["ok"] and v["why"] == "float64"
    assert zc.judge_tensor("grad:input", 0.0, 1e-6, err64=1e-14)["ok"]


def test_without_float64_rule_2_decides():
    v = zc.judge_tensor("grad:input", 1e-3, 1e-6)
    assert not v["ok"] and v["why"] == "max"
    v = zc.judge_tensor("grad:input", 1e-3, 1e-6, err_bm=1e-7, err_torch_bm=1e-6)
    assert not v["ok"]  # no float64 gate: no exemption


def test_rel_err():
    ref = np.linspace(-1.0, 1.0, 11)
    assert zc.rel_err(ref * (1 + 1e-4), ref) == pytest.approx(1e-4)
    assert zc.rel_err(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == float("inf")
    assert zc.rel_err(np.zeros(3), np.zeros(2)) == float("inf")
    assert zc.rel_err(np.array([1e-9]), np.array([0.0]), denom_floor=1e-3) == pytest.approx(1e-6)


class Net(tessera.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.fc = tessera.nn.Linear(4, 6)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x)).sum(dim=1)


@pytest.mark.parametrize("act", ["ReLU", "ReLU6", "Hardswish", "Hardsigmoid", "LeakyReLU",
                                 "Hardtanh"])
def test_kink_match_replays_the_recorded_branches(act):
    """record on one input, replay on another whose pre-activations cross the breakpoints:
    the replayed output and gradient are the recorded branch's piece at the new input"""
    tessera.manual_seed(3)
    mod = getattr(tessera.nn, act)(inplace=True) if act != "Hardtanh" else \
        tessera.nn.Hardtanh(-0.5, 0.5, inplace=True)
    net = Net(mod).double()
    with tessera.no_grad():
        net.fc.weight.copy_(tessera.tensor(np.linspace(-4.0, 4.0, 24).reshape(6, 4)))
        net.fc.bias.zero_()
    x1 = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    x2 = -x1 * 1.3  # the other side of most breakpoints
    km = zc.KinkMatch(tessera)
    km.record(net)
    rec = net(tessera.tensor(x1)).detach().numpy()
    net(tessera.tensor(x1))  # a module called twice: the k-th replay gets the k-th record
    assert km.n_calls() == 2 and not mod.inplace
    for h in km.handles:
        h.remove()
    km.handles = []
    km.replay(net)
    xi = tessera.tensor(x2, requires_grad=True)
    out = net(xi)
    out.sum().backward()
    # the reference: the recorded branch's piece, by hand
    h1 = x1 @ np.linspace(-4.0, 4.0, 24).reshape(6, 4).T
    h2 = x2 @ np.linspace(-4.0, 4.0, 24).reshape(6, 4).T
    bps, pieces = zc.KINKS[act](mod)
    br = sum((h1 > b).astype(int) for b in bps)
    val, der = np.zeros_like(h2), np.zeros_like(h2)
    for r, p in enumerate(pieces):
        m = br == r
        if isinstance(p, float):
            val[m] = p
        elif p == "x":
            val[m], der[m] = h2[m], 1.0
        elif p == "hswish":
            val[m], der[m] = h2[m] * (h2[m] + 3) / 6, (2 * h2[m] + 3) / 6
        elif p == "hsig":
            val[m], der[m] = h2[m] / 6 + 0.5, 1.0 / 6
        else:
            val[m], der[m] = h2[m] * p[1], p[1]
    assert np.allclose(out.detach().numpy(), val.sum(axis=1), rtol=1e-12, atol=1e-12)
    gx = der @ np.linspace(-4.0, 4.0, 24).reshape(6, 4)
    assert np.allclose(xi.grad.numpy(), gx, rtol=1e-12, atol=1e-12)
    own = sum((h2 > b).astype(int) for b in bps)
    assert km.flips == int(np.count_nonzero(own != br)) > 0
    # the second record (x1), replayed at x1: the module itself
    assert np.allclose(net(tessera.tensor(x1)).detach().numpy(), rec, rtol=1e-12)
    with pytest.raises(RuntimeError, match="more often than recorded"):
        net(tessera.tensor(x1))


def test_kink_match_replays_max_pool_argmax():
    """a 2-d max-pool: recorded on x1, the replay at x2 takes each window at x1's argmax (and
    routes the gradient there), counting the windows whose own argmax differs"""
    pool = tessera.nn.MaxPool2d(2, 2)
    x1 = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)  # argmax: bottom-right
    x2 = -x1  # argmax: top-left in every window
    km = zc.KinkMatch(tessera).record(pool)
    pool(tessera.tensor(x1))
    for h in km.handles:
        h.remove()
    km.handles = []
    km.replay(pool)
    xi = tessera.tensor(x2, requires_grad=True)
    out = pool(xi)
    out.sum().backward()
    assert np.array_equal(out.detach().numpy(), x2[:, :, 1::2, 1::2])
    want = np.zeros_like(x2)
    want[:, :, 1::2, 1::2] = 1.0
    assert np.array_equal(xi.grad.numpy(), want)
    assert km.flips == 8


def test_kink_match_functional_relu_and_flip_gap():
    """torch.nn.functional.relu (the detectors' box heads): recorded at x1 and replayed at x2
    inside km.functional(...), it takes x1's branch (value and gradient), counts the flips, is
    restored after the block; with flip_gap a flip far from the breakpoint raises (the runs saw
    different elements), one within the gap is accepted"""
    F = tessera.nn.functional
    orig = F.relu
    x1 = np.array([[-1.0, 2.0, -3.0, 4.0, 1e-9]])
    x2 = np.array([[1.0, 2.0, -3.0, -4.0, -1e-9]])  # elements 0, 3 and 4 on the other side
    km = zc.KinkMatch(tessera)
    with km.functional("record"):
        F.relu(tessera.tensor(x1))
    assert F.relu is orig and km.n_calls() == 1
    xi = tessera.tensor(x2, requires_grad=True)
    with km.functional("replay"):
        out = F.relu(xi)
    assert F.relu is orig
    out.sum().backward()
    mask = (x1 > 0).astype(np.float64)
    assert np.array_equal(out.detach().numpy(), x2 * mask)
    assert np.array_equal(xi.grad.numpy(), mask)
    assert km.flips == 3
    # flip_gap: the flips at +-1 and -4 lie far from 0 (x max|input| = 4): refused
    strict = zc.KinkMatch(tessera, flip_gap=2.0 ** -10)
    with strict.functional("record"):
        F.relu(tessera.tensor(x1))
    with pytest.raises(RuntimeError, match="flipped element lies"):
        with strict.functional("replay"):
            F.relu(tessera.tensor(x2))
    assert F.relu is orig
    # only the element at 1e-9 flips: within the gap
    near = zc.KinkMatch(tessera, flip_gap=2.0 ** -10)
    with near.functional("record"):
        F.relu(tessera.tensor(x1))
    with near.functional("replay"):
        F.relu(tessera.tensor(np.array([[-1.0, 2.0, -3.0, 4.0, -1e-9]])))
    assert near.flips == 1


# rule 4 (pooled scalars): synthetic scalar parameter gradients, each one long cancelling sum
def cancelling_sums(n_scalars, n_terms=16384, kappa=2000.0, seed=11):
    """n_scalars float64 summand vectors t (float64 truth: math.fsum) whose sum is
    sum|t| / kappa (a condition number in the thousands, like StarReLU's act.bias)"""
    import math
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_scalars):
        t = rng.standard_normal(n_terms)
        t -= math.fsum(t) / n_terms
        t[0] += np.abs(t).sum() / kappa - math.fsum(t)
        out.append((t, math.fsum(t)))
    return out


def float32_draw(t, rng, accumulate):
    """one library's float32 value of sum(t): summands carrying their own float32 rounding
    (relative eps32 noise, as a product of rounded factors does), summed by `accumulate`"""
    ts = (t * (1.0 + zc.EPS32 * rng.standard_normal(t.size))).astype(np.float32)
    return float(accumulate(ts))


def scalar_rows(sums, seed=4, planted=None):
    """judge_tensor rows (rules 1-2) for the scalars stages.{i//4}.blocks.{i%4}.mlp.act.bias:
    "PyTorch" sums its float32 summands in float32 (numpy's pairwise float32 sum), "Tessera"
    in float64, rounded once (its errors are then ~0.6-1.0x PyTorch's rms; seed 4 is one where a
    ratio of two draws still exceeds rule 2's 4x, as 1-8 of 12-36 scalars do in the metaformers);
    planted = (index, factor) multiplies one Tessera scalar, (None, factor) every one"""
    rng = np.random.default_rng(seed)
    rows = []
    for i, (t, r64) in enumerate(sums):
        torch32 = float32_draw(t, rng, lambda a: np.sum(a, dtype=np.float32))
        tess32 = float32_draw(t, rng, lambda a: np.float32(np.sum(a, dtype=np.float64)))
        if planted is not None and planted[0] in (i, None):
            tess32 = float(np.float32(tess32 * planted[1]))
        key = "grad:param:stages.%d.blocks.%d.mlp.act.bias" % (i // 4, i % 4)
        err, et = zc.rel_err(tess32, r64), zc.rel_err(torch32, r64)
        v = zc.judge_tensor(key, err, et, err64=0.0)
        rows.append(dict(device="cpu", key=key, err=err, err_torch=et, ratio=v["ratio"],
                         ok=bool(v["ok"]), why=v["why"], numel=1))
    return rows


def test_scalar_group_strips_block_indices():
    assert zc.scalar_group("grad:param:stages.0.blocks.1.mlp.act.bias") == \
        "stages.*.blocks.*.mlp.act.bias"
    assert zc.scalar_group("grad:param:stem.stem2a.lab.scale") == "stem.stem2a.lab.scale"


def test_random_draw_scalars_fail_rule_2_and_pass_rule_4():
    """each scalar's float32 error is a random draw in both libraries (the same distribution
    of summand noise): some ratio of two draws exceeds 4 (rule 2 fails) while the group's rms
    is within 4x of PyTorch's (rule 4 passes)"""
    rows = scalar_rows(cancelling_sums(16))
    assert np.median([r["err_torch"] for r in rows]) > zc.C * zc.EPS32  # beyond rule 2's floor
    failed = [r["key"] for r in rows if not r["ok"]]
    assert failed and all(r["why"] == "max" for r in rows if not r["ok"])
    groups = zc.pool_scalars(rows)
    g = groups["stages.*.blocks.*.mlp.act.bias@cpu"]
    assert g["n"] == 16 and g["passed"] == len(failed) and g["ratio"] <= zc.K, g
    assert all(r["ok"] for r in rows)
    pooled = [r for r in rows if r.get("pooled")]
    assert [r["key"] for r in pooled] == failed
    assert all(r["ratio"] == g["ratio"] and r["ratio_max"] > zc.K for r in pooled)
    res = zc.finish(dict(rows=rows))
    assert res["status"] == "pass" and res["n_pooled"] == len(failed)


@pytest.mark.parametrize("where", ["failing", "passing"])
def test_planted_systematic_error_in_one_scalar_fails_rule_4(where):
    """x (1 + 1e-4) on one Tessera scalar of the same group: its error (1e-4) dominates the
    group's rms (>= 1e-4 / sqrt(16) = 2.5e-5; the bound is 4 x 2.6e-6 from the draws), so the
    group fails and the planted scalar with it (and every other rule-2 failure of the group).
    The limit: one scalar's systematic error e is caught when e / sqrt(n) exceeds the bound,
    e > ~4 sqrt(n) rms(PyTorch's errors) (here 4e-5); the same error in every member (a wrong
    float32 op) from e > ~4 rms (1e-5)"""
    sums = cancelling_sums(16)
    clean = scalar_rows(sums)
    i = next(k for k, r in enumerate(clean) if (not r["ok"]) == (where == "failing"))
    rows = scalar_rows(sums, planted=(i, 1.0 + 1e-4))
    assert not rows[i]["ok"]  # rule 2 alone sees the plant too
    g = zc.pool_scalars(rows)["stages.*.blocks.*.mlp.act.bias@cpu"]
    assert g["passed"] == 0 and g["ratio"] > zc.K, g
    assert rows[i]["err"] > 0.9e-4 and g["rms"] >= rows[i]["err"] / np.sqrt(16)
    assert not rows[i]["ok"] and not rows[i].get("pooled")
    assert zc.finish(dict(rows=rows))["status"] == "wrong"


def test_planted_systematic_error_in_every_scalar_fails_rule_4():
    """x (1 + 2e-5) on every scalar of the group (a float32-only precision loss in the op):
    the rms is ~2e-5 against a bound of ~1e-5"""
    rows = scalar_rows(cancelling_sums(16), planted=(None, 1.0 + 2e-5))
    g = zc.pool_scalars(rows)["stages.*.blocks.*.mlp.act.bias@cpu"]
    assert g["passed"] == 0 and g["ratio"] > zc.K, g
    assert zc.finish(dict(rows=rows))["status"] == "wrong"


def test_kink_flipped_members_enter_the_pool_on_matched_branches():
    """rule 4 takes a member's branch-matched errors where rule 3 ran on it: efficientvim_m4's
    mixer.D group (numbers from its run), where three stage-0 members' plain errors came from a
    ReLU flip (1e-2 plain, 1e-6 .. 2e-5 matched) and sank the group's rms with them; on matched
    branches the group passes. A member without rule 3 keeps its plain errors"""
    pairs = [(1.82e-2, 7.0e-5, 1.25e-6, 6.65e-6), (6.29e-3, 4.8e-5, 9.08e-6, 7.39e-6),
             (1.06e-3, 5.3e-5, 1.85e-5, 2.04e-5), (2.60e-3, 1.87e-6, 9.01e-6, 1.87e-6),
             (4.4e-6, 2.7e-6, None, None), (2.6e-6, 7.1e-7, None, None),
             (5.2e-6, 7.2e-6, None, None), (9.6e-6, 1.75e-5, None, None)]
    rows = []
    for i, (e, et, ebm, etbm) in enumerate(pairs):
        key = "grad:param:stages.%d.blocks.%d.mixer.D" % (i // 4, i % 4)
        v = zc.judge_tensor(key, e, et, err64=0.0, err_bm=ebm, err_torch_bm=etbm)
        row = dict(device="cpu", key=key, err=e, err_torch=et, ratio=v["ratio"], ok=bool(v["ok"]),
                   why=v["why"], numel=1)
        if ebm is not None:
            row.update(err_bm=ebm, err_torch_bm=etbm)
        rows.append(row)
    assert not rows[3]["ok"] and rows[3]["why"] == "max"  # rule 3 alone: 9.0e-6 > 4 x 1.9e-6
    g = zc.pool_scalars(rows)["stages.*.blocks.*.mixer.D@cpu"]
    assert g["passed"] == 1 and g["ratio"] <= zc.K and rows[3]["ok"], g
    assert g["rms"] < 2e-5  # the plain errors' rms would be 7e-3
    assert zc._pooled_err(rows[4]) == (4.4e-6, 2.7e-6)


def test_group_of_one_and_rule_1_are_not_pooled():
    """a scalar without a sibling (a stem's) stays under rule 2; a scalar that failed the float64
    gate stays failed in a passing group; tensors of more than one element, and each device,
    are their own business"""
    rows = scalar_rows(cancelling_sums(16))
    bad = next(r for r in rows if not r["ok"])
    stem = dict(bad, key="grad:param:stem.stem2a.mlp.act.bias")  # a group of one
    gate = dict(rows[0], ok=False, why="float64", ratio=1e3)  # rule 1 failed
    vec = dict(bad, key="grad:param:stages.0.blocks.9.mlp.act.bias", numel=2)  # not a scalar
    other = [dict(r, device="sim:0") for r in rows[1:]]  # another device: its own group
    allrows = rows[1:] + [stem, gate, vec] + other
    groups = zc.pool_scalars(allrows)
    assert groups["stem.stem2a.mlp.act.bias@cpu"] == dict(
        n=1, passed=0, ratio=stem["ratio"], rms=stem["err"], rms_torch=stem["err_torch"])
    assert not stem["ok"] and not stem.get("pooled")
    assert groups["stages.*.blocks.*.mlp.act.bias@cpu"]["n"] == 16
    assert groups["stages.*.blocks.*.mlp.act.bias@sim:0"]["n"] == 15
    assert not gate["ok"] and gate["why"] == "float64"
    assert not vec["ok"] and not vec.get("pooled")
    res = zc.finish(dict(rows=allrows))
    assert res["status"] == "wrong"
    assert sorted(r["key"] for r in allrows if not r["ok"]) == sorted(
        [stem["key"], gate["key"], vec["key"]])


# the judge's float64 reference: exact_float64's batch_norm (batch_norm64, decision 0054),
# against an exact reference (Python's decimal at 50 digits) on an input whose channel means are
# 60-90x their spread; PyTorch's own float64 batch_norm is the comparison (skipped without it)
TORCH_PY = "/opt/torch2/bin/torch-python"
BN_SHAPE = (8, 3, 32, 32)  # 8192 values a channel
BN_MEANS = (60.0, -90.0, 75.0)  # x the spread (unit standard deviation)
BN_MOMENTUM, BN_EPS = 0.1, 1e-5
# the accurate one's bound: a few roundings per element plus pairwise sums of 8192 terms
# (log2 8192 = 13 roundings of sum|t|, sum|t| ~ n x the terms' scale): 16 eps64 of each
# tensor's scale. PyTorch's float64 batch_norm: ~200 here (y and the weight gradient), growing
# with the count (24 -> 166 eps64 from 256 to 16384 values at 60x; at 600x, 213 -> 3886)
BN_BOUND = 16.0


def bn_case():
    """x, weight, bias, upstream gradient g, running mean and variance (float64)"""
    x = zc.input_array(BN_SHAPE, 501) + np.array(BN_MEANS).reshape(1, 3, 1, 1)
    c = BN_SHAPE[1]
    return dict(x=x, w=1.0 + 0.1 * zc.hash_uniform(c, 502), b=0.05 * zc.hash_uniform(c, 503),
                g=zc.hash_uniform(x.size, 504).reshape(BN_SHAPE),
                rm=0.1 * zc.hash_uniform(c, 505), rv=1.25 + 0.25 * zc.hash_uniform(c, 506))


def exact_rows(x, g, w, b, eps):
    """normalisation of each row of x (2-d, float64) with the row's affine w[r], b[r], exact to
    ~1e-40 (decimal, 50 digits): y, dy/dx . g (x's gradient for the upstream g), sum(g * xhat)
    and sum(g) per row (the affine gradients), the mean and the biased and unbiased variances"""
    import decimal
    from decimal import Decimal as D
    out = dict(y=np.zeros(x.shape), dx=np.zeros(x.shape), dw=np.zeros(len(x)),
               db=np.zeros(len(x)), mean=np.zeros(len(x)), var=np.zeros(len(x)),
               var_u=np.zeros(len(x)))
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        for r in range(len(x)):
            xs, gs = [D(float(v)) for v in x[r]], [D(float(v)) for v in g[r]]
            n = D(len(xs))
            mean = sum(xs) / n
            d = [v - mean for v in xs]
            ss = sum(v * v for v in d)
            inv = 1 / (ss / n + D(eps)).sqrt()
            xh = [v * inv for v in d]
            wr, br = D(float(w[r])), D(float(b[r]))
            mg = sum(gs) / n
            mgx = sum(a * v for a, v in zip(gs, xh)) / n
            out["y"][r] = [float(v * wr + br) for v in xh]
            out["dx"][r] = [float(wr * inv * (a - mg - v * mgx)) for a, v in zip(gs, xh)]
            out["dw"][r], out["db"][r] = float(mgx * n), float(mg * n)
            out["mean"][r], out["var"][r] = float(mean), float(ss / n)
            out["var_u"][r] = float(ss / (n - 1))
    return out


def exact_batch_norm(case):
    """the exact training-mode BatchNorm of bn_case: outputs, gradients, running statistics"""
    c = BN_SHAPE[1]
    rows = lambda a: np.moveaxis(a, 1, 0).reshape(c, -1)
    back = lambda a: np.moveaxis(a.reshape((c, BN_SHAPE[0]) + BN_SHAPE[2:]), 0, 1)
    e = exact_rows(rows(case["x"]), rows(case["g"]), case["w"], case["b"], BN_EPS)
    import decimal
    from decimal import Decimal as D
    m = D(BN_MOMENTUM)

    def upd(old, new):  # (1 - momentum) * old + momentum * new, exactly (then rounded once)
        with decimal.localcontext() as ctx:
            ctx.prec = 50
            return np.array([float((1 - m) * D(float(o)) + m * D(float(v)))
                             for o, v in zip(old, new)])
    return dict(y=back(e["y"]), dx=back(e["dx"]), dw=e["dw"], db=e["db"],
                rm=upd(case["rm"], e["mean"]), rv=upd(case["rv"], e["var_u"]))


def eps64_errors(got, ref):
    """err(got, ref) in units of 2^-52, per tensor"""
    return {k: zc.rel_err(got[k], ref[k]) / zc.EPS64 for k in ref}


def batch_norm64_on(lib, case):
    """zc.batch_norm64 computed with `lib`'s ops (tessera here; the judge runs it with
    PyTorch's): y, the gradients of sum(y * g), the updated running statistics"""
    x = lib.tensor(case["x"], requires_grad=True)
    w = lib.tensor(case["w"], requires_grad=True)
    b = lib.tensor(case["b"], requires_grad=True)
    rm, rv = lib.tensor(case["rm"]), lib.tensor(case["rv"])
    y = zc.batch_norm64(lib, x, rm, rv, w, b, True, BN_MOMENTUM, BN_EPS)
    (y * lib.tensor(case["g"])).sum().backward()
    return dict(y=y.detach().numpy(), dx=x.grad.numpy(), dw=w.grad.numpy(),
                db=b.grad.numpy(), rm=rm.numpy(), rv=rv.numpy())


def test_batch_norm64_is_float64_accurate():
    """the judge's float64 BatchNorm formula (with Tessera's float64 ops, as CI has no PyTorch):
    forward, the three gradients and both running statistics within BN_BOUND eps64 of the
    exact values on an input whose means are 60-90x its spread"""
    case = bn_case()
    ref = exact_batch_norm(case)
    errs = eps64_errors(batch_norm64_on(tessera, case), ref)
    assert max(errs.values()) <= BN_BOUND, errs


def test_batch_norm64_refuses_one_value_per_channel():
    x = tessera.tensor(np.ones((1, 3, 1, 1)))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        zc.batch_norm64(tessera, x, None, None, training=True)


TORCH_BN_SCRIPT = r"""
import importlib.util, sys, numpy as np, torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("zc", sys.argv[1])
zc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zc)
c = dict(np.load(sys.argv[2]))
F = torch.nn.functional
stock = F.batch_norm

def bn():
    m = torch.nn.BatchNorm2d(3, eps=c["eps"].item(), momentum=c["momentum"].item()).double()
    with torch.no_grad():
        m.weight.copy_(torch.tensor(c["w"])); m.bias.copy_(torch.tensor(c["b"]))
        m.running_mean.copy_(torch.tensor(c["rm"])); m.running_var.copy_(torch.tensor(c["rv"]))
    x = torch.tensor(c["x"], requires_grad=True)
    y = m.train()(x)
    (y * torch.tensor(c["g"])).sum().backward()
    return dict(y=y.detach().numpy(), dx=x.grad.numpy(), dw=m.weight.grad.numpy(),
                db=m.bias.grad.numpy(), rm=m.running_mean.numpy(), rv=m.running_var.numpy())

out = {"stock_" + k: v for k, v in bn().items()}
with zc.exact_float64(torch):
    patched = F.batch_norm is not stock
    out.update({"exact_" + k: v for k, v in bn().items()})
out["patched"] = np.array(patched and F.batch_norm is stock)
np.savez(sys.argv[3], **out)
"""


@pytest.fixture(scope="module")
def torch_bn(tmp_path_factory):
    """PyTorch's float64 BatchNorm2d train step, stock and under zc.exact_float64, on bn_case
    (a subprocess of TORCH_PY; skipped without it)"""
    import subprocess
    tmp_path, case = tmp_path_factory.mktemp("bn"), bn_case()
    if not os.path.exists(TORCH_PY):
        pytest.skip("no PyTorch reference interpreter at %s (CI has none): the float64 BatchNorm "
                    "of the judge is checked against PyTorch's there only" % TORCH_PY)
    script, inp, res = tmp_path / "bn.py", tmp_path / "case.npz", tmp_path / "out.npz"
    script.write_text(TORCH_BN_SCRIPT)
    np.savez(inp, eps=BN_EPS, momentum=BN_MOMENTUM, **case)
    subprocess.run([TORCH_PY, str(script), os.path.join(ROOT, "tools", "model_zoo_common.py"),
                    str(inp), str(res)], check=True, timeout=120,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    return dict(np.load(res))


def test_exact_float64_batch_norm_beats_pytorch(torch_bn):
    """under exact_float64, nn.BatchNorm2d's float64 train step (forward, gradients, running
    statistics) is within BN_BOUND eps64 of exact; PyTorch's own is > 4 x BN_BOUND off on this
    input (the reason for the replacement: ghostnetv3_050's float64 gate); F.batch_norm is
    PyTorch's again after the block"""
    case, got = bn_case(), torch_bn
    ref = exact_batch_norm(case)
    assert got["patched"]
    exact = eps64_errors({k: got["exact_" + k] for k in ref}, ref)
    stock = eps64_errors({k: got["stock_" + k] for k in ref}, ref)
    assert max(exact.values()) <= BN_BOUND, exact
    assert min(stock["y"], stock["dw"]) > 4 * BN_BOUND, stock


def test_interleave_takes_the_families_in_turn():
    """model_zoo.py --interleave: one model of each family a round, in listed order, none lost
    or repeated (a partial run of the whole zoo then covers every family)"""
    spec = importlib.util.spec_from_file_location(
        "model_zoo", os.path.join(ROOT, "tools", "model_zoo.py"))
    mz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mz)
    names = [["a1", "a"], ["a2", "a"], ["a3", "a"], ["b1", "b"], ["c1", "c"], ["c2", "c"]]
    got = mz.interleave(names)
    assert [n for n, _ in got] == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert sorted(map(tuple, got)) == sorted(map(tuple, names))
    assert mz.interleave([]) == []


def test_retry_default_judges_again_at_the_default_size(monkeypatch, tmp_path):
    """--retry-default: the second run is at the default size (img None) with at least 10 GiB and
    900 s, and the record keeps the small run's verdict and says why it was rerun"""
    spec = importlib.util.spec_from_file_location(
        "model_zoo", os.path.join(ROOT, "tools", "model_zoo.py"))
    mz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mz)
    calls = []

    def fake_run(suite, name, kw, img, args):
        calls.append((img, args.mem_gib, args.timeout))
        return dict(name=name, status="pass", worst_ratio=1.5, worst_key="grad:input@cpu"), None

    monkeypatch.setattr(mz, "run_model", fake_run)
    args = mz.argparse.Namespace(mem_gib=6.0, timeout=300, keep=False, work=str(tmp_path))
    small = dict(img=64, status="wrong", worst_ratio=41.6, worst_key="grad:param:bn.weight@cpu")
    rec, _ = mz.retry_default("timm", "m", {}, 64, args, small, None)
    assert calls == [(None, 10.0, 900)]
    assert rec["status"] == "pass" and rec["small_size"]["worst_ratio"] == 41.6
    assert rec["small_size"]["status"] == "wrong" and "64x64" in rec["note"]
    assert "41.6" in rec["note"] and args.mem_gib == 6.0  # the caller's limits are untouched


def test_batch_norm_over_batch_is_found():
    """model_zoo_common.batch_norm_over_batch (the judge's batch 4 rule) on Tessera's own nn:
    a BatchNorm1d head over [B, C] is found; one over tokens ([B * N, C]) and a BatchNorm2d are
    not; the hooks are gone afterwards"""
    nn = tessera.nn

    class Head(nn.Module):
        def __init__(self, tokens):
            super().__init__()
            self.tokens, self.fc, self.bn = tokens, nn.Linear(4, 6), nn.BatchNorm1d(6)

        def forward(self, x):
            h = self.fc(x.reshape(x.shape[0], -1, 4))
            return self.bn(h.flatten(0, 1) if self.tokens else h.mean(1))

    x = np.ones((2, 3, 4), np.float32)
    head = Head(False)
    assert zc.batch_norm_over_batch(head, x, "", tessera)
    assert not head.bn._forward_hooks
    assert not zc.batch_norm_over_batch(Head(True), x, "", tessera)
    conv = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4))
    assert not zc.batch_norm_over_batch(conv, np.ones((2, 3, 4, 4), np.float32), "", tessera)
