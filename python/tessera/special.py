"""tessera.special — torch.special's names over Tessera's elementwise ops (issue 52)."""
from . import _C

expm1 = _C.expm1
exp2 = _C.exp2
log1p = _C.log1p
erf = _C.erf
erfc = _C.erfc
erfinv = _C.erfinv
expit = _C.sigmoid
logit = _C.logit
gammaln = _C.lgamma
digamma = _C.digamma
psi = _C.digamma
polygamma = _C.polygamma
i0 = _C.i0
i0e = _C._special_i0e
i1 = _C._special_i1
i1e = _C._special_i1e
sinc = _C.sinc
round = _C.round
xlogy = _C.xlogy
xlog1py = _C._special_xlog1py
logsumexp = _C.logsumexp
# the remaining functions (include/tessera/special.h)
ndtr = _C._special_ndtr
ndtri = _C._special_ndtri
log_ndtr = _C._special_log_ndtr
erfcx = _C._special_erfcx
entr = _C._special_entr
bessel_j0 = _C._special_bessel_j0
bessel_j1 = _C._special_bessel_j1
bessel_y0 = _C._special_bessel_y0
bessel_y1 = _C._special_bessel_y1
modified_bessel_i0 = _C.i0
modified_bessel_i1 = _C._special_i1
modified_bessel_k0 = _C._special_modified_bessel_k0
modified_bessel_k1 = _C._special_modified_bessel_k1
scaled_modified_bessel_k0 = _C._special_scaled_modified_bessel_k0
scaled_modified_bessel_k1 = _C._special_scaled_modified_bessel_k1
spherical_bessel_j0 = _C._special_spherical_bessel_j0
airy_ai = _C._special_airy_ai
zeta = _C._special_zeta
gammainc = _C.igamma
gammaincc = _C.igammac
multigammaln = _C.mvlgamma
chebyshev_polynomial_t = _C._special_chebyshev_polynomial_t
chebyshev_polynomial_u = _C._special_chebyshev_polynomial_u
chebyshev_polynomial_v = _C._special_chebyshev_polynomial_v
chebyshev_polynomial_w = _C._special_chebyshev_polynomial_w
shifted_chebyshev_polynomial_t = _C._special_shifted_chebyshev_polynomial_t
shifted_chebyshev_polynomial_u = _C._special_shifted_chebyshev_polynomial_u
shifted_chebyshev_polynomial_v = _C._special_shifted_chebyshev_polynomial_v
shifted_chebyshev_polynomial_w = _C._special_shifted_chebyshev_polynomial_w
hermite_polynomial_h = _C._special_hermite_polynomial_h
hermite_polynomial_he = _C._special_hermite_polynomial_he
laguerre_polynomial_l = _C._special_laguerre_polynomial_l
legendre_polynomial_p = _C._special_legendre_polynomial_p


def softmax(input, dim, dtype=None):
    return _C.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return _C.log_softmax(input, dim, dtype=dtype)


__all__ = [
    "expm1", "exp2", "log1p", "erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma",
    "psi", "polygamma", "i0", "i0e", "i1", "i1e", "sinc", "round", "xlogy", "xlog1py",
    "logsumexp", "softmax", "log_softmax", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr",
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai", "zeta", "gammainc", "gammaincc",
    "multigammaln", "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
    "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
]
