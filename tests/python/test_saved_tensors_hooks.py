"""tessera.autograd.graph.saved_tensors_hooks and save_on_cpu (src/autograd/saved_hooks.c,
save_on_cpu.c) and tessera.sim's simulated link: hooks see every saved tensor, unpack's result
feeds backward (gradients exactly as the float64 formula, rounded the same way), exceptions in a
hook surface as errors, save_on_cpu training equals plain training bit for bit on sim:0 with and
without a link, and malformed link specs raise naming the argument."""
import math

import pytest

import tessera
from tessera import nn
from tessera.autograd.graph import save_on_cpu, save_on_cpu_stats, saved_tensors_hooks

DEVICES = ["cpu"] + (["sim:0"] if tessera.sim.device_count() > 0 else [])


@pytest.mark.parametrize("device", DEVICES)
def test_hooks_pack_unpack(device):
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return ("box", t.to("cpu") * 2)  # any object

    def unpack(obj):
        unpacked.append(obj[0])
        return (obj[1] / 2).to(device)

    vals = [0.1, -0.7, 1.3, 2.0]
    a = tessera.tensor(vals, device=device, requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = (a.sin() * a.exp()).sum()
    assert len(packed) >= 3 and not unpacked
    y.backward()
    assert len(unpacked) == len(packed)
    for g, v in zip(a.grad.tolist(), vals):  # (cos a + sin a) e^a in float32
        want = (math.cos(v) + math.sin(v)) * math.exp(v)
        assert abs(g - want) <= 4e-7 * (1 + abs(want))


def test_hook_errors():
    a = tessera.tensor([1.0, 2.0], requires_grad=True)

    def bad_pack(t):
        raise ValueError("no packing today")

    with pytest.raises(Exception, match="no packing today"):
        with saved_tensors_hooks(bad_pack, lambda x: x):
            a.sin().sum().backward()
    with saved_tensors_hooks(lambda t: t, lambda x: 3):
        y = a.sin().sum()
    with pytest.raises(Exception, match="unpack_hook must return a Tensor"):
        y.backward()
    with pytest.raises(TypeError):
        saved_tensors_hooks(1, 2).__enter__()


@pytest.mark.parametrize("device", DEVICES)
def test_unpack_of_another_dtype_or_shape(device):
    """The backward's kernels read a saved tensor as the forward saved it: an unpack of another
    dtype is cast back (a float64 round trip changes nothing; PyTorch's layer_norm refuses it, its
    elementwise ops promote), one of another shape is an error naming both shapes."""
    def grads(pack=None):
        tessera.manual_seed(1)
        x = tessera.randn(4, 16, device=device, requires_grad=True)
        w = tessera.randn(16, device=device, requires_grad=True)
        g = tessera.randn(4, 16, device=device)
        if pack is None:
            y = tessera.nn.functional.layer_norm(x, (16,), w)
        else:
            with saved_tensors_hooks(pack, lambda t: t):
                y = tessera.nn.functional.layer_norm(x, (16,), w)
        (y * g).sum().backward()
        return x.grad.tolist(), w.grad.tolist()

    assert grads(lambda t: t.to(tessera.float64)) == grads()
    with pytest.raises(Exception, match=r"unpack returned a tensor of shape \[64\]"):
        grads(lambda t: t.reshape(-1) if t.dim() == 2 else t)
    # the same rank and first dim, another last dim: the whole shape is compared
    with pytest.raises(Exception, match=r"unpack returned a tensor of shape \[4, 8\]"):
        grads(lambda t: t[:, :8] if t.dim() == 2 else t)


def train(device, ctx):
    tessera.manual_seed(2)
    net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Dropout(0.2), nn.Linear(32, 32),
                        nn.GELU(), nn.Linear(32, 4)).to(device)
    opt = tessera.optim.AdamW(net.parameters(), lr=1e-2)
    tessera.manual_seed(7)
    for _ in range(3):
        x = tessera.randn(16, 8, device=device)
        with ctx():
            loss = (net(x) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return [p.tolist() for p in net.parameters()]


@pytest.mark.skipif(tessera.sim.device_count() == 0, reason="needs TS_SIM_DEVICES")
def test_save_on_cpu_bitwise_on_sim():
    import contextlib
    plain = train("sim:0", contextlib.nullcontext)
    before = save_on_cpu_stats()
    assert train("sim:0", lambda: save_on_cpu()) == plain
    tessera.sim.set_link("16GB/s,1us")
    try:
        assert train("sim:0", lambda: save_on_cpu(pin_memory=True, prefetch=2)) == plain
        assert tessera.sim.link_stats(0)["async_copies"] > 0
    finally:
        tessera.sim.set_link(None)
    after = save_on_cpu_stats()
    assert after["offloaded"] > before["offloaded"]
    assert after["prefetched"] > before["prefetched"]


def test_sim_link_spec_errors():
    with pytest.raises(Exception, match="set_link='fast'.*bandwidth"):
        tessera.sim.set_link("fast")
    with pytest.raises(Exception, match="latency"):
        tessera.sim.set_link("1GB/s,3")
    tessera.sim.set_link(1e9, 2e-6)
    assert tessera.sim.link() == (1e9, 2e-6)
    tessera.sim.set_link(None)
    assert tessera.sim.link() is None
