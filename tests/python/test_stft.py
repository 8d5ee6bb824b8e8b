"""test_stft.py — tessera.stft / tessera.istft and the Tensor methods on cpu and sim:0 against NumPy
(frames padded with np.pad's modes, windowed, transformed by np.fft in float64), the round trip,
return_complex=False's real view, gradients by central differences, and PyTorch's refusals."""
import numpy as np
import pytest

import tessera

DEVICES = ["cpu", "sim:0"]
NP_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def ref_stft(x, n_fft, hop, win, window, center, pad_mode, normalized, onesided):
    """x [B, L] (NumPy) -> [B, freq, frames], PyTorch's definition"""
    if center:
        p = n_fft // 2
        x = np.pad(x, ((0, 0), (p, p)), mode=NP_MODES[pad_mode])
    w = np.ones(win) if window is None else window
    left = (n_fft - win) // 2
    wp = np.zeros(n_fft, dtype=np.result_type(w, float))
    wp[left:left + win] = w
    frames = 1 + (x.shape[1] - n_fft) // hop
    f = np.stack([x[:, m * hop:m * hop + n_fft] * wp for m in range(frames)], axis=1)
    y = np.fft.rfft(f, axis=-1) if onesided else np.fft.fft(f, axis=-1)
    if normalized:
        y = y / np.sqrt(n_fft)
    return np.swapaxes(y, 1, 2)


def tensor(v, dtype, device, requires_grad=False):
    return tessera.tensor(v.tolist(), dtype=dtype, device=device, requires_grad=requires_grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "replicate", "circular"])
@pytest.mark.parametrize("batched", [False, True])
def test_stft_real(device, pad_mode, batched):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (3, 37))
    w = np.hanning(14)
    got = tessera.stft(tensor(x if batched else x[0], tessera.float64, device), 16, hop_length=5,
                       win_length=14, window=tensor(w, tessera.float64, device),
                       pad_mode=pad_mode, return_complex=True)
    want = ref_stft(x, 16, 5, 14, w, True, pad_mode, False, True)
    assert got.dtype == tessera.complex128 and str(got.device) == device
    np.testing.assert_allclose(arr(got), want if batched else want[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_stft_forms(device):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (2, 40))
    xc = x + 1j * rng.uniform(-1, 1, (2, 40))
    # defaults: hop n_fft / 4, rectangular window, two-sided for complex input
    got = tessera.stft(tensor(xc, tessera.complex128, device), 10)
    np.testing.assert_allclose(arr(got), ref_stft(xc, 10, 2, 10, None, True, "reflect", False,
                                                  False), rtol=1e-12, atol=1e-12)
    # not centred, normalized, two-sided real; the Tensor method
    got = tensor(x, tessera.float64, device).stft(8, 3, center=False, normalized=True,
                                                  onesided=False, return_complex=True)
    np.testing.assert_allclose(arr(got), ref_stft(x, 8, 3, 8, None, False, "reflect", True, False),
                               rtol=1e-12, atol=1e-12)
    # return_complex=False: the complex result's view_as_real
    r = tessera.stft(tensor(x[0], tessera.float32, device), 8, return_complex=False)
    c = tessera.stft(tensor(x[0], tessera.float32, device), 8, return_complex=True)
    assert r.dtype == tessera.float32 and tuple(r.shape) == tuple(c.shape) + (2,)
    assert arr(r).tolist() == arr(tessera.view_as_real(c)).tolist()
    # float32: complex64 within float32 rounding
    want = ref_stft(x[:1].astype(np.float32).astype(np.float64), 8, 2, 8, None, True, "reflect",
                    False, True)[0]
    assert c.dtype == tessera.complex64
    np.testing.assert_allclose(arr(c), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_istft_round_trip(device):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 150))
    w = tensor(np.hanning(33)[:-1], tessera.float64, device)  # periodic Hann of 32
    xt = tensor(x, tessera.float64, device)
    s = tessera.stft(xt, 32, 8, window=w, return_complex=True)
    y = tessera.istft(s, 32, 8, window=w, length=150)
    assert y.dtype == tessera.float64 and tuple(y.shape) == (2, 150)
    np.testing.assert_allclose(arr(y), x, rtol=0, atol=1e-13)
    y = s.istft(32, 8, window=w)  # default length: the frames' span less the centre padding
    assert tuple(y.shape) == (2, 8 * (s.shape[-1] - 1))
    np.testing.assert_allclose(arr(y), x[:, :y.shape[1]], rtol=0, atol=1e-13)
    # complex signals through the two-sided forms
    xc = x + 1j * x[::-1]
    s = tessera.stft(tensor(xc, tessera.complex128, device), 32, 8, window=w)
    y = tessera.istft(s, 32, 8, window=w, length=150, return_complex=True)
    np.testing.assert_allclose(arr(y), xc, rtol=0, atol=1e-13)
    # a longer length: zeros after the frames
    y = tessera.istft(s[0], 32, 8, window=w, length=200, return_complex=True, onesided=False)
    assert tuple(y.shape) == (200,) and np.all(arr(y)[180:] == 0)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients(device):
    rng = np.random.default_rng(4)
    x0, w0 = rng.uniform(-1, 1, 30), rng.uniform(0.5, 1, 8)
    g = rng.uniform(-1, 1, (5, 11, 2))

    def loss(x, w):
        s = tessera.stft(x, 8, 3, window=w, return_complex=True, pad_mode="constant")
        return (tessera.view_as_real(s) * tensor(g, tessera.float64, device)).sum()

    x = tensor(x0, tessera.float64, device, True)
    w = tensor(w0, tessera.float64, device, True)
    loss(x, w).backward()
    h = 1e-6
    for v, grad, which in ((x0, arr(x.grad), 0), (w0, arr(w.grad), 1)):
        for i in (0, 3, len(v) - 1):
            vp, vm = v.copy(), v.copy()
            vp[i] += h
            vm[i] -= h
            args_p = [tensor(vp if which == 0 else x0, tessera.float64, device),
                      tensor(vp if which == 1 else w0, tessera.float64, device)]
            args_m = [tensor(vm if which == 0 else x0, tessera.float64, device),
                      tensor(vm if which == 1 else w0, tessera.float64, device)]
            fd = (loss(*args_p).item() - loss(*args_m).item()) / (2 * h)
            assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-7)
    # istft: the gradient of the spectrum's real view (its leaf), against central differences
    sv = rng.uniform(-1, 1, (5, 6, 2))
    gy = rng.uniform(-1, 1, 10)

    def iloss(v, leaf=False):
        sr = tensor(v, tessera.float64, device, leaf)
        y = tessera.istft(tessera.view_as_complex(sr), 8, 2, window=tensor(w0, tessera.float64,
                                                                           device))
        return sr, (y * tensor(gy, tessera.float64, device)).sum()

    sr, lo = iloss(sv, True)
    lo.backward()
    grad = arr(sr.grad)
    for idx in ((0, 0, 0), (1, 2, 1), (4, 5, 0), (2, 3, 1)):
        vp, vm = sv.copy(), sv.copy()
        vp[idx] += h
        vm[idx] -= h
        fd = (iloss(vp)[1].item() - iloss(vm)[1].item()) / (2 * h)
        assert grad[idx] == pytest.approx(fd, rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_refusals(device):
    x = tessera.zeros(100, dtype=tessera.float64, device=device)
    with pytest.raises(tessera.TesseraError, match="return_complex parameter be given"):
        tessera.stft(x, 10)
    with pytest.raises(tessera.TesseraError, match="expected hop_length > 0"):
        tessera.stft(x, 10, hop_length=0, return_complex=True)
    with pytest.raises(tessera.TesseraError, match="win_length <= n_fft"):
        tessera.stft(x, 10, win_length=11, return_complex=True)
    with pytest.raises(tessera.TesseraError, match="window tensor of size equal to win_length"):
        tessera.stft(x, 10, window=tessera.ones(9, dtype=tessera.float64, device=device),
                     return_complex=True)
    with pytest.raises(tessera.TesseraError, match="n_fft <= 100"):
        tessera.stft(x, 101, center=False, return_complex=True)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode zeros"):
        tessera.stft(x, 10, pad_mode="zeros", return_complex=True)
    with pytest.raises(tessera.TesseraError, match="align_to_window should only be set"):
        tessera.stft(x, 10, align_to_window=True, return_complex=True)
    s = tessera.stft(x + 1, 10, return_complex=True)
    with pytest.raises(tessera.TesseraError, match="complex-valued input"):
        tessera.istft(tessera.real(s), 10)
    with pytest.raises(tessera.TesseraError, match="NOLA"):
        tessera.istft(s, 10, window=tessera.zeros(10, dtype=tessera.float64, device=device))
    if device != "cpu":
        with pytest.raises(tessera.DeviceError):
            tessera.stft(x, 10, window=tessera.ones(10, dtype=tessera.float64),
                         return_complex=True)
