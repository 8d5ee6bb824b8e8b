"""test_nn.py — tessera.nn: Module registration and PyTorch's state-dict names, load_state_dict's
errors, .to() keeping Parameter objects, every layer's and loss's forward against a float64 NumPy
reference, the C-built modules (attention, GPT, ResNet) and a SimpleNN that learns; on cpu and
sim:0.

Tolerances: float32 inputs of magnitude <= ~3 summed over K <= 150 terms give a rounding error
below K * 2^-24 * |terms| ~ 1e-4 * 3 in the worst case, far less typically; RTOL/ATOL 1e-5 hold
for the small K used here (K <= 75), and each test names a larger one where K is larger."""
import math

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.nn.functional as F  # noqa: E402

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def T(a, device="cpu", dtype=None):
    a = np.asarray(a)
    if dtype is None:
        dtype = tessera.int64 if a.dtype.kind in "iu" else tessera.float32
    return tessera.tensor(a.tolist(), dtype=dtype, device=device)


def N(t):
    return np.array(t.detach().cpu().double().tolist(), dtype=np.float64).reshape(tuple(t.shape))


def close(t, ref, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(N(t), ref, rtol=rtol, atol=atol)


def rng(seed=0):
    return np.random.default_rng(seed)


def f32(a):
    """the float32 values the tensors hold, as float64 (the reference starts from them)"""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


class SimpleNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


class Net(nn.Module):
    """nesting of every container, a buffer, a shared parameter"""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(4, 2), nn.Linear(2, 2, bias=False)])
        self.extra = nn.ModuleDict({"norm": nn.LayerNorm(2)})
        self.register_buffer("step", tessera.zeros(1))
        self.register_buffer("scratch", tessera.zeros(1), persistent=False)
        self.tied = self.heads[1]  # the same module twice: listed once


# ------------------------------------------------------------------ registration, names
def test_simple_nn_names_and_repr():
    m = SimpleNN()
    assert list(m.state_dict()) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_parameters()] == list(m.state_dict())
    assert [type(c).__name__ for c in m.children()] == ["Linear", "ReLU", "Linear"]
    assert isinstance(m.fc1.weight, nn.Parameter) and m.fc1.weight.requires_grad
    assert tuple(m.fc1.weight.shape) == (128, 784) and tuple(m.fc2.bias.shape) == (10,)
    assert sum(p.numel() for p in m.parameters()) == 784 * 128 + 128 + 128 * 10 + 10
    assert repr(m) == ("SimpleNN(\n"
                       "  (fc1): Linear(in_features=784, out_features=128, bias=True)\n"
                       "  (relu): ReLU()\n"
                       "  (fc2): Linear(in_features=128, out_features=10, bias=True)\n"
                       ")")


def test_nested_names_buffers_and_sharing():
    m = Net()
    assert list(m.state_dict()) == [
        "step", "features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
        "features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked",
        "heads.0.weight", "heads.0.bias", "heads.1.weight", "extra.norm.weight",
        "extra.norm.bias", "tied.weight"]  # PyTorch's state_dict lists a shared module twice
    assert [n for n, _ in m.named_buffers()] == [
        "step", "scratch", "features.1.running_mean", "features.1.running_var",
        "features.1.num_batches_tracked"]
    assert [n for n, _ in m.named_modules()] == [
        "", "features", "features.0", "features.1", "features.2", "heads", "heads.0", "heads.1",
        "extra", "extra.norm"]
    assert len(list(m.parameters())) == 9
    assert repr(m.features[0]) == "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(m.features[1]) == ("BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, "
                                   "track_running_stats=True)")
    assert repr(m.extra["norm"]) == "LayerNorm((2,), eps=1e-05, elementwise_affine=True)"


def test_setattr_rules():
    m = nn.Linear(2, 3)
    with pytest.raises(TypeError, match="cannot assign"):
        m.weight = tessera.zeros(3, 2)  # a plain Tensor where a Parameter is registered
    m.weight = nn.Parameter(tessera.zeros(3, 2))
    assert N(m.weight).sum() == 0
    m.sub = nn.ReLU()
    assert "sub" in dict(m.named_children())
    del m.sub
    assert "sub" not in dict(m.named_children())
    with pytest.raises(KeyError):
        m.register_buffer("a.b", tessera.zeros(1))
    with pytest.raises(AttributeError, match="cannot assign"):
        class Bad(nn.Module):
            def __init__(self):
                self.p = nn.Parameter(tessera.zeros(1))
        Bad()


def test_load_state_dict_errors_and_copy():
    src, dst = SimpleNN(), SimpleNN()
    w = dst.fc1.weight
    dst.load_state_dict(src.state_dict())
    assert dst.fc1.weight is w
    np.testing.assert_array_equal(N(dst.fc1.weight), N(src.fc1.weight))

    sd = src.state_dict()
    del sd["fc2.bias"]
    sd["extra.weight"] = tessera.zeros(1)
    with pytest.raises(RuntimeError) as e:
        dst.load_state_dict(sd)
    assert str(e.value) == ('Error(s) in loading state_dict for SimpleNN:\n\t'
                            'Missing key(s) in state_dict: "fc2.bias". \n\t'
                            'Unexpected key(s) in state_dict: "extra.weight". ')
    r = dst.load_state_dict(sd, strict=False)
    assert r.missing_keys == ["fc2.bias"] and r.unexpected_keys == ["extra.weight"]

    sd = src.state_dict()
    sd["fc1.bias"] = tessera.zeros(3)
    before = N(dst.fc1.weight)
    with pytest.raises(RuntimeError, match="size mismatch for fc1.bias"):
        dst.load_state_dict(sd, strict=False)
    # nothing was copied (the check runs first)
    np.testing.assert_array_equal(N(dst.fc1.weight), before)


def test_to_keeps_parameters_and_moves_data(device):
    m = Net()
    m.eval()
    params = list(m.parameters())
    w_before = N(m.heads[0].weight)
    out = m.heads[0](tessera.ones(1, 4))
    out.sum().backward()
    assert m.to(device) is m
    assert all(a is b for a, b in zip(params, m.parameters()))
    for t in list(m.parameters()) + list(m.buffers()):
        assert str(t.device) == device
    assert str(m.heads[0].weight.grad.device) == device
    np.testing.assert_array_equal(N(m.heads[0].weight), w_before)
    x = T(rng().standard_normal((2, 3, 5, 5)), device)
    y = m.features(x)
    assert str(y.device) == device
    m.double()
    assert m.heads[0].weight.dtype == tessera.float64
    assert m.features[1].num_batches_tracked.dtype == tessera.int64  # integers keep theirs
    m.float().cpu()
    assert str(m.heads[0].weight.device) == "cpu"


def test_optimizer_follows_to(device):
    m = nn.Linear(3, 1)
    opt = tessera.optim.SGD(m.parameters(), lr=0.5)
    m.to(device)
    before = N(m.weight)
    m(T(np.ones((1, 3)), device)).sum().backward()
    opt.step()
    np.testing.assert_allclose(N(m.weight), before - 0.5, rtol=0, atol=1e-6)


def test_train_eval_zero_grad():
    m = Net()
    assert m.training and m.features[1].training
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    lin = nn.Linear(2, 1)
    lin(tessera.ones(1, 2)).sum().backward()
    lin.zero_grad(set_to_none=False)
    assert N(lin.weight.grad).tolist() == [[0.0, 0.0]]
    lin.zero_grad()
    assert lin.weight.grad is None
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen[-1] == "Net" and seen.count("Linear") == 3  # heads.1 again as `tied`, as torch


def test_forward_hooks_and_parameter_repr():
    lin = nn.Linear(2, 2)
    calls = []
    h = lin.register_forward_hook(lambda mod, args, out: calls.append(tuple(out.shape)))
    lin(tessera.ones(3, 2))
    h.remove()
    lin(tessera.ones(3, 2))
    assert calls == [(3, 2)]
    p = nn.Parameter(tessera.ones(2))
    assert repr(p) == "Parameter containing:\ntensor([1., 1.], requires_grad=True)"
    assert not nn.Parameter(tessera.ones(1), requires_grad=False).requires_grad


# ------------------------------------------------------------------ layers against NumPy
def ref_conv2d(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return y + b[None, :, None, None]


def ref_pool(x, k, s, op):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = op(x[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return y


def test_linear_conv_pool(device):
    r = rng(1)
    lin = nn.Linear(5, 3).to(device)
    x = f32(r.standard_normal((4, 5)))
    close(lin(T(x, device)), x @ N(lin.weight).T + N(lin.bias))

    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1).to(device)
    x = f32(r.standard_normal((2, 2, 7, 7)))
    close(conv(T(x, device)), ref_conv2d(x, N(conv.weight), N(conv.bias), 2, 1))

    grouped = nn.Conv2d(4, 2, 3, groups=2, bias=False).to(device)
    assert grouped.extra_repr().endswith("groups=2, bias=False")
    x = f32(r.standard_normal((1, 4, 5, 5)))
    w = N(grouped.weight)
    ref = np.concatenate([ref_conv2d(x[:, 2 * g:2 * g + 2], w[g:g + 1], np.zeros(1), 1, 0)
                          for g in range(2)], axis=1)
    close(grouped(T(x, device)), ref)

    x = f32(r.standard_normal((2, 3, 6, 6)))
    close(nn.MaxPool2d(2)(T(x, device)), ref_pool(x, 2, 2, np.max))
    close(nn.AvgPool2d(3, stride=1)(T(x, device)), ref_pool(x, 3, 1, np.mean))
    close(nn.AdaptiveAvgPool2d((1, 1))(T(x, device)), x.mean(axis=(2, 3), keepdims=True))
    close(nn.Flatten()(T(x, device)), x.reshape(2, -1))


def test_activations_and_softmax(device):
    x = f32(rng(2).standard_normal((3, 4)) * 2)
    t = T(x, device)
    erf = np.vectorize(math.erf)
    close(nn.ReLU()(t), np.maximum(x, 0))
    close(nn.GELU()(t), 0.5 * x * (1 + erf(x / math.sqrt(2))))
    close(nn.GELU(approximate="tanh")(t),
          0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))
    close(nn.Sigmoid()(t), 1 / (1 + np.exp(-x)))
    close(nn.Tanh()(t), np.tanh(x))
    close(F.silu(t), x / (1 + np.exp(-x)))
    close(F.softplus(t), np.log1p(np.exp(x)))
    close(nn.LeakyReLU(0.2)(t), np.where(x > 0, x, 0.2 * x))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close(nn.Softmax(dim=1)(t), e / e.sum(axis=1, keepdims=True))
    close(F.log_softmax(t, dim=1), np.log(e / e.sum(axis=1, keepdims=True)))
    close(F.softmax(t, dim=0), np.exp(x) / np.exp(x).sum(axis=0))


def test_norms_embedding_dropout(device):
    r = rng(3)
    x = f32(r.standard_normal((4, 3, 2, 2)) * 3 + 1)
    bn = nn.BatchNorm2d(3).to(device)
    y = bn(T(x, device))
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    close(y, (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5))
    close(bn.running_mean, 0.1 * mean)
    close(bn.running_var, 0.9 + 0.1 * x.var(axis=(0, 2, 3), ddof=1))
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = N(bn.running_mean), N(bn.running_var)
    close(bn(T(x, device)), (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5))
    assert bn.num_batches_tracked.item() == 1
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(T(x[0], device))

    z = f32(r.standard_normal((2, 5)))
    ln = nn.LayerNorm(5).to(device)
    close(ln(T(z, device)),
          (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-5))

    emb = nn.Embedding(6, 3).to(device)
    idx = np.array([[0, 5], [2, 2]])
    close(emb(T(idx, device)), N(emb.weight)[idx], rtol=0, atol=0)

    d = nn.Dropout(0.5).to(device)
    ones = np.ones((64, 64))
    y = N(d(T(ones, device)))
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.3 < (y == 0).mean() < 0.7
    d.eval()
    close(d(T(ones, device)), ones, rtol=0, atol=0)


def test_attention_functional(device):
    r = rng(4)
    q, k, v = (f32(r.standard_normal((2, 3, 4))) for _ in range(3))
    s = q @ k.transpose(0, 2, 1) / 2.0
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    y = F.scaled_dot_product_attention(T(q, device), T(k, device), T(v, device))
    close(y, w @ v)
    mask = np.tril(np.ones((3, 3), dtype=bool))
    sc = np.where(mask, s, -np.inf)
    wc = np.exp(sc - sc.max(-1, keepdims=True))
    wc /= wc.sum(-1, keepdims=True)
    close(F.scaled_dot_product_attention(T(q, device), T(k, device), T(v, device),
                                         is_causal=True), wc @ v)


def test_losses(device):
    r = rng(5)
    x = f32(r.standard_normal((4, 3)))
    y = np.array([0, 2, 1, 2])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    nll = -logp[np.arange(4), y]
    close(nn.CrossEntropyLoss()(T(x, device), T(y, device)), nll.mean())
    close(F.cross_entropy(T(x, device), T(y, device), reduction="none"), nll)
    close(F.cross_entropy(T(x, device), T(y, device), reduction="sum"), nll.sum())
    w = np.array([1.0, 2.0, 0.5])
    close(F.cross_entropy(T(x, device), T(y, device), weight=T(w, device)),
          (nll * w[y]).sum() / w[y].sum())
    close(nn.NLLLoss()(T(logp, device), T(y, device)), nll.mean())
    ign = np.array([0, -100, 1, 2])
    close(F.cross_entropy(T(x, device), T(ign, device)), nll[[0, 2, 3]].mean())

    a, b = f32(r.standard_normal((3, 2))), f32(r.standard_normal((3, 2)))
    close(nn.MSELoss()(T(a, device), T(b, device)), ((a - b) ** 2).mean())
    close(nn.L1Loss(reduction="sum")(T(a, device), T(b, device)), np.abs(a - b).sum())
    d = np.abs(a - b)
    close(nn.SmoothL1Loss()(T(a, device), T(b, device)),
          np.where(d < 1, 0.5 * d ** 2, d - 0.5).mean())
    t = f32(r.uniform(0, 1, (3, 2)))
    close(nn.BCEWithLogitsLoss()(T(a, device), T(t, device)),
          (np.log1p(np.exp(a)) - t * a).mean())
    p = 1 / (1 + np.exp(-a))
    p32 = f32(p)
    close(nn.BCELoss()(T(p32, device), T(t, device)),
          -(t * np.log(p32) + (1 - t) * np.log(1 - p32)).mean(), rtol=1e-4)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.MSELoss(reduction="avg")


def test_errors_become_exceptions(device):
    lin = nn.Linear(3, 2).to(device)
    with pytest.raises(TypeError, match="input"):
        lin([1.0, 2.0, 3.0])
    with pytest.raises(tessera.TesseraError):
        lin(T(np.ones((2, 4)), device))  # wrong inner size
    if device != "cpu":
        with pytest.raises(tessera.DeviceError):
            lin(T(np.ones((2, 3)), "cpu"))


# ------------------------------------------------------------------ C-built modules
def test_multihead_attention(device):
    mha = nn.MultiheadAttention(4, 2, batch_first=True).to(device)
    assert list(mha.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                      "out_proj.bias"]
    r = rng(6)
    x = f32(r.standard_normal((2, 3, 4)))
    out, w = mha(T(x, device), T(x, device), T(x, device))
    W, B = N(mha.in_proj_weight), N(mha.in_proj_bias)
    q, k, v = (x @ W[i * 4:(i + 1) * 4].T + B[i * 4:(i + 1) * 4] for i in range(3))
    heads, weights = [], []
    for h in range(2):
        sl = slice(2 * h, 2 * h + 2)
        s = q[..., sl] @ k[..., sl].transpose(0, 2, 1) / math.sqrt(2)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        heads.append(p @ v[..., sl])
        weights.append(p)
    ref = np.concatenate(heads, -1) @ N(mha.out_proj.weight).T + N(mha.out_proj.bias)
    close(out, ref)
    close(w, sum(weights) / 2)
    # the C forward reads the Python Parameters: a copy into them changes the output
    mha.load_state_dict({k: v * 0 for k, v in mha.state_dict().items()})
    close(mha(T(x, device), T(x, device), T(x, device), need_weights=False)[0], np.zeros(x.shape),
          rtol=0, atol=0)


def test_transformer_layer_and_gpt(device):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    assert list(layer.state_dict()) == [
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
        "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    layer.to(device)
    assert tuple(layer(T(np.ones((1, 3, 8)), device)).shape) == (1, 3, 8)

    gpt = nn.GPT(vocab_size=11, context=8, n_layer=1, n_head=2, n_embd=8)
    names = list(gpt.state_dict())
    assert names[:2] == ["tok_emb.weight", "pos_emb.weight"] and "head.weight" not in names
    assert names[-2:] == ["ln_f.weight", "ln_f.bias"]
    p = gpt.tok_emb.weight
    gpt.to(device)
    assert gpt.tok_emb.weight is p and str(p.device) == device
    idx = T(np.array([[1, 2, 3]]), device)
    logits = gpt(idx)
    assert tuple(logits.shape) == (1, 3, 11) and str(logits.device) == device
    opt = tessera.optim.AdamW(gpt.parameters(), lr=1e-2)
    F.cross_entropy(logits.reshape(3, 11), T(np.array([2, 3, 4]), device)).backward()
    before = N(p)
    opt.step()
    assert not np.array_equal(N(p), before)  # the C forward's weights are the optimized ones
    out = gpt.generate(idx, 2, greedy=True)
    assert tuple(out.shape) == (1, 5)


def test_resnet20_names():
    m = nn.models.resnet20()
    names = list(m.state_dict())
    assert names[:6] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                         "bn1.running_var", "bn1.num_batches_tracked"]
    assert "layer3.2.bn2.weight" in names and names[-2:] == ["fc.weight", "fc.bias"]
    assert sum(p.numel() for p in m.parameters()) == 269722  # He et al.'s 0.27M
    m.eval()
    assert tuple(m(tessera.randn(2, 3, 32, 32)).shape) == (2, 10)


# ------------------------------------------------------------------ data parallel
def test_data_parallel_matches_one_device():
    """sim:0 and sim:1: the same output and gradients as the module alone (rounding only: the two
    halves are computed as the whole batch's rows are)"""
    if tessera.sim.device_count() < 2:
        pytest.skip("needs 2 sim devices")
    tessera.manual_seed(1)
    m = SimpleNN().to("sim:0")
    dp = nn.DataParallel(m, device_ids=["sim:0", "sim:1"])
    assert list(dp.state_dict())[0] == "module.fc1.weight"
    r = rng(8)
    x = T(f32(r.standard_normal((5, 784))), "sim:0")
    y = T(r.integers(0, 10, 5), "sim:0")
    F.cross_entropy(m(x), y).backward()
    want_out, want_grad = N(m(x)), N(m.fc1.weight.grad)
    m.zero_grad()
    out = dp(x)
    assert str(out.device) == "sim:0"
    F.cross_entropy(out, y).backward()
    close(out, want_out)
    close(m.fc1.weight.grad, want_grad)
    assert m.fc1.weight.grad is not None and str(m.fc1.weight.grad.device) == "sim:0"
    if tessera.cuda.device_count() == 0:  # the default without CUDA: every sim device
        assert nn.DataParallel(m).device_ids == [f"sim:{i}" for i in
                                                 range(tessera.sim.device_count())]
    with pytest.raises(RuntimeError, match="device_ids\\[0\\]"):
        nn.DataParallel(SimpleNN(), device_ids=["sim:0", "sim:1"])


# ------------------------------------------------------------------ memory
def test_no_tensor_leaks(device):
    """training steps, state dicts, C-built modules, errors: every C tensor is released again
    (the live-tensor count returns to where it was)"""
    import gc

    def live():
        gc.collect()
        return tessera.cuda.memory_stats(device)["live_tensors"]

    def work():
        m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
        m.to(device)
        opt = tessera.optim.Adam(m.parameters())
        scaler = tessera.amp.GradScaler()
        x, y = T(np.ones((3, 4)), device), T(np.array([0, 1, 1]), device)
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(m(x), y)).backward()
            scaler.step(opt)
            scaler.update()
        m.load_state_dict(m.state_dict())
        opt.load_state_dict(opt.state_dict())
        with pytest.raises(TypeError):
            m(1)
        with pytest.raises(tessera.TesseraError):
            m(T(np.ones((3, 5)), device))
        g = nn.GPT(vocab_size=5, context=4, n_layer=1, n_head=1, n_embd=4).to(device)
        g(T(np.array([[1, 2]]), device)).sum().backward()

    work()  # caches (autocast, allocator) settle
    before = live()
    for _ in range(3):
        work()
    assert live() == before


# ------------------------------------------------------------------ training
def test_simple_nn_learns(device):
    tessera.manual_seed(0)
    m = SimpleNN().to(device)
    r = rng(7)
    x = T(f32(r.standard_normal((32, 784))), device)
    y = T(r.integers(0, 10, 32), device)
    opt = tessera.optim.SGD(m.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss()
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = crit(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a + 1e-6 for a, b in zip(losses, losses[1:]))


def test_c_module_train_and_eval_reach_the_c_forward():
    """eval() on a C-built ResNet makes its BatchNorms use (and keep) the running statistics:
    two eval forwards of different batches leave the buffers alone and give each sample the same
    output whatever its batch; train() goes back to batch statistics, updating the buffers"""
    tessera.manual_seed(2)
    m = nn.models.resnet20()
    x = tessera.randn(4, 3, 32, 32)
    m.eval()
    rm = m.bn1.running_mean.tolist()
    whole = m(x)
    first = m(x[:1])
    assert m.bn1.running_mean.tolist() == rm
    # eval: a sample's output does not depend on the rest of its batch (float32 rounding only)
    for a, b in zip(whole[0].tolist(), first[0].tolist()):
        assert abs(a - b) <= 1e-4 * (1 + abs(a))
    m.train()
    m(x)
    assert m.bn1.running_mean.tolist() != rm  # batch statistics, running buffers updated
    train_first = m(x[:1] * 1.0)[0].tolist()
    assert any(abs(a - b) > 1e-3 for a, b in zip(train_first, first[0].tolist()))


def test_zero_grad_binding_refuses_a_non_sequence():
    with pytest.raises(TypeError, match="zero_grad"):
        tessera._C._nn_zero_grad(5, True)


def test_reassigned_parameter_and_child_keep_their_place():
    """PyTorch's order: a parameter (or child) assigned again stays where it was registered"""
    m = nn.Module()
    m.a = nn.Parameter(tessera.zeros(1))
    m.b = nn.Parameter(tessera.zeros(2))
    m.first = nn.Linear(1, 1)
    m.second = nn.Linear(1, 1)
    m.a = nn.Parameter(tessera.ones(3))
    m.first = nn.Linear(2, 2)
    assert [n for n, _ in m.named_parameters()] == [
        "a", "b", "first.weight", "first.bias", "second.weight", "second.bias"]
    assert m.a.shape == (3,) and m.first.weight.shape == (2, 2)


def test_embedding_padding_idx_gets_no_gradient(device):
    """nn.Embedding(padding_idx=-1) and F.embedding(padding_idx=...) against PyTorch 2.15's numbers
    (printed by torch): the padding row's uses give it no gradient, their values are its row."""
    e = nn.Embedding(4, 2, padding_idx=-1).to(device)
    assert e.padding_idx == 3
    with tessera.no_grad():
        e.weight.copy_(tessera.arange(8.0).view(4, 2).to(device))
    y = e(tessera.tensor([[3, 1], [3, 0]]).to(device))
    (y * tessera.arange(1.0, 9.0).view(2, 2, 2).to(device)).sum().backward()
    assert y.to("cpu").tolist() == [[[6.0, 7.0], [2.0, 3.0]], [[6.0, 7.0], [0.0, 1.0]]]
    assert e.weight.grad.to("cpu").tolist() == [[7.0, 8.0], [3.0, 4.0], [0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(tessera.tensor([0]), tessera.ones(3, 2), padding_idx=3)
