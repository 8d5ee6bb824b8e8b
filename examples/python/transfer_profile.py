"""The seed's transfer advice on a real trace (docs/PROFILING.md, "Finding where time and memory
go"): 64 samples sent to the device one at a time from pageable memory, then the same samples
stacked on the host into one batch in pinned memory and sent once. The profiler's transfer table
of each, and both traces (before.json, after.json) for `tessera profile-view`. Runs on the GPU when
there is one, else sim:0 (TESSERA_DEVICE overrides)."""
import tessera as torch
from tessera.profiler import profile
from example_device import device

samples = [torch.randn(3, 32, 32) for _ in range(64)]  # a batch's worth of CIFAR-sized images


def transfer_table(prof, title):
    rows = {}
    for t in prof.transfers():
        r = rows.setdefault((t["transfer"], "pinned" if t["pinned"] else "pageable"),
                            [0, 0, 0.0])
        r[0] += 1
        r[1] += t["bytes"]
        r[2] += t["seconds"]
    print(title)
    print(f"{'kind':<6}{'memory':<10}{'copies':>8}{'bytes':>12}{'time':>12}{'GB/s':>8}")
    for (kind, mem), (n, nbytes, s) in rows.items():
        print(f"{kind:<6}{mem:<10}{n:>8}{nbytes:>12}{s * 1e3:>10.3f}ms"
              f"{nbytes / s * 1e-9 if s else 0.0:>8.2f}")
    to = [r for r in prof.key_averages() if r.key == "to"][0]  # the ops around the copies
    print(f"'to' ops: {to.count}, {to.cpu_time_total / 1e3:.3f}ms in all")


# Before: each sample on its own, from pageable memory
with profile() as before:
    on_device = [s.to(device) for s in samples]
    batch = torch.stack(on_device)
transfer_table(before, "before: 64 pageable copies")
before.export_chrome_trace("before.json")

# After: one batch stacked on the host, pinned, one copy (non_blocking where the device has
# streams)
with profile() as after:
    batch = torch.stack(samples).pin_memory().to(device, non_blocking=True)
transfer_table(after, "after: one pinned copy of the stacked batch")
after.export_chrome_trace("after.json")
print("tessera profile-view before.json -o before.html (and after.json) draws them")
