/* test_graph_capture.c — captured steps on cpu, sim and cuda:0 (include/tessera/graph.h): a
 * training step captured once and replayed equals the eager step bit for bit over 100 steps (an MLP
 * with SGD momentum, and a small CNN with max pooling); what a capture cannot hold is refused with
 * an error naming the op and leaves the capture broken (a host read, a nested capture, a first
 * momentum step; test_graph_capture_train.c has the rest); the graph keeps its memory from other
 * work while it lives and gives it all back when freed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/capture.h"  /* tsi_capture_pool_reused */
#include "core/internal.h" /* tsi_kview: where a tensor's data lies */
#include "lenet_model.h"
#include "same_bits.h"
#include "ts_test.h"

enum { STEPS = 100, WARMUP = 3, BATCH = 16, IN = 20, HIDDEN = 32, CLASSES = 4 };

typedef struct mlp {
    ts_module base;
    ts_module *fc1, *fc2;
    bool conv; /* the CNN on [B, 1, 4, 5]: conv -> relu -> max pool -> flatten -> fc2 */
    ts_module *c1;
} mlp;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    mlp *m = (mlp *)self;
    if (m->conv) {
        x = ts_max_pool2d(ts_relu(ts_forward(m->c1, x)), (ts_pool2d_opts){.kernel = {2, 2}});
        return ts_forward(m->fc2, ts_flatten(x, 1, -1));
    }
    return ts_forward(m->fc2, ts_relu(ts_forward(m->fc1, x)));
}

static ts_module *model_new(bool conv, ts_device dev) {
    ts_manual_seed(7);
    mlp *m = ts_module_alloc(sizeof *m, conv ? "SmallCNN" : "MLP", mlp_forward);
    m->conv = conv;
    if (conv) {
        m->c1 = ts_module_add(&m->base, "c1",
                              ts_conv2d_new(1, 4, 3, (ts_conv2d_opts){.padding = {1, 1}}));
        m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(4 * 2 * 2, CLASSES));
    } else {
        m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(IN, HIDDEN));
        m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(HIDDEN, CLASSES));
    }
    return ts_module_to(&m->base, dev);
}

/* the batches: inputs from a fixed seed, labels from a fixed linear teacher (learnable) */
static ts_tensor *xs[STEPS], *ys[STEPS];
static void make_data(bool conv, ts_device dev) {
    ts_manual_seed(99);
    ts_tensor *teacher = ts_randn(TS_SHAPE(IN, CLASSES), (ts_opts){0});
    for (int s = 0; s < STEPS; s++) {
        ts_tensor *x = ts_randn(TS_SHAPE(BATCH, IN), (ts_opts){0});
        ts_tensor *y = ts_argmax_dim(ts_matmul(x, teacher), 1, false);
        if (conv) x = ts_reshape(x, TS_SHAPE(BATCH, 1, 4, 5));
        xs[s] = ts_keep(ts_to(x, dev));
        ys[s] = ts_keep(ts_to(y, dev));
    }
}
static void free_data(void) {
    for (int s = 0; s < STEPS; s++) ts_release(xs[s]), ts_release(ys[s]);
}

/* one step on x, y: zero_grad, forward, backward, SGD step; the loss (in the caller's scope) */
static ts_tensor *step(ts_module *m, ts_optim *opt, ts_tensor *x, ts_tensor *y) {
    ts_optim_zero_grad(opt);
    ts_tensor *loss = ts_cross_entropy(ts_forward(m, x), y);
    ts_backward(loss);
    ts_optim_step(opt);
    return loss;
}

static ts_optim *sgd(ts_module *m) {
    return ts_sgd_new(m, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
}

/* every parameter of a and b holds the same bits */
static bool same_params(ts_module *a, ts_module *b) {
    ts_tensor_list pa = ts_module_named_parameters(a), pb = ts_module_named_parameters(b);
    bool same = pa.n == pb.n && pa.n > 0;
    for (int i = 0; same && i < pa.n; i++) same = same_bits(pa.tensors[i], pb.tensors[i]);
    ts_tensor_list_free(&pa);
    ts_tensor_list_free(&pb);
    return same;
}

/* whether a second eager run gives the losses of the first bit for bit */
static bool eager_reproducible(bool conv, ts_device dev, const double *eager) {
    ts_scope_begin();
    ts_module *m = model_new(conv, dev);
    ts_optim *o = sgd(m);
    bool same = true;
    for (int s = 0; s < STEPS && same; s++) {
        ts_scope_begin();
        const double l = ts_item(step(m, o, xs[s], ys[s]));
        same = memcmp(&l, &eager[s], sizeof l) == 0;
        ts_scope_end();
    }
    ts_optim_free(o);
    ts_module_free(m);
    ts_scope_end();
    return same;
}

/* 100 steps eagerly, then WARMUP eager steps + one capture + replays; losses and parameters equal
 */
static void check_replay_equals_eager(bool conv, ts_device dev) {
    ts_scope_begin();
    make_data(conv, dev);
    double eager[STEPS], replayed[STEPS];
    ts_module *m1 = model_new(conv, dev);
    ts_optim *o1 = sgd(m1);
    for (int s = 0; s < STEPS; s++) {
        ts_scope_begin();
        eager[s] = ts_item(step(m1, o1, xs[s], ys[s]));
        ts_scope_end();
    }

    ts_module *m2 = model_new(conv, dev);
    ts_optim *o2 = sgd(m2);
    for (int s = 0; s < WARMUP; s++) {
        ts_scope_begin();
        replayed[s] = ts_item(step(m2, o2, xs[s], ys[s]));
        ts_scope_end();
    }
    ts_tensor *sx = ts_keep(ts_empty_like(xs[0])), *sy = ts_keep(ts_empty_like(ys[0]));
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    CHECK(g != NULL && ts_graph_is_capturing());
    ts_scope_begin();
    ts_tensor *loss = ts_keep(step(m2, o2, sx, sy)); /* a static output: kept past the scope */
    ts_scope_end();
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    CHECK(!ts_graph_is_capturing());
    CHECK(ts_graph_kernel_count(g) > 10);
    for (int s = WARMUP; s < STEPS; s++) {
        ts_copy_(sx, xs[s]);
        ts_copy_(sy, ys[s]);
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        replayed[s] = ts_item(loss);
    }
    int equal = 0;
    for (int s = 0; s < STEPS; s++) equal += memcmp(&eager[s], &replayed[s], sizeof(double)) == 0;
    printf("  %-9s on %-6s %lld kernels a step; losses %.4f -> %.4f; %d of %d equal bit for bit\n",
           conv ? "small CNN" : "MLP", ts_device_str(dev), (long long)ts_graph_kernel_count(g),
           eager[0], eager[STEPS - 1], equal, STEPS);
    if (dev.type == TS_CUDA && conv && !eager_reproducible(conv, dev, eager)) {
        printf("  SKIP the bit-for-bit check of the small CNN on %s: two eager runs already differ "
               "(cuDNN's non-deterministic algorithms)\n",
               ts_device_str(dev));
    } else {
        CHECK_EQ(equal, STEPS);
        CHECK(same_params(m1, m2));
    }
    /* it learned: the comparison means something */
    CHECK(eager[STEPS - 1] < (conv ? 0.9 : 0.7) * eager[0]);
    ts_release(sx); /* loss went to this function's scope */
    ts_release(sy);
    ts_graph_free(g);
    ts_optim_free(o1);
    ts_optim_free(o2);
    ts_module_free(m1);
    ts_module_free(m2);
    free_data();
    ts_scope_end();
    CHECK_EQ(ts_error(), TS_OK);
}

/* a refused op breaks the capture: its error, the end reports it, replay refuses, free is clean */
typedef enum { R_ITEM, R_COPY_TO_HOST, R_NESTED, R_FRESH_MOMENTUM } refusal;

static void check_refusal(refusal r, ts_device dev, ts_status code, const char *frag) {
    ts_scope_begin();
    ts_module *m = model_new(false, dev);
    ts_optim *o = sgd(m);
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(BATCH, IN), (ts_opts){0}), dev);
    ts_tensor *y = ts_to(ts_randint(0, CLASSES, TS_SHAPE(BATCH), (ts_opts){0}), dev);
    if (r != R_FRESH_MOMENTUM) step(m, o, x, y); /* warm-up */
    CHECK_EQ(ts_error(), TS_OK);
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    CHECK(g != NULL);
    ts_tensor *loss = NULL;
    switch (r) {
    case R_ITEM:
        loss = step(m, o, x, y);
        (void)ts_item(loss);
        break;
    case R_COPY_TO_HOST: {
        float v[CLASSES * BATCH];
        ts_copy_to_host(ts_forward(m, x), v, sizeof v);
        break;
    }
    case R_NESTED:
        CHECK(ts_graph_capture_begin(dev, (ts_graph_opts){0}) == NULL);
        break;
    case R_FRESH_MOMENTUM:
        step(m, o, x, y);
        break;
    }
    ts_status got = ts_error();
    const char *msg = ts_error_message();
    bool ok = got == code && strstr(msg, frag) != NULL;
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "expected %s \"%s\", got %s \"%s\"",
                      ts_status_string(code), frag, ts_status_string(got), msg);
    ts_test_record(ok);
    printf("  refused on %s: %s\n", ts_device_str(dev), msg);
    CHECK_EQ(ts_graph_capture_end(), code); /* the end reports the error that broke it */
    ts_error_clear();
    CHECK_EQ(ts_graph_replay(g), TS_ERR_STATE); /* a broken capture never replays */
    ts_error_clear();
    ts_graph_free(g);
    /* the model still trains eagerly */
    double l = ts_item(step(m, o, x, y));
    CHECK(isfinite(l));
    CHECK_EQ(ts_error(), TS_OK);
    ts_optim_free(o);
    ts_module_free(m);
    ts_scope_end();
    ts_error_clear();
}

/* The CIFAR tutorial's CNN at batch 64 (bench_gpu's SimpleCNN), 10 steps: on cuda its convolutions
 * take cuDNN workspaces while the graph is built. Before the optimizer's table had a block of its
 * own, it was uploaded into a scratch block that a convolution's workspace had used earlier in the
 * graph, and the first replay read pointers out of a workspace (an illegal address). */
static void cifar_run(ts_device dev, bool graphed, ts_tensor **bx, ts_tensor **by, double *losses,
                      int steps) {
    ts_scope_begin();
    ts_manual_seed(5);
    ts_module *net = ts_module_to(ts_test_lenet_new(3, 0), dev); /* the SimpleCNN */
    ts_optim *o = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
    ts_tensor *sx = ts_empty_like(bx[0]); /* this function's scope holds them */
    ts_tensor *sy = ts_empty_like(by[0]);
    ts_graph *g = NULL;
    ts_tensor *captured = NULL; /* the graph's loss: ts_keep moves it to this function's scope */
    for (int s = 0; s < steps; s++) {
        ts_scope_begin();
        if (graphed && s == WARMUP) {
            g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
            captured = ts_keep(step(net, o, sx, sy));
            ts_graph_capture_end();
        }
        ts_copy_(sx, bx[s]);
        ts_copy_(sy, by[s]);
        ts_tensor *loss = captured;
        if (g)
            ts_graph_replay(g);
        else
            loss = step(net, o, sx, sy);
        losses[s] = ts_error() ? NAN : ts_item(loss);
        ts_scope_end();
    }
    ts_graph_free(g);
    ts_optim_free(o);
    ts_module_free(net);
    ts_scope_end();
}

static void check_cifar_cnn(ts_device dev) {
    enum { N = 10 };
    ts_scope_begin();
    ts_tensor *bx[N], *by[N];
    ts_manual_seed(11);
    for (int s = 0; s < N; s++) {
        bx[s] = ts_randn(TS_SHAPE(64, 3, 32, 32), (ts_opts){.device = dev});
        by[s] = ts_randint(0, 10, TS_SHAPE(64), (ts_opts){.device = dev, .dtype = TS_I64});
    }
    double eager[N], again[N], replayed[N];
    cifar_run(dev, false, bx, by, eager, N);
    cifar_run(dev, true, bx, by, replayed, N);
    CHECK_OK();
    ts_error_clear();
    int equal = 0;
    for (int s = 0; s < N; s++) equal += memcmp(&eager[s], &replayed[s], sizeof(double)) == 0;
    printf("  SimpleCNN b64 on %s: %d of %d losses equal bit for bit (%.5f, replayed %.5f)\n",
           ts_device_str(dev), equal, N, eager[N - 1], replayed[N - 1]);
    cifar_run(dev, false, bx, by, again, N);
    if (memcmp(again, eager, sizeof again) != 0) { /* cuDNN's order of addition varies */
        printf("  SKIP the bit-for-bit check: two eager runs differ; within 1e-4 instead\n");
        for (int s = 0; s < N; s++) CHECK(fabs(replayed[s] - eager[s]) <= 1e-4 * fabs(eager[s]));
    } else {
        CHECK_EQ(equal, N);
    }
    ts_scope_end(); /* the batches */
    CHECK_OK();
}

/* memory: blocks the capture allocated are not handed to other work while the graph lives, even
 * once their tensors are released; everything goes back when the graph is freed */
static void check_memory(ts_device dev) {
    ts_mem_stats before, during, after;
    ts_scope_begin();
    ts_tensor *a = ts_keep(ts_ones(TS_SHAPE(256), (ts_opts){.device = dev}));
    ts_memory_stats(dev, &before);
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_tensor *b = ts_keep(ts_mul_scalar(a, 3)); /* recorded, not run */
    void *b_data = tsi_kview(b).data;
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    CHECK_EQ(ts_graph_replay(g), TS_OK);
    ts_scope_begin();
    CHECK_EQ(ts_item(ts_sum(b)), 768.0); /* the replay computed it */
    ts_scope_end();
    ts_release(b); /* the user lets the output go: the graph keeps it */
    ts_tensor *c = ts_keep(ts_zeros(TS_SHAPE(256), (ts_opts){.device = dev}));
    CHECK(tsi_kview(c).data != b_data);
    ts_memory_stats(dev, &during);
    CHECK(during.allocated >= before.allocated + 2 * 256 * 4);
    CHECK_EQ(ts_graph_replay(g), TS_OK); /* writes the block nobody else has */
    ts_scope_begin();
    CHECK_EQ(ts_item(ts_sum(c)), 0.0);
    ts_scope_end();
    ts_graph_free(g);
    ts_release(c);
    ts_memory_stats(dev, &after);
    CHECK_EQ(after.allocated, before.allocated);
    ts_release(a);
    ts_scope_end();
}

/* values copied in from the host during the capture (ts_from_data) are the graph's: kept on the
 * device at capture, written again by each replay before the kernels that read them (here the
 * step itself overwrites them after use), untouched by later changes to the host array, and given
 * back with the graph */
static void check_host_values(ts_device dev) {
    ts_scope_begin();
    ts_mem_stats before, after;
    ts_tensor *x = ts_keep(ts_full(TS_SHAPE(4), 10, (ts_opts){.device = dev}));
    ts_memory_stats(dev, &before);
    float host[4] = {1, 2, 3, 4};
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_scope_begin();
    ts_tensor *c = ts_from_data(TS_SHAPE(4), TS_F32, host, (ts_opts){.device = dev});
    ts_tensor *y = ts_keep(ts_mul(x, c));
    ts_copy_(c, ts_zeros(TS_SHAPE(4), (ts_opts){.device = dev})); /* after its use */
    ts_scope_end();
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    host[0] = host[1] = host[2] = host[3] = -1;
    for (int r = 0; r < 2; r++) {
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        float v[4] = {0};
        ts_copy_to_host(y, v, sizeof v);
        for (int i = 0; i < 4; i++) CHECK_EQ(v[i], 10.0f * (float)(i + 1));
    }
    ts_graph_free(g);
    ts_scope_end(); /* y, which ts_keep moved to this scope */
    ts_memory_stats(dev, &after);
    CHECK_EQ(after.allocated, before.allocated);
    ts_release(x);
    CHECK_OK();
}

/* reuse within a capture: a block the capture released serves a later allocation of the same
 * capture that fits it (best fit, at most twice the request), as the eager step's caching
 * allocator would, and the replay computes the later tensor in it after the earlier one is used */
static void check_reuse(ts_device dev) {
    ts_scope_begin();
    ts_tensor *a = ts_keep(ts_ones(TS_SHAPE(256), (ts_opts){.device = dev}));
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_tensor *t1 = ts_keep(ts_mul_scalar(a, 2));
    ts_tensor *s1 = ts_keep(ts_sum(t1)); /* recorded before t1 goes */
    void *t1_data = tsi_kview(t1).data;
    ts_release(t1);
    ts_tensor *small = ts_keep(ts_mul_scalar(ts_narrow(a, 0, 0, 4), 7)); /* 16 B: not there */
    CHECK(tsi_kview(small).data != t1_data);
    ts_tensor *t2 = ts_keep(ts_mul_scalar(a, 5)); /* 1 KiB: t1's block */
    CHECK(tsi_kview(t2).data == t1_data);
    ts_tensor *t3 = ts_keep(ts_mul_scalar(a, 6)); /* t1's block is t2's now */
    CHECK(tsi_kview(t3).data != t1_data);
    CHECK_EQ(tsi_capture_pool_reused(g), (size_t)1);
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    for (int r = 0; r < 2; r++) {
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        ts_scope_begin();
        CHECK_EQ(ts_item(s1), 512.0);
        CHECK_EQ(ts_item(ts_sum(t2)), 1280.0);
        CHECK_EQ(ts_item(ts_sum(t3)), 1536.0);
        CHECK_EQ(ts_item(ts_sum(small)), 28.0);
        ts_scope_end();
    }
    ts_tensor *keep[] = {s1, small, t2, t3};
    for (int i = 0; i < 4; i++) ts_release(keep[i]);
    ts_graph_free(g);
    ts_release(a);
    ts_scope_end();
    CHECK_OK();
}

/* an op on a float32 tensor and a bf16 one (the backend's binary_widening) is recorded, not run at
 * capture time: a replay reads the bf16 operand's new values */
static void check_widening(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *x = ts_keep(ts_randn(TS_SHAPE(4, 100), o));
    ts_tensor *h = ts_keep(ts_to_dtype(ts_randn(TS_SHAPE(4, 100), o), TS_BF16));
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_tensor *y = ts_keep(ts_sub(x, h)); /* not commutative: operands kept in their places */
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    for (int r = 0; r < 2; r++) {
        ts_scope_begin();
        ts_copy_(h, ts_to_dtype(ts_randn(TS_SHAPE(4, 100), o), TS_BF16));
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        ts_tensor *want = ts_sub(x, ts_to_dtype(h, TS_F32));
        CHECK(y && ts_item(ts_max(ts_abs(ts_sub(y, want)))) == 0);
        ts_scope_end();
    }
    ts_graph_free(g);
    ts_release(x), ts_release(h), ts_release(y);
    ts_scope_end();
    CHECK_OK();
}

/* a replay changes in place what the eager step changed, so it bumps those storages' versions
 * as the eager step does: caches keyed on a tensor's version (oneDNN's reordered weights, the
 * eval path's folded convolutions) must not serve values from before the replay */
static void check_versions(ts_device dev) {
    ts_scope_begin();
    ts_tensor *p = ts_keep(ts_zeros(TS_SHAPE(8), (ts_opts){.device = dev}));
    ts_tensor *q = ts_keep(ts_ones(TS_SHAPE(8), (ts_opts){.device = dev}));
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_add_(p, q); /* in place, twice: the replay bumps once (a new version is all that counts) */
    ts_add_(p, q);
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    uint64_t vp = ts_version(p), vq = ts_version(q);
    for (int r = 1; r <= 3; r++) {
        CHECK_EQ(ts_graph_replay(g), TS_OK);
        CHECK_EQ(ts_version(p), vp + (uint64_t)r);
        CHECK_EQ(ts_version(q), vq); /* only read */
    }
    ts_scope_begin();
    CHECK_EQ(ts_item(ts_sum(p)), 3 * 2 * 8.0);
    ts_scope_end();
    ts_graph_free(g);
    ts_release(p), ts_release(q);
    ts_scope_end();
    CHECK_OK();
}

/* a pending error: no capture begins (the sticky error model), nothing captures afterwards */
static void check_begin_with_error(ts_device dev) {
    tsi_error_set(TS_ERR_ARG, "an earlier mistake");
    CHECK(ts_graph_capture_begin(dev, (ts_graph_opts){0}) == NULL);
    CHECK(!ts_graph_is_capturing());
    CHECK_ERR_HAS(TS_ERR_ARG, "an earlier mistake"); /* the first error stays */
}

/* while capturing on cpu, a tensor made on sim:0 is ordinary memory (allocated and given back
 * as usual, not the graph's); the capture goes on */
static void check_other_device(void) {
    ts_scope_begin();
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    ts_graph *g = ts_graph_capture_begin(ts_cpu(), (ts_graph_opts){0});
    ts_tensor *s = ts_keep(ts_ones(TS_SHAPE(64), (ts_opts){.device = ts_sim(0)}));
    CHECK(s != NULL);
    ts_scope_begin();
    CHECK_EQ(ts_item(ts_sum(s)), 64.0); /* sim:0 is not captured: it runs and reads now */
    ts_scope_end();
    ts_release(s);
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.allocated, before.allocated);
    ts_graph_free(g);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    printf("replayed training equals eager training:\n");
    for (int d = 0; d < nd; d++) {
        check_replay_equals_eager(false, devs[d]);
        check_replay_equals_eager(true, devs[d]);
    }
    printf("refusals:\n");
    for (int d = 0; d < nd; d++) {
        check_refusal(R_ITEM, devs[d], TS_ERR_STATE, "item: a host read while capturing");
        check_refusal(R_COPY_TO_HOST, devs[d], TS_ERR_STATE, "copy_to_host: a host read");
        check_refusal(R_NESTED, devs[d], TS_ERR_STATE, "already capturing");
        check_refusal(R_FRESH_MOMENTUM, devs[d], TS_ERR_STATE, "run warm-up steps eagerly");
    }
    printf("memory:\n");
    for (int d = 0; d < nd; d++) {
        check_memory(devs[d]);
        check_reuse(devs[d]);
        check_host_values(devs[d]);
        check_begin_with_error(devs[d]);
        check_versions(devs[d]);
        check_widening(devs[d]);
    }
    printf("the CIFAR tutorial's CNN at batch 64:\n");
    for (int d = 0; d < nd; d++) check_cifar_cnn(devs[d]);
    if (nd > 1) check_other_device();
    return ts_test_finish();
}
