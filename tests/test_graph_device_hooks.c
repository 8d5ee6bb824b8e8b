/* test_graph_device_hooks.c — the core's side of a backend that builds its own graphs (backend.h:
 * graph_build, graph_launch, graph_destroy; CUDA's are cuda_graph.cu), run in CI on sim:0 with test
 * hooks installed in its table. The hooks stand in for a CUDA graph: build keeps the body (the
 * recorded calls) without running it, as a stream capture runs nothing, and each launch runs it.
 * Checked: a capture with kernels is built once, at its end; each replay is one launch, which runs
 * the step exactly once (the replayed training equals the eager one bit for bit), with the seed and
 * the base that the generator reserves for it (the span the step draws, in blocks of 4, leaving
 * the generator where eager steps leave it); ts_graph_free destroys the graph once, before
 * the graph's memory goes back; an empty capture builds nothing; a build that fails, with or
 * without an error of its own, fails the capture, which then refuses to replay and frees cleanly.
 */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "ts_test.h"

static struct hooks {
    int builds, launches, destroys;
    void (*body)(void *);
    void *ctx;
    uint64_t seed, base; /* the last launch's */
    enum { OK, NO_GRAPH, ERROR } mode;
    size_t allocated_at_destroy; /* sim:0's bytes when the graph was destroyed */
} H;

static void *fake_build(const ts_backend *be, int index, void (*body)(void *), void *ctx) {
    (void)be, (void)index;
    H.builds++;
    if (H.mode == ERROR) { /* as cuda_graph.cu when its capture fails: its error, no graph */
        tsi_kernel_oom("graph build", 0);
        return NULL;
    }
    if (H.mode == NO_GRAPH) return NULL;
    H.body = body, H.ctx = ctx;
    return &H;
}

static bool fake_launch(const ts_backend *be, int index, void *graph, uint64_t seed,
                        uint64_t base) {
    (void)be, (void)index;
    CHECK(graph == &H);
    H.launches++;
    H.seed = seed, H.base = base;
    H.body(H.ctx);
    return true;
}

static void fake_destroy(const ts_backend *be, int index, void *graph) {
    (void)be, (void)index;
    CHECK(graph == &H);
    H.destroys++;
    ts_mem_stats m;
    ts_memory_stats(ts_sim(0), &m);
    H.allocated_at_destroy = m.allocated;
}

static void install(ts_backend *sim, bool on) {
    sim->graph_build = on ? fake_build : NULL;
    sim->graph_launch = on ? fake_launch : NULL;
    sim->graph_destroy = on ? fake_destroy : NULL;
}

/* ---------------------------------------------------------------- a training step, twice */
enum { STEPS = 12, WARMUP = 3 };

static ts_module *model(void) {
    ts_manual_seed(3);
    ts_module *layers[] = {ts_linear_new(6, 16), ts_relu_new(), ts_linear_new(16, 3)};
    return ts_module_to(ts_sequential_new(3, layers), ts_sim(0));
}

static double step(ts_module *m, ts_optim *o, ts_tensor *x, ts_tensor *y, ts_tensor **loss) {
    ts_optim_zero_grad(o);
    ts_tensor *l = ts_cross_entropy(ts_forward(m, x), y);
    ts_backward(l);
    ts_optim_step(o);
    if (loss) *loss = l;
    return ts_graph_is_capturing() ? 0 : ts_item(l);
}

/* n eager steps on the batches xs, ys: their losses */
static void eager_steps(ts_module *m, ts_optim *o, ts_tensor **xs, ts_tensor **ys, int n,
                        double *losses) {
    for (int s = 0; s < n; s++) {
        ts_scope_begin();
        losses[s] = step(m, o, xs[s], ys[s], NULL);
        ts_scope_end();
    }
}

static void check_training(void) {
    ts_scope_begin();
    const ts_device dev = ts_sim(0);
    ts_tensor *xs[STEPS], *ys[STEPS];
    ts_manual_seed(9);
    for (int s = 0; s < STEPS; s++) {
        xs[s] = ts_randn(TS_SHAPE(8, 6), (ts_opts){.device = dev});
        ys[s] = ts_randint(0, 3, TS_SHAPE(8), (ts_opts){.device = dev, .dtype = TS_I64});
    }
    double eager[STEPS], replayed[STEPS];
    ts_module *m1 = model(), *m2 = model();
    ts_optim *o1 = ts_adam_new(m1, (ts_adam_opts){.lr = 0.01});
    ts_optim *o2 = ts_adam_new(m2, (ts_adam_opts){.lr = 0.01});
    eager_steps(m1, o1, xs, ys, STEPS, eager);
    eager_steps(m2, o2, xs, ys, WARMUP, replayed);
    ts_tensor *sx = ts_keep(ts_empty_like(xs[0])), *sy = ts_keep(ts_empty_like(ys[0]));
    H = (struct hooks){0};
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_scope_begin();
    ts_tensor *loss = NULL;
    step(m2, o2, sx, sy, &loss);
    loss = ts_keep(loss);
    CHECK_EQ(H.builds, 0); /* not before the end */
    ts_scope_end();
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    CHECK_EQ(H.builds, 1);
    CHECK_EQ(H.launches, 0); /* a build runs nothing */
    for (int s = WARMUP; s < STEPS; s++) {
        ts_copy_(sx, xs[s]);
        ts_copy_(sy, ys[s]);
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        CHECK_EQ(H.launches, s - WARMUP + 1);
        replayed[s] = ts_item(loss);
    }
    int equal = 0;
    for (int s = 0; s < STEPS; s++) equal += memcmp(&eager[s], &replayed[s], sizeof(double)) == 0;
    printf("  %d launches of one build; losses %.4f -> %.4f, %d of %d equal bit for bit\n",
           H.launches, eager[0], eager[STEPS - 1], equal, STEPS);
    CHECK_EQ(equal, STEPS);
    ts_mem_stats before; /* the loss stays: ts_keep moved it to this function's scope */
    ts_memory_stats(dev, &before);
    CHECK_EQ(H.destroys, 0);
    ts_graph_free(g);
    CHECK_EQ(H.destroys, 1);
    /* destroyed while the graph still held its memory: launches in flight may use it */
    ts_mem_stats after;
    ts_memory_stats(dev, &after);
    CHECK_EQ(H.allocated_at_destroy, before.allocated);
    CHECK(after.allocated < before.allocated);
    ts_release(sx), ts_release(sy); /* kept: out of any scope; the batches are this scope's */
    ts_optim_free(o1), ts_optim_free(o2);
    ts_module_free(m1), ts_module_free(m2);
    ts_scope_end();
    CHECK_OK();
}

/* a graph's random draws: each launch is given the generator's seed and the base of the span it
 * reserves, as the eager step would (the hooks' body draws at seed 0 and its relative offsets: a
 * real graph adds these on the device, cuda_graph.cu) */
static void check_draws(void) {
    ts_scope_begin();
    ts_manual_seed(77);
    H = (struct hooks){0};
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    ts_tensor *r = ts_keep(ts_rand(TS_SHAPE(6), (ts_opts){.device = ts_sim(0)})); /* 8 counters */
    ts_tensor *d = ts_keep(ts_dropout(ts_ones_like(r), 0.5, true));               /* 8 more */
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        CHECK_EQ(H.seed, 77);
        CHECK_EQ(H.base, 16 * (uint64_t)k);
    }
    /* the generator moved on by the replays' spans, as three eager steps would move it */
    ts_tensor *after = ts_rand(TS_SHAPE(1), (ts_opts){0});
    ts_manual_seed(77);
    for (int k = 0; k < 3; k++)
        ts_rand(TS_SHAPE(6), (ts_opts){0}), ts_rand(TS_SHAPE(6), (ts_opts){0});
    CHECK_EQ(ts_item(after), ts_item(ts_rand(TS_SHAPE(1), (ts_opts){0})));
    ts_graph_free(g);
    ts_release(r), ts_release(d);
    ts_scope_end();
    CHECK_OK();
}

/* a graph with no random draws: its launches are given seed and base 0 (nothing reserved) */
static void check_no_draws(void) {
    ts_scope_begin();
    ts_tensor *a = ts_keep(ts_ones(TS_SHAPE(4), (ts_opts){.device = ts_sim(0)}));
    H = (struct hooks){.seed = 1, .base = 1};
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    ts_tensor *b = ts_keep(ts_mul_scalar(a, 3)); /* one kernel */
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    CHECK_EQ(H.builds, 1);
    CHECK_EQ(ts_graph_replay(g), TS_OK);
    CHECK_EQ(H.launches, 1);
    CHECK_EQ(H.seed, 0);
    CHECK_EQ(H.base, 0);
    CHECK_EQ(ts_item(ts_sum(b)), 12.0);
    ts_graph_free(g);
    ts_release(b), ts_release(a);
    ts_scope_end();
    CHECK_OK();
}

/* an empty capture builds nothing (and replays as nothing) */
static void check_empty(void) {
    H = (struct hooks){0};
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    CHECK_EQ(ts_graph_replay(g), TS_OK);
    CHECK_EQ(H.builds, 0);
    CHECK_EQ(H.launches, 0);
    ts_graph_free(g);
    CHECK_EQ(H.destroys, 0);
    CHECK_OK();
}

/* a build that gives no graph fails the capture: with its own error, or the core's */
static void check_failed_build(int mode, ts_status code, const char *want) {
    ts_scope_begin();
    ts_tensor *a = ts_keep(ts_ones(TS_SHAPE(4), (ts_opts){.device = ts_sim(0)}));
    H = (struct hooks){.mode = mode};
    ts_graph *g = ts_graph_capture_begin(ts_sim(0), (ts_graph_opts){0});
    ts_tensor *b = ts_keep(ts_mul_scalar(a, 3));
    CHECK_EQ(ts_graph_capture_end(), code);
    CHECK(strstr(ts_error_message(), want) != NULL);
    printf("  failed build: %s\n", ts_error_message());
    ts_error_clear();
    CHECK_EQ(ts_graph_replay(g), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "the capture of this graph failed") != NULL);
    ts_error_clear();
    ts_graph_free(g);
    CHECK_EQ(H.launches, 0);
    CHECK_EQ(H.destroys, 0);
    ts_release(b), ts_release(a);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
    ts_backend *sim = (ts_backend *)tsi_backend_for(TS_SIM); /* sim's own table, not const */
    if (!sim) return ts_test_skip("no sim backend");
    install(sim, true);
    printf("training through the hooks:\n");
    check_training();
    check_draws();
    check_no_draws();
    check_empty();
    check_failed_build(NO_GRAPH, TS_ERR_STATE, "graph_capture_end: the sim backend built no graph");
    check_failed_build(ERROR, TS_ERR_OOM, "graph build: out of host memory"); /* its own */
    install(sim, false);
    return ts_test_finish();
}
