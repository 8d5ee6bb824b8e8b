"""bench_siamese_step.py — the training step of the corpus's siamese_network program
(tests/programs/ex_siamese_network.py: ResNet-18 with a 1-channel 7x7 stem on 28x28 images, so the
stages run at 7x7, 4x4, 2x2 and 1x1; two images a pair, batch 64, BCELoss, Adadelta) on synthetic
data, under Tessera or PyTorch, one thread by default (the corpus harness sets OMP_NUM_THREADS=1).

  PYTHONPATH=build/python OMP_NUM_THREADS=1 /opt/torch2/bin/torch-python bench/bench_siamese_step.py
  OMP_NUM_THREADS=1 /opt/torch2/bin/torch-python bench/bench_siamese_step.py --lib torch
  ... --profile          # the profiler's key_averages table over the timed steps
  ... --layers           # each distinct convolution of the model, forward and backward, alone

Prints the median ms of a whole step (zero_grad, forward, backward, step) and of its parts, and of the
test pass (no_grad forward of 500 pairs). No numbers are checked: results go to bench/results/corpus.md."""
import argparse
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--lib", choices=("tessera", "torch"), default="tessera")
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--profile", action="store_true")
ap.add_argument("--layers", action="store_true")
a = ap.parse_args()

if a.lib == "torch":
    import torch
    import torchvision
    from torch.profiler import profile
else:
    import tessera as torch
    import tessera.vision as torchvision
    from tessera.profiler import profile
nn = torch.nn
F = torch.nn.functional


class Siamese(nn.Module):
    """the program's SiameseNetwork (its weight initialisation aside)"""

    def __init__(self):
        super().__init__()
        r = torchvision.models.resnet18(weights=None)
        r.conv1 = nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        feat = r.fc.in_features
        self.resnet = nn.Sequential(*(list(r.children())[:-1]))
        self.fc = nn.Sequential(nn.Linear(feat * 2, 256), nn.ReLU(inplace=True), nn.Linear(256, 1))
        self.sigmoid = nn.Sigmoid()

    def once(self, x):
        o = self.resnet(x)
        return o.view(o.size()[0], -1)

    def forward(self, x1, x2):
        return self.sigmoid(self.fc(torch.cat((self.once(x1), self.once(x2)), 1)))


def med_ms(fn, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


torch.manual_seed(0)
model = Siamese()
opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
crit = nn.BCELoss()
x1 = torch.rand(a.batch, 1, 28, 28) * 255
x2 = torch.rand(a.batch, 1, 28, 28) * 255
tg = (torch.rand(a.batch) > 0.5).float()
state = {}


def fwd():
    state["loss"] = crit(model(x1, x2).squeeze(), tg)


def bwd():
    state["loss"].backward()


def step():
    opt.zero_grad()
    fwd()
    bwd()
    opt.step()


def layers():
    """each distinct convolution of the model at batch 2 x a.batch (both images of a pair run
    through the same ResNet one after the other: a.batch each), forward and backward"""
    seen = []
    for m in model.resnet.modules():
        if isinstance(m, nn.Conv2d):
            seen.append(m)
    shapes = {}
    x = torch.rand(a.batch, 1, 28, 28)
    hooks = []

    def grab(mod, inp, out):
        shapes.setdefault(id(mod), (tuple(inp[0].shape), mod))

    for m in seen:
        hooks.append(m.register_forward_hook(grab))
    with torch.no_grad():
        model.once(x)
    for hk in hooks:
        hk.remove()
    done = {}
    for key, (shape, m) in shapes.items():
        sig = (shape, m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding)
        if sig in done:
            done[sig][1] += 1
            continue
        xi = torch.rand(*shape).requires_grad_(shape[1] != 1)
        w = m.weight.detach().clone().requires_grad_(True)
        out = {}

        def f():
            out["y"] = F.conv2d(xi, w, None, m.stride, m.padding)

        def b():
            out["y"].sum().backward()

        f()
        b()
        tf = med_ms(f, 5)
        tb = med_ms(lambda: (f(), b()), 5) - tf
        done[sig] = [(tf, tb), 1]
    print("%-44s %5s %9s %9s" % ("conv (input, in->out, k, s, p)", "count", "fwd ms", "bwd ms"))
    tot_f = tot_b = 0.0
    for sig, ((tf, tb), cnt) in done.items():
        shape, ci, co, k, s, p = sig
        print("%-44s %5d %9.2f %9.2f" % ("%s %d->%d k%s s%s p%s" % (list(shape), ci, co, k[0], s[0], p[0]),
                                         cnt, tf, tb))
        tot_f += tf * cnt
        tot_b += tb * cnt
    print("convolutions of one ResNet pass: fwd %.1f ms, bwd %.1f ms (x2 a step)" % (tot_f, tot_b))


# threads: OMP_NUM_THREADS decides, as in the corpus harness
for _ in range(2):
    step()
print("%s, batch %d, %d steps" % (a.lib, a.batch, a.steps))
opt.zero_grad()
t_fwd = med_ms(fwd, a.steps)
t_fb = med_ms(lambda: (fwd(), bwd()), a.steps)
t_opt = med_ms(opt.step, a.steps)
t_step = med_ms(step, a.steps)
model.eval()
tx = torch.rand(500, 1, 28, 28) * 255


def test_pass():
    with torch.no_grad():
        model(tx, tx)


t_test = med_ms(test_pass, max(2, a.steps // 4))
model.train()
print("step %.1f ms: forward %.1f, backward %.1f, optimizer %.1f; test pass (500 pairs, eval) %.1f ms"
      % (t_step, t_fwd, t_fb - t_fwd, t_opt, t_test))
if a.profile:
    with profile() as p:
        for _ in range(a.steps):
            step()
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
if a.layers:
    layers()
sys.stdout.flush()
