/* test_state_dict.c — named parameters/buffers and state_dict names and order against PyTorch 1.13,
 * round trips into fresh models (also across devices and dtypes), strict and non-strict loading,
 * error messages, shared tensors and the tensor list; the repr of every built-in layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to_dtype(t, TS_F64));
    if (ts_copy_to_host(c, buf, (size_t)n * sizeof(double)) != TS_OK) buf[0] = NAN;
    ts_scope_end();
    return buf;
}

/* max |a - b| over two tensors of one shape (on any devices) */
static double max_diff(ts_tensor *a, ts_tensor *b) {
    int64_t n = ts_numel(a);
    if (n != ts_numel(b)) return INFINITY;
    double *va = host(a), *vb = host(b), worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(va[i] - vb[i]));
    free(va);
    free(vb);
    return worst;
}

static int64_t live(ts_device d) {
    ts_mem_stats s;
    ts_memory_stats(d, &s);
    return s.live_tensors;
}

static void check_names(ts_tensor_list l, const char *const *want, int n) {
    CHECK_EQ(l.n, n);
    for (int i = 0; i < n && i < l.n; i++) CHECK_STREQ(l.names[i], want[i]);
}

/* ------------------------------------------------------------------ the model
 * class Small(nn.Module):
 *     conv1 = nn.Conv2d(3, 4, 3, padding=1); bn1 = nn.BatchNorm2d(4)
 *     body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU())
 *     pool = nn.AdaptiveAvgPool2d((1, 1)); ln = nn.LayerNorm(4); fc = nn.Linear(4, 5) */
typedef struct {
    ts_module base;
    ts_module *conv1, *bn1, *body, *pool, *ln, *fc;
} small_net;

static ts_tensor *small_forward(ts_module *self, ts_tensor *x) {
    small_net *m = (small_net *)self;
    x = ts_relu(ts_forward(m->bn1, ts_forward(m->conv1, x)));
    x = ts_flatten(ts_forward(m->pool, ts_forward(m->body, x)), 1, -1);
    return ts_forward(m->fc, ts_forward(m->ln, x));
}

static ts_module *small_new(void) {
    small_net *m = ts_module_alloc(sizeof *m, "Small", small_forward);
    m->conv1 = ts_module_add(&m->base, "conv1",
                             ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.padding = {1, 1}}));
    m->bn1 = ts_module_add(&m->base, "bn1", ts_batch_norm2d_new(4, (ts_norm_opts){0}));
    ts_module *body[] = {
        ts_conv2d_new(4, 4, 3, (ts_conv2d_opts){.padding = {1, 1}, .no_bias = true}),
        ts_batch_norm2d_new(4, (ts_norm_opts){0}), ts_relu_new()};
    m->body = ts_module_add(&m->base, "body", ts_sequential_new(3, body));
    m->pool = ts_module_add(&m->base, "pool", ts_adaptive_avg_pool2d_new(1, 1));
    m->ln = ts_module_add(&m->base, "ln", ts_layer_norm_new(TS_SHAPE(4), (ts_norm_opts){0}));
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(4, 5));
    return &m->base;
}

/* list(Small().state_dict().keys()), [k for k, _ in Small().named_parameters()],
 * [k for k, _ in Small().named_buffers()] with torch 1.13 */
static const char *const sd_names[] = {"conv1.weight",
                                       "conv1.bias",
                                       "bn1.weight",
                                       "bn1.bias",
                                       "bn1.running_mean",
                                       "bn1.running_var",
                                       "bn1.num_batches_tracked",
                                       "body.0.weight",
                                       "body.1.weight",
                                       "body.1.bias",
                                       "body.1.running_mean",
                                       "body.1.running_var",
                                       "body.1.num_batches_tracked",
                                       "ln.weight",
                                       "ln.bias",
                                       "fc.weight",
                                       "fc.bias"};
static const char *const param_names[] = {
    "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",  "body.0.weight", "body.1.weight",
    "body.1.bias",  "ln.weight",  "ln.bias",    "fc.weight", "fc.bias"};
static const char *const buffer_names[] = {"bn1.running_mean",        "bn1.running_var",
                                           "bn1.num_batches_tracked", "body.1.running_mean",
                                           "body.1.running_var",      "body.1.num_batches_tracked"};

static void test_names(void) {
    ts_module *m = small_new();
    CHECK_OK();
    ts_tensor_list sd = ts_module_state_dict(m);
    check_names(sd, sd_names, 17);
    for (int i = 0; i < sd.n; i++) CHECK(sd.tensors[i] == ts_module_get(m, sd.names[i]));
    ts_tensor_list p = ts_module_named_parameters(m), b = ts_module_named_buffers(m);
    check_names(p, param_names, 11);
    check_names(b, buffer_names, 6);
    for (int i = 0; i < p.n; i++) CHECK(ts_requires_grad(p.tensors[i]));
    ts_tensor_list_free(&sd);
    ts_tensor_list_free(&p);
    ts_tensor_list_free(&b);
    CHECK(sd.n == 0 && sd.names == NULL);
    ts_module_free(m);
}

/* One training step moves the running statistics away from their initial values, so a round trip
 * that dropped the buffers would show. */
static void train_once(ts_module *m, ts_device dev) {
    ts_scope_begin();
    ts_module_train(m, true);
    ts_no_grad_begin();
    ts_forward(m, ts_randn(TS_SHAPE(3, 3, 6, 6), (ts_opts){.device = dev}));
    ts_no_grad_end();
    ts_module_eval(m);
    ts_scope_end();
}

/* state_dict of a -> a fresh model b (other values; possibly on another device) -> same outputs */
static void test_round_trip(ts_device src_dev, ts_device dst_dev, ts_dtype src_dtype) {
    ts_manual_seed(11);
    ts_module *a = ts_module_to(small_new(), src_dev);
    train_once(a, src_dev);
    ts_module_to_dtype(a, src_dtype);
    ts_manual_seed(12);
    ts_device_push(dst_dev);
    ts_module *b = small_new();
    ts_device_pop();
    ts_module_eval(b);
    CHECK_OK();
    ts_tensor *w = ts_module_get(b, "conv1.weight");
    CHECK(max_diff(ts_module_get(a, "conv1.weight"), w) > 1e-3); /* different before */

    ts_tensor_list sd = ts_module_state_dict(a);
    CHECK(ts_module_load_state_dict(b, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    CHECK_OK();
    /* values copied into the existing tensors, which keep their device, dtype and grad flag */
    CHECK(ts_module_get(b, "conv1.weight") == w);
    CHECK(ts_device_equal(ts_device_of(w), dst_dev) && ts_dtype_of(w) == TS_F32);
    CHECK(ts_requires_grad(w) && ts_is_leaf(w));
    ts_tensor_list la = ts_module_state_dict(a), lb = ts_module_state_dict(b);
    double tol = src_dtype == TS_F64 ? 1e-6 : 0;
    for (int i = 0; i < la.n && i < lb.n; i++) CHECK(max_diff(la.tensors[i], lb.tensors[i]) <= tol);
    CHECK(ts_item(ts_module_get(b, "bn1.num_batches_tracked")) == 1);
    CHECK(ts_dtype_of(ts_module_get(b, "bn1.num_batches_tracked")) == TS_I64);
    ts_tensor_list_free(&la);
    ts_tensor_list_free(&lb);

    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 3, 6, 6), (ts_opts){.device = src_dev, .dtype = src_dtype});
    ts_tensor *ya = ts_forward(a, x), *yb = ts_forward(b, ts_to_dtype(ts_to(x, dst_dev), TS_F32));
    CHECK(ya && yb && max_diff(ya, yb) < 1e-5);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(a);
    ts_module_free(b);
}

/* ------------------------------------------------------------------ strict and non-strict */
static ts_module *seq_new(void) {
    ts_module *mods[] = {ts_linear_new(3, 4), ts_batch_norm1d_new(4, (ts_norm_opts){0})};
    return ts_sequential_new(2, mods);
}

static ts_tensor_list copy_without(ts_tensor_list src, const char *skip1, const char *skip2) {
    ts_tensor_list l = {0};
    for (int i = 0; i < src.n; i++)
        if (strcmp(src.names[i], skip1) && strcmp(src.names[i], skip2))
            ts_tensor_list_add(&l, src.names[i], src.tensors[i]);
    return l;
}

static void test_strict(void) {
    int64_t base = live(ts_cpu());
    ts_module *m = seq_new(), *other = seq_new();
    ts_tensor_list full = ts_module_state_dict(other);
    ts_tensor *extra = ts_zeros(TS_SHAPE(1), (ts_opts){0});
    double *before = host(ts_module_get(m, "0.weight"));

    /* m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)); sd = m.state_dict()
     * del sd['1.running_var']; del sd['0.bias']; sd['extra'] = sd['extra2'] = torch.zeros(1)
     * m.load_state_dict(sd) raises (torch 1.13): */
    ts_tensor_list sd = copy_without(full, "1.running_var", "0.bias");
    ts_tensor_list_add(&sd, "extra", extra);
    ts_tensor_list_add(&sd, "extra2", extra);
    CHECK(ts_module_load_state_dict(m, &sd, true) == TS_ERR_ARG);
    CHECK_STREQ(ts_error_message(),
                "load_state_dict: Error(s) in loading state_dict for Sequential:\n\tMissing "
                "key(s) in state_dict: \"0.bias\", \"1.running_var\". \n\tUnexpected key(s) in "
                "state_dict: \"extra\", \"extra2\". ");
    CHECK_ERR(TS_ERR_ARG);
    double *after = host(ts_module_get(m, "0.weight"));
    CHECK(memcmp(before, after, 12 * sizeof(double)) == 0); /* a failed load copies nothing */
    free(after);

    /* non-strict: the keys that match load, the others are ignored */
    CHECK(ts_module_load_state_dict(m, &sd, false) == TS_OK);
    CHECK_OK();
    CHECK(max_diff(ts_module_get(m, "0.weight"), ts_module_get(other, "0.weight")) == 0);
    CHECK(max_diff(ts_module_get(m, "0.bias"), ts_module_get(other, "0.bias")) > 0);
    ts_tensor_list_free(&sd);

    /* a shape mismatch fails in both modes; PyTorch 1.13 says "size mismatch for 0.weight: copying
     * a param with shape torch.Size([5, 3]) from checkpoint, the shape in current model is
     * torch.Size([4, 3])." (Tessera writes shapes as [5, 3]) */
    sd = copy_without(full, "", "");
    ts_tensor *wrong = ts_zeros(TS_SHAPE(5, 3), (ts_opts){0});
    ts_tensor_list_add(&sd, "0.weight", wrong); /* replaces, keeps the position */
    CHECK(ts_tensor_list_get(&sd, "0.weight") == wrong && strcmp(sd.names[0], "0.weight") == 0);
    for (int strict = 0; strict < 2; strict++) {
        CHECK(ts_module_load_state_dict(m, &sd, strict) == TS_ERR_SHAPE);
        CHECK_STREQ(ts_error_message(),
                    "load_state_dict: Error(s) in loading state_dict for Sequential:\n\tsize "
                    "mismatch for 0.weight: copying a param with shape [5, 3] from checkpoint, the "
                    "shape in current model is [4, 3].");
        CHECK_ERR(TS_ERR_SHAPE);
    }
    ts_release(wrong);
    ts_tensor_list_free(&sd);

    /* dtype of the source does not matter: f64 values land in f32 parameters */
    sd = (ts_tensor_list){0};
    ts_tensor *w64 = ts_full(TS_SHAPE(4, 3), 0.25, (ts_opts){.dtype = TS_F64});
    ts_tensor_list_add(&sd, "0.weight", w64);
    ts_release(w64);
    CHECK(ts_module_load_state_dict(m, &sd, false) == TS_OK);
    after = host(ts_module_get(m, "0.weight"));
    CHECK(after[0] == 0.25 && after[11] == 0.25);
    CHECK(ts_dtype_of(ts_module_get(m, "0.weight")) == TS_F32);
    free(after);
    ts_tensor_list_free(&sd);

    /* errors */
    CHECK(ts_module_load_state_dict(NULL, &full, true) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_module_load_state_dict(m, NULL, true) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_tensor_list_add(&sd, "x", NULL) == TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_tensor_list_get(&full, "nope") == NULL);
    CHECK_OK();

    free(before);
    ts_release(extra);
    ts_tensor_list_free(&full);
    ts_module_free(m);
    ts_module_free(other);
    CHECK_EQ(live(ts_cpu()), base);
}

/* A tensor registered in two modules (tied weights): named_parameters lists it once, as PyTorch's
 * remove_duplicate does, the state_dict under both names. */
static void test_shared(void) {
    ts_module *root = ts_module_alloc(sizeof(ts_module), "Tied", NULL);
    ts_module *enc = ts_module_add(root, "enc", ts_linear_new(3, 3));
    ts_module *dec =
        ts_module_add(root, "dec", ts_linear_new_ex(3, 3, (ts_linear_opts){.no_bias = true}));
    ts_tensor *w = ts_module_get(enc, "weight");
    ts_module_param(dec, "weight", ts_retain(w)); /* outside a scope: our new reference is taken */
    ts_tensor_list p = ts_module_named_parameters(root), sd = ts_module_state_dict(root);
    const char *pn[] = {"enc.weight", "enc.bias"};
    const char *sn[] = {"enc.weight", "enc.bias", "dec.weight"};
    check_names(p, pn, 2);
    check_names(sd, sn, 3);
    CHECK_EQ(ts_module_num_parameters(root), 12);
    ts_tensor_list_free(&p);
    ts_tensor_list_free(&sd);
    ts_module_free(root);
    CHECK_OK();
}

static void check_repr(ts_module *m, const char *want) {
    char *s = ts_module_repr(m);
    CHECK_STREQ(s, want);
    free(s);
}

/* ------------------------------------------------------------------ reprs of every layer */
/* print(Net()) with torch 1.13 for (names as below):
 *   conv1=nn.Conv2d(1, 8, 3, padding=1, bias=False); bn1=nn.BatchNorm2d(8)
 *   features=nn.Sequential(nn.Conv2d(8, 16, (3, 2), stride=2, dilation=2, groups=2), nn.ReLU(),
 *                          nn.AvgPool2d(2), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten())
 *   ln=nn.LayerNorm(16); drop=nn.Dropout(0.25); head=nn.Linear(16, 10, bias=False)
 *   bn=nn.BatchNorm1d(10, eps=1e-3, momentum=0.2, affine=False); emb=nn.Embedding(10, 3)
 *   act=nn.Sequential(nn.GELU(), nn.Sigmoid(), nn.Tanh(), nn.Softmax(dim=1),
 *       nn.MaxPool2d((2, 3), stride=1, padding=1, ceil_mode=True),
 *       nn.BatchNorm2d(4, track_running_stats=False))
 * sum(p.numel() for p in Net().parameters()) -> 718 */
static const char *net_repr =
    "Net(\n"
    "  (conv1): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)\n"
    "  (bn1): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
    "  (features): Sequential(\n"
    "    (0): Conv2d(8, 16, kernel_size=(3, 2), stride=(2, 2), dilation=(2, 2), groups=2)\n"
    "    (1): ReLU()\n"
    "    (2): AvgPool2d(kernel_size=2, stride=2, padding=0)\n"
    "    (3): AdaptiveAvgPool2d(output_size=(1, 1))\n"
    "    (4): Flatten(start_dim=1, end_dim=-1)\n"
    "  )\n"
    "  (ln): LayerNorm((16,), eps=1e-05, elementwise_affine=True)\n"
    "  (drop): Dropout(p=0.25, inplace=False)\n"
    "  (head): Linear(in_features=16, out_features=10, bias=False)\n"
    "  (bn): BatchNorm1d(10, eps=0.001, momentum=0.2, affine=False, track_running_stats=True)\n"
    "  (emb): Embedding(10, 3)\n"
    "  (act): Sequential(\n"
    "    (0): GELU(approximate='none')\n"
    "    (1): Sigmoid()\n"
    "    (2): Tanh()\n"
    "    (3): Softmax(dim=1)\n"
    "    (4): MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=1, ceil_mode=True)\n"
    "    (5): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=False)\n"
    "  )\n"
    ")";

static ts_module *net_new(void) {
    ts_module *m = ts_module_alloc(sizeof(ts_module), "Net", NULL);
    ts_module_add(m, "conv1",
                  ts_conv2d_new(1, 8, 3, (ts_conv2d_opts){.padding = {1, 1}, .no_bias = true}));
    ts_module_add(m, "bn1", ts_batch_norm2d_new(8, (ts_norm_opts){0}));
    ts_module *f[] = {
        ts_conv2d_new2(8, 16, 3, 2,
                       (ts_conv2d_opts){.stride = {2, 2}, .dilation = {2, 2}, .groups = 2}),
        ts_relu_new(), ts_avg_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}}),
        ts_adaptive_avg_pool2d_new(1, 1), ts_flatten_new(1, -1)};
    ts_module_add(m, "features", ts_sequential_new(5, f));
    ts_module_add(m, "ln", ts_layer_norm_new(TS_SHAPE(16), (ts_norm_opts){0}));
    ts_module_add(m, "drop", ts_dropout_new(0.25));
    ts_module_add(m, "head", ts_linear_new_ex(16, 10, (ts_linear_opts){.no_bias = true}));
    ts_module_add(
        m, "bn",
        ts_batch_norm1d_new(10, (ts_norm_opts){.eps = 1e-3, .momentum = 0.2, .no_affine = true}));
    ts_module_add(m, "emb", ts_embedding_new(10, 3));
    ts_module *act = ts_module_add(m, "act", ts_sequential_new(0, NULL));
    ts_sequential_append(act, ts_gelu_new());
    ts_sequential_append(act, ts_sigmoid_new());
    ts_sequential_append(act, ts_tanh_new());
    ts_sequential_append(act, ts_softmax_new(1));
    ts_sequential_append(
        act, ts_max_pool2d_new((ts_pool2d_opts){
                 .kernel = {2, 3}, .stride = {1, 1}, .padding = {1, 1}, .ceil_mode = true}));
    ts_sequential_append(act, ts_batch_norm2d_new(4, (ts_norm_opts){.no_running_stats = true}));
    return m;
}

/* [k for k in Net().state_dict()] with torch 1.13 */
static const char *const net_sd_names[] = {"conv1.weight",      "bn1.weight",
                                           "bn1.bias",          "bn1.running_mean",
                                           "bn1.running_var",   "bn1.num_batches_tracked",
                                           "features.0.weight", "features.0.bias",
                                           "ln.weight",         "ln.bias",
                                           "head.weight",       "bn.running_mean",
                                           "bn.running_var",    "bn.num_batches_tracked",
                                           "emb.weight",        "act.5.weight",
                                           "act.5.bias"};

static void test_reprs(void) {
    ts_module *net = net_new();
    CHECK_OK();
    check_repr(net, net_repr);
    CHECK_EQ(ts_module_num_parameters(net), 718);
    ts_tensor_list sd = ts_module_state_dict(net);
    check_names(sd, net_sd_names, 17);
    ts_tensor_list_free(&sd);
    ts_module_free(net);

    /* print(nn.Sequential()), print(nn.MaxPool2d(3, padding=1, dilation=2)),
     * print(nn.AvgPool2d((2, 3), stride=(1, 2), padding=1)), print(nn.LayerNorm((4, 5),
     * elementwise_affine=False)), print(nn.Dropout(0.0)), print(nn.BatchNorm2d(3, eps=1e-8,
     * momentum=0.01)), print(nn.Conv2d(3, 4, 3, padding=(1, 2), bias=False)) */
    ts_module *ms[] = {
        ts_sequential_new(0, NULL),
        ts_max_pool2d_new(
            (ts_pool2d_opts){.kernel = {3, 3}, .padding = {1, 1}, .dilation = {2, 2}}),
        ts_avg_pool2d_new((ts_pool2d_opts){.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}),
        ts_layer_norm_new(TS_SHAPE(4, 5), (ts_norm_opts){.no_affine = true}),
        ts_dropout_new(0.0),
        ts_batch_norm2d_new(3, (ts_norm_opts){.eps = 1e-8, .momentum = 0.01}),
        ts_conv2d_new(3, 4, 3, (ts_conv2d_opts){.padding = {1, 2}, .no_bias = true}),
    };
    const char *want[] = {
        "Sequential()",
        "MaxPool2d(kernel_size=3, stride=3, padding=1, dilation=2, ceil_mode=False)",
        "AvgPool2d(kernel_size=(2, 3), stride=(1, 2), padding=1)",
        "LayerNorm((4, 5), eps=1e-05, elementwise_affine=False)",
        "Dropout(p=0.0, inplace=False)",
        "BatchNorm2d(3, eps=1e-08, momentum=0.01, affine=True, track_running_stats=True)",
        "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 2), bias=False)",
    };
    for (int i = 0; i < 7; i++) {
        check_repr(ms[i], want[i]);
        ts_module_free(ms[i]);
    }
    CHECK_EQ(ts_module_num_parameters(ms[0] = ts_layer_norm_new(TS_SHAPE(4, 5), (ts_norm_opts){0})),
             40);
    ts_module_free(ms[0]);
    CHECK_OK();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 2) ts_sim_configure(4, 0); /* ctest sets TS_SIM_DEVICES=4 */
    test_names();
    test_round_trip(ts_cpu(), ts_cpu(), TS_F32);
    test_round_trip(ts_cpu(), ts_sim(0), TS_F32); /* cross-device: cpu checkpoint, sim:0 model */
    test_round_trip(ts_sim(1), ts_cpu(), TS_F32);
    test_round_trip(ts_cpu(), ts_sim(0), TS_F64); /* and cross-dtype */
    test_strict();
    test_shared();
    test_reprs();
    return ts_test_finish();
}
