"""test_amp.py — tessera.amp: autocast's dtypes inside and outside a region (context manager and
decorator, nesting, enabled=False, a refused dtype leaving no region open) and GradScaler's scale,
skipped step on an Inf gradient, back-off, growth and state dict; on cpu and sim:0."""
import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.nn.functional as F  # noqa: E402
from tessera import amp  # noqa: E402


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def kind(device):
    return device.split(":")[0]


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64)


def test_autocast_dtypes(device):
    a = tessera.randn(4, 4, device=device)
    lin = nn.Linear(4, 2).to(device)
    assert not amp.is_autocast_enabled(kind(device))
    with amp.autocast(kind(device), dtype=tessera.bfloat16):
        assert amp.is_autocast_enabled(kind(device))
        assert amp.get_autocast_dtype(kind(device)) == tessera.bfloat16
        assert (a @ a).dtype == tessera.bfloat16
        y = lin(a)
        assert y.dtype == tessera.bfloat16
        # float32 on CUDA's lists (sim); the CPU's leave softmax alone, as PyTorch's (decision 0033)
        want = tessera.bfloat16 if kind(device) == "cpu" else tessera.float32
        assert F.softmax(y, dim=1).dtype == want
        assert F.mse_loss(y, y.detach()).dtype == tessera.float32  # float32 on both
        with amp.autocast(kind(device), enabled=False):
            assert (a @ a).dtype == tessera.float32
        assert (a @ a).dtype == tessera.bfloat16
    assert (a @ a).dtype == tessera.float32
    assert not amp.is_autocast_enabled(kind(device))
    # the lower precision result is close to the float32 one (bf16 has 8 bits of mantissa)
    with amp.autocast(kind(device), dtype=tessera.float16):
        assert amp.get_autocast_dtype(kind(device)) == tessera.float16
        h = a @ a
        assert h.dtype == tessera.float16
        h = h.float()
    np.testing.assert_allclose(N(h), N(a @ a), rtol=2e-2, atol=2e-2)


def test_autocast_decorator_and_errors():
    @amp.autocast("cpu")
    def f(x):
        return x @ x

    assert f(tessera.ones(2, 2)).dtype == tessera.bfloat16  # cpu's default lower dtype
    with pytest.raises(tessera.TesseraError):
        with amp.autocast("cpu", dtype=tessera.int64):
            pass
    assert not amp.is_autocast_enabled("cpu")  # the refused region was closed again
    with pytest.raises(ValueError, match="device_type"):
        amp.autocast("tpu").__enter__()


def make_step(device, grad):
    p = nn.Parameter(tessera.ones(2, device=device))
    opt = tessera.optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler(init_scale=4.0, growth_interval=2)
    loss = (p * tessera.tensor(grad, device=device)).sum()
    return p, opt, scaler, loss


def test_grad_scaler_steps_with_unscaled_grads(device):
    p, opt, scaler, loss = make_step(device, [1.0, 2.0])
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(4.0 * loss.item())
    scaled.backward()
    np.testing.assert_allclose(N(p.grad), [4.0, 8.0])
    scaler.step(opt)
    np.testing.assert_allclose(N(p), [1 - 0.1, 1 - 0.2], atol=1e-7)
    scaler.update()
    assert scaler.get_scale() == 4.0
    assert scaler.state_dict()["_growth_tracker"] == 1


def test_grad_scaler_skips_inf_step(device):
    p, opt, scaler, loss = make_step(device, [float("inf"), 1.0])
    scaler.scale(loss).backward()
    scaler.step(opt)
    np.testing.assert_array_equal(N(p), [1.0, 1.0])  # skipped
    scaler.update()
    assert scaler.get_scale() == 2.0  # backoff_factor 0.5


def test_grad_scaler_growth_and_state(device):
    p, opt, scaler, _ = make_step(device, [1.0, 1.0])
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(p.sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0  # grew after growth_interval clean steps
    sd = scaler.state_dict()
    assert sd == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 2, "_growth_tracker": 0}
    other = amp.GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 8.0
    scaler.update(1024.0)
    assert scaler.get_scale() == 1024.0


def test_grad_scaler_unscale_then_clip(device):
    p, opt, scaler, loss = make_step(device, [3.0, 4.0])
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(N(p.grad), [3.0, 4.0])
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == pytest.approx(5.0)
    with pytest.raises(tessera.TesseraError):
        scaler.unscale_(opt)  # twice before update
    scaler.step(opt)
    np.testing.assert_allclose(N(p), [1 - 0.1 * 0.6, 1 - 0.1 * 0.8], atol=1e-6)
    with pytest.raises(TypeError, match="optimizer"):
        scaler._c.step(object())


def test_bindings_refuse_and_return_none():
    """the C layer under tessera.amp: clearing the cast cache returns None, and the scaler's
    load_state_dict refuses what is not a dict of str to tensor (TypeError, nothing loaded)"""
    assert tessera._C._amp_clear_cache() is None
    assert amp.clear_autocast_cache() is None
    s = amp.GradScaler("cpu", init_scale=8.0)
    for bad in ([1.0], "scale", {1: tessera.ones(1)}):
        with pytest.raises(TypeError, match="load_state_dict"):
            s._c.load_state_dict(bad)
    assert s.get_scale() == 8.0
