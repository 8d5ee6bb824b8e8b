"""tessera.func.vmap: PyTorch's vmap as a loop. The inputs are split along their in_dims, func is
called once per sample, and the outputs are stacked along out_dims; nested vmaps and vmap over
the autodiff transforms (per-sample gradients) follow. The argument checks and error messages are
PyTorch's. Differences, by construction of a loop: func runs B times (side effects happen per
sample); an output with out_dims=None is accepted when it is the same for every sample; a batch of
size 0 is refused (no sample to learn the outputs' shapes from).

randomness: 'error' raises when func draws from the default generator (seen as a change of
tessera.get_rng_state() across a call: draws from an explicit Generator are not seen), 'different'
draws per sample, 'same' resets the default generator before each sample so every sample draws
the same numbers."""
import functools

from .. import _C
from ._pytree import tree_flatten, tree_unflatten, broadcast_prefix, spec_str

Tensor = _C.Tensor

_RANDOMNESS = ("error", "different", "same")


def _check_randomness(randomness):
    if randomness not in _RANDOMNESS:
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def _fname(func):
    return getattr(func, "__name__", None) or repr(func)


def _is_dim(d):
    return d is None or (isinstance(d, int) and not isinstance(d, bool))


def _flat_in_dims(func, in_dims, args):
    """(flat args, their spec, one in_dim (None or a non-negative int) per leaf, batch size)"""
    head = f"vmap({_fname(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not (_is_dim(in_dims) or isinstance(in_dims, tuple)) or in_dims is None:
        raise ValueError(f"{head}: expected `in_dims` to be int or a (potentially nested) tuple "
                         f"matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({_fname(func)})(<inputs>): got no inputs. Maybe you forgot to "
                         "add inputs, or you are trying to vmap over a function with no inputs. "
                         "The latter is unsupported.")
    flat, spec = tree_flatten(args)
    dims = broadcast_prefix(in_dims, args, spec)
    if dims is None:
        raise ValueError(f"{head}: in_dims is not compatible with the structure of `inputs`. "
                         f"in_dims has structure {spec_str(tree_flatten(in_dims)[1])} but "
                         f"inputs has structure {spec_str(spec)}.")
    out = []
    sizes = []
    for x, d in zip(flat, dims):
        if not _is_dim(d):
            raise ValueError(f"{head}: in_dims must be int or None for each input, got "
                             f"{type(d)}.")
        if d is None:
            out.append(None)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"{head}: Got in_dim={d} for an input but the input is of type "
                             f"{type(x)}. We cannot vmap over non-Tensor arguments, please use "
                             "None as the respective in_dim")
        n = x.dim()
        if not -n <= d < n:
            raise ValueError(f"{head}: Got in_dim={d} for some input, but that input is a Tensor "
                             f"of dimensionality {n} so expected in_dim to satisfy "
                             f"-{n} <= in_dim < {n}.")
        d %= n
        out.append(d)
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    if sizes[0] == 0:
        raise ValueError("tessera.func.vmap: the mapped dimension has size 0; this loop-based "
                         "vmap needs at least one sample to learn the outputs' shapes")
    return flat, spec, out, sizes[0]


class _Rng:
    """the default generator's state around each sample's call (randomness)"""

    def __init__(self, randomness):
        self.mode = randomness
        self.start = _C.get_rng_state() if randomness != "different" else None

    def before(self):
        if self.mode == "same":
            _C.set_rng_state(self.start)
        elif self.mode == "error":
            self.start = _C.get_rng_state()

    def after(self):
        if self.mode == "error" and not _C.equal(_C.get_rng_state(), self.start):
            raise RuntimeError("vmap: called random operation while in randomness error mode. "
                               "Please either use the 'same' or 'different' randomness flags on "
                               "vmap or perform the randomness operation out of vmap")


def _same(values):
    a = values[0]
    for b in values[1:]:
        if isinstance(a, Tensor) != isinstance(b, Tensor):
            return False
        if isinstance(a, Tensor):
            if a is not b and (tuple(a.shape) != tuple(b.shape) or not _C.equal(a, b)):
                return False
        elif a is not b and a != b:
            return False
    return True


def _combine(func, outs, out_dims):
    """the per-sample outputs stacked along out_dims"""
    name = _fname(func)
    flat0, spec = tree_flatten(outs[0])
    flats = [tree_flatten(o) for o in outs]
    if any(s != spec for _, s in flats):
        raise ValueError(f"vmap({name}, ...): `{name}` returned outputs of different structures "
                         "for different samples")
    if not (_is_dim(out_dims) or isinstance(out_dims, tuple)):
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): expected `out_dims` to be int "
                         "or a (potentially nested) tuple matching the structure of outputs, "
                         f"got: {type(out_dims)}.")
    dims = broadcast_prefix(out_dims, outs[0], spec)
    if dims is None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
                         "compatible with the structure of `outputs`. out_dims has structure "
                         f"{spec_str(tree_flatten(out_dims)[1])} but outputs has structure "
                         f"{spec_str(spec)}.")
    res = []
    for j, d in enumerate(dims):
        vals = [f[j] for f, _ in flats]
        if d is None:
            if not _same(vals):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor "
                                 "when out_dim is None")
            res.append(vals[0])
            continue
        if not _is_dim(d):
            raise ValueError(f"vmap({name}, ...): out_dims must be int or None for each output, "
                             f"got {type(d)}.")
        if not isinstance(vals[0], Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                             f"{type(vals[0])}. Did you mean to set out_dims= to None for "
                             "output?")
        n = vals[0].dim() + 1
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, "
                             f"{n - 1}], but got {d})")
        res.append(_C.stack(vals, d % n))
    return tree_unflatten(res, spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.vmap / torch.func.vmap (a loop; see the module docstring). in_dims: an int, None, or
    a tuple matching the positional arguments (nested tuples / dicts for pytree arguments);
    keyword arguments are passed unmapped. out_dims: an int or a tuple matching the outputs.
    chunk_size is accepted (the loop runs one sample at a time whatever it is)."""
    _check_randomness(randomness)
    if chunk_size is not None and (isinstance(chunk_size, bool) or
                                   not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        flat, spec, dims, batch = _flat_in_dims(func, in_dims, args)
        rng = _Rng(randomness)
        outs = []
        for i in range(batch):
            sample = [x if d is None else x.select(d, i) for x, d in zip(flat, dims)]
            rng.before()
            outs.append(func(*tree_unflatten(sample, spec), **kwargs))
            rng.after()
        return _combine(func, outs, out_dims)
    return wrapped
