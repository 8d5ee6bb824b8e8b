"""hv_harness.py — the Python double-backward tests' shared check (test_double_backward_fused.py,
_ops.py, _norm_pool.py; tests/support/hv_check.c is the C twin). A case is
`name: ([shape, ...], f)` with f(mod, *inputs) -> a scalar, run with mod = tessera or torch. With p
every input and v a direction, in float64: the gradients recorded under create_graph equal the
first-order ones (1e-12 relative), the Hessian-vector product by double backward equals the central
differences (grad f(p + e v) - grad f(p - e v)) / 2e of first-order gradients (1e-6 relative), and,
when PyTorch is importable, PyTorch's own gradients and H v on the same inputs (1e-9 relative)."""
import math
import random


def values(n, seed):
    """n fixed values in [-1, 1)"""
    rng = random.Random(seed)
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def head(mod, y):
    """sum(tanh(y + r / 2)) with r a fixed pattern of y's shape: nonlinear, no symmetry that would
    hide a wrong term"""
    r = mod.tensor(values(y.numel(), 99), dtype=mod.float64, device=y.device).reshape(y.shape)
    return mod.tanh(y + 0.5 * r).sum()


def flat(t):
    return t.detach().reshape(-1).tolist()


def _inputs(mod, shapes, point, device):
    return [mod.tensor(p, dtype=mod.float64, device=device).reshape(s).requires_grad_()
            for p, s in zip(point, shapes)]


def _grads(cases, mod, name, point, device, create=False):
    shapes, f = cases[name]
    ins = _inputs(mod, shapes, point, device)
    return ins, mod.autograd.grad(f(mod, *ins), ins, create_graph=create)


def _hv(cases, mod, name, point, direction, device):
    shapes, _ = cases[name]
    ins, gs = _grads(cases, mod, name, point, device, create=True)
    gv = sum((g * mod.tensor(v, dtype=mod.float64, device=device).reshape(s)).sum()
             for g, v, s in zip(gs, direction, shapes))
    hv = mod.autograd.grad(gv, ins, allow_unused=True)
    return [flat(g) for g in gs], [flat(h) if h is not None else [0.0] * math.prod(s)
                                   for h, s in zip(hv, shapes)]


def _setup(cases, name):
    shapes, _ = cases[name]
    point = [values(math.prod(s), 1 + k) for k, s in enumerate(shapes)]
    direction = [values(math.prod(s), 7 + k) for k, s in enumerate(shapes)]
    return point, direction


def check_differences(cases, mod, name, device):
    point, direction = _setup(cases, name)
    first = [flat(g) for g in _grads(cases, mod, name, point, device)[1]]
    recorded, got = _hv(cases, mod, name, point, direction, device)
    for r, f in zip(recorded, first):  # the create_graph forms give the kernels' values
        for a, b in zip(r, f):
            assert abs(a - b) <= 1e-12 * (1 + abs(b)), (name, a, b)
    e = 1e-5
    plus = [[p + e * v for p, v in zip(pk, vk)] for pk, vk in zip(point, direction)]
    minus = [[p - e * v for p, v in zip(pk, vk)] for pk, vk in zip(point, direction)]
    gp = [flat(g) for g in _grads(cases, mod, name, plus, device)[1]]
    gm = [flat(g) for g in _grads(cases, mod, name, minus, device)[1]]
    for k in range(len(point)):
        for i, h in enumerate(got[k]):
            want = (gp[k][i] - gm[k][i]) / (2 * e)
            assert abs(h - want) <= 1e-6 * (1 + abs(want)), (name, k, i, h, want)


def check_against(cases, mod, ref, name):
    """mod's gradients and H v against ref's (PyTorch) on the same inputs, on the cpu"""
    point, direction = _setup(cases, name)
    got_g, got = _hv(cases, mod, name, point, direction, "cpu")
    want_g, want = _hv(cases, ref, name, point, direction, "cpu")
    for a, b in zip(got_g + got, want_g + want):
        for x, y in zip(a, b):
            assert abs(x - y) <= 1e-9 * (1 + abs(y)), (name, x, y)
