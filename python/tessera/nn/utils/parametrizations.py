"""tessera.nn.utils.parametrizations — PyTorch's weight_norm, spectral_norm and orthogonal as
parametrizations (parametrize.py): module.weight is computed from
module.parametrizations.weight.original (original0 = g, original1 = v for weight_norm) on each
read, and gradients reach the originals."""
from enum import Enum, auto

from ... import _C
from ...autograd import no_grad
from .. import functional as F
from ..module import Module
from . import parametrize

Tensor = _C.Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]

_EPS = {"float64": 2.220446049250313e-16, "float32": 1.1920928955078125e-07,
        "float16": 0.0009765625, "bfloat16": 0.0078125}


def _dtype_eps(dtype):
    name = str(dtype).rpartition(".")[2]
    return _EPS.get(name, _EPS["float32"])


# ---------------------------------------------------------------------------------- orthogonal

def _is_orthogonal(q):
    n, k = q.size(-2), q.size(-1)
    eye = _C.eye(k, dtype=q.dtype, device=q.device)
    return _C.allclose(q.mH @ q, eye, atol=10.0 * n * _dtype_eps(q.dtype))


def _make_orthogonal(a):
    """Q of A's QR with R's diagonal made positive (PyTorch's geqrf + householder_product times
    sgn(diag R): the same matrix for a full-rank A)"""
    from ... import linalg
    q, r = linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        from ... import linalg
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                z = X.new_zeros(n, n - k).expand(*X.shape[:-2], n, n - k)
                X = _C.cat([X, z], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                eye = _C.eye(n, dtype=A.dtype, device=A.device)
                Q = linalg.solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().to(Q.dtype).unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with no_grad():
            if tuple(Q.shape) != tuple(self.shape):
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            q_init = Q
            n, k = Q.size(-2), Q.size(-1)
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False.")
                raise NotImplementedError(
                    "tessera: orthogonal(orthogonal_map='householder', use_trivialization="
                    "False): assigning to the weight (and registering it) is not supported; use "
                    "use_trivialization=True (the default)")
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = _C.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype,
                             device=Q.device)
                Q = _make_orthogonal(_C.cat([Q, N], dim=-1))
            self.base = Q
            neg_id = _C.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """module.<name> becomes an orthogonal (semi-orthogonal) matrix, or batch of them:
    matrix_exp (default for square), cayley, or householder (default otherwise) of
    original; with use_trivialization (default) a `base` buffer holds the orthogonal starting
    point and original starts at -I."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.size(-2) == weight.size(-1)
                          or weight.is_complex() else "householder")
    orth_enum = getattr(_OrthMaps, str(orthogonal_map), None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    if orth_enum == _OrthMaps.householder and not use_trivialization:
        raise NotImplementedError(
            "tessera: orthogonal(orthogonal_map='householder', use_trivialization=False) is not "
            "supported (its right_inverse needs geqrf's reflectors); use use_trivialization=True")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# --------------------------------------------------------------------------------- weight_norm

def _norm_except_dim(v, dim):
    """PyTorch's norm_except_dim(v, 2, dim): the 2-norm over every dim but `dim`, kept as size-1
    dims (dim == -1: over all dims, a 0-dim tensor)"""
    if dim == -1:
        return _C.sqrt((v * v).sum())
    dims = [d for d in range(v.ndim) if d != dim]
    return _C.sqrt((v * v).sum(dim=dims, keepdim=True)) if dims else v.abs()


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        # PyTorch's _weight_norm: v * (g / ||v||), the norm over every dim but dim
        return weight_v * (weight_g / _norm_except_dim(weight_v, self._dim(weight_v)))

    def _dim(self, v):
        return self.dim if self.dim == -1 or self.dim >= 0 else self.dim + v.ndim

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self._dim(weight)), weight


def weight_norm(module, name="weight", dim=0):
    """w = g * v / ||v|| with g = parametrizations.<name>.original0 (the norms over every dim but
    dim; dim=None: one norm) and v = original1, both starting from the current weight."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ------------------------------------------------------------------------------- spectral_norm

class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = _C.randn(h, dtype=weight.dtype, device=weight.device)
            v = _C.randn(w, dtype=weight.dtype, device=weight.device)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        # u, v updated in place (their objects stay: state_dict and cached() see the new values)
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(_C.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(_C.mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = _C.vdot(u, _C.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> / sigma, sigma the largest singular value of the weight (as a matrix with dim
    first) estimated by power iteration (n_power_iterations per forward in training; the u and v
    vectors are the buffers _u and _v of parametrizations.<name>[0])."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from .. import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name,
                                         _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
