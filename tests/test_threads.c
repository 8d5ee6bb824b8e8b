/* test_threads.c — Tessera from several threads at once (the contract in docs/ARCHITECTURE.md,
 * "Threads"). Four threads each train a model of their own (own generator stream, scopes, errors,
 * grad mode, autocast, default device, a loader with a worker thread, cpu and sim devices sharing
 * the allocators) and must end exactly where the same training run alone ends. Then four threads
 * share one read-only model for inference under no_grad and must get exactly the single-threaded
 * outputs. Runs under ThreadSanitizer in CI (make tsan). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state_snapshot.h"
#include "ts_test.h"

#define NTHREADS 4
#define SAMPLES  40
#define BATCH    8
#define EPOCHS   2
#define MAX_LOSS (EPOCHS * (SAMPLES / BATCH))

/* ------------------------------------------------------------------ independent training */
typedef struct run {
    int i;
    ts_snapshot params;
    double losses[MAX_LOSS];
    int n_losses;
    double eval_sum;
} run;

static ts_device device_of(int i) { return i % 2 ? ts_sim(i / 2) : ts_cpu(); }

/* An error of this thread's own: a device mismatch, seen here and nowhere else. */
static void own_error(ts_device dev) {
    if (dev.type == TS_CPU) return;
    ts_scope_begin();
    ts_tensor *a = ts_ones(TS_SHAPE(2), (ts_opts){.device = ts_cpu()});
    ts_tensor *b = ts_ones(TS_SHAPE(2), (ts_opts){.device = dev});
    CHECK(ts_add(a, b) == NULL);
    CHECK(ts_error() == TS_ERR_DEVICE && strstr(ts_error_message(), ts_device_str(dev)));
    ts_error_clear();
    ts_scope_end();
}

static void train(run *r) {
    const int i = r->i;
    const ts_device dev = device_of(i);
    const bool autocast = i == 3; /* bf16 on sim:1 in this thread only */
    ts_rng_thread_begin(100 + (uint64_t)i);
    ts_device_push(dev);
    CHECK(ts_device_equal(ts_default_device(), dev));
    own_error(dev);

    ts_module *layers[] = {ts_linear_new(6, 16), ts_relu_new(), ts_dropout_new(0.25),
                           ts_linear_new(16, 3)};
    ts_module *m = ts_sequential_new(4, layers);
    ts_optim *o = ts_adam_new(m, (ts_adam_opts){.lr = 1e-2});
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(SAMPLES, 6), (ts_opts){.device = ts_cpu()});
    ts_tensor *y = ts_randint(0, 3, TS_SHAPE(SAMPLES), (ts_opts){.device = ts_cpu()});
    ts_dataset *d = ts_tensor_dataset_new(x, y);
    ts_scope_end();
    ts_loader *l = ts_loader_new(d, (ts_loader_opts){.batch_size = BATCH,
                                                     .shuffle = true,
                                                     .workers = i < 2 ? 1 : 0,
                                                     .seed = 7 + (uint64_t)i});
    CHECK_OK();
    for (int e = 0; e < EPOCHS; e++) {
        ts_batch b;
        while (ts_loader_next(l, &b)) {
            ts_scope_begin();
            CHECK(ts_grad_enabled());
            if (autocast) ts_autocast_begin(TS_SIM, TS_BF16);
            CHECK(ts_autocast_is_enabled(dev.type) == autocast);
            ts_optim_zero_grad(o);
            ts_tensor *out = ts_forward(m, ts_to(b.x, dev));
            CHECK(ts_dtype_of(out) == (autocast ? TS_BF16 : TS_F32));
            ts_tensor *loss = ts_cross_entropy(out, ts_to(b.y, dev));
            if (autocast) ts_autocast_end();
            ts_backward(loss);
            ts_optim_step(o);
            if (r->n_losses < MAX_LOSS) r->losses[r->n_losses++] = ts_item(loss);
            ts_scope_end();
            CHECK_OK();
        }
    }
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_scope_begin();
    CHECK(!ts_grad_enabled());
    r->eval_sum = ts_item(ts_sum(ts_forward(m, ts_to(x, dev))));
    ts_scope_end();
    ts_no_grad_end();
    r->params = ts_snapshot_take(m, o, NULL);
    ts_loader_free(l);
    ts_dataset_free(d);
    ts_optim_free(o);
    ts_module_free(m);
    CHECK_OK();
    ts_device_pop();
    ts_rng_thread_end();
}

static void *train_thread(void *p) {
    train(p);
    return NULL;
}

static void independent_training(void) {
    run alone[NTHREADS] = {0}, together[NTHREADS] = {0};
    for (int i = 0; i < NTHREADS; i++) {
        alone[i].i = together[i].i = i;
        train(&alone[i]);
    }
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, train_thread, &together[i]) == 0);
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++) {
        CHECK_EQ(together[i].n_losses, MAX_LOSS);
        CHECK_EQ(alone[i].n_losses, MAX_LOSS);
        bool same = memcmp(alone[i].losses, together[i].losses, sizeof alone[i].losses) == 0;
        if (!same) printf("thread %d: losses differ from the same run alone\n", i);
        CHECK(same);
        CHECK(alone[i].eval_sum == together[i].eval_sum);
        ts_snapshot_check("parameters and optimizer state", &together[i].params, &alone[i].params);
        ts_snapshot_free(&alone[i].params);
        ts_snapshot_free(&together[i].params);
    }
    printf("%d threads trained their own models at once (loss %.6f -> %.6f on thread 0)\n",
           NTHREADS, alone[0].losses[0], alone[0].losses[MAX_LOSS - 1]);
}

/* ------------------------------------------------------------------ shared inference */
#define N_INPUTS 6
#define ROUNDS   3
#define OUT_N    (2 * 5)

static ts_module *shared;
static ts_tensor *inputs[N_INPUTS];
static float expected[N_INPUTS][OUT_N];

static ts_module *cnn_new(void) {
    ts_manual_seed(31);
    ts_module *layers[] = {ts_conv2d_new(1, 4, 3, (ts_conv2d_opts){0}),
                           ts_batch_norm2d_new(4, (ts_norm_opts){0}),
                           ts_relu_new(),
                           ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}}),
                           ts_flatten_new(1, -1),
                           ts_dropout_new(0.5),
                           ts_linear_new(4 * 3 * 3, 5)};
    ts_module *m = ts_sequential_new(7, layers);
    /* running statistics that are not the defaults, as after training */
    ts_scope_begin();
    ts_tensor *mean = ts_module_get(m, "1.running_mean"), *var = ts_module_get(m, "1.running_var");
    ts_copy_(mean, ts_randn(TS_SHAPE(4), (ts_opts){0}));
    ts_copy_(var, ts_add_scalar(ts_rand(TS_SHAPE(4), (ts_opts){0}), 0.5));
    ts_scope_end();
    ts_module_eval(m);
    return m;
}

static bool infer(int k, float *out) {
    ts_scope_begin();
    ts_tensor *y = ts_forward(shared, inputs[k]);
    bool ok = y && ts_copy_to_host(y, out, OUT_N * sizeof(float)) == TS_OK;
    ts_scope_end();
    return ok;
}

static void *infer_thread(void *p) {
    int id = (int)(intptr_t)p, mismatches = 0;
    ts_no_grad_begin();
    for (int round = 0; round < ROUNDS; round++)
        for (int j = 0; j < N_INPUTS; j++) {
            int k = (j + id) % N_INPUTS; /* each thread in its own order */
            float out[OUT_N];
            CHECK(infer(k, out));
            if (memcmp(out, expected[k], sizeof out) != 0) mismatches++;
        }
    ts_no_grad_end();
    CHECK_EQ(mismatches, 0);
    CHECK_OK();
    return NULL;
}

static void shared_inference(void) {
    shared = cnn_new();
    ts_manual_seed(32);
    for (int k = 0; k < N_INPUTS; k++)
        inputs[k] = ts_randn(TS_SHAPE(2, 1, 8, 8), (ts_opts){.device = ts_cpu()});
    ts_snapshot before = ts_snapshot_take(shared, NULL, NULL);
    ts_no_grad_begin();
    for (int k = 0; k < N_INPUTS; k++) CHECK(infer(k, expected[k]));
    ts_no_grad_end();
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, infer_thread, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    ts_snapshot after = ts_snapshot_take(shared, NULL, NULL);
    ts_snapshot_check("the shared model after inference", &after, &before);
    ts_snapshot_free(&before);
    ts_snapshot_free(&after);
    for (int k = 0; k < N_INPUTS; k++) ts_release(inputs[k]);
    ts_module_free(shared);
    printf("%d threads shared one model for inference: %d outputs each\n", NTHREADS,
           ROUNDS * N_INPUTS);
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    independent_training();
    shared_inference();
    CHECK_OK();
    return ts_test_finish();
}
