"""The momentum of the running statistics as PyTorch's (issue 76): running = (1 - momentum) *
running + momentum * batch (variance unbiased), so momentum=0.0 leaves them unchanged (frozen
statistics when fine-tuning); momentum=None is the cumulative moving average for BatchNorm and
"no update" for InstanceNorm (PyTorch passes 0.0 there). F.batch_norm, F.instance_norm and the
nn.BatchNorm1d/2d/3d and nn.InstanceNorm1d/2d/3d modules against NumPy float64 references
(src/nn/norm.c, group_norm.c; python/tessera/nn/layers.py, pool_norm.py)."""
import numpy as np
import pytest

import tessera
import tessera.nn as nn
import tessera.nn.functional as F

RNG = np.random.default_rng(76)
RM0, RV0 = np.array([0.75, -1.5, 0.25]), np.array([2.0, 0.5, 1.25])
TOL = dict(rtol=1e-13, atol=1e-14)  # float64: a few roundings of O(1) values


def t64(a, device):
    return tessera.tensor(np.asarray(a).tolist(), dtype=tessera.float64, device=device)


def arr(t):
    return np.array(t.to("cpu").tolist(), dtype=np.float64)


def bn_ref(x, momentum, rm=RM0, rv=RV0):
    """batch_norm's update: statistics over every dim but 1"""
    axes = (0,) + tuple(range(2, x.ndim))
    return ((1 - momentum) * rm + momentum * x.mean(axes),
            (1 - momentum) * rv + momentum * x.var(axes, ddof=1))


def in_ref(x, momentum):
    """instance_norm's: each (n, c) plane's update, averaged over n"""
    flat = x.reshape(x.shape[0], x.shape[1], -1)
    return (((1 - momentum) * RM0 + momentum * flat.mean(-1)).mean(0),
            ((1 - momentum) * RV0 + momentum * flat.var(-1, ddof=1)).mean(0))


@pytest.mark.parametrize("momentum", [0.0, 0.1, 0.3, 1.0, -1.0])
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 3)])
def test_functional_batch_norm(device, momentum, shape):
    x = RNG.standard_normal(shape) * 2 + 1
    rm, rv = t64(RM0, device), t64(RV0, device)
    F.batch_norm(t64(x, device), rm, rv, training=True, momentum=momentum)
    em, ev = bn_ref(x, momentum)
    assert np.allclose(arr(rm), em, **TOL) and np.allclose(arr(rv), ev, **TOL)
    if momentum == 0.0:  # frozen: the very same values
        assert np.array_equal(arr(rm), RM0) and np.array_equal(arr(rv), RV0)


@pytest.mark.parametrize("momentum", [0.0, 0.25, -1.0])
def test_functional_instance_norm(device, momentum):
    x = RNG.standard_normal((3, 3, 6))
    rm, rv = t64(RM0, device), t64(RV0, device)
    F.instance_norm(t64(x, device), rm, rv, use_input_stats=True, momentum=momentum)
    em, ev = in_ref(x, momentum)
    assert np.allclose(arr(rm), em, **TOL) and np.allclose(arr(rv), ev, **TOL)
    if momentum == 0.0:
        assert np.array_equal(arr(rm), RM0) and np.array_equal(arr(rv), RV0)


def _seed(m, device):
    m = m.to(device).double()
    m.running_mean.copy_(t64(RM0, device))
    m.running_var.copy_(t64(RV0, device))
    return m


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (5, 3)), (nn.BatchNorm1d, (5, 3, 4)),
                                       (nn.BatchNorm2d, (2, 3, 3, 4)),
                                       (nn.BatchNorm3d, (2, 3, 2, 2, 3))])
@pytest.mark.parametrize("momentum", [0.0, 0.1, 0.5])
def test_batch_norm_modules(device, cls, shape, momentum):
    m = _seed(cls(3, momentum=momentum), device)
    m.train()
    x = RNG.standard_normal(shape) + 0.5
    m(t64(x, device))
    em, ev = bn_ref(x, momentum)
    assert np.allclose(arr(m.running_mean), em, **TOL)
    assert np.allclose(arr(m.running_var), ev, **TOL)
    assert int(m.num_batches_tracked.item()) == 1
    assert f"momentum={momentum}" in repr(m)


def test_batch_norm_cumulative_average(device):
    """momentum=None: the running statistics are the plain average of the batches' (the first
    batch's factor 1/1 replaces the initial values)"""
    m = _seed(nn.BatchNorm2d(3, momentum=None), device)
    xs = [RNG.standard_normal((2, 3, 2, 3)) * (k + 1) for k in range(3)]
    for x in xs:
        m(t64(x, device))
    mean = np.mean([x.mean((0, 2, 3)) for x in xs], axis=0)
    var = np.mean([x.var((0, 2, 3), ddof=1) for x in xs], axis=0)
    assert np.allclose(arr(m.running_mean), mean, **TOL)
    assert np.allclose(arr(m.running_var), var, **TOL)


@pytest.mark.parametrize("momentum", [0.0, None, 0.2])
@pytest.mark.parametrize("cls,shape", [(nn.InstanceNorm1d, (2, 3, 5)),
                                       (nn.InstanceNorm2d, (2, 3, 2, 3)),
                                       (nn.InstanceNorm3d, (2, 3, 2, 2, 2))])
def test_instance_norm_modules(device, cls, shape, momentum):
    m = _seed(cls(3, momentum=momentum, track_running_stats=True), device)
    m.train()
    x = RNG.standard_normal(shape) - 0.25
    m(t64(x, device))
    em, ev = in_ref(x, 0.0 if momentum is None else momentum)  # None: PyTorch passes 0.0
    assert np.allclose(arr(m.running_mean), em, **TOL)
    assert np.allclose(arr(m.running_var), ev, **TOL)
