"""zoo_speed_worker.py — one side of bench_zoo_speed.py: times one timm model's training step and
batch-1 inference under whichever `torch` runs it (PyTorch, or Tessera under tessera.compat).
Prints one JSON line: {"train_ms": median, "infer_ms": median, ...} or {"error": "..."}.

  python zoo_speed_worker.py MODEL --threads T --batch 8 --iters N [--img-size S]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--img-size", type=int, default=0)
    ap.add_argument("--only", choices=["train", "infer", "both"], default="both")
    a = ap.parse_args()
    import torch
    import timm

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    kw = {"pretrained": False}
    try:
        model = timm.create_model(a.model, drop_rate=0.0, drop_path_rate=0.0, **kw)
    except TypeError:
        model = timm.create_model(a.model, **kw)
    size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    if a.img_size:
        size = (size[0], a.img_size, a.img_size)
    res = {"input": list(size), "threads": a.threads, "batch": a.batch,
           "torch": getattr(torch, "__version__", "?")}

    def timed(fn, iters):
        fn()  # warm-up: first-call set-up (primitive creation, allocator growth)
        fn()
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        ts.sort()
        return 1e3 * ts[len(ts) // 2]

    if a.only in ("train", "both"):
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x = torch.randn(a.batch, *size)
        y = torch.randint(0, 1000, (a.batch,))

        def step():
            opt.zero_grad()
            out = model(x)
            if isinstance(out, (tuple, list)):
                out = out[0]
            loss = torch.nn.functional.cross_entropy(out, y % out.shape[-1])
            loss.backward()
            opt.step()

        res["train_ms"] = timed(step, a.iters)
    if a.only in ("infer", "both"):
        model.eval()
        x1 = torch.randn(1, *size)

        def infer():
            with torch.no_grad():
                model(x1)

        res["infer_ms"] = timed(infer, max(a.iters, 5))
    print(json.dumps(res))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line the driver records
        print(json.dumps({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}))
        sys.exit(0)
