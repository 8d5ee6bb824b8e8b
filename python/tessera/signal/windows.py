"""tessera.signal.windows — torch.signal.windows' window functions (issue 52): bartlett, blackman,
cosine, exponential, gaussian, general_cosine, general_hamming, hamming, hann, kaiser, nuttall.

Each takes the length M, sym=True (False: the periodic window, for spectral analysis: the symmetric
window of M + 1 points without its last), and dtype / device / requires_grad; each is one call of
ts_signal_window (src/ops/window.c: PyTorch's formulas in float64, then converted), which checks
the arguments with PyTorch's messages.
"""
from .. import _C

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]

# ts_window_kind
_GENERAL_COSINE, _BARTLETT, _COSINE, _EXPONENTIAL, _GAUSSIAN, _KAISER = range(6)


def _window(kind, M, params, sym, dtype, device, requires_grad):
    return _C._signal_window(kind, M, params, bool(sym), dtype=dtype, device=device,
                             requires_grad=requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """exp(-|n - center| / tau); center (M - 1) / 2 by default (M / 2 periodic)"""
    params = [tau] if center is None else [tau, center]
    return _window(_EXPONENTIAL, M, params, sym, dtype, device, requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 1/2) / (N + 1))"""
    return _window(_COSINE, M, [], sym, dtype, device, requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-((n - N/2) / std)^2 / 2)"""
    return _window(_GAUSSIAN, M, [std], sym, dtype, device, requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """i0(beta sqrt(1 - (2n/N - 1)^2)) / i0(beta)"""
    return _window(_KAISER, M, [beta], sym, dtype, device, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sum_i (-1)^i a_i cos(2 pi i n / N)"""
    if isinstance(a, _C.Tensor):
        a = a.tolist()
    elif not isinstance(a, (list, tuple)):
        raise TypeError("Coefficients must be a list/tuple")
    return _window(_GENERAL_COSINE, M, a, sym, dtype, device, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """general_cosine with a = [alpha, 1 - alpha]"""
    return _window(_GENERAL_COSINE, M, [alpha, 1.0 - alpha], sym, dtype, device, requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _window(_GENERAL_COSINE, M, [0.54, 0.46], sym, dtype, device, requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _window(_GENERAL_COSINE, M, [0.5, 0.5], sym, dtype, device, requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _window(_GENERAL_COSINE, M, [0.42, 0.5, 0.08], sym, dtype, device, requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return _window(_GENERAL_COSINE, M, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym, dtype,
                   device, requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2n / N - 1|"""
    return _window(_BARTLETT, M, [], sym, dtype, device, requires_grad)
