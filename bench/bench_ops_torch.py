"""bench_ops_torch.py — PyTorch's twin of bench_vec_math's op table: gelu, softmax and layer_norm
(without and with weight and bias) forward + backward on a [16, 256, 1024] float32 tensor:
y = f(x), then y.backward(g) with a fixed random g made outside the timing, as bench_vec_math
does, best of ROUNDS, on the threads torch is given (run_ops.sh tries 1 and 2). Prints one line
per op: "NAME ms"."""
import sys
import time

import torch
import torch.nn.functional as F

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
torch.manual_seed(1)
x = torch.randn(16, 256, 1024, requires_grad=True)
w = torch.randn(1024, requires_grad=True)
b = torch.randn(1024, requires_grad=True)
g = torch.randn(16, 256, 1024)
ops = [
    ("gelu fwd+bwd", lambda t: F.gelu(t)),
    ("softmax fwd+bwd", lambda t: torch.softmax(t, -1)),
    ("layer_norm fwd+bwd", lambda t: F.layer_norm(t, (1024,), None, None, 1e-5)),
    ("layer_norm+affine fwd+bwd", lambda t: F.layer_norm(t, (1024,), w, b, 1e-5)),
]
best = {name: 1e30 for name, _ in ops}
for _ in range(rounds):
    for name, fn in ops:
        x.grad = w.grad = b.grad = None
        t0 = time.perf_counter()
        y = fn(x)
        y.backward(g)
        x.grad.view(-1)[0].item()
        best[name] = min(best[name], (time.perf_counter() - t0) * 1e3)
for name, _ in ops:
    print(f"{name.replace(' ', '_')} {best[name]:.3f}")
