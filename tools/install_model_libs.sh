#!/bin/sh
# install_model_libs.sh — timm and Hugging Face transformers (with their light dependencies,
# WITHOUT PyTorch or torchvision: under tessera.compat `import torch` is Tessera and
# `import torchvision` is tessera.vision) into DIR for the python Tessera's extension is built
# for, so that the tests of the libraries PyTorch users build on run (docs/COMPAT.md):
#   tools/install_model_libs.sh DIR
#   PYTHONPATH=build/python:DIR python3 -m pytest -q tests/python/test_model_zoo_sample.py
# CI runs it before the suite and puts DIR on PYTHONPATH; without it (no network) those tests
# skip with a message. Idempotent: returns at once when everything is importable from DIR.
# TIMM_VERSION / TRANSFORMERS_VERSION override the versions (the references in tests/data/ and
# in the transformers tests name the ones they were made with).
set -eu
dir=${1:?usage: tools/install_model_libs.sh DIR}
py=${PYTHON:-python3}
mods='("timm", "transformers", "tokenizers", "yaml", "huggingface_hub", "safetensors", "PIL")'
if PYTHONPATH="$dir" "$py" -c "import importlib.util as u; assert all(u.find_spec(m) for m in $mods)" 2>/dev/null; then
    echo "$dir"
    exit 0
fi
"$py" -m pip --version >/dev/null 2>&1 || apt-get install -y -qq python3-pip >/dev/null
"$py" -m pip install -q --target "$dir" --no-deps "timm==${TIMM_VERSION:-1.0.31}" \
    "transformers==${TRANSFORMERS_VERSION:-5.23.0}"
"$py" -m pip install -q --target "$dir" pyyaml "huggingface-hub>=1.31,<3" safetensors \
    "tokenizers>=0.23.1,<0.24" regex typer tqdm packaging pillow
echo "$dir"
