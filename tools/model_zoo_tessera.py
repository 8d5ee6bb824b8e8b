"""model_zoo_tessera.py — the Tessera side of tools/model_zoo.py, run under tessera.compat:

  TS_SIM_DEVICES=1 PYTHONPATH=build/python:/opt/torch-libs python3 -m tessera.compat \
      tools/model_zoo_tessera.py DIR [--devices cpu,sim:0]

Reads DIR/meta.json, DIR/sd.pt and DIR/ref.npz written by model_zoo_torch.py, builds the same
model through timm's / torchvision's own code (`import torch` is Tessera), loads the state dict
(strict=True) and PyTorch's non-persistent floating buffers (DIR/buffers.pt), runs on each
device what the PyTorch side ran (eval outputs; a fresh copy in train mode: outputs, the backward
of the same loss, the input and parameter gradients, the running statistics), first in float64 on
cpu (model.double(): the judge's float64 gate; a model Tessera cannot run in float64 is judged
without it, the reason kept as float64_error), then in float32 on each device (its kink branches
recorded; where a gradient fails rule 2, a float64 rerun on those branches for rule 3; then rule 4
on the scalar parameter gradients, model_zoo_common.finish), and writes
DIR/result.json: every compared tensor with Tessera's error, PyTorch's float32 error, the float64
gate's ratio, the branch-matched errors where rule 3 ran and the verdict
(model_zoo_common.judge_tensor), or the stage and the first line of the error that stopped it.
result.json is rewritten after each stage, so a crash or a timeout still says how far the model
got.
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
        floor = zc.denom_floor(key, self.ref, self.meta["grad_scale"])
        err = zc.rel_err(value, ref, floor)
        err_torch = self.meta["err_torch"][key]
        err64 = self.err64.get(key) if self.err64 is not None else None
        v = zc.judge_tensor(key, err, err_torch, err64, low64=bool(self.meta.get("low64")))
        row = dict(device=device, key=key, err=err, err_torch=err_torch, ratio=v["ratio"],
                   ok=bool(v["ok"]), why=v["why"], numel=int(np.size(ref)))
        if "ratio64" in v:
            row["ratio64"] = v["ratio64"]
        self.res["rows"].append(row)
        return row

    def rejudge(self, row, value, value_bm):
        """rule 3 for a gradient that failed rule 2 only: against the branch-matched float64"""
        key = row["key"]
        floor = zc.denom_floor(key, self.ref, self.meta["grad_scale"])
        err_bm = zc.rel_err(value, value_bm, floor)
        et_bm = self.meta.get("err_torch_bm", {}).get(key)
        v = zc.judge_tensor(key, row["err"], row["err_torch"], self.err64.get(key), err_bm, et_bm,
                            low64=bool(self.meta.get("low64")))
        row.update(ratio=v["ratio"], ok=bool(v["ok"]), why=v["why"], err_bm=err_bm,
                   err_torch_bm=et_bm)
        if v["kink"]:
            row.update(kink=True, ratio_max=v["ratio_max"])

    def missing(self, device, key):
        self.res["rows"].append(dict(device=device, key=key, err=float("inf"), err_torch=0.0,
                                     ratio=float("inf"), ok=False, missing=True))

    def collect(self, model, dev, dtype, tag, kinks=None, replay=False):
        """{key: numpy value} of one run (eval outputs, train outputs, input and parameter
        gradients, running statistics) and [keys of parameters PyTorch leaves without a
        gradient that have a non-zero one here]; kinks (zc.KinkMatch): the train run records
        its kink branches, or with replay=True imposes them (the eval run is then skipped)"""
        import torch
        m = self.meta
        x = self.ref["x"].astype(np.float32)
        got = {}
        if not replay:
            self.stage("eval@" + tag)
            me = copy.deepcopy(model).to(dev).to(dtype).eval()
            with torch.no_grad():
                out = zc.call_model(me, torch.tensor(x).to(dtype).to(dev), m["family"])
            flat = zc.flatten_outputs(out)
            for n, t in flat:
                if zc.judged_output(n, [k for k, _ in flat], m["family"]):
                    got["eval:" + n] = t.detach().cpu().double().numpy()
            del me, out
        self.stage("train@" + tag)
        mt = copy.deepcopy(model).to(dev).to(dtype).train()
        if kinks is not None:
            kinks.replay(mt) if replay else kinks.record(mt)
        xi = torch.tensor(x).to(dtype).to(dev).requires_grad_(True)
        out = zc.call_model(mt, xi, m["family"])
        loss = 0
        flat = zc.flatten_outputs(out)
        for i, (n, t) in enumerate(flat):
            if zc.judged_output(n, [k for k, _ in flat], m["family"]):
                got["train:" + n] = t.detach().cpu().double().numpy()
            w = zc.loss_weights(tuple(t.shape), i).astype(np.float32)
            loss = loss + (t * torch.tensor(w).to(dtype).to(dev)).sum()
        self.stage("backward@" + tag)
        loss.backward()
        extra = []
        if not m["train_random"]:
            got["grad:input"] = xi.grad.cpu().double().numpy()
            params = dict(mt.named_parameters())
            for n, p in params.items():
                if p.grad is not None:
                    got["grad:param:" + n] = p.grad.cpu().double().numpy()
            for n in m["nograd"]:
                g = params[n].grad if n in params else None
                if g is not None and float(g.abs().max()) != 0.0:
                    extra.append("grad:param:" + n)
            for n, b in mt.named_buffers():
                if n.endswith("running_mean") or n.endswith("running_var"):
                    got["buf:" + n] = b.detach().cpu().double().numpy()
        return got, extra

    def wanted(self, key):
        m = self.meta
        if key.startswith("eval:"):
            return True
        return not m["train_random"]

    def run(self, devices):
        import torch
        torch.set_num_threads(1) if hasattr(torch, "set_num_threads") else None
        m = self.meta
        if m.get("detection"):  # detectors: tools/model_zoo_detection.py
            import model_zoo_detection as zd
            return zd.judge_tessera(self, torch, devices)
        t0 = time.time()
        self.stage("build")
        model = zc.build(m["suite"], m["name"], m["kwargs"], torch)
        self.stage("load_state_dict")
        sd = torch.load(os.path.join(self.d, "sd.pt"))
        model.load_state_dict(sd, strict=True)
        extra = os.path.join(self.d, "buffers.pt")
        if os.path.exists(extra):  # non-persistent buffers: PyTorch's values (its build's)
            bufs = dict(model.named_buffers())
            with torch.no_grad():
                for k, v in torch.load(extra).items():
                    if k in bufs and tuple(bufs[k].shape) == tuple(v.shape):
                        bufs[k].copy_(v)
        self.res["times"]["build"] = time.time() - t0
        # Tessera's own float64 run (the float64 gate of the judge): on cpu
        t1 = time.time()
        self.err64 = None
        try:
            got, _ = self.collect(model, "cpu", torch.float64, "cpu:float64")
            self.err64 = {}
            for key in self.ref.files:
                if key in got:
                    self.err64[key] = zc.rel_err(got[key], self.ref[key], zc.denom_floor(
                        key, self.ref, m["grad_scale"]))
            del got
        except Exception as e:  # judged without the float64 gate (strict max bound)
            lib, inner = _where(e)
            self.res["float64_error"] = "%s: %s (at %s)" % (
                type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200], lib or inner)
        self.res["times"]["cpu:float64"] = time.time() - t1
        for dev in devices:
            t1 = time.time()
            kinks = zc.KinkMatch(torch)
            got, extra = self.collect(model, dev, torch.float32, dev, kinks)
            rows = []
            for key in self.ref.files:
                if key == "x" or not self.wanted(key):
                    continue
                if key in got:
                    rows.append(self.compare(dev, key, got[key]))
                else:
                    self.missing(dev, key)
            for key in extra:
                self.res["rows"].append(dict(device=dev, key=key, err=float("inf"),
                                             err_torch=0.0, ratio=float("inf"), ok=False,
                                             note="PyTorch has no gradient"))
            again = [r for r in rows if r["why"] == "max" and zc.is_gradient(r["key"])]
            if again and self.err64 is not None:  # rule 3: the branch-matched float64 run
                bm, _ = self.collect(model, "cpu", torch.float64, dev + ":float64-matched",
                                     kinks, replay=True)
                for r in again:
                    if r["key"] in bm:
                        self.rejudge(r, got[r["key"]], bm[r["key"]])
                self.res.setdefault("kink_flips", {})[dev] = kinks.flips
                del bm
            self.res.setdefault("kink_calls", {})[dev] = kinks.n_calls()
            del got
            self.res["times"][dev] = time.time() - t1
        zc.finish(self.res)  # rule 4 (pooled scalars), then the verdict
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
