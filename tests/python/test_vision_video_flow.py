"""torchvision.models.video and .optical_flow on Tessera (issue 75 part 6): r2plus1d_18 (on a
[2, 3, 8, 32, 32] clip), two tiny MViTs (V1's and V2's flags on a 4 x 32 x 32 clip) and
raft_small (one 128 x 128 image pair, 2 flow updates), built by tessera.vision.models with the
parameters set by a formula (tools/model_zoo_common.param_array),
against PyTorch 2.15's float64 run of torchvision's same model (tests/data/
vision_video_flow_ref.npz / .json, made by tests/data/gen_vision_video_flow_ref.py):
- structure: the state-dict keys and shapes are torchvision's, in order (its state dict loads);
- float64 (the zoo judge's rule 1): the eval output, and for the train-mode backward of
  sum_i (out_i * W_i).sum() (RAFT: over every flow prediction) the norm and the projection of
  the input gradient and of every parameter gradient, within 256 * max(PyTorch's float32 error *
  2^-29, 8 * 2^-52) (norms and projections on the scale of their gradient's norm);
- float32 (rule 2): the eval output within 4 * max(PyTorch's float32 error, 8 * 2^-23).
The whole-size judgement of every video / flow builder is tools/model_zoo.py torchvision
(bench/results/torchvision-zoo.md)."""
import importlib.util
import json
import os

import numpy as np
import pytest

import tessera
from tessera.vision import models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(ROOT, "tests", "data", "vision_video_flow_ref")
_spec = importlib.util.spec_from_file_location(
    "model_zoo_common", os.path.join(ROOT, "tools", "model_zoo_common.py"))
zc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zc)
_gspec = importlib.util.spec_from_file_location(
    "gen_vision_video_flow_ref",
    os.path.join(ROOT, "tests", "data", "gen_vision_video_flow_ref.py"))
gen = importlib.util.module_from_spec(_gspec)
_gspec.loader.exec_module(gen)  # its summarise / forward run on Tessera as they run on PyTorch

META = json.load(open(REF + ".json"))["models"] if os.path.exists(REF + ".json") else {}
NAMES = sorted(META)


@pytest.fixture(scope="module")
def refs():
    if not NAMES:
        pytest.skip("no references %s.npz/.json: run tests/data/gen_vision_video_flow_ref.py"
                    % REF)
    return np.load(REF + ".npz")


def build(name, plant=None):
    info = META[name]
    tessera.manual_seed(0)
    model = gen.build(name, info["kwargs"], tessera)  # torchvision: see _tv
    zc.set_params_by_formula(model, tessera)
    if plant is not None:
        plant(model)
    return model


def judge(name, refs, plant=None, full=True):
    """{quantity: (err, bound)}: float64 eval / gnorm / gproj and float32 eval (full=False: the
    float64 eval output alone)"""
    info = META[name]
    model = build(name, plant)
    x32 = zc.input_array(tuple(info["input_shape"])).astype(np.float32)
    et = info["err_torch"]
    if not full:
        got = gen.summarise_eval(model, x32, tessera.float64, tessera, name)
        return {"eval64": (zc.rel_err(got, refs[name + ":eval"]), zc.bound64(et["eval"]))}
    got64 = gen.summarise(model, x32, tessera.float64, tessera, name)
    got32e = gen.summarise_eval(model, x32, tessera.float32, tessera, name)
    r = {q: refs["%s:%s" % (name, q)] for q in ("eval", "gnorm", "gproj")}
    out = {"eval64": (zc.rel_err(got64["eval"], r["eval"]), zc.bound64(et["eval"])),
           "gnorm64": (gen.per_scale_err(got64["gnorm"], r["gnorm"], r["gnorm"]),
                       zc.bound64(et["gnorm"])),
           "gproj64": (gen.per_scale_err(got64["gproj"], r["gproj"], r["gnorm"]),
                       zc.bound64(et["gproj"])),
           "eval32": (zc.rel_err(got32e, r["eval"]), zc.bound(et["eval"]))}
    return out


@pytest.fixture(autouse=True, scope="module")
def _tv():
    """zc.build does `import torchvision`: under tessera.compat that is tessera.vision"""
    import tessera.compat as compat
    compat.uninstall()
    compat.install()
    yield
    compat.uninstall()


@pytest.mark.parametrize("name", NAMES or ["none"])
def test_state_dict_is_torchvision(name, refs):
    model = build(name)
    got = [[k, list(v.shape)] for k, v in model.state_dict().items()]
    assert got == META[name]["state"], "%s: state-dict keys / shapes differ from torchvision's" \
        % name
    assert name.startswith("mvit_tiny") or name in models.list_models()


@pytest.mark.parametrize("name", NAMES or ["none"])
def test_matches_pytorch_float64(name, refs):
    res = judge(name, refs)
    bad = {q: v for q, v in res.items() if not v[0] <= v[1]}
    print(name, res)
    assert not bad, "%s: (err, bound) beyond the judge: %s" % (name, bad)


def test_planted_bugs_are_caught(refs):
    import tessera.vision.models.optical_flow.raft as raft
    # a flipped lookup offset order in RAFT's correlation lookup
    orig = raft.CorrBlock.index_pyramid

    def flipped(self, centroids_coords):
        return orig(self, centroids_coords.flip(1))
    raft.CorrBlock.index_pyramid = flipped
    try:
        res = judge("raft_small", refs, full=False)
    finally:
        raft.CorrBlock.index_pyramid = orig
    assert any(e > b for e, b in res.values()), res

    # a BatchNorm epsilon 1e-5 -> 2e-5 in one video block (a small, forward-only change)
    def eps(model):
        model.layer3[1].conv2[1].eps = 2e-5
    res = judge("r2plus1d_18", refs, eps, full=False)
    assert res["eval64"][0] > res["eval64"][1], res
