/* bench_capture.c — issue 30: a captured-and-replayed step against the eager step on the cpu, where
 * per-op work shows: the seed's linear regression (X 100x10, W 10x1, mean squared error, SGD),
 * SimpleNN 784-128-10 at batch 64 (cross-entropy, SGD momentum 0.9), and batch-1 inference of
 * LeNet-5 (1x28x28) and of the GPT-mini (bench_xformer's config, eval mode) on 16 and 256 tokens.
 * Each case builds the model twice from one seed: one copy steps eagerly, the other takes
 * WARMUP_STEPS eager steps, is captured once (docs/CAPTURE.md: static inputs refilled with ts_copy_
 * before each replay, the loss or the output in a static tensor) and replayed. Untimed, the
 * replayed outputs must equal the eager ones bit for bit over CHECK_STEPS batches ("# check"
 * lines; exit 1 otherwise). Timed: the median of single steps after a warm-up, the replay's
 * including its input copies. Prints "name eager_ms replay_ms kernels threads" lines, or
 * "name eager_ms error STATUS: message" when the capture fails; bench/run_capture.sh sets them
 * beside bench_capture_torch.py. Usage: bench_capture [quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_models.h"
#include "tessera.h"

enum { WARMUP_STEPS = 3, CHECK_STEPS = 8, MIN_ITERS = 21, MAX_ITERS = 20000 };
static const uint64_t MODEL_SEED = 1, DATA_SEED = 2;
static double budget_s = 0.3; /* timed seconds per measurement; "quick" takes less */

static double now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die_on_error(const char *what) {
    if (ts_error() == TS_OK) return;
    fprintf(stderr, "bench_capture: %s: %s\n", what, ts_error_message());
    exit(1);
}

/* ---------------------------------------------------------------- the cases */
/* one copy of a case's model: a module or (linear regression) a bare weight, and its optimizer */
typedef struct replica {
    ts_module *net;
    ts_tensor *w;
    ts_optim *opt; /* NULL: inference */
} replica;

typedef struct bench_case {
    const char *name;
    int64_t tokens; /* the GPT's sequence length */
    void (*build)(replica *r);
    /* the loss (training) or the output (inference) of r on batch x (and targets y) */
    ts_tensor *(*forward)(replica *r, ts_tensor *x, ts_tensor *y);
    void (*batch)(const struct bench_case *c, ts_tensor **x, ts_tensor **y);
} bench_case;

static void linreg_build(replica *r) {
    r->w = ts_rand(TS_SHAPE(10, 1), (ts_opts){.requires_grad = true});
    r->opt = ts_sgd_new_params(&r->w, 1, (ts_sgd_opts){.lr = 0.01});
}
static ts_tensor *linreg_forward(replica *r, ts_tensor *x, ts_tensor *y) {
    return ts_mean(ts_pow_scalar(ts_sub(ts_mm(x, r->w), y), 2));
}
static void linreg_batch(const bench_case *c, ts_tensor **x, ts_tensor **y) {
    *x = ts_rand(TS_SHAPE(100, 10), (ts_opts){0});
    *y = ts_rand(TS_SHAPE(100, 1), (ts_opts){0});
}

static void simplenn_build(replica *r) {
    r->net = mlp_new((int64_t[]){784, 128, 10}, 3);
    r->opt = ts_sgd_new(r->net, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
}
static ts_tensor *classify_loss(replica *r, ts_tensor *x, ts_tensor *y) {
    return ts_cross_entropy(ts_forward(r->net, x), y);
}
static void simplenn_batch(const bench_case *c, ts_tensor **x, ts_tensor **y) {
    *x = ts_randn(TS_SHAPE(64, 784), (ts_opts){0});
    *y = ts_randint(0, 10, TS_SHAPE(64), (ts_opts){0});
}

/* LeNet-5 on 1x28x28 (tools/tessera/models.c's): conv 5x5 padding 2, pool, conv 5x5, pool, 3 fc */
static void lenet_build(replica *r) {
    simple_cnn *m = ts_module_alloc(sizeof *m, "LeNet5", simple_cnn_forward);
    ts_pool2d_opts pool = {.kernel = {2, 2}, .stride = {2, 2}};
    m->conv1 = ts_module_add(&m->base, "conv1",
                             ts_conv2d_new(1, 6, 5, (ts_conv2d_opts){.padding = {2, 2}}));
    m->pool = ts_module_add(&m->base, "pool", ts_max_pool2d_new(pool));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(400, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, 10));
    r->net = &m->base;
    ts_module_eval(r->net);
}
static ts_tensor *infer(replica *r, ts_tensor *x, ts_tensor *y) { return ts_forward(r->net, x); }
static void lenet_batch(const bench_case *c, ts_tensor **x, ts_tensor **y) {
    *x = ts_randn(TS_SHAPE(1, 1, 28, 28), (ts_opts){0});
    *y = NULL;
}

/* bench_xformer.c's GPT-mini: vocab 256, context 256, 4 layers, 4 heads, d 256, no dropout */
static void gpt_build(replica *r) {
    r->net = ts_gpt_new((ts_gpt_config){
        .vocab_size = 256, .context = 256, .n_layer = 4, .n_head = 4, .n_embd = 256});
    ts_module_eval(r->net);
}
static void gpt_batch(const bench_case *c, ts_tensor **x, ts_tensor **y) {
    *x = ts_randint(0, 256, TS_SHAPE(1, c->tokens), (ts_opts){.dtype = TS_I64});
    *y = NULL;
}

static const bench_case CASES[] = {
    {"linreg", 0, linreg_build, linreg_forward, linreg_batch},
    {"simplenn", 0, simplenn_build, classify_loss, simplenn_batch},
    {"lenet_b1", 0, lenet_build, infer, lenet_batch},
    {"gpt_b1_t16", 16, gpt_build, infer, gpt_batch},
    {"gpt_b1_t256", 256, gpt_build, infer, gpt_batch},
};

static void replica_free(replica *r) {
    ts_optim_free(r->opt);
    ts_module_free(r->net);
    ts_release(r->w);
}

/* One step, its tensors in the caller's scope: training (zero_grad, loss, backward, optimizer
 * step) -> the loss; inference (no autograd) -> the output. */
static ts_tensor *run_step(const bench_case *c, replica *r, ts_tensor *x, ts_tensor *y) {
    if (!r->opt) {
        ts_no_grad_begin();
        ts_tensor *out = c->forward(r, x, y);
        ts_no_grad_end();
        return out;
    }
    ts_optim_zero_grad(r->opt);
    ts_tensor *loss = c->forward(r, x, y);
    ts_backward(loss);
    ts_optim_step(r->opt);
    return loss;
}

/* ---------------------------------------------------------------- capture */
typedef struct captured {
    ts_graph *g;            /* NULL: the capture failed, error says why */
    ts_tensor *x, *y, *out; /* static inputs and output */
    char error[512];        /* "STATUS: message" */
    int64_t kernels;
    size_t eager_peak, graph_bytes; /* an eager step's peak above what it starts from; the
                                       memory the capture left allocated (the graph's) */
} captured;

static bool capture_step(const bench_case *c, replica *r, captured *k, ts_tensor *x0,
                         ts_tensor *y0) {
    k->x = ts_empty_like(x0);
    k->y = y0 ? ts_empty_like(y0) : NULL;
    ts_release(ts_copy_(k->x, x0));
    if (y0) ts_release(ts_copy_(k->y, y0));
    ts_mem_stats m0, m1;
    ts_memory_stats(ts_cpu(), &m1);
    k->g = ts_graph_capture_begin(ts_cpu(), (ts_graph_opts){0});
    if (k->g) {
        ts_scope_begin();
        k->out = ts_keep(run_step(c, r, k->x, k->y));
        ts_scope_end();
    }
    ts_status st = k->g ? ts_graph_capture_end() : ts_error();
    if (st == TS_OK) {
        k->kernels = ts_graph_kernel_count(k->g);
        ts_memory_stats(ts_cpu(), &m0);
        k->graph_bytes = m0.allocated - m1.allocated;
        return true;
    }
    snprintf(k->error, sizeof k->error, "%s: %s", ts_status_string(st), ts_error_message());
    ts_error_clear();
    ts_graph_free(k->g);
    k->g = NULL;
    return false;
}

static void captured_free(captured *k) {
    ts_graph_free(k->g);
    ts_release(k->x);
    ts_release(k->y);
    ts_release(k->out);
}

static void replay_on(captured *k, ts_tensor *x, ts_tensor *y) {
    ts_release(ts_copy_(k->x, x));
    if (y) ts_release(ts_copy_(k->y, y));
    ts_graph_replay(k->g);
}

/* ---------------------------------------------------------------- check */
typedef struct host_values {
    float *v;
    int64_t n;
} host_values;

static host_values to_host(ts_tensor *t) {
    host_values h = {NULL, t ? ts_numel(t) : 0};
    h.v = calloc((size_t)(h.n > 0 ? h.n : 1), sizeof(float));
    if (!h.v) {
        fprintf(stderr, "bench_capture: out of host memory\n");
        exit(1);
    }
    if (t) ts_copy_to_host(t, h.v, (size_t)h.n * sizeof(float));
    return h;
}

static double max_abs_diff(host_values a, host_values b) {
    if (a.n != b.n) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < a.n; i++) m = fmax(m, fabs((double)a.v[i] - (double)b.v[i]));
    return m;
}

/* eager step s on e, its output on the host */
static host_values eager_values(const bench_case *c, replica *e, ts_tensor *x, ts_tensor *y) {
    ts_scope_begin();
    host_values h = to_host(run_step(c, e, x, y));
    ts_scope_end();
    return h;
}

/* Steps 0..CHECK_STEPS-1 over the batches: eagerly on e; on r the first WARMUP_STEPS eagerly, then
 * one capture (k) and replays. Prints the check line; returns whether every output is equal bit
 * for bit (true too when the capture failed: there is no replay to check). */
static bool capture_and_check(const bench_case *c, replica *e, replica *r, captured *k,
                              ts_tensor **xs, ts_tensor **ys) {
    int equal = 0;
    double worst = 0;
    bool captured_ok = true;
    for (int s = 0; s < CHECK_STEPS && captured_ok; s++) {
        ts_mem_stats m0, m1;
        ts_memory_stats(ts_cpu(), &m0);
        ts_memory_reset_peak(ts_cpu());
        host_values want = eager_values(c, e, xs[s], ys[s]), got;
        ts_memory_stats(ts_cpu(), &m1);
        if (s == WARMUP_STEPS) k->eager_peak = m1.peak_allocated - m0.allocated;
        if (s < WARMUP_STEPS) {
            got = eager_values(c, r, xs[s], ys[s]);
        } else {
            if (s == WARMUP_STEPS) captured_ok = capture_step(c, r, k, xs[s], ys[s]);
            if (captured_ok) replay_on(k, xs[s], ys[s]);
            got = to_host(k->out);
        }
        die_on_error(c->name);
        bool same = want.n == got.n && !memcmp(want.v, got.v, (size_t)want.n * sizeof(float));
        equal += same;
        worst = fmax(worst, max_abs_diff(want, got));
        free(want.v), free(got.v);
    }
    if (!captured_ok) {
        printf("# check %s: not captured: %s\n", c->name, k->error);
        return true;
    }
    printf("# check %s: replay vs eager: %d of %d steps' %s equal bit for bit (max |diff| %g), "
           "%lld kernels a step; the graph holds %.1f KiB, an eager step peaks %.1f KiB above "
           "its start\n",
           c->name, equal, CHECK_STEPS, ts_numel(k->out) == 1 ? "losses" : "outputs", worst,
           (long long)k->kernels, k->graph_bytes / 1024.0, k->eager_peak / 1024.0);
    return equal == CHECK_STEPS;
}

/* ---------------------------------------------------------------- timing */
typedef struct timed {
    const bench_case *c;
    replica *r;
    captured *k;
    ts_tensor **xs, **ys;
    int next; /* the batch of the next step: they take turns */
} timed;

static void eager_once(timed *t) {
    int b = t->next++ % CHECK_STEPS;
    ts_scope_begin();
    run_step(t->c, t->r, t->xs[b], t->ys[b]);
    ts_scope_end();
}
static void replay_once(timed *t) {
    int b = t->next++ % CHECK_STEPS;
    replay_on(t->k, t->xs[b], t->ys[b]);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ms of one step: the median of single steps after a warm-up of about a tenth of the budget */
static double median_ms(void (*once)(timed *), timed *t) {
    double t0 = now_s(), warm = 0;
    int w = 0;
    while (w < 3 || warm < budget_s / 10) {
        once(t);
        w++;
        warm = now_s() - t0;
    }
    int n = (int)fmin(MAX_ITERS, fmax(MIN_ITERS, budget_s / (warm / w)));
    double *ms = malloc((size_t)n * sizeof *ms);
    if (!ms) return NAN;
    for (int i = 0; i < n; i++) {
        double s0 = now_s();
        once(t);
        ms[i] = (now_s() - s0) * 1e3;
    }
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    double med = ms[n / 2];
    free(ms);
    return med;
}

/* ---------------------------------------------------------------- one case */
static bool bench_one(const bench_case *c) {
    replica e = {0}, r = {0};
    ts_manual_seed(MODEL_SEED);
    c->build(&e);
    ts_manual_seed(MODEL_SEED);
    c->build(&r);
    ts_tensor *xs[CHECK_STEPS], *ys[CHECK_STEPS];
    ts_manual_seed(DATA_SEED);
    for (int s = 0; s < CHECK_STEPS; s++) c->batch(c, &xs[s], &ys[s]);
    die_on_error(c->name);

    captured k = {0};
    bool ok = capture_and_check(c, &e, &r, &k, xs, ys);
    timed te = {c, &e, NULL, xs, ys, 0}, tr = {c, &r, &k, xs, ys, 0};
    double eager = median_ms(eager_once, &te);
    die_on_error(c->name);
    if (k.g) {
        double replay = median_ms(replay_once, &tr);
        die_on_error(c->name);
        printf("%s %.5f %.5f %lld %d\n", c->name, eager, replay, (long long)k.kernels,
               ts_get_num_threads());
    } else {
        printf("%s %.5f error %s\n", c->name, eager, k.error);
    }
    fflush(stdout);

    captured_free(&k);
    for (int s = 0; s < CHECK_STEPS; s++) ts_release(xs[s]), ts_release(ys[s]);
    replica_free(&e);
    replica_free(&r);
    return ok;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "quick")) budget_s = 0.05;
    bool all_equal = true;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) all_equal &= bench_one(&CASES[i]);
    if (!all_equal)
        fprintf(stderr, "bench_capture: a replay's output differs from the eager one\n");
    return all_equal ? 0 : 1;
}
