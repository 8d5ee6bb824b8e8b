"""make_pt_fixtures.py — writes tests/data/pt/: small checkpoints written by PyTorch's own
torch.save, and beside each the values it holds as NumPy arrays (<name>.npz, bfloat16 widened to
float32), for tests/python/test_save_load_pt.py (which needs no torch).

Written with PyTorch 2.15.0 (2.15.0+cu132, run on the CPU) and NumPy 2.4.6 under CPython 3.11:

    /opt/torch2/bin/torch-python tools/make_pt_fixtures.py [OUT_DIR]

Everything is seeded; the non-tensor values the tests check are the literals below.
"""
import os
import sys

import numpy as np
import torch
from torch import nn

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..",
                                                          "tests", "data", "pt")


def arr(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy().copy()


def flat(prefix, obj, out):
    """every tensor of a nested dict / list as out['a.b.0'] = array"""
    if isinstance(obj, torch.Tensor):
        out[prefix] = arr(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat("%s.%s" % (prefix, k) if prefix else str(k), v, out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flat("%s.%d" % (prefix, i) if prefix else str(i), v, out)
    return out


def write(name, obj, **kw):
    torch.save(obj, os.path.join(OUT, name + ".pt"), **kw)
    np.savez(os.path.join(OUT, name + ".npz"), **flat("", obj, {}))


def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


class Zoo(nn.Module):
    """one of each layer whose state_dict names tessera.nn must match"""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.ln = nn.LayerNorm(4)
        self.fc = nn.Sequential(nn.Linear(8, 3))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    write("linear", nn.Linear(4, 3).state_dict())
    write("conv2d", nn.Conv2d(2, 3, kernel_size=3, padding=1).state_dict())
    write("mlp", mlp().state_dict())

    zoo = Zoo()
    zoo.bn(torch.randn(3, 2, 4, 4))  # running statistics and num_batches_tracked move
    write("zoo", zoo.state_dict())

    # a training checkpoint: model, Adam state after two steps, numbers, strings, containers
    torch.manual_seed(1)
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    write("checkpoint", {
        "epoch": 3, "loss": 0.25, "name": "mlp", "best": None, "flags": (True, False),
        "history": [1.0, 2.5], "nested": {"a": {"b": [1, 2, {"c": "d"}]}}, "big": 2 ** 40,
        "neg": -7, "model": model.state_dict(), "optimizer": opt.state_dict(),
    })

    # every dtype Tessera has, a 0-d and an empty tensor
    g = torch.Generator().manual_seed(2)
    f = torch.randn(2, 3, generator=g)
    write("dtypes", {
        "f32": f, "f64": f.double() / 3, "f16": f.half(), "bf16": f.bfloat16(),
        "i64": torch.tensor([3, -1, 2 ** 40]),
        "i32": torch.tensor([-(2 ** 31), 7], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
        "u16": torch.tensor([1, 65535], dtype=torch.uint16),
        "u32": torch.tensor([1, 2 ** 32 - 1], dtype=torch.uint32),
        "u64": torch.tensor([1, 2 ** 63], dtype=torch.uint64),
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
    })

    # views: one storage for all of them, offsets, non-contiguous strides, a stride 0
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    write("views", {"base": base, "t": base.t(), "row": base[2], "cols": base[:, 1::2],
                    "corner": base[1:3, 2:5], "expanded": base[0, :1].expand(3, 4)})

    # NumPy values (weights_only=False, or weights_only=True with add_safe_globals)
    torch.save({"array": np.arange(6, dtype=np.float64).reshape(2, 3), "scalar": np.float64(1.5),
                "t": torch.ones(2)}, os.path.join(OUT, "numpy.pt"))
    np.savez(os.path.join(OUT, "numpy.npz"), array=np.arange(6, dtype=np.float64).reshape(2, 3))

    # a whole module (weights_only=False): the classes are torch.nn's
    torch.manual_seed(3)
    m = mlp()
    torch.save(m, os.path.join(OUT, "module.pt"))
    np.savez(os.path.join(OUT, "module.npz"), **flat("", m.state_dict(), {}))
    print("wrote", sorted(os.listdir(OUT)), "with torch", torch.__version__)


if __name__ == "__main__":
    main()
