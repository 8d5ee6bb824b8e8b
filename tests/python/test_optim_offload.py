"""tessera.optim.offload (ZeRO-Offload, src/optim/offload.c) on sim:0: the steps follow a float64
reference, equal the device optimizer's bit for bit, keep float32 masters for bfloat16 parameters,
and the state dict loads across offload."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
from tessera.optim import lr_scheduler  # noqa: E402

P0 = np.array([1.0, -2.0, 0.5])
G = np.array([0.5, 0.25, -1.0])  # exact in bfloat16: loss = sum(p * G)


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64)


def ref_adamw(lr, wd, steps, b1=0.9, b2=0.999, eps=1e-8):
    p, m, v, out = P0.copy(), 0.0, 0.0, []
    for t in range(1, steps + 1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * G
        v = b2 * v + (1 - b2) * G * G
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        out.append(p)
    return out


def run(device, dtype, steps, off, lr=0.1, wd=0.01):
    p = nn.Parameter(tessera.tensor(P0.tolist(), device=device, dtype=dtype))
    opt = tessera.optim.AdamW([p], lr=lr, weight_decay=wd)
    if off:
        assert tessera.optim.offload(opt) is opt
    out = []
    for _ in range(steps):
        opt.zero_grad()
        (p * tessera.tensor(G.tolist(), device=device, dtype=dtype)).sum().backward()
        opt.step()
        out.append(N(p))
    return out, opt, p


def test_offload_adamw_follows_float64(sim_device):
    got, opt, _ = run(sim_device, tessera.float32, 4, True)
    assert tessera.optim.is_offloaded(opt)
    for g, r in zip(got, ref_adamw(0.1, 0.01, 4)):
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-6)
    plain, _, _ = run(sim_device, tessera.float32, 4, False)
    for g, r in zip(got, plain):
        assert np.array_equal(g, r)


def test_offload_bfloat16_keeps_float32_masters(sim_device):
    """each step's weights are the float32 master rounded once to bfloat16 (half an ulp, 2^-8
    relative), where bfloat16 state would round at every step"""
    got, _, p = run(sim_device, tessera.bfloat16, 4, True)
    assert p.dtype == tessera.bfloat16
    for g, r in zip(got, ref_adamw(0.1, 0.01, 4)):
        assert np.all(np.abs(g - r) <= 2.0 ** -8 * np.abs(r) + 1e-6), (g, r)


def test_offload_state_dict_and_scheduler(sim_device):
    p = nn.Parameter(tessera.tensor(P0.tolist(), device=sim_device))
    q = nn.Parameter(tessera.tensor(P0.tolist(), device=sim_device))
    a = tessera.optim.offload(tessera.optim.SGD([p], lr=0.1, momentum=0.9))
    b = tessera.optim.SGD([q], lr=0.1, momentum=0.9)
    sa, sb = lr_scheduler.StepLR(a, 1, 0.5), lr_scheduler.StepLR(b, 1, 0.5)
    for _ in range(3):
        for o, t, s in ((a, p, sa), (b, q, sb)):
            o.zero_grad()
            (t * tessera.tensor(G.tolist(), device=sim_device)).sum().backward()
            o.step()
            s.step()
    assert np.array_equal(N(p), N(q))
    buf = a.state_dict()["state"][0]["momentum_buffer"]
    assert str(buf.device) == "cpu" and buf.dtype == tessera.float32
    c = tessera.optim.SGD([nn.Parameter(tessera.tensor(N(p).tolist(), device=sim_device))],
                          lr=0.1, momentum=0.9)
    c.load_state_dict(a.state_dict())  # an offloaded checkpoint loads without offload
    np.testing.assert_array_equal(N(c.state_dict()["state"][0]["momentum_buffer"]), N(buf))


def test_offload_errors():
    p = nn.Parameter(tessera.tensor(P0.tolist()))
    with pytest.raises(Exception, match="already on the cpu"):
        tessera.optim.offload(tessera.optim.SGD([p], lr=0.1))
    with pytest.raises(TypeError, match="tessera.optim's optimizers"):
        tessera.optim.offload(object())
