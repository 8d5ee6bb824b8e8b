"""gen_vision_video_flow_ref.py — references of tests/python/test_vision_video_flow.py (issue 75
part 6), made with the reference PyTorch:

  /opt/torch2/bin/torch-python tests/data/gen_vision_video_flow_ref.py

Two small models of torchvision.models.video / .optical_flow, their parameters and floating
buffers set by model_zoo_common.param_array (no state dict stored: the test sets the same values),
the input by model_zoo_common.input_array, all dropout at 0:
  r2plus1d_18 (num_classes=10) on a [2, 3, 8, 32, 32] clip;
  mvit_tiny_v1 / _v2 (MViT with V1's / V2's flags, 2 / 3 blocks, see build) on [2, 3, 4, 32, 32];
  raft_small on one 128 x 128 image pair ([1, 2, 3, 128, 128]: x[:, 0], x[:, 1]),
  num_flow_updates=2 (torchvision's RAFT runs in float64 only with its coordinate grid and
  lookup offsets in the run's dtype: tools/model_zoo_torch.flow_dtype).
Stored in tests/data/vision_video_flow_ref.npz (float64 PyTorch values):
  NAME:eval     eval output (RAFT: the final flow at every 4th pixel of each axis)
  NAME:gnorm, NAME:gproj   train mode, loss = sum_i (out_i * W_i).sum() over every output
                (RAFT: every flow prediction), W_i = model_zoo_common.loss_weights: for the
                input gradient then each parameter's (state order), the norm and the projection
                on a fixed unit vector u = hash_uniform(n, 9000 + i)
and .json: per model the kwargs, input shape, state-dict keys and shapes, and PyTorch's own
float32 error of each quantity against its float64 run (the test's bounds, model_zoo's rules).
"""
import copy
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import model_zoo_common as zc  # noqa: E402

OUT = os.path.join(HERE, "vision_video_flow_ref")
MODELS = {"r2plus1d_18": (dict(num_classes=10), (2, 3, 8, 32, 32)),
          "raft_small": ({}, (1, 2, 3, 128, 128)),
          "mvit_tiny_v1": ({}, (2, 3, 4, 32, 32)), "mvit_tiny_v2": ({}, (2, 3, 4, 32, 32))}


def build(name, kw, torch):
    """the builder `name` (torchvision.models.get_model), or for mvit_tiny_v1 / _v2 the MViT
    class of torchvision.models.video.mvit on a 4 x 32 x 32 clip with 2 / 3 blocks and MViT V1's
    / V2's flags (the builders' clip is fixed at 16 x 224 x 224: too big for a unit test);
    `torchvision` is tessera.vision under tessera.compat"""
    if not name.startswith("mvit_tiny"):
        return zc.build("torchvision", name, kw, torch)
    from torchvision.models.video.mvit import MSBlockConfig as C, MViT
    k3 = [3, 3, 3]
    if name.endswith("v1"):
        cfg = [C(1, 16, 32, [], k3, [], [1, 2, 2]), C(2, 32, 32, k3, k3, [1, 2, 2], [1, 1, 1])]
        flags = dict(residual_pool=False, rel_pos_embed=False, proj_after_attn=False)
    else:
        cfg = [C(1, 16, 16, k3, k3, [1, 1, 1], [1, 2, 2]),
               C(2, 16, 32, k3, k3, [1, 2, 2], [1, 1, 1]),
               C(2, 32, 32, k3, k3, [1, 1, 1], [1, 1, 1])]
        flags = dict(residual_pool=True, rel_pos_embed=True, proj_after_attn=True)
    return MViT(spatial_size=(32, 32), temporal_size=4, block_setting=cfg,
                residual_with_cls_embed=False, dropout=0.0, num_classes=10, **flags)


def forward(model, x, name):
    if name.startswith("raft"):
        return model(x[:, 0], x[:, 1], num_flow_updates=2)
    return model(x)


def eval_value(out, name):
    if name.startswith("raft"):
        return out[-1][..., ::4, ::4]
    return out


def summarise_eval(model, x32, dtype, torch, name):
    """the eval output alone"""
    me = copy.deepcopy(model).to(dtype).eval()
    with torch.no_grad():
        return eval_value(forward(me, torch.tensor(x32, dtype=dtype), name),
                          name).double().numpy()


def summarise(model, x32, dtype, torch, name):
    """eval output; the norm and projection of the input gradient and each parameter gradient"""
    me = copy.deepcopy(model).to(dtype).eval()
    with torch.no_grad():
        ev = eval_value(forward(me, torch.tensor(x32, dtype=dtype), name), name)
    mt = copy.deepcopy(model).to(dtype).train()
    xi = torch.tensor(x32, dtype=dtype).requires_grad_(True)
    loss = 0
    for i, (_, t) in enumerate(zc.flatten_outputs(forward(mt, xi, name))):
        w = torch.tensor(zc.loss_weights(tuple(t.shape), i).astype(np.float32), dtype=dtype)
        loss = loss + (t * w).sum()
    loss.backward()
    grads = [xi.grad] + [p.grad if p.grad is not None else torch.zeros_like(p)
                         for _, p in mt.named_parameters()]
    norms, projs = [], []
    for i, g in enumerate(grads):
        g = g.double().numpy().ravel()
        u = zc.hash_uniform(g.size, 9000 + i)
        norms.append(float(np.linalg.norm(g)))
        projs.append(float(np.dot(g, u) / np.linalg.norm(u)))
    return dict(eval=ev.double().numpy(), gnorm=np.array(norms), gproj=np.array(projs))


def per_scale_err(a, b, norm64):
    """max_i |a_i - b_i| / max(norm64_i, 1e-3 max norm64): each gradient's norm or projection on
    the scale of that gradient's norm (as test_vision_video_flow.per_scale_err)"""
    return float(np.max(np.abs(a - b) / np.maximum(norm64, zc.FLOOR * np.max(norm64))))


def main():
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from model_zoo_torch import flow_dtype
    torch.set_num_threads(1)
    arrays, meta = {}, {}
    for name, (kw, shape) in MODELS.items():
        torch.manual_seed(0)
        model = build(name, kw, torch)
        zc.set_params_by_formula(model, torch)
        x32 = zc.input_array(shape).astype(np.float32)
        fam = "optical_flow" if name.startswith("raft") else "video"
        with flow_dtype(torch, torch.float64, fam):
            r64 = summarise(model, x32, torch.float64, torch, name)
        r32 = summarise(model, x32, torch.float32, torch, name)
        err = {"eval": zc.rel_err(r32["eval"], r64["eval"]),
               "gnorm": per_scale_err(r32["gnorm"], r64["gnorm"], r64["gnorm"]),
               "gproj": per_scale_err(r32["gproj"], r64["gproj"], r64["gnorm"])}
        for q, v in r64.items():
            arrays["%s:%s" % (name, q)] = v
        sd = model.state_dict()
        meta[name] = dict(kwargs=kw, input_shape=list(shape), err_torch=err,
                          state=[[k, list(v.shape)] for k, v in sd.items()],
                          params=[n for n, _ in model.named_parameters()])
        print(name, err, flush=True)
    np.savez_compressed(OUT + ".npz", **arrays)
    with open(OUT + ".json", "w") as f:
        json.dump(dict(torch=torch.__version__, torchvision=torchvision.__version__,
                       models=meta), f, indent=0)


if __name__ == "__main__":
    main()
