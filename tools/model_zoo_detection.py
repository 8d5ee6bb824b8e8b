"""model_zoo_detection.py — torchvision.models.detection in tools/model_zoo.py (issue 75): what
both sides run for a detector and how its outputs are judged (imported by model_zoo_torch.py
under the reference PyTorch and by model_zoo_tessera.py under tessera.compat).

Per model: built with weights=None, weights_backbone=None and KWARGS below (small min_size /
max_size, score thresholds 0 so that random weights detect something, sampler batch sizes
beyond the anchor / proposal counts so that every anchor and proposal is sampled: the losses
are then free of the samplers' randperm; R-CNNs keep 300 proposals per level / image to bound
the time and memory). The BatchNorm running statistics are set, on the
PyTorch side before the state dict is saved, to one batch's statistics (random init has mean 0 /
variance 1, which leaves the features near zero). Input: two images 3x160x200 (values in
[0, 1), zc.hash_uniform), fixed targets (boxes, labels; masks and keypoints where the model
needs them). Keys:
  eval:NAME   fixed-shape eval tensors free of data-dependent selection: the batched images,
              the backbone's feature maps, the RPN head's objectness / deltas (R-CNNs) or the
              dense heads' outputs (RetinaNet, FCOS, SSD)
  det:I:FIELD the detections of image I (boxes, scores, labels; masks, keypoints,
              keypoints_scores) after top-k / NMS: judged as sets (match_err)
  train:loss_NAME the train-mode losses; grad:param:NAME every parameter gradient of their sum
Detections: each detection is matched, greedily by decreasing score, to the unused reference
detection of its label with the nearest box; err(boxes) = max box difference / max |box| over
the matched ones (likewise scores, masks, keypoints). A detection with no reference box within
1e-3 x the image size is a tie swap when an unmatched reference detection has its score to
1e-4 relative (random weights give near-tied scores, and which of two tied boxes survives NMS
or the top-k cut is then float noise): counted and reported, not judged; anything else
unmatched makes the model wrong. The judge: rules 1 (Tessera's float64 run against PyTorch's,
fixed-shape tensors), 2 and 3 of model_zoo_common. Rule 3's branch matching covers the kink
modules and torch.nn.functional.relu (the R-CNN box head, RetinaNet's P7, FCOS's box
regression apply it: KinkMatch.functional patches it during the recorded and replayed train
runs, on both sides); for the R-CNNs the RPN's proposals (a top-k / NMS choice, detached) are
recorded and imposed too (_proposals), so that the ROI heads' records line up. A flip farther
than FLIP_GAP x max|input| from its breakpoint means the two runs saw different elements: the
replay raises and rule 2 alone decides (kink_error in the result).
"""
import numpy as np

import model_zoo_common as zc

H, W = 160, 200
BATCH = 2
FLIP_GAP = 2.0 ** -10  # rule 3's replay: a flip farther from its breakpoint (x max|input|) means
#                        the two runs saw different elements there (no rule 3 then)
_BIG = 100000
KWARGS = {
    "fasterrcnn": dict(min_size=H, max_size=W, box_score_thresh=0.0,
                       rpn_batch_size_per_image=_BIG, box_batch_size_per_image=_BIG,
                       rpn_pre_nms_top_n_train=300, rpn_post_nms_top_n_train=300,
                       rpn_pre_nms_top_n_test=300, rpn_post_nms_top_n_test=300),
    "retinanet": dict(min_size=H, max_size=W, score_thresh=0.0),
    "fcos": dict(min_size=H, max_size=W, score_thresh=0.0),
    "ssd300": dict(score_thresh=0.0, topk_candidates=50, detections_per_img=100),
    "ssdlite": dict(score_thresh=0.0, topk_candidates=50, detections_per_img=100),
}
KWARGS["maskrcnn"] = KWARGS["keypointrcnn"] = KWARGS["fasterrcnn"]


def kwargs_for(name, extra=None):
    kw = dict(KWARGS.get(name.split("_")[0], {}))
    kw.update(extra or {})
    return kw


def images(torch, dtype):
    x = (zc.hash_uniform(BATCH * 3 * H * W, 7).reshape(BATCH, 3, H, W) + 1.0) / 2.0
    return [torch.tensor(x[i], dtype=dtype) for i in range(BATCH)]


def targets(torch, name, dtype):
    out = []
    for i in range(BATCH):
        boxes = np.array([[20., 30., 120., 140.], [100., 40., 190., 150.]]) + 5.0 * i
        labels = np.array([1, 1 if "keypoint" in name else 5 + i], np.int64)
        t = {"boxes": torch.tensor(boxes, dtype=dtype), "labels": torch.tensor(labels)}
        if "mask" in name:
            m = np.zeros((2, H, W), np.uint8)
            m[0, 40:130, 30:110] = 1
            m[1, 50:140, 110:180] = 1
            t["masks"] = torch.tensor(m)
        if "keypoint" in name:
            u = (zc.hash_uniform(2 * 17 * 3, 40 + i).reshape(2, 17, 3) + 1.0) / 2.0
            kp = np.zeros((2, 17, 3))
            for j, b in enumerate(boxes):
                kp[j, :, 0] = b[0] + 1 + u[j, :, 0] * (b[2] - b[0] - 2)
                kp[j, :, 1] = b[1] + 1 + u[j, :, 1] * (b[3] - b[1] - 2)
                kp[j, :, 2] = u[j, :, 2] > 0.2
            t["keypoints"] = torch.tensor(kp, dtype=torch.float32)  # torchvision: float32 only
        out.append(t)
    return out


def calibrate(torch, model, name):
    """BatchNorm running statistics := those of one train-mode batch (PyTorch side only)"""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for b in bns:
        b.reset_running_stats()
        b.momentum = None
    model.train()
    with torch.no_grad():
        il, _ = model.transform(images(torch, torch.float32), targets(torch, name, torch.float32))
        feats = model.backbone(il.tensors)
        fl = list(feats.values()) if isinstance(feats, dict) else [feats]
        if hasattr(model, "rpn"):
            g = torch.Generator().manual_seed(5)
            rh = model.roi_heads
            if any(isinstance(m, torch.nn.BatchNorm2d) for m in rh.box_head.modules()):
                rh.box_head(torch.randn(8, 256, 7, 7, generator=g))
            if rh.mask_head is not None:
                rh.mask_head(torch.randn(8, 256, 14, 14, generator=g))
        else:
            model.head(fl)
    model.eval()


def _np(t):
    return t.detach().cpu().double().numpy()


def run(torch, model, name, dtype, kinks=None, replay=False, eval_only=False):
    """{key: float64 numpy} of one run in dtype (model converted in place); kinks (a
    model_zoo_common.KinkMatch): the train run records its kink branches (modules and
    F.relu), or with replay=True imposes them (the eval part is then skipped); an R-CNN's eval
    run records its RPN proposals there too, imposed with eval_only=True (only the eval
    detections then: the detections on the float32 run's proposals)"""
    model.to(dtype).eval()
    got = {}
    imgs = images(torch, dtype)
    if eval_only:
        _proposals(torch, model, kinks, True, "rpn.proposals.eval")
        with torch.no_grad():
            dets = model(imgs)
        for i, d in enumerate(dets):
            for k, v in d.items():
                got["det:%d:%s" % (i, k)] = _np(v)
        return got
    if not replay:
        with torch.no_grad():
            il, _ = model.transform(imgs)
            got["eval:images"] = _np(il.tensors)
            feats = model.backbone(il.tensors)
            if isinstance(feats, torch.Tensor):
                feats = {"0": feats}
            for k, v in feats.items():
                got["eval:feat_" + k] = _np(v)
            fl = list(feats.values())
            if hasattr(model, "rpn"):
                obj, deltas = model.rpn.head(fl)
                for i, (o, d) in enumerate(zip(obj, deltas)):
                    got["eval:rpn_objectness%d" % i] = _np(o)
                    got["eval:rpn_deltas%d" % i] = _np(d)
            else:
                for k, v in model.head(fl).items():
                    got["eval:head_" + k] = _np(v)
            undo = (_proposals(torch, model, kinks, False, "rpn.proposals.eval")
                    if kinks is not None and hasattr(model, "rpn") else None)
            dets = model(imgs)
            if undo is not None:
                model.rpn.filter_proposals = undo
        for i, d in enumerate(dets):
            for k, v in d.items():
                got["det:%d:%s" % (i, k)] = _np(v)
    model.train()
    model.zero_grad()
    ctx = _Nothing()
    if kinks is not None:
        kinks.replay(model) if replay else kinks.record(model)
        ctx = kinks.functional("replay" if replay else "record")
        if hasattr(model, "rpn"):
            _proposals(torch, model, kinks, replay)
    with ctx:
        losses = model(images(torch, dtype), targets(torch, name, dtype))
    total = 0
    for k, v in sorted(losses.items()):
        got["train:loss_" + k] = _np(v)
        if v.dtype != dtype:  # PyTorch: binary_cross_entropy_with_logits(float64 input,
            got.setdefault("_narrow", []).append("train:loss_" + k)  # float32 target) is float32
        total = total + v
    total.backward()
    for n, p in model.named_parameters():
        if p.grad is not None:
            got["grad:param:" + n] = _np(p.grad)
    model.eval()
    return got


def _proposals(torch, model, kinks, replay, key="rpn.proposals"):
    """rule 3 for the R-CNNs: the RPN's proposals (its top-k and NMS over near-tied objectness:
    a discrete choice like a max-pool's argmax) are recorded in the float32 run and imposed,
    as float64 values of the float32 boxes, in the replay; they are detached in both libraries
    (no gradient flows through them), so the ROI heads then see the same boxes in the same
    order and the kink records of the box / mask / keypoint heads line up"""
    rpn = model.rpn
    orig = rpn.filter_proposals
    store = kinks.branches.setdefault(key, [])
    calls = [0]

    def filter_proposals(*args, **kw):
        boxes, scores = orig(*args, **kw)
        if not replay:
            store.append([b.detach().cpu().double().numpy() for b in boxes])
            return boxes, scores
        k = calls[0]
        calls[0] += 1
        if k >= len(store):
            raise RuntimeError("KinkMatch: rpn.filter_proposals called more often than recorded")
        rec = store[k]
        if len(rec) != len(boxes):
            raise RuntimeError("KinkMatch: rpn.filter_proposals: %d images, recorded %d"
                               % (len(boxes), len(rec)))
        out = [torch.tensor(r).to(b.dtype).to(b.device) for r, b in zip(rec, boxes)]
        return out, scores
    rpn.filter_proposals = filter_proposals
    return orig


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _fields(got, i):
    pre = "det:%d:" % i
    return {k[len(pre):]: v for k, v in got.items() if k.startswith(pre)}


def match_err(got, ref, i, size=max(H, W)):
    """{field: err} of image i's detections against ref's, and the counts
    (n, n_ref, tie_swaps, unmatched)"""
    a, r = _fields(got, i), _fields(ref, i)
    n, nr = len(a.get("scores", [])), len(r.get("scores", []))
    smax = max(float(np.max(np.abs(r["scores"]), initial=0.0)), 1e-30)
    used, pairs, lost = set(), [], []
    for k in np.argsort(-a["scores"], kind="stable") if n else []:
        cand = [j for j in range(nr) if j not in used and r["labels"][j] == a["labels"][k]]
        if cand:
            j = min(cand, key=lambda j: np.abs(r["boxes"][j] - a["boxes"][k]).max())
            if np.abs(r["boxes"][j] - a["boxes"][k]).max() <= 1e-3 * size:
                used.add(j)
                pairs.append((k, j))
                continue
        lost.append(k)
    free = [j for j in range(nr) if j not in used]
    ties = 0
    for k in lost:
        near = [j for j in free if abs(r["scores"][j] - a["scores"][k]) <= 1e-4 * smax]
        if near:
            free.remove(near[0])
            ties += 1
    errs = {}
    ka = np.array([p[0] for p in pairs], np.int64)
    kr = np.array([p[1] for p in pairs], np.int64)
    for f in r:
        if f == "labels":
            continue
        errs[f] = zc.rel_err(a[f][ka], r[f][kr]) if f in a else float("inf")
    return errs, dict(n=n, n_ref=nr, tie_swaps=ties, unmatched=len(lost) - ties)


def det_errors(got, ref):
    """{det:I:FIELD: err} and {I: counts}"""
    out, counts = {}, {}
    i = 0
    while "det:%d:scores" % i in ref:
        errs, c = match_err(got, ref, i)
        for f, e in errs.items():
            out["det:%d:%s" % (i, f)] = e
        counts[i] = c
        i += 1
    return out, counts


def ref(torch, name, out_dir, kwargs, family):
    """the PyTorch side: writes sd.pt, ref.npz (float64 values) and returns meta"""
    import copy
    import os
    import torchvision
    torch.manual_seed(0)
    kw = kwargs_for(name, kwargs)
    model = torchvision.models.get_model_builder(name)(weights=None, weights_backbone=None, **kw)
    zc.zero_dropout(model)
    calibrate(torch, model, name)
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()},
               os.path.join(out_dir, "sd.pt"))
    with zc.exact_float64(torch):
        r64 = run(torch, copy.deepcopy(model), name, torch.float64)
    kinks = zc.KinkMatch(torch, flip_gap=FLIP_GAP)
    r32 = run(torch, copy.deepcopy(model), name, torch.float32, kinks)
    # rule 3: PyTorch's float64 run on its own float32 run's kink branches
    r64bm, kink_error = {}, None
    try:
        with zc.exact_float64(torch):
            r64bm = run(torch, copy.deepcopy(model), name, torch.float64, kinks, replay=True)
    except RuntimeError as e:
        kink_error = str(e).splitlines()[0][:300]
    gscale = max([float(np.max(np.abs(v))) for k, v in r64.items()
                  if k.startswith("grad:param:") and v.size] + [0.0])
    narrow = r64.pop("_narrow", [])
    r32.pop("_narrow", None)
    err_torch = {k: zc.rel_err(r32[k], v, zc.denom_floor(k, r64, gscale))
                 for k, v in r64.items() if not k.startswith("det:")}
    err_torch_bm = {k: zc.rel_err(r32[k], r64bm[k], zc.denom_floor(k, r64, gscale))
                    for k in r64 if zc.is_gradient(k) and k in r64bm}
    counts_bm = None
    if hasattr(model, "rpn"):  # the eval detections on the float32 run's own RPN proposals
        try:
            with zc.exact_float64(torch):
                d64bm = run(torch, copy.deepcopy(model), name, torch.float64, kinks,
                            eval_only=True)
            derr_bm, counts_bm = det_errors(r32, d64bm)
            err_torch_bm.update(derr_bm)
        except RuntimeError as e:
            kink_error = kink_error or str(e).splitlines()[0][:300]
    derr, counts = det_errors(r32, r64)
    err_torch.update(derr)
    np.savez(os.path.join(out_dir, "ref.npz"), **r64)
    return dict(suite="torchvision", name=name, family=family, kwargs=kw, detection=True,
                input_shape=[BATCH, 3, H, W], nograd=[], train_random=False, grad_scale=gscale,
                err_torch=err_torch, det_counts_torch=counts, narrow_float64=narrow,
                err_torch_bm=err_torch_bm, kink_calls=kinks.n_calls(),
                det_counts_torch_bm=counts_bm,
                kink_flips_torch=kinks.flips, kink_error_torch=kink_error,
                n_params=int(sum(p.numel() for p in model.parameters())),
                torch_version=torch.__version__)


def _rejudge_dets(run_obj, torch, model, m, kinks, got, bad):
    """an R-CNN's detections beyond the judge, judged again against Tessera's float64 eval on
    the float32 run's own RPN proposals (their NMS at IoU 0.7 and top-k are discrete choices: a
    box whose IoU with a better one is within float32 noise of 0.7 is kept in one run and
    suppressed in the other, and the ROI heads then see another set): a set passes when every
    detection matches (tie swaps aside), a field when within rule 2 of PyTorch's float32 error
    against its own proposal-matched float64 run. Such rows are marked kink ("proposal flip")."""
    import copy
    try:
        bm = run(torch, copy.deepcopy(model), m["name"], torch.float64, kinks, eval_only=True)
    except RuntimeError as e:
        run_obj.res.setdefault("kink_error", {})["det"] = str(e).splitlines()[0][:300]
        return
    derr, counts = det_errors(got, bm)
    for r in bad:
        key = r["key"]
        if key.endswith(":sets"):
            i = int(key.split(":")[1])
            c = counts[i]
            ok = c["unmatched"] == 0 and c["n"] == c["n_ref"]
            r["note_bm"] = ("on its own proposals: %d detections vs %d, %d tie swaps, %d "
                            "unmatched" % (c["n"], c["n_ref"], c["tie_swaps"], c["unmatched"]))
        else:
            et = m["err_torch_bm"].get(key)
            if et is None or key not in derr:
                continue
            ratio, ok = zc.judge(derr[key], et)
            r.update(err_bm=derr[key], err_torch_bm=et)
        if ok:
            r.update(ok=True, why="", kink=True, ratio_max=r["ratio"],
                     ratio=0.0 if key.endswith(":sets") else ratio)


def judge_tessera(run_obj, torch, devices):
    """the Tessera side (model_zoo_tessera.Run): build, load, run in float32 on each device,
    judge every key (rule 2; detections by match_err)"""
    import copy
    import os
    import time
    import torchvision
    m = run_obj.meta
    run_obj.err64 = None
    run_obj.stage("build")
    model = torchvision.models.get_model_builder(m["name"])(weights=None, weights_backbone=None,
                                                           **m["kwargs"])
    zc.zero_dropout(model)
    run_obj.stage("load_state_dict")
    model.load_state_dict(torch.load(os.path.join(run_obj.d, "sd.pt")), strict=True)
    refs = {k: run_obj.ref[k] for k in run_obj.ref.files}
    # Tessera's own float64 run on cpu: the float64 gate (rule 1) of the fixed-shape tensors
    t0 = time.time()
    try:
        run_obj.stage("run@cpu:float64")
        g64 = run(torch, copy.deepcopy(model), m["name"], torch.float64)
        # keys PyTorch's float64 run returned in float32 (narrow_float64) have no gate
        run_obj.err64 = {k: zc.rel_err(g64[k], v, zc.denom_floor(k, refs, m["grad_scale"]))
                         for k, v in refs.items() if k in g64 and not k.startswith("det:")
                         and k not in m.get("narrow_float64", [])}
        del g64
    except Exception as e:  # judged without the gate
        run_obj.res["float64_error"] = "%s: %s" % (type(e).__name__,
                                                   (str(e).strip().splitlines() or [""])[0][:200])
    run_obj.res["times"]["cpu:float64"] = time.time() - t0
    for dev in devices:
        if dev != "cpu":  # detectors: cpu only here (host-side NMS / top-k loops)
            continue
        t1 = time.time()
        run_obj.stage("run@" + dev)
        kinks = zc.KinkMatch(torch, flip_gap=FLIP_GAP)
        got = run(torch, copy.deepcopy(model), m["name"], torch.float32, kinks)
        got.pop("_narrow", None)
        derr, counts = det_errors(got, refs)
        for key in refs:
            if key.startswith("det:"):
                if key.endswith(":labels"):
                    continue
                err, et = derr.get(key, float("inf")), m["err_torch"].get(key, 0.0)
                v = zc.judge_tensor(key, err, et)
                run_obj.res["rows"].append(dict(device=dev, key=key, err=err, err_torch=et,
                                                ratio=v["ratio"], ok=bool(v["ok"]),
                                                why=v["why"]))
            elif key in got:
                run_obj.compare(dev, key, got[key])
            else:
                run_obj.missing(dev, key)
        for i, c in counts.items():
            ok = c["unmatched"] == 0 and c["n"] == c["n_ref"]
            run_obj.res["rows"].append(dict(
                device=dev, key="det:%d:sets" % i, err=float(c["unmatched"]), err_torch=0.0,
                ratio=0.0 if ok else float("inf"), ok=ok, why="" if ok else "max",
                note="%d detections vs %d, %d tie swaps, %d unmatched"
                     % (c["n"], c["n_ref"], c["tie_swaps"], c["unmatched"])))
        again = [r for r in run_obj.res["rows"] if r["device"] == dev and r.get("why") == "max"
                 and zc.is_gradient(r["key"]) and r["key"] in got]
        if again and run_obj.err64 is not None and m.get("err_torch_bm"):
            run_obj.stage("run@%s:float64-matched" % dev)  # rule 3
            try:
                bm = run(torch, copy.deepcopy(model), m["name"], torch.float64, kinks,
                         replay=True)
                for r in again:
                    if r["key"] in bm:
                        run_obj.rejudge(r, got[r["key"]], bm[r["key"]])
                run_obj.res.setdefault("kink_flips", {})[dev] = kinks.flips
            except RuntimeError as e:
                run_obj.res.setdefault("kink_error", {})[dev] = str(e).splitlines()[0][:300]
        bad = [r for r in run_obj.res["rows"] if r["device"] == dev and not r["ok"]
               and r["key"].startswith("det:")]
        if bad and hasattr(model, "rpn") and m.get("det_counts_torch_bm"):
            _rejudge_dets(run_obj, torch, model, m, kinks, got, bad)
        run_obj.res.setdefault("kink_calls", {})[dev] = kinks.n_calls()
        run_obj.res.setdefault("det_counts", {})[dev] = counts
        run_obj.res["times"][dev] = time.time() - t1
    zc.finish(run_obj.res)  # rule 4 (pooled scalars), then the verdict
    run_obj.save()
