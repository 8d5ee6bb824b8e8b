/* test_activation_checkpoint.c — activation checkpointing (src/autograd/checkpoint.c,
 * src/nn/module_checkpoint.c) on every device: gradients of a checkpointed function (inputs and
 * the parameters it captures) equal the plain run's bit for bit (the same ops on the same values),
 * with dropout (the random numbers replayed), under autocast, nested, through the module flag and
 * checkpoint_sequential; the forward keeps less memory (sim's counters); the recomputation runs
 * once, in backward; a function that runs other ops the second time, an input modified in place
 * and bad arguments fail clearly; the context is freed exactly once. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "ts_test.h"

typedef struct fn_ctx {
    ts_tensor *w1, *w2; /* captured parameters */
    double dropout;     /* > 0: dropout in the middle */
    int calls;          /* times the function ran */
    int frees;          /* times ctx_free ran */
    bool vary;          /* a different op sequence on later calls */
    bool nested;        /* checkpoint the inner half again */
    bool quiet_fail;    /* from the second call on: a failing status without an error set */
} fn_ctx;

/* h = tanh(x w1) * sigmoid(x w2 + y); out0 = dropout(h) w1^T, out1 = sum(h^2) */
static ts_status inner(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    fn_ctx *c = p;
    ts_tensor *a = ts_tanh(ts_matmul(in[0], c->w1));
    out[0] = ts_mul(a, ts_sigmoid(ts_add(ts_matmul(in[0], c->w2), in[1])));
    return out[0] ? TS_OK : ts_error();
}

static ts_status body(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_out;
    fn_ctx *c = p;
    c->calls++;
    if (c->quiet_fail && c->calls > 1) return TS_ERR_STATE;
    ts_tensor *h = NULL;
    if (c->nested) {
        if (ts_checkpoint(inner, c, NULL, in, n_in, &h, 1) != TS_OK) return ts_error();
    } else if (inner(c, in, n_in, &h, 1) != TS_OK) {
        return ts_error();
    }
    if (c->vary && c->calls > 1) h = ts_exp(h); /* an extra saving op the second time */
    ts_tensor *d = c->dropout > 0 ? ts_dropout(h, c->dropout, true) : h;
    out[0] = ts_matmul(d, ts_transpose(c->w1, 0, 1));
    out[1] = ts_sum(ts_mul(h, h));
    return out[0] && out[1] ? TS_OK : ts_error();
}

static void count_free(void *p) { ((fn_ctx *)p)->frees++; }

static ts_tensor *param(ts_shape s, ts_device d, int seed) {
    ts_manual_seed((uint64_t)seed);
    ts_tensor *t = ts_detach(ts_to(ts_mul_scalar(ts_randn(s, (ts_opts){0}), 0.5), d));
    ts_set_requires_grad(t, true);
    return t;
}

static bool host(ts_tensor *t, double *v, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(t, ts_cpu()), TS_F64) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, v, (size_t)n * sizeof *v) == TS_OK;
}

/* bit-identical values */
static bool same(ts_tensor *a, ts_tensor *b) {
    static double x[4096], y[4096];
    const int64_t n = a ? ts_numel(a) : 0;
    ts_scope_begin();
    const bool read = a && b && n <= 4096 && ts_numel(b) == n && host(a, x, n) && host(b, y, n);
    ts_scope_end();
    if (!read) return false;
    for (int64_t i = 0; i < n; i++)
        if (x[i] != y[i] && !(isnan(x[i]) && isnan(y[i]))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, x[i], y[i]);
            return false;
        }
    return true;
}

typedef struct run_result {
    ts_tensor *gx, *gy, *gw1, *gw2, *out0; /* kept */
    size_t held;                           /* bytes allocated after the forward (sim) */
} run_result;

/* forward (checkpointed or not) with seed 5 for dropout, then backward of sum(out0 * g) + out1 */
static run_result run(ts_device d, fn_ctx *c, bool ckpt, ts_dtype autocast) {
    run_result r = {0};
    ts_scope_begin();
    ts_tensor *x = param(TS_SHAPE(6, 8), d, 1), *y = param(TS_SHAPE(6, 16), d, 2);
    c->w1 = param(TS_SHAPE(8, 16), d, 3), c->w2 = param(TS_SHAPE(8, 16), d, 4);
    ts_tensor *g = ts_to(ts_randn(TS_SHAPE(6, 8), (ts_opts){0}), d);
    ts_manual_seed(5);
    if (autocast != TS_F32) ts_autocast_begin(ts_device_of(x).type, autocast);
    ts_tensor *in[2] = {x, y}, *out[2] = {NULL, NULL};
    ts_status st;
    ts_mem_stats m0 = {0}, m1 = {0};
    ts_memory_stats(d, &m0);
    if (ckpt)
        st = ts_checkpoint(body, c, count_free, in, 2, out, 2);
    else
        st = body(c, in, 2, out, 2);
    if (autocast != TS_F32) ts_autocast_end();
    ts_memory_stats(d, &m1);
    r.held = m1.allocated - m0.allocated;
    CHECK_EQ(st, TS_OK);
    if (st == TS_OK) {
        ts_manual_seed(99); /* the recomputation must not depend on the generator's state now */
        ts_backward(
            ts_add(ts_sum(ts_mul(ts_to_dtype(out[0], TS_F32), g)), ts_to_dtype(out[1], TS_F32)));
    }
    if (st == TS_OK && ts_error() == TS_OK) { /* a failed backward leaves the results NULL */
        r.out0 = ts_keep(ts_detach(out[0]));
        r.gx = ts_keep(ts_detach(ts_grad(x))), r.gy = ts_keep(ts_detach(ts_grad(y)));
        r.gw1 = ts_keep(ts_detach(ts_grad(c->w1))), r.gw2 = ts_keep(ts_detach(ts_grad(c->w2)));
    }
    ts_error_clear();
    ts_scope_end();
    return r;
}

static void release_result(run_result *r) {
    ts_release(r->gx), ts_release(r->gy), ts_release(r->gw1), ts_release(r->gw2);
    ts_release(r->out0);
}

static void check_same_grads(ts_device d, fn_ctx proto, ts_dtype autocast, const char *what) {
    fn_ctx plain = proto, ck = proto;
    run_result a = run(d, &plain, false, autocast), b = run(d, &ck, true, autocast);
    CHECK(a.gx && b.gx);
    const bool ok = same(a.out0, b.out0) && same(a.gx, b.gx) && same(a.gy, b.gy) &&
                    same(a.gw1, b.gw1) && same(a.gw2, b.gw2);
    if (!ok) fprintf(stderr, "  %s on %s: checkpointed gradients differ\n", what, ts_device_str(d));
    CHECK(ok);
    CHECK_EQ(ck.calls, plain.calls + 1); /* recomputed once, in backward */
    CHECK_EQ(ck.frees, 1);               /* the context freed with the graph */
    release_result(&a), release_result(&b);
}

/* the checkpointed forward holds less: without it the tanh, sigmoid, product... stay for backward
 */
static void check_memory(ts_device d) {
    fn_ctx plain = {0}, ck = {0};
    run_result a = run(d, &plain, false, TS_F32), b = run(d, &ck, true, TS_F32);
    if (!(b.held < a.held))
        fprintf(stderr, "  forward held %zu bytes checkpointed, %zu plain\n", b.held, a.held);
    CHECK(b.held < a.held);
    release_result(&a), release_result(&b);
}

/* the peak of a whole step (forward and backward) of 8 Linear + Tanh blocks: a segment's
 * recomputation is freed with its last node, so checkpoint_sequential's peak is below the plain
 * step's (sim counts every byte) */
static size_t step_peak(ts_device d, ts_module *seq, int segments) {
    ts_mem_stats m0 = {0}, m1 = {0};
    ts_scope_begin();
    ts_manual_seed(4);
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(256, 64), (ts_opts){0}), d);
    ts_memory_reset_peak(d);
    ts_memory_stats(d, &m0);
    ts_tensor *y = segments ? ts_checkpoint_sequential(seq, segments, x) : ts_forward(seq, x);
    ts_backward(ts_sum(ts_mul(y, y)));
    ts_memory_stats(d, &m1);
    CHECK_EQ(ts_error(), TS_OK);
    ts_scope_end();
    return m1.peak_allocated - m0.allocated;
}

static void check_peak(ts_device d) {
    ts_module *layers[16];
    for (int i = 0; i < 16; i += 2)
        layers[i] = ts_linear_new(64, 64), layers[i + 1] = ts_tanh_new();
    ts_module *seq = ts_module_to(ts_sequential_new(16, layers), d);
    const size_t plain = step_peak(d, seq, 0), ck = step_peak(d, seq, 4);
    if (!(ck < plain))
        fprintf(stderr, "  step peak %zu bytes checkpointed, %zu plain\n", ck, plain);
    CHECK(ck < plain);
    ts_module_free(seq);
}

/* the function runs other ops the second time: the backward fails, naming checkpoint */
static void check_mismatch(ts_device d) {
    fn_ctx c = {.vary = true};
    run_result r = run(d, &c, true, TS_F32);
    CHECK(r.gx == NULL);
    release_result(&r);
    ts_scope_begin();
    fn_ctx c2 = {0};
    ts_tensor *x = param(TS_SHAPE(6, 8), d, 1), *y = param(TS_SHAPE(6, 16), d, 2);
    c2.w1 = param(TS_SHAPE(8, 16), d, 3), c2.w2 = param(TS_SHAPE(8, 16), d, 4);
    ts_tensor *in[2] = {x, y}, *out[2];
    CHECK_EQ(ts_checkpoint(body, &c2, NULL, in, 2, out, 2), TS_OK);
    c2.vary = true;
    ts_backward(out[1]);
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "checkpoint") != NULL);
    ts_error_clear();
    /* a recomputation that fails without saying why: the backward says it */
    fn_ctx c4 = c2;
    c4.vary = false, c4.calls = 0, c4.quiet_fail = true;
    CHECK_EQ(ts_checkpoint(body, &c4, NULL, in, 2, out, 2), TS_OK);
    ts_backward(out[1]);
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "recomputed forward failed") != NULL);
    ts_error_clear();
    /* a forward that fails without saying why */
    c4.calls = 1;
    CHECK_EQ(ts_checkpoint(body, &c4, NULL, in, 2, out, 2), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "function failed") != NULL);
    ts_error_clear();
    /* an input modified in place after the forward */
    fn_ctx c3 = c2;
    c3.vary = false, c3.calls = 0;
    ts_tensor *x2 = ts_detach(ts_add_scalar(x, 0.0));
    ts_tensor *in2[2] = {x2, y};
    CHECK_EQ(ts_checkpoint(body, &c3, NULL, in2, 2, out, 2), TS_OK);
    ts_mul_scalar_(x2, 2.0);
    ts_backward(out[1]);
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "modified") != NULL);
    ts_error_clear();
    ts_scope_end();
}

/* retain_graph: a second backward reuses the recomputation */
static void check_twice(ts_device d) {
    ts_scope_begin();
    fn_ctx c = {0};
    ts_tensor *x = param(TS_SHAPE(6, 8), d, 1), *y = param(TS_SHAPE(6, 16), d, 2);
    c.w1 = param(TS_SHAPE(8, 16), d, 3), c.w2 = param(TS_SHAPE(8, 16), d, 4);
    ts_tensor *in[2] = {x, y}, *out[2];
    CHECK_EQ(ts_checkpoint(body, &c, count_free, in, 2, out, 2), TS_OK);
    ts_backward_ex(out[1], NULL, (ts_backward_opts){.retain_graph = true});
    ts_tensor *g1 = ts_detach(ts_add_scalar(ts_grad(x), 0.0));
    ts_set_grad(x, NULL);
    ts_backward(out[1]);
    CHECK(same(g1, ts_grad(x)));
    CHECK_EQ(c.calls, 2);
    CHECK_EQ(c.frees, 0); /* out[1] still holds the graph */
    ts_backward(out[1]);  /* the graph is freed now */
    CHECK_EQ(ts_error(), TS_ERR_STATE);
    ts_error_clear();
    ts_scope_end();
    CHECK_EQ(c.frees, 1);
}

/* module flag and checkpoint_sequential: the gradients of a plain run */
/* tanh(x) that counts its forwards */
static int counted_calls;
static ts_tensor *counted_tanh(ts_module *self, ts_tensor *x) {
    (void)self;
    counted_calls++;
    return ts_tanh(x);
}

static void check_modules(ts_device d) {
    ts_manual_seed(7);
    ts_module *layers[] = {ts_linear_new(8, 16),
                           ts_module_alloc(sizeof(ts_module), "CountedTanh", counted_tanh),
                           ts_linear_new(16, 16), ts_relu_new(), ts_linear_new(16, 4)};
    ts_module *seq = ts_sequential_new(5, layers);
    CHECK(seq && ts_module_to(seq, d) == seq && ts_error() == TS_OK);
    ts_tensor *grads[3][3] = {{0}};
    for (int mode = 0; mode < 3; mode++) {
        ts_scope_begin();
        ts_manual_seed(8);
        ts_tensor *x = ts_to(ts_randn(TS_SHAPE(5, 8), (ts_opts){0}), d);
        ts_module *mid = ts_module_child(seq, "1");
        ts_module_set_checkpoint(mid, mode == 1);
        CHECK(ts_module_checkpointed(mid) == (mode == 1));
        counted_calls = 0;
        /* checkpoint_sequential, 2 segments of 5: children 0-1 checkpointed, 2-4 not */
        ts_tensor *out = mode == 2 ? ts_checkpoint_sequential(seq, 2, x) : ts_forward(seq, x);
        CHECK_EQ(counted_calls, 1);
        ts_backward(ts_sum(ts_mul(out, out)));
        CHECK_EQ(ts_error(), TS_OK);
        CHECK_EQ(counted_calls, mode == 0 ? 1 : 2); /* recomputed in backward */
        const char *names[3] = {"0.weight", "2.weight", "4.bias"};
        for (int k = 0; k < 3; k++) {
            ts_tensor *p = ts_module_get(seq, names[k]);
            grads[mode][k] = ts_keep(ts_detach(ts_add_scalar(ts_grad(p), 0.0)));
            ts_set_grad(p, NULL);
        }
        ts_scope_end();
    }
    for (int k = 0; k < 3; k++) {
        CHECK(same(grads[0][k], grads[1][k]));
        CHECK(same(grads[0][k], grads[2][k]));
        for (int mode = 0; mode < 3; mode++) ts_release(grads[mode][k]);
    }
    ts_module_free(seq);
}

/* GPT and ResNet with every block (and every 2nd) checkpointed: the plain run's loss gradients.
 * Batch norm's running statistics are updated once more per checkpointed block (as in PyTorch);
 * the gradients use the batch's statistics and do not see them. */
static ts_tensor *model_grad(ts_module *m, ts_tensor *in, const char *param, bool gpt) {
    ts_scope_begin();
    ts_manual_seed(21);
    ts_tensor *out = ts_forward(m, in);
    ts_backward(gpt ? ts_mean(ts_mul(out, out)) : ts_sum(ts_mul(out, out)));
    ts_tensor *p = ts_module_get(m, param);
    ts_tensor *g = ts_keep(ts_detach(ts_add_scalar(ts_grad(p), 0.0)));
    ts_set_grad(p, NULL);
    ts_scope_end();
    return g;
}

static void check_models(ts_device d) {
    ts_manual_seed(9);
    ts_module *gpt = ts_module_to(ts_gpt_new((ts_gpt_config){.vocab_size = 16,
                                                             .context = 8,
                                                             .n_layer = 3,
                                                             .n_head = 2,
                                                             .n_embd = 16,
                                                             .dropout = 0.2}),
                                  d);
    ts_module *rn = ts_module_to(
        ts_resnet20_new((ts_resnet_config){.num_classes = 5, .width = 4, .in_channels = 1}), d);
    CHECK(gpt && rn && ts_error() == TS_OK);
    ts_scope_begin();
    const double tok[16] = {1, 5, 3, 9, 2, 2, 15, 0, 4, 4, 7, 11, 13, 6, 8, 1};
    ts_tensor *idx =
        ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(2, 8), tok, (ts_opts){0}), TS_I64), d);
    ts_manual_seed(10);
    ts_tensor *img = ts_to(ts_randn(TS_SHAPE(2, 1, 8, 8), (ts_opts){0}), d);
    /* sub: the GPT's chosen blocks checkpointed by sublayer (the module flag then stays off) */
    for (int k = 0; k <= 4; k++) {
        const int every = k % 3, sub = k >= 3;
        CHECK_EQ(sub ? ts_gpt_checkpoint_sublayers(gpt, every)
                     : ts_gpt_checkpoint_blocks(gpt, every),
                 TS_OK);
        CHECK_EQ(ts_resnet_checkpoint_blocks(rn, every), TS_OK);
        CHECK(ts_module_checkpointed(ts_module_child(gpt, "blocks.0")) == (every > 0 && !sub));
        CHECK(ts_module_checkpointed(ts_module_child(gpt, "blocks.1")) == (every == 1 && !sub));
        /* resnet20: 3 blocks a stage, counted over the stages */
        CHECK(ts_module_checkpointed(ts_module_child(rn, "layer1.1")) == (every == 1));
        CHECK(ts_module_checkpointed(ts_module_child(rn, "layer1.2")) == (every > 0));
        CHECK(ts_module_checkpointed(ts_module_child(rn, "layer2.0")) == (every == 1));
        ts_tensor *g1 = model_grad(gpt, idx, "blocks.0.linear1.weight", true);
        ts_tensor *g2 = model_grad(rn, img, "layer1.0.conv1.weight", false);
        static ts_tensor *ref1, *ref2; /* all of them owned by the scope above */
        if (every == 0) {
            ref1 = g1, ref2 = g2;
            continue;
        }
        CHECK(same(ref1, g1));
        CHECK(same(ref2, g2));
    }
    CHECK_EQ(ts_gpt_checkpoint_blocks(rn, 1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_resnet_checkpoint_blocks(gpt, 1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_gpt_checkpoint_blocks(gpt, -1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_gpt_checkpoint_sublayers(rn, 1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_gpt_checkpoint_sublayers(gpt, -1), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_transformer_encoder_layer_checkpoint_sublayers(rn, true), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_transformer_encoder_layer_checkpoint_sublayers(NULL, true), TS_ERR_ARG);
    ts_error_clear();
    ts_scope_end();
    ts_module_free(gpt);
    ts_module_free(rn);
}

static ts_status fail_fn(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)p, (void)in, (void)n_in, (void)out, (void)n_out;
    return ts_error_set(TS_ERR_ARG, "fail_fn: planned failure");
}

/* a post-norm TransformerEncoderLayer with dropout, a float mask and a key padding mask,
 * checkpointed by sublayer (the masks are inputs of the attention's checkpoint): the output and
 * the gradients of the input and of a weight in each sublayer equal the plain layer's */
static void check_sublayers(ts_device d) {
    ts_manual_seed(12);
    ts_module *layer = ts_module_to(
        ts_transformer_encoder_layer_new(
            16, 2,
            (ts_transformer_opts){
                .dim_feedforward = 32, .has_dropout = true, .dropout = 0.3, .batch_first = true}),
        d);
    CHECK(layer != NULL);
    ts_scope_begin();
    ts_manual_seed(13);
    ts_tensor *x0 = ts_to(ts_randn(TS_SHAPE(2, 6, 16), (ts_opts){0}), d);
    ts_tensor *mask = ts_to(ts_randn(TS_SHAPE(6, 6), (ts_opts){0}), d);
    const double pad[12] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1};
    ts_tensor *kpm =
        ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(2, 6), pad, (ts_opts){0}), TS_BOOL), d);
    ts_tensor *res[2][4];
    for (int sub = 0; sub <= 1; sub++) {
        CHECK_EQ(ts_transformer_encoder_layer_checkpoint_sublayers(layer, sub), TS_OK);
        ts_tensor *x = ts_detach(x0);
        ts_set_requires_grad(x, true);
        ts_manual_seed(14);
        ts_tensor *y = ts_transformer_encoder_layer(layer, x, mask, false, kpm);
        ts_backward(ts_sum(ts_mul(y, y)));
        CHECK_OK();
        const char *w[2] = {"self_attn.in_proj_weight", "linear1.weight"};
        res[sub][0] = ts_detach(y);
        res[sub][1] = ts_add_scalar(ts_grad(x), 0.0);
        for (int i = 0; i < 2; i++) {
            ts_tensor *p = ts_module_get(layer, w[i]);
            res[sub][2 + i] = ts_add_scalar(ts_grad(p), 0.0);
            ts_set_grad(p, NULL);
        }
    }
    for (int i = 0; i < 4; i++) CHECK(same(res[0][i], res[1][i]));
    ts_scope_end();
    ts_module_free(layer);
}

/* Each recomputed tensor is freed once the node that saved it has run: in the backward of
 * tanh(tanh(tanh(tanh(x)))) checkpointed (each tanh saves its output, S bytes), when y2's
 * gradient arrives the backward of the last two tanh has run, so of the four recomputed outputs
 * only y1 and y2 are held: the device holds what it held before the backward (x, y4, the loss)
 * plus y1, y2 and at most two gradients of S bytes (y3's and y2's), 4 S; holding all four
 * recomputed outputs until the function's backward ends would be 6 S. */
enum { REL_N = 16384 }; /* S = 64 KiB */
typedef struct rel_ctx {
    ts_device d;
    bool recomputing; /* the recomputation's y2 is never differentiated: no hook on it */
    size_t at_hook;
    int fired;
} rel_ctx;

static ts_tensor *rel_hook(void *p, ts_tensor *g) {
    rel_ctx *c = p;
    ts_mem_stats m;
    ts_memory_stats(c->d, &m);
    c->at_hook = m.allocated;
    c->fired++;
    return g;
}

static ts_status tanh4(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    rel_ctx *c = p;
    ts_tensor *y2 = ts_tanh(ts_tanh(in[0]));
    if (!c->recomputing && y2 && ts_register_tensor_hook(y2, rel_hook, c, NULL) <= 0)
        return ts_error();
    out[0] = ts_tanh(ts_tanh(y2));
    return out[0] ? TS_OK : ts_error();
}

static void check_release(ts_device d) {
    const size_t S = REL_N * sizeof(float);
    rel_ctx c = {.d = d};
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(REL_N), (ts_opts){0}), d);
    ts_set_requires_grad(x, true);
    ts_tensor *y = NULL;
    CHECK_EQ(ts_checkpoint(tanh4, &c, NULL, &x, 1, &y, 1), TS_OK);
    c.recomputing = true;
    ts_tensor *loss = ts_sum(y);
    ts_mem_stats m0;
    ts_memory_stats(d, &m0);
    ts_backward(loss);
    CHECK_OK();
    CHECK_EQ(c.fired, 1);
    const bool ok = c.at_hook <= m0.allocated + 4 * S && c.at_hook >= m0.allocated + 2 * S;
    if (!ok)
        fprintf(stderr, "  at y2's gradient %zu bytes, before the backward %zu, S %zu\n", c.at_hook,
                m0.allocated, S);
    CHECK(ok);
    ts_scope_end();
}

static void check_refusals(void) {
    fn_ctx c = {0};
    ts_tensor *out[1];
    CHECK_EQ(ts_checkpoint(NULL, &c, count_free, NULL, 0, out, 1), TS_ERR_ARG);
    CHECK_EQ(c.frees, 1);
    ts_error_clear();
    CHECK_EQ(ts_checkpoint(body, &c, count_free, NULL, 0, out, 0), TS_ERR_ARG);
    CHECK_EQ(c.frees, 2);
    ts_error_clear();
    CHECK_EQ(ts_checkpoint(fail_fn, &c, count_free, NULL, 0, out, 1), TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "planned") != NULL);
    CHECK_EQ(c.frees, 3);
    ts_error_clear();
    CHECK(ts_checkpoint_sequential(NULL, 2, NULL) == NULL && ts_error() == TS_ERR_ARG);
    ts_error_clear();
    /* grad mode off: a plain call */
    ts_scope_begin();
    fn_ctx p = {0};
    ts_tensor *x = param(TS_SHAPE(6, 8), ts_cpu(), 1), *y = param(TS_SHAPE(6, 16), ts_cpu(), 2);
    p.w1 = param(TS_SHAPE(8, 16), ts_cpu(), 3), p.w2 = param(TS_SHAPE(8, 16), ts_cpu(), 4);
    ts_tensor *in[2] = {x, y}, *o2[2];
    ts_no_grad_begin();
    CHECK_EQ(ts_checkpoint(body, &p, count_free, in, 2, o2, 2), TS_OK);
    ts_no_grad_end();
    CHECK(p.calls == 1 && p.frees == 1 && ts_grad_fn_name(o2[0]) == NULL);
    ts_scope_end();
}
/* A function of eight outputs (k + 1) tanh(x): every output's gradient reaches x through the
 * recomputation as in the plain run (the recomputation's outputs array holds all eight). */
enum { MANY = 8 };
static ts_status many_out(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)p, (void)n_in;
    ts_tensor *h = ts_tanh(in[0]);
    for (int k = 0; k < n_out; k++) out[k] = ts_mul_scalar(ts_mul(h, in[0]), k + 1.0);
    for (int k = 0; k < n_out; k++)
        if (!out[k]) return ts_error();
    return TS_OK;
}

static void check_many_outputs(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = param(TS_SHAPE(5, 7), d, 21);
    ts_tensor *grads[2];
    for (int ck = 0; ck < 2; ck++) {
        ts_tensor *out[MANY];
        if (ck)
            CHECK_EQ(ts_checkpoint(many_out, NULL, NULL, &x, 1, out, MANY), TS_OK);
        else
            CHECK_EQ(many_out(NULL, &x, 1, out, MANY), TS_OK);
        ts_tensor *loss = ts_sum(out[0]);
        for (int k = 1; k < MANY; k++) loss = ts_add(loss, ts_sum(out[k]));
        ts_backward(loss);
        CHECK_OK();
        grads[ck] = ts_add_scalar(ts_grad(x), 0.0);
        ts_set_grad(x, NULL);
    }
    CHECK(same(grads[0], grads[1]));
    ts_scope_end();
}

/* A recomputation that saves a tensor of another shape than the forward did (one count of
 * saves): [3] where the forward saved [3, 0] (the same leading dims, one dim fewer), [3, 1]
 * where it saved [3] (one more), [1, 3] where it saved [3, 1]; the backward refuses, naming the
 * tensor. */
typedef struct shape_ctx {
    int calls, variant;
} shape_ctx;

static ts_status shape_fn(void *p, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    shape_ctx *c = p;
    const bool first = c->calls++ == 0;
    ts_tensor *x = in[0], *t = x; /* x: [3] */
    if (c->variant == 0) t = first ? ts_narrow(ts_unsqueeze(x, 1), 1, 0, 0) : x;
    if (c->variant == 1) t = first ? x : ts_unsqueeze(x, 1);
    if (c->variant == 2) t = first ? ts_unsqueeze(x, 1) : ts_unsqueeze(x, 0);
    out[0] = ts_sum(ts_tanh(t)); /* tanh saves its output */
    return out[0] ? TS_OK : ts_error();
}

static void check_shape_mismatch(ts_device d) {
    for (int v = 0; v < 3; v++) {
        ts_scope_begin();
        ts_tensor *x = param(TS_SHAPE(3), d, 22);
        shape_ctx c = {.variant = v};
        ts_tensor *out = NULL;
        CHECK_EQ(ts_checkpoint(shape_fn, &c, NULL, &x, 1, &out, 1), TS_OK);
        ts_backward(out);
        CHECK_EQ(c.calls, 2);
        CHECK_ERR_HAS(TS_ERR_STATE, "recomputed tensor 0 is");
        ts_scope_end();
    }
}

/* Each allocation of a checkpointed forward failed in turn: an error (out of memory, or the
 * op's own) with no output, or success with every output; never success without outputs. */
static void check_alloc_faults(void) {
    ts_scope_begin();
    fn_ctx c = {0};
    ts_tensor *x = param(TS_SHAPE(6, 8), ts_cpu(), 1), *y = param(TS_SHAPE(6, 16), ts_cpu(), 2);
    c.w1 = param(TS_SHAPE(8, 16), ts_cpu(), 3), c.w2 = param(TS_SHAPE(8, 16), ts_cpu(), 4);
    ts_tensor *in[2] = {x, y}, *out[2];
    ts_fault_alloc_set(0);
    CHECK_EQ(ts_checkpoint(body, &c, NULL, in, 2, out, 2), TS_OK);
    const uint64_t count = ts_fault_alloc_count();
    ts_fault_alloc_set(-1);
    int failed = 0;
    for (uint64_t n = 1; n <= count; n++) {
        ts_scope_begin();
        out[0] = out[1] = NULL;
        ts_fault_alloc_set((int64_t)n);
        const ts_status st = ts_checkpoint(body, &c, NULL, in, 2, out, 2);
        ts_fault_alloc_set(-1);
        const ts_status err = ts_error();
        const bool ok = st == TS_OK ? out[0] && out[1] && err == TS_OK : err == st;
        if (!ok)
            printf("  allocation %llu of %llu failed: status %d, error %d, outputs %p %p\n",
                   (unsigned long long)n, (unsigned long long)count, (int)st, (int)err,
                   (void *)out[0], (void *)out[1]);
        CHECK(ok);
        failed += st != TS_OK;
        ts_error_clear();
        ts_scope_end();
    }
    CHECK(failed > 0);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        const ts_device d = devs[i];
        check_same_grads(d, (fn_ctx){0}, TS_F32, "plain");
        check_same_grads(d, (fn_ctx){.dropout = 0.4}, TS_F32, "dropout");
        check_same_grads(d, (fn_ctx){.nested = true, .dropout = 0.2}, TS_F32, "nested");
        check_same_grads(d, (fn_ctx){0}, TS_BF16, "autocast bf16");
        check_twice(d);
        check_mismatch(d);
        check_modules(d);
        check_models(d);
        check_sublayers(d);
        check_many_outputs(d);
        check_shape_mismatch(d);
        if (d.type == TS_SIM) { /* sim counts every byte */
            check_memory(d);
            check_peak(d);
            check_release(d);
        }
    }
    check_refusals();
    check_alloc_faults();
    return ts_test_finish();
}
