"""bench_gpu_kernels_torch.py — PyTorch's side of bench_gpu_kernels.c: the same fused-kernel cases
on cuda:0 with the same shapes and dtypes, timed the same way (the median of rounds of calls
between two synchronisations, after a warm-up round). Prints "name ms-per-call ms" lines; the
optimizer line is the best of PyTorch's foreach and fused AdamW ("#" lines say each). Attention
runs through F.scaled_dot_product_attention (FlashAttention-2 / cuDNN, PyTorch's choice), layer
norm, batch norm, softmax and cross-entropy through their functional forms (cuDNN for batch
norm), linear with a bias through F.linear (cuBLASLt's epilogues) and as mm + add. Without CUDA
prints "bench_gpu_kernels_torch: SKIP: <reason>". Usage: [quick]
"""
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"bench_gpu_kernels_torch: SKIP: {e}")
    sys.exit(0)

QUICK = len(sys.argv) > 1 and sys.argv[1] == "quick"
RUNS = 3 if QUICK else 7
DEV = "cuda"


def time_calls(fn, iters, runs=RUNS):
    per_call = []
    for r in range(runs + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        if r > 0:
            per_call.append((time.perf_counter() - t0) / iters * 1e3)
    return statistics.median(per_call)


def report(name, ms):
    print(f"{name} {ms:.4f} ms", flush=True)


def leaf(shape, dtype, scale=1.0, grad=False):
    t = (torch.randn(shape, device=DEV) * scale).to(dtype).detach()
    return t.requires_grad_(grad)


def clear(*ts):
    for t in ts:
        t.grad = None


def bench_layernorm(name, dtype):
    x, w, b = leaf((8192, 768), dtype, grad=True), leaf(768, dtype, grad=True), leaf(768, dtype, grad=True)
    dy = leaf((8192, 768), dtype)

    def call():
        F.layer_norm(x, (768,), w, b, 1e-5).backward(dy)
        clear(x, w, b)

    report(name, time_calls(call, 20))


def bench_batchnorm(name, fmt):
    x = leaf((128, 256, 56, 56), torch.float32).contiguous(memory_format=fmt).requires_grad_(True)
    dy = leaf((128, 256, 56, 56), torch.float32).contiguous(memory_format=fmt)
    w, b = leaf(256, torch.float32, grad=True), leaf(256, torch.float32, grad=True)

    def call():
        F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5).backward(dy)
        clear(x, w, b)

    report(name, time_calls(call, 10))


def bench_cross_entropy(name, dtype):
    x = leaf((8192, 50257), dtype, 2.0, grad=True)
    target = (torch.rand(8192, device=DEV) * (50257 - 0.5)).long()

    def call():
        F.cross_entropy(x, target).backward()
        clear(x)

    report(name, time_calls(call, 10))


def bench_sdpa(name, heads, e, causal, fwd_only=False):
    q, k, v = (leaf((8, heads, 1024, e), torch.bfloat16, grad=not fwd_only) for _ in range(3))
    dy = leaf((8, heads, 1024, e), torch.bfloat16)

    def call():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        if not fwd_only:
            y.backward(dy)
            clear(q, k, v)

    report(name + ("_fwd" if fwd_only else ""), time_calls(call, 10))


def bench_softmax():
    x, dy = leaf((8192, 4096), torch.float32, grad=True), leaf((8192, 4096), torch.float32)

    def call():
        torch.softmax(x, -1).backward(dy)
        clear(x)

    report("softmax_f32", time_calls(call, 20))


def gpt2_shapes():
    v, t, c = 50257, 1024, 768
    s = [(v, c), (t, c)]
    for _ in range(12):
        s += [(c,), (c,), (3 * c, c), (3 * c,), (c, c), (c,), (c,), (c,), (4 * c, c), (4 * c,), (c, 4 * c), (c,)]
    return s + [(c,), (c,)]


def bench_adamw():
    best = None
    for kind in ("foreach", "fused"):
        params = [leaf(s, torch.float32, 0.02, grad=True) for s in gpt2_shapes()]
        for p in params:
            p.grad = leaf(p.shape, torch.float32, 1e-3)
        opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, **{kind: True})
        ms = time_calls(opt.step, 20)
        print(f"# adamw_f32 {kind}: {ms:.4f} ms")
        best = ms if best is None else min(best, ms)
        del opt, params
    report("adamw_f32", best)


def bench_linear(name, dtype, unfused):
    x = leaf((8192, 768), dtype, grad=True)
    w, b = leaf((3072, 768), dtype, 0.02, grad=True), leaf(3072, dtype, 0.02, grad=True)
    dy = leaf((8192, 3072), dtype)

    def call():
        y = torch.mm(x, w.t()) + b if unfused else F.linear(x, w, b)
        y.backward(dy)
        clear(x, w, b)

    report(name, time_calls(call, 20))


def bench_linear_act(name, dtype, gelu, unfused):
    # PyTorch's eager nn.Sequential(Linear, ReLU / GELU(approximate="tanh")): linear (addmm's bias
    # epilogue), then the activation's kernel; `unfused`: mm + add, then the activation
    x = leaf((8192, 768), dtype, grad=True)
    w, b = leaf((3072, 768), dtype, 0.02, grad=True), leaf(3072, dtype, 0.02, grad=True)
    dy = leaf((8192, 3072), dtype)

    def call():
        z = torch.mm(x, w.t()) + b if unfused else F.linear(x, w, b)
        y = F.gelu(z, approximate="tanh") if gelu else F.relu(z)
        y.backward(dy)
        clear(x, w, b)

    report(name, time_calls(call, 20))


def bench_mlp(name, dtype, gelu, unfused):
    # GPT-2's MLP, eager nn.Sequential(Linear, ReLU / GELU(approximate="tanh"), Linear): linear,
    # the activation's kernel, linear; `unfused`: mm + add for both layers
    x = leaf((8192, 768), dtype, grad=True)
    w1, b1 = leaf((3072, 768), dtype, 0.02, grad=True), leaf(3072, dtype, 0.02, grad=True)
    w2, b2 = leaf((768, 3072), dtype, 0.02, grad=True), leaf(768, dtype, 0.02, grad=True)
    dy = leaf((8192, 768), dtype)

    def lin(t, w, b):
        return torch.mm(t, w.t()) + b if unfused else F.linear(t, w, b)

    def call():
        z = lin(x, w1, b1)
        y = lin(F.gelu(z, approximate="tanh") if gelu else F.relu(z), w2, b2)
        y.backward(dy)
        clear(x, w1, b1, w2, b2)

    report(name, time_calls(call, 10))


def main():
    if not torch.cuda.is_available():
        print("bench_gpu_kernels_torch: SKIP: torch.cuda is not available")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    bench_layernorm("layernorm_f32", torch.float32)
    bench_layernorm("layernorm_bf16", torch.bfloat16)
    bench_batchnorm("batchnorm_nchw_f32", torch.contiguous_format)
    bench_batchnorm("batchnorm_nhwc_f32", torch.channels_last)
    bench_cross_entropy("cross_entropy_f32", torch.float32)
    bench_cross_entropy("cross_entropy_bf16", torch.bfloat16)
    bench_sdpa("sdpa_causal_bf16", 12, 64, True)
    bench_sdpa("sdpa_bf16_e128", 6, 128, False)
    bench_sdpa("sdpa_causal_bf16", 12, 64, True, fwd_only=True)
    bench_sdpa("sdpa_bf16_e128", 6, 128, False, fwd_only=True)
    bench_softmax()
    bench_adamw()
    bench_linear("linear_bias_f32", torch.float32, False)
    bench_linear("linear_bias_f32_unfused", torch.float32, True)
    bench_linear("linear_bias_bf16", torch.bfloat16, False)
    bench_linear("linear_bias_bf16_unfused", torch.bfloat16, True)
    for act in ("relu", "gelu_tanh"):
        for tag, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            for unfused in (False, True):
                name = f"linear_{act}_{tag}" + ("_unfused" if unfused else "")
                bench_linear_act(name, dtype, act == "gelu_tanh", unfused)
    for act in ("relu", "gelu_tanh"):
        for tag, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
            for unfused in (False, True):
                name = f"mlp_{act}_{tag}" + ("_unfused" if unfused else "")
                bench_mlp(name, dtype, act == "gelu_tanh", unfused)


if __name__ == "__main__":
    main()
