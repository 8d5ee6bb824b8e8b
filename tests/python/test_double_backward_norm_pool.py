"""Second derivatives (torch.autograd.grad with create_graph=True) through batch norm, the average
poolings, the transposed convolutions and the kinked activations (issue 53): Hessian-vector
products against central differences of the first derivative (float64) everywhere, and against
PyTorch's own double backward on the same inputs when PyTorch is importable (it is not under
ctest's python3; /opt/torch2/bin/torch-python has it)."""
import importlib.util
import math

import pytest

import hv_harness
import tessera
from hv_harness import flat, head, values

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch as real_torch
else:
    real_torch = None


def _running(mod, c, var, seed, device):
    v = values(c, seed)
    if var:
        v = [0.5 + abs(a) for a in v]
    return mod.tensor(v, dtype=mod.float64, device=device)


def _bn(mod, x, w, b, training, scale=1.7):
    c = x.shape[1]
    return head(mod, mod.nn.functional.batch_norm(
        scale * x if scale != 1 else x, _running(mod, c, False, 11, x.device), _running(mod, c, True, 12, x.device),
        w, b, training=training, momentum=0.1, eps=1e-5))


def _sq(x):
    return x * x


CASES = {
    "bn_train": ([(4, 3, 2, 2), (3,), (3,)], lambda m, x, w, b: _bn(m, x, w, b, True)),
    "bn_train_plain": ([(5, 2, 3)], lambda m, x: head(m, m.nn.functional.batch_norm(
        x, None, None, training=True))),
    "bn_train_strided": ([(3, 4, 2), (6,), (3,)],
                         lambda m, x, w, b: _bn(m, x.transpose(0, 1), w[::2], b, True, 1)),
    "bn_eval": ([(3, 3, 2, 2), (3,), (3,)], lambda m, x, w, b: _bn(m, x, w, b, False)),
    "avg_pool2d": ([(2, 2, 5, 5)], lambda m, x: head(m, m.nn.functional.avg_pool2d(
        _sq(x), 3, stride=2, padding=1))),
    "avg_pool2d_exclude_ceil": ([(2, 2, 5, 6)], lambda m, x: head(m, m.nn.functional.avg_pool2d(
        _sq(x), (2, 3), stride=2, padding=1, ceil_mode=True, count_include_pad=False))),
    "avg_pool2d_divisor": ([(2, 4, 5)], lambda m, x: head(m, m.nn.functional.avg_pool2d(
        _sq(x), (2, 3), stride=(1, 2), divisor_override=4))),
    "avg_pool1d": ([(2, 3, 8)], lambda m, x: head(m, m.nn.functional.avg_pool1d(
        _sq(x), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False))),
    "avg_pool3d": ([(1, 2, 4, 3, 5)], lambda m, x: head(m, m.nn.functional.avg_pool3d(
        _sq(x), (2, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1)))),
    "adaptive_avg_pool2d": ([(2, 2, 5, 7)], lambda m, x: head(
        m, m.nn.functional.adaptive_avg_pool2d(_sq(x), (3, 4)))),
    "adaptive_avg_pool3d": ([(1, 2, 3, 4, 5)], lambda m, x: head(
        m, m.nn.functional.adaptive_avg_pool3d(_sq(x), (2, 3, 2)))),
    "conv_transpose2d": ([(2, 4, 3, 3), (4, 3, 3, 3), (3,)],
                         lambda m, x, w, b: head(m, m.nn.functional.conv_transpose2d(
                             x, w, b, stride=2, padding=1, output_padding=1))),
    "conv_transpose2d_groups": ([(2, 4, 3, 3), (4, 1, 2, 2)],
                                lambda m, x, w: head(m, m.nn.functional.conv_transpose2d(
                                    x, w, None, stride=(1, 2), padding=(1, 0),
                                    output_padding=(1, 1), groups=2, dilation=(2, 1)))),
    "conv_transpose1d": ([(2, 2, 5), (2, 3, 3), (3,)],
                         lambda m, x, w, b: head(m, m.nn.functional.conv_transpose1d(
                             x, w, b, stride=2, padding=1, output_padding=1, dilation=2))),
    "conv_transpose3d": ([(1, 2, 3, 2, 3), (2, 2, 2, 2, 2), (2,)],
                         lambda m, x, w, b: head(m, m.nn.functional.conv_transpose3d(
                             x, w, b, stride=(2, 1, 2), padding=(1, 0, 1),
                             output_padding=(1, 0, 0)))),
    "sdpa": ([(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)],
             lambda m, q, k, v: head(m, m.nn.functional.scaled_dot_product_attention(q, k, v))),
    "sdpa_causal_strided": ([(2, 2, 4, 3), (2, 2, 4, 5), (2, 2, 5, 3)],
                            lambda m, q, k, v: head(m, m.nn.functional.scaled_dot_product_attention(
                                q.transpose(2, 3), k.transpose(2, 3), v, is_causal=True,
                                scale=0.7))),
    "sdpa_bool_mask": ([(2, 3, 4), (2, 5, 4), (2, 5, 3)],
                       lambda m, q, k, v: head(m, m.nn.functional.scaled_dot_product_attention(
                           q, k, v, attn_mask=m.tensor([[1, 0, 1, 1, 0], [0, 1, 0, 0, 0],
                                                        [1, 1, 0, 1, 1]], dtype=m.bool,
                                                       device=q.device)))),
    "hardtanh": ([(24,)], lambda m, x: head(m, m.nn.functional.hardtanh(1.5 * x, -0.5, 0.7))),
    "relu6": ([(24,)], lambda m, x: head(m, m.nn.functional.relu6(7.5 * x))),
    "threshold": ([(24,)], lambda m, x: head(m, m.nn.functional.threshold(1.5 * x, 0.3, -0.8))),
    "softshrink": ([(24,)], lambda m, x: head(m, m.nn.functional.softshrink(1.5 * x, 0.4))),
}


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_differences(name, device):
    hv_harness.check_differences(CASES, tessera, name, device)


@pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not importable")
@pytest.mark.parametrize("name", sorted(CASES))
def test_hessian_vector_against_pytorch(name):
    hv_harness.check_against(CASES, tessera, real_torch, name)


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
        return flat(g), None
    h, = mod.autograd.grad(g.sum(), x)
    return flat(g), flat(h)


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
