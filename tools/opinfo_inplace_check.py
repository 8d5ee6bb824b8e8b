"""tools/opinfo_inplace_check.py — PyTorch's OpInfo samples through the in-place variants that
python/tessera/_inplace_methods.py provides (x.sin_(), x.lerp_(...), clamp_...): for each op_db
entry whose inplace_variant is one of those names, float32 and float64 (the first integer / bool
dtype for integer-only ops), it runs torch's `x.clone().NAME_(*args)` and Tessera's on the same
values and compares values and dtypes (rtol = atol = 1e-5 / 1e-10), that both raise or neither,
and the gradient through a non-leaf (`y = leaf * 1; y.NAME_(...); sum(y * g).backward()`).
tools/opinfo_check.py does not run inplace variants; this does, for these names.

  PYTHONPATH=build/python /opt/torch2/bin/torch-python tools/opinfo_inplace_check.py [names]
"""
import sys, numpy as np, torch, tessera as ts
from torch.testing._internal.common_methods_invocations import op_db
from tessera._inplace_methods import INPLACE, _ALIAS_INPLACE
names = set(INPLACE) | set(_ALIAS_INPLACE) | {"clamp_"}
only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
def conv(v, grad=False):
    if isinstance(v, torch.Tensor):
        t = ts.from_numpy(v.detach().cpu().numpy().copy()) if v.dtype != torch.bfloat16 else None
        return t
    if isinstance(v, (list, tuple)): return type(v)(conv(e) for e in v)
    if isinstance(v, dict): return {k: conv(e) for k, e in v.items()}
    if isinstance(v, torch.dtype): return getattr(ts, str(v).split(".")[-1])
    return v
res = {}
for op in op_db:
    iv = op.inplace_variant
    if iv is None: continue
    nm = getattr(iv, "__name__", "")
    if nm not in names or (only and nm not in only): continue
    key = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
    st = res.setdefault(key + " -> " + nm, {"pass": 0, "fail": [], "skip": 0})
    dts = [d for d in (torch.float32, torch.float64) if d in op.supported_dtypes("cpu")] or \
          [d for d in (torch.int64, torch.bool) if d in op.supported_dtypes("cpu")][:1]
    for dt in dts:
        for si, s in enumerate(op.sample_inputs("cpu", dt, requires_grad=False)):
            x, args, kw = s.input, s.args, s.kwargs
            if not isinstance(x, torch.Tensor): st["skip"] += 1; continue
            try:
                e = x.clone(); getattr(e, nm)(*args, **kw); terr = None
            except Exception as ex:
                terr = ex
            tx = conv(x); targs = conv(args); tkw = conv(kw)
            try:
                getattr(tx, nm)(*targs, **tkw); serr = None
            except Exception as ex:
                serr = ex
            sid = "%s#%d" % (str(dt).split(".")[-1], si)
            if terr is not None or serr is not None:
                if (terr is None) != (serr is None):
                    st["fail"].append("%s torch:%r tessera:%r" % (sid, str(terr)[:80], str(serr)[:80]))
                else: st["pass"] += 1
                continue
            a, b = e.detach().numpy().astype(np.float64), tx.numpy().astype(np.float64)
            tol = 1e-5 if dt == torch.float32 else 1e-10
            if a.shape != b.shape or str(e.dtype).split(".")[-1] != str(tx.dtype).split(".")[-1] or \
               not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
                st["fail"].append("%s value/dtype differs" % sid); continue
            # gradient through a non-leaf: y = leaf * 1; y.NAME_(...); (y * g).sum().backward()
            if dt.is_floating_point and op.supports_autograd and nm not in ("bernoulli_",):
                leaf = x.detach().clone().requires_grad_(True)
                try:
                    y = leaf * 1; getattr(y, nm)(*args, **kw); g = torch.linspace(-1, 1, y.numel(), dtype=dt).reshape(y.shape)
                    (y * g).sum().backward(); tg = leaf.grad
                except Exception:
                    st["pass"] += 1; continue
                sl = ts.from_numpy(x.detach().numpy().copy()).requires_grad_(True)
                try:
                    sy = sl * 1; getattr(sy, nm)(*targs, **tkw)
                    (sy * ts.from_numpy(g.numpy().copy())).sum().backward(); sg = sl.grad
                except Exception as ex:
                    st["fail"].append("%s grad raised %r" % (sid, str(ex)[:100])); continue
                tgn = np.zeros(x.shape) if tg is None else tg.numpy(force=True)
                sgn = np.zeros(x.shape) if sg is None else sg.numpy()
                if not np.allclose(tgn, sgn, rtol=1e-4 if dt == torch.float32 else 1e-8, atol=1e-4 if dt == torch.float32 else 1e-8, equal_nan=True):
                    st["fail"].append("%s grad differs %s vs %s" % (sid, tgn.ravel()[:4], sgn.ravel()[:4])); continue
            st["pass"] += 1
tot_p = sum(v["pass"] for v in res.values()); tot_f = sum(len(v["fail"]) for v in res.values())
for k, v in sorted(res.items()):
    flag = "ok " if not v["fail"] else "BAD"
    print(flag, k, "pass", v["pass"], "fail", len(v["fail"]), "skip", v["skip"], *v["fail"][:3], sep=" ")
print("entries", len(res), "samples pass", tot_p, "fail", tot_f)
