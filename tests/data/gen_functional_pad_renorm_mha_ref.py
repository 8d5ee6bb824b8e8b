"""Makes tests/data/functional_pad_renorm_mha_ref.npz for
tests/python/test_functional_pad_renorm_mha.py: PyTorch's F.conv1d / conv2d / conv3d with
padding='same' and even kernels, F.embedding and F.embedding_bag with max_norm and a negative
padding_idx, F.multi_head_attention_forward with separate kdim / vdim projections, bias_k /
bias_v, add_zero_attn and bool masks, all in float64.
Run: /opt/torch2/bin/torch-python tests/data/gen_functional_pad_renorm_mha_ref.py"""
import os

import numpy as np
import torch
import torch.nn.functional as F

F64 = torch.float64


def main():
    torch.manual_seed(0)
    d = {}
    x, w, b = torch.randn(2, 3, 7, 6, dtype=F64), torch.randn(4, 3, 4, 2, dtype=F64), \
        torch.randn(4, dtype=F64)
    d.update(x=x.numpy(), w=w.numpy(), b=b.numpy())
    d["c_same"] = F.conv2d(x, w, b, padding="same", dilation=(1, 3)).numpy()
    x1, w1 = torch.randn(2, 3, 9, dtype=F64), torch.randn(2, 3, 4, dtype=F64)
    d.update(x1=x1.numpy(), w1=w1.numpy(), c1=F.conv1d(x1, w1, padding="same").numpy())
    x3, w3 = torch.randn(1, 2, 4, 5, 3, dtype=F64), torch.randn(2, 2, 2, 3, 2, dtype=F64)
    d.update(x3=x3.numpy(), w3=w3.numpy(), c3=F.conv3d(x3, w3, padding="same").numpy())

    W = torch.randn(6, 4, dtype=F64) * 2
    idx = torch.tensor([[1, 3, 3], [0, 5, 1]])
    d.update(W=W.numpy(), idx=idx.numpy())
    W1 = W.clone().requires_grad_()
    e = F.embedding(idx, W1, padding_idx=-2, max_norm=1.5, norm_type=3.0)
    e.sum().backward()
    d.update(e=e.detach().numpy(), W_after=W1.detach().numpy(), eg=W1.grad.numpy())
    W2 = W.clone()
    bag = F.embedding_bag(torch.tensor([1, 3, 3, 0, 5, 1]), W2, torch.tensor([0, 2]),
                          max_norm=1.0, mode="sum", padding_idx=-1)
    d.update(bag=bag.numpy(), W2_after=W2.numpy())

    E, H, L, S, N = 6, 2, 3, 4, 2
    m = dict(q=torch.randn(L, N, E, dtype=F64), k=torch.randn(S, N, 5, dtype=F64),
             v=torch.randn(S, N, 3, dtype=F64), qw=torch.randn(E, E, dtype=F64),
             kw=torch.randn(E, 5, dtype=F64), vw=torch.randn(E, 3, dtype=F64),
             ib=torch.randn(3 * E, dtype=F64), ow=torch.randn(E, E, dtype=F64),
             ob=torch.randn(E, dtype=F64), bk=torch.randn(1, 1, E, dtype=F64),
             bv=torch.randn(1, 1, E, dtype=F64))
    am = torch.rand(L, S) > 0.7
    am[:, 0] = False  # a key left for every query
    kpm = torch.zeros(N, S, dtype=torch.bool)
    kpm[1, 2] = True
    m.update(am=am, kpm=kpm)
    d.update({"m_" + k: t.numpy() for k, t in m.items()})
    for need in (True, False):
        out, wts = F.multi_head_attention_forward(
            m["q"], m["k"], m["v"], E, H, None, m["ib"], m["bk"], m["bv"], True, 0.0, m["ow"],
            m["ob"], training=False, key_padding_mask=kpm, need_weights=need, attn_mask=am,
            use_separate_proj_weight=True, q_proj_weight=m["qw"], k_proj_weight=m["kw"],
            v_proj_weight=m["vw"], average_attn_weights=False)
        d[f"mo{int(need)}"] = out.numpy()
        if need:
            d["mw"] = wts.numpy()
    here = os.path.dirname(os.path.abspath(__file__))
    np.savez_compressed(os.path.join(here, "functional_pad_renorm_mha_ref.npz"), **d)


if __name__ == "__main__":
    main()
