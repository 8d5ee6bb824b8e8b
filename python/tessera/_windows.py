"""torch.hann_window / hamming_window / blackman_window / bartlett_window / kaiser_window: the
periodic (or symmetric) forms of tessera.signal.windows (issue 52)."""

def _periodic_window(f, window_length, periodic, dtype, device, requires_grad, **kw):
    from .signal import windows
    return getattr(windows, f)(window_length, sym=not periodic, dtype=dtype, device=device,
                               requires_grad=requires_grad, **kw)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False, pin_memory=False):
    return _periodic_window("hann", window_length, periodic, dtype, device, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False, pin_memory=False):
    return _periodic_window("general_cosine", window_length, periodic, dtype, device,
                            requires_grad, a=[alpha, beta])


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    return _periodic_window("blackman", window_length, periodic, dtype, device, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    return _periodic_window("bartlett", window_length, periodic, dtype, device, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False, pin_memory=False):
    return _periodic_window("kaiser", window_length, periodic, dtype, device, requires_grad,
                            beta=beta)


__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]
