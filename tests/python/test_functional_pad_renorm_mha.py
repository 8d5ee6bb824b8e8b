"""F.conv1d / conv2d / conv3d with padding='same' and even kernels (ts_conv_padded),
F.embedding / F.embedding_bag with max_norm and a negative padding_idx (ts_embedding_ex,
ts_embedding_bag_ex, ts_embedding_renorm_) and F.multi_head_attention_forward with separate
kdim / vdim projections, bias_k / bias_v, add_zero_attn and bool masks
(ts_multi_head_attention_forward) against PyTorch 2.15's float64 values stored in
tests/data/functional_pad_renorm_mha_ref.npz (tests/data/gen_functional_pad_renorm_mha_ref.py).
Each is one C call; the float64 results differ from PyTorch's by summation order only."""
import os

import numpy as np
import pytest

import tessera
import tessera.nn.functional as F

REF = os.path.join(os.path.dirname(__file__), "..", "data", "functional_pad_renorm_mha_ref.npz")
TOL = 1e-12  # a few float64 roundings of O(10) sums


@pytest.fixture(scope="module")
def d():
    return np.load(REF)


def T(a):
    return tessera.tensor(np.ascontiguousarray(a))


def N(t):
    return np.asarray(t.detach().tolist())


def test_conv_same_even_kernels(d):
    got = F.conv2d(T(d["x"]), T(d["w"]), T(d["b"]), padding="same", dilation=(1, 3))
    np.testing.assert_allclose(N(got), d["c_same"], rtol=0, atol=TOL)
    np.testing.assert_allclose(N(F.conv1d(T(d["x1"]), T(d["w1"]), padding="same")), d["c1"],
                               rtol=0, atol=TOL)
    np.testing.assert_allclose(N(F.conv3d(T(d["x3"]), T(d["w3"]), padding="same")), d["c3"],
                               rtol=0, atol=TOL)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(T(d["x"]), T(d["w"]), padding="same", stride=2)


def test_embedding_max_norm_negative_padding(d):
    w = T(d["W"])
    w.requires_grad_(True)
    e = F.embedding(T(d["idx"]), w, padding_idx=-2, max_norm=1.5, norm_type=3.0)
    e.sum().backward()
    np.testing.assert_allclose(N(e), d["e"], rtol=0, atol=TOL)
    np.testing.assert_allclose(N(w), d["W_after"], rtol=0, atol=TOL)  # renormed in place
    np.testing.assert_array_equal(N(w.grad), d["eg"])
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(T(d["idx"]), w, padding_idx=-7)


def test_embedding_bag_max_norm(d):
    w = T(d["W"])
    got = F.embedding_bag(T(np.array([1, 3, 3, 0, 5, 1])), w, T(np.array([0, 2])), max_norm=1.0,
                          mode="sum", padding_idx=-1)
    np.testing.assert_allclose(N(got), d["bag"], rtol=0, atol=TOL)
    np.testing.assert_allclose(N(w), d["W2_after"], rtol=0, atol=TOL)
    with pytest.raises(AssertionError, match="padding_idx must be within the number"):
        F.embedding_bag(T(np.array([1, 3])), w, T(np.array([0])), padding_idx=6)


@pytest.mark.parametrize("need", [True, False])
def test_mha_forward_options(d, need):
    m = {k[2:]: T(d[k]) for k in d.files if k.startswith("m_")}
    out, w = F.multi_head_attention_forward(
        m["q"], m["k"], m["v"], 6, 2, None, m["ib"], m["bk"], m["bv"], True, 0.0, m["ow"],
        m["ob"], training=False, key_padding_mask=m["kpm"], need_weights=need,
        attn_mask=m["am"], use_separate_proj_weight=True, q_proj_weight=m["qw"],
        k_proj_weight=m["kw"], v_proj_weight=m["vw"], average_attn_weights=False)
    np.testing.assert_allclose(N(out), d[f"mo{int(need)}"], rtol=0, atol=TOL)
    if need:
        np.testing.assert_allclose(N(w), d["mw"], rtol=0, atol=TOL)
    else:
        assert w is None
