#!/usr/bin/env python3
"""onnx_real_models.py — real exported models through Tessera's ONNX import, against ONNX Runtime.

Exports (once; cached in OUT) torchvision's resnet18, resnet50, mobilenet_v3_small, efficientnet_b0
and vit_b_16 with random weights (seed 0), PyTorch's nn.TransformerEncoder and the GPT-mini of
tools/gen_golden_gpt.py with PyTorch's torch.onnx.export (opset 17, TorchScript exporter), runs each
with ONNX Runtime and with `tessera run` on every device asked, each both ways: with the inference
rewrites (run's default: BatchNormalization folded into the Conv before it, Conv + Relu / Clip
fused, ...) and with --no-optimize. It compares the outputs: the largest |tessera - onnxruntime|
must be within 1e-4 of the output's largest magnitude. resnet18_bn is resnet18 exported without
constant folding, so its BatchNormalizations reach Tessera (PyTorch's exporter folds them otherwise)
and the BatchNormalization folding is what runs.

With --grad, resnet18 is exported a second time without constant folding (BatchNormalization kept,
initializers under their state-dict names) and `tessera run --grad-output` (which keeps the file's
graph: no inference rewrites) computes the gradients of sum(output * g) with respect to every
parameter of the imported model; they are compared with PyTorch's on the same weights (eval mode)
within 1e-4 relative to each gradient's largest value.

Usage: /opt/torch2/bin/torch-python tools/onnx_real_models.py BUILD [--out DIR] [--devices cpu,sim:0]
                                     [--models resnet18,resnet18_bn,...] [--grad]
"""
import argparse
import os
import subprocess
import sys
import time
import warnings

import numpy as np

try:
    import onnxruntime as ort
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (run with ../shared/tools/install-torch.sh's python)")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

TOL = 1e-4


def gpt_mini():
    from gen_golden_gpt import GPT
    return GPT(vocab=256, context=256, d=256, heads=4, layers=4)


def transformer_encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                             dropout=0.0, activation="gelu", batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


# name -> (builder, example input)
MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), lambda: torch.randn(1, 3, 224, 224)),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), lambda: torch.randn(1, 3, 224, 224)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(weights=None),
                           lambda: torch.randn(1, 3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None),
                        lambda: torch.randn(1, 3, 224, 224)),
    "vit_b_16": (lambda: torchvision.models.vit_b_16(weights=None), lambda: torch.randn(1, 3, 224, 224)),
    "transformer_encoder": (transformer_encoder, lambda: torch.randn(2, 64, 256)),
    "gpt_mini": (gpt_mini, lambda: torch.randint(0, 256, (2, 256))),
}


def perturb(model):
    """Random weights where torchvision's init leaves the outputs degenerate: BatchNorm's running
    statistics and affine parameters (so folding them matters), zero-initialised heads (ViT's)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.running_mean.normal_(0, 0.1, generator=g)
                mod.running_var.uniform_(0.5, 1.5, generator=g)
                mod.weight.uniform_(0.5, 1.5, generator=g)
                mod.bias.normal_(0, 0.1, generator=g)
            elif isinstance(mod, torch.nn.Linear) and not mod.weight.abs().sum():
                mod.weight.normal_(0, 0.02, generator=g)
    return model


def model_files(name, out):
    """(model path, input array, input path) of a name of MODELS, or of BASE_bn: BASE exported
    without constant folding (its BatchNormalizations kept)."""
    fold = not name.endswith("_bn")
    base = name if fold else name[:-3]
    path, x = export(base, out, fold=fold)
    return path, x, os.path.join(out, f"{base}_input.npy")


# run's modes: the inference rewrites on (the default) and off
MODES = (("optimized", ()), ("--no-optimize", ("--no-optimize",)))


def export(name, out, fold=True):
    path = os.path.join(out, f"{name}{'' if fold else '_train'}.onnx")
    xpath = os.path.join(out, f"{name}_input.npy")
    if os.path.exists(path) and os.path.exists(xpath):
        return path, np.load(xpath)
    torch.manual_seed(0)
    build, example = MODELS[name]
    model = perturb(build()).eval()
    x = example()
    t0 = time.time()
    torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, input_names=["input"],
                      output_names=["output"], do_constant_folding=fold,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    np.save(xpath, x.numpy())
    if not fold:
        torch.save(model.state_dict(), os.path.join(out, f"{name}_state.pt"))
    print(f"  exported {name} in {time.time() - t0:.1f} s -> {path}")
    return path, x.numpy()


def tessera_run(build, model, xpath, device, save, extra=()):
    exe = os.path.join(build, "tessera")
    cmd = [exe, "run", model, "--device", device, "--input", f"input={xpath}", "--save", save, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, TS_SIM_DEVICES="1"))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return np.load(os.path.join(save, "output.npy"))


def check_outputs(a, names, devices):
    failed = 0
    print(f"\n{'model':22} {'device':7} {'rewrites':13} {'max |diff|':>12} {'max |ort|':>12} "
          f"{'rel':>10}  result")
    for name in names:
        path, x, xpath = model_files(name, a.out)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = sess.run(None, {"input": x})[0]
        for dev in devices:
            for mode, extra in MODES:
                save = os.path.join(a.out, f"{name}_{dev.replace(':', '')}{'' if not extra else '_plain'}")
                os.makedirs(save, exist_ok=True)
                row = f"{name:22} {dev:7} {mode:13}"
                try:
                    got = tessera_run(a.build, path, xpath, dev, save, extra)
                except RuntimeError as e:
                    print(f"{row} {'':>12} {'':>12} {'':>10}  ERROR {e}")
                    failed += 1
                    continue
                diff = float(np.max(np.abs(got.astype(np.float64) - want))) if got.shape == want.shape else float("inf")
                scale = float(np.max(np.abs(want)))
                rel = diff / scale if scale else diff
                ok = rel <= TOL
                failed += not ok
                print(f"{row} {diff:12.4g} {scale:12.4g} {rel:10.3g}  {'ok' if ok else 'MISMATCH'}")
    return failed


def check_grads(a, devices):
    """resnet18 imported without folding: gradients of sum(output * g) against PyTorch's."""
    path, x = export("resnet18", a.out, fold=False)
    model = torchvision.models.resnet18(weights=None).eval()
    model.load_state_dict(torch.load(os.path.join(a.out, "resnet18_state.pt")))
    g = torch.randn(1, 1000, generator=torch.Generator().manual_seed(1))
    gpath = os.path.join(a.out, "resnet18_g.npy")
    np.save(gpath, g.numpy())
    (model(torch.from_numpy(x)) * g).sum().backward()
    want = {k: p.grad.numpy() for k, p in model.named_parameters()}
    failed = 0
    print(f"\nresnet18 gradients of sum(output * g), {len(want)} parameters")
    for dev in devices:
        save = os.path.join(a.out, f"resnet18_grad_{dev.replace(':', '')}")
        os.makedirs(save, exist_ok=True)
        xpath = os.path.join(a.out, "resnet18_input.npy")
        tessera_run(a.build, path, xpath, dev, save, ["--grad-output", f"output={gpath}"])
        worst, worst_name, missing = 0.0, "", 0
        for k, w in want.items():
            f = os.path.join(save, "grad", f"{k}.npy")
            if not os.path.exists(f):
                missing += 1
                continue
            got = np.load(f)
            rel = float(np.max(np.abs(got - w))) / max(float(np.max(np.abs(w))), 1e-30)
            if rel > worst:
                worst, worst_name = rel, k
        ok = worst <= TOL and not missing
        failed += not ok
        print(f"  {dev:7} worst relative difference {worst:.3g} ({worst_name}), {missing} missing: "
              f"{'ok' if ok else 'MISMATCH'}")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--out", default="/tmp/tessera-onnx-models")
    ap.add_argument("--devices", default="cpu,sim:0")
    ap.add_argument("--models", default=",".join([*MODELS, "resnet18_bn"]))
    ap.add_argument("--grad", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(2)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnxruntime {ort.__version__}")
    devices = a.devices.split(",")
    failed = check_outputs(a, a.models.split(","), devices)
    if a.grad:
        failed += check_grads(a, devices)
    print(f"\n{'all agree' if not failed else f'{failed} disagree'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
