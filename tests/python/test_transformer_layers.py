"""test_transformer_layers.py — tessera.nn.TransformerDecoderLayer, TransformerDecoder,
TransformerEncoder, Transformer, MultiheadAttention's add_bias_kv / add_zero_attn / kdim / vdim /
per-head weights, F.multi_head_attention_forward, SDPA's enable_gqa and TransformerEncoderLayer
with a callable activation: values against a NumPy float64 reimplementation written here
(PyTorch's equations), PyTorch's state-dict names, gradients against central differences, the
"Language Modeling with nn.Transformer" tutorial's usage, and training that lowers the loss; on
cpu and sim:0.

Tolerances: modules run in float64 and the reference sums the same few (<= 16) terms per dot
product in another order: differences ~1e-15; 1e-11 leaves room for exp/sqrt's last bits over
a few layers. Central differences with h = 1e-6 in float64: truncation ~h^2 * |f'''| and
rounding ~1e-16 * |f| / h, both below 1e-8 here; 1e-6 is the bound used."""
import math

import numpy as np
import pytest

import tessera
import tessera.nn as nn
import tessera.nn.functional as F

TOL = 1e-11
E, H, FF = 8, 2, 16

# PyTorch 2.15's names, printed by
#   /opt/torch2/bin/torch-python -c "import torch; print(list(torch.nn.Transformer(d_model=8,
#   nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16).state_dict()))"
TORCH_TRANSFORMER_KEYS = [
    'encoder.layers.0.self_attn.in_proj_weight', 'encoder.layers.0.self_attn.in_proj_bias',
    'encoder.layers.0.self_attn.out_proj.weight', 'encoder.layers.0.self_attn.out_proj.bias',
    'encoder.layers.0.linear1.weight', 'encoder.layers.0.linear1.bias',
    'encoder.layers.0.linear2.weight', 'encoder.layers.0.linear2.bias',
    'encoder.layers.0.norm1.weight', 'encoder.layers.0.norm1.bias',
    'encoder.layers.0.norm2.weight', 'encoder.layers.0.norm2.bias', 'encoder.norm.weight',
    'encoder.norm.bias', 'decoder.layers.0.self_attn.in_proj_weight',
    'decoder.layers.0.self_attn.in_proj_bias', 'decoder.layers.0.self_attn.out_proj.weight',
    'decoder.layers.0.self_attn.out_proj.bias', 'decoder.layers.0.multihead_attn.in_proj_weight',
    'decoder.layers.0.multihead_attn.in_proj_bias',
    'decoder.layers.0.multihead_attn.out_proj.weight',
    'decoder.layers.0.multihead_attn.out_proj.bias', 'decoder.layers.0.linear1.weight',
    'decoder.layers.0.linear1.bias', 'decoder.layers.0.linear2.weight',
    'decoder.layers.0.linear2.bias', 'decoder.layers.0.norm1.weight',
    'decoder.layers.0.norm1.bias', 'decoder.layers.0.norm2.weight', 'decoder.layers.0.norm2.bias',
    'decoder.layers.0.norm3.weight', 'decoder.layers.0.norm3.bias', 'decoder.norm.weight',
    'decoder.norm.bias']
# printed the same way from torch.nn.MultiheadAttention(8, 2, **kw).state_dict()
TORCH_MHA_KEYS = {
    "add_bias_kv": ['in_proj_weight', 'in_proj_bias', 'bias_k', 'bias_v', 'out_proj.weight',
                    'out_proj.bias'],
    "kdim": ['q_proj_weight', 'k_proj_weight', 'v_proj_weight', 'in_proj_bias',
             'out_proj.weight', 'out_proj.bias'],
}


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def T(a, device, dtype=None):
    a = np.asarray(a)
    t = tessera.from_numpy(np.ascontiguousarray(a))
    return t.to(device)


def N(t):
    return t.detach().to("cpu").numpy()


def randomize(module, rng, device):
    """every parameter to N(0, 0.5) values in float64 (norm weights around 1); returns the numpy
    state dict"""
    module.to(dtype=tessera.float64)
    sd = {}
    for k, v in module.state_dict().items():
        a = rng.normal(0.0, 0.5, size=tuple(v.shape))
        if k.split(".")[-2:][0].startswith("norm") and k.endswith("weight"):
            a = 1.0 + 0.2 * a
        sd[k] = a
    module.load_state_dict({k: tessera.from_numpy(v) for k, v in sd.items()})
    module.to(device)
    return sd


# ---------------------------------------------------------------- NumPy float64 reference
def lin(x, w, b):
    return x @ w.T + (0.0 if b is None else b)


def lnorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def softmax(s):
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(-1, keepdims=True)


def as_float_mask(m):
    if m is None:
        return None
    m = np.asarray(m)
    return np.where(m, -np.inf, 0.0) if m.dtype == bool else m


def ref_mha(q, k, v, P, p, nh, attn_mask=None, kpm=None, bias_kv=False, zero_attn=False):
    """seq-first q [L, B, E], k/v [S, B, *] -> (out [L, B, E], weights [B, nh, L, S'])"""
    e = q.shape[-1]
    if p + "in_proj_weight" in P:
        w = P[p + "in_proj_weight"]
        wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
    else:
        wq, wk, wv = P[p + "q_proj_weight"], P[p + "k_proj_weight"], P[p + "v_proj_weight"]
    b = P.get(p + "in_proj_bias")
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
    Q, K, V = lin(q, wq, bq), lin(k, wk, bk), lin(v, wv, bv)
    L, B, _ = Q.shape
    am = as_float_mask(attn_mask)
    kp = None if kpm is None else np.asarray(kpm)
    if bias_kv:
        K = np.concatenate([K, np.broadcast_to(P[p + "bias_k"], (1, B, e))])
        V = np.concatenate([V, np.broadcast_to(P[p + "bias_v"], (1, B, e))])
        am = None if am is None else np.pad(am, [(0, 0)] * (am.ndim - 1) + [(0, 1)])
        kp = None if kp is None else np.pad(kp, [(0, 0), (0, 1)])
    hd = e // nh
    Qh = Q.reshape(L, B, nh, hd).transpose(1, 2, 0, 3)
    Kh = K.reshape(K.shape[0], B, nh, hd).transpose(1, 2, 0, 3)
    Vh = V.reshape(V.shape[0], B, nh, hd).transpose(1, 2, 0, 3)
    if zero_attn:
        z = np.zeros((B, nh, 1, hd))
        Kh, Vh = np.concatenate([Kh, z], 2), np.concatenate([Vh, z], 2)
        am = None if am is None else np.pad(am, [(0, 0)] * (am.ndim - 1) + [(0, 1)])
        kp = None if kp is None else np.pad(kp, [(0, 0), (0, 1)])
    s = Qh @ Kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if am is not None:
        s = s + am
    if kp is not None:
        s = np.where(kp[:, None, None, :], -np.inf, s)
    a = softmax(s)
    o = (a @ Vh).transpose(2, 0, 1, 3).reshape(L, B, e)
    return lin(o, P[p + "out_proj.weight"], P.get(p + "out_proj.bias")), a


def ref_decoder_layer(x, mem, P, p, norm_first, tgt_mask=None, mem_mask=None, tkpm=None,
                      mkpm=None, act=lambda h: np.maximum(h, 0)):
    def norm(i, y):
        return lnorm(y, P[f"{p}norm{i}.weight"], P[f"{p}norm{i}.bias"])

    def sa(y):
        return ref_mha(y, y, y, P, p + "self_attn.", H, tgt_mask, tkpm)[0]

    def ca(y):
        return ref_mha(y, mem, mem, P, p + "multihead_attn.", H, mem_mask, mkpm)[0]

    def ff(y):
        h = act(lin(y, P[p + "linear1.weight"], P[p + "linear1.bias"]))
        return lin(h, P[p + "linear2.weight"], P[p + "linear2.bias"])
    if norm_first:
        x = x + sa(norm(1, x))
        x = x + ca(norm(2, x))
        return x + ff(norm(3, x))
    x = norm(1, x + sa(x))
    x = norm(2, x + ca(x))
    return norm(3, x + ff(x))


def ref_encoder_layer(x, P, p, norm_first, mask=None, kpm=None, act=lambda h: np.maximum(h, 0)):
    def norm(i, y):
        return lnorm(y, P[f"{p}norm{i}.weight"], P[f"{p}norm{i}.bias"])

    def sa(y):
        return ref_mha(y, y, y, P, p + "self_attn.", H, mask, kpm)[0]

    def ff(y):
        h = act(lin(y, P[p + "linear1.weight"], P[p + "linear1.bias"]))
        return lin(h, P[p + "linear2.weight"], P[p + "linear2.bias"])
    if norm_first:
        x = x + sa(norm(1, x))
        return x + ff(norm(2, x))
    x = norm(1, x + sa(x))
    return norm(2, x + ff(x))


def causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)


def kpm_of(lengths, n):
    return np.array([[j >= ln for j in range(n)] for ln in lengths])


# ---------------------------------------------------------------- names
def test_transformer_state_dict_names_are_pytorchs():
    m = nn.Transformer(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1,
                       dim_feedforward=FF)
    assert list(m.state_dict()) == TORCH_TRANSFORMER_KEYS
    assert list(nn.MultiheadAttention(E, H, add_bias_kv=True).state_dict()) == \
        TORCH_MHA_KEYS["add_bias_kv"]
    assert list(nn.MultiheadAttention(E, H, kdim=3, vdim=5).state_dict()) == \
        TORCH_MHA_KEYS["kdim"]
    shapes = {k: tuple(v.shape) for k, v in
              nn.MultiheadAttention(E, H, kdim=3, vdim=5, add_bias_kv=True).state_dict().items()}
    assert shapes["k_proj_weight"] == (E, 3) and shapes["v_proj_weight"] == (E, 5)
    assert shapes["bias_k"] == (1, 1, E) and shapes["in_proj_bias"] == (3 * E,)


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_reference(device, norm_first, batch_first):
    rng = np.random.default_rng(1)
    layer = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, norm_first=norm_first,
                                       batch_first=batch_first)
    P = randomize(layer, rng, device)
    L, S, B = 5, 6, 3
    x, mem = rng.normal(size=(L, B, E)), rng.normal(size=(S, B, E))
    mem_mask = rng.random((L, S)) < 0.3
    mem_mask[:, 0] = False  # every query sees a key
    tk, mk = kpm_of([5, 3, 4], L), kpm_of([6, 6, 2], S)
    want = ref_decoder_layer(x, mem, P, "", norm_first, causal(L), mem_mask, tk, mk)

    def bf(a):
        return T(a.transpose(1, 0, 2) if batch_first else a, device)
    got = layer(bf(x), bf(mem), tgt_mask=T(causal(L), device), memory_mask=T(mem_mask, device),
                tgt_key_padding_mask=T(tk, device), memory_key_padding_mask=T(mk, device))
    got = N(got)
    if batch_first:
        got = got.transpose(1, 0, 2)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)


def test_transformer_forward_with_masks_matches_reference(device):
    rng = np.random.default_rng(2)
    m = nn.Transformer(E, H, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=FF,
                       dropout=0.0)
    P = randomize(m, rng, device)
    S, L, B = 6, 5, 2
    src, tgt = rng.normal(size=(S, B, E)), rng.normal(size=(L, B, E))
    sk = kpm_of([6, 4], S)
    mem = src
    for i in range(2):
        mem = ref_encoder_layer(mem, P, f"encoder.layers.{i}.", False, None, sk)
    mem = lnorm(mem, P["encoder.norm.weight"], P["encoder.norm.bias"])
    y = tgt
    for i in range(2):
        y = ref_decoder_layer(y, mem, P, f"decoder.layers.{i}.", False, causal(L), None, None, sk)
    y = lnorm(y, P["decoder.norm.weight"], P["decoder.norm.bias"])
    mask = nn.Transformer.generate_square_subsequent_mask(L, device=device,
                                                          dtype=tessera.float64)
    got = m(T(src, device), T(tgt, device), tgt_mask=mask, src_key_padding_mask=T(sk, device),
            memory_key_padding_mask=T(sk, device))
    np.testing.assert_allclose(N(got), y, rtol=TOL, atol=TOL)


def test_generate_square_subsequent_mask():
    m = N(nn.Transformer.generate_square_subsequent_mask(4))
    assert m.dtype == np.float32
    np.testing.assert_array_equal(m, causal(4))


@pytest.mark.parametrize("kw", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(kdim=3, vdim=5), dict(add_bias_kv=True, add_zero_attn=True,
                                                           kdim=3, vdim=5, batch_first=True),
                                dict()])
@pytest.mark.parametrize("average", [True, False])
def test_mha_options_match_reference(device, kw, average):
    rng = np.random.default_rng(3)
    m = nn.MultiheadAttention(E, H, **kw)
    P = randomize(m, rng, device)
    L, S, B = 4, 5, 3
    q = rng.normal(size=(L, B, E))
    k, v = rng.normal(size=(S, B, kw.get("kdim", E))), rng.normal(size=(S, B, kw.get("vdim", E)))
    am = rng.random((L, S)) < 0.3
    am[:, 0] = False
    kpm = kpm_of([5, 3, 4], S)
    want, wa = ref_mha(q, k, v, P, "", H, am, kpm, kw.get("add_bias_kv", False),
                       kw.get("add_zero_attn", False))
    bf = kw.get("batch_first", False)

    def t(a):
        return T(a.transpose(1, 0, 2) if bf else a, device)
    out, w = m(t(q), t(k), t(v), key_padding_mask=T(kpm, device), attn_mask=T(am, device),
               average_attn_weights=average)
    out = N(out).transpose(1, 0, 2) if bf else N(out)
    np.testing.assert_allclose(out, want, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(N(w), wa.mean(1) if average else wa, rtol=TOL, atol=TOL)
    out2, none = m(t(q), t(k), t(v), key_padding_mask=T(kpm, device), attn_mask=T(am, device),
                   need_weights=False)
    assert none is None
    np.testing.assert_allclose(N(out2).transpose(1, 0, 2) if bf else N(out2), want, rtol=TOL,
                               atol=TOL)


def test_functional_mha_forward_equals_module(device):
    rng = np.random.default_rng(4)
    m = nn.MultiheadAttention(E, H, add_bias_kv=True, add_zero_attn=True)
    P = randomize(m, rng, device)
    q = T(rng.normal(size=(4, 2, E)), device)
    kv = T(rng.normal(size=(6, 2, E)), device)
    got, w = F.multi_head_attention_forward(
        q, kv, kv, E, H, m.in_proj_weight, m.in_proj_bias, m.bias_k, m.bias_v, True, 0.0,
        m.out_proj.weight, m.out_proj.bias, training=False)
    want, wa = ref_mha(N(q), N(kv), N(kv), P, "", H, bias_kv=True, zero_attn=True)
    np.testing.assert_allclose(N(got), want, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(N(w), wa.mean(1), rtol=TOL, atol=TOL)
    # unbatched [L, E]
    g1, _ = F.multi_head_attention_forward(
        q[:, 0], kv[:, 0], kv[:, 0], E, H, m.in_proj_weight, m.in_proj_bias, m.bias_k,
        m.bias_v, True, 0.0, m.out_proj.weight, m.out_proj.bias, training=False)
    np.testing.assert_allclose(N(g1), want[:, 0], rtol=TOL, atol=TOL)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        F.multi_head_attention_forward(q, kv, kv, E, H, m.in_proj_weight, m.in_proj_bias, None,
                                       None, False, 0.0, m.out_proj.weight, m.out_proj.bias,
                                       is_causal=True)


def test_sdpa_enable_gqa(device):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=s) for s in ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)))
    got = F.scaled_dot_product_attention(T(q, device), T(k, device), T(v, device),
                                         enable_gqa=True)
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    want = softmax(q @ kk.transpose(0, 1, 3, 2) / math.sqrt(8)) @ vv
    np.testing.assert_allclose(N(got), want, rtol=TOL, atol=TOL)
    with pytest.raises(RuntimeError, match="multiple"):
        F.scaled_dot_product_attention(T(q, device), T(k[:, :1].repeat(3, 1), device),
                                       T(v[:, :1].repeat(3, 1), device), enable_gqa=True)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_callable_activation(device, norm_first):
    rng = np.random.default_rng(6)
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=F.silu,
                                       norm_first=norm_first)
    P = randomize(layer, rng, device)
    x = rng.normal(size=(5, 2, E))
    kpm = kpm_of([5, 3], 5)
    want = ref_encoder_layer(x, P, "", norm_first, causal(5), kpm,
                             act=lambda h: h / (1 + np.exp(-h)))
    got = layer(T(x, device), src_mask=T(causal(5), device), src_key_padding_mask=T(kpm, device))
    np.testing.assert_allclose(N(got), want, rtol=TOL, atol=TOL)
    # F.relu / F.gelu and the modules are the C layer's built-ins: same values as the names
    for act, name in ((F.relu, "relu"), (nn.GELU(), "gelu")):
        a = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=act)
        b = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=name)
        randomize(a, np.random.default_rng(7), device)
        randomize(b, np.random.default_rng(7), device)
        np.testing.assert_array_equal(N(a(T(x, device))), N(b(T(x, device))))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")


def test_encoder_clones_are_independent_and_causal_mask_detected(device):
    rng = np.random.default_rng(8)
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E))
    assert len(enc.layers) == 3 and enc.layers[0] is not layer
    p0, p1 = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    np.testing.assert_array_equal(N(p0), N(p1))  # deep copies of one layer, as PyTorch's
    with tessera.no_grad():
        p0.add_(1.0)
    # float32 values below 2: x + 1 - x is 1 within one ulp of 2 (2.4e-7)
    np.testing.assert_allclose(N(p0) - N(p1), 1.0, rtol=0, atol=2.4e-7)
    P = randomize(enc, rng, device)
    x = rng.normal(size=(5, 2, E))
    want = x
    for i in range(3):
        want = ref_encoder_layer(want, P, f"layers.{i}.", False, causal(5))
    want = lnorm(want, P["norm.weight"], P["norm.bias"])
    mask = nn.Transformer.generate_square_subsequent_mask(5, device=device,
                                                          dtype=tessera.float64)
    np.testing.assert_allclose(N(enc(T(x, device), mask)), want, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(N(enc(T(x, device), mask, is_causal=True)), want, rtol=TOL,
                               atol=TOL)


def test_gradients_match_central_differences():
    rng = np.random.default_rng(9)
    m = nn.Transformer(4, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=6,
                       dropout=0.0)
    randomize(m, rng, "cpu")
    src, tgt = T(rng.normal(size=(3, 2, 4)), "cpu"), T(rng.normal(size=(2, 2, 4)), "cpu")
    g = T(rng.normal(size=(2, 2, 4)), "cpu")
    mask = nn.Transformer.generate_square_subsequent_mask(2, dtype=tessera.float64)

    def f():
        return float((m(src, tgt, tgt_mask=mask) * g).sum())
    (m(src, tgt, tgt_mask=mask) * g).sum().backward()
    h = 1e-6
    for name in ("encoder.layers.0.self_attn.in_proj_weight",
                 "decoder.layers.0.multihead_attn.in_proj_weight",
                 "decoder.layers.0.linear1.bias", "decoder.norm.weight"):
        p = dict(m.named_parameters())[name]
        flat = p.data.reshape(-1)
        for i in range(0, flat.shape[0], max(1, flat.shape[0] // 4)):
            with tessera.no_grad():
                old = float(flat[i])
                flat[i] = old + h
                fp = f()
                flat[i] = old - h
                fm = f()
                flat[i] = old
            num = (fp - fm) / (2 * h)
            assert abs(float(p.grad.reshape(-1)[i]) - num) <= 1e-6 * max(1.0, abs(num)), name


# ---------------------------------------------------------------- usage and training
class PositionalEncoding(nn.Module):
    """the tutorial's, on Tessera tensors"""

    def __init__(self, d_model, max_len=64):
        super().__init__()
        pos = np.arange(max_len)[:, None]
        div = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = np.zeros((max_len, 1, d_model), dtype=np.float32)
        pe[:, 0, 0::2], pe[:, 0, 1::2] = np.sin(pos * div), np.cos(pos * div)
        self.register_buffer("pe", tessera.from_numpy(pe))

    def forward(self, x):
        return x + self.pe[:x.shape[0]]


class TutorialModel(nn.Module):
    """pytorch/tutorials' "Language Modeling with nn.Transformer" model"""

    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.1):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        out = self.transformer_encoder(src, src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.linear(out)


def test_tutorial_language_model_trains(device):
    tessera.manual_seed(0)
    rng = np.random.default_rng(10)
    ntok, L, B = 11, 8, 4
    model = TutorialModel(ntok, 16, 2, 32, 2, dropout=0.0).to(device)
    opt = tessera.optim.Adam(model.parameters(), lr=1e-2)
    seq = rng.integers(0, ntok, size=(L + 1, B))
    src, tgt = T(seq[:-1], device), T(seq[1:].reshape(-1), device)
    mask = nn.Transformer.generate_square_subsequent_mask(L).to(device)
    kpm = T(kpm_of([8, 8, 7, 6], L), device)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        out = model(src, mask, kpm)
        assert tuple(out.shape) == (L, B, ntok)
        loss = F.cross_entropy(out.reshape(-1, ntok), tgt)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses


def test_seq2seq_transformer_trains(device):
    """copy task: the decoder learns to reproduce the source shifted right"""
    tessera.manual_seed(0)
    rng = np.random.default_rng(11)
    ntok, L, B, d = 7, 5, 6, 16
    emb = nn.Embedding(ntok, d).to(device)
    model = nn.Transformer(d, 2, 1, 1, 32, dropout=0.0, batch_first=True).to(device)
    head = nn.Linear(d, ntok).to(device)
    params = list(emb.parameters()) + list(model.parameters()) + list(head.parameters())
    opt = tessera.optim.Adam(params, lr=5e-3)
    seq = rng.integers(1, ntok, size=(B, L))
    src = T(seq, device)
    tgt_in = T(np.concatenate([np.zeros((B, 1), dtype=seq.dtype), seq[:, :-1]], 1), device)
    mask = model.generate_square_subsequent_mask(L, device=device)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        out = head(model(emb(src), emb(tgt_in), tgt_mask=mask, tgt_is_causal=True))
        loss = F.cross_entropy(out.reshape(-1, ntok), src.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses


def test_errors():
    m = nn.Transformer(E, H, 1, 1, FF)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        m(tessera.randn(3, 2, E), tessera.randn(3, 1, E))
    with pytest.raises(RuntimeError, match="feature number"):
        m(tessera.randn(3, 2, E), tessera.randn(3, 2, E + 1))
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(7, 2, add_bias_kv=True)
    mha = nn.MultiheadAttention(E, H, kdim=3, vdim=3)
    with pytest.raises(RuntimeError):
        mha(tessera.randn(2, 1, E), tessera.randn(2, 1, 4), tessera.randn(2, 1, 3))


def test_subclass_and_repr():
    class MyDecoderLayer(nn.TransformerDecoderLayer):
        def forward(self, tgt, memory, **kw):
            return super().forward(tgt, memory, **kw) * 0.0

    dec = nn.TransformerDecoder(MyDecoderLayer(E, H, FF), 2)
    y = dec(tessera.randn(3, 2, E), tessera.randn(4, 2, E))
    assert float(y.abs().sum()) == 0.0
    assert "TransformerDecoderLayer" in repr(nn.TransformerDecoderLayer(E, H, FF))
    assert "MultiheadAttention" in repr(nn.MultiheadAttention(E, H, add_zero_attn=True))
