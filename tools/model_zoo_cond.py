"""model_zoo_cond.py — why a zoo tensor fails the float32 bound: the reduction behind it, its
condition number, and how much of the float32 error the summation itself adds (issue 75, part 4).

  DIR = a model's directory kept by `tools/model_zoo.py timm NAME --keep --work W` (W/timm/NAME)
  /opt/torch2/bin/torch-python tools/model_zoo_cond.py capture DIR KEY... --dtype float64 --out t64.npz
  /opt/torch2/bin/torch-python tools/model_zoo_cond.py capture DIR KEY... --dtype float32 --out t32.npz
  PYTHONPATH=build/python:/opt/torch-libs python3 -m tessera.compat tools/model_zoo_cond.py \
      capture DIR KEY... --dtype float32 --out x32.npz
  python3 tools/model_zoo_cond.py report t64.npz t32.npz x32.npz

KEY is a judged tensor (grad:param:NAME or buf:NAME.running_mean / running_var). `capture` runs
the zoo's train step (same weights, input and loss) with hooks on the module that owns KEY: its
input x and output gradient gy. The tensor is then a sum of summands t_j that numpy forms
exactly from x and gy (products of two floats are exact in float64):
  bias of a broadcast add (not a conv / linear / norm bias): t = gy (summed to the bias shape);
  conv weight: t = gy[n, o, y, x] * x_pad[n, i, y s + kh d, x s + kw d] (any groups);
  linear weight: t = gy[n, o] x[n, i]; BatchNorm weight: t = gy xhat (xhat from the batch
  statistics of x); LearnableAffineBlock scale: t = gy x; running_mean: the batch mean of x;
  running_var: (1 - m) v0 + m var(x) (unbiased), whose condition for relative perturbations of
  x is 2 sum|x| |x - mu| / sum (x - mu)^2.
`report` prints, at the element with the largest float32 error of each side: n, the condition
number kappa = sum|t| / |sum t| (from the float64 run), the side's error against float64, the
part its summation adds (its value against the exact sum of its own summands) and the part
its summands carry (the exact sum of its summands against the float64 sum).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo_common as zc  # noqa: E402


def _module_of(model, key):
    name = key.split(":", 2)[-1] if key.startswith("grad:param:") else key[4:]
    mod_name, leaf = name.rsplit(".", 1)
    return mod_name, model.get_submodule(mod_name), leaf


def capture(d, keys, dtype_name, out):
    import torch
    meta = json.load(open(os.path.join(d, "meta.json")))
    x = np.load(os.path.join(d, "ref.npz"))["x"].astype(np.float32)
    model = zc.build(meta["suite"], meta["name"], meta["kwargs"], torch)
    model.load_state_dict(torch.load(os.path.join(d, "sd.pt")), strict=True)
    extra = os.path.join(d, "buffers.pt")
    if os.path.exists(extra):
        bufs = dict(model.named_buffers())
        with torch.no_grad():
            for k, v in torch.load(extra).items():
                if k in bufs and tuple(bufs[k].shape) == tuple(v.shape):
                    bufs[k].copy_(v)
    dtype = getattr(torch, dtype_name)
    model = model.to(dtype).train()
    got = {}
    for key in keys:
        mod_name, mod, leaf = _module_of(model, key)
        if mod_name in got:
            continue
        rec = got.setdefault(mod_name, dict(x=[], gy=[], pre={}, cls=type(mod).__name__))

        def pre(m, args, rec=rec):
            for b in ("running_mean", "running_var"):
                if getattr(m, b, None) is not None and b not in rec["pre"]:
                    rec["pre"][b] = getattr(m, b).detach().double().numpy().copy()

        def fwd(m, args, o, rec=rec):
            rec["x"].append(args[0].detach().double().numpy())
            if o.requires_grad:
                o.register_hook(lambda g: rec["gy"].append(g.detach().double().numpy()))

        mod.register_forward_pre_hook(pre)
        mod.register_forward_hook(fwd)
    xi = torch.tensor(x, dtype=dtype).requires_grad_(True)
    loss = 0
    for i, (n, t) in enumerate(zc.flatten_outputs(model(xi))):
        w = torch.tensor(zc.loss_weights(tuple(t.shape), i).astype(np.float32), dtype=dtype)
        loss = loss + (t * w).sum()
    loss.backward()
    arrays = {}
    params = dict(model.named_parameters())
    bufs = dict(model.named_buffers())
    for key in keys:
        mod_name, mod, leaf = _module_of(model, key)
        rec = got[mod_name]
        if len(rec["x"]) != 1:
            raise SystemExit("%s: called %d times (one call supported)" % (mod_name, len(rec["x"])))
        name = key.split(":", 2)[-1] if key.startswith("grad:") else key[4:]
        val = params[name].grad if key.startswith("grad:") else bufs[name]
        arrays[key + "|value"] = val.detach().double().numpy()
        arrays[key + "|x"] = rec["x"][0]
        if rec["gy"]:
            arrays[key + "|gy"] = rec["gy"][-1]
        for b, v in rec["pre"].items():
            arrays[key + "|pre_" + b] = v
        info = dict(cls=rec["cls"])
        for a in ("stride", "padding", "dilation", "groups", "momentum", "eps"):
            v = getattr(mod, a, None)
            if isinstance(v, (int, float, tuple, list)):
                info[a] = v
        arrays[key + "|info"] = np.array(json.dumps(info))
    np.savez(out, **arrays)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def summands(key, z):
    """(sum, sum of |t|, n) of the key's summands, float64, each the tensor's shape"""
    info = json.loads(str(z[key + "|info"]))
    x = z[key + "|x"]
    val = z[key + "|value"]
    cls = info["cls"]
    if key.startswith("buf:"):
        axes = (0,) + tuple(range(2, x.ndim))
        n = x.size // x.shape[1]
        mu = x.mean(axis=axes)
        shp = (1, -1) + (1,) * (x.ndim - 2)
        m = info.get("momentum", 0.1)
        if key.endswith("running_mean"):
            r0 = z[key + "|pre_running_mean"]
            return ((1 - m) * r0 + m * x.sum(axis=axes) / n,
                    (1 - m) * np.abs(r0) + m * np.abs(x).sum(axis=axes) / n, n)
        dev = x - mu.reshape(shp)
        var = (dev ** 2).sum(axis=axes) / (n - 1)
        v0 = z[key + "|pre_running_var"]
        # the running variance, and its |.|-sum counterpart: the variance's sensitivity to
        # relative perturbations of x (kappa_var * var) added to the untouched part
        sens = 2.0 * (np.abs(x) * np.abs(dev)).sum(axis=axes) / (n - 1)
        return (1 - m) * v0 + m * var, (1 - m) * v0 + m * sens, n
    gy = z[key + "|gy"]
    leaf = key.rsplit(".", 1)[-1]
    if "Conv" in cls and leaf == "weight":
        (sh, sw), (ph, pw), (dh, dw) = (_pair(info["stride"]), _pair(info["padding"]),
                                        _pair(info["dilation"]))
        g = info["groups"]
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        N, O, Ho, Wo = gy.shape
        _, I, KH, KW = val.shape
        s, a = np.zeros(val.shape), np.zeros(val.shape)
        og = O // g
        for kh in range(KH):
            for kw in range(KW):
                xs = xp[:, :, kh * dh: kh * dh + sh * (Ho - 1) + 1: sh,
                        kw * dw: kw * dw + sw * (Wo - 1) + 1: sw]
                for q in range(g):
                    gq, xq = gy[:, q * og:(q + 1) * og], xs[:, q * I:(q + 1) * I]
                    s[q * og:(q + 1) * og, :, kh, kw] = np.einsum("noyx,niyx->oi", gq, xq)
                    a[q * og:(q + 1) * og, :, kh, kw] = np.einsum("noyx,niyx->oi", np.abs(gq),
                                                                  np.abs(xq))
        return s, a, N * Ho * Wo
    if "Norm" in cls and leaf == "weight" and x.ndim == 4:  # BatchNorm: t = gy xhat (batch stats)
        axes = (0, 2, 3)
        mu = x.mean(axis=axes, keepdims=True)
        xh = (x - mu) / np.sqrt(x.var(axis=axes, keepdims=True) + info.get("eps", 1e-5))
        return (gy * xh).sum(axis=axes), np.abs(gy * xh).sum(axis=axes), x.size // x.shape[1]
    if "Norm" in cls and leaf == "bias" and x.ndim == 4:  # BatchNorm bias: t = gy, per channel
        return gy.sum(axis=(0, 2, 3)), np.abs(gy).sum(axis=(0, 2, 3)), x.size // x.shape[1]
    if cls == "LearnableAffineBlock" and leaf == "scale":  # y = scale x + bias
        return (gy * x).sum().reshape(val.shape), np.abs(gy * x).sum().reshape(val.shape), x.size
    if cls == "Linear" and leaf == "weight":
        g2, x2 = gy.reshape(-1, gy.shape[-1]), x.reshape(-1, x.shape[-1])
        return g2.T @ x2, np.abs(g2).T @ np.abs(x2), g2.shape[0]
    # a bias added by broadcast (or a per-channel conv / linear bias): sum gy to its shape
    shape = val.shape
    lead = gy.ndim - len(shape)
    axes = tuple(i for i in range(gy.ndim) if i < lead or shape[i - lead] == 1)
    s = gy.sum(axis=axes).reshape(shape)
    a = np.abs(gy).sum(axis=axes).reshape(shape)
    return s, a, gy.size // max(val.size, 1)


def report(paths):
    zs = [np.load(p) for p in paths]
    ref = zs[0]
    keys = sorted({k.split("|")[0] for k in ref.files})
    for key in keys:
        r_sum, r_abs, n = summands(key, ref)
        rv = ref[key + "|value"]
        print("%s  (%d summands per element, %d elements)" % (key, n, rv.size))
        kappa = r_abs / np.maximum(np.abs(r_sum), 1e-300)
        print("  kappa = sum|t| / |sum t| (float64): max %.3g, median %.3g" % (
            kappa.max(), np.median(kappa)))
        for p, z in zip(paths[1:], zs[1:]):
            v = z[key + "|value"]
            s, a, _ = summands(key, z)
            j = np.unravel_index(int(np.argmax(np.abs(v - rv))), rv.shape)
            e_tot = abs(v[j] - rv[j])
            e_sum = abs(v[j] - s[j])
            e_terms = abs(s[j] - r_sum[j])
            print("  %-28s worst element %s: value %.6g, float64 %.6g, kappa %.3g, "
                  "sum|t| %.3g" % (os.path.basename(p), j, v[j], rv[j], kappa[j], r_abs[j]))
            print("    error %.3g = %.3g eps32 sum|t|;  its summation adds %.3g (%.3g eps32 "
                  "sum|t|), its summands carry %.3g" % (
                      e_tot, e_tot / (zc.EPS32 * r_abs[j]), e_sum,
                      e_sum / (zc.EPS32 * r_abs[j]), e_terms))
            es_all = np.abs(v - s) / (zc.EPS32 * np.maximum(r_abs, 1e-300))
            print("    summation error over all elements: max %.3g eps32 sum|t| "
                  "(log2(n) = %.1f)" % (es_all.max(), np.log2(max(n, 2))))
            for f in ("x", "gy"):  # the factors' own float32 errors (elementwise)
                if key + "|" + f in ref.files:
                    d = z[key + "|" + f] - ref[key + "|" + f]
                    rms = np.sqrt(np.mean(ref[key + "|" + f] ** 2))
                    print("    %-2s error: rms %.3g, max %.3g (of rms %.3g); sum %.3g, "
                          "sqrt(size) rms %.3g" % (f, np.sqrt(np.mean(d ** 2)),
                                                   np.abs(d).max(), rms, d.sum(),
                                                   np.sqrt(d.size) * np.sqrt(np.mean(d ** 2))))


def main(argv):
    if not argv or argv[0] not in ("capture", "report"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "report":
        report(argv[1:])
        return 0
    rest = argv[1:]
    dtype = rest[rest.index("--dtype") + 1]
    out = rest[rest.index("--out") + 1]
    pos = [a for i, a in enumerate(rest) if a not in ("--dtype", "--out") and
           (i == 0 or rest[i - 1] not in ("--dtype", "--out"))]
    capture(pos[0], pos[1:], dtype, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
