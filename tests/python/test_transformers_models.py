"""Hugging Face transformers on Tessera (issue 75): tiny GPT-2, BERT and Llama built by
transformers' own modeling code under `python -m tessera.compat`, weights set by a formula
(sin(0.37 k + 1.3 i) * 0.2, norms' weights + 1: the same in both frameworks, no files), forward,
loss.backward() and greedy generate() checked against PyTorch 2.15 + transformers 5.23 run in
float64 on the same script (REFERENCE below).

Tolerances come from float32 arithmetic: logits are sums of <= 64-term products through two
layers of magnitude <= 5, so |error| <= ~10 ops * 64 * 6e-8 * 5 ~ 2e-4; the loss and the logits'
absolute sum are reductions of those (relative 2e-5); each gradient's sum of squares doubles a
gradient's relative error bound (~1e-4 through two layers back): relative 2e-3. Generated
tokens must be equal.

Skips unless transformers is importable: in this interpreter, or from the directory named by
TS_TRANSFORMERS_PATH (e.g. /opt/torch-libs, which holds transformers without torch)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import tessera

TRANSFORMERS_PATH = os.environ.get("TS_TRANSFORMERS_PATH", "")


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

SCRIPT = r'''
import json, sys
import torch
from transformers import (GPT2Config, GPT2LMHeadModel, BertConfig, BertForMaskedLM, LlamaConfig,
                          LlamaForCausalLM)
from transformers.utils import logging
logging.set_verbosity_error()


def build(arch, attn):
    if arch == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=96,
                                       n_positions=32))
    elif arch == "bert":
        m = BertForMaskedLM(BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                       intermediate_size=64, vocab_size=96,
                                       max_position_embeddings=32))
    else:
        m = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=32,
                                         num_attention_heads=4, num_key_value_heads=2,
                                         intermediate_size=64, vocab_size=96,
                                         max_position_embeddings=32))
    m.config._attn_implementation = attn
    return m


def fill(m, dtype):
    m.to(dtype)
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(m.named_parameters())):
            w = torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.37 + 1.3 * i) * 0.2
            if name.endswith("weight") and p.dim() == 1:
                w = w + 1.0
            p.copy_(w.reshape(p.shape).to(dtype))


def run(arch, attn, dtype):
    m = build(arch, attn)
    fill(m, dtype)
    m.train(False)
    ids = torch.tensor([[(i * 37 + 11 * b) % 96 for i in range(10)] for b in range(2)])
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :2] = 0
    out = m(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    lg = out.logits.detach().double()
    res = {"loss": out.loss.item(),
           "logits": [lg[0, 3, :6].tolist(), lg[1, 9, :6].tolist()],
           "logits_abs_sum": lg.abs().sum().item(),
           "grad_sumsq": {n: p.grad.double().pow(2).sum().item()
                          for n, p in sorted(m.named_parameters()) if p.grad is not None}}
    if arch != "bert":
        with torch.no_grad():
            g = m.generate(ids[:1, :6], attention_mask=mask[:1, :6], max_new_tokens=6,
                           do_sample=False, pad_token_id=0)
        res["generate"] = g[0].tolist()
    return res


out = {}
for key in sys.argv[1:]:
    arch, attn = key.split("-")
    try:
        out[key] = run(arch, attn, torch.float32)
    except Exception as e:  # reported per model, so one failure does not hide the others
        out[key] = {"error": "%s: %s" % (type(e).__name__, e)}
print("RESULT " + json.dumps(out))
'''

REFERENCE = {'gpt2-sdpa': {'loss': 7.452316284,
                           'logits': [[-1.691293419, -4.321862106, -4.770666776, -2.811141691, 0.5675049762,
                                       3.659663573],
                                      [-1.146629941, 1.729734676, 3.732893997, 3.851612399, 2.025958414,
                                       -0.8224406421]],
                           'logits_abs_sum': 5467.333176,
                           'grad_sumsq': {'transformer.h.0.attn.c_attn.bias': 52.76169463,
                                          'transformer.h.0.attn.c_attn.weight': 981.9050678,
                                          'transformer.h.0.attn.c_proj.bias': 10027.87707,
                                          'transformer.h.0.attn.c_proj.weight': 10609.61215,
                                          'transformer.h.0.ln_1.bias': 10.22039924,
                                          'transformer.h.0.ln_1.weight': 2.188203091,
                                          'transformer.h.0.ln_2.bias': 64.98742718,
                                          'transformer.h.0.ln_2.weight': 77.75317338,
                                          'transformer.h.0.mlp.c_fc.bias': 31.22705596,
                                          'transformer.h.0.mlp.c_fc.weight': 1904.207044,
                                          'transformer.h.0.mlp.c_proj.bias': 1479.051276,
                                          'transformer.h.0.mlp.c_proj.weight': 3874.36945,
                                          'transformer.h.1.attn.c_attn.bias': 23.44204791,
                                          'transformer.h.1.attn.c_attn.weight': 469.785354,
                                          'transformer.h.1.attn.c_proj.bias': 1323.876381,
                                          'transformer.h.1.attn.c_proj.weight': 1192.231658,
                                          'transformer.h.1.ln_1.bias': 4.780809615,
                                          'transformer.h.1.ln_1.weight': 1.87116011,
                                          'transformer.h.1.ln_2.bias': 44.26583742,
                                          'transformer.h.1.ln_2.weight': 38.61229277,
                                          'transformer.h.1.mlp.c_fc.bias': 57.41495518,
                                          'transformer.h.1.mlp.c_fc.weight': 902.3565875,
                                          'transformer.h.1.mlp.c_proj.bias': 5.604384397,
                                          'transformer.h.1.mlp.c_proj.weight': 3.82529544,
                                          'transformer.ln_f.bias': 0.09123456151,
                                          'transformer.ln_f.weight': 0.5252409505,
                                          'transformer.wpe.weight': 8607.259627,
                                          'transformer.wte.weight': 8598.149807},
                           'generate': [0, 37, 74, 15, 52, 89, 75, 24, 85, 25, 86, 17]},
             'gpt2-eager': {'loss': 7.487215042,
                            'logits': [[-1.691293419, -4.321862106, -4.770666776, -2.811141691, 0.5675049762,
                                        3.659663573],
                                       [-1.146629941, 1.729734676, 3.732893997, 3.851612399, 2.025958414,
                                        -0.8224406421]],
                            'logits_abs_sum': 5503.969801,
                            'grad_sumsq': {'transformer.h.0.attn.c_attn.bias': 40.04840212,
                                           'transformer.h.0.attn.c_attn.weight': 902.951235,
                                           'transformer.h.0.attn.c_proj.bias': 10426.2638,
                                           'transformer.h.0.attn.c_proj.weight': 10964.0435,
                                           'transformer.h.0.ln_1.bias': 8.522645909,
                                           'transformer.h.0.ln_1.weight': 2.130837368,
                                           'transformer.h.0.ln_2.bias': 70.08783529,
                                           'transformer.h.0.ln_2.weight': 91.27792432,
                                           'transformer.h.0.mlp.c_fc.bias': 30.92483861,
                                           'transformer.h.0.mlp.c_fc.weight': 2168.865497,
                                           'transformer.h.0.mlp.c_proj.bias': 1406.161062,
                                           'transformer.h.0.mlp.c_proj.weight': 3805.567313,
                                           'transformer.h.1.attn.c_attn.bias': 25.91454368,
                                           'transformer.h.1.attn.c_attn.weight': 536.3026242,
                                           'transformer.h.1.attn.c_proj.bias': 1263.780036,
                                           'transformer.h.1.attn.c_proj.weight': 1190.18064,
                                           'transformer.h.1.ln_1.bias': 4.249938161,
                                           'transformer.h.1.ln_1.weight': 1.713023483,
                                           'transformer.h.1.ln_2.bias': 42.26602906,
                                           'transformer.h.1.ln_2.weight': 39.79511886,
                                           'transformer.h.1.mlp.c_fc.bias': 53.19706356,
                                           'transformer.h.1.mlp.c_fc.weight': 948.127254,
                                           'transformer.h.1.mlp.c_proj.bias': 5.080095892,
                                           'transformer.h.1.mlp.c_proj.weight': 3.719860864,
                                           'transformer.ln_f.bias': 0.103808705,
                                           'transformer.ln_f.weight': 0.5082039098,
                                           'transformer.wpe.weight': 8599.048308,
                                           'transformer.wte.weight': 8576.416285},
                            'generate': [0, 37, 74, 15, 52, 89, 75, 24, 85, 25, 86, 17]},
             'bert-sdpa': {'loss': 4.412444977,
                           'logits': [[-0.02351839902, -0.4683307865, -0.7487578473, -0.724312892,
                                       -0.3985189007, 0.08167656546],
                                      [-1.121510018, -1.299864978, -0.8940592147, -0.1100303461, 0.6652452181,
                                       1.057912464]],
                           'logits_abs_sum': 654.1907729,
                           'grad_sumsq': {'bert.embeddings.LayerNorm.bias': 0.006703709371,
                                          'bert.embeddings.LayerNorm.weight': 0.00231065307,
                                          'bert.embeddings.position_embeddings.weight': 0.3926091499,
                                          'bert.embeddings.token_type_embeddings.weight': 0.6070027682,
                                          'bert.embeddings.word_embeddings.weight': 1.945794043,
                                          'bert.encoder.layer.0.attention.output.LayerNorm.bias': 0.002489548442,
                                          'bert.encoder.layer.0.attention.output.LayerNorm.weight': 0.0009914838488,
                                          'bert.encoder.layer.0.attention.output.dense.bias': 0.0008204037091,
                                          'bert.encoder.layer.0.attention.output.dense.weight': 0.1549241464,
                                          'bert.encoder.layer.0.attention.self.key.bias': 1.10124054e-32,
                                          'bert.encoder.layer.0.attention.self.key.weight': 0.1970367452,
                                          'bert.encoder.layer.0.attention.self.query.bias': 0.002755272079,
                                          'bert.encoder.layer.0.attention.self.query.weight': 0.1828024967,
                                          'bert.encoder.layer.0.attention.self.value.bias': 0.0002915364504,
                                          'bert.encoder.layer.0.attention.self.value.weight': 0.06777763277,
                                          'bert.encoder.layer.0.intermediate.dense.bias': 0.003013736758,
                                          'bert.encoder.layer.0.intermediate.dense.weight': 0.07631314799,
                                          'bert.encoder.layer.0.output.LayerNorm.bias': 0.008544488945,
                                          'bert.encoder.layer.0.output.LayerNorm.weight': 0.002034396725,
                                          'bert.encoder.layer.0.output.dense.bias': 0.003300116379,
                                          'bert.encoder.layer.0.output.dense.weight': 0.3070669405,
                                          'bert.encoder.layer.1.attention.output.LayerNorm.bias': 0.01609514811,
                                          'bert.encoder.layer.1.attention.output.LayerNorm.weight': 0.01253142348,
                                          'bert.encoder.layer.1.attention.output.dense.bias': 0.006265066067,
                                          'bert.encoder.layer.1.attention.output.dense.weight': 1.003514921,
                                          'bert.encoder.layer.1.attention.self.key.bias': 6.459918185e-33,
                                          'bert.encoder.layer.1.attention.self.key.weight': 0.03120754218,
                                          'bert.encoder.layer.1.attention.self.query.bias': 0.001437936978,
                                          'bert.encoder.layer.1.attention.self.query.weight': 0.03226208122,
                                          'bert.encoder.layer.1.attention.self.value.bias': 0.002653482954,
                                          'bert.encoder.layer.1.attention.self.value.weight': 0.1373495215,
                                          'bert.encoder.layer.1.intermediate.dense.bias': 0.001731161854,
                                          'bert.encoder.layer.1.intermediate.dense.weight': 0.05347766136,
                                          'bert.encoder.layer.1.output.LayerNorm.bias': 0.01667625025,
                                          'bert.encoder.layer.1.output.LayerNorm.weight': 0.01726726831,
                                          'bert.encoder.layer.1.output.dense.bias': 0.01384881816,
                                          'bert.encoder.layer.1.output.dense.weight': 0.2091001195,
                                          'cls.predictions.bias': 0.04023320605,
                                          'cls.predictions.transform.LayerNorm.bias': 0.0151862889,
                                          'cls.predictions.transform.LayerNorm.weight': 0.04729479138,
                                          'cls.predictions.transform.dense.bias': 0.03149504949,
                                          'cls.predictions.transform.dense.weight': 1.318380791}},
             'llama-sdpa': {'loss': 5.587421894,
                            'logits': [[-0.4704981178, -0.06097129012, 0.3793350866, 0.6281453855, 0.5598551,
                                        0.2089385572],
                                       [-0.07851423016, 0.4638556472, 0.7720617462, 0.6905153508, 0.2603827422,
                                        -0.301196378]],
                            'logits_abs_sum': 1142.451231,
                            'grad_sumsq': {'lm_head.weight': 1.90964288,
                                           'model.embed_tokens.weight': 9.026715774,
                                           'model.layers.0.input_layernorm.weight': 0.01651274884,
                                           'model.layers.0.mlp.down_proj.weight': 159.1244479,
                                           'model.layers.0.mlp.gate_proj.weight': 38.43839212,
                                           'model.layers.0.mlp.up_proj.weight': 50.84551968,
                                           'model.layers.0.post_attention_layernorm.weight': 0.02384360181,
                                           'model.layers.0.self_attn.k_proj.weight': 3.054589411,
                                           'model.layers.0.self_attn.o_proj.weight': 45.17296133,
                                           'model.layers.0.self_attn.q_proj.weight': 17.19539372,
                                           'model.layers.0.self_attn.v_proj.weight': 0.280192755,
                                           'model.layers.1.input_layernorm.weight': 0.01645933242,
                                           'model.layers.1.mlp.down_proj.weight': 2.384953754,
                                           'model.layers.1.mlp.gate_proj.weight': 4.372519483,
                                           'model.layers.1.mlp.up_proj.weight': 2.949760248,
                                           'model.layers.1.post_attention_layernorm.weight': 0.009258849338,
                                           'model.layers.1.self_attn.k_proj.weight': 0.01350164554,
                                           'model.layers.1.self_attn.o_proj.weight': 0.9203196284,
                                           'model.layers.1.self_attn.q_proj.weight': 0.436105054,
                                           'model.layers.1.self_attn.v_proj.weight': 0.01054414246,
                                           'model.norm.weight': 0.1289505796},
                            'generate': [0, 37, 74, 15, 52, 89, 2]}}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    script = tmp_path_factory.mktemp("hf") / "tiny_models.py"
    script.write_text(SCRIPT)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([pkg, _transformers_dir()])
    env["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    proc = subprocess.run([sys.executable, "-m", "tessera.compat", str(script)] + list(REFERENCE),
                          capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


@pytest.mark.parametrize("key", list(REFERENCE))
def test_forward_matches_pytorch_float64(results, key):
    got, ref = results[key], REFERENCE[key]
    assert "error" not in got, got.get("error")
    for row_got, row_ref in zip(got["logits"], ref["logits"]):
        assert max(abs(a - b) for a, b in zip(row_got, row_ref)) <= 2e-4, (row_got, row_ref)
    assert _rel(got["logits_abs_sum"], ref["logits_abs_sum"]) <= 2e-5
    assert _rel(got["loss"], ref["loss"]) <= 2e-5


@pytest.mark.parametrize("key", list(REFERENCE))
def test_gradients_match_pytorch_float64(results, key):
    got, ref = results[key], REFERENCE[key]
    assert "error" not in got, got.get("error")
    assert sorted(got["grad_sumsq"]) == sorted(ref["grad_sumsq"])
    bad = {n: (got["grad_sumsq"][n], v) for n, v in ref["grad_sumsq"].items()
           if abs(got["grad_sumsq"][n] - v) > 2e-3 * abs(v) + 1e-12}
    assert not bad, bad


@pytest.mark.parametrize("key", [k for k in REFERENCE if "generate" in REFERENCE[k]])
def test_greedy_generate_matches_pytorch(results, key):
    assert "error" not in results[key], results[key].get("error")
    assert results[key]["generate"] == REFERENCE[key]["generate"]
