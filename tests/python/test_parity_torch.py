"""test_parity_torch.py — the same SimpleCNN (seed 000: conv 3->6 k5, pool, conv 6->16 k5, fc
400-120-84-10), the same weights and batch, five SGD steps (momentum 0.9) on Tessera and on
PyTorch: the losses, the last gradients and the final weights agree within 1e-5. PyTorch runs in a
subprocess of /opt/torch2/bin/torch-python (skipped when absent); the two exchange .npy files.

Why 1e-5: both sides compute in float32; the sums (K <= 400 products of values <= ~1) are
accumulated in different orders, which moves a result by at most ~K * 2^-24 ~ 2.4e-5 relative in
the worst case and ~sqrt(K) * 2^-24 ~ 1.2e-6 typically; values here are <= ~1."""
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.nn.functional as F  # noqa: E402

TORCH = "/opt/torch2/bin/torch-python"
STEPS, LR, MOMENTUM, TOL = 5, 0.01, 0.9, 1e-5

MODEL_SRC = '''
class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def train(net, x, y, steps, lr, momentum):
    opt = optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    crit = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = crit(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
'''

TORCH_MAIN = '''
import sys, numpy as np, torch
import torch.nn as nn, torch.nn.functional as F, torch.optim as optim
torch.set_num_threads(1)
exec(open(sys.argv[1]).read())
d = sys.argv[2]
net = SimpleCNN()
names = list(net.state_dict())
net.load_state_dict({k: torch.from_numpy(np.load(f"{d}/w_{k}.npy")) for k in names})
x = torch.from_numpy(np.load(f"{d}/x.npy"))
y = torch.from_numpy(np.load(f"{d}/y.npy"))
losses = train(net, x, y, int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
np.save(f"{d}/torch_losses.npy", np.array(losses))
for k, p in net.named_parameters():
    np.save(f"{d}/torch_grad_{k}.npy", p.grad.numpy())
    np.save(f"{d}/torch_w_{k}.npy", p.detach().numpy())
'''

ns = {"nn": nn, "F": F, "optim": tessera.optim}
exec(MODEL_SRC, ns)


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def arr(t):
    return np.array(t.detach().cpu().tolist(), dtype=np.float32).reshape(tuple(t.shape))


@pytest.mark.skipif(not os.path.exists(TORCH), reason=f"{TORCH} (PyTorch) is not installed")
def test_simple_cnn_matches_torch(device, tmp_path):
    tessera.manual_seed(0)
    net = ns["SimpleCNN"]()
    r = np.random.default_rng(0)
    x = r.standard_normal((8, 3, 32, 32)).astype(np.float32)
    y = r.integers(0, 10, 8).astype(np.int64)
    for k, v in net.state_dict().items():
        np.save(tmp_path / f"w_{k}.npy", arr(v))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "model.py").write_text(MODEL_SRC)
    (tmp_path / "main.py").write_text(TORCH_MAIN)
    proc = subprocess.Popen([TORCH, str(tmp_path / "main.py"), str(tmp_path / "model.py"),
                             str(tmp_path), str(STEPS), str(LR), str(MOMENTUM)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    net.to(device)
    losses = ns["train"](net, tessera.tensor(x.tolist(), device=device),
                         tessera.tensor(y.tolist(), device=device), STEPS, LR, MOMENTUM)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out.decode(errors="replace")
    sys.stdout.write(out.decode(errors="replace"))

    np.testing.assert_allclose(losses, np.load(tmp_path / "torch_losses.npy"), rtol=0, atol=TOL)
    assert losses[-1] < losses[0]
    for k, p in net.named_parameters():
        np.testing.assert_allclose(arr(p.grad), np.load(tmp_path / f"torch_grad_{k}.npy"),
                                   rtol=0, atol=TOL, err_msg=f"gradient of {k}")
        np.testing.assert_allclose(arr(p), np.load(tmp_path / f"torch_w_{k}.npy"), rtol=0,
                                   atol=TOL, err_msg=f"weight {k}")
