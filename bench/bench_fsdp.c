/* bench_fsdp.c — sharded data parallel's training step under mpirun (bench/run_fsdp.sh runs it
 * beside PyTorch's FSDP2 on gloo, bench_fsdp_torch.py).
 *
 * bench_fsdp speed MODEL MODE ITERS: MODEL gptmini (4 layers, d 256, 4 heads, context 256, batch
 * 8 a rank) or gpt124m (12 layers, d 768, 12 heads, context 256, batch 2 a rank), both with the
 * byte vocabulary (256); MODE fsdp (stage 3, each block a unit), fsdp1, fsdp2 (stages 1, 2), ddp,
 * or plain (no wrapper: each rank steps alone on its batch). AdamW. Rank 0 prints "MODEL MODE key
 * value" lines: the median step (ms), its own CPU time a step (ms, medians: the process's and the
 * calling thread's; the difference is mostly the communication thread's, waiting included), every
 * rank's peak allocated bytes (the allocator's statistics) and peak resident set above the
 * process's before the model was built (MB), over the timed steps.
 *
 * bench_fsdp memory [LAYERS]: the 124M GPT (LAYERS blocks, default 12) under stage 3: each rank's
 * peak allocated memory over a step beside the formula's terms: 16 bytes a parameter / N, two
 * blocks gathered, the activations (a forward and backward of the unwrapped model that drops each
 * gradient once accumulated, on rank 0), and the terms docs/FSDP.md adds: the root unit
 * gathered and two blocks' full gradients. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_rss.h"
#include "tessera.h"

static int rank, world;

static void die_on_error(const char *what) {
    if (ts_error() == TS_OK) return;
    fprintf(stderr, "bench_fsdp: rank %d: %s: %s\n", rank, what, ts_error_message());
    exit(1);
}

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* every rank's value of x, on every rank (out[world]) */
static void gather(double x, double *out) {
    ts_scope_begin();
    ts_tensor *in = ts_full(TS_SHAPE(1), x, (ts_opts){.dtype = TS_F64});
    ts_tensor *all = ts_zeros(TS_SHAPE(world), (ts_opts){.dtype = TS_F64});
    ts_dist_all_gather(all, in, NULL);
    ts_copy_to_host(all, out, (size_t)world * sizeof *out);
    ts_scope_end();
    die_on_error("all_gather of the figures");
}

static void print_ranks(const char *prefix, const char *key, double x) {
    double v[64];
    if (world > 64) return;
    gather(x, v);
    if (rank) return;
    printf("%s %s", prefix, key);
    for (int r = 0; r < world; r++) printf(" %.2f", v[r]);
    printf("\n");
    fflush(stdout);
}

typedef struct gpt_case {
    const char *name;
    ts_gpt_config cfg;
    int64_t batch; /* sequences a rank */
} gpt_case;

static const gpt_case CASES[] = {
    {"gptmini", {.vocab_size = 256, .context = 256, .n_layer = 4, .n_head = 4, .n_embd = 256}, 8},
    {"gpt124m", {.vocab_size = 256, .context = 256, .n_layer = 12, .n_head = 12, .n_embd = 768}, 2},
};

static ts_module *wrap_fsdp(ts_module *m, int layers, int stage) {
    char names[64][16];
    const char *units[64];
    for (int i = 0; i < layers && i < 64; i++) {
        snprintf(names[i], sizeof names[i], "blocks.%d", i);
        units[i] = names[i];
    }
    return ts_fsdp_new(m, (ts_fsdp_opts){.units = units, .n_units = layers, .stage = stage});
}

static void step(ts_module *net, ts_optim *opt, ts_tensor *x, ts_tensor *y, int64_t vocab) {
    ts_scope_begin();
    ts_optim_zero_grad(opt);
    ts_tensor *logits = ts_forward(net, x);
    ts_backward(ts_cross_entropy(ts_view(logits, TS_SHAPE(-1, vocab)), ts_view(y, TS_SHAPE(-1))));
    ts_optim_step(opt);
    ts_scope_end();
}

static void batch_new(const gpt_case *c, ts_tensor **x, ts_tensor **y) {
    ts_manual_seed(100 + (uint64_t)rank);
    int64_t V = c->cfg.vocab_size, T = c->cfg.context;
    *x = ts_randint(0, V, TS_SHAPE(c->batch, T), (ts_opts){.dtype = TS_I64});
    *y = ts_randint(0, V, TS_SHAPE(c->batch, T), (ts_opts){.dtype = TS_I64});
}

static int speed(const gpt_case *c, const char *mode, int iters) {
    ts_device cpu = ts_cpu();
    const long rss0 = status_kb("VmRSS:");
    ts_tensor *x, *y;
    batch_new(c, &x, &y);
    ts_manual_seed(1); /* every rank the same model (both wrappers check) */
    ts_module *m = ts_gpt_new(c->cfg);
    const int64_t nparams = ts_module_num_parameters(m);
    ts_module *net;
    ts_optim *opt;
    const ts_adam_opts ao = {.lr = 3e-4, .weight_decay = 0.1};
    if (!strcmp(mode, "ddp")) {
        net = ts_ddp_new(m, (ts_ddp_opts){0});
        opt = ts_adamw_new(net, ao);
    } else if (!strcmp(mode, "plain")) { /* no wrapper: every rank steps alone, as loaded */
        net = m;
        opt = ts_adamw_new(net, ao);
    } else {
        int stage = !strcmp(mode, "fsdp1") ? 1 : !strcmp(mode, "fsdp2") ? 2 : 3;
        net = wrap_fsdp(m, (int)c->cfg.n_layer, stage);
        ts_tensor_list sh = ts_fsdp_parameters(net);
        opt = ts_adamw_new_params(sh.tensors, sh.n, ao);
        ts_tensor_list_free(&sh);
    }
    die_on_error("setup");
    for (int i = 0; i < 2; i++) step(net, opt, x, y, c->cfg.vocab_size);
    die_on_error("warm-up");
    ts_dist_barrier();
    ts_memory_reset_peak(cpu);
    rss_reset();
    double *t = malloc(3 * (size_t)iters * sizeof *t), *tp = t + iters, *tt = tp + iters;
    for (int i = 0; i < iters; i++) {
        ts_dist_barrier();
        double t0 = now(), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID),
               h0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        step(net, opt, x, y, c->cfg.vocab_size);
        t[i] = now() - t0;
        tp[i] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
        tt[i] = clock_s(CLOCK_THREAD_CPUTIME_ID) - h0;
    }
    die_on_error("step");
    ts_mem_stats ms = {0};
    ts_memory_stats(cpu, &ms);
    const long hwm = status_kb("VmHWM:");
    qsort(t, (size_t)iters, sizeof *t, cmp_d);
    qsort(tp, (size_t)iters, sizeof *t, cmp_d);
    qsort(tt, (size_t)iters, sizeof *t, cmp_d);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s %s", c->name, mode);
    if (rank == 0) {
        printf("%s params %.3f\n", prefix, (double)nparams / 1e6);
        printf("%s step %.3f\n", prefix, t[iters / 2] * 1e3);
        printf("%s cpu_process_ms %.3f\n", prefix, tp[iters / 2] * 1e3);
        printf("%s cpu_thread_ms %.3f\n", prefix, tt[iters / 2] * 1e3);
        fflush(stdout);
    }
    print_ranks(prefix, "peak_alloc_mb", (double)ms.peak_allocated / 1e6);
    print_ranks(prefix, "peak_rss_mb", (double)(hwm - rss0) * 1024 / 1e6);
    free(t);
    ts_optim_free(opt);
    ts_module_free(net);
    ts_release(x), ts_release(y);
    return 0;
}

/* ------------------------------------------------------------------ memory beside the formula */

/* What FSDP's hooks do with a finished gradient, without the reduction: drop it. */
static void drop_grad(ts_tensor *p, void *ctx) {
    (void)ctx;
    ts_set_grad(p, NULL);
}

/* The peak allocated bytes of a forward and backward of the unwrapped model above what was
 * allocated before, every parameter's gradient dropped as soon as backward has accumulated it
 * (a post-accumulate-grad hook, where FSDP reduces it): the activations and backward's working
 * tensors, among them a weight's gradient as it is computed (docs/FSDP.md's "activations").
 */
static double activation_bytes(const gpt_case *c, ts_tensor *x, ts_tensor *y) {
    ts_device cpu = ts_cpu();
    ts_manual_seed(1);
    ts_module *m = ts_gpt_new(c->cfg);
    ts_tensor_list p = ts_module_named_parameters(m);
    for (int i = 0; i < p.n; i++)
        ts_register_post_accumulate_grad_hook(p.tensors[i], drop_grad, NULL);
    ts_tensor_list_free(&p);
    ts_mem_stats ms = {0};
    ts_memory_stats(cpu, &ms);
    const size_t base = ms.allocated;
    ts_memory_reset_peak(cpu);
    ts_scope_begin();
    ts_tensor *logits = ts_forward(m, x);
    ts_backward(ts_cross_entropy(ts_view(logits, TS_SHAPE(-1, c->cfg.vocab_size)),
                                 ts_view(y, TS_SHAPE(-1))));
    ts_scope_end();
    ts_memory_stats(cpu, &ms);
    die_on_error("activations");
    ts_module_free(m);
    return (double)(ms.peak_allocated - base);
}

static int memory(int layers) {
    gpt_case c = CASES[1];
    c.cfg.n_layer = layers;
    ts_device cpu = ts_cpu();
    ts_tensor *x, *y;
    batch_new(&c, &x, &y);
    double act = 0;
    if (rank == 0) act = activation_bytes(&c, x, y);
    ts_manual_seed(1);
    ts_module *m = ts_gpt_new(c.cfg);
    const double P = (double)ts_module_num_parameters(m);
    ts_module *f = wrap_fsdp(m, layers, 3);
    ts_tensor_list sh = ts_fsdp_parameters(f);
    ts_optim *opt = ts_adamw_new_params(sh.tensors, sh.n, (ts_adam_opts){.lr = 3e-4});
    ts_tensor_list_free(&sh);
    ts_fsdp_stats st = {0};
    ts_fsdp_get_stats(f, &st);
    die_on_error("setup");
    step(f, opt, x, y, c.cfg.vocab_size); /* the optimizer's state exists from here */
    ts_mem_stats ms = {0};
    ts_memory_reset_peak(cpu);
    step(f, opt, x, y, c.cfg.vocab_size);
    ts_memory_stats(cpu, &ms);
    die_on_error("step");
    const double d = (double)c.cfg.n_embd;
    const double root = (double)(c.cfg.vocab_size + c.cfg.context) * d * 4 + 2 * d * 4; /* + ln_f */
    const double unit = (double)st.unit_bytes_max;
    const double sharded = 16 * P / world;
    const double issue = sharded + 2 * unit + act; /* the issue's formula */
    const double bound = issue + root + 2 * unit;  /* docs/FSDP.md: + root, 2 units' grads */
    double peaks[64] = {0}, acts[64] = {0};
    gather((double)ms.peak_allocated, peaks);
    gather(act, acts);
    if (rank == 0) {
        const double MB = 1e6;
        act = acts[0];
        printf("gpt %d layers, d %d, context %d, batch %d a rank, vocab %d: %.2fM parameters, "
               "stage 3 on %d ranks\n",
               layers, (int)d, (int)c.cfg.context, (int)c.batch, (int)c.cfg.vocab_size, P / 1e6,
               world);
        printf("  16 P / N (params + grads + Adam's 2 moments, sharded) %10.1f MB\n", sharded / MB);
        printf("  2 units gathered (2 x %.1f MB)                        %10.1f MB\n", unit / MB,
               2 * unit / MB);
        printf("  activations (rank 0, unwrapped, gradients dropped)    %10.1f MB\n", act / MB);
        printf("  = the issue's formula                                 %10.1f MB\n", issue / MB);
        printf("  + root unit gathered, 2 units' full gradients (docs/FSDP.md) %.1f MB: "
               "%.1f MB\n",
               (root + 2 * unit) / MB, bound / MB);
        printf("  DDP for comparison: 16 P + activations                %10.1f MB\n",
               (16 * P + act) / MB);
        for (int r = 0; r < world; r++)
            printf("  rank %d: peak allocated %.1f MB (%.3f of the issue's formula, %.3f of the "
                   "bound)\n",
                   r, peaks[r] / MB, peaks[r] / issue, peaks[r] / bound);
        fflush(stdout);
    }
    ts_optim_free(opt);
    ts_module_free(f);
    ts_release(x), ts_release(y);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "speed") && strcmp(argv[1], "memory")) ||
        (!strcmp(argv[1], "speed") && argc < 5)) {
        fprintf(stderr, "usage: bench_fsdp speed gptmini|gpt124m fsdp|fsdp1|fsdp2|ddp|plain ITERS\n"
                        "       bench_fsdp memory [LAYERS]\n");
        return 2;
    }
    if (ts_dist_init((ts_dist_opts){0})) {
        fprintf(stderr, "bench_fsdp: %s\n", ts_error_message());
        return 1;
    }
    rank = ts_dist_rank();
    world = ts_dist_world_size();
    int rc = 0;
    if (!strcmp(argv[1], "memory")) {
        rc = memory(argc > 2 ? atoi(argv[2]) : 12);
    } else {
        const gpt_case *c = !strcmp(argv[2], "gpt124m") ? &CASES[1] : &CASES[0];
        rc = speed(c, argv[3], atoi(argv[4]) > 0 ? atoi(argv[4]) : 5);
    }
    ts_dist_finalize();
    return rc;
}
