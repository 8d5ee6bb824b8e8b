/* test_data_parallel.c — ts_data_parallel over sim:0..3 against the same model trained on one
 * device (SGD, SGD with momentum, Adam: losses within 1e-5 relative at every step), a CNN, tied
 * weights, uneven and small batches, output devices, where gradients land, eval / no_grad and the
 * state carried into the worker threads, BatchNorm's buffers, dropout's random streams per replica,
 * names and repr. Errors, memory and
 * the building blocks (broadcast, scatter, gather) are test_data_parallel_blocks.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h" /* ts_node: which node a replica's parameter hangs off */
#include "dp_util.h"
#include "parallel/parallel_internal.h"
#include "parallel/transport.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ THE equivalence */
typedef enum { OPT_SGD, OPT_MOMENTUM, OPT_ADAM } opt_kind;

static ts_optim *make_opt(ts_module *m, opt_kind k) {
    if (k == OPT_ADAM) return ts_adam_new(m, (ts_adam_opts){.lr = 1e-2});
    return ts_sgd_new(m, (ts_sgd_opts){.lr = 0.1, .momentum = k == OPT_MOMENTUM ? 0.9 : 0});
}

/* Data parallel over sim:0..3 vs the same model on sim:0 alone, same global batches. */
static void train_equivalence(opt_kind kind, int64_t batch_size, bool input_on_cpu) {
    static const char *names[] = {"SGD", "SGD+momentum", "Adam"};
    ts_manual_seed(7);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel_new(net_clone(ref, devs[0]), devs, NDEV, DEV0);
    CHECK(dp != NULL);
    CHECK(params_diff(ref, dp, false) == 0);
    ts_optim *o_ref = make_opt(ref, kind), *o_dp = make_opt(dp, kind);
    double worst = 0;
    for (int step = 0; step < 10; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(step, batch_size, &x, &y);
        ts_tensor *y0 = ts_to(y, devs[0]);
        ts_tensor *l_ref = ts_cross_entropy(ts_forward(ref, ts_to(x, devs[0])), y0);
        ts_optim_zero_grad(o_ref);
        ts_backward(l_ref);
        ts_optim_step(o_ref);
        ts_tensor *out = ts_forward(dp, input_on_cpu ? x : ts_to(x, devs[0]));
        CHECK(out && ts_device_equal(ts_device_of(out), devs[0]) && ts_size(out, 0) == batch_size);
        ts_tensor *l_dp = ts_cross_entropy(out, y0);
        ts_optim_zero_grad(o_dp);
        ts_backward(l_dp);
        ts_optim_step(o_dp);
        double a = ts_item(l_ref), b = ts_item(l_dp);
        double rel = fabs(a - b) / fabs(a);
        if (rel > worst) worst = rel;
        CHECK(rel <= 1e-5);
        if (step == 0 || step == 9)
            printf("  %s batch %lld step %d: loss %.7f (one device) %.7f (data parallel)\n",
                   names[kind], (long long)batch_size, step, a, b);
        ts_scope_end();
    }
    CHECK_OK();
    double pd = params_diff(ref, dp, false);
    printf("%s, batch %lld: worst loss difference %.2e relative, parameters within %.2e\n",
           names[kind], (long long)batch_size, worst, pd);
    CHECK(pd <= 1e-5);
    ts_optim_free(o_ref);
    ts_optim_free(o_dp);
    ts_module_free(ref);
    ts_module_free(dp);
}

/* A convolutional Sequential (built-in layers find their tensors through slots in the replica's
 * impl; the conv kernels call BLAS from several worker threads at once). */
static ts_module *cnn_new(void) {
    ts_device_push(devs[0]);
    ts_conv2d_opts pad1 = {.padding = {1, 1}};
    ts_pool2d_opts pool = {.kernel = {2, 2}};
    ts_module *layers[6];
    layers[0] = ts_conv2d_new(3, 8, 3, pad1);
    layers[1] = ts_relu_new();
    layers[2] = ts_max_pool2d_new(pool);
    layers[3] = ts_conv2d_new(8, 8, 3, (ts_conv2d_opts){0});
    layers[4] = ts_flatten_new(1, -1);
    layers[5] = ts_linear_new(8 * 2 * 2, OUT);
    ts_module *m = ts_sequential_new(6, layers);
    ts_device_pop();
    return m;
}

static void cnn_equivalence(void) {
    ts_manual_seed(8);
    ts_module *ref = cnn_new();
    ts_module *dp = ts_data_parallel_new(cnn_new(), devs, NDEV, DEV0);
    ts_tensor_list sd = ts_module_state_dict(ref);
    ts_module_load_state_dict(ts_data_parallel_module(dp), &sd, true);
    ts_tensor_list_free(&sd);
    ts_optim *o_ref = make_opt(ref, OPT_MOMENTUM), *o_dp = make_opt(dp, OPT_MOMENTUM);
    double worst = 0;
    for (int step = 0; step < 4; step++) {
        ts_scope_begin();
        ts_manual_seed(500 + (uint64_t)step);
        ts_tensor *x = ts_randn(TS_SHAPE(12, 3, 8, 8), (ts_opts){.device = ts_cpu()});
        ts_tensor *y = ts_to(ts_randint(0, OUT, TS_SHAPE(12), (ts_opts){0}), devs[0]);
        ts_tensor *a = ts_cross_entropy(ts_forward(ref, ts_to(x, devs[0])), y);
        ts_tensor *b = ts_cross_entropy(ts_forward(dp, x), y);
        ts_optim_zero_grad(o_ref);
        ts_optim_zero_grad(o_dp);
        ts_backward(a);
        ts_backward(b);
        ts_optim_step(o_ref);
        ts_optim_step(o_dp);
        double rel = fabs(ts_item(a) - ts_item(b)) / fabs(ts_item(a));
        if (rel > worst) worst = rel;
        ts_scope_end();
    }
    CHECK_OK();
    CHECK(worst <= 1e-5);
    double pd = params_diff(ref, dp, false);
    CHECK(pd <= 1e-5);
    printf("CNN (Sequential of built-in layers): worst loss difference %.2e, parameters within "
           "%.2e\n",
           worst, pd);
    ts_optim_free(o_ref);
    ts_optim_free(o_dp);
    ts_module_free(ref);
    ts_module_free(dp);
}

/* Weight tying: one tensor registered in two modules (and used through a struct field) maps to
 * one copy per replica, and both uses' gradients reach the one original. */
typedef struct tied {
    ts_module base;
    ts_module *fc;
    ts_tensor *w; /* fc's weight, registered here too */
} tied;

static ts_tensor *tied_forward(ts_module *self, ts_tensor *x) {
    tied *m = (tied *)self;
    return ts_linear(ts_tanh(ts_forward(m->fc, x)), m->w, NULL);
}

static ts_module *tied_new(void) {
    ts_device_push(devs[0]);
    ts_scope_begin();
    tied *m = ts_module_alloc(sizeof *m, "Tied", tied_forward);
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(IN, IN));
    m->w = ts_module_param(&m->base, "w", ts_module_get(m->fc, "weight"));
    ts_scope_end();
    ts_device_pop();
    return &m->base;
}

static void tied_weights(void) {
    ts_manual_seed(9);
    ts_module *ref = tied_new();
    ts_module *dp = ts_data_parallel_new(tied_new(), devs, NDEV, DEV0);
    ts_module *inner = ts_data_parallel_module(dp);
    CHECK(ts_module_get(inner, "w") == ts_module_get(inner, "fc.weight"));
    ts_tensor_list sd = ts_module_state_dict(ref);
    ts_module_load_state_dict(inner, &sd, true);
    ts_tensor_list_free(&sd);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(2, 8, &x, &y);
    ts_tensor *a = ts_forward(ref, ts_to(x, devs[0])), *b = ts_forward(dp, x);
    CHECK(max_diff(a, b) <= 1e-6);
    ts_backward(ts_sum(ts_square(a)));
    ts_backward(ts_sum(ts_square(b)));
    CHECK_OK();
    CHECK(params_diff(ref, dp, true) <= 1e-5);
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(dp);
}

/* ------------------------------------------------------------------ chunks and devices */
/* One forward + backward: outputs and gradients equal the single-device ones; gradients exist only
 * on the original (sim:0) parameters; each replica saw its torch.chunk rows on its own device. */
static void one_step(int64_t batch_size, ts_device out_dev, const int *want_rows) {
    ts_manual_seed(11);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel_new(net_clone(ref, devs[0]), devs, NDEV, out_dev);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(3, batch_size, &x, &y);
    ts_tensor *o_ref = ts_forward(ref, ts_to(x, devs[0]));
    ts_backward(ts_cross_entropy(o_ref, ts_to(y, devs[0])));
    reset_logs();
    ts_tensor *o_dp = ts_forward(dp, x);
    CHECK(o_dp && ts_device_equal(ts_device_of(o_dp), out_dev));
    CHECK(max_diff(o_ref, o_dp) <= 1e-6);
    for (int i = 0; i < NDEV; i++) {
        CHECK_EQ(atomic_load(&logs[i].calls), want_rows[i] > 0);
        CHECK_EQ(atomic_load(&logs[i].rows), want_rows[i]);
        if (want_rows[i]) {
            CHECK(atomic_load(&logs[i].default_is_input_device)); /* device pushed in the worker */
            CHECK(atomic_load(&logs[i].grad_on));
        }
    }
    ts_backward(ts_cross_entropy(o_dp, ts_to(y, out_dev)));
    CHECK_OK();
    CHECK(params_diff(ref, dp, true) <= 1e-6);
    ts_tensor_list ps = ts_module_named_parameters(dp);
    for (int i = 0; i < ps.n; i++) {
        ts_tensor *g = ts_grad(ps.tensors[i]);
        CHECK(g && ts_device_equal(ts_device_of(g), devs[0]));
    }
    ts_tensor_list_free(&ps);
    ts_scope_end();
    /* the replicas and their copies are gone: nothing is left on the other devices */
    for (int i = 1; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
    ts_module_free(ref);
    ts_module_free(dp);
}

static void chunking(void) {
    one_step(8, devs[0], (int[]){2, 2, 2, 2});
    one_step(10, devs[0], (int[]){3, 3, 3, 1}); /* not divisible */
    one_step(5, devs[0], (int[]){2, 2, 1, 0});  /* torch.chunk: 3 pieces for 4 devices */
    one_step(3, devs[0], (int[]){1, 1, 1, 0});  /* smaller than the device count */
    one_step(1, devs[0], (int[]){1, 0, 0, 0});  /* one replica: runs in the caller's thread */
    one_step(8, devs[2], (int[]){2, 2, 2, 2});  /* output on another device */
    one_step(6, ts_cpu(), (int[]){2, 2, 2, 0}); /* output on the cpu */
}

/* ------------------------------------------------------------------ eval and no_grad */
static void eval_no_grad(void) {
    ts_manual_seed(12);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel_new(net_clone(ref, devs[0]), devs, NDEV, DEV0);
    ts_module_eval(dp);
    CHECK(!dp->training && !ts_data_parallel_module(dp)->training);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(4, 12, &x, &y);
    ts_no_grad_begin();
    reset_logs();
    ts_tensor *o = ts_forward(dp, x);
    ts_no_grad_end();
    CHECK(o && !ts_requires_grad(o) && ts_grad_fn_name(o) == NULL);
    for (int i = 0; i < NDEV; i++) CHECK(atomic_load(&logs[i].calls) == 1 && !logs[i].grad_on);
    CHECK(max_diff(o, ts_forward(ref, ts_to(x, devs[0]))) <= 1e-6);
    /* no graph: the replicas' copies died with the forward */
    for (int i = 1; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
    /* autocast state reaches the workers (the op policy itself is tested with amp) */
    ts_autocast_begin(TS_SIM, TS_BF16);
    reset_logs();
    ts_forward(dp, x);
    ts_autocast_end();
    for (int i = 0; i < NDEV; i++) CHECK(atomic_load(&logs[i].autocast_on) == 1);
    reset_logs();
    ts_forward(dp, x);
    for (int i = 0; i < NDEV; i++) CHECK(atomic_load(&logs[i].autocast_on) == 0);
    ts_error_clear(); /* whatever the autocast policy makes of the bf16 forward */
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(dp);
}

/* ------------------------------------------------------------------ random ops in replicas */
/* Replica i draws from its own stream: the generator's seed at offset base + i * span, base being
 * the offset when the call starts. So a seed gives the same dropout masks run after run, whatever
 * order the worker threads reach the generator in, and each replica's mask is the one dropout on
 * its device draws from that point of the generator. */
static void replica_random_streams(void) {
    enum { ROWS = 2 * NDEV, COLS = 256 };
    ts_module *dp = ts_data_parallel_new(ts_dropout_new(0.5), devs, NDEV, DEV0);
    ts_module *plain = ts_dropout_new(0.5);
    ts_scope_begin();
    ts_tensor *x = ts_add_scalar(ts_arange(0, ROWS * COLS, 1, (ts_opts){0}), 1.0);
    x = ts_reshape(ts_to_dtype(x, TS_F32), TS_SHAPE(ROWS, COLS));
    ts_manual_seed(21);
    ts_rand(TS_SHAPE(5), (ts_opts){0}); /* the streams start wherever the generator is */
    const ts_rng_state start = ts_rng_get_state();
    ts_tensor *first = ts_forward(dp, x);
    CHECK(first != NULL);
    /* the call moved the generator past all the streams */
    CHECK_EQ(ts_rng_get_state().offset, start.offset + NDEV * TSI_RNG_REPLICA_SPAN);
    CHECK_EQ(ts_rng_get_state().seed, start.seed);
    /* the same seed, the same masks, every time */
    int same = 0;
    for (int run = 0; run < 12; run++) {
        ts_rng_set_state(start);
        same += max_diff(first, ts_forward(dp, x)) == 0.0;
    }
    CHECK_EQ(same, 12);
    /* replica i's rows are dropout on its device from its stream's start */
    for (int i = 0; i < NDEV; i++) {
        ts_rng_set_state(
            (ts_rng_state){start.seed, start.offset + (uint64_t)i * TSI_RNG_REPLICA_SPAN});
        ts_tensor *rows = ts_to(ts_narrow(x, 0, 2 * i, 2), devs[i]);
        CHECK(max_diff(ts_narrow(first, 0, 2 * i, 2), ts_forward(plain, rows)) == 0.0);
    }
    /* and the replicas' masks differ from each other */
    ts_tensor *kept = ts_ne_scalar(first, 0.0);
    CHECK(max_diff(ts_narrow(kept, 0, 0, 2), ts_narrow(kept, 0, 2, 2)) > 0.0);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(dp);
    ts_module_free(plain);
}

/* ------------------------------------------------------------------ BatchNorm */
typedef struct bn_net {
    ts_module base;
    ts_module *fc, *bn;
} bn_net;

static ts_tensor *bn_net_forward(ts_module *self, ts_tensor *x) {
    bn_net *m = (bn_net *)self;
    return ts_forward(m->bn, ts_forward(m->fc, x));
}

static ts_module *bn_net_new(void) {
    ts_device_push(devs[0]);
    bn_net *m = ts_module_alloc(sizeof *m, "BNNet", bn_net_forward);
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(IN, HIDDEN));
    m->bn = ts_module_add(&m->base, "bn", ts_batch_norm1d_new(HIDDEN, (ts_norm_opts){0}));
    ts_device_pop();
    return &m->base;
}

static void batch_norm(void) {
    ts_manual_seed(13);
    ts_module *ref = bn_net_new();
    ts_module *dp = ts_data_parallel_new(bn_net_new(), devs, NDEV, DEV0);
    ts_module *inner = ts_data_parallel_module(dp);
    ts_tensor_list sd = ts_module_state_dict(ref);
    CHECK_OK();
    ts_module_load_state_dict(inner, &sd, true);
    ts_tensor_list_free(&sd);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(6, 12, &x, &y);
    x = ts_to(x, devs[0]);
    /* training: each replica normalises its own chunk with its own statistics (PyTorch) */
    ts_tensor *o = ts_forward(dp, x);
    ts_tensor *chunks[NDEV];
    CHECK_EQ(ts_chunk(x, NDEV, 0, chunks, NDEV), NDEV);
    ts_tensor *parts[NDEV];
    for (int i = 0; i < NDEV; i++) {
        /* a fresh reference per chunk, so its running statistics are the initial ones */
        ts_module *r = bn_net_new();
        ts_tensor_list s2 = ts_module_state_dict(ref);
        ts_module_load_state_dict(r, &s2, true);
        ts_tensor_list_free(&s2);
        parts[i] = ts_forward(r, chunks[i]);
        if (i == 0) { /* replica 0 is the module itself: its running statistics are kept */
            CHECK(max_diff(ts_module_get(inner, "bn.running_mean"),
                           ts_module_get(r, "bn.running_mean")) <= 1e-6);
            CHECK(max_diff(ts_module_get(inner, "bn.running_var"),
                           ts_module_get(r, "bn.running_var")) <= 1e-6);
        }
        ts_module_free(r);
    }
    CHECK(max_diff(o, ts_cat(parts, NDEV, 0)) <= 1e-5);
    CHECK_EQ(ts_item(ts_module_get(inner, "bn.num_batches_tracked")), 1);
    CHECK(max_diff(ts_module_get(inner, "bn.running_mean"), ts_module_get(ref, "bn.running_mean")) >
          1e-3); /* it did change */
    /* eval: the running statistics are broadcast, so the result is the single-device one */
    ts_module_eval(dp);
    ts_tensor_list s3 = ts_module_state_dict(inner);
    ts_module_load_state_dict(ref, &s3, true);
    ts_tensor_list_free(&s3);
    ts_module_eval(ref);
    ts_tensor *oe = ts_forward(dp, x);
    CHECK(max_diff(oe, ts_forward(ref, x)) <= 1e-5);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(dp);
}

/* ------------------------------------------------------------------ the module itself */
static void module_surface(void) {
    ts_manual_seed(15);
    ts_module *inner = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel_new(inner, devs, NDEV, DEV0);
    CHECK(ts_data_parallel_module(dp) == inner);
    CHECK_STREQ(dp->type_name, "DataParallel");
    CHECK(ts_module_child(dp, "module") == inner);
    ts_tensor_list sd = ts_module_state_dict(dp);
    const char *want[] = {"module.scale", "module.fc1.weight", "module.fc1.bias",
                          "module.fc2.weight", "module.fc2.bias"};
    CHECK_EQ(sd.n, 5);
    for (int i = 0; i < sd.n && i < 5; i++) CHECK_STREQ(sd.names[i], want[i]);
    ts_tensor_list_free(&sd);
    CHECK_EQ(ts_module_num_parameters(dp), HIDDEN + IN * HIDDEN + HIDDEN + HIDDEN * OUT + OUT);
    char *r = ts_module_repr(dp);
    CHECK_STREQ(r, "DataParallel(\n"
                   "  (module): Net(\n"
                   "    (fc1): Linear(in_features=6, out_features=16, bias=True)\n"
                   "    (fc2): Linear(in_features=16, out_features=5, bias=True)\n"
                   "  )\n"
                   ")");
    free(r);
    ts_module_train(dp, false);
    CHECK(!inner->training);
    ts_module_train(dp, true);
    CHECK(inner->training);
    /* moving through the wrapper moves the module */
    ts_module_to(dp, ts_cpu());
    CHECK(ts_device_of(ts_module_get(dp, "module.fc1.weight")).type == TS_CPU);
    ts_module_to(dp, devs[0]);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(dp, "module.fc2.bias")), devs[0]));
    CHECK_OK();
    ts_module_free(dp);

    /* one device: the module is moved there at construction and its output is not gathered */
    ts_module *one = ts_data_parallel_new(net_new(ts_cpu(), NULL), &devs[1], 1, ts_cpu());
    CHECK(ts_device_equal(ts_device_of(ts_module_get(one, "module.scale")), devs[1]));
    ts_scope_begin();
    ts_tensor *o = ts_forward(one, ts_randn(TS_SHAPE(3, IN), (ts_opts){.device = ts_cpu()}));
    CHECK(o && ts_device_equal(ts_device_of(o), devs[1]));
    ts_scope_end();
    ts_module_free(one);

    /* no device list: every sim device (there is no GPU here) */
    ts_module *all = ts_data_parallel_new(net_new(devs[0], NULL), NULL, 0, DEV0);
    ts_scope_begin();
    reset_logs();
    CHECK(ts_forward(all, ts_randn(TS_SHAPE(8, IN), (ts_opts){.device = ts_cpu()})) != NULL);
    if (!ts_cuda_is_available())
        for (int i = 0; i < NDEV; i++) CHECK_EQ(atomic_load(&logs[i].calls), 1);
    ts_scope_end();
    ts_module_free(all);
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < NDEV) return ts_test_skip("needs TS_SIM_DEVICES=%d", NDEV);
    for (int i = 0; i < NDEV; i++) devs[i] = ts_sim(i);
    train_equivalence(OPT_SGD, 16, true);
    train_equivalence(OPT_MOMENTUM, 14, false);
    train_equivalence(OPT_ADAM, 16, true);
    cnn_equivalence();
    tied_weights();
    chunking();
    eval_no_grad();
    batch_norm();
    replica_random_streams();
    module_surface();
    return ts_test_finish();
}
