"""Autocast's per-device op lists (src/amp/autocast_policy.c, docs/decisions/0033): under
tessera.autocast("cpu", dtype=bfloat16 / float16) each op's result dtype equals PyTorch 2.15's
under torch.autocast("cpu", ...), written out below from /opt/torch2/bin/torch-python running these
same programs (torch for tessera, torch.nn.functional for tessera.nn.functional).

Each op runs on three input classes: every floating input float32 (F32), every one in the region's
dtype (LOW), and MIX (the first input in the region's dtype and the others float32; a one-input op
gets the other half dtype). A code is six letters: F32 LOW MIX in a bfloat16 region, then the same
in a float16 one; L = bfloat16, O = float16, F = float32, X = an error.

sim follows CUDA's lists instead (decision 0033): a few rows check that it still differs there.
The ops whose Tessera front end has no autocast entry (einsum, ...) are not compared, nor cross,
which promotes mixed dtypes where PyTorch's refuses them (docs/AMP.md)."""
import pytest

import tessera as T
import tessera.nn.functional as F

# PyTorch 2.15, torch.autocast("cpu", dtype=torch.bfloat16), then dtype=torch.float16
TORCH_CPU = {
    "mm": "LLLOOO", "bmm": "LLLOOO", "matmul": "LLLOOO", "linear": "LLLOOO", "conv2d": "LLLOOO",
    "conv_transpose1d": "LLLOOO", "conv_transpose2d": "LLLOOO", "conv_transpose3d": "LLLOOO",
    "scaled_dot_product_attention": "LLLOOO",
    "exp": "FLOFOL", "log": "FLOFOL", "log1p": "FLOFOL", "log2": "FLOFOL", "log10": "FLOFOL",
    "expm1": "FLOFOL", "erfinv": "FLOFOL", "reciprocal": "FLOFOL", "rsqrt": "FLOFOL",
    "tan": "FLOFOL", "asin": "FLOFOL", "acos": "FLOFOL", "sinh": "FLOFOL", "cosh": "FLOFOL",
    "pow": "FLFFOF", "pow_scalar": "FLOFOL", "rpow_scalar": "FLOFOL", "softplus": "FLOFOL",
    "layer_norm": "FLLFOO", "rms_norm": "FLLFOO", "batch_norm": "FLLFOO",
    "sum": "FLOFOL", "prod": "FFFFFF", "softmax": "FLOFOL", "log_softmax": "FLOFOL",
    "cumsum": "FLOFOL", "cumprod": "FLOFOL", "logsumexp": "FLOFOL",
    "mse_loss": "FFFFFF", "l1_loss": "FFFFFF", "smooth_l1_loss": "FFFFFF", "huber_loss": "FFFFFF",
    "binary_cross_entropy_with_logits": "FFFFFF", "kl_div": "FFFFFF",
    "soft_margin_loss": "FFFFFF", "hinge_embedding_loss": "FFFFFF", "poisson_nll_loss": "FFFFFF",
    "margin_ranking_loss": "FFFFFF", "triplet_margin_loss": "FFFFFF",
    "cosine_embedding_loss": "FFFFFF", "nll_loss": "FFFFFF", "cross_entropy": "FFFFFF",
    "multi_margin_loss": "FFFFFF", "multilabel_margin_loss": "FFFFFF",
    "cat": "FLFFOF", "stack": "FLFFOF", "where": "FLFFOF", "scatter_add": "FLXFOX",
    "mean": "FLOFOL", "add": "FLFFOF", "mul": "FLFFOF", "sqrt": "FLOFOL", "relu": "FLOFOL",
    "atan": "FLOFOL", "erf": "FLOFOL", "sin": "FLOFOL", "tanh": "FLOFOL", "var": "FLOFOL",
    "max_pool2d": "FLOFOL", "avg_pool2d": "FLOFOL", "gelu": "FLOFOL", "silu": "FLOFOL",
    "sigmoid": "FLOFOL",
    "addmm": "LLLOOO", "baddbmm": "LLLOOO", "addbmm": "LLLOOO", "prelu": "LLLOOO",
    "conv1d": "LLLOOO", "conv3d": "LLLOOO", "addmv": "FLXFOX", "addr": "FLFFOF", "mv": "FLXFOX",
    "dot": "FLXFOX", "tensordot": "LLXOOX", "cdist": "FFFFFF", "group_norm": "FLLFOO",
    "binary_cross_entropy": "FFFFFF", "dist": "FLFFOF", "atan2": "FLFFOF", "addcmul": "FLFFOF",
    "addcdiv": "FLFFOF", "cosine_similarity": "FLFFOF", "renorm": "FLOFOL",
    "vector_norm": "FLOFOL", "matrix_norm": "FLOFOL",
}

# the programs: name -> (function, [(shape, kind)]); kind r: normal, p: in [0.25, 0.75),
# u: in [0.1, 0.9)
OPS = {
    "mm": (lambda a, b: T.mm(a, b), [((2, 3), "r"), ((3, 4), "r")]),
    "bmm": (lambda a, b: T.bmm(a, b), [((2, 2, 3), "r"), ((2, 3, 4), "r")]),
    "matmul": (lambda a, b: T.matmul(a, b), [((2, 3), "r"), ((3, 4), "r")]),
    "linear": (lambda x, w: F.linear(x, w), [((2, 3), "r"), ((4, 3), "r")]),
    "conv2d": (lambda x, w: F.conv2d(x, w), [((1, 2, 4, 4), "r"), ((3, 2, 2, 2), "r")]),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w),
                         [((1, 2, 5), "r"), ((2, 3, 2), "r")]),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w),
                         [((1, 2, 4, 4), "r"), ((2, 3, 2, 2), "r")]),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w),
                         [((1, 2, 3, 3, 3), "r"), ((2, 3, 2, 2, 2), "r")]),
    "scaled_dot_product_attention": (lambda q, k: F.scaled_dot_product_attention(q, k, k),
                                     [((1, 2, 3, 4), "r"), ((1, 2, 3, 4), "r")]),
    "exp": (T.exp, [((3,), "r")]), "log": (T.log, [((3,), "p")]),
    "log1p": (T.log1p, [((3,), "p")]), "log2": (T.log2, [((3,), "p")]),
    "log10": (T.log10, [((3,), "p")]), "expm1": (T.expm1, [((3,), "r")]),
    "erfinv": (T.erfinv, [((3,), "u")]), "reciprocal": (T.reciprocal, [((3,), "p")]),
    "rsqrt": (T.rsqrt, [((3,), "p")]), "tan": (T.tan, [((3,), "u")]),
    "asin": (T.asin, [((3,), "u")]), "acos": (T.acos, [((3,), "u")]),
    "sinh": (T.sinh, [((3,), "r")]), "cosh": (T.cosh, [((3,), "r")]),
    "pow": (T.pow, [((3,), "p"), ((3,), "p")]),
    "pow_scalar": (lambda a: T.pow(a, 2.0), [((3,), "p")]),
    "rpow_scalar": (lambda a: T.pow(2.0, a), [((3,), "r")]),
    "softplus": (F.softplus, [((3,), "r")]),
    "layer_norm": (lambda x, w: F.layer_norm(x, (3,), w), [((2, 3), "r"), ((3,), "p")]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (3,), w), [((2, 3), "r"), ((3,), "p")]),
    "batch_norm": (lambda x, w: F.batch_norm(x, None, None, w, training=True),
                   [((2, 3), "r"), ((3,), "p")]),
    "sum": (T.sum, [((2, 3), "r")]), "prod": (T.prod, [((2, 3), "p")]),
    "softmax": (lambda a: T.softmax(a, 1), [((2, 3), "r")]),
    "log_softmax": (lambda a: T.log_softmax(a, 1), [((2, 3), "r")]),
    "cumsum": (lambda a: T.cumsum(a, 1), [((2, 3), "r")]),
    "cumprod": (lambda a: T.cumprod(a, 0), [((2, 3), "p")]),
    "logsumexp": (lambda a: T.logsumexp(a, 1), [((2, 3), "r")]),
    "mse_loss": (F.mse_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "l1_loss": (F.l1_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "smooth_l1_loss": (F.smooth_l1_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "huber_loss": (F.huber_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits,
                                         [((2, 3), "r"), ((2, 3), "u")]),
    "kl_div": (lambda a, b: F.kl_div(a, b, reduction="sum"), [((2, 3), "r"), ((2, 3), "u")]),
    "soft_margin_loss": (F.soft_margin_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "hinge_embedding_loss": (F.hinge_embedding_loss, [((2, 3), "r"), ((2, 3), "r")]),
    "poisson_nll_loss": (F.poisson_nll_loss, [((2, 3), "r"), ((2, 3), "u")]),
    "margin_ranking_loss": (lambda a, b: F.margin_ranking_loss(a, b, T.ones(3)),
                            [((3,), "r"), ((3,), "r")]),
    "triplet_margin_loss": (lambda a, b: F.triplet_margin_loss(a, b, b * 0.5),
                            [((2, 3), "r"), ((2, 3), "r")]),
    "cosine_embedding_loss": (lambda a, b: F.cosine_embedding_loss(a, b, T.ones(2)),
                              [((2, 3), "r"), ((2, 3), "r")]),
    "nll_loss": (lambda a: F.nll_loss(a, T.tensor([0, 2])), [((2, 3), "r")]),
    "cross_entropy": (lambda a: F.cross_entropy(a, T.tensor([0, 2])), [((2, 3), "r")]),
    "multi_margin_loss": (lambda a: F.multi_margin_loss(a, T.tensor([0, 2])), [((2, 3), "r")]),
    "multilabel_margin_loss": (
        lambda a: F.multilabel_margin_loss(a, T.tensor([[0, -1, 1], [2, -1, 0]])),
        [((2, 3), "r")]),
    "cat": (lambda a, b: T.cat([a, b]), [((2, 3), "r"), ((2, 3), "r")]),
    "stack": (lambda a, b: T.stack([a, b]), [((2, 3), "r"), ((2, 3), "r")]),
    "where": (lambda a, b: T.where(a > 0, a, b), [((2, 3), "r"), ((2, 3), "r")]),
    "scatter_add": (
        lambda a, b: a.scatter_add(0, T.zeros(2, 3, dtype=T.long, device=a.device), b),
        [((2, 3), "r"), ((2, 3), "r")]),
    "mean": (T.mean, [((2, 3), "r")]), "add": (T.add, [((3,), "r"), ((3,), "r")]),
    "mul": (T.mul, [((3,), "r"), ((3,), "r")]), "sqrt": (T.sqrt, [((3,), "p")]),
    "relu": (F.relu, [((3,), "r")]), "atan": (T.atan, [((3,), "r")]),
    "erf": (T.erf, [((3,), "r")]), "sin": (T.sin, [((3,), "r")]),
    "tanh": (T.tanh, [((3,), "r")]), "var": (T.var, [((2, 3), "r")]),
    "max_pool2d": (lambda a: F.max_pool2d(a, 2), [((1, 1, 4, 4), "r")]),
    "avg_pool2d": (lambda a: F.avg_pool2d(a, 2), [((1, 1, 4, 4), "r")]),
    "gelu": (F.gelu, [((3,), "r")]), "silu": (F.silu, [((3,), "r")]),
    "sigmoid": (T.sigmoid, [((3,), "r")]),
    "addmm": (lambda i, a, b: T.addmm(i, a, b), [((2, 4), "r"), ((2, 3), "r"), ((3, 4), "r")]),
    "addmv": (lambda i, a, b: T.addmv(i, a, b), [((2,), "r"), ((2, 3), "r"), ((3,), "r")]),
    "addr": (lambda i, a, b: T.addr(i, a, b), [((2, 3), "r"), ((2,), "r"), ((3,), "r")]),
    "baddbmm": (lambda i, a, b: T.baddbmm(i, a, b),
                [((2, 2, 4), "r"), ((2, 2, 3), "r"), ((2, 3, 4), "r")]),
    "addbmm": (lambda i, a, b: T.addbmm(i, a, b),
               [((2, 4), "r"), ((2, 2, 3), "r"), ((2, 3, 4), "r")]),
    "mv": (T.mv, [((2, 3), "r"), ((3,), "r")]),
    "dot": (T.dot, [((3,), "r"), ((3,), "r")]),
    "tensordot": (lambda a, b: T.tensordot(a, b, dims=1), [((2, 3), "r"), ((3, 4), "r")]),
    "prelu": (F.prelu, [((2, 3), "r"), ((3,), "p")]),
    "cdist": (T.cdist, [((2, 3), "r"), ((4, 3), "r")]),
    "conv1d": (lambda x, w: F.conv1d(x, w), [((1, 2, 5), "r"), ((3, 2, 2), "r")]),
    "conv3d": (lambda x, w: F.conv3d(x, w), [((1, 2, 3, 3, 3), "r"), ((3, 2, 2, 2, 2), "r")]),
    "dist": (T.dist, [((2, 3), "r"), ((2, 3), "r")]),
    "atan2": (T.atan2, [((2, 3), "r"), ((2, 3), "r")]),
    "addcmul": (T.addcmul, [((2, 3), "r"), ((2, 3), "r"), ((2, 3), "r")]),
    "addcdiv": (T.addcdiv, [((2, 3), "r"), ((2, 3), "r"), ((2, 3), "p")]),
    "cosine_similarity": (F.cosine_similarity, [((2, 3), "r"), ((2, 3), "r")]),
    "group_norm": (lambda x, w: F.group_norm(x, 1, w), [((2, 3, 2), "r"), ((3,), "p")]),
    "renorm": (lambda a: T.renorm(a, 2, 0, 1.0), [((2, 3), "r")]),
    "vector_norm": (lambda a: T.linalg.vector_norm(a), [((2, 3), "r")]),
    "matrix_norm": (lambda a: T.linalg.matrix_norm(a), [((2, 3), "r")]),
    "binary_cross_entropy": (F.binary_cross_entropy, [((2, 3), "u"), ((2, 3), "u")]),
}

CODE = {T.bfloat16: "L", T.float16: "O", T.float32: "F", T.float64: "D"}


def make(shape, kind, dtype, device):
    if kind == "p":
        t = T.rand(shape) * 0.5 + 0.25
    elif kind == "u":
        t = T.rand(shape) * 0.8 + 0.1
    else:
        t = T.randn(shape)
    return t.to(dtype).to(device)


def result_codes(name, device, lower):
    fn, specs = OPS[name]
    other = T.float16 if lower == T.bfloat16 else T.bfloat16
    n = len(specs)
    classes = [[T.float32] * n, [lower] * n,
               [lower] + [T.float32] * (n - 1) if n > 1 else [other]]
    out = ""
    for dts in classes:
        ins = [make(s, k, dt, device) for (s, k), dt in zip(specs, dts)]
        try:
            with T.autocast(device.split(":")[0], dtype=lower):
                out += CODE.get(fn(*ins).dtype, "?")
        except Exception:
            out += "X"
    return out


@pytest.mark.parametrize("name", sorted(TORCH_CPU))
def test_cpu_autocast_dtypes_as_pytorch(name):
    T.manual_seed(0)
    got = result_codes(name, "cpu", T.bfloat16) + result_codes(name, "cpu", T.float16)
    assert got == TORCH_CPU[name], f"{name}: tessera {got}, PyTorch {TORCH_CPU[name]}"


# sim follows CUDA's lists (PyTorch's header lists; checked by tests/test_autocast_table.c too):
# float32 for the pointwise functions, reductions, softmaxes and norms the cpu leaves alone
SIM_CUDA = {"exp": "FFFFFF", "sum": "FFFFFF", "softmax": "FFFFFF", "cumsum": "FFFFFF",
            "log2": "FFFFFF", "layer_norm": "FFFFFF", "mm": "LLLOOO", "prod": "FFFFFF",
            "scatter_add": "FLFFOF", "addmv": "LLLOOO", "mv": "LLLOOO", "dot": "FLFFOF",
            "tensordot": "FLFFOF", "cdist": "FFFFFF", "group_norm": "FFFFFF",
            "binary_cross_entropy": "XXXXXX", "vector_norm": "FFFFFF", "matrix_norm": "FFFFFF",
            "dist": "FFFFFF", "renorm": "FFFFFF", "cosine_similarity": "FFFFFF",
            "prelu": "LLLOOO", "conv1d": "LLLOOO"}


@pytest.mark.skipif(T.sim.device_count() < 1, reason="needs a sim device")
@pytest.mark.parametrize("name", sorted(SIM_CUDA))
def test_sim_follows_cuda_lists(name):
    T.manual_seed(0)
    got = result_codes(name, "sim:0", T.bfloat16) + result_codes(name, "sim:0", T.float16)
    assert got == SIM_CUDA[name], f"{name} on sim: {got}, CUDA's lists {SIM_CUDA[name]}"


@pytest.mark.parametrize("low", [T.bfloat16, T.float16])
def test_cpu_norms_computed_in_float32(low):
    """layer_norm and rms_norm of a lower-precision input with a float32 weight under the cpu's
    autocast: computed in float32, then rounded to the input's dtype (the same bits as doing so
    by hand), not in the input's dtype."""
    T.manual_seed(3)
    x = (T.randn(3, 5) * 3 + 1).to(low)
    w = T.randn(5) + 1
    with T.autocast("cpu", dtype=low):
        y1 = F.layer_norm(x, (5,), w)
        y2 = F.rms_norm(x, (5,), w)
    assert y1.dtype == low and y2.dtype == low
    assert y1.tolist() == F.layer_norm(x.float(), (5,), w).to(low).tolist()
    assert y2.tolist() == F.rms_norm(x.float(), (5,), w).to(low).tolist()
