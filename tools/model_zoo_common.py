"""model_zoo_common.py — what both sides of tools/model_zoo.py share (no torch import here: each
function takes the `torch` module it should use, the real PyTorch or Tessera under
tessera.compat): building a model the same way, turning dropout off, the deterministic input,
loss weights and (for the CI sample) parameter values, flattening outputs, and the judge.

The judge (issue 75, parts 4 and 6). For each compared tensor T with the float64 PyTorch value
R64, PyTorch's float32 value R32 and Tessera's float32 value X:

    err(A) = max|A - R64| / max(max|R64|, FLOOR * group_scale)
    pass   when err(X) <= K * max(err(R32), C * EPS32)

with K = 4, C = 8, EPS32 = 2**-23 (so the smallest bound is 3.8e-6 of the tensor's scale).
group_scale is the largest |R64| over the tensor's group (all parameter gradients form one
group; every other tensor is its own group) and FLOOR = 1e-3: a parameter gradient that is
rounding noise around zero (a BatchNorm bias under a later normalisation) is measured against
the model's gradient scale, not its own; a BatchNorm running mean likewise against 1e-3 x the
square root of its running variance (denom_floor).
A tensor that PyTorch leaves without a gradient must
have none (or an all-zero one) in Tessera.
"""
import numpy as np

K = 4.0
C = 8.0
EPS32 = 2.0 ** -23
FLOOR = 1e-3
MASK32 = np.uint64(0xFFFFFFFF)


def hash_uniform(n, k):
    """n numbers in [-1, 1), a fixed integer hash of (index, k): the same bits on every machine
    and numpy version (integer arithmetic only, then one exact division)."""
    i = np.arange(int(n), dtype=np.uint64)
    x = (i * np.uint64(2654435761) + np.uint64((int(k) * 40503 + 12345) % (1 << 32))) & MASK32
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x2C1B3C6D)) & MASK32
    x ^= x >> np.uint64(12)
    x = (x * np.uint64(0x297A2D39)) & MASK32
    x ^= x >> np.uint64(15)
    return x.astype(np.float64) / float(1 << 32) * 2.0 - 1.0


def input_array(shape, k=7):
    """the model input: uniform on [-sqrt(3), sqrt(3)) (unit variance), float64"""
    n = int(np.prod(shape))
    return (hash_uniform(n, k) * np.sqrt(3.0)).reshape(shape)


def loss_weights(shape, i):
    """the fixed weights W_i of the loss sum_i (out_i * W_i).sum(), float64"""
    n = int(np.prod(shape))
    return hash_uniform(n, 1000 + i).reshape(shape)


def param_array(name, shape, k):
    """the CI sample's deterministic value of a parameter or floating buffer (float64): norm
    scales near 1, biases small, weights uniform with variance 2 / fan_in (He), running
    variances in [1, 1.5]"""
    n = int(np.prod(shape)) if len(shape) else 1
    u = hash_uniform(n, 17 + k).reshape(shape)
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "running_var":
        return 1.0 + 0.25 * (u + 1.0)
    if leaf == "running_mean":
        return 0.1 * u
    if len(shape) <= 1:
        if leaf in ("weight", "gamma", "scale", "alpha") or leaf.endswith("_scale"):
            return 1.0 + 0.1 * u
        return 0.05 * u
    fan_in = n // int(shape[0]) if int(shape[0]) else 1
    return u * np.sqrt(6.0 / max(fan_in, 1))


def flatten_outputs(out, prefix="out"):
    """[(name, tensor)] of the floating tensors of a model's output (a tensor, tuple, list,
    dict or namedtuple, nested), in a fixed order"""
    items = []
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        if getattr(out.dtype, "is_floating_point", True):
            items.append((prefix, out))
    elif isinstance(out, dict):
        for key in out:
            items.extend(flatten_outputs(out[key], "%s.%s" % (prefix, key)))
    elif isinstance(out, (tuple, list)):
        for i, v in enumerate(out):
            items.extend(flatten_outputs(v, "%s.%d" % (prefix, i)))
    return items


def zero_dropout(model):
    """every dropout / drop-path / stochastic-depth module to probability 0 (on both sides: the
    random streams of PyTorch and Tessera differ)"""
    n = 0
    for mod in model.modules():
        cls = type(mod).__name__
        for attr in ("p", "drop_prob", "drop_rate", "prob"):
            if ("Drop" in cls or "Stochastic" in cls) and \
                    isinstance(getattr(mod, attr, None), float):
                setattr(mod, attr, 0.0)
                n += 1
    return n


def build(suite, name, kwargs, torch):
    """the model as PyTorch's or Tessera's side builds it (same code: timm's or torchvision's)"""
    kw = dict(kwargs)
    if suite == "timm":
        import timm
        m = timm.create_model(name, pretrained=False, **kw)
    else:
        import torchvision
        m = torchvision.models.get_model(name, weights=None, **kw)
    zero_dropout(m)
    return m


def set_params_by_formula(model, torch):
    """the CI sample's parameters and floating buffers from param_array (float64 rounded to the
    model's dtype), in state_dict order"""
    sd = model.state_dict()
    with torch.no_grad():
        for k, (name, t) in enumerate(sd.items()):
            if not t.dtype.is_floating_point:
                continue
            arr = param_array(name, tuple(t.shape), k)
            t.copy_(torch.tensor(arr, dtype=t.dtype))


def denom_floor(key, refs, grad_scale):
    """the least denominator of err for tensor `key` of the float64 values `refs` (a mapping):
    parameter gradients 1e-3 x the largest parameter gradient; a running mean 1e-3 x the
    square root of its layer's largest running variance (a mean of zero-mean activations is
    rounding noise around 0); others 0"""
    if key.startswith("grad:param:"):
        return FLOOR * grad_scale
    if key.startswith("buf:") and key.endswith("running_mean"):
        var = key[: -len("running_mean")] + "running_var"
        if var in refs:
            return FLOOR * float(np.sqrt(np.max(np.abs(refs[var]), initial=0.0)))
    return 0.0


def rel_err(a, ref, denom_floor=0.0):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if a.shape != ref.shape:
        return float("inf")
    if ref.size == 0:
        return 0.0
    fa, fr = np.isfinite(a), np.isfinite(ref)
    if not (fa.all() and fr.all()):
        if not np.array_equal(fa, fr) or not np.array_equal(a[~fa], ref[~fr], equal_nan=True):
            return float("inf")
        a, ref = np.where(fr, a, 0.0), np.where(fr, ref, 0.0)
    denom = max(float(np.max(np.abs(ref))), denom_floor, 1e-30)
    d = np.abs(a - ref)
    return float(np.max(d)) / denom


def bound(err_torch):
    return K * max(err_torch, C * EPS32)


def judge(err_tess, err_torch):
    """ratio err_tess / allowed-per-K (pass when <= K); returns (ratio_to_bound, ok)"""
    b = bound(err_torch)
    ratio = err_tess / (b / K)
    return ratio, err_tess <= b
