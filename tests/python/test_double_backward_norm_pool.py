"""Second derivatives (torch.autograd.grad with create_graph=True) through batch norm, the average
poolings, the transposed convolutions and the kinked activations (issue 53): Hessian-vector
products against central differences of the first derivative (float64) everywhere, and against
PyTorch's own double backward on the same inputs when PyTorch is importable (it is not under
ctest's python3; /opt/torch2/bin/torch-python has it)."""
import importlib.util
import math
import random

import pytest

import tessera

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch as real_torch
else:
    real_torch = None


def _values(n, seed):
    rng = random.Random(seed)
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def _numel(shape):
    return math.prod(shape)


def _head(mod, y):
    r = mod.tensor(_values(y.numel(), 99), dtype=mod.float64, device=y.device).reshape(y.shape)
    return mod.tanh(y + 0.5 * r).sum()


def _running(mod, c, var, seed, device):
    v = _values(c, seed)
    if var:
        v = [0.5 + abs(a) for a in v]
    return mod.tensor(v, dtype=mod.float64, device=device)


def _bn(mod, x, w, b, training, scale=1.7):
    c = x.shape[1]
    return _head(mod, mod.nn.functional.batch_norm(
        scale * x if scale != 1 else x, _running(mod, c, False, 11, x.device), _running(mod, c, True, 12, x.device),
        w, b, training=training, momentum=0.1, eps=1e-5))


def _sq(x):
    return x * x


CASES = {
    "bn_train": ([(4, 3, 2, 2), (3,), (3,)], lambda m, x, w, b: _bn(m, x, w, b, True)),
    "bn_train_plain": ([(5, 2, 3)], lambda m, x: _head(m, m.nn.functional.batch_norm(
        x, None, None, training=True))),
    "bn_train_strided": ([(3, 4, 2), (6,), (3,)],
                         lambda m, x, w, b: _bn(m, x.transpose(0, 1), w[::2], b, True, 1)),
    "bn_eval": ([(3, 3, 2, 2), (3,), (3,)], lambda m, x, w, b: _bn(m, x, w, b, False)),
    "avg_pool2d": ([(2, 2, 5, 5)], lambda m, x: _head(m, m.nn.functional.avg_pool2d(
        _sq(x), 3, stride=2, padding=1))),
    "avg_pool2d_exclude_ceil": ([(2, 2, 5, 6)], lambda m, x: _head(m, m.nn.functional.avg_pool2d(
        _sq(x), (2, 3), stride=2, padding=1, ceil_mode=True, count_include_pad=False))),
    "avg_pool2d_divisor": ([(2, 4, 5)], lambda m, x: _head(m, m.nn.functional.avg_pool2d(
        _sq(x), (2, 3), stride=(1, 2), divisor_override=4))),
    "avg_pool1d": ([(2, 3, 8)], lambda m, x: _head(m, m.nn.functional.avg_pool1d(
        _sq(x), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False))),
    "avg_pool3d": ([(1, 2, 4, 3, 5)], lambda m, x: _head(m, m.nn.functional.avg_pool3d(
        _sq(x), (2, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1)))),
    "adaptive_avg_pool2d": ([(2, 2, 5, 7)], lambda m, x: _head(
        m, m.nn.functional.adaptive_avg_pool2d(_sq(x), (3, 4)))),
    "adaptive_avg_pool3d": ([(1, 2, 3, 4, 5)], lambda m, x: _head(
        m, m.nn.functional.adaptive_avg_pool3d(_sq(x), (2, 3, 2)))),
    "conv_transpose2d": ([(2, 4, 3, 3), (4, 3, 3, 3), (3,)],
                         lambda m, x, w, b: _head(m, m.nn.functional.conv_transpose2d(
                             x, w, b, stride=2, padding=1, output_padding=1))),
    "conv_transpose2d_groups": ([(2, 4, 3, 3), (4, 1, 2, 2)],
                                lambda m, x, w: _head(m, m.nn.functional.conv_transpose2d(
                                    x, w, None, stride=(1, 2), padding=(1, 0),
                                    output_padding=(1, 1), groups=2, dilation=(2, 1)))),
    "conv_transpose1d": ([(2, 2, 5), (2, 3, 3), (3,)],
                         lambda m, x, w, b: _head(m, m.nn.functional.conv_transpose1d(
                             x, w, b, stride=2, padding=1, output_padding=1, dilation=2))),
    "conv_transpose3d": ([(1, 2, 3, 2, 3), (2, 2, 2, 2, 2), (2,)],
                         lambda m, x, w, b: _head(m, m.nn.functional.conv_transpose3d(
                             x, w, b, stride=(2, 1, 2), padding=(1, 0, 1),
                             output_padding=(1, 0, 0)))),
    "sdpa": ([(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)],
             lambda m, q, k, v: _head(m, m.nn.functional.scaled_dot_product_attention(q, k, v))),
    "sdpa_causal_strided": ([(2, 2, 4, 3), (2, 2, 4, 5), (2, 2, 5, 3)],
                            lambda m, q, k, v: _head(m, m.nn.functional.scaled_dot_product_attention(
                                q.transpose(2, 3), k.transpose(2, 3), v, is_causal=True,
                                scale=0.7))),
    "sdpa_bool_mask": ([(2, 3, 4), (2, 5, 4), (2, 5, 3)],
                       lambda m, q, k, v: _head(m, m.nn.functional.scaled_dot_product_attention(
                           q, k, v, attn_mask=m.tensor([[1, 0, 1, 1, 0], [0, 1, 0, 0, 0],
                                                        [1, 1, 0, 1, 1]], dtype=m.bool,
                                                       device=q.device)))),
    "hardtanh": ([(24,)], lambda m, x: _head(m, m.nn.functional.hardtanh(1.5 * x, -0.5, 0.7))),
    "relu6": ([(24,)], lambda m, x: _head(m, m.nn.functional.relu6(7.5 * x))),
    "threshold": ([(24,)], lambda m, x: _head(m, m.nn.functional.threshold(1.5 * x, 0.3, -0.8))),
    "softshrink": ([(24,)], lambda m, x: _head(m, m.nn.functional.softshrink(1.5 * x, 0.4))),
}


def _inputs(mod, shapes, point, device):
    return [mod.tensor(p, dtype=mod.float64, device=device).reshape(s).requires_grad_()
            for p, s in zip(point, shapes)]


def _flat(t):
    return t.detach().reshape(-1).tolist()


def _grads(mod, name, point, device, create=False):
    shapes, f = CASES[name]
    ins = _inputs(mod, shapes, point, device)
    gs = mod.autograd.grad(f(mod, *ins), ins, create_graph=create)
    return ins, gs


def _hv(mod, name, point, direction, device):
    shapes, _ = CASES[name]
    ins, gs = _grads(mod, name, point, device, create=True)
    gv = sum((g * mod.tensor(v, dtype=mod.float64, device=device).reshape(s)).sum()
             for g, v, s in zip(gs, direction, shapes))
    hv = mod.autograd.grad(gv, ins, allow_unused=True)
    return [_flat(g) for g in gs], [_flat(h) if h is not None else [0.0] * _numel(s)
                                    for h, s in zip(hv, shapes)]


def _setup(name):
    shapes, _ = CASES[name]
    point = [_values(_numel(s), 1 + k) for k, s in enumerate(shapes)]
    direction = [_values(_numel(s), 7 + k) for k, s in enumerate(shapes)]
    return point, direction


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_differences(name, device):
    point, direction = _setup(name)
    first = [_flat(g) for g in _grads(tessera, name, point, device)[1]]
    recorded, got = _hv(tessera, name, point, direction, device)
    for r, f in zip(recorded, first):  # the composite forms give the kernels' values
        for a, b in zip(r, f):
            assert abs(a - b) <= 1e-12 * (1 + abs(b)), (name, a, b)
    e = 1e-5
    plus = [[p + e * v for p, v in zip(pk, vk)] for pk, vk in zip(point, direction)]
    minus = [[p - e * v for p, v in zip(pk, vk)] for pk, vk in zip(point, direction)]
    gp = [_flat(g) for g in _grads(tessera, name, plus, device)[1]]
    gm = [_flat(g) for g in _grads(tessera, name, minus, device)[1]]
    for k in range(len(point)):
        for i, h in enumerate(got[k]):
            want = (gp[k][i] - gm[k][i]) / (2 * e)
            assert abs(h - want) <= 1e-6 * (1 + abs(want)), (name, k, i, h, want)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not importable")
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_pytorch(name):
    point, direction = _setup(name)
    got_g, got = _hv(tessera, name, point, direction, "cpu")
    want_g, want = _hv(real_torch, name, point, direction, "cpu")
    for a, b in zip(got_g + got, want_g + want):
        for x, y in zip(a, b):
            assert abs(x - y) <= 1e-9 * (1 + abs(y)), (name, x, y)


LINKS = {  # whether the gradient depends on x (PyTorch's double-backward formulas)
    "hardtanh": (lambda m, x: m.nn.functional.hardtanh(x, -0.5, 0.5), True),
    "relu6": (lambda m, x: m.nn.functional.relu6(4 * x), True),
    "threshold": (lambda m, x: m.nn.functional.threshold(x, 0.1, 2.0), True),
    "hardshrink": (lambda m, x: m.nn.functional.hardshrink(x, 0.5), True),
    "softshrink": (lambda m, x: m.nn.functional.softshrink(x, 0.5), True),
    "avg_pool1d": (lambda m, x: m.nn.functional.avg_pool1d(x.reshape(1, 2, 4), 2), True),
    "clamp": (lambda m, x: x.clamp(-0.5, 0.5), False),
    "clamp_min": (lambda m, x: x.clamp_min(0.1), False),
    "clamp_max": (lambda m, x: x.clamp_max(0.5), False),
}


def _link(mod, name):
    f, _ = LINKS[name]
    x = mod.tensor([-4.0, -1.0, 0.2, 0.7, 2.0, math.inf, -math.inf, 0.05], dtype=mod.float64,
                   requires_grad=True)
    g, = mod.autograd.grad(f(mod, x).sum(), x, create_graph=True)
    if not g.requires_grad:
        return _flat(g), None
    h, = mod.autograd.grad(g.sum(), x)
    return _flat(g), _flat(h)


@pytest.mark.parametrize("name", sorted(LINKS))
def test_zero_derivative_links(name):
    g, h = _link(tessera, name)
    _, linked = LINKS[name]
    assert (h is not None) == linked
    if linked:
        assert h == [0.0] * 8 and not any(math.copysign(1, a) < 0 for a in h)
    if HAVE_TORCH:
        tg, th = _link(real_torch, name)
        assert g == tg and h == th
