/* test_data_parallel.c — ts_data_parallel over sim:0..3 against the same model trained on one
 * device (SGD, SGD with momentum, Adam: losses within 1e-5 relative at every step), uneven and
 * small batches, output devices, where gradients land, eval / no_grad, the state carried into the
 * worker threads, errors from the placement check and from inside a replica, BatchNorm's buffers,
 * memory back to baseline after many steps, names and repr, the scatter / gather building
 * blocks, and the coalesced broadcast (one BroadcastBackward node for all replicas' parameters,
 * whose backward sums their gradients onto devices[0]). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h" /* ts_node: which node a replica's parameter hangs off */
#include "parallel/parallel_internal.h"
#include "parallel/transport.h"
#include "ts_test.h"

#define NDEV   4
#define IN     6
#define HIDDEN 16
#define OUT    5

static ts_device devs[NDEV];
/* output_device {TS_DEVICE_DEFAULT}: devices[0], like PyTorch's output_device=None */
#define DEV0 ((ts_device){TS_DEVICE_DEFAULT, 0})

/* ------------------------------------------------------------------ helpers */
/* max |a - b| over all elements (any devices and float dtypes); INFINITY when shapes differ */
static double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return INFINITY;
    ts_scope_begin();
    ts_tensor *ca = ts_to_dtype(ts_to(a, ts_cpu()), TS_F64);
    ts_tensor *cb = ts_to_dtype(ts_to(b, ts_cpu()), TS_F64);
    double d =
        ts_numel(a) ? ts_item(ts_max(ts_abs(ts_sub(ca, ts_reshape(cb, ts_shape_of(ca)))))) : 0.0;
    ts_scope_end();
    return d;
}

static ts_mem_stats stats(ts_device d) {
    ts_mem_stats s = {0};
    ts_memory_stats(d, &s);
    return s;
}

/* What each forward saw, by the device of its input (sim:0..3; slot 7 for anything else). Replicas
 * are struct copies, so this has to live outside the module to be seen by the test. */
typedef struct call_log {
    atomic_int calls, rows, default_is_input_device, grad_on, autocast_on;
    _Atomic(ts_node *) scale_fn; /* grad_fn of the replica's "scale" parameter */
} call_log;
static call_log logs[8];

static void reset_logs(void) { memset(logs, 0, sizeof logs); }

static void note_call(ts_tensor *x) {
    ts_device d = ts_device_of(x);
    call_log *l = &logs[d.type == TS_SIM && d.index < 7 ? d.index : 7];
    atomic_fetch_add(&l->calls, 1);
    atomic_store(&l->rows, (int)ts_size(x, 0));
    atomic_store(&l->default_is_input_device, ts_device_equal(ts_default_device(), d));
    atomic_store(&l->grad_on, ts_grad_enabled());
    atomic_store(&l->autocast_on, ts_autocast_is_enabled(TS_SIM));
}

/* ------------------------------------------------------------------ a user module
 * Children and a parameter reached through the struct's own pointers (what replication must
 * relocate), a destroy hook (which replicas must not run), and a way to fail on one device. */
typedef struct net {
    ts_module base;
    ts_module *fc1;
    ts_tensor *scale; /* parameter, used through this pointer */
    ts_module *fc2;
    int *destroyed;  /* shared extra */
    int fail_on_sim; /* -1: never; else a shape error inside forward on that sim device */
} net;

static ts_tensor *net_forward(ts_module *self, ts_tensor *x) {
    net *m = (net *)self;
    note_call(x);
    ts_device xd = ts_device_of(x);
    atomic_store(&logs[xd.type == TS_SIM && xd.index < 7 ? xd.index : 7].scale_fn,
                 m->scale->grad_fn);
    ts_tensor *h = ts_mul(ts_relu(ts_forward(m->fc1, x)), m->scale);
    ts_device d = ts_device_of(x);
    if (d.type == TS_SIM && d.index == m->fail_on_sim)
        h = ts_add(h, ts_zeros(TS_SHAPE(HIDDEN + 1), (ts_opts){0})); /* [n, 16] + [17] */
    return ts_forward(m->fc2, h);
}

static void net_destroy(ts_module *self) {
    net *m = (net *)self;
    if (m->destroyed) (*m->destroyed)++;
}

/* Built under a device scope: every parameter lands on `d`. */
static ts_module *net_new(ts_device d, int *destroyed) {
    ts_device_push(d);
    ts_scope_begin(); /* the temporaries of the initialisation */
    net *m = ts_module_alloc(sizeof *m, "Net", net_forward);
    m->base.destroy = net_destroy;
    m->destroyed = destroyed;
    m->fail_on_sim = -1;
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(IN, HIDDEN));
    ts_tensor *scale = ts_add_scalar(ts_rand(TS_SHAPE(HIDDEN), (ts_opts){0}), 0.5);
    m->scale = ts_module_param(&m->base, "scale", scale);
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(HIDDEN, OUT));
    ts_scope_end();
    ts_device_pop();
    return &m->base;
}

/* A second model with the same values (loaded, so nothing depends on the generator). */
static ts_module *net_clone(ts_module *src, ts_device d) {
    ts_module *m = net_new(d, NULL);
    ts_tensor_list sd = ts_module_state_dict(src);
    ts_module_load_state_dict(m, &sd, true);
    ts_tensor_list_free(&sd);
    return m;
}

static void batch(int step, int64_t n, ts_tensor **x, ts_tensor **y) {
    ts_manual_seed(1000 + (uint64_t)step);
    *x = ts_randn(TS_SHAPE(n, IN), (ts_opts){.device = ts_cpu()});
    *y = ts_randint(0, OUT, TS_SHAPE(n), (ts_opts){.device = ts_cpu()});
}

/* Every parameter of a (wrapped or not) model against the other's, by position. */
static double params_diff(ts_module *a, ts_module *b, bool grads) {
    ts_tensor_list la = ts_module_named_parameters(a), lb = ts_module_named_parameters(b);
    double worst = la.n == lb.n ? 0 : INFINITY;
    for (int i = 0; i < la.n && i < lb.n; i++) {
        ts_tensor *ta = grads ? ts_grad(la.tensors[i]) : la.tensors[i];
        ts_tensor *tb = grads ? ts_grad(lb.tensors[i]) : lb.tensors[i];
        double d = max_diff(ta, tb);
        if (d > worst) worst = d;
    }
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);
    return worst;
}

/* ------------------------------------------------------------------ THE equivalence */
typedef enum { OPT_SGD, OPT_MOMENTUM, OPT_ADAM } opt_kind;

static ts_optim *make_opt(ts_module *m, opt_kind k) {
    if (k == OPT_ADAM) return ts_adam(m, (ts_adam_opts){.lr = 1e-2});
    return ts_sgd(m, (ts_sgd_opts){.lr = 0.1, .momentum = k == OPT_MOMENTUM ? 0.9 : 0});
}

/* Data parallel over sim:0..3 vs the same model on sim:0 alone, same global batches. */
static void train_equivalence(opt_kind kind, int64_t batch_size, bool input_on_cpu) {
    static const char *names[] = {"SGD", "SGD+momentum", "Adam"};
    ts_manual_seed(7);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel(net_clone(ref, devs[0]), devs, NDEV, DEV0);
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
    ts_module *dp = ts_data_parallel(cnn_new(), devs, NDEV, DEV0);
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
    ts_module *dp = ts_data_parallel(tied_new(), devs, NDEV, DEV0);
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
    ts_module *dp = ts_data_parallel(net_clone(ref, devs[0]), devs, NDEV, out_dev);
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
    ts_module *dp = ts_data_parallel(net_clone(ref, devs[0]), devs, NDEV, DEV0);
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

/* ------------------------------------------------------------------ errors */
static void errors(void) {
    int destroyed = 0;
    /* parameters not on devices[0]: PyTorch's message, TS_ERR_DEVICE */
    ts_module *dp = ts_data_parallel(net_new(ts_cpu(), &destroyed), devs, NDEV, DEV0);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(5, 8, &x, &y);
    CHECK(ts_forward(dp, x) == NULL);
    printf("wrong device: %s\n", ts_error_message());
    CHECK(strstr(ts_error_message(),
                 "module must have its parameters and buffers on device sim:0 (device_ids[0]) "
                 "but found one of them on device: cpu") != NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    /* once moved, it runs */
    ts_module_to(dp, devs[0]);
    CHECK(ts_forward(dp, x) != NULL);
    CHECK_OK();

    /* a shape error inside the replica on sim:2 comes back with its message, prefixed */
    ((net *)ts_data_parallel_module(dp))->fail_on_sim = 2;
    ts_mem_stats before[NDEV];
    for (int i = 0; i < NDEV; i++) before[i] = stats(devs[i]);
    ts_scope_begin();
    CHECK(ts_forward(dp, x) == NULL);
    printf("worker error: %s\n", ts_error_message());
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 2 on device sim:2: add:", 48) == 0);
    CHECK(strstr(ts_error_message(), "cannot be broadcast") != NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, before[i].live_tensors);
    ((net *)ts_data_parallel_module(dp))->fail_on_sim = -1;

    /* every replica fails (wrong feature count): the first one's error is reported */
    CHECK(ts_forward(dp, ts_randn(TS_SHAPE(8, IN + 1), (ts_opts){.device = ts_cpu()})) == NULL);
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 0 on device sim:0: ", 44) == 0);
    CHECK_ERR(TS_ERR_SHAPE);
    /* a 0-dim input has no batch to scatter */
    CHECK(ts_forward(dp, ts_scalar(1, (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    CHECK_EQ(destroyed, 0); /* replicas never ran the destroy hook */
    ts_module_free(dp);
    CHECK_EQ(destroyed, 1);

    /* construction errors free the module (no leak under ASan) */
    ts_device dup[2] = {devs[0], devs[0]};
    CHECK(ts_data_parallel(net_new(devs[0], NULL), dup, 2, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_device bad[2] = {devs[0], ts_sim(40)};
    CHECK(ts_data_parallel(net_new(devs[0], NULL), bad, 2, DEV0) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_data_parallel(net_new(devs[0], NULL), NULL, 3, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_data_parallel(NULL, devs, NDEV, DEV0) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module *lin = ts_linear_new(2, 2);
    CHECK(ts_data_parallel_module(lin) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(lin);
    CHECK_EQ(stats(devs[0]).live_tensors, 0);
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
    ts_module *dp = ts_data_parallel(bn_net_new(), devs, NDEV, DEV0);
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

/* ------------------------------------------------------------------ memory */
static void no_leaks(void) {
    ts_manual_seed(14);
    ts_module *dp = ts_data_parallel(net_new(devs[0], NULL), devs, NDEV, DEV0);
    ts_optim *opt = ts_sgd(dp, (ts_sgd_opts){.lr = 0.05, .momentum = 0.9});
    /* one step first: momentum buffers and the allocator's cache are in place from then on */
    ts_mem_stats base[NDEV + 1];
    for (int step = 0; step < 25; step++) {
        ts_scope_begin();
        ts_tensor *x, *y;
        batch(step, 16, &x, &y);
        ts_optim_zero_grad(opt);
        ts_backward(ts_cross_entropy(ts_forward(dp, x), ts_to(y, devs[0])));
        ts_optim_step(opt);
        ts_scope_end();
        ts_optim_zero_grad(opt);
        if (step == 0) {
            for (int i = 0; i < NDEV; i++) base[i] = stats(devs[i]);
            base[NDEV] = stats(ts_cpu());
        }
    }
    CHECK_OK();
    for (int i = 0; i < NDEV; i++) {
        ts_mem_stats s = stats(devs[i]);
        CHECK_EQ(s.live_tensors, base[i].live_tensors);
        CHECK_EQ(s.allocated, base[i].allocated);
    }
    CHECK_EQ(stats(ts_cpu()).live_tensors, base[NDEV].live_tensors);
    printf("after 25 steps: sim:0 holds %lld tensors (%zu bytes), sim:1..3 hold %lld\n",
           (long long)stats(devs[0]).live_tensors, stats(devs[0]).allocated,
           (long long)(stats(devs[1]).live_tensors + stats(devs[2]).live_tensors +
                       stats(devs[3]).live_tensors));
    ts_optim_free(opt);
    ts_module_free(dp);
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
}

/* ------------------------------------------------------------------ out of memory */
/* Devices of 8 MiB: a batch whose activations do not fit fails in the replicas with TS_ERR_OOM,
 * and everything made on the way is released. Runs last: it re-configures the sim devices. */
static void out_of_memory(void) {
    for (int i = 0; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
    CHECK_EQ(ts_sim_configure(NDEV, 8u << 20), TS_OK);
    ts_manual_seed(16);
    ts_module *dp = ts_data_parallel(net_new(devs[0], NULL), devs, NDEV, DEV0);
    ts_mem_stats before[NDEV];
    for (int i = 0; i < NDEV; i++) before[i] = stats(devs[i]);
    ts_scope_begin();
    /* 100,000 rows per device: the input piece fits (2.4 MB), its 16 hidden features do not */
    ts_tensor *x = ts_zeros(TS_SHAPE(NDEV * 100000, IN), (ts_opts){.device = ts_cpu()});
    CHECK(ts_forward(dp, x) == NULL);
    printf("out of memory: %.110s...\n", ts_error_message());
    CHECK(strncmp(ts_error_message(), "DataParallel: in replica 0 on device sim:0: ", 44) == 0);
    CHECK(strstr(ts_error_message(), "out of memory") != NULL);
    CHECK_ERR(TS_ERR_OOM);
    ts_scope_end();
    for (int i = 0; i < NDEV; i++) {
        CHECK_EQ(stats(devs[i]).live_tensors, before[i].live_tensors);
        CHECK_EQ(stats(devs[i]).allocated, before[i].allocated);
    }
    /* a batch that fits still runs */
    ts_scope_begin();
    CHECK(ts_forward(dp, ts_zeros(TS_SHAPE(64, IN), (ts_opts){.device = ts_cpu()})) != NULL);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(dp);
    CHECK_EQ(ts_sim_configure(NDEV, 0), TS_OK);
}

/* ------------------------------------------------------------------ the module itself */
static void module_surface(void) {
    ts_manual_seed(15);
    ts_module *inner = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel(inner, devs, NDEV, DEV0);
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
    ts_module *one = ts_data_parallel(net_new(ts_cpu(), NULL), &devs[1], 1, ts_cpu());
    CHECK(ts_device_equal(ts_device_of(ts_module_get(one, "module.scale")), devs[1]));
    ts_scope_begin();
    ts_tensor *o = ts_forward(one, ts_randn(TS_SHAPE(3, IN), (ts_opts){.device = ts_cpu()}));
    CHECK(o && ts_device_equal(ts_device_of(o), devs[1]));
    ts_scope_end();
    ts_module_free(one);

    /* no device list: every sim device (there is no GPU here) */
    ts_module *all = ts_data_parallel(net_new(devs[0], NULL), NULL, 0, DEV0);
    ts_scope_begin();
    reset_logs();
    CHECK(ts_forward(all, ts_randn(TS_SHAPE(8, IN), (ts_opts){.device = ts_cpu()})) != NULL);
    if (!ts_cuda_is_available())
        for (int i = 0; i < NDEV; i++) CHECK_EQ(atomic_load(&logs[i].calls), 1);
    ts_scope_end();
    ts_module_free(all);
    CHECK_OK();
}

/* ------------------------------------------------------------------ the coalesced broadcast */
/* DataParallel's replicas: every copy of every parameter on sim:1..3 hangs off one
 * BroadcastBackward node (5 parameters in, 5 x 3 copies out), replica 0 runs on the parameters
 * themselves, no_grad records nothing, and the gradients equal the single-device ones. */
static void broadcast_node_in_dp(void) {
    ts_manual_seed(17);
    ts_module *ref = net_new(devs[0], NULL);
    ts_module *dp = ts_data_parallel(net_clone(ref, devs[0]), devs, NDEV, DEV0);
    ts_scope_begin();
    ts_tensor *x, *y;
    batch(5, 8, &x, &y);
    ts_backward(ts_cross_entropy(ts_forward(ref, ts_to(x, devs[0])), ts_to(y, devs[0])));
    reset_logs();
    ts_tensor *o = ts_forward(dp, x);
    CHECK(o != NULL);
    CHECK(atomic_load(&logs[0].scale_fn) == NULL); /* the original parameter, a leaf */
    ts_node *node = atomic_load(&logs[1].scale_fn);
    CHECK(node != NULL);
    if (node) {
        CHECK_STREQ(node->name, "BroadcastBackward");
        CHECK_EQ(node->n_in, 5);
        CHECK_EQ(node->n_out, 5 * (NDEV - 1));
    }
    for (int i = 2; i < NDEV; i++) CHECK(atomic_load(&logs[i].scale_fn) == node);
    ts_backward(ts_cross_entropy(o, ts_to(y, devs[0])));
    CHECK_OK();
    CHECK(params_diff(ref, dp, true) <= 1e-6);
    /* under no_grad the replicas get plain copies */
    reset_logs();
    ts_no_grad_begin();
    CHECK(ts_forward(dp, x) != NULL);
    ts_no_grad_end();
    for (int i = 0; i < NDEV; i++) CHECK(atomic_load(&logs[i].scale_fn) == NULL);
    ts_scope_end();
    ts_module_free(ref);
    ts_module_free(dp);
}

/* sum of the tensors, each moved to the cpu as float64: an independent reference for the sums */
static ts_tensor *cpu_sum(ts_tensor *const *ts, int n) {
    ts_tensor *acc = NULL;
    for (int i = 0; i < n; i++) {
        ts_tensor *c = ts_to_dtype(ts_to(ts[i], ts_cpu()), TS_F64);
        acc = acc ? ts_add(acc, c) : c;
    }
    return acc;
}

/* tsi_broadcast_coalesced on its own: values, devices and dtypes of the copies; one node for the
 * tensors that require grad and none for the one that does not; the backward sum (parameter b gets
 * no gradient from sim:2: a missing contribution counts as zeros) plus the original's own use. */
static void broadcast_coalesced_direct(void) {
    ts_scope_begin();
    ts_manual_seed(18);
    ts_opts on0 = {.device = devs[0]};
    ts_tensor *a = ts_randn(TS_SHAPE(3, 2), on0);
    ts_tensor *b = ts_randn(TS_SHAPE(4), (ts_opts){.dtype = TS_F64, .device = devs[0]});
    ts_tensor *c = ts_randn(TS_SHAPE(2), on0);
    ts_set_requires_grad(a, true);
    ts_set_requires_grad(b, true);
    ts_tensor *params[3] = {a, b, c};
    ts_tensor *copies[3 * (NDEV - 1)];
    CHECK(tsi_broadcast_coalesced(params, 3, devs, NDEV, copies));
    CHECK_OK();
    ts_node *node = copies[0] ? copies[0]->grad_fn : NULL;
    CHECK(node && strcmp(node->name, "BroadcastBackward") == 0);
    for (int r = 1; r < NDEV; r++)
        for (int i = 0; i < 3; i++) {
            ts_tensor *t = copies[(r - 1) * 3 + i];
            CHECK(t && ts_device_equal(ts_device_of(t), devs[r]));
            CHECK(t && ts_dtype_of(t) == ts_dtype_of(params[i]));
            CHECK(max_diff(t, params[i]) == 0);
            CHECK(t && t->grad_fn == (i < 2 ? node : NULL) && ts_requires_grad(t) == (i < 2));
        }
    /* loss = sum(a * w0) + sum_r sum(copy_a_r * wa_r) + sum_{r != 2} sum(copy_b_r * wb_r) */
    ts_tensor *wa[NDEV], *wb[NDEV], *wb_used[NDEV];
    int nb = 0;
    ts_tensor *loss = ts_sum(ts_mul(a, wa[0] = ts_randn(TS_SHAPE(3, 2), on0)));
    for (int r = 1; r < NDEV; r++) {
        ts_opts on_r = {.device = devs[r]};
        wa[r] = ts_randn(TS_SHAPE(3, 2), on_r);
        wb[r] = ts_randn(TS_SHAPE(4), (ts_opts){.dtype = TS_F64, .device = devs[r]});
        ts_tensor *part = ts_sum(ts_mul(copies[(r - 1) * 3], wa[r]));
        if (r != 2) {
            part =
                ts_add(part, ts_to_dtype(ts_sum(ts_mul(copies[(r - 1) * 3 + 1], wb[r])), TS_F32));
            wb_used[nb++] = wb[r];
        }
        loss = ts_add(loss, ts_to(part, devs[0]));
    }
    ts_backward(loss);
    CHECK_OK();
    CHECK(ts_grad(a) && ts_device_equal(ts_device_of(ts_grad(a)), devs[0]));
    CHECK(ts_grad(b) && ts_dtype_of(ts_grad(b)) == TS_F64);
    CHECK(max_diff(ts_grad(a), cpu_sum(wa, NDEV)) <= 1e-6);
    CHECK(max_diff(ts_grad(b), cpu_sum(wb_used, nb)) <= 1e-12);
    CHECK(ts_grad(c) == NULL);
    for (int k = 0; k < 3 * (NDEV - 1); k++) ts_release(copies[k]);
    /* the transport alone: all-NULL contributions sum to no tensor at all */
    ts_tensor *none[NDEV] = {0}, *sum = a;
    CHECK(tsi_transport_reduce_add("test", none, 1, devs, NDEV, &sum));
    CHECK(sum == NULL);
    /* under no_grad: copies without history */
    ts_no_grad_begin();
    CHECK(tsi_broadcast_coalesced(params, 3, devs, 2, copies));
    ts_no_grad_end();
    for (int i = 0; i < 3; i++) {
        CHECK(copies[i] && copies[i]->grad_fn == NULL && !ts_requires_grad(copies[i]));
        ts_release(copies[i]);
    }
    ts_scope_end();
    CHECK_OK();
    for (int i = 1; i < NDEV; i++) CHECK_EQ(stats(devs[i]).live_tensors, 0);
}

/* ------------------------------------------------------------------ scatter and gather */
static void building_blocks(void) {
    ts_scope_begin();
    ts_tensor *x = ts_arange(0, 10, 1, (ts_opts){.dtype = TS_F32, .device = ts_cpu()});
    x = ts_reshape(x, TS_SHAPE(5, 2));
    ts_set_requires_grad(x, true);
    ts_tensor *parts[NDEV];
    CHECK_EQ(ts_parallel_scatter(x, devs, NDEV, parts), 3);
    int64_t rows[3] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
        CHECK(ts_device_equal(ts_device_of(parts[i]), devs[i]) && ts_size(parts[i], 0) == rows[i]);
        CHECK_EQ(ts_item(ts_select(ts_select(parts[i], 0, 0), 0, 0)), 4 * i);
    }
    /* gather on sim:3 along dim 0 is the identity; backward reaches x on the cpu */
    ts_tensor *g = ts_parallel_gather(parts, 3, devs[3]);
    CHECK(ts_device_equal(ts_device_of(g), devs[3]) && max_diff(g, x) == 0);
    ts_tensor *w = ts_arange(1, 11, 1, (ts_opts){.device = devs[3]});
    ts_backward(ts_sum(ts_mul(g, ts_reshape(w, TS_SHAPE(5, 2)))));
    CHECK(ts_grad(x) && ts_device_of(ts_grad(x)).type == TS_CPU);
    CHECK(max_diff(ts_grad(x), ts_arange(1, 11, 1, (ts_opts){.device = ts_cpu()})) == 0);
    /* 0-dim outputs (a loss per replica) become a vector */
    ts_tensor *losses[3];
    for (int i = 0; i < 3; i++) losses[i] = ts_scalar(i + 0.5, (ts_opts){.device = devs[i]});
    ts_tensor *v = ts_parallel_gather(losses, 3, ts_cpu());
    CHECK(v && ts_ndim(v) == 1 && ts_size(v, 0) == 3 && ts_item(ts_sum(v)) == 4.5);
    /* errors */
    CHECK_EQ(ts_parallel_scatter(ts_scalar(1, (ts_opts){0}), devs, NDEV, parts), -1);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_parallel_gather(parts, 0, ts_cpu()) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *mixed[2] = {ts_zeros(TS_SHAPE(2, 3), (ts_opts){0}),
                           ts_zeros(TS_SHAPE(2, 4), (ts_opts){0})};
    CHECK(ts_parallel_gather(mixed, 2, ts_cpu()) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
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
    errors();
    batch_norm();
    no_leaks();
    module_surface();
    building_blocks();
    broadcast_node_in_dp();
    broadcast_coalesced_direct();
    out_of_memory();
    return ts_test_finish();
}
