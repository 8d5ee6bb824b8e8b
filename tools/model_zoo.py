"""model_zoo.py — whole model zoos (timm, torchvision.models) on Tessera against PyTorch 2.15
(issue 75, parts 4 and 6). Any python3 runs it; it starts one subprocess per model and side.

  tools/model_zoo.py timm --sample                 # the fixed sample (SAMPLE_TIMM below)
  tools/model_zoo.py timm --all                    # every model of timm.list_models()
  tools/model_zoo.py timm resnet18 vit_tiny_patch16_224 --img-size 64
  tools/model_zoo.py torchvision --sample          # or --all, or names
  tools/model_zoo.py page timm                     # re-render the page from the JSON

Options: --img-size N (a smaller square input where the model allows it: timm models that take
`img_size` are built with it; a model that fails at N falls back to its default size),
--timeout S per side (default 900), --mem-gib G (RLIMIT_AS of each side, default 6),
--work DIR (scratch, default /tmp/model_zoo; a model's files are deleted after it unless
--keep), --interleave (--all / --pattern: take the families in turn, one model of each per round, so
that a partial run covers every family), --retry-default (with --img-size: a model wrong there is
judged again at its default size, the small run's verdict kept in the record), --json FILE / --page FILE (default bench/results/SUITE-zoo.json / .md; results merge
into the JSON by model name, the page is rendered from it), --skip-done (models already in the
JSON are not run again).

Per model:
 1. PyTorch side (tools/model_zoo_torch.py under /opt/torch2/bin/torch-python): build with
    random weights (timm: pretrained=False, drop_rate=0, drop_path_rate=0; torchvision:
    weights=None; every dropout / drop-path module at p=0), save the initial state dict
    (torch.save) and a fixed input (batch 2), run the model in float32 and float64
    (model.double()): eval outputs; on a fresh copy in train mode the outputs and the backward
    of loss = sum_i (out_i * W_i).sum() (fixed W_i): the input gradient, every parameter
    gradient and the BatchNorm running statistics after the step. A model that PyTorch itself
    cannot build and run within the limits is "excluded" (not counted).
 2. Tessera side (tools/model_zoo_tessera.py under `python3 -m tessera.compat`, TS_SIM_DEVICES=1):
    the same model built by the same timm / torchvision code, load_state_dict(strict=True), the
    same runs in float64 on cpu (model.double()) and in float32 on cpu and on sim:0, each tensor
    judged against the float64 PyTorch value by model_zoo_common.judge_tensor (its docstring
    has the rules and their reasons), with
        err(A, R) = max|A - R| / max(max|R|, 1e-3 * (largest parameter gradient) for
                    parameter gradients, else 0),  K = 4, C = 8:
    rule 1 (float64 gate, every tensor): err(Tessera f64, PyTorch f64) <= 256 * max(err(PyTorch
      f32) * 2^-29, C * 2^-52): a wrong op is wrong in both precisions (a model that computes
      parts in float32 under .double(), "low64", gets rule 2's bound here);
    rule 2 (every tensor): err(Tessera f32) <= K * max(err(PyTorch f32), C * 2^-23);
    rule 3 (kink flips; gradients only, with rule 1 passed): a gradient beyond rule 2 passes
      when err(Tessera f32, Tessera f64 on the f32 run's own ReLU / ReLU6 / hardtanh / leaky
      ReLU / hard-swish / hard-sigmoid branches) <= K * max(err(PyTorch f32, PyTorch f64 on
      PyTorch's f32 branches), C * 2^-23): a pre-activation within float32 noise of a kink on
      the other side than in float64 moves every gradient below it by O(the upstream gradient),
      densely (no statistic of the float32 error can tell that from a wrong number), while the
      forward is continuous (never exempt). Such a tensor is counted as "kink".
    rule 4 (pooled scalars; parameter gradients of one element, each one long cancelling sum
      whose float32 error is a random draw in either library): a scalar beyond rule 2 passes
      when the rms of Tessera's errors over its group (same parameter name with the block
      indices as `*`, same device, >= 2 members) <= K * max(rms of PyTorch's, C * 2^-23).
      Counted as "pooled" (n_pooled; the groups in "pooled").
    PyTorch's float64 runs use the exact hardsigmoid derivative (model_zoo_common.exact_float64:
    PyTorch 2.15's CPU kernel multiplies by 1.0f / 6.0f even in float64) and a two-pass
    float64 batch_norm for batch statistics (batch_norm64: PyTorch's is off by up to ~700
    eps64 where a channel's mean is many times its spread; decision 0054). Verdicts: "pass";
    "wrong" = runs, some tensor beyond the judge (the worst one is named, with the rule it
    failed); "fail" = an exception (its first line, the stage and the line of the model library
    that raised are recorded). A model whose train-mode outputs are random even with every
    dropout at 0 is judged on its eval outputs only (noted).
torchvision: `import torchvision` under tessera.compat is tessera.vision; a builder that
tessera.vision.models lacks is recorded as "fail: no builder" without running PyTorch.
Segmentation models (weights_backbone=None on both sides) are judged like the others on their
output dict ('out', and 'aux' where built with it). Detection models (tools/
model_zoo_detection.py: two 3x160x200 images, fixed targets, score thresholds 0) are judged on
their fixed-shape eval tensors (features, RPN / dense head outputs), their detections matched as
sets (near-tied scores may swap a box: counted as tie swaps), the train-mode loss dict and every
parameter gradient, by rules 1-4 (rule 3 also matching F.relu and the RPN's proposals), on cpu
only. Video models (models.video) take a [2, 3, T, S, S] clip, T = 8 frames (s3d and mvit: 16,
their least) of --img-size S (falling back to the default 224 where the model needs it); MViT
at batch 1 (model_zoo_torch.BATCH_OF: batch 2's float64 backward exceeds the memory limits).
Optical-flow models (RAFT) take an [2, 2, 3, 128, 128] input, the image pair x[:, 0], x[:, 1]
(model_zoo_common.call_model), default 12 updates: the loss runs over every flow prediction,
the final flow alone is judged as an output (with the input and parameter gradients and the
statistics, as for the others); PyTorch's float64 reference makes torchvision's float32
coordinate grid in float64 (model_zoo_torch.flow_dtype).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCH_PY = os.environ.get("TORCH_PYTHON", "/opt/torch2/bin/torch-python")
TESS_PY = os.environ.get("TESSERA_PYTHON", "/usr/bin/python3")
TESS_PATH = os.environ.get("TESSERA_PYTHONPATH",
                           os.path.join(ROOT, "build", "python") + ":/opt/torch-libs")

# the CI sample (tests/python/test_model_zoo_sample.py) and `--sample`: (name, kwargs, side)
SAMPLE_TIMM = [
    ("resnet10t", {}, 64), ("resnet18", {}, 96), ("resnet26d", {}, 64),
    ("efficientnet_b0", {}, 64), ("mobilenetv3_small_050", {}, 64),
    ("mobilenetv2_050", {}, 64), ("regnetx_002", {}, 64), ("regnety_002", {}, 64),
    ("vit_tiny_patch16_224", dict(img_size=32, depth=2), 32),
    ("deit_tiny_patch16_224", dict(img_size=32, depth=2), 32),
    ("convnext_atto", {}, 64), ("levit_128s", dict(img_size=128), 128),
    ("ghostnet_050", {}, 64), ("mixer_s32_224", dict(img_size=64), 64),
    ("densenet121", {}, 96), ("beit_base_patch16_224", dict(img_size=32, depth=2), 32),
    ("poolformer_s12", {}, 64), ("mobilevit_xxs", {}, 64), ("tinynet_e", {}, 64),
    ("lcnet_050", {}, 64), ("dla34", {}, 64), ("cspresnet50", {}, 96), ("dpn68", {}, 64),
    ("rexnet_100", {}, 64), ("mnasnet_050", {}, 64), ("repvgg_a0", {}, 64),
    ("edgenext_xx_small", {}, 64), ("resmlp_12_224", dict(img_size=32), 32),
    ("pit_ti_224", dict(img_size=64), 64), ("coat_lite_tiny", dict(img_size=64), 64),
    ("xception41", {}, 64), ("hrnet_w18_small", {}, 64),
]
SAMPLE_TORCHVISION = [
    ("resnet18", {}, 96), ("mobilenet_v3_small", {}, 64), ("mobilenet_v2", {}, 64),
    ("squeezenet1_0", {}, 64), ("squeezenet1_1", {}, 64), ("efficientnet_b0", {}, 64),
    ("densenet121", {}, 96), ("alexnet", {}, 64), ("vgg11", {}, 32), ("resnext50_32x4d", {}, 64),
    ("vit_b_16", dict(image_size=64), 64), ("shufflenet_v2_x0_5", {}, 64),
    ("mnasnet0_5", {}, 64), ("regnet_x_400mf", {}, 64), ("convnext_tiny", {}, 64),
    ("googlenet", dict(aux_logits=False, init_weights=True), 64), ("swin_t", {}, 64),
    ("fasterrcnn_mobilenet_v3_large_320_fpn", {}, 320),
]


def _limits(mem_gib):
    def f():
        lim = int(mem_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        os.setsid()
    return f


def _run(cmd, env, timeout, mem_gib, log):
    t = time.time()
    with open(log, "w") as out:
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 preexec_fn=_limits(mem_gib), cwd=ROOT)
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = "timeout"
    return rc, time.time() - t


def _tail(log, n=1):
    try:
        lines = [x for x in open(log).read().splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])[:300]


def tessera_builders():
    """torchvision.models.list_models() as Tessera answers it"""
    env = dict(os.environ, PYTHONPATH=TESS_PATH)
    code = "import json, torchvision; print(json.dumps(torchvision.models.list_models()))"
    out = subprocess.run([TESS_PY, "-m", "tessera.compat", "-c", code], env=env,
                         capture_output=True, text=True, cwd=ROOT)
    return set(json.loads(out.stdout.strip().splitlines()[-1])) if out.returncode == 0 else set()


def run_model(suite, name, kwargs, img, args):
    d = os.path.join(args.work, suite, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rec = dict(name=name, suite=suite, img=img, kwargs=kwargs)
    cmd = [TORCH_PY, os.path.join(HERE, "model_zoo_torch.py"), "ref", suite, name, d]
    if img:
        cmd += ["--img-size", str(img)]
    if kwargs:
        cmd += ["--kwargs", json.dumps(kwargs)]
    rc, t = _run(cmd, dict(os.environ, OMP_NUM_THREADS="1"), args.timeout, args.mem_gib,
                 os.path.join(d, "torch.log"))
    rec["time_torch"] = round(t, 1)
    if rc != 0:
        rec.update(status="excluded", error="PyTorch side: " + (
            "timeout after %ds" % args.timeout if rc == "timeout"
            else _tail(os.path.join(d, "torch.log"))))
        return rec, d
    meta = json.load(open(os.path.join(d, "meta.json")))
    rec.update(family=meta["family"], input_shape=meta["input_shape"], n_params=meta["n_params"],
               train_random=meta["train_random"], kwargs=meta["kwargs"])
    env = dict(os.environ, PYTHONPATH=TESS_PATH, TS_SIM_DEVICES="1", OMP_NUM_THREADS="1")
    cmd = [TESS_PY, "-m", "tessera.compat", os.path.join(HERE, "model_zoo_tessera.py"), d]
    rc, t = _run(cmd, env, args.timeout, args.mem_gib, os.path.join(d, "tessera.log"))
    rec["time_tessera"] = round(t, 1)
    try:
        res = json.load(open(os.path.join(d, "result.json")))
    except (OSError, ValueError):
        res = dict(status="fail", stage="start", error=_tail(os.path.join(d, "tessera.log")))
    if rc == "timeout":
        res.update(status="fail", error="timeout after %ds at %s" % (args.timeout, res["stage"]))
    elif rc != 0 and res.get("status") != "fail":
        res.update(status="fail", error="exit %s at %s: %s" % (
            rc, res.get("stage"), _tail(os.path.join(d, "tessera.log"))))
    rec.update(status=res["status"], stage=res.get("stage"))
    for k in ("error", "where_lib", "where"):
        if res.get(k):
            rec[k] = res[k]
    rows = res.get("rows", [])
    if rows:
        worst = max(rows, key=lambda r: r["ratio"])
        rec.update(worst_ratio=worst["ratio"], worst_key="%s@%s" % (worst["key"], worst["device"]),
                   worst_err=worst["err"], worst_err_torch=worst["err_torch"],
                   worst_rule=worst.get("why", ""),
                   n_compared=len(rows), n_bad=sum(1 for r in rows if not r["ok"]),
                   n_kink=sum(1 for r in rows if r.get("kink")),
                   n_pooled=sum(1 for r in rows if r.get("pooled")),
                   worst_ratio64=max((r.get("ratio64", 0.0) for r in rows), default=0.0))
    if res.get("pooled"):  # rule 4's groups: "GROUP@DEVICE" -> n, passed, ratio, rms, rms_torch
        rec["pooled"] = res["pooled"]
    for k in ("float64_error", "kink_flips", "kink_error"):
        if res.get(k):
            rec[k] = res[k]
    if meta.get("low64"):  # parts computed in float32 under .double(): rule 1 at rule 2's bound
        rec["low64"] = meta["low64"]
    return rec, d


def retry_default(suite, name, kw, img, args, small, d):
    """--retry-default: a model wrong at --img-size N is judged again at its default size (a
    late BatchNorm that sees a handful of values a channel at N, e.g. 2 x 2 x 2 at 64x64, makes
    its gradients follow every upstream float32 rounding: session 52's finding), with at least
    10 GiB and 900 s a side; the record keeps the small run's verdict in `small_size`"""
    if d and not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    big = argparse.Namespace(**vars(args))
    big.mem_gib, big.timeout = max(args.mem_gib, 10.0), max(args.timeout, 900)
    rec, d = run_model(suite, name, kw, None, big)
    rec["small_size"] = {k: small.get(k) for k in ("img", "status", "worst_ratio", "worst_key")}
    note = "wrong at %dx%d (worst ratio %s at %s); judged at its default size" % (
        img, img, _fmt(small.get("worst_ratio")), small.get("worst_key", "?"))
    rec["note"] = (rec["note"] + "; " + note) if rec.get("note") else note
    return rec, d


def interleave(names):
    """[[name, family], ...] reordered one model of each family per round, families and
    the models within each in their listed order"""
    fams = {}
    for n, f in names:
        fams.setdefault(f, []).append([n, f])
    out, k = [], 0
    while len(out) < len(names):
        out += [m[k] for m in fams.values() if k < len(m)]
        k += 1
    return out


def load_json(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}


def _fmt(x):
    if x is None:
        return ""
    if x == float("inf"):
        return "inf"
    return "%.2f" % x if x < 100 else "%.3g" % x


def render(suite, results, page, command):
    recs = sorted((v for k, v in results.items() if not k.startswith("_")),
                  key=lambda r: (r.get("family", "~"), r["name"]))
    counted = [r for r in recs if r["status"] != "excluded"]
    fams = {}
    for r in counted:
        f = fams.setdefault(r.get("family", "?"), dict(pass_=0, wrong=0, fail=0))
        f[{"pass": "pass_"}.get(r["status"], r["status"])] += 1
    n = len(counted)
    npass = sum(1 for r in counted if r["status"] == "pass")
    title = {"timm": "timm model zoo", "torchvision": "torchvision.models"}[suite]
    L = ["# %s on Tessera against PyTorch 2.15 (issue 75)" % title, "",
         "Generated by `tools/model_zoo.py` (the procedure and the judge are in its docstring;",
         "this page is rendered from `%s`)." % os.path.basename(page).replace(".md", ".json"), "",
         "Judge, per tensor (eval outputs, train-mode outputs, input gradient, every parameter",
         "gradient, BatchNorm running statistics after the train step; on cpu and on sim:0),",
         "against PyTorch's float64 run of the same model and weights, with",
         "`err(A, R) = max|A - R| / max|R|` (parameter gradients: the denominator is at least",
         "1e-3 x the largest parameter gradient); the rules (`tools/model_zoo_common.py`):",
         "",
         "1. **float64 gate**, every tensor: Tessera's own float64 run (cpu) must agree with",
         "   PyTorch's: `err(Tessera f64) <= 256 * max(err(PyTorch f32) * 2^-29, 8 * 2^-52)`",
         "   (~1e-11 of the scale): a wrong op is wrong in both precisions. A model that",
         "   computes parts in float32 even under `.double()` (PyTorch's float64 run makes",
         "   float32 tensors; listed in the cause column) gets rule 2's bound here instead.",
         "2. every tensor: `err(Tessera f32) <= 4 * max(err(PyTorch f32), 8 * 2^-23)`.",
         "3. **kink flips** (gradients only, rule 1 passed): a pre-activation within float32 noise",
         "   of a ReLU / ReLU6 / hardtanh / leaky-ReLU / hard-swish / hard-sigmoid breakpoint that",
         "   lands on the other side than in float64 moves every gradient below it by O(the",
         "   upstream gradient), densely (dla34: one flip puts the *median* error of level5's",
         "   BatchNorm-bias gradients at 1e-3, PyTorch's largest is 1e-5), in either library at",
         "   different places. A gradient beyond rule 2 passes when Tessera's float32 value is",
         "   within `4 * max(err_bm(PyTorch f32), 8 * 2^-23)` of Tessera's float64 run taken on",
         "   the float32 run's own branches (forward hooks record and impose them), err_bm being",
         "   PyTorch's float32 error against its float64 run on its own branches. The forward is",
         "   continuous at a kink, so no forward tensor is exempt. `kink` below counts such",
         "   tensors.",
         "4. **pooled scalars** (parameter gradients of one element: StarReLU's `act.scale` /",
         "   `act.bias`, HGNetV2's `lab.scale` / `lab.bias`): each is one sum of 16k-131k",
         "   summands with a condition number in the thousands, so PyTorch's own error is one",
         "   random draw (PyTorch's 2-thread run judged by rule 2 against its 1-thread run fails",
         "   by up to 24x, caformer_s36). They are judged as a class: grouped per device by the",
         "   parameter name with block indices replaced by `*` (`stages.*.blocks.*.mlp.act.bias`),",
         "   a scalar beyond rule 2 passes when its group (>= 2 members) does:",
         "   `rms err(Tessera f32) <= 4 * max(rms err(PyTorch f32), 8 * 2^-23)`. Rule 1 still",
         "   applies to each scalar; a group of one stays under rule 2. A float32-only",
         "   systematic error e in one of n scalars still fails when it dominates the rms,",
         "   e > ~4 sqrt(n) x PyTorch's rms (a planted x(1 + 1e-4) in a test group of 16); in",
         "   every member, from ~4x (decision 0052). The cause column counts the pooled ones.",
         "",
         "PyTorch's float64 runs use the exact hardsigmoid derivative (PyTorch 2.15's CPU kernel",
         "multiplies by `1.0f / 6.0f` even in float64: 3e-8 off; found by ghostnet_050's gate)",
         "and a two-pass float64 BatchNorm for batch statistics (PyTorch's float64 batch_norm is",
         "off by up to ~700 eps64 where a channel's mean is many times its spread; found by",
         "ghostnetv3_050's gate; decision 0054).",
         "A planted `x (1 + 1e-4)` at one conv of dla34 (forward or backward only, both precisions",
         "or float32 only) is flagged (`tests/python/test_model_zoo_sample.py`).",
         "**wrong** = runs but some tensor fails a rule; **fail** = an exception;",
         "**excluded** = PyTorch itself does not build and run it within the limits (not counted).",
         "Limits per model and side: RLIMIT_AS %s GiB, timeout %s s, one thread, batch 2."
         % (results.get("_limits", {}).get("mem_gib", 6), results.get("_limits", {}).get(
             "timeout", 900)), "",
         "Command of the last run: `%s`. The models below are the ones run so far (the sample"
         % command, "list of tools/model_zoo.py, at each model's default input size unless the",
         "input column says otherwise; kwargs such as depth=2 as listed there); the whole zoo is",
         "`python3 tools/model_zoo.py %s --all` (add --skip-done to resume)." % suite, "",
         "## Totals", "",
         "%d models judged: **%d pass, %d wrong, %d fail** (%.0f%% pass); %d excluded." % (
             n, npass, sum(1 for r in counted if r["status"] == "wrong"),
             sum(1 for r in counted if r["status"] == "fail"), 100.0 * npass / max(n, 1),
             len(recs) - n), "",
         "| family | pass | wrong | fail |", "|---|---|---|---|"]
    for f in sorted(fams):
        c = fams[f]
        L.append("| %s | %d | %d | %d |" % (f, c["pass_"], c["wrong"], c["fail"]))
    if results.get("_notes"):  # findings kept in the JSON under "_notes" (a list of lines)
        L += ["", "## Findings", ""] + list(results["_notes"])
    L += ["", "## Model by model", "",
          "ratio = err / (bound / 4) of the worst tensor by the rule that decided it (pass at"
          " <= 4; a kink-exempt gradient's is rule 3's); f64 = the worst rule-1 ratio (pass at"
          " <= 4); kink = tensors passed by rule 3 (of both devices; flips: the elements whose"
          " branch differs between the float32 run and its float64 run, cpu/sim:0); times are"
          " wall seconds of"
          " each side's whole subprocess (imports included).", "",
          "| model | family | input | status | worst ratio | worst tensor | f64 | kink | "
          "PyTorch s | Tessera s | cause |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        cause = r.get("error", "")
        if r.get("where_lib"):
            cause += " — at " + r["where_lib"]
        if r.get("train_random"):
            cause = (cause + "; " if cause else "") + "train mode random: eval judged only"
        if r["status"] == "wrong":
            cause = "%d of %d tensors beyond the judge (worst: rule %s)" % (
                r.get("n_bad", 0), r.get("n_compared", 0),
                {"float64": "1", "max": "2"}.get(r.get("worst_rule"), "?"))
        if r.get("n_pooled"):  # scalars passed by rule 4, with the worst group's ratio
            cause = (cause + "; " if cause else "") + "rule 4: %d scalars pooled (worst group " \
                "ratio %s)" % (r["n_pooled"], _fmt(max(
                    (g["ratio"] for g in r.get("pooled", {}).values() if g["passed"]),
                    default=None)))
        if r.get("low64"):
            cause = (cause + "; " if cause else "") + "float32 inside its float64 run (%s): " \
                "rule 1 at rule 2's bound" % ", ".join(r["low64"][:4])
        if r.get("float64_error"):
            cause = (cause + "; " if cause else "") + "no float64 run: " + r["float64_error"]
        if r.get("note"):  # a cause found by hand (kept in the JSON row, not rerun)
            cause = (cause + "; " if cause else "") + r["note"]
        shape = "x".join(str(s) for s in r.get("input_shape", [])[1:])
        f64 = _fmt(r.get("worst_ratio64")) if "worst_ratio64" in r else ""
        kink = str(r.get("n_kink", "")) if "n_kink" in r else ""
        if r.get("kink_flips"):  # flips in the float32 run of each device rule 3 looked at
            kink += " (%s flips)" % "/".join(str(v) for v in r["kink_flips"].values())
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], r.get("family", ""), shape, r["status"], _fmt(r.get("worst_ratio")),
            r.get("worst_key", "").replace("grad:param:", "grad "), f64,
            kink, r.get("time_torch", ""),
            r.get("time_tessera", ""), cause.replace("|", "/")))
    with open(page, "w") as f:
        f.write("\n".join(L) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", choices=["timm", "torchvision", "page"])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--sample", action="store_true")
    ap.add_argument("--pattern")
    ap.add_argument("--img-size", type=int)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--mem-gib", type=float, default=6.0)
    ap.add_argument("--work", default="/tmp/model_zoo")
    ap.add_argument("--json")
    ap.add_argument("--page")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-done", action="store_true")
    ap.add_argument("--interleave", action="store_true")
    ap.add_argument("--retry-default", action="store_true")
    args = ap.parse_args(argv)
    if args.suite == "page":
        suite = args.names[0]
        js = args.json or os.path.join(ROOT, "bench", "results", "%s-zoo.json" % suite)
        results = load_json(js)
        render(suite, results, args.page or js[:-5] + ".md", results.get("_command", ""))
        return 0
    suite = args.suite
    js = args.json or os.path.join(ROOT, "bench", "results", "%s-zoo.json" % suite)
    page = args.page or js[:-5] + ".md"
    sample = SAMPLE_TIMM if suite == "timm" else SAMPLE_TORCHVISION
    todo = []
    if args.sample:
        # the sample's models at their default input size (the side and img_size of the list
        # are the CI sample's); kwargs such as depth=2 kept
        todo += [(n, {k: v for k, v in kw.items() if k not in ("img_size", "image_size")},
                  args.img_size) for n, kw, s in sample]
    families = {}
    if args.all or args.pattern or suite == "torchvision":
        cmd = [TORCH_PY, os.path.join(HERE, "model_zoo_torch.py"), "list", suite]
        if args.pattern:
            cmd.append(args.pattern)
        names = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                          check=True).stdout.strip().splitlines()[-1])
        families = dict(names)
        if args.all or args.pattern:
            if args.interleave:
                names = interleave(names)
            todo += [(n, {}, args.img_size) for n, _ in names]
    todo += [(n, {}, args.img_size) for n in args.names]
    results = load_json(js)
    results["_limits"] = dict(mem_gib=args.mem_gib, timeout=args.timeout)
    results["_command"] = "python3 tools/model_zoo.py " + " ".join(argv)
    have = tessera_builders() if suite == "torchvision" else None
    for i, (name, kw, img) in enumerate(todo):
        if args.skip_done and name in results:
            continue
        if have is not None and name not in have:
            rec = dict(name=name, suite=suite, status="fail", img=img, kwargs=kw,
                       family=families.get(name, "?"),
                       error="no builder: tessera.vision.models has no %r" % name)
            d = None
        else:
            rec, d = run_model(suite, name, kw, img, args)
            if img and args.retry_default and rec["status"] == "wrong":
                rec, d = retry_default(suite, name, kw, img, args, rec, d)
        # read-merge-write: another run writing the same JSON meanwhile keeps its records
        fresh = load_json(js)
        fresh.update({k: results[k] for k in ("_limits", "_command")})
        results = fresh
        results[name] = rec
        print("[%d/%d] %-40s %-8s %s %s" % (i + 1, len(todo), name, rec["status"],
                                            _fmt(rec.get("worst_ratio")),
                                            rec.get("error", rec.get("worst_key", ""))),
              flush=True)
        with open(js, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        render(suite, results, page, results["_command"])
        if d and not args.keep:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
