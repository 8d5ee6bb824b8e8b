/* bench_xformer.c — attention and transformer training on the cpu: scaled_dot_product_attention
 * forward + backward at (16, 4, 256, 64) causal, and a GPT-mini training step (4 layers, d 256,
 * 4 heads, context 256, batch 16, vocab 256, AdamW). bench/run_xformer.sh sets each beside
 * bench_xformer_torch.py. Prints "name ms_per_step peak_mb gflop_per_step" lines; FLOPs are the
 * useful ones (PyTorch's flop counter's convention: causal attention counts its visible half, the
 * backward of attention 2x its forward without the recomputation; the GPT nanoGPT's 6 N per token
 * + 12 layers d T per token). `bench_xformer gpt [STEPS]` runs the GPT step alone (a profiler's
 * target); `bench_xformer peak` prints the host's peak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peak.h"
#include "bench_rss.h"
#include "tessera.h"

static void die_on_error(const char *what) {
    if (ts_error() == TS_OK) return;
    fprintf(stderr, "bench_xformer: %s: %s\n", what, ts_error_message());
    exit(1);
}

typedef void (*step_fn)(void *ctx);

/* ms per step: the best of `repeats` means over `steps` steps, after one warm-up round */
static void run(const char *name, step_fn step, void *ctx, int steps, int repeats, double gflop) {
    long rss0 = rss_reset();
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = bench_now_s();
        for (int s = 0; s < steps; s++) step(ctx);
        double dt = (bench_now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt;
    }
    die_on_error(name);
    printf("%s %.4f %.2f %.4f\n", name, best, (double)(status_kb("VmHWM:") - rss0) / 1024.0, gflop);
    fflush(stdout);
}

/* ---------------------------------------------------------------- attention */
typedef struct {
    ts_tensor *q, *k, *v, *g;
} sdpa_ctx;

static void sdpa_step(void *p) {
    sdpa_ctx *c = p;
    ts_scope_begin();
    ts_set_grad(c->q, NULL), ts_set_grad(c->k, NULL), ts_set_grad(c->v, NULL);
    ts_backward_with(ts_scaled_dot_product_attention(c->q, c->k, c->v, NULL, 0, true, 0), c->g);
    ts_scope_end();
}

static void bench_sdpa(int steps) {
    const int64_t B = 16, H = 4, L = 256, E = 64;
    sdpa_ctx c = {ts_randn(TS_SHAPE(B, H, L, E), (ts_opts){.requires_grad = true}),
                  ts_randn(TS_SHAPE(B, H, L, E), (ts_opts){.requires_grad = true}),
                  ts_randn(TS_SHAPE(B, H, L, E), (ts_opts){.requires_grad = true}),
                  ts_randn(TS_SHAPE(B, H, L, E), (ts_opts){0})};
    /* six products of 2 B H L S E each, causal: (L + 1) / 2L of them visible */
    const double gflop = 6.0 * 2 * B * H * L * L * E * ((double)(L + 1) / (2.0 * L)) / 1e9;
    run("sdpa", sdpa_step, &c, steps, 3, gflop);
    ts_release(c.q), ts_release(c.k), ts_release(c.v), ts_release(c.g);
}

/* ---------------------------------------------------------------- GPT-mini */
typedef struct {
    ts_module *m;
    ts_optim *opt;
    ts_tensor *idx, *tgt;
} gpt_ctx;

static void gpt_step(void *p) {
    gpt_ctx *c = p;
    ts_scope_begin();
    ts_optim_zero_grad(c->opt);
    ts_tensor *logits = ts_forward(c->m, c->idx);
    ts_backward(
        ts_cross_entropy(ts_view(logits, TS_SHAPE(-1, 256)), ts_view(c->tgt, TS_SHAPE(-1))));
    ts_optim_step(c->opt);
    ts_scope_end();
}

static void bench_gpt(int steps) {
    const int64_t B = 16, T = 256, V = 256, d = 256, layers = 4;
    gpt_ctx c;
    c.m = ts_gpt_new((ts_gpt_config){
        .vocab_size = V, .context = T, .n_layer = layers, .n_head = 4, .n_embd = d});
    c.opt = ts_adamw_new(c.m, (ts_adam_opts){.lr = 3e-4, .weight_decay = 0.1});
    c.idx = ts_randint(0, V, TS_SHAPE(B, T), (ts_opts){.dtype = TS_I64});
    c.tgt = ts_randint(0, V, TS_SHAPE(B, T), (ts_opts){.dtype = TS_I64});
    die_on_error("gpt setup");
    const double n = (double)(ts_module_num_parameters(c.m) - T * d); /* without positions */
    const double tokens = (double)(B * T);
    const double gflop = (6 * n + 12.0 * layers * d * T) * tokens / 1e9;
    run("gpt", gpt_step, &c, steps, 2, gflop);
    ts_optim_free(c.opt);
    ts_module_free(c.m);
    ts_release(c.idx), ts_release(c.tgt);
}

int main(int argc, char **argv) {
    const int scale = argc > 1 && !strcmp(argv[1], "quick") ? 1 : 3;
    if (argc > 1 && !strcmp(argv[1], "peak")) { /* the host's peak for 1 and 2 threads */
        const char *isa;
        for (int t = 1; t <= 2; t++) printf("peak%d %.1f\n", t, bench_peak_flops(t, &isa) / 1e9);
        printf("peak_isa %s\n", isa);
        return 0;
    }
    ts_manual_seed(0);
    if (argc > 1 && !strcmp(argv[1], "gpt")) { /* the GPT step alone, for profilers */
        bench_gpt(argc > 2 ? atoi(argv[2]) : 3);
        return 0;
    }
    bench_sdpa(4 * scale);
    bench_gpt(scale);
    return 0;
}
