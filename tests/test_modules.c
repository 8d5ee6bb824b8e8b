/* test_modules.c — the module system: user modules (SimpleCNN, MLP), built-in layers, parameter
 * counts and reprs against PyTorch 1.13, init bounds, moves between devices and dtypes, train/eval,
 * batch-norm buffers, ownership and error paths (every layer's repr: test_state_dict.c), the
 * activation modules' forwards, and ts_module_summary's output. */
#define _POSIX_C_SOURCE 200809L /* dup, fileno */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_test.h"

/* ------------------------------------------------------------------ helpers */
/* t's values as doubles (malloc'ed, at least one slot) */
static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to_dtype(t, TS_F64));
    if (ts_copy_to_host(c, buf, (size_t)n * sizeof(double)) != TS_OK) buf[0] = NAN;
    ts_scope_end();
    return buf;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

static int64_t live(ts_device d) {
    ts_mem_stats s;
    ts_memory_stats(d, &s);
    return s.live_tensors;
}

static void check_repr(ts_module *m, const char *want) {
    char *s = ts_module_repr(m);
    CHECK_STREQ(s, want);
    free(s);
}

/* ------------------------------------------------------------------ user modules (DESIGN §1) */
typedef struct {
    ts_module base;
    ts_module *conv1, *pool, *conv2, *fc1, *fc2, *fc3;
} simple_cnn;

static ts_tensor *simple_cnn_forward(ts_module *self, ts_tensor *x) {
    simple_cnn *m = (simple_cnn *)self;
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv1, x)));
    x = ts_forward(m->pool, ts_relu(ts_forward(m->conv2, x)));
    x = ts_view(x, TS_SHAPE(-1, 16 * 5 * 5));
    x = ts_relu(ts_forward(m->fc1, x));
    x = ts_relu(ts_forward(m->fc2, x));
    return ts_forward(m->fc3, x);
}

static ts_module *simple_cnn_new(void) {
    simple_cnn *m = ts_module_alloc(sizeof *m, "SimpleCNN", simple_cnn_forward);
    if (!m) return NULL;
    m->conv1 = ts_module_add(&m->base, "conv1", ts_conv2d_new(3, 6, 5, (ts_conv2d_opts){0}));
    m->pool = ts_module_add(
        &m->base, "pool", ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}, .stride = {2, 2}}));
    m->conv2 = ts_module_add(&m->base, "conv2", ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}));
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(16 * 5 * 5, 120));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(120, 84));
    m->fc3 = ts_module_add(&m->base, "fc3", ts_linear_new(84, 10));
    return &m->base;
}

typedef struct {
    ts_module base;
    ts_module *fc1, *fc2;
} mlp;

static ts_tensor *mlp_forward(ts_module *self, ts_tensor *x) {
    mlp *m = (mlp *)self;
    return ts_forward(m->fc2, ts_relu(ts_forward(m->fc1, ts_flatten(x, 1, -1))));
}

static ts_module *mlp_new(void) {
    mlp *m = ts_module_alloc(sizeof *m, "MLP", mlp_forward);
    m->fc1 = ts_module_add(&m->base, "fc1", ts_linear_new(784, 128));
    m->fc2 = ts_module_add(&m->base, "fc2", ts_linear_new(128, 10));
    return &m->base;
}

/* print(SimpleCNN()) with /usr/bin/python3 (torch 1.13), SimpleCNN as in DESIGN §1:
 *   conv1=nn.Conv2d(3, 6, 5); pool=nn.MaxPool2d(2, 2); conv2=nn.Conv2d(6, 16, 5);
 *   fc1=nn.Linear(16 * 5 * 5, 120); fc2=nn.Linear(120, 84); fc3=nn.Linear(84, 10)
 * and sum(p.numel() for p in m.parameters()) -> 62006 */
static const char *simple_cnn_repr =
    "SimpleCNN(\n"
    "  (conv1): Conv2d(3, 6, kernel_size=(5, 5), stride=(1, 1))\n"
    "  (pool): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
    "  (conv2): Conv2d(6, 16, kernel_size=(5, 5), stride=(1, 1))\n"
    "  (fc1): Linear(in_features=400, out_features=120, bias=True)\n"
    "  (fc2): Linear(in_features=120, out_features=84, bias=True)\n"
    "  (fc3): Linear(in_features=84, out_features=10, bias=True)\n"
    ")";

static void test_user_modules(ts_device dev) {
    ts_device_push(dev);
    ts_module *net = simple_cnn_new();
    ts_module *m = mlp_new();
    ts_device_pop();
    CHECK_OK();
    CHECK_EQ(ts_module_num_parameters(net), 62006);
    CHECK_EQ(ts_module_num_parameters(m), 784 * 128 + 128 + 128 * 10 + 10); /* 101770 */
    check_repr(net, simple_cnn_repr);
    check_repr(m, "MLP(\n  (fc1): Linear(in_features=784, out_features=128, bias=True)\n"
                  "  (fc2): Linear(in_features=128, out_features=10, bias=True)\n)");
    /* parameters land on the default device of the moment they are made */
    CHECK(ts_device_equal(ts_device_of(ts_module_get(net, "conv1.weight")), dev));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(net, "fc3.bias")), dev));
    CHECK(ts_requires_grad(ts_module_get(net, "fc2.weight")));
    CHECK(ts_module_child(net, "fc1") == ((simple_cnn *)net)->fc1);

    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3, 32, 32), (ts_opts){.device = dev});
    ts_tensor *y = ts_forward(net, x);
    CHECK(shape_is(y, TS_SHAPE(4, 10)));
    CHECK(y && ts_device_equal(ts_device_of(y), dev));
    ts_tensor *y2 = ts_forward(m, ts_randn(TS_SHAPE(8, 1, 28, 28), (ts_opts){.device = dev}));
    CHECK(shape_is(y2, TS_SHAPE(8, 10)));
    ts_scope_end();
    CHECK_OK();
    ts_module_free(net);
    ts_module_free(m);
}

/* The same seed gives the same parameters on every device, so cpu and sim:0 must agree. */
static void test_cpu_sim_agree(void) {
    ts_manual_seed(7);
    ts_module *a = simple_cnn_new();
    ts_manual_seed(7);
    ts_device_push(ts_sim(0));
    ts_module *b = simple_cnn_new();
    ts_device_pop();
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 32, 32), (ts_opts){0});
    ts_tensor *ya = ts_forward(a, x), *yb = ts_forward(b, ts_to(x, ts_sim(0)));
    double *va = host(ya), *vb = host(yb);
    double worst = 0;
    for (int i = 0; i < 20; i++) worst = fmax(worst, fabs(va[i] - vb[i]));
    CHECK(worst < 1e-5);
    CHECK(fabs(va[0]) > 0); /* not trivially zero */
    free(va);
    free(vb);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(a);
    ts_module_free(b);
}

/* A Linear forward against x @ W^T + b computed here in double: the weight and bias slots are
 * wired the right way round. */
static void test_linear_values(ts_device dev) {
    ts_module *fc = ts_linear_new_ex(5, 3, (ts_linear_opts){.device = dev});
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 5), (ts_opts){.device = dev});
    ts_tensor *y = ts_forward(fc, x);
    double *vx = host(x), *vw = host(ts_module_get(fc, "weight")),
           *vb = host(ts_module_get(fc, "bias"));
    double *vy = host(y);
    double worst = 0;
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 3; o++) {
            double s = vb[o];
            for (int k = 0; k < 5; k++) s += vx[i * 5 + k] * vw[o * 5 + k];
            worst = fmax(worst, fabs(s - vy[i * 3 + o]));
        }
    CHECK(worst < 1e-5);
    free(vx), free(vw), free(vb), free(vy);
    /* no bias: a module with one parameter; the forward still works */
    ts_module *nb = ts_linear_new_ex(5, 3, (ts_linear_opts){.no_bias = true, .device = dev});
    CHECK(ts_module_num_parameters(nb) == 15);
    CHECK(shape_is(ts_forward(nb, x), TS_SHAPE(4, 3)));
    check_repr(nb, "Linear(in_features=5, out_features=3, bias=False)");
    ts_scope_end();
    CHECK_OK();
    ts_module_free(fc);
    ts_module_free(nb);
}

/* ------------------------------------------------------------------ init */
typedef struct stats {
    double min, max, mean, var;
} stats;
static stats stats_of(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *v = host(t);
    stats s = {INFINITY, -INFINITY, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        s.min = fmin(s.min, v[i]);
        s.max = fmax(s.max, v[i]);
        s.mean += v[i];
    }
    s.mean /= (double)n;
    for (int64_t i = 0; i < n; i++) s.var += (v[i] - s.mean) * (v[i] - s.mean);
    s.var /= (double)n;
    free(v);
    return s;
}

/* U(-b, b): inside the bounds, reaching close to them, mean ~0 and variance ~b^2/3. */
static void check_uniform(ts_tensor *t, double b) {
    stats s = stats_of(t);
    int64_t n = ts_numel(t);
    CHECK(s.min >= -b && s.max <= b);
    CHECK(s.max > b * (1 - 20.0 / (double)n) && s.min < -b * (1 - 20.0 / (double)n));
    CHECK(fabs(s.mean) < 5 * b / sqrt(3.0 * (double)n));
    CHECK_NEAR(s.var, b * b / 3, 5 * b * b / sqrt((double)n));
}

static void check_const(ts_tensor *t, double v) {
    stats s = stats_of(t);
    CHECK(s.min == v && s.max == v);
}

static void test_init(ts_device dev) {
    ts_manual_seed(3);
    ts_device_push(dev);
    ts_module *fc = ts_linear_new(400, 120);
    ts_module *conv = ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0});
    ts_module *gconv = ts_conv2d_new2(8, 16, 3, 2, (ts_conv2d_opts){.groups = 2});
    ts_module *bn = ts_batch_norm2d_new(16, (ts_norm_opts){0});
    ts_module *ln = ts_layer_norm_new(TS_SHAPE(7), (ts_norm_opts){0});
    ts_module *emb = ts_embedding_new(1000, 16);
    ts_device_pop();
    CHECK_OK();
    /* Linear/Conv2d.reset_parameters: kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(fan_in)), bias too
     */
    check_uniform(ts_module_get(fc, "weight"), 1 / sqrt(400.0));
    check_uniform(ts_module_get(fc, "bias"), 1 / sqrt(400.0));
    check_uniform(ts_module_get(conv, "weight"), 1 / sqrt(150.0));
    check_uniform(ts_module_get(conv, "bias"), 1 / sqrt(150.0));
    check_uniform(ts_module_get(gconv, "weight"), 1 / sqrt(4 * 3 * 2.0)); /* fan_in = 8/2 * 3 * 2 */
    CHECK(shape_is(ts_module_get(gconv, "weight"), TS_SHAPE(16, 4, 3, 2)));
    check_const(ts_module_get(bn, "weight"), 1);
    check_const(ts_module_get(bn, "bias"), 0);
    check_const(ts_module_get(bn, "running_mean"), 0);
    check_const(ts_module_get(bn, "running_var"), 1);
    ts_tensor *nbt = ts_module_get(bn, "num_batches_tracked");
    CHECK(ts_dtype_of(nbt) == TS_I64 && ts_ndim(nbt) == 0 && ts_item(nbt) == 0);
    CHECK(!ts_requires_grad(nbt) && !ts_requires_grad(ts_module_get(bn, "running_mean")));
    check_const(ts_module_get(ln, "weight"), 1);
    check_const(ts_module_get(ln, "bias"), 0);
    stats e = stats_of(ts_module_get(emb, "weight")); /* N(0, 1) over 16000 values */
    CHECK(fabs(e.mean) < 0.04 && fabs(e.var - 1) < 0.05);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(emb, "weight")), dev));

    /* the public init functions, on a parameter that requires grad (no graph, no error) */
    ts_tensor *w = ts_module_get(fc, "weight");
    CHECK(ts_init_xavier_uniform_(w, 2.0) == w);
    check_uniform(w, 2.0 * sqrt(6.0 / (400 + 120)));
    CHECK(ts_init_kaiming_uniform_(w, 0) == w);
    check_uniform(w, sqrt(3.0) * sqrt(2.0) / sqrt(400.0));
    CHECK(ts_init_uniform_(w, 2, 3) == w);
    stats u = stats_of(w);
    CHECK(u.min >= 2 && u.max <= 3);
    CHECK(ts_init_normal_(w, 5, 0.5) == w);
    u = stats_of(w);
    CHECK(fabs(u.mean - 5) < 0.02 && fabs(sqrt(u.var) - 0.5) < 0.02);
    CHECK(ts_init_zeros_(w) == w);
    check_const(w, 0);
    CHECK(ts_init_ones_(w) == w);
    check_const(w, 1);
    CHECK(ts_is_leaf(w) && ts_requires_grad(w));
    CHECK_OK();
    /* fan needs 2 dims */
    CHECK(ts_init_kaiming_uniform_(ts_module_get(fc, "bias"), 0) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_module *mods[] = {fc, conv, gconv, bn, ln, emb};
    for (int i = 0; i < 6; i++) ts_module_free(mods[i]);
}

/* ------------------------------------------------------------------ moves */
static void test_move(void) {
    ts_module *net = simple_cnn_new();
    ts_module *bn = ts_module_add(net, "bn", ts_batch_norm2d_new(6, (ts_norm_opts){0}));
    ts_tensor *w = ts_module_get(net, "fc1.weight");
    ts_tensor *g = ts_full(ts_shape_of(w), 0.5, (ts_opts){0});
    CHECK(ts_set_grad(w, g) == TS_OK);
    ts_release(g);
    double *before = host(w);
    int64_t cpu_live = live(ts_cpu()), sim_live = live(ts_sim(0));

    CHECK(ts_module_to(net, ts_sim(0)) == net);
    CHECK_OK();
    CHECK(ts_module_get(net, "fc1.weight") == w); /* the same handle, as in PyTorch */
    CHECK(ts_device_equal(ts_device_of(w), ts_sim(0)));
    CHECK(ts_requires_grad(w) && ts_is_leaf(w));
    CHECK(ts_grad(w) && ts_device_equal(ts_device_of(ts_grad(w)), ts_sim(0)));
    double *after = host(w), *gv = host(ts_grad(w));
    CHECK(memcmp(before, after, sizeof(double) * 400 * 120) == 0);
    CHECK(gv[0] == 0.5 && gv[400 * 120 - 1] == 0.5);
    free(after);
    free(gv);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(bn, "running_var")), ts_sim(0)));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(net, "bn.num_batches_tracked")), ts_sim(0)));
    /* 10 params + 1 grad + 5 bn tensors moved: the live counts follow them */
    CHECK_EQ(live(ts_cpu()), cpu_live - 16);
    CHECK_EQ(live(ts_sim(0)), sim_live + 16);

    ts_scope_begin();
    ts_tensor *y =
        ts_forward(net, ts_randn(TS_SHAPE(2, 3, 32, 32), (ts_opts){.device = ts_sim(0)}));
    CHECK(shape_is(y, TS_SHAPE(2, 10)));
    ts_scope_end();

    /* dtype: floating tensors and grads convert, num_batches_tracked stays int64 */
    CHECK(ts_module_to_dtype(net, TS_F64) == net);
    CHECK_OK();
    CHECK(ts_module_get(net, "fc1.weight") == w && ts_dtype_of(w) == TS_F64);
    CHECK(ts_dtype_of(ts_grad(w)) == TS_F64);
    CHECK(ts_dtype_of(ts_module_get(bn, "running_mean")) == TS_F64);
    CHECK(ts_dtype_of(ts_module_get(bn, "num_batches_tracked")) == TS_I64);
    after = host(w);
    double worst = 0;
    for (int i = 0; i < 400 * 120; i++) worst = fmax(worst, fabs(after[i] - before[i]));
    CHECK(worst == 0); /* f32 -> f64 is exact */
    free(after);
    ts_scope_begin();
    y = ts_forward(
        net, ts_randn(TS_SHAPE(1, 3, 32, 32), (ts_opts){.device = ts_sim(0), .dtype = TS_F64}));
    CHECK(y && ts_dtype_of(y) == TS_F64);
    ts_scope_end();

    CHECK(ts_module_to(net, ts_cpu()) == net);
    CHECK(ts_device_equal(ts_device_of(w), ts_cpu()) &&
          ts_device_equal(ts_device_of(ts_grad(w)), ts_cpu()));
    CHECK_EQ(live(ts_sim(0)), sim_live);
    CHECK_OK();

    /* errors: the model comes back with the error pending */
    CHECK(ts_module_to(net, ts_sim(9)) == net);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_module_to_dtype(net, TS_I32) == net);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_module_to(NULL, ts_cpu()) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    free(before);
    ts_module_free(net);
}

/* ------------------------------------------------------------------ train / eval, batch norm */
static void test_train_eval_bn(ts_device dev) {
    ts_device_push(dev);
    ts_module *seq = ts_sequential_new(0, NULL);
    ts_sequential_append(seq, ts_batch_norm2d_new(3, (ts_norm_opts){0}));
    ts_sequential_append(seq, ts_dropout_new(0.5));
    ts_device_pop();
    ts_module *bn = ts_module_child(seq, "0");
    ts_module *drop = ts_module_child(seq, "1");
    CHECK(seq->training && bn->training && drop->training);
    ts_module_eval(seq);
    CHECK(!seq->training && !bn->training && !drop->training);
    ts_module_train(seq, true);
    CHECK(seq->training && bn->training && drop->training);
    ts_module_train(drop, false); /* eval only the dropout: the output is the batch-normed input */

    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3, 5, 5), (ts_opts){.device = dev});
    ts_tensor *y = ts_forward(seq, x);
    CHECK(shape_is(y, TS_SHAPE(4, 3, 5, 5)));
    double *vx = host(x), *vm = host(ts_module_get(seq, "0.running_mean"));
    double *vv = host(ts_module_get(seq, "0.running_var"));
    /* running = 0.9 * running + 0.1 * batch statistic (unbiased variance), per channel */
    double worst = 0;
    for (int c = 0; c < 3; c++) {
        double s = 0, s2 = 0;
        int n = 4 * 25;
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 25; k++) s += vx[(i * 3 + c) * 25 + k];
        double mean = s / n;
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 25; k++) {
                double d = vx[(i * 3 + c) * 25 + k] - mean;
                s2 += d * d;
            }
        worst = fmax(worst, fabs(vm[c] - 0.1 * mean));
        worst = fmax(worst, fabs(vv[c] - (0.9 + 0.1 * s2 / (n - 1))));
    }
    CHECK(worst < 1e-5);
    CHECK(ts_item(ts_module_get(seq, "0.num_batches_tracked")) == 1);
    free(vm), free(vv);

    /* eval: buffers frozen, output = (x - running_mean) / sqrt(running_var + eps) */
    ts_module_eval(seq);
    double *m0 = host(ts_module_get(seq, "0.running_mean")),
           *v0 = host(ts_module_get(seq, "0.running_var"));
    y = ts_forward(seq, x);
    double *vy = host(y), *m1 = host(ts_module_get(seq, "0.running_mean"));
    CHECK(memcmp(m0, m1, 3 * sizeof(double)) == 0);
    CHECK(ts_item(ts_module_get(seq, "0.num_batches_tracked")) == 1);
    worst = 0;
    for (int i = 0; i < 4 * 3 * 25; i++) {
        int c = (i / 25) % 3;
        worst = fmax(worst, fabs(vy[i] - (vx[i] - m0[c]) / sqrt(v0[c] + 1e-5)));
    }
    CHECK(worst < 1e-5);
    free(vx), free(vy), free(m0), free(m1), free(v0);

    /* two more training steps count */
    ts_module_train(seq, true);
    ts_forward(bn, x);
    ts_forward(bn, x);
    CHECK(ts_item(ts_module_get(bn, "num_batches_tracked")) == 3);
    /* BatchNorm2d wants 4-D input, BatchNorm1d 2-D or 3-D */
    CHECK(ts_forward(bn, ts_randn(TS_SHAPE(4, 3), (ts_opts){.device = dev})) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_module *bn1 = ts_batch_norm1d_new(3, (ts_norm_opts){0});
    ts_module_to(bn1, dev);
    CHECK(shape_is(ts_forward(bn1, ts_randn(TS_SHAPE(4, 3, 2), (ts_opts){.device = dev})),
                   TS_SHAPE(4, 3, 2)));
    CHECK(ts_forward(bn1, x) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(bn1);
    ts_module_free(seq);
}

/* A training step on an empty batch leaves the running statistics as they were (PyTorch: an empty
 * batch has no statistics; their NaN mean and variance used to reach running_mean / running_var,
 * and every eval-mode forward after it returned NaN). */
static void test_bn_empty_batch(ts_device dev) {
    ts_scope_begin();
    const ts_shape shapes[2] = {TS_SHAPE(0, 3), TS_SHAPE(0, 3, 5, 5)};
    for (int k = 0; k < 2; k++) {
        ts_module *bn = k == 0 ? ts_batch_norm1d_new(3, (ts_norm_opts){0})
                               : ts_batch_norm2d_new(3, (ts_norm_opts){0});
        ts_module_to(bn, dev);
        ts_tensor *y = ts_forward(bn, ts_randn(shapes[k], (ts_opts){.device = dev}));
        CHECK(shape_is(y, shapes[k]));
        double *m = host(ts_module_get(bn, "running_mean")),
               *v = host(ts_module_get(bn, "running_var"));
        for (int c = 0; c < 3; c++) CHECK(m[c] == 0 && v[c] == 1);
        free(m), free(v);
        /* eval after it: finite, (x - 0) / sqrt(1 + eps) */
        ts_module_eval(bn);
        ts_tensor *x =
            ts_ones(k == 0 ? TS_SHAPE(2, 3) : TS_SHAPE(2, 3, 5, 5), (ts_opts){.device = dev});
        double *vy = host(ts_forward(bn, x));
        CHECK(vy && fabs(vy[0] - 1 / sqrt(1 + 1e-5)) < 1e-6);
        free(vy);
        ts_module_free(bn);
    }
    ts_scope_end();
    CHECK_OK();
}

/* Gradients reach the parameters through a module, on the module's device. */
static void test_backward(ts_device dev) {
    ts_module *fc = ts_linear_new_ex(3, 2, (ts_linear_opts){.device = dev});
    ts_scope_begin();
    ts_tensor *x = ts_ones(TS_SHAPE(5, 3), (ts_opts){.device = dev});
    ts_backward(ts_sum(ts_forward(fc, x)));
    ts_tensor *gb = ts_grad(ts_module_get(fc, "bias")), *gw = ts_grad(ts_module_get(fc, "weight"));
    CHECK(gb && ts_device_equal(ts_device_of(gb), dev));
    if (gb && gw) {
        double *b = host(gb), *w = host(gw);
        CHECK(b[0] == 5 && b[1] == 5 && w[0] == 5 && w[5] == 5); /* d sum / d b = batch size */
        free(b), free(w);
    }
    ts_scope_end();
    CHECK_OK();
    ts_module_free(fc);
}

/* ------------------------------------------------------------------ ownership and errors */
static ts_tensor *identity_forward(ts_module *self, ts_tensor *x) { return x; }

static int destroyed;
static void count_destroy(ts_module *self) { destroyed++; }

static void test_ownership(void) {
    int64_t base = live(ts_cpu());
    /* outside a scope the module takes the caller's reference... */
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Holder", identity_forward);
    ts_tensor *w = ts_module_param(m, "w", ts_zeros(TS_SHAPE(2), (ts_opts){0}));
    CHECK(w && ts_requires_grad(w));
    CHECK(ts_module_buffer(m, "b", ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_I64})) != NULL);
    /* ...inside one it takes its own and the scope keeps its */
    ts_scope_begin();
    CHECK(ts_module_param(m, "v", ts_ones(TS_SHAPE(3), (ts_opts){0})) != NULL);
    ts_scope_end();
    CHECK_EQ(live(ts_cpu()), base + 3);
    ts_scope_begin();
    CHECK(ts_item(ts_sum(ts_module_get(m, "v"))) == 3);
    ts_scope_end();
    /* the same name again replaces in place */
    ts_module_param(m, "w", ts_ones(TS_SHAPE(4), (ts_opts){0}));
    CHECK(ts_numel(ts_module_get(m, "w")) == 4);
    ts_tensor_list l = ts_module_named_parameters(m);
    CHECK(l.n == 2 && strcmp(l.names[0], "w") == 0 && strcmp(l.names[1], "v") == 0);
    ts_tensor_list_free(&l);
    /* forward of an identity outside any scope hands the caller a reference */
    ts_tensor *x = ts_zeros(TS_SHAPE(1), (ts_opts){0});
    ts_tensor *y = ts_forward(m, x);
    CHECK(y == x);
    ts_release(y);
    ts_release(x);
    m->destroy = count_destroy;
    ts_module_free(m);
    CHECK(destroyed == 1);
    CHECK_EQ(live(ts_cpu()), base);

    /* a forward outside any scope leaves only its result (and, with a graph, what the graph
     * saved, which dies with the result) */
    ts_module *net = simple_cnn_new();
    int64_t before = live(ts_cpu());
    x = ts_randn(TS_SHAPE(1, 3, 32, 32), (ts_opts){0});
    ts_no_grad_begin();
    y = ts_forward(net, x);
    ts_no_grad_end();
    CHECK_EQ(live(ts_cpu()), before + 2);
    ts_release(y);
    y = ts_forward(net, x);
    CHECK(ts_grad_fn_name(y) != NULL);
    ts_release(y);
    ts_release(x);
    CHECK_EQ(live(ts_cpu()), before);
    ts_module_free(net);
    CHECK_EQ(live(ts_cpu()), base);
    CHECK_OK();
}

static void test_errors(void) {
    int64_t base = live(ts_cpu());
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Box", NULL);
    ts_module *fc = ts_module_add(m, "fc", ts_linear_new(2, 2));
    CHECK(fc != NULL);
    CHECK(ts_module_param(m, "a.b", ts_zeros(TS_SHAPE(1), (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_param(m, "", ts_zeros(TS_SHAPE(1), (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_param(m, "fc", ts_zeros(TS_SHAPE(1), (ts_opts){0})) ==
          NULL); /* a child's name */
    CHECK(strstr(ts_error_message(), "attribute 'fc' already exists") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_param(m, "i", ts_zeros(TS_SHAPE(1), (ts_opts){.dtype = TS_I64})) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_tensor *leaf = ts_ones(TS_SHAPE(2), (ts_opts){.requires_grad = true});
    ts_scope_begin();
    CHECK(ts_module_param(m, "nl", ts_mul_scalar(leaf, 2)) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    ts_release(leaf);
    CHECK(ts_module_param(NULL, "w", ts_zeros(TS_SHAPE(1), (ts_opts){0})) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_param(m, "w", NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* children */
    CHECK(ts_module_add(m, "x.y", ts_relu_new()) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_add(m, "other", fc) == NULL); /* already owned */
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_add(fc, "loop", m) == NULL); /* would be a cycle */
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_add(m, "n", NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(fc); /* a child: its parent frees it */
    CHECK_ERR(TS_ERR_STATE);
    /* lookups */
    CHECK(ts_module_get(m, "fc.weigth") == NULL);
    CHECK(strstr(ts_error_message(), "'fc.weigth'") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_get(m, "fc.bias") == ts_module_get(fc, "bias"));
    CHECK(ts_module_child(m, "nope") == NULL);
    CHECK_ERR(TS_ERR_ARG);
    /* forward: no forward function; NULL input keeps the first error */
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 2), (ts_opts){0});
    CHECK(ts_forward(m, x) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_forward(fc, NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_forward(NULL, x) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(x);
    /* constructors */
    CHECK(ts_dropout_new(1.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.groups = 2}) == NULL);
    CHECK(strstr(ts_error_message(), "in_channels (3) must be divisible by groups (2)") != NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_linear_new(-1, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_max_pool2d_new((ts_pool2d_opts){0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_linear_new_ex(2, 2, (ts_linear_opts){.device = ts_sim(9)}) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_linear_new_ex(2, 2, (ts_linear_opts){.dtype = TS_I64}) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_module *bad[] = {ts_relu_new(), NULL, ts_tanh_new()};
    CHECK(ts_sequential_new(3, bad) == NULL); /* the others are freed (ASan checks) */
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_sequential_append(fc, ts_relu_new()) == fc);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_alloc(4, "Tiny", NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_module_free(m);
    CHECK_EQ(live(ts_cpu()), base);
    CHECK_OK();
}

/* What ts_module_summary prints, read back from stdout. */
static void test_summary(void) {
    ts_module *m = mlp_new();
    ts_set_requires_grad(ts_module_get(m, "fc2.bias"), false);
    fflush(stdout);
    FILE *tmp = tmpfile();
    int saved = dup(STDOUT_FILENO);
    CHECK(tmp && saved >= 0);
    if (!tmp || saved < 0) return;
    dup2(fileno(tmp), STDOUT_FILENO);
    ts_module_summary(m);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    char got[1024] = "";
    rewind(tmp);
    size_t n = fread(got, 1, sizeof got - 1, tmp);
    got[n] = '\0';
    fclose(tmp);
    /* 784 * 128 + 128 + 128 * 10 + 10 = 101770 parameters; fc2.bias (10) is frozen */
    CHECK_STREQ(got, "MLP(\n"
                     "  (fc1): Linear(in_features=784, out_features=128, bias=True)\n"
                     "  (fc2): Linear(in_features=128, out_features=10, bias=True)\n"
                     ")\n"
                     "Total parameters: 101770\n"
                     "Trainable parameters: 101760\n");
    CHECK_OK();
    ts_module_free(m);
}

/* The activation modules' forwards against their formulas in double precision (and Softmax's dim:
 * over rows and over columns differ). */
static void test_activation_modules(ts_device dev) {
    ts_scope_begin();
    enum { R = 3, C = 4 };
    double xv[R * C];
    for (int i = 0; i < R * C; i++) xv[i] = (i * 7 % 11 - 5) * 0.6;
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(R, C), xv, (ts_opts){.device = dev});
    ts_module *gelu = ts_gelu_new(), *sig = ts_sigmoid_new(), *tanh_m = ts_tanh_new();
    ts_module *sm0 = ts_softmax_new(0), *sm1 = ts_softmax_new(-1);
    ts_tensor *y[5] = {ts_forward(gelu, x), ts_forward(sig, x), ts_forward(tanh_m, x),
                       ts_forward(sm0, x), ts_forward(sm1, x)};
    CHECK_OK();
    double ref[5][R * C];
    for (int i = 0; i < R * C; i++) {
        ref[0][i] = 0.5 * xv[i] * (1 + erf(xv[i] / sqrt(2.0)));
        ref[1][i] = 1 / (1 + exp(-xv[i]));
        ref[2][i] = tanh(xv[i]);
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double s0 = 0, s1 = 0;
            for (int k = 0; k < R; k++) s0 += exp(xv[k * C + c]);
            for (int k = 0; k < C; k++) s1 += exp(xv[r * C + k]);
            ref[3][r * C + c] = exp(xv[r * C + c]) / s0;
            ref[4][r * C + c] = exp(xv[r * C + c]) / s1;
        }
    const char *names[5] = {"GELU", "Sigmoid", "Tanh", "Softmax(dim=0)", "Softmax(dim=-1)"};
    for (int k = 0; k < 5; k++) {
        CHECK(shape_is(y[k], TS_SHAPE(R, C)) && ts_dtype_of(y[k]) == TS_F64);
        double *h = host(y[k]);
        int bad = -1;
        for (int i = 0; i < R * C && bad < 0; i++)
            if (!ts_test_near(h[i], ref[k][i], 1e-12 * (1 + fabs(ref[k][i])))) bad = i;
        if (bad >= 0)
            printf("  %s on %s: [%d] %.17g vs %.17g\n", names[k], ts_device_str(dev), bad, h[bad],
                   ref[k][bad]);
        CHECK(bad < 0);
        free(h);
    }
    ts_module *all[5] = {gelu, sig, tanh_m, sm0, sm1};
    for (int k = 0; k < 5; k++) ts_module_free(all[k]);
    ts_scope_end();
}

/* Forward hooks: pre-hooks before, post-hooks after (replacing the output), in registration
 * order, once per call through ts_forward and through the functional transformer layer alike;
 * a failing pre-hook stops the forward; removal. */
static int pre_calls, post_calls;
static ts_status count_pre(ts_module *m, ts_tensor *x, void *ctx) {
    (void)m, (void)x;
    pre_calls++;
    if (!*(bool *)ctx) return TS_OK;
    ts_error_set(TS_ERR_STATE, "hook: refused");
    return TS_ERR_STATE;
}
static ts_tensor *double_post(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x, (void)ctx;
    post_calls++;
    return ts_mul_scalar(y, 2);
}
static void test_forward_hooks(void) {
    ts_scope_begin();
    bool fail = false;
    ts_module *lin = ts_linear_new(3, 2);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3), (ts_opts){0});
    ts_tensor *plain = ts_forward(lin, x);
    int hp = ts_module_register_forward_pre_hook(lin, count_pre, &fail);
    int hf = ts_module_register_forward_hook(lin, double_post, NULL);
    CHECK(hp > 0 && hf > 0 && hp != hf);
    ts_tensor *y = ts_forward(lin, x);
    CHECK(pre_calls == 1 && post_calls == 1);
    CHECK(y && ts_item(ts_max(ts_abs(ts_sub(y, ts_mul_scalar(plain, 2))))) == 0);
    fail = true;
    CHECK(ts_forward(lin, x) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    CHECK(post_calls == 1);
    fail = false;
    CHECK(ts_module_remove_forward_hook(lin, hf) == TS_OK);
    CHECK(ts_module_remove_forward_hook(lin, hf) != TS_OK);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_remove_forward_hook(lin, hp) == TS_OK);
    y = ts_forward(lin, x);
    CHECK(pre_calls == 2 && post_calls == 1);
    CHECK(ts_item(ts_max(ts_abs(ts_sub(y, plain)))) == 0);
    ts_module_free(lin);
    /* a TransformerEncoderLayer runs its hooks once through ts_forward and once through the
     * functional form (which the GPT calls its blocks with) */
    ts_module *enc = ts_transformer_encoder_layer_new(
        8, 2, (ts_transformer_opts){.dim_feedforward = 16, .batch_first = true});
    ts_module_register_forward_pre_hook(enc, count_pre, &fail);
    ts_module_register_forward_hook(enc, double_post, NULL);
    ts_tensor *src = ts_randn(TS_SHAPE(1, 3, 8), (ts_opts){0});
    pre_calls = post_calls = 0;
    CHECK(ts_forward(enc, src) != NULL);
    CHECK(pre_calls == 1 && post_calls == 1);
    CHECK(ts_transformer_encoder_layer(enc, src, NULL, true, NULL) != NULL);
    CHECK(pre_calls == 2 && post_calls == 2);
    ts_module_free(enc);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) ts_sim_configure(4, 0); /* ctest sets TS_SIM_DEVICES=4 */
    ts_device devs[] = {ts_cpu(), ts_sim(0)};
    for (int i = 0; i < 2; i++) {
        test_user_modules(devs[i]);
        test_linear_values(devs[i]);
        test_init(devs[i]);
        test_train_eval_bn(devs[i]);
        test_bn_empty_batch(devs[i]);
        test_backward(devs[i]);
        test_activation_modules(devs[i]);
    }
    test_cpu_sim_agree();
    test_move();
    test_ownership();
    test_errors();
    test_summary();
    test_forward_hooks();
    return ts_test_finish();
}
