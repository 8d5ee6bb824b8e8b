"""model_zoo_torch.py — the PyTorch side of tools/model_zoo.py (run with the reference PyTorch,
/opt/torch2/bin/torch-python; see model_zoo.py for the procedure and the judge).

  torch-python tools/model_zoo_torch.py ref SUITE NAME DIR [--img-size N] [--kwargs JSON]
  torch-python tools/model_zoo_torch.py list SUITE [PATTERN]     # JSON: [[name, family], ...]

`ref` builds NAME (timm: pretrained=False, drop_rate=0, drop_path_rate=0; torchvision:
weights=None; every dropout module at p=0), writes DIR/sd.pt (the float32 initial state dict,
torch.save), DIR/buffers.pt (the floating buffers outside the state dict), DIR/ref.npz (float64
PyTorch values: eval outputs, train outputs, the input gradient, every parameter gradient, the
BatchNorm running statistics after the train step) and DIR/meta.json (how it was built, the input
shape, PyTorch's own float32 error per tensor against its float64 run, err_torch, and for gradients
also against its float64 run on the float32 run's kink branches, err_torch_bm: model_zoo_common's
rule 3).
"""
import contextlib
import copy
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo_common as zc  # noqa: E402

BATCH = 2


def family(suite, name):
    if suite == "timm":
        from timm.models import _registry
        return _registry._model_to_module.get(name, "?")
    import torchvision
    fn = torchvision.models.get_model_builder(name)
    mod = fn.__module__.split(".")
    return ".".join(m for m in mod[2:] if not m.startswith("_")) or "classification"


def list_models(suite, pattern=None):
    if suite == "timm":
        import timm
        names = timm.list_models(pattern) if pattern else timm.list_models()
    else:
        import torchvision
        names = torchvision.models.list_models()
    return [[n, family(suite, n)] for n in names]


def _try_build(suite, name, kwargs, torch):
    """build with the drop-rate kwargs the constructor accepts; returns (model, kwargs used)"""
    extra = [dict(drop_rate=0.0, drop_path_rate=0.0), dict(drop_rate=0.0), {}] \
        if suite == "timm" else [{}]
    last = None
    for ex in extra:
        kw = dict(kwargs)
        kw.update(ex)
        try:
            torch.manual_seed(0)
            return zc.build(suite, name, kw, torch), kw
        except TypeError as e:
            last = e
    raise last


def default_size(suite, model, fam=""):
    if fam.startswith("optical_flow"):
        return (3, 128, 128)  # RAFT's least (its correlation pyramid: 8 * 16)
    if suite == "timm":
        cfg = getattr(model, "pretrained_cfg", None) or {}
        s = cfg.get("input_size", (3, 224, 224))
        return tuple(s)
    return (3, 224, 224)


# frames of a video model's clip: 8, or the model's least (s3d's fixed (2, 7, 7) avgpool and
# mvit's fixed position embeddings need 16)
FRAMES = {"s3d": 16, "mvit_v1_b": 16, "mvit_v2_s": 16}
# batch 1 where batch 2 does not fit the address-space limit (MViT's float64 backward at its fixed
# 16 x 224 x 224 clip; it has no BatchNorm, so the batch size changes nothing else)
BATCH_OF = {"mvit_v1_b": 1, "mvit_v2_s": 1}
# batch 4 for a model with a BatchNorm over the batch alone (model_zoo_common.batch_norm_over_batch)
BATCH_BN1D = 4


def input_shape(suite, name, fam, size):
    if fam.startswith("video"):
        return (BATCH_OF.get(name, BATCH), 3, FRAMES.get(name, 8), size[-2], size[-1])
    if fam.startswith("optical_flow"):  # the image pair: x[:, 0], x[:, 1]
        return (BATCH, 2) + tuple(size)
    return (BATCH,) + tuple(size)


class flow_dtype:
    """torchvision's RAFT makes its coordinate grid and lookup offsets in float32 whatever the
    model's dtype (make_coords_grid's .float(), torch.linspace), so its float64 run fails in
    grid_sample; for optical-flow models the runs make them in the run's dtype instead (the
    default dtype set to it, make_coords_grid following it): PyTorch's float64 reference.
    MViT's relative-position indices (torch.arange(q)[:, None] * ratio ...) are float32 in the
    default dtype: exact integers either way, but float32 ops inside the float64 run would mark
    it "low64" (model_zoo_common.low_precision_ops); its runs get the run's default dtype too"""

    def __init__(self, torch, dtype, fam):
        self.torch, self.dtype = torch, dtype
        self.flow = fam.startswith("optical_flow")
        self.on = self.flow or fam == "video.mvit"

    def __enter__(self):
        torch = self.torch
        if self.on:
            self.old = torch.get_default_dtype()
            torch.set_default_dtype(self.dtype)
        if self.flow:
            from torchvision.models.optical_flow import raft
            self.raft, self.orig = raft, raft.make_coords_grid

            def make_coords_grid(batch_size, h, w, device="cpu"):  # torchvision's, dtype aside
                ys, xs = torch.meshgrid(torch.arange(h, device=device),
                                        torch.arange(w, device=device), indexing="ij")
                coords = torch.stack([xs, ys], dim=0).to(torch.get_default_dtype())
                return coords[None].repeat(batch_size, 1, 1, 1)
            raft.make_coords_grid = make_coords_grid
        return self

    def __exit__(self, *exc):
        if self.flow:
            self.raft.make_coords_grid = self.orig
        if self.on:
            self.torch.set_default_dtype(self.old)


def run_dtype(model, x32, dtype, torch, kinks=None, replay=False, watch=None, fam=""):
    """eval outputs; train outputs, input gradient, parameter gradients, running statistics.
    kinks (a model_zoo_common.KinkMatch): the train run records its kink branches, or with
    replay=True takes the recorded ones (then the eval run is skipped); watch: a dispatch mode
    (model_zoo_common.low_precision_ops) entered around the forwards and the backward only"""
    with flow_dtype(torch, dtype, fam):
        return _run_dtype(model, x32, dtype, torch, kinks, replay, watch, fam)


def _run_dtype(model, x32, dtype, torch, kinks, replay, watch, fam):
    res = {}
    watch = watch if watch is not None else contextlib.nullcontext()
    if not replay:
        me = copy.deepcopy(model).to(dtype).eval()
        xe = torch.tensor(x32, dtype=dtype)
        with torch.no_grad(), watch:
            out = zc.call_model(me, xe, fam)
        flat = zc.flatten_outputs(out)
        for n, t in flat:
            if zc.judged_output(n, [k for k, _ in flat], fam):
                res["eval:" + n] = t.detach().double().numpy()
    mt = copy.deepcopy(model).to(dtype).train()
    if kinks is not None:
        kinks.replay(mt) if replay else kinks.record(mt)
    xi = torch.tensor(x32, dtype=dtype).requires_grad_(True)
    with watch:
        out = zc.call_model(mt, xi, fam)
    flat = zc.flatten_outputs(out)
    loss = 0
    for i, (n, t) in enumerate(flat):
        if zc.judged_output(n, [k for k, _ in flat], fam):
            res["train:" + n] = t.detach().double().numpy()
        w = torch.tensor(zc.loss_weights(tuple(t.shape), i).astype(np.float32), dtype=dtype)
        loss = loss + (t * w).sum()
    with watch:
        loss.backward()
    res["grad:input"] = xi.grad.double().numpy()
    nograd = []
    for n, p in mt.named_parameters():
        if p.grad is None:
            nograd.append(n)
        else:
            res["grad:param:" + n] = p.grad.double().numpy()
    for n, b in mt.named_buffers():
        if n.endswith("running_mean") or n.endswith("running_var"):
            res["buf:" + n] = b.detach().double().numpy()
    return res, nograd


def ref(suite, name, out_dir, img_size=None, kwargs=None):
    import torch
    torch.set_num_threads(1)
    kwargs = dict(kwargs or {})
    t0 = time.time()
    fam = family(suite, name)
    if fam.startswith("detection"):  # detectors: their own inputs, targets and judge
        import model_zoo_detection as zd
        os.makedirs(out_dir, exist_ok=True)
        meta = zd.ref(torch, name, out_dir, kwargs, fam)
        meta["time_build"] = time.time() - t0
        with open(os.path.join(out_dir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        return meta
    model, used = None, None
    size = None
    if img_size:
        if suite == "timm":
            try:
                model, used = _try_build(suite, name, dict(kwargs, img_size=img_size), torch)
            except TypeError:
                model = None
        if model is None:
            model, used = _try_build(suite, name, kwargs, torch)
        size = (3, img_size, img_size)
        try:
            x32 = zc.input_array(input_shape(suite, name, fam, size)).astype(np.float32)
            with torch.no_grad():
                zc.call_model(copy.deepcopy(model).eval(), torch.tensor(x32), fam)
        except Exception:  # the model needs its own size: fall back to it
            model, used = _try_build(suite, name, kwargs, torch)
            size = None
    if model is None:
        model, used = _try_build(suite, name, kwargs, torch)
    if size is None:
        size = default_size(suite, model, fam)
    shape = input_shape(suite, name, fam, size)
    x32 = zc.input_array(shape).astype(np.float32)
    if shape[0] == BATCH and zc.batch_norm_over_batch(model, x32, fam, torch):
        shape = (BATCH_BN1D,) + tuple(shape[1:])
        x32 = zc.input_array(shape).astype(np.float32)
    os.makedirs(out_dir, exist_ok=True)
    sd = model.state_dict()
    torch.save({k: v.detach().clone() for k, v in sd.items()}, os.path.join(out_dir, "sd.pt"))
    # the floating buffers outside the state dict (persistent=False: tables the model computes
    # when built, eva02's rotary embedding): the Tessera side takes PyTorch's values
    torch.save({k: v.detach().clone() for k, v in model.named_buffers()
                if k not in sd and v.dtype.is_floating_point},
               os.path.join(out_dir, "buffers.pt"))
    t1 = time.time()
    low = zc.low_precision_ops(torch)
    with zc.exact_float64(torch):
        r64, nograd = run_dtype(model, x32, torch.float64, torch, watch=low, fam=fam)
    t2 = time.time()
    kinks = zc.KinkMatch(torch)
    r32, _ = run_dtype(model, x32, torch.float32, torch, kinks, fam=fam)
    t3 = time.time()
    # PyTorch's float64 run on its own float32 run's kink branches (the judge's rule 3)
    with zc.exact_float64(torch):
        r64bm, _ = run_dtype(model, x32, torch.float64, torch, kinks, replay=True,
                             fam=fam)
    # train mode random? (a dropout left on, a random augmentation): a second float64 train
    # forward under another seed must give the same outputs (the same float64 ops as r64's)
    torch.manual_seed(12345)
    mt = copy.deepcopy(model).double().train()
    with torch.no_grad(), flow_dtype(torch, torch.float64, fam), zc.exact_float64(torch):
        again = {"train:" + n: t.double().numpy() for n, t in zc.flatten_outputs(
            zc.call_model(mt, torch.tensor(x32, dtype=torch.float64), fam))}
    train_random = any(zc.rel_err(again[k], r64[k]) > 1e-12 for k in again if k in r64)
    gscale = max([float(np.max(np.abs(v))) for k, v in r64.items()
                  if k.startswith("grad:param:") and v.size] + [0.0])
    err_torch, err_torch_bm = {}, {}
    for k, v in r64.items():
        err_torch[k] = zc.rel_err(r32[k], v, zc.denom_floor(k, r64, gscale))
        if zc.is_gradient(k) and k in r64bm:
            err_torch_bm[k] = zc.rel_err(r32[k], r64bm[k], zc.denom_floor(k, r64, gscale))
    np.savez(os.path.join(out_dir, "ref.npz"), x=x32.astype(np.float64), **r64)
    meta = dict(suite=suite, name=name, family=fam, kwargs=used, input_shape=list(shape),
                nograd=nograd, train_random=train_random, grad_scale=gscale,
                err_torch=err_torch, err_torch_bm=err_torch_bm,
                kink_calls=kinks.n_calls(), kink_flips_torch=kinks.flips,
                low64=sorted(low.ops),
                n_params=int(sum(p.numel() for p in model.parameters())),
                torch_version=torch.__version__, time_build=t1 - t0, time_f64=t2 - t1,
                time_f32=t3 - t2, time_f64_branch_matched=time.time() - t3)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main(argv):
    import warnings
    warnings.filterwarnings("ignore")
    if argv and argv[0] == "list":
        print(json.dumps(list_models(argv[1], argv[2] if len(argv) > 2 else None)))
        return 0
    if len(argv) < 4 or argv[0] != "ref":
        print(__doc__, file=sys.stderr)
        return 2
    img, kw = None, {}
    rest = argv[4:]
    while rest:
        if rest[0] == "--img-size":
            img = int(rest[1])
        elif rest[0] == "--kwargs":
            kw = json.loads(rest[1])
        rest = rest[2:]
    meta = ref(argv[1], argv[2], argv[3], img, kw)
    print(json.dumps({k: meta[k] for k in ("name", "family", "input_shape", "n_params")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
