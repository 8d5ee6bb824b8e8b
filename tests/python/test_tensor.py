"""Tensors from Python: creation, attributes, repr, moves and casts, operators, elementwise math,
reductions and shape ops, on cpu and sim:0, checked against float64 computations in Python.
Tolerances: float32 rounding (relative 2^-24 per op, a few ops deep -> 1e-6)."""
import math
import operator

import pytest

import tessera

F32 = 1e-6  # relative error of a few float32 roundings


def flat(x):
    if isinstance(x, list):
        return [v for e in x for v in flat(e)]
    return [x]


# ------------------------------------------------------------------ creation and attributes
def test_tensor_infers_dtype_like_torch(device):
    assert tessera.tensor([1, 2], device=device).dtype == tessera.int64
    assert tessera.tensor([1.0, 2], device=device).dtype == tessera.float32
    assert tessera.tensor([True, False], device=device).dtype == tessera.bool
    assert tessera.tensor([[1, 2.5]], device=device).dtype == tessera.float32
    assert tessera.tensor([], device=device).dtype == tessera.float32
    assert tessera.tensor(3, dtype=tessera.float64, device=device).dtype == tessera.float64
    assert tessera.tensor([1, 2], dtype=float).dtype == tessera.float64


def test_tensor_values_shape_device(device):
    data = [[1.5, -2.0, 3.25], [4.0, 5.5, -6.75]]
    t = tessera.tensor(data, device=device)
    assert t.shape == (2, 3) and isinstance(t.shape, tessera.Size) and t.shape.numel() == 6
    assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-2) == 2
    assert t.dim() == 2 and t.ndim == 2 and len(t) == 2
    assert t.numel() == 6 and t.nelement() == 6 and t.element_size() == 4
    assert t.device == tessera.device(device) and str(t.device) == device
    assert t.tolist() == data
    assert t.is_cuda is False and t.requires_grad is False
    assert tessera.tensor(2**40 + 1).item() == 2**40 + 1  # integers exactly
    assert tessera.tensor(True).item() is True


def test_tensor_rejects_ragged_and_bad_types():
    with pytest.raises(ValueError):
        tessera.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="tensor"):
        tessera.tensor(["a"])
    with pytest.raises(TypeError, match="dtype"):
        tessera.tensor([1], dtype=3)
    with pytest.raises(ValueError, match="device"):
        tessera.tensor([1], device="gpu")
    with pytest.raises(TypeError, match="requires_grad"):
        tessera.tensor([1.0], requires_grad="yes")


def test_factories(device):
    z = tessera.zeros(2, 3, device=device)
    assert z.shape == (2, 3) and z.tolist() == [[0.0] * 3] * 2 and z.device.type == device[:3]
    assert tessera.ones((4,), dtype=tessera.int32, device=device).tolist() == [1] * 4
    assert tessera.full((2,), 7, device=device).tolist() == [7, 7]
    assert tessera.full((2,), 7, device=device).dtype == tessera.int64
    assert tessera.full((2,), 0.5, device=device).tolist() == [0.5, 0.5]
    assert tessera.empty(3, device=device).shape == (3,)
    assert tessera.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert tessera.arange(5, device=device).dtype == tessera.int64
    assert tessera.arange(0.0, 1.0, 0.25, device=device).tolist() == [0, 0.25, 0.5, 0.75]
    assert tessera.arange(1, 3.0).dtype == tessera.float32
    assert tessera.linspace(0, 1, 5, device=device).tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    assert tessera.eye(2, 3, device=device).tolist() == [[1, 0, 0], [0, 1, 0]]
    r = tessera.zeros(3, requires_grad=True, device=device)
    assert r.requires_grad and r.is_leaf


def test_random_factories_are_seeded(device):
    tessera.manual_seed(123)
    a = tessera.rand(1000, device=device).tolist()
    tessera.manual_seed(123)
    b = tessera.rand(1000, device=device).tolist()
    assert a == b and all(0 <= v < 1 for v in a)
    mean = sum(a) / len(a)
    assert abs(mean - 0.5) < 0.05  # 1000 uniforms: std of the mean 0.009
    n = tessera.randn(2000, device=device).tolist()
    m = sum(n) / len(n)
    var = sum((v - m) ** 2 for v in n) / (len(n) - 1)
    assert abs(m) < 0.1 and abs(var - 1) < 0.15
    ri = tessera.randint(3, 7, (500,), device=device)
    assert ri.dtype == tessera.int64 and set(ri.tolist()) == {3, 4, 5, 6}
    assert set(tessera.randint(2, (100,)).tolist()) == {0, 1}


def test_like_factories(device):
    x = tessera.tensor([[1.0, 2.0]], dtype=tessera.float64, device=device)
    for f in (tessera.zeros_like, tessera.ones_like, tessera.empty_like, tessera.rand_like,
              tessera.randn_like):
        y = f(x)
        assert y.shape == x.shape and y.dtype == tessera.float64 and y.device == x.device
    assert tessera.zeros_like(x).tolist() == [[0, 0]]
    assert tessera.ones_like(x, dtype=tessera.int32).dtype == tessera.int32
    assert tessera.full_like(x, 2.5).tolist() == [[2.5, 2.5]]
    assert tessera.zeros_like(x, device="cpu").device == tessera.device("cpu")


def test_repr_like_pytorch(device):
    t = tessera.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    suffix = "" if device == "cpu" else ", device='%s'" % device
    assert repr(t) == "tensor([1., 2., 3.]%s, requires_grad=True)" % suffix
    y = t * 2
    assert repr(y) == "tensor([2., 4., 6.]%s, grad_fn=<MulBackward0>)" % suffix
    assert repr(tessera.tensor([1, 2], dtype=tessera.int32)) == \
        "tensor([1, 2], dtype=tessera.int32)"
    assert repr(tessera.float32) == "tessera.float32"


def test_dtypes_and_devices():
    assert tessera.float is tessera.float32 and tessera.double is tessera.float64
    assert tessera.long is tessera.int64 and tessera.int is tessera.int32
    assert tessera.half is tessera.float16
    assert tessera.float32.is_floating_point and not tessera.int64.is_floating_point
    assert tessera.bfloat16.itemsize == 2
    d = tessera.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert repr(d) == "device(type='cuda', index=1)"
    assert tessera.device("cuda", 0) == tessera.device("cuda:0") != tessera.device("cuda")
    assert tessera.device("cpu").index is None and tessera.device("sim:1") == "sim:1"
    assert hash(tessera.device("sim:0")) == hash(tessera.device("sim", 0))
    assert len({tessera.device("cpu"), tessera.device("cpu")}) == 1
    for bad in ("gpu", "cuda:", "cuda:01", "cpu:1x"):
        with pytest.raises(ValueError):
            tessera.device(bad)
    with pytest.raises(TypeError, match="device"):
        tessera.device(1.5)


def test_device_as_default_device_scope():
    with tessera.device("sim:1"):
        assert tessera.zeros(2).device == tessera.device("sim:1")
        assert tessera.tensor([1.0]).device == tessera.device("sim:1")
    assert tessera.zeros(2).device == tessera.device("cpu")


# ------------------------------------------------------------------ moves and casts
def test_to_device_and_dtype(device):
    x = tessera.tensor([1.5, -2.5])
    y = x.to(device)
    assert y.device == tessera.device(device) and y.tolist() == [1.5, -2.5]
    assert x.to("cpu") is x and y.to(device) is y  # nothing to do: the same tensor
    assert y.to(device, copy=True) is not y
    z = y.to(tessera.float64)
    assert z.dtype == tessera.float64 and z.device == y.device
    w = x.to(device=device, dtype=tessera.int64, non_blocking=True)
    assert w.tolist() == [1, -2] and w.device == tessera.device(device)
    assert x.to(w).dtype == tessera.int64 and x.to(w).device == w.device
    assert y.cpu().device == tessera.device("cpu")
    assert x.pin_memory().is_pinned() and not x.is_pinned()
    # PyTorch's other overloads: to(dtype, non_blocking, copy) and to(tensor, non_blocking, copy)
    assert y.to(tessera.float32, False, True) is not y
    assert y.to(tessera.float32, False, False) is y
    assert y.to(tessera.float64, True).dtype == tessera.float64
    assert y.to(w, False, True).dtype == tessera.int64 and y.to(y, False, False) is y
    assert y.to(y, True, True) is not y
    with pytest.raises(TypeError):
        y.to(tessera.float64, False, False, False)
    with pytest.raises(TypeError):
        y.to(tessera.float64, dtype=tessera.float32)


def test_casts(device):
    x = tessera.tensor([1.75, -2.5, 0.0], device=device)
    assert x.double().dtype == tessera.float64
    assert x.half().dtype == tessera.float16 and x.half().tolist() == [1.75, -2.5, 0.0]
    assert x.bfloat16().dtype == tessera.bfloat16
    assert x.long().tolist() == [1, -2, 0] and x.int().dtype == tessera.int32
    assert x.bool().tolist() == [True, True, False]
    assert x.type() == "tessera.FloatTensor" and x.type(tessera.float64).dtype == tessera.float64
    assert x.long().float().dtype == tessera.float32


def test_clone_contiguous_copy(device):
    x = tessera.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    c = x.clone()
    c.add_(1)
    assert x.tolist() == [[1, 2], [3, 4]] and c.tolist() == [[2, 3], [4, 5]]
    t = x.t()
    assert not t.is_contiguous() and t.contiguous().is_contiguous()
    assert t.contiguous().tolist() == [[1, 3], [2, 4]]
    assert x.contiguous() is x
    dst = tessera.zeros(2, 2, device=device)
    assert dst.copy_(tessera.tensor([5.0, 6.0])) is dst  # from the cpu, broadcast
    assert dst.tolist() == [[5, 6], [5, 6]]


def test_channels_last(device):
    x = tessera.randn(2, 3, 4, 5, device=device)
    c = x.contiguous(memory_format=tessera.channels_last)
    assert c.is_contiguous(memory_format=tessera.channels_last) and not c.is_contiguous()
    assert c.stride() == (60, 1, 15, 3) and c.shape == x.shape and c.tolist() == x.tolist()
    assert c.contiguous(memory_format=tessera.channels_last) is c
    assert c.contiguous().is_contiguous() and c.contiguous().tolist() == x.tolist()
    assert x.to(memory_format=tessera.channels_last).stride() == (60, 1, 15, 3)
    assert x.clone(memory_format=tessera.channels_last).stride() == (60, 1, 15, 3)
    assert c.clone().stride() == (60, 1, 15, 3)  # preserve_format
    assert c.clone(memory_format=tessera.contiguous_format).is_contiguous()
    assert c.relu().stride() == (60, 1, 15, 3) and (c * 2).stride() == (60, 1, 15, 3)
    conv = tessera.nn.Conv2d(3, 8, 3, padding=1).to(device, memory_format=tessera.channels_last)
    y = conv(c)
    assert y.is_contiguous(memory_format=tessera.channels_last) or device.startswith("cuda")
    # the same sums in another order: float32 rounding of 27 terms of magnitude ~1
    assert all(abs(a - b) <= 1e-5 * (1 + abs(b)) for a, b in zip(flat(y.tolist()), flat(conv(x).tolist())))
    assert repr(tessera.channels_last) == "tessera.channels_last"
    with pytest.raises(TypeError):
        x.contiguous(memory_format="channels_last")
    with pytest.raises(TypeError):
        conv.to(memory_format=3)
    with pytest.raises(tessera.ShapeError):
        tessera.zeros(2, 3, device=device).contiguous(memory_format=tessera.channels_last)


def test_scalar_conversions(device):
    assert float(tessera.tensor([2.5], device=device)) == 2.5
    assert int(tessera.tensor(7.9, device=device)) == 7
    assert bool(tessera.tensor([0.0], device=device)) is False
    assert [10, 20, 30][tessera.tensor(1)] == 20
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tessera.tensor([1.0, 2.0], device=device))
    with pytest.raises(ValueError):
        tessera.tensor([1.0, 2.0]).item()
    with pytest.raises(TypeError):
        len(tessera.tensor(1.0))


# ------------------------------------------------------------------ operators
A = [[1.5, -2.0, 3.0], [0.5, 4.0, -1.25]]
B = [2.0, -0.5, 4.0]  # broadcasts over A's rows

BINARY = [
    (operator.add, lambda a, b: a + b),
    (operator.sub, lambda a, b: a - b),
    (operator.mul, lambda a, b: a * b),
    (operator.truediv, lambda a, b: a / b),
]


def each(a, b, f):
    """f elementwise over A-shaped a and a row b (or scalars), in Python floats."""
    if isinstance(a, list) and a and isinstance(a[0], list):
        return [each(r, b, f) for r in a]
    if isinstance(a, list):
        return [f(x, y) for x, y in zip(a, b if isinstance(b, list) else [b] * len(a))]
    if isinstance(b, list):
        return [each(a, r, f) for r in b] if isinstance(b[0], list) else [f(a, y) for y in b]
    return f(a, b)


@pytest.mark.parametrize("op,ref", BINARY)
def test_binary_broadcast_and_scalars(device, op, ref, close):
    a = tessera.tensor(A, device=device)
    b = tessera.tensor(B, device=device)
    close(op(a, b).tolist(), each(A, B, ref), rel=F32)
    close(op(a, 2.5).tolist(), each(A, 2.5, ref), rel=F32)
    close(op(3, a).tolist(), each(3.0, A, ref), rel=F32)


def test_pow_matmul_unary(device, close):
    a = tessera.tensor(A, device=device)
    close((a ** 2).tolist(), each(A, 2.0, lambda x, y: x ** y), rel=F32)
    close((2 ** a).tolist(), each(2.0, A, lambda x, y: x ** y), rel=F32)
    close((-a).tolist(), each(A, 0, lambda x, _: -x))
    close(abs(a).tolist(), each(A, 0, lambda x, _: abs(x)))
    m = a @ a.t()
    close(m.tolist(), [[sum(x * y for x, y in zip(r, s)) for s in A] for r in A], rel=F32)
    v = tessera.tensor(B, device=device)
    close((a @ v).tolist(), [sum(x * y for x, y in zip(r, B)) for r in A], rel=F32)
    close(tessera.mm(a, a.t()).tolist(), m.tolist(), rel=F32)
    bm = tessera.stack([a, a]).bmm(tessera.stack([a.t(), a.t()]))
    close(bm.tolist(), [m.tolist()] * 2, rel=F32)


def test_integer_and_bool_arithmetic(device):
    i = tessera.tensor([1, 2, 3], device=device)
    assert (i + 1).dtype == tessera.int64 and (i + 1).tolist() == [2, 3, 4]
    assert (i * 2.5).dtype == tessera.float32 and (i * 2.5).tolist() == [2.5, 5.0, 7.5]
    assert (i / 2).tolist() == [0.5, 1.0, 1.5]
    t, f = tessera.tensor([True, True, False], device=device), tessera.tensor([True, False, False], device=device)
    assert (t & f).tolist() == [True, False, False]
    assert (t | f).tolist() == [True, True, False]
    assert (t ^ f).tolist() == [False, True, False]
    assert (~t).tolist() == [False, False, True]
    assert (i & 2).tolist() == [0, 2, 2]  # integer bitwise ops (issue 52)
    with pytest.raises(tessera.TesseraError, match="bitwise_and"):
        tessera.tensor([1.0], device=device) & 1


def test_comparisons(device):
    a = tessera.tensor([1.0, 2.0, 3.0], device=device)
    b = tessera.tensor([3.0, 2.0, 1.0], device=device)
    assert (a == b).tolist() == [False, True, False] and (a == b).dtype == tessera.bool
    assert (a != b).tolist() == [True, False, True]
    assert (a < b).tolist() == [True, False, False]
    assert (a <= 2).tolist() == [True, True, False]
    assert (a > 2).tolist() == [False, False, True]
    assert (2 >= a).tolist() == [True, True, False]  # the scalar on the left
    assert (1.5 < a).tolist() == [False, True, True]
    assert tessera.lt(1.5, a).tolist() == [False, True, True]  # the scalar first, as a function
    assert tessera.sub(1.0, a).tolist() == [0, -1, -2]
    assert a != "x" and not (a == None)  # noqa: E711  (identity fallback)
    assert len({a, b, a}) == 2  # hashable by identity


def test_inplace_operators_keep_identity(device, close):
    a = tessera.tensor([1.0, 2.0, 4.0], device=device)
    ident = id(a)
    a += 1
    a -= tessera.tensor([0.5, 0.5, 0.5], device=device)
    a *= 3
    a /= 2
    a **= 2
    assert id(a) == ident
    close(a.tolist(), [((v + 1 - 0.5) * 3 / 2) ** 2 for v in [1, 2, 4]], rel=F32)
    b = tessera.ones(3, device=device)
    assert b.add_(tessera.ones(3, device=device), alpha=2) is b and b.tolist() == [3, 3, 3]
    assert b.mul_(2).sub_(1).div_(5).tolist() == [1, 1, 1]
    assert b.fill_(7).tolist() == [7, 7, 7] and b.zero_().tolist() == [0, 0, 0]
    c = tessera.tensor([-1.0, 4.0], device=device)
    assert c.clamp_(0, 2).tolist() == [0, 2] and c.relu_() is c
    i = tessera.tensor([1, 2], device=device)
    with pytest.raises(tessera.TesseraError):
        i /= 2  # the float result cannot be kept in an int tensor (PyTorch's rule)


UNARY = [
    ("exp", math.exp), ("log", math.log), ("sqrt", math.sqrt), ("sin", math.sin),
    ("cos", math.cos), ("tanh", math.tanh), ("sigmoid", lambda x: 1 / (1 + math.exp(-x))),
    ("relu", lambda x: max(x, 0.0)), ("abs", abs), ("neg", lambda x: -x),
    ("floor", math.floor), ("ceil", math.ceil), ("reciprocal", lambda x: 1 / x),
    ("square", lambda x: x * x), ("rsqrt", lambda x: 1 / math.sqrt(x)), ("erf", math.erf),
]


@pytest.mark.parametrize("name,ref", UNARY)
def test_unary_math(device, name, ref, close):
    vals = [0.25, 1.5, 3.0] if name in ("log", "sqrt", "rsqrt") else [-1.5, 0.25, 2.0]
    x = tessera.tensor(vals, device=device)
    expect = [ref(v) for v in vals]
    close(getattr(x, name)().tolist(), expect, rel=4 * F32, abs_=1e-6)
    close(getattr(tessera, name)(x).tolist(), expect, rel=4 * F32, abs_=1e-6)


def test_binary_functions(device, close):
    a = tessera.tensor([1.0, -2.0, 3.0], device=device)
    b = tessera.tensor([2.0, -3.0, 1.0], device=device)
    assert tessera.maximum(a, b).tolist() == [2, -2, 3]
    assert tessera.minimum(a, b).tolist() == [1, -3, 1]
    assert tessera.max(a, b).tolist() == [2, -2, 3]
    close(tessera.pow(a, 2).tolist(), [1, 4, 9])
    close(tessera.fmod(a, 2).tolist(), [math.fmod(v, 2) for v in [1, -2, 3]])
    assert tessera.add(a, b, alpha=2).tolist() == [5, -8, 5]
    assert tessera.sub(a, b, alpha=2).tolist() == [-3, 4, 1]
    assert a.clamp(min=0).tolist() == [1, 0, 3] and a.clamp(max=0).tolist() == [0, -2, 0]
    assert tessera.clamp(a, -1, 2).tolist() == [1, -1, 2]
    assert tessera.where(a > 0, a, b).tolist() == [1, -3, 3]
    assert tessera.where(a > 0, a, 0.0).tolist() == [1, 0, 3]
    assert a.masked_fill(a < 0, 9).tolist() == [1, 9, 3]
    assert tessera.logical_and(a > 0, b > 0).tolist() == [True, False, True]
    assert tessera.eq(a, 3).tolist() == [False, False, True]
    with pytest.raises(TypeError, match="other"):
        tessera.add(a, "x")
    with pytest.raises(TypeError, match="input"):
        tessera.exp([1.0])


# ------------------------------------------------------------------ reductions
M = [[1.0, -2.0, 3.5], [4.0, 0.5, -6.0]]


def colsum(m):
    return [sum(r[j] for r in m) for j in range(len(m[0]))]


def test_sum_mean_prod(device, close):
    x = tessera.tensor(M, device=device)
    total = sum(flat(M))
    close(x.sum().item(), total, rel=F32)
    assert x.sum().shape == ()
    close(x.sum(0).tolist(), colsum(M), rel=F32)
    close(x.sum(dim=1).tolist(), [sum(r) for r in M], rel=F32)
    close(x.sum(dim=(0, 1)).item(), total, rel=F32)
    assert x.sum(1, keepdim=True).shape == (2, 1)
    assert x.sum(keepdim=True, dim=(0, 1)).shape == (1, 1)
    assert x.sum(keepdim=True).shape == (1, 1)
    close(x.mean(keepdim=True).tolist(), [[total / 6]], rel=F32)
    close(x.mean().item(), total / 6, rel=F32)
    close(tessera.mean(x, 0).tolist(), [v / 2 for v in colsum(M)], rel=F32)
    close(x.prod(1).tolist(), [math.prod(r) for r in M], rel=F32)
    close(x.prod().item(), math.prod(flat(M)), rel=F32)
    assert x.sum(dtype=tessera.float64).dtype == tessera.float64
    assert tessera.tensor([1, 2, 3], device=device).sum().dtype == tessera.int64


def test_max_min_arg(device):
    x = tessera.tensor(M, device=device)
    assert x.max().item() == 4.0 and x.min().item() == -6.0
    v, i = x.max(dim=1)
    assert v.tolist() == [3.5, 4.0] and i.tolist() == [2, 0]
    r = tessera.min(x, 0, keepdim=True)
    assert r.values.tolist() == [[1.0, -2.0, -6.0]] and r.indices.tolist() == [[0, 0, 1]]
    assert x.argmax().item() == 3 and x.argmin().item() == 5
    assert x.argmax(dim=1).tolist() == [2, 0] and x.argmin(1, keepdim=True).shape == (2, 1)
    assert x.amax(1).tolist() == [3.5, 4.0] and x.amin((0, 1)).item() == -6


def test_std_var_logsumexp_softmax(device, close):
    x = tessera.tensor(M, device=device)
    vals = flat(M)
    m = sum(vals) / 6
    var1 = sum((v - m) ** 2 for v in vals) / 5
    close(x.var().item(), var1, rel=4 * F32)
    close(x.std().item(), math.sqrt(var1), rel=4 * F32)
    close(x.var(unbiased=False).item(), var1 * 5 / 6, rel=4 * F32)
    row_var = [sum((v - sum(r) / 3) ** 2 for v in r) / 2 for r in M]
    close(x.var(1).tolist(), row_var, rel=4 * F32)
    close(tessera.std(x, dim=1, keepdim=True).tolist(), [[math.sqrt(v)] for v in row_var], rel=4 * F32)
    lse = [math.log(sum(math.exp(v) for v in r)) for r in M]
    close(x.logsumexp(1).tolist(), lse, rel=4 * F32)
    close(x.softmax(1).tolist(), [[math.exp(v - l) for v in r] for r, l in zip(M, lse)], rel=4 * F32, abs_=1e-7)
    close(tessera.log_softmax(x, dim=1).tolist(), [[v - l for v in r] for r, l in zip(M, lse)], rel=4 * F32)


# ------------------------------------------------------------------ shape ops
def test_views_and_reshapes(device):
    x = tessera.arange(6.0, device=device)
    v = x.view(2, 3)
    assert v.tolist() == [[0, 1, 2], [3, 4, 5]] and x.view((3, -1)).shape == (3, 2)
    assert x.reshape(3, 2).tolist() == [[0, 1], [2, 3], [4, 5]]
    v.add_(1)  # a view: x changes too
    assert x.tolist() == [1, 2, 3, 4, 5, 6]
    v.sub_(1)
    assert tessera.reshape(x, (6, 1)).shape == (6, 1)
    assert v.t().tolist() == [list(c) for c in zip(*v.tolist())] and v.T.shape == (3, 2)
    assert v.permute(1, 0).shape == (3, 2) and tessera.permute(v, (1, 0)).shape == (3, 2)
    assert v.transpose(0, 1).tolist() == v.t().tolist()
    u = v.unsqueeze(0)
    assert u.shape == (1, 2, 3) and u.squeeze().shape == (2, 3) and u.squeeze(0).shape == (2, 3)
    assert u.flatten().shape == (6,) and u.flatten(1).shape == (1, 6)
    assert tessera.ones(1, 3).expand(2, 3).shape == (2, 3)
    assert tessera.ones(1, 3).expand(4, -1).shape == (4, 3)
    assert v.narrow(1, 1, 2).tolist() == [r[1:] for r in v.tolist()]
    assert v.select(0, 1).tolist() == v.tolist()[1]
    assert v.view_as(tessera.empty(3, 2)).shape == (3, 2)


def test_split_chunk_cat_stack(device):
    x = tessera.arange(10, device=device).view(2, 5)
    parts = x.chunk(2, dim=1)
    assert [p.shape for p in parts] == [(2, 3), (2, 2)]
    assert [p.shape for p in x.split(2, 1)] == [(2, 2), (2, 2), (2, 1)]
    assert [p.tolist() for p in tessera.split(x, [1, 4], dim=1)] == \
        [[[0], [5]], [[1, 2, 3, 4], [6, 7, 8, 9]]]
    assert [r.tolist() for r in x.unbind()] == x.tolist()
    assert tessera.cat(parts, dim=1).tolist() == x.tolist()
    assert tessera.cat([x, x]).shape == (4, 5)
    s = tessera.stack([x, x], dim=1)
    assert s.shape == (2, 2, 5) and s.select(1, 1).tolist() == x.tolist()
    with pytest.raises(TypeError, match="tensors"):
        tessera.cat(x)
    with pytest.raises(TypeError, match="tensors"):
        tessera.cat([x, 1])
    with pytest.raises(tessera.ShapeError):
        tessera.cat([x, tessera.zeros(3, 3, dtype=tessera.int64, device=device)])


def test_gather_index_select(device):
    x = tessera.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    idx = tessera.tensor([[1, 0], [0, 0]], device=device)
    assert x.gather(1, idx).tolist() == [[2, 1], [3, 3]]
    assert tessera.index_select(x, 0, tessera.tensor([1, 1], device=device)).tolist() == [[3, 4], [3, 4]]
    z = tessera.zeros(2, 2, device=device)
    assert z.scatter_add_(1, idx, x) is z and z.tolist() == [[2, 1], [7, 0]]


def test_shape_errors_are_exceptions(device):
    x = tessera.ones(2, 3, device=device)
    with pytest.raises(tessera.ShapeError):
        x + tessera.ones(4, device=device)
    with pytest.raises(tessera.ShapeError):
        x.view(4, 2)
    with pytest.raises(tessera.TesseraError):
        x @ x
    with pytest.raises(tessera.ArgumentError):
        x.sum(5)
    with pytest.raises(ValueError):  # ArgumentError is a ValueError too
        x.transpose(0, 7)
    with pytest.raises(TypeError, match="dim"):
        x.sum(dim="a")
    with pytest.raises(TypeError, match="size"):
        x.view(2, "3")


def test_iteration_format_deepcopy(device):
    import copy

    x = tessera.arange(6.0, device=device).view(2, 3)
    assert [r.tolist() for r in x] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError):
        iter(tessera.tensor(1.0))
    assert f"{x.sum():.2f}" == "15.00" and format(x) == repr(x)
    p = tessera.ones(2, device=device, requires_grad=True)
    p.tag = ["a"]
    q = copy.deepcopy(p)
    assert q is not p and q.requires_grad and q.is_leaf and q.tag == ["a"] and q.tag is not p.tag
    q.data.add_(1)
    assert p.tolist() == [1, 1] and q.tolist() == [2, 2]


def test_new_factories_and_random_fill(device):
    x = tessera.ones(2, dtype=tessera.float64, device=device)
    for y in (x.new_zeros(3), x.new_ones((3,)), x.new_empty(3), x.new_full((3,), 2.0),
              x.new_tensor([1, 2, 3])):
        assert y.shape == (3,) and y.dtype == tessera.float64 and y.device == x.device
    assert x.new_full((2,), 2.5).tolist() == [2.5, 2.5] and x.new_tensor([1, 2]).tolist() == [1, 2]
    assert x.new_zeros(2, dtype=tessera.int32).dtype == tessera.int32
    u = tessera.empty(2000, device=device).uniform_(-2, 3)
    vals = u.tolist()
    assert all(-2 <= v < 3 for v in vals) and abs(sum(vals) / 2000 - 0.5) < 0.15
    n = tessera.empty(2000, device=device).normal_(5, 0.5).tolist()
    assert abs(sum(n) / 2000 - 5) < 0.05
    assert sorted(tessera.randperm(6, device=device).tolist()) == list(range(6))
    assert set(tessera.bernoulli(tessera.full((100,), 0.5, device=device)).tolist()) == {0.0, 1.0}
    assert tessera.is_tensor(x) and not tessera.is_tensor([1]) and tessera.numel(x) == 2


def test_rng_state_printoptions_clamp_bounds(device):
    state = tessera.get_rng_state()
    a = tessera.rand(5, device=device).tolist()
    tessera.set_rng_state(state)
    assert tessera.rand(5, device=device).tolist() == a
    try:
        tessera.set_printoptions(precision=2)
        assert repr(tessera.tensor([1.23456])) == "tensor([1.23])"
    finally:
        tessera.set_printoptions(profile="default")
    assert repr(tessera.tensor([1.23456])) == "tensor([1.2346])"
    x = tessera.tensor([-1.0, 2.0, 5.0], device=device)
    assert x.clamp_min(0).tolist() == [0, 2, 5] and x.clamp_max(1).tolist() == [-1, 1, 1]


def test_subclass_with_dict_and_weakref():
    import weakref

    p = Param(tessera.ones(3))
    p.name = "w"
    assert isinstance(p, tessera.Tensor) and p.requires_grad and p.is_leaf and p.name == "w"
    assert type(p + 1) is tessera.Tensor
    r = weakref.ref(p)
    del p
    assert r() is None
    assert tessera.Tensor([1, 2]).dtype == tessera.float32
    assert tessera.Tensor(2, 3).shape == (2, 3)


def test_type_stubs_name_what_exists():
    """python/tessera/_C.pyi: every function and Tensor method it declares exists in tessera._C."""
    import ast
    import os

    stub = os.path.join(os.path.dirname(tessera.__file__), "_C.pyi")
    tree = ast.parse(open(stub).read())
    missing = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not hasattr(tessera._C, node.name):
            missing.append(node.name)
        if isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and not hasattr(tessera.Tensor, f.name):
                    missing.append("Tensor." + f.name)
    assert missing == []


class Param(tessera.Tensor):
    """nn.Parameter's way of subclassing Tensor"""

    def __new__(cls, data, requires_grad=True):
        return tessera.Tensor._make_subclass(cls, data, requires_grad)


def test_pickle_round_trip(device):
    import pickle

    x = tessera.tensor([[1.5, -2.25]], dtype=tessera.bfloat16, device=device)
    y = pickle.loads(pickle.dumps(x))
    assert (y.dtype, y.device, y.tolist()) == (x.dtype, x.device, x.tolist())
    p = Param(tessera.tensor([2**40 + 1.0], dtype=tessera.float64))
    p.tag = "w"
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Param and q.requires_grad and q.tag == "w" and q.tolist() == [2**40 + 1.0]
    i = tessera.tensor([2**62 + 3])
    assert pickle.loads(pickle.dumps(i)).tolist() == [2**62 + 3]


def test_data_assignment_keeps_the_c_tensor(device):
    # p.data = x changes what the same C tensor holds: an optimizer made before sees the new
    # values (a fresh C tensor behind the object would leave the optimizer on the old ones)
    p = tessera.nn.Parameter(tessera.randn(3, device=device))
    opt = tessera.optim.SGD([p], lr=0.5)
    p.data = tessera.full((3,), 2.0, device=device)
    p.grad = tessera.ones(3, device=device)
    opt.step()
    assert p.tolist() == [1.5, 1.5, 1.5] and p.requires_grad and p.is_leaf
    p.data = tessera.zeros(2, 2, device=device)  # another shape, as torch allows
    assert p.shape == (2, 2) and p.requires_grad
    with pytest.raises(TypeError):
        p.data = [1.0]


def test_dtype_strings_and_device_none():
    """a dtype may be given by name; an unknown name is a ValueError naming the function and the
    argument; device=None is the default device, in or out of a device scope"""
    assert tessera.zeros(2, dtype="float64").dtype is tessera.float64
    with pytest.raises(ValueError, match=r"zeros\(\): argument 'dtype': unknown dtype 'float33'"):
        tessera.zeros(2, dtype="float33")
    assert tessera.zeros(2, device=None).device == tessera.device("cpu")
    with tessera.device("sim:1"):
        assert tessera.ones(1, device=None).device == tessera.device("sim:1")


def test_print_options_persist_between_calls():
    """set_printoptions keeps what an earlier call set; profile="default" restores torch's"""
    t = tessera.arange(10, dtype=tessera.float32)
    try:
        tessera.set_printoptions(precision=2, threshold=5)
        tessera.set_printoptions(edgeitems=1)  # precision and threshold stay
        assert repr(t) == "tensor([0.,  ..., 9.])"
        tessera.set_printoptions(profile="default")
        assert repr(t) == "tensor([0., 1., 2., 3., 4., 5., 6., 7., 8., 9.])"
        tessera.set_printoptions(precision=2)
        assert repr(tessera.tensor([1.0 / 3])) == "tensor([0.33])"
    finally:
        tessera.set_printoptions(profile="default")
    assert repr(tessera.tensor([1.0 / 3])) == "tensor([0.3333])"


def test_type_names_and_argument_errors():
    names = {tessera.float32: "FloatTensor", tessera.float64: "DoubleTensor",
             tessera.float16: "HalfTensor", tessera.bfloat16: "BFloat16Tensor",
             tessera.int64: "LongTensor", tessera.int32: "IntTensor",
             tessera.uint8: "ByteTensor", tessera.bool: "BoolTensor"}
    for dt, name in names.items():
        assert tessera.zeros(1, dtype=dt).type() == "tessera." + name
    t = tessera.zeros(2, 3)
    assert t.stride(1) == 1 and t.stride(-2) == 3
    with pytest.raises(TypeError, match=r"stride\(\): argument 'dim' must be int, not str"):
        t.stride("a")
    with pytest.raises(OverflowError, match=r"view\(\): argument 'size' out of range"):
        t.view(2 ** 70)
    with pytest.raises(TypeError, match="bogus"):
        t.cuda(bogus=1)
    with pytest.raises(TypeError):
        t.cuda(0, False, None, 4)


def test_python_bool_beside_a_bool_tensor_stays_bool():
    """torch's weak scalars: a bool beside a bool tensor keeps bool, an int makes int64"""
    b = tessera.tensor([True, False])
    assert (b + True).dtype is tessera.bool and (b + True).tolist() == [True, True]
    assert (True + b).dtype is tessera.bool
    assert (b * False).tolist() == [False, False] and (b * False).dtype is tessera.bool
    assert (b + 1).dtype is tessera.int64 and (b + 1).tolist() == [2, 1]
    assert (b + 1.5).dtype is tessera.float32


def test_shape_and_reduction_argument_errors_name_the_function():
    t = tessera.ones(2, 3)
    with pytest.raises(TypeError, match=r"expand_as\(\): argument 'other' must be Tensor"):
        t.expand_as(5)
    with pytest.raises(TypeError, match=r"unbind\(\): argument 'dim' must be int"):
        t.unbind("x")
    with pytest.raises(TypeError, match=r"index_select\(\)"):
        t.index_select(0)
    with pytest.raises(TypeError, match=r"gather\(\)"):
        t.gather(1)
    with pytest.raises(ValueError, match=r"sum\(\): argument 'dtype': unknown dtype 'bogus'"):
        t.sum(dtype="bogus")
    assert [u.tolist() for u in t.unbind(1)] == [[1.0, 1.0]] * 3


def test_empty_tensors_to_python():
    assert tessera.zeros(0).tolist() == []
    assert tessera.zeros(2, 0).tolist() == [[], []]
    assert tessera.zeros(0, dtype=tessera.int64).tolist() == []


def test_rebuild_tensor_refuses_what_is_not_a_tensor_type():
    """the unpickling helper checks its class argument before using it"""
    for cls in (5, int):
        with pytest.raises(TypeError, match="_rebuild_tensor"):
            tessera._C._rebuild_tensor(cls, [1.0], "float32", "cpu", False, None)
    with pytest.raises(TypeError, match="_rebuild_tensor"):
        tessera._C._rebuild_tensor(tessera.Tensor, [1.0])


def test_device_objects_as_arguments():
    """a tessera.device object wherever a device string is taken"""
    d = tessera.device("sim:0")
    t = tessera.zeros(2, device=d)
    assert t.device == d
    assert t.to(tessera.device("cpu")).device == tessera.device("cpu")
    assert tessera.ones(1).to(device=d).device == d
    assert tessera.tensor([1.0], device=tessera.device("sim", 1)).device == tessera.device("sim:1")


def test_bmm_and_where_arguments():
    a = tessera.ones(2, 3, 4)
    with pytest.raises(TypeError, match=r"bmm\(\)"):
        a.bmm(5)
    with pytest.raises(TypeError):
        tessera.where()
    assert tessera.where(tessera.tensor([True, False]), tessera.ones(2),
                         tessera.zeros(2)).tolist() == [1.0, 0.0]


def test_uint64_past_int64_exact():
    """ints in [2^63, 2^64) for uint64: made, filled, read back and printed exactly, as torch"""
    big = 2**63 + 5
    t = tessera.tensor([big, 7], dtype=tessera.uint64)
    assert t.tolist() == [big, 7] and t[0].item() == big
    assert "9223372036854775813" in repr(t)
    assert tessera.full((2,), big, dtype=tessera.uint64).tolist() == [big, big]
    assert tessera.full_like(t, 2**64 - 1).tolist() == [2**64 - 1] * 2
    assert t.new_full((1,), big).tolist() == [big]
    assert tessera.zeros(1, dtype=tessera.int64).new_full((1,), 2**62 + 1).item() == 2**62 + 1
    assert tessera.tensor([2**63], dtype=tessera.float64).item() == 2.0**63
    for kw in ({}, {"dtype": tessera.int64}):
        with pytest.raises(OverflowError, match="fits uint64 only"):
            tessera.tensor([2**63], **kw)
    with pytest.raises(OverflowError):
        tessera.tensor([-2**63 - 1])
