"""profile_resnet18_torch.py — where PyTorch spends a ResNet-18 (CIFAR stem) training step at batch 64
on the CPU: torch.profiler over 3 steps after 2 warm-up steps, the share of oneDNN convolution
(forward and backward) in the total, and the top ops. The share bounds what any library that runs
the same convolution kernels can gain on this step (issue 13's note). T threads (default 2).
Usage: T=2 /opt/torch2/bin/torch-python bench/profile_resnet18_torch.py"""
import os, sys, torch, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_resnet import resnet18
torch.set_num_threads(int(os.environ.get("T", "2")))
m = resnet18(num_classes=10, cifar_stem=True)
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(64, 3, 32, 32); y = torch.randint(0, 10, (64,))
def step():
    opt.zero_grad(); F.cross_entropy(m(x), y).backward(); opt.step()
for _ in range(2): step()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as p:
    for _ in range(3): step()
ev = p.key_averages()
tot = sum(e.self_cpu_time_total for e in ev)
conv = sum(e.self_cpu_time_total for e in ev if "conv" in e.key.lower() or "mkldnn" in e.key.lower())
print("total self us %.0f conv-ish self us %.0f share %.3f" % (tot, conv, conv / tot))
print(ev.table(sort_by="self_cpu_time_total", row_limit=14))
