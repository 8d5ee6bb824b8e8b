"""tessera.fft — torch.fft's functions over Tessera's transforms (include/tessera/fft.h): fft,
ifft, rfft, irfft, hfft, ihfft, their 2-d and n-d forms, fftfreq, rfftfreq, fftshift, ifftshift.
Complex results are complex64 / complex128 tensors; gradients flow through every transform."""
from . import _C

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def _with_out(fn, out, *args, **kw):
    r = fn(*args, **kw)
    if out is None:
        return r
    if tuple(out.shape) != tuple(r.shape):
        raise RuntimeError("out: shape %s, the result's %s (Tessera does not resize out=)"
                           % (list(out.shape), list(r.shape)))
    out.copy_(r)
    return out


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_fft, out, input, n, dim, norm)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_ifft, out, input, n, dim, norm)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_rfft, out, input, n, dim, norm)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_irfft, out, input, n, dim, norm)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_hfft, out, input, n, dim, norm)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    return _with_out(_C._fft_ihfft, out, input, n, dim, norm)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_fftn, out, input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_ifftn, out, input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_rfftn, out, input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_irfftn, out, input, s, dim, norm)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_fftn, out, input, s, dim, norm)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_ifftn, out, input, s, dim, norm)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_rfftn, out, input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_irfftn, out, input, s, dim, norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_hfftn, out, input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _with_out(_C._fft_ihfftn, out, input, s, dim, norm)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_hfftn, out, input, s, dim, norm)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _with_out(_C._fft_ihfftn, out, input, s, dim, norm)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None,
            pin_memory=False, out=None):
    return _with_out(_C._fft_fftfreq, out, n, d, dtype=dtype or _C.get_default_dtype(),
                     device=device, requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False, layout=None,
             pin_memory=False, out=None):
    return _with_out(_C._fft_rfftfreq, out, n, d, dtype=dtype or _C.get_default_dtype(),
                     device=device, requires_grad=requires_grad)


def fftshift(input, dim=None):
    return _C._fft_fftshift(input, dim)


def ifftshift(input, dim=None):
    return _C._fft_ifftshift(input, dim)
