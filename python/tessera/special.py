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


def softmax(input, dim, dtype=None):
    return _C.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    return _C.log_softmax(input, dim, dtype=dtype)


__all__ = [
    "expm1", "exp2", "log1p", "erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma",
    "psi", "polygamma", "i0", "i0e", "i1", "i1e", "sinc", "round", "xlogy", "xlog1py",
    "logsumexp", "softmax", "log_softmax",
]
