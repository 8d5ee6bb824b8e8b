"""Shared by test_memory_view.py and test_profile_browser.py: the `tessera` command beside the
built package, a real profiled SimpleCNN step with its Chrome trace and memory snapshot, and the
HTML pages `tessera profile-view` / `tessera memory-view` make of them."""
import json
import os
import subprocess

import tessera as torch
from tessera.profiler import profile


def find_cli():
    """The `tessera` command of the build that holds this package (TESSERA_CLI overrides), or
    None."""
    path = os.environ.get("TESSERA_CLI")
    if not path:  # <build>/python/tessera/__init__.py -> <build>/tessera
        path = os.path.join(os.path.dirname(torch.__file__), "..", "..", "tessera")
    path = os.path.abspath(path)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def run_cli(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=60)


class SimpleCNN(torch.nn.Module):
    """The seed's CIFAR-10 network."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 6, 5)
        self.pool = torch.nn.MaxPool2d(2, 2)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(torch.nn.functional.relu(self.conv1(x)))
        x = self.pool(torch.nn.functional.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = torch.nn.functional.relu(self.fc1(x))
        x = torch.nn.functional.relu(self.fc2(x))
        return self.fc3(x)


def simple_cnn_step(tmp_path, device="sim:0", batch=4):
    """One profiled SGD step of SimpleCNN on device (record_shapes, profile_memory; allocation
    stacks recorded): returns (trace path, snapshot path, snapshot dict); the snapshot is taken
    while the step's tensors are alive."""
    torch.manual_seed(0)
    torch.cuda.memory._record_memory_history()
    try:
        net = SimpleCNN().to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
        crit = torch.nn.CrossEntropyLoss()
        x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
        with profile(record_shapes=True, profile_memory=True) as prof:
            xd, yd = x.to(device), y.to(device)
            opt.zero_grad()
            loss = crit(net(xd), yd)
            loss.backward()
            opt.step()
            loss.to("cpu")  # the loss back to the host: a device-to-host copy
        trace = str(tmp_path / "trace.json")
        prof.export_chrome_trace(trace)
        snap = torch.cuda.memory._snapshot()
        snap_path = str(tmp_path / "snapshot.json")
        with open(snap_path, "w") as f:
            json.dump(snap, f)
        del net, opt, xd, yd, loss
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return trace, snap_path, snap
