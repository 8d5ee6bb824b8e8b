/* bench_gpu.c — the CUDA issue's GPU measurements on cuda:0, for bench/run_gpu.sh to set beside
 * PyTorch's (bench_gpu_torch.py): training-step ms of SimpleNN 784-128-10 b64, SimpleCNN b64, MLP
 * 784-1024-1024-10 b256 and the GPT-mini (bench_xformer.c's, batch 8 of 64 tokens, AdamW) in
 * float32 and under f16 autocast + grad scaler (AMP), each eagerly and as a captured step replayed
 * (CUDA graphs, docs/CAPTURE.md: "<case>_graph"); 8192^3 GEMM TFLOP/s in f32, f32 with TF32, f16
 * and bf16; host-to-device GB/s of 256 MiB from pinned and from pageable memory. Prints "name
 * value unit" lines ("#" lines are comments: "# check" compares replayed losses with eager ones),
 * "<case>_graph: capture failed: <message>" when a capture fails, "<line>: <what> failed:
 * <message>" when a GPT-mini or graphed line fails otherwise; exits 1 when a replayed loss differs
 * from the eager one by more than rounding explains. Without a GPU prints "bench_gpu: SKIP:
 * <reason>" and exits 0. Usage: bench_gpu [quick]; BENCH_GPU_ONLY=<case> runs one model's lines,
 * BENCH_GPU_STEPS=N one round of N steps (both for a profiler). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_models.h"
#include "tessera.h"

#define BENCH_NAME "bench_gpu"
#include "bench_gpu_util.h"
#include "bench_util.h"

/* A timed round of work, repeated: one warm-up round (kernels load, cuBLAS picks its algorithms,
 * the caching allocator fills), then `runs` rounds of `iters` calls, each round between two
 * device synchronisations so it measures the GPU's work and not only the queueing of it.
 * Returns the median seconds per call. */
typedef void (*work_fn)(void *ctx);
static double time_work(work_fn fn, void *ctx, int iters, int runs) {
    double per_call[MAX_RUNS];
    for (int r = 0; r <= runs; r++) {
        synchronize();
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ts_scope_begin();
            fn(ctx);
            ts_scope_end();
        }
        synchronize();
        if (r > 0) per_call[r - 1] = (now_s() - t0) / iters;
    }
    return median(per_call, runs);
}

/* ------------------------------------------------------------------ training steps */
/* A training-step case: a model, its optimizer and the batch every timed step trains on. */
typedef struct {
    const char *name;
    ts_module *(*make)(const void *arg);
    const void *arg;
    ts_tensor *x, *y; /* the timed steps' batch, on bench_device */
    int64_t classes;  /* targets in [0, classes) */
    bool lm;          /* the GPT: x and y are tokens [B, T], logits [B, T, classes]; AdamW */
    double lr, momentum;
} model_case;

typedef struct {
    const model_case *mc;
    ts_module *model;
    ts_optim *opt;
    ts_grad_scaler *scaler; /* NULL: a float32 step */
    ts_tensor *x, *y;       /* what a step trains on: the case's batch, or the static inputs */
    ts_graph *g;            /* the captured step; NULL when eager */
    ts_tensor *loss;        /* the captured step's loss */
} train_ctx;

/* A fresh model from seed 0 (every line and both replicas of a check start from the same
 * weights), its optimizer, and for AMP a grad scaler. */
static void train_ctx_init(train_ctx *c, const model_case *mc, bool amp) {
    *c = (train_ctx){.mc = mc, .x = mc->x, .y = mc->y};
    ts_manual_seed(0);
    c->model = ts_module_to(mc->make(mc->arg), bench_device);
    if (mc->lm)
        c->opt = ts_adamw_new(c->model, (ts_adam_opts){.lr = mc->lr, .weight_decay = 0.1});
    else
        c->opt = ts_sgd_new(c->model, (ts_sgd_opts){.lr = mc->lr, .momentum = mc->momentum});
    if (amp) c->scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0});
}

static void train_ctx_free(train_ctx *c) {
    ts_graph_free(c->g);
    ts_release(c->loss);
    if (c->x != c->mc->x) ts_release(c->x);
    if (c->y != c->mc->y) ts_release(c->y);
    ts_grad_scaler_free(c->scaler);
    ts_optim_free(c->opt);
    ts_module_free(c->model);
}

static ts_tensor *case_loss(const model_case *mc, ts_tensor *out, ts_tensor *y) {
    if (!mc->lm) return ts_cross_entropy(out, y);
    return ts_cross_entropy(ts_view(out, TS_SHAPE(-1, mc->classes)), ts_view(y, TS_SHAPE(-1)));
}

/* One whole step on batch (x, y), its tensors in the caller's scope -> the loss. */
static ts_tensor *step_on(train_ctx *c, ts_tensor *x, ts_tensor *y) {
    ts_optim_zero_grad(c->opt);
    if (!c->scaler) {
        ts_tensor *loss = case_loss(c->mc, ts_forward(c->model, x), y);
        ts_backward(loss);
        ts_optim_step(c->opt);
        return loss;
    }
    /* PyTorch's AMP recipe: forward and loss under autocast, backward outside it on the scaled
     * loss, then the scaler's step (skipped on Inf/NaN gradients) and update. */
    ts_autocast_begin(bench_device.type, TS_F16);
    ts_tensor *loss = case_loss(c->mc, ts_forward(c->model, x), y);
    ts_autocast_end();
    ts_backward(ts_grad_scaler_scale(c->scaler, loss));
    ts_grad_scaler_step(c->scaler, c->opt, NULL);
    ts_grad_scaler_update(c->scaler);
    return loss;
}

static void train_step(void *p) {
    train_ctx *c = p;
    step_on(c, c->x, c->y);
}

/* A graphed step: the batch copied into the static inputs, then the captured step replayed. */
static void replay_step(void *p) {
    train_ctx *c = p;
    ts_copy_(c->x, c->mc->x);
    ts_copy_(c->y, c->mc->y);
    ts_graph_replay(c->g);
}

/* Whether an error is pending; if so prints "<label>: <what> failed: <message>" and clears it, so
 * the other lines go on. */
static bool failed(const char *label, const char *what) {
    if (ts_error() == TS_OK) return false;
    printf("%s: %s failed: %s\n", label, what, ts_error_message());
    fflush(stdout);
    ts_error_clear();
    return true;
}

/* Static inputs for c made like (x0, y0) and holding them (docs/CAPTURE.md: made before the
 * capture, kept while the graph lives). */
static void make_static_inputs(train_ctx *c, ts_tensor *x0, ts_tensor *y0) {
    ts_scope_begin();
    c->x = ts_keep(ts_empty_like(x0));
    c->y = ts_keep(ts_empty_like(y0));
    ts_copy_(c->x, x0);
    ts_copy_(c->y, y0);
    ts_scope_end();
}

/* Records one whole step of c (warmed up) over its static inputs: true, or false with no error
 * pending, the graph freed and "<label>: capture failed: <message>" printed. */
static bool capture_step(train_ctx *c, const char *label) {
    c->g = ts_graph_capture_begin(bench_device, (ts_graph_opts){0});
    if (c->g) {
        ts_scope_begin();
        c->loss = ts_keep(step_on(c, c->x, c->y)); /* recorded, not run */
        ts_scope_end();
    }
    ts_status st = c->g ? ts_graph_capture_end() : ts_error();
    if (st == TS_OK && c->g) return true;
    printf("%s: capture failed: %s\n", label,
           ts_error() != TS_OK ? ts_error_message() : "no graph and no error");
    fflush(stdout);
    ts_error_clear();
    ts_graph_free(c->g);
    c->g = NULL;
    ts_release(c->loss);
    c->loss = NULL;
    return false;
}

enum { WARMUP_STEPS = 3, CHECK_STEPS = 8 };

/* Untimed: CHECK_STEPS steps of one replica eagerly, of another from the same weights as
 * WARMUP_STEPS eager steps, one capture and replays, over CHECK_STEPS different batches (so a
 * replay that missed its input copy or a weight update shows). Prints a "# check" line; false
 * when a loss differs by more than rounding explains. The replay runs the eager step's kernels in
 * the same order, so the losses should be equal bit for bit; a library choosing other
 * algorithms under capture (cuBLAS, cuDNN) or atomics' order may change the last bits, which a
 * few steps of training do not grow past 1e-4 relative in float32, nor past 1e-3 with float16
 * activations (a logit's half ulp is 2.4e-4, averaged over the batch in the loss). A missed
 * input or update moves the loss by far more. */
static bool check_graph(const model_case *mc, bool amp, const char *label) {
    ts_tensor *xs[CHECK_STEPS], *ys[CHECK_STEPS];
    ts_opts o = {.device = bench_device, .dtype = TS_I64};
    ts_manual_seed(2);
    for (int s = 0; s < CHECK_STEPS; s++) {
        xs[s] = mc->lm ? ts_randint(0, mc->classes, ts_shape_of(mc->x), o)
                       : ts_randn(ts_shape_of(mc->x), (ts_opts){.device = bench_device});
        ys[s] = ts_randint(0, mc->classes, ts_shape_of(mc->y), o);
    }
    train_ctx e, r;
    train_ctx_init(&e, mc, amp);
    train_ctx_init(&r, mc, amp);
    make_static_inputs(&r, xs[0], ys[0]);
    double want[CHECK_STEPS], got[CHECK_STEPS];
    bool ok = true, captured = !failed(label, "check setup");
    for (int s = 0; s < CHECK_STEPS && captured; s++) {
        if (s == WARMUP_STEPS) { /* outside the step's scope: the loss is kept for the replays */
            ts_release(ts_copy_(r.x, xs[s]));
            ts_release(ts_copy_(r.y, ys[s]));
            if (!(captured = capture_step(&r, label))) break;
        }
        ts_scope_begin();
        want[s] = ts_item(step_on(&e, xs[s], ys[s]));
        if (s < WARMUP_STEPS) {
            got[s] = ts_item(step_on(&r, xs[s], ys[s]));
        } else {
            ts_copy_(r.x, xs[s]);
            ts_copy_(r.y, ys[s]);
            ts_graph_replay(r.g);
            got[s] = ts_item(r.loss);
        }
        ts_scope_end();
        if (failed(label, "check")) captured = ok = false;
    }
    if (captured) {
        int equal = 0;
        double worst = 0, worst_rel = 0, limit = amp ? 1e-3 : 1e-4;
        for (int s = 0; s < CHECK_STEPS; s++) {
            double d = fabs(want[s] - got[s]);
            equal += want[s] == got[s];
            worst = isnan(d) ? INFINITY : fmax(worst, d);
            worst_rel = fmax(worst_rel, isnan(d) ? INFINITY : d / fmax(fabs(want[s]), 1e-30));
        }
        ok = worst_rel <= limit;
        printf("# check %s: %d eager + %d replayed steps against %d eager steps from the same "
               "weights: %d of %d losses equal bit for bit, max |diff| %.3g (relative %.3g, "
               "limit %.0e)%s\n",
               label, WARMUP_STEPS, CHECK_STEPS - WARMUP_STEPS, CHECK_STEPS, equal, CHECK_STEPS,
               worst, worst_rel, limit, ok ? "" : ": FAILED");
        fflush(stdout);
    }
    train_ctx_free(&e);
    train_ctx_free(&r);
    for (int s = 0; s < CHECK_STEPS; s++) ts_release(xs[s]), ts_release(ys[s]);
    return ok;
}

/* "<name>_f32 ms ms" and "<name>_amp ms ms": the eager step, each from a fresh model. An error
 * stops the program, or for the GPT (soft) prints a "failed" line and goes on. */
static void bench_eager(const model_case *mc, bool amp, bool soft, int steps, int runs) {
    char label[64];
    snprintf(label, sizeof label, "%s_%s", mc->name, amp ? "amp" : "f32");
    train_ctx c;
    train_ctx_init(&c, mc, amp);
    if (!soft) die_on_error(label);
    if (!failed(label, "setup")) {
        double ms = time_work(train_step, &c, steps, runs) * 1e3;
        if (!soft) die_on_error(label);
        if (!failed(label, "step")) printf("%s %.4f ms\n", label, ms);
    }
    fflush(stdout);
    train_ctx_free(&c);
}

/* "<name>_f32_graph ms ms" and "<name>_amp_graph ms ms": a fresh model takes WARMUP_STEPS eager
 * steps on static inputs holding the batch, one whole step is captured (zero_grad, forward under
 * autocast for AMP, loss, backward through the grad scaler for AMP, optimizer step), and each
 * timed step copies the batch into the static inputs and replays it. A capture that fails prints
 * "<label>: capture failed: <message>" and the program goes on. Then check_graph; returns its
 * verdict (true when nothing was captured: there is no replay to check). */
static bool bench_graph(const model_case *mc, bool amp, int steps, int runs) {
    char label[64];
    snprintf(label, sizeof label, "%s_%s_graph", mc->name, amp ? "amp" : "f32");
    train_ctx c;
    train_ctx_init(&c, mc, amp);
    make_static_inputs(&c, mc->x, mc->y);
    bool timed = false;
    if (!failed(label, "setup")) {
        for (int s = 0; s < WARMUP_STEPS; s++) {
            ts_scope_begin();
            step_on(&c, c.x, c.y);
            ts_scope_end();
        }
        if (!failed(label, "warm-up") && capture_step(&c, label)) {
            double ms = time_work(replay_step, &c, steps, runs) * 1e3;
            if (!failed(label, "replay")) {
                printf("%s %.4f ms\n", label, ms);
                timed = true;
            }
        }
    }
    fflush(stdout);
    train_ctx_free(&c);
    return timed ? check_graph(mc, amp, label) : true;
}

/* All four lines of a case: eager f32 and AMP, then graphed f32 and AMP. */
static bool bench_model(const model_case *mc, bool soft, int steps, int runs) {
    bool ok = true;
    for (int amp = 0; amp <= 1; amp++) bench_eager(mc, amp, soft, steps, runs);
    for (int amp = 0; amp <= 1; amp++) ok &= bench_graph(mc, amp, steps, runs);
    return ok;
}

static ts_module *make_mlp(const void *sizes) {
    const int64_t *s = sizes;
    int n = 0;
    while (s[n] > 0) n++;
    return mlp_new(s, n);
}
static ts_module *make_cnn(const void *unused) {
    (void)unused;
    return simple_cnn_new();
}
/* bench_xformer.c's GPT-mini: vocab 256, context 256, 4 layers, 4 heads, d 256, no dropout */
static ts_module *make_gpt(const void *unused) {
    (void)unused;
    return ts_gpt_new((ts_gpt_config){
        .vocab_size = 256, .context = 256, .n_layer = 4, .n_head = 4, .n_embd = 256});
}

/* ------------------------------------------------------------------ GEMM */
typedef struct {
    ts_tensor *a, *b;
} mm_ctx;
static void mm_call(void *p) {
    mm_ctx *c = p;
    ts_mm(c->a, c->b);
}

static void bench_gemm(const char *label, int64_t n, ts_dtype dt, bool tf32, int iters, int runs) {
    ts_cuda_set_allow_tf32(tf32);
    ts_manual_seed(1);
    /* f32 normals cast to dt: the operands' values do not matter to the timing, and the cast
     * needs no half-precision random kernel */
    ts_opts o = {.device = bench_device};
    ts_scope_begin();
    mm_ctx c = {ts_keep(ts_to_dtype(ts_randn(TS_SHAPE(n, n), o), dt)),
                ts_keep(ts_to_dtype(ts_randn(TS_SHAPE(n, n), o), dt))};
    ts_scope_end();
    die_on_error(label);
    double s = time_work(mm_call, &c, iters, runs);
    die_on_error(label);
    printf("%s %.2f TFLOP/s\n", label, 2.0 * (double)n * (double)n * (double)n / s * 1e-12);
    fflush(stdout);
    ts_release(c.a);
    ts_release(c.b);
    ts_cuda_set_allow_tf32(false);
}

/* ------------------------------------------------------------------ host to device */
typedef struct {
    ts_tensor *src;
    bool async;
} copy_ctx;
static void copy_call(void *p) {
    copy_ctx *c = p;
    if (c->async)
        ts_to_async(c->src, bench_device);
    else
        ts_to(c->src, bench_device);
}

/* GB/s (1e9 bytes) of `bytes` copied from a cpu tensor, pinned with ts_to_async or pageable with
 * the blocking ts_to; each copy lands in a fresh device tensor, as torch's .to() does. */
static void bench_h2d(const char *label, size_t bytes, bool pinned, int iters, int runs) {
    ts_tensor *host = ts_ones(TS_SHAPE((int64_t)(bytes / sizeof(float))), (ts_opts){0});
    copy_ctx c = {host, pinned};
    if (pinned) {
        c.src = ts_pin_memory(host);
        ts_release(host);
    }
    die_on_error(label);
    double s = time_work(copy_call, &c, iters, runs);
    die_on_error(label);
    printf("%s %.2f GB/s\n", label, (double)bytes / s * 1e-9);
    fflush(stdout);
    ts_release(c.src);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    bool check;
    if (!bench_pick_device(&check)) return 0;
    int steps = quick ? 50 : 200, runs = quick ? 3 : 7;
    int64_t n = 8192;
    size_t bytes = (size_t)256 << 20;
    if (check) { /* the same code paths, at sizes a host-simulated device gets through */
        steps = 2, runs = 1, n = 256, bytes = (size_t)1 << 20;
    }
    const char *few = getenv("BENCH_GPU_STEPS"); /* N steps a round, one round: for a profiler */
    if (few && atoi(few) > 0) steps = atoi(few), runs = 1;

    /* BENCH_GPU_ONLY=<case> (simplenn, mlp, gptmini, simplecnn): that model's lines alone, e.g.
     * to profile its kernels under ncu */
    const char *only = getenv("BENCH_GPU_ONLY");
    if (only && !*only) only = NULL;

    /* the products and copies first: a model line that fails hard cannot cost them */
    if (!only) {
        bench_gemm("gemm_f32", n, TS_F32, false, quick ? 2 : 5, runs);
        bench_gemm("gemm_tf32", n, TS_F32, true, quick ? 5 : 20, runs);
        bench_gemm("gemm_f16", n, TS_F16, false, quick ? 10 : 50, runs);
        bench_gemm("gemm_bf16", n, TS_BF16, false, quick ? 10 : 50, runs);

        bench_h2d("h2d_pinned", bytes, true, quick ? 5 : 20, runs);
        bench_h2d("h2d_pageable", bytes, false, quick ? 5 : 20, runs);
    }

    ts_manual_seed(0);
    ts_opts o = {.device = bench_device}, oi = {.device = bench_device, .dtype = TS_I64};
    ts_tensor *x = ts_randn(TS_SHAPE(64, 784), o);
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(64), o);
    ts_tensor *img = ts_randn(TS_SHAPE(64, 3, 32, 32), o);
    ts_tensor *xb = ts_randn(TS_SHAPE(256, 784), o);
    ts_tensor *yb = ts_randint(0, 10, TS_SHAPE(256), o);
    /* the GPT-mini on a batch small enough to be launch-bound, as the others */
    int64_t gpt_b = check ? 2 : 8, gpt_t = check ? 16 : 64;
    ts_tensor *tok = ts_randint(0, 256, TS_SHAPE(gpt_b, gpt_t), oi);
    ts_tensor *tgt = ts_randint(0, 256, TS_SHAPE(gpt_b, gpt_t), oi);
    die_on_error("inputs");
    static const int64_t simplenn[] = {784, 128, 10, 0}, mlp[] = {784, 1024, 1024, 10, 0};
    const model_case cases[] = {
        {"simplenn", make_mlp, simplenn, x, y, 10, false, 0.01, 0},
        {"mlp", make_mlp, mlp, xb, yb, 10, false, 0.01, 0},
        {"gptmini", make_gpt, NULL, tok, tgt, 256, true, 3e-4, 0},
        {"simplecnn", make_cnn, NULL, img, y, 10, false, 0.001, 0.9},
    };
    bool all_ok = true;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || !strcmp(only, cases[i].name))
            all_ok &= bench_model(&cases[i], cases[i].lm, steps, runs);
    ts_release(x);
    ts_release(y);
    ts_release(img);
    ts_release(xb);
    ts_release(yb);
    ts_release(tok);
    ts_release(tgt);

    if (!all_ok) fprintf(stderr, "bench_gpu: a replayed step's loss differs from the eager one\n");
    return all_ok ? 0 : 1;
}
