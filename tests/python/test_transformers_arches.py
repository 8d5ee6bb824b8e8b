"""Hugging Face transformers on Tessera, architecture by architecture (issue 75): 46 small random
configurations built by transformers' own modeling code (hf_arches.py: GPT-2, BERT, RoBERTa,
DistilBERT, ALBERT, ELECTRA, T5, BART, Llama, Mistral, Qwen2, Phi, Gemma, GPT-NeoX, OPT, Falcon,
ViT, DeiT, Swin, ConvNeXt, CLIP, Whisper, Wav2Vec2, DETR and 22 more), run in one subprocess
under `python -m tessera.compat` in float32 and judged against PyTorch 2.15 + transformers 5.23
(tests/data/hf_arches_reference.json: the same script run by PyTorch in float64 and float32).

The judge is the issue's: Tessera's float32 error against PyTorch's float64 run must stay within
a small multiple (K = 10) of PyTorch's own float32 error against the same float64 run, plus a
floor of 8 float32 epsilons (relative) for quantities that PyTorch's float32 run happens to hit
exactly. The errors are relative: the outputs' sampled values against the largest of them and
their absolute sum; the loss; each parameter's gradient sum of squares (against the largest of
|its own| and 1e-6 of the largest, so that gradients that are zero in exact arithmetic do not
divide by rounding noise). Generated tokens (greedy and beam, 2 beams, for a batch of two
prompts, the second left-padded) must equal PyTorch's float64 or float32 tokens (they differ only
where float32 rounding flips a near tie). Results: bench/results/transformers.md.

Skips unless transformers is importable: in this interpreter, or from the directory named by
TS_TRANSFORMERS_PATH (e.g. /opt/torch-libs, which holds transformers without torch)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import tessera

HERE = os.path.dirname(os.path.abspath(__file__))
TRANSFORMERS_PATH = os.environ.get("TS_TRANSFORMERS_PATH", "")
K = 10.0  # the multiple of PyTorch's float32 error
FLOOR = 8 * 2.0 ** -23  # 8 float32 epsilons, relative
with open(os.path.join(HERE, "..", "data", "hf_arches_reference.json")) as _f:
    REFERENCE = json.load(_f)
ARCHS = list(REFERENCE["float64"])


def _transformers_dir():
    if TRANSFORMERS_PATH and os.path.isdir(os.path.join(TRANSFORMERS_PATH, "transformers")):
        return TRANSFORMERS_PATH
    spec = importlib.util.find_spec("transformers")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.dirname(spec.origin))
    return None


pytestmark = pytest.mark.skipif(
    _transformers_dir() is None,
    reason="transformers is not importable: install it (without torch) or set "
           "TS_TRANSFORMERS_PATH to a directory holding it (e.g. /opt/torch-libs)")


@pytest.fixture(scope="module")
def results():
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pkg, _transformers_dir()])
    env["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    proc = subprocess.run([sys.executable, "-m", "tessera.compat",
                           os.path.join(HERE, "hf_arches.py"), "float32"] + ARCHS,
                          capture_output=True, text=True, env=env, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def output_error(got, ref):
    """the largest relative error of the sampled outputs (against the largest sample) and of
    their absolute sums"""
    err = 0.0
    for key, r in ref["outputs"].items():
        g = got["outputs"][key]
        scale = max(abs(v) for v in r["vals"])
        err = max(err, max(abs(a - b) for a, b in zip(g["vals"], r["vals"])) / scale,
                  abs(g["abs_sum"] - r["abs_sum"]) / r["abs_sum"])
    return err


def loss_error(got, ref):
    return abs(got["loss"] - ref["loss"]) / abs(ref["loss"])


def grad_error(got, ref):
    """the largest relative error of a parameter's gradient sum of squares"""
    top = max(abs(v) for v in ref["grad_sumsq"].values())
    return max(abs(got["grad_sumsq"][n] - v) / max(abs(v), 1e-6 * top)
               for n, v in ref["grad_sumsq"].items())


def _judge(results, arch, error):
    got, ref, pt32 = results[arch], REFERENCE["float64"][arch], REFERENCE["float32"][arch]
    assert "error" not in got, got.get("error")
    ours, theirs = error(got, ref), error(pt32, ref)
    assert ours <= K * theirs + FLOOR, (
        "%s: Tessera float32 error %.3g, PyTorch float32 error %.3g" % (arch, ours, theirs))


@pytest.mark.parametrize("arch", ARCHS)
def test_forward_matches_pytorch(results, arch):
    _judge(results, arch, output_error)


@pytest.mark.parametrize("arch", ARCHS)
def test_loss_matches_pytorch(results, arch):
    _judge(results, arch, loss_error)


@pytest.mark.parametrize("arch", ARCHS)
def test_gradients_match_pytorch(results, arch):
    got = results[arch]
    assert "error" not in got, got.get("error")
    assert sorted(got["grad_sumsq"]) == sorted(REFERENCE["float64"][arch]["grad_sumsq"])
    _judge(results, arch, grad_error)


@pytest.mark.parametrize("arch", [a for a in ARCHS if "generate_1" in REFERENCE["float64"][a]])
@pytest.mark.parametrize("beams", [1, 2])
def test_generate_matches_pytorch(results, arch, beams):
    got = results[arch]
    assert "error" not in got, got.get("error")
    key = "generate_%d" % beams
    allowed = [REFERENCE["float64"][arch][key], REFERENCE["float32"][arch][key]]
    assert got[key] in allowed, (got[key], allowed)


def test_attention_implementation_is_pytorchs(results):
    """transformers picks the same attention (sdpa or eager) on Tessera as on PyTorch"""
    diff = {a: (results[a].get("attn"), REFERENCE["float64"][a]["attn"]) for a in ARCHS
            if "error" not in results[a]
            and results[a].get("attn") != REFERENCE["float64"][a]["attn"]}
    assert not diff, diff
