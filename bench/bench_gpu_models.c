/* bench_gpu_models.c — issue 57's real-model training steps on cuda:0, for run_gpu_models.sh to
 * set beside PyTorch's (bench_gpu_models_torch.py): ms per whole training step (zero_grad,
 * forward, loss, backward, optimizer step) of
 *   gpt2_124m_bf16  GPT-2 124M (ts_gpt_new: vocab 50257, context 1024, 12 layers, 12 heads, 768
 *                   wide, no dropout, tied head), batch 8 of 1024 random tokens and random
 *                   targets, AdamW lr 3e-4 weight decay 0.1, forward and loss under bf16 autocast
 *                   (no grad scaler: bf16 has float32's exponent range);
 *   resnet50_amp    ResNet-50 (ts_resnet50: Bottleneck [3, 4, 6, 3], 1000 classes), batch 128 of
 *                   3x224x224 channels_last random images and random labels, SGD lr 0.1 momentum
 *                   0.9, forward and loss under bf16 autocast (no grad scaler);
 *   gpt2_124m_f32, resnet50_f32: the same in float32 (TF32 off, Tessera's default).
 * Each line trains a fresh model from seed 0: one warm-up round of 3 steps, then the median of 3
 * rounds of 5 steps (quick: 2 rounds of 3), each round between two device synchronisations.
 * Prints "name ms-per-step ms" lines and "#" comments (tokens/s or images/s; the loss of the first
 * and the last step, a check that the steps train); "<line>: <what> failed: <message>" when a
 * line fails (e.g. out of memory: the other lines go on, and the program exits 1 at the end).
 * Without a GPU prints "bench_gpu_models: SKIP: <reason>" and exits 0. BENCH_GPU_DEVICE=sim:0 runs
 * the same code on small shapes (GPT 2 layers 64 wide, vocab 512, context 64, batch 2; ResNet-50
 * of width 8 on 2x3x64x64, 10 classes) as a logic check; the numbers then mean nothing.
 * Usage: bench_gpu_models [quick]; BENCH_GPU_ONLY=<line> runs one line, BENCH_GPU_STEPS=N one
 * round of N steps after the warm-up (both for a profiler). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define BENCH_NAME "bench_gpu_models"
#include "bench_gpu_util.h"
#include "bench_util.h"

/* Whether an error is pending; if so prints "<label>: <what> failed: <message>" and clears it. */
static bool failed(const char *label, const char *what) {
    if (ts_error() == TS_OK) return false;
    printf("%s: %s failed: %s\n", label, what, ts_error_message());
    fflush(stdout);
    ts_error_clear();
    return true;
}

/* ------------------------------------------------------------------ the cases */
typedef struct {
    const char *name;
    bool lm;  /* the GPT: tokens [B, T] in, logits [B, T, vocab], AdamW; else ResNet, SGD */
    bool amp; /* forward and loss under bf16 autocast */
    ts_tensor *x, *y;
    int64_t classes;  /* vocab or classes */
    int64_t per_step; /* tokens or images a step trains on */
    const char *unit; /* "tokens" or "images" */
} model_case;

typedef struct {
    const model_case *mc;
    ts_module *model;
    ts_optim *opt;
} train_ctx;

/* The sizes: issue 57's, or small ones for a logic check on a simulated device. */
static ts_gpt_config gpt_config;
static ts_resnet_config resnet_config;

static ts_tensor *case_loss(const model_case *mc, ts_tensor *out, ts_tensor *y) {
    if (!mc->lm) return ts_cross_entropy(out, y);
    return ts_cross_entropy(ts_view(out, TS_SHAPE(-1, mc->classes)), ts_view(y, TS_SHAPE(-1)));
}

/* One whole step, its tensors in the caller's scope -> the loss. bf16 autocast needs no grad
 * scaler: forward and loss under autocast, backward outside it (PyTorch's recipe), the step. */
static ts_tensor *train_step(train_ctx *c) {
    ts_optim_zero_grad(c->opt);
    if (c->mc->amp) ts_autocast_begin(bench_device.type, TS_BF16);
    ts_tensor *loss = case_loss(c->mc, ts_forward(c->model, c->mc->x), c->mc->y);
    if (c->mc->amp) ts_autocast_end();
    ts_backward(loss);
    ts_optim_step(c->opt);
    return loss;
}

/* One warm-up round of `warmup` steps, then `runs` rounds of `steps` steps, each round between two
 * device synchronisations: the median seconds per step (NAN when an error stopped it). *first and
 * *last: the losses of the first and the last step. */
static double time_steps(train_ctx *c, int warmup, int steps, int runs, double *first,
                         double *last) {
    double per_step[MAX_RUNS];
    ts_tensor *l0 = NULL, *l1 = NULL;
    for (int r = 0; r <= runs; r++) {
        int n = r == 0 ? warmup : steps;
        synchronize();
        double t0 = now_s();
        for (int i = 0; i < n && ts_error() == TS_OK; i++) {
            ts_scope_begin();
            ts_tensor *loss = train_step(c);
            if (r == 0 && i == 0) l0 = ts_keep(loss);
            if (r == runs && i == n - 1) l1 = ts_keep(loss);
            ts_scope_end();
        }
        synchronize();
        if (r > 0) per_step[r - 1] = (now_s() - t0) / n;
    }
    double s = ts_error() == TS_OK ? median(per_step, runs) : NAN;
    *first = l0 ? ts_item(l0) : NAN;
    *last = l1 ? ts_item(l1) : NAN;
    ts_release(l0);
    ts_release(l1);
    return s;
}

/* "<name> ms ms" and its "#" comments, from a fresh model; false when the line failed. */
static bool bench_case(const model_case *mc, int warmup, int steps, int runs) {
    train_ctx c = {.mc = mc};
    ts_manual_seed(0);
    ts_module *m = mc->lm ? ts_gpt_new(gpt_config) : ts_resnet50_new(resnet_config);
    c.model = m ? ts_module_to(m, bench_device) : NULL;
    if (c.model) {
        if (mc->lm)
            c.opt = ts_adamw_new(c.model, (ts_adam_opts){.lr = 3e-4, .weight_decay = 0.1});
        else
            c.opt = ts_sgd_new(c.model, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
    }
    bool ok = !failed(mc->name, "setup");
    if (ok) {
        double first, last;
        double s = time_steps(&c, warmup, steps, runs, &first, &last);
        ok = !failed(mc->name, "step");
        if (ok) {
            printf("%s %.4f ms\n", mc->name, s * 1e3);
            printf("# %s: %lld %s a step, %.1f %s/s; loss %.4f at the first step, %.4f at the "
                   "last (step %d)\n",
                   mc->name, (long long)mc->per_step, mc->unit, (double)mc->per_step / s, mc->unit,
                   first, last, warmup + steps * runs);
        }
    }
    fflush(stdout);
    ts_optim_free(c.opt);
    ts_module_free(c.model);
    ts_error_clear(); /* a failed free must not fail the next line */
    return ok;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    bool check;
    if (!bench_pick_device(&check)) return 0;

    int warmup = quick ? 2 : 3, steps = quick ? 3 : 5, runs = quick ? 2 : 3;
    const char *few = getenv("BENCH_GPU_STEPS"); /* N steps, one round: for a profiler */
    if (few && atoi(few) > 0) steps = atoi(few), runs = 1;
    const char *only = getenv("BENCH_GPU_ONLY"); /* one line, e.g. to profile it under nsys */
    if (only && !*only) only = NULL;

    /* GPT-2 124M and ResNet-50 at issue 57's shapes, or small ones on a simulated device */
    int64_t gpt_b = 8, gpt_t = 1024, img_b = 128, img_hw = 224;
    gpt_config = (ts_gpt_config){
        .vocab_size = 50257, .context = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768};
    resnet_config = (ts_resnet_config){.num_classes = 1000};
    if (check) {
        gpt_b = 2, gpt_t = 64, img_b = 2, img_hw = 64;
        gpt_config = (ts_gpt_config){
            .vocab_size = 512, .context = 64, .n_layer = 2, .n_head = 2, .n_embd = 64};
        resnet_config = (ts_resnet_config){.num_classes = 10, .width = 8};
    }
    printf("# gpt2_124m: vocab %lld, context %lld, %lld layers, %lld heads, %lld wide, batch "
           "%lld x %lld tokens; resnet50: batch %lld x 3x%lldx%lld channels_last, %lld classes, "
           "width %lld; %d warm-up steps, median of %d rounds of %d steps\n",
           (long long)gpt_config.vocab_size, (long long)gpt_config.context,
           (long long)gpt_config.n_layer, (long long)gpt_config.n_head,
           (long long)gpt_config.n_embd, (long long)gpt_b, (long long)gpt_t, (long long)img_b,
           (long long)img_hw, (long long)img_hw, (long long)resnet_config.num_classes,
           (long long)(resnet_config.width ? resnet_config.width : 64), warmup, runs, steps);
    fflush(stdout);

    ts_manual_seed(1);
    ts_opts o = {.device = bench_device}, oi = {.device = bench_device, .dtype = TS_I64};
    ts_scope_begin();
    ts_tensor *tok = ts_keep(ts_randint(0, gpt_config.vocab_size, TS_SHAPE(gpt_b, gpt_t), oi));
    ts_tensor *tgt = ts_keep(ts_randint(0, gpt_config.vocab_size, TS_SHAPE(gpt_b, gpt_t), oi));
    /* channels_last as PyTorch's input.to(memory_format=torch.channels_last): made once, outside
     * the step (the model would otherwise reorder it at every forward) */
    ts_tensor *img = ts_keep(
        ts_contiguous_format(ts_randn(TS_SHAPE(img_b, 3, img_hw, img_hw), o), TS_CHANNELS_LAST));
    ts_tensor *lbl = ts_keep(ts_randint(0, resnet_config.num_classes, TS_SHAPE(img_b), oi));
    ts_scope_end();
    die_on_error("inputs");

    const model_case cases[] = {
        {"gpt2_124m_bf16", true, true, tok, tgt, gpt_config.vocab_size, gpt_b * gpt_t, "tokens"},
        {"resnet50_amp", false, true, img, lbl, resnet_config.num_classes, img_b, "images"},
        {"gpt2_124m_f32", true, false, tok, tgt, gpt_config.vocab_size, gpt_b * gpt_t, "tokens"},
        {"resnet50_f32", false, false, img, lbl, resnet_config.num_classes, img_b, "images"},
    };
    bool all_ok = true, any = false;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || !strcmp(only, cases[i].name)) {
            any = true;
            all_ok &= bench_case(&cases[i], warmup, steps, runs);
        }
    ts_release(tok);
    ts_release(tgt);
    ts_release(img);
    ts_release(lbl);
    if (!any) {
        fprintf(stderr,
                "bench_gpu_models: BENCH_GPU_ONLY=%s is none of gpt2_124m_bf16, "
                "resnet50_amp, gpt2_124m_f32, resnet50_f32\n",
                only);
        return 2;
    }
    if (!all_ok)
        fprintf(stderr, "bench_gpu_models: a line failed (its \"failed\" line says why)\n");
    return all_ok ? 0 : 1;
}
