"""model_zoo_tessera.py — the Tessera side of tools/model_zoo.py, run under tessera.compat:

  TS_SIM_DEVICES=1 PYTHONPATH=build/python:/opt/torch-libs python3 -m tessera.compat \
      tools/model_zoo_tessera.py DIR [--devices cpu,sim:0]

Reads DIR/meta.json, DIR/sd.pt and DIR/ref.npz written by model_zoo_torch.py, builds the same
model through timm's / torchvision's own code (`import torch` is Tessera), loads the state dict
(strict=True), runs on each device what the PyTorch side ran (eval outputs; a fresh copy in
train mode: outputs, the backward of the same loss, the input and parameter gradients, the
running statistics) and writes DIR/result.json: every compared tensor with Tessera's error,
PyTorch's float32 error and the verdict (model_zoo_common.judge), or the stage and the first
line of the error that stopped it. result.json is rewritten after each stage, so a crash or a
timeout still says how far the model got.
"""
import copy
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo_common as zc  # noqa: E402


def _where(exc):
    """the innermost frame of the traceback in the model library and the innermost overall"""
    tb = traceback.extract_tb(exc.__traceback__)
    lib = [f for f in tb if "/timm/" in f.filename or "/vision/" in f.filename
           or "/torchvision/" in f.filename]
    fmt = lambda f: "%s:%d (%s)" % (f.filename.split("site-packages/")[-1].split("/python/")[-1],
                                     f.lineno, f.name)
    return (fmt(lib[-1]) if lib else None), (fmt(tb[-1]) if tb else None)


class Run:
    def __init__(self, d):
        self.d = d
        self.meta = json.load(open(os.path.join(d, "meta.json")))
        self.ref = np.load(os.path.join(d, "ref.npz"))
        self.res = dict(name=self.meta["name"], suite=self.meta["suite"], stage="start",
                        status="running", rows=[], times={})

    def save(self):
        with open(os.path.join(self.d, "result.json"), "w") as f:
            json.dump(self.res, f, indent=1)

    def stage(self, s):
        self.res["stage"] = s
        self.save()

    def compare(self, device, key, value):
        ref = self.ref[key]
        err_torch = self.meta["err_torch"][key]
        err = zc.rel_err(value, ref, zc.denom_floor(key, self.ref, self.meta["grad_scale"]))
        ratio, ok = zc.judge(err, err_torch)
        self.res["rows"].append(dict(device=device, key=key, err=err, err_torch=err_torch,
                                     ratio=ratio, ok=bool(ok)))

    def missing(self, device, key):
        self.res["rows"].append(dict(device=device, key=key, err=float("inf"), err_torch=0.0,
                                     ratio=float("inf"), ok=False, missing=True))

    def run(self, devices):
        import torch
        torch.set_num_threads(1) if hasattr(torch, "set_num_threads") else None
        m = self.meta
        t0 = time.time()
        self.stage("build")
        model = zc.build(m["suite"], m["name"], m["kwargs"], torch)
        self.stage("load_state_dict")
        sd = torch.load(os.path.join(self.d, "sd.pt"))
        model.load_state_dict(sd, strict=True)
        self.res["times"]["build"] = time.time() - t0
        x32 = self.ref["x"].astype(np.float32)
        for dev in devices:
            t1 = time.time()
            self.stage("eval@" + dev)
            me = copy.deepcopy(model).to(dev).eval()
            with torch.no_grad():
                out = me(torch.tensor(x32).to(dev))
            got = dict(("eval:" + n, t) for n, t in zc.flatten_outputs(out))
            for key in self.ref.files:
                if key.startswith("eval:"):
                    if key in got:
                        self.compare(dev, key, got[key].detach().cpu().numpy())
                    else:
                        self.missing(dev, key)
            del me, out, got
            self.stage("train@" + dev)
            mt = copy.deepcopy(model).to(dev).train()
            xi = torch.tensor(x32).to(dev).requires_grad_(True)
            out = mt(xi)
            flat = zc.flatten_outputs(out)
            loss = 0
            for i, (n, t) in enumerate(flat):
                key = "train:" + n
                if key in self.ref.files and not m["train_random"]:
                    self.compare(dev, key, t.detach().cpu().numpy())
                w = zc.loss_weights(tuple(t.shape), i).astype(np.float32)
                loss = loss + (t * torch.tensor(w).to(dev)).sum()
            self.stage("backward@" + dev)
            loss.backward()
            if not m["train_random"]:
                self.compare(dev, "grad:input", xi.grad.cpu().numpy())
                params = dict(mt.named_parameters())
                for key in self.ref.files:
                    if key.startswith("grad:param:"):
                        p = params.get(key[len("grad:param:"):])
                        if p is None or p.grad is None:
                            self.missing(dev, key)
                        else:
                            self.compare(dev, key, p.grad.cpu().numpy())
                for n in m["nograd"]:
                    g = params[n].grad if n in params else None
                    if g is not None and float(g.abs().max()) != 0.0:
                        self.res["rows"].append(dict(device=dev, key="grad:param:" + n,
                                                     err=float("inf"), err_torch=0.0,
                                                     ratio=float("inf"), ok=False,
                                                     note="PyTorch has no gradient"))
                bufs = dict(mt.named_buffers())
                for key in self.ref.files:
                    if key.startswith("buf:"):
                        b = bufs.get(key[4:])
                        if b is None:
                            self.missing(dev, key)
                        else:
                            self.compare(dev, key, b.detach().cpu().numpy())
            del mt, out, flat, loss, xi
            self.res["times"][dev] = time.time() - t1
        rows = self.res["rows"]
        self.res["stage"] = "done"
        self.res["status"] = "pass" if all(r["ok"] for r in rows) else "wrong"
        self.save()


def main(argv):
    import warnings
    warnings.filterwarnings("ignore")
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    devices = ["cpu", "sim:0"]
    if "--devices" in argv:
        devices = argv[argv.index("--devices") + 1].split(",")
    r = Run(argv[0])
    try:
        r.run(devices)
    except BaseException as e:  # recorded, then the process fails
        lib, inner = _where(e)
        msg = (str(e).strip().splitlines() or [""])[0]
        r.res.update(status="fail", error="%s: %s" % (type(e).__name__, msg[:300]),
                     where_lib=lib, where=inner)
        r.save()
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
