"""create_graph through tensors saved under tessera.autograd.graph.saved_tensors_hooks and save_on_cpu
(src/autograd/checkpoint.c's placeholders, saved_hooks.c): as PyTorch's SavedVariable, the backward
computes with what unpack_hook returns, and that tensor carries the saved tensor's history, so the
gradient is differentiable again through the original graph whatever the hooks did with it.

The expected values are PyTorch 2.15's (/opt/torch2/bin/torch-python) for the same programs, in
float64:
    x = [0.5, -1, 2], w = [1.5, 0.25, -0.75] (requiring grad), v = [1, 2, 3]
    with hooks: y = sin(x * w); z = (y * y).sum()
    g = grad(z, x, create_graph=True); hv = grad((g * v).sum(), [x, w])
Hooks that give the values back (identity, detach, clone, an unpack that sets requires_grad,
save_on_cpu) all give the plain program's numbers; an unpack that doubles the values gives others.
"""
import pytest

import tessera
from tessera.autograd.graph import save_on_cpu, saved_tensors_hooks

DEVICES = ["cpu"] + (["sim:0"] if tessera.sim.device_count() > 0 else [])

G = [1.4962424799060816, -0.11985638465105075, 0.1058400060449004]
HV_X = [0.3183174075046633, 0.21939564047259316, -3.341224676026503]
HV_W = [1.1036007891056088, -1.8364336390987788, 8.486572445224407]
# unpack = lambda t: t * 2
G2 = [0.5786066211875224, -0.43423480076881127, -5.925075312807454]
HV2_X = [-24.387457318142083, 0.5329276000972459, 9.430453920060453]
HV2_W = [-7.936283565651521, -3.868649603464229, -13.2977264945463]

HOOKS = {
    "identity": (lambda t: t, lambda t: t, (G, HV_X, HV_W)),
    "detach": (lambda t: t.detach(), lambda t: t, (G, HV_X, HV_W)),
    "clone": (lambda t: t.clone(), lambda t: t.clone(), (G, HV_X, HV_W)),
    "requires_grad": (lambda t: t.detach().clone(), lambda t: t.requires_grad_(), (G, HV_X, HV_W)),
    "doubled": (lambda t: t, lambda t: t * 2, (G2, HV2_X, HV2_W)),
}


def close(got, want, rel=1e-12):
    got = got.tolist()
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert abs(a - b) <= rel * (1 + abs(b)), (got, want)


def inputs(device):
    x = tessera.tensor([0.5, -1.0, 2.0], dtype=tessera.float64, device=device, requires_grad=True)
    w = tessera.tensor([1.5, 0.25, -0.75], dtype=tessera.float64, device=device,
                       requires_grad=True)
    v = tessera.tensor([1.0, 2.0, 3.0], dtype=tessera.float64, device=device)
    return x, w, v


def hvp(ctx, device):
    x, w, v = inputs(device)
    with ctx:
        y = tessera.sin(x * w)
        z = (y * y).sum()
    g, = tessera.autograd.grad(z, x, create_graph=True)
    assert g.grad_fn is not None
    hx, hw = tessera.autograd.grad((g * v).sum(), [x, w])
    return g, hx, hw


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", sorted(HOOKS))
def test_hooks_hessian_vector(device, kind):
    pack, unpack, want = HOOKS[kind]
    for got, w in zip(hvp(saved_tensors_hooks(pack, unpack), device), want):
        close(got, w)


@pytest.mark.skipif("sim:0" not in DEVICES, reason="needs a sim device")
def test_save_on_cpu_hessian_vector():
    for got, w in zip(hvp(save_on_cpu(), "sim:0"), (G, HV_X, HV_W)):
        close(got, w)


@pytest.mark.parametrize("device", DEVICES)
def test_saved_output_doubled(device):
    # exp saves its output: PyTorch gives g = 2 e^x and d(sum g)/dx = 2 e^x (the doubled output
    # with exp's history, whose backward reads the doubled output again)
    want = [3.2974425414002564, 0.7357588823428847, 14.7781121978613]
    x, _, _ = inputs(device)
    with saved_tensors_hooks(lambda t: t, lambda t: t * 2):
        e = tessera.exp(x).sum()
    g, = tessera.autograd.grad(e, x, create_graph=True)
    close(g, want)
    gg, = tessera.autograd.grad(g.sum(), x)
    close(gg, want)


@pytest.mark.parametrize("device", DEVICES)
def test_leaf_grad_accumulates(device):
    # z = sum(x^3) under hooks: backward(create_graph=True) then backward of sum(x.grad) adds
    # d/dx sum(3 x^2) = 6 x to x.grad: 3 x^2 + 6 x
    x, _, _ = inputs(device)
    with saved_tensors_hooks(lambda t: t.clone(), lambda t: t.clone()):
        z = (x * x * x).sum()
    z.backward(create_graph=True)
    close(x.grad, [0.75, 3.0, 12.0])
    x.grad.sum().backward()
    close(x.grad, [0.75 + 3.0, 3.0 - 6.0, 12.0 + 12.0])
