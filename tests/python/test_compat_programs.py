"""The must-show programs of docs/COMPAT.md: examples/python/timm_train.py (import torch, timm;
build and train a timm model) and gpt2_generate.py (transformers' GPT-2 generate()) run unedited
under `python -m tessera.compat`. Skipped when timm / transformers are not importable (CI installs
them: tools/install_model_libs.sh)."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(script, needs):
    if importlib.util.find_spec(needs) is None:
        pytest.skip("%s is not importable here: tools/install_model_libs.sh DIR, DIR on PYTHONPATH"
                    % needs)
    path = os.path.join(ROOT, "examples", "python", script)
    r = subprocess.run([sys.executable, "-m", "tessera.compat", path], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_timm_program_trains():
    out = run("timm_train.py", "timm")
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", out)]
    assert len(losses) == 5 and losses[-1] < 0.5 * losses[0]  # five SGD steps on one batch fit it
    assert "torch 2.15.0+tessera" in out


def test_gpt2_program_generates():
    out = run("gpt2_generate.py", "transformers")
    tokens = [int(v) for v in re.search(r"tokens: \[([0-9, ]+)\]", out).group(1).split(",")]
    assert tokens[:4] == [11, 42, 7, 99] and len(tokens) == 12
    assert all(0 <= t < 500 for t in tokens)
