"""tessera.nn.functional.fractional_max_pool2d / 3d and the FractionalMaxPool2d / 3d modules
(issue 52): PyTorch's pseudo-random pooling regions (Graham, "Fractional Max-Pooling") from one
uniform sample per plane and dim, drawn from the seeded generator unless `_random_samples` is given,
the regions' starts computed as ATen's generate_intervals does (in the input's dtype), and the max
of each region taken by gathers over the plane and one max over the kernel's offsets: every device,
gradients through gather and max. The draws differ from PyTorch's stream (as every random op)."""
import itertools

from .. import _C
from .functional_pool_norm import _tuple
from .module import Module


def _starts(sample, size, out, k):
    """[P, out] int64 region starts along one dim from sample [P] (ATen's generate_intervals:
    trunc((i + u) * alpha) - trunc(u * alpha), the last start size - k)"""
    p = sample.shape[0]
    dt, dev = sample.dtype, sample.device
    last = _C.full((p, 1), size - k, dtype=_C.int64, device=dev)
    if out == 1:
        return last
    alpha = (_C.tensor(float(size - k), dtype=dt, device=dev) /
             _C.tensor(float(out - 1), dtype=dt, device=dev))
    i = _C.arange(out - 1, dtype=dt, device=dev).unsqueeze(0)
    u = sample.unsqueeze(1)
    first = ((i + u) * alpha).trunc().to(_C.int64) - (u * alpha).trunc().to(_C.int64)
    return _C.cat([first, last], 1)


def _fractional(nd, input, kernel_size, output_size, output_ratio, return_indices,
                _random_samples):
    fn = f"fractional_max_pool{nd}d"
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{fn}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: "
                           f"{tuple(input.shape)}")
    if not input.is_floating_point():
        raise RuntimeError(f"{fn}(): not implemented for {input.dtype}")
    k = _tuple(kernel_size, nd, "kernel_size", fn)
    size = tuple(input.shape[-nd:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{fn} requires specifying either an output_size or an "
                             "output_ratio")
        ratio = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * nd
        if len(ratio) != nd:
            raise ValueError(f"{fn}(): output_ratio must have {nd} elements")
        out = tuple(int(s * r) for s, r in zip(size, ratio))
    else:
        out = _tuple(output_size, nd, "output_size", fn)
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    for d in range(nd):
        if k[d] <= 0 or out[d] < 0:
            raise RuntimeError(f"{fn}(): kernel_size must be positive and output_size "
                               f"non-negative, got {k} and {out}")
        if out[d] + k[d] - 1 > size[d]:
            raise RuntimeError(f"{fn}(): pool size {k[d]} too large relative to input size "
                               f"{size[d]} along dim {d} (output size {out[d]})")
    if _random_samples is None:
        samples = _C.rand(n, c, nd, dtype=x.dtype, device=x.device)
    else:
        samples = _random_samples  # ATen takes the first N of a larger batch of samples
        sh = tuple(samples.shape)
        if len(sh) != 3 or sh[0] < n or sh[1:] != (c, nd):
            raise RuntimeError(f"{fn}(): Expect _random_samples to be of shape (>= {n}, {c}, "
                               f"{nd}), got {sh}")
        samples = samples.detach()[:n].to(x.dtype).to(x.device)
    p = n * c
    if p == 0 or any(o == 0 for o in out):
        y = _C.zeros(n, c, *out, dtype=x.dtype, device=x.device)
        i = _C.zeros(n, c, *out, dtype=_C.int64, device=x.device)
    else:
        # ATen's samples: (W, H) for 2-d, (T, H, W) for 3-d
        s = samples.reshape(p, nd)
        starts = [_starts(s[:, nd - 1 - d if nd == 2 else d].contiguous(), size[d], out[d], k[d])
                  for d in range(nd)]
        strides = [1] * nd
        for d in range(nd - 2, -1, -1):
            strides[d] = strides[d + 1] * size[d + 1]
        base = None  # [P, *out] flat position of each region's first element
        for d in range(nd):
            shape = [p] + [out[d] if e == d else 1 for e in range(nd)]
            term = (starts[d] * strides[d]).reshape(*shape)
            base = term if base is None else base + term
        base = base.reshape(p, -1)
        flat = x.reshape(p, -1)
        # ATen's scan order (the first of equal maxima wins): the first dim slowest
        scan = list(range(nd))
        pos = []
        for off in itertools.product(*[range(k[d]) for d in scan]):
            pos.append(base + sum(o * strides[d] for o, d in zip(off, scan)))
        pos = _C.stack(pos, 1)  # [P, K, O]
        vals = flat.gather(1, pos.reshape(p, -1)).reshape(p, pos.shape[1], -1)
        y, arg = vals.max(dim=1)
        i = pos.gather(1, arg.unsqueeze(1)).squeeze(1)
        y, i = y.reshape(n, c, *out), i.reshape(n, c, *out)
    if not batched:
        y, i = y.squeeze(0), i.squeeze(0)
    return (y, i) if return_indices else y


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    return _fractional(2, input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    return _fractional(3, input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return _fractional(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return _fractional(3, input, kernel_size, output_size, output_ratio, True, _random_samples)


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name = f"FractionalMaxPool{self._nd}d"
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            r = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,)
            if not all(0 < v < 1 for v in r):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        self.kernel_size = kernel_size
        self.output_size, self.output_ratio = output_size, output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return _fractional(self._nd, input, self.kernel_size, self.output_size,
                           self.output_ratio, self.return_indices, self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _nd = 3
