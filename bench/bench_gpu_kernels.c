/* bench_gpu_kernels.c — the fused kernels of the CUDA issue alone, on cuda:0, for
 * bench/run_gpu_kernels.sh to set beside PyTorch's (bench_gpu_kernels_torch.py): the same shapes,
 * dtypes and seeds on both sides, GPT-2 124M's (batch 8 of 1024 tokens, 768 wide, 12 heads, a
 * 50257-word vocabulary) and ResNet-50's (batch 128, its first 56x56 stage):
 *   layernorm_{f32,bf16}       layer norm over [8192, 768], forward + backward (dx, dweight, dbias)
 *   batchnorm_{nchw,nhwc}_f32  training batch norm of [128, 256, 56, 56], forward + backward
 *   cross_entropy_{f32,bf16}   mean cross-entropy of [8192, 50257] logits, forward + backward
 *   sdpa_causal_bf16           causal attention q, k, v [8, 12, 1024, 64], forward + backward
 *   sdpa_bf16_e128             attention q, k, v [8, 6, 1024, 128], forward + backward
 *   sdpa_*_fwd                 the same two, forward alone (inputs not requiring grad)
 *   softmax_f32                softmax over [8192, 4096], forward + backward
 *   adamw_f32                  one AdamW step over GPT-2 124M's 148 parameter tensors
 *   linear_bias_{f32,bf16}     GPT-2's MLP up-projection, x [8192, 768] @ w [3072, 768]^T + b,
 *                              forward + backward (dx, dw, db): cuBLASLt's bias and bias-gradient
 *                              epilogues (matmul_bias, matmul_bgrad)
 *   linear_bias_*_unfused      the same as mm + add (the product, the bias add and the bias
 *                              gradient's reduction separate): what the epilogues replace
 *   linear_{relu,gelu_tanh}_{f32,bf16}  the same up-projection followed by relu / GELU's tanh
 *                              form, Sequential(Linear, act), forward + backward: the activation
 *                              in cuBLASLt's epilogue (matmul_bias_act, decision 0032)
 *   linear_*_{f32,bf16}_unfused  the same as linear, then the activation's own ops
 *   mlp_{relu,gelu_tanh}_{f32,bf16}  GPT-2's whole MLP, Sequential(Linear(768, 3072), act,
 *                              Linear(3072, 768)) on [8192, 768], forward + backward: one node
 *                              (mlp_fused.c), the activation's gradient and the first bias
 *                              gradient in the second layer's input-gradient GEMM
 *                              (matmul_dact_bgrad: DRELU_BGRAD / DGELU_BGRAD, decision 0032)
 *   mlp_*_{f32,bf16}_unfused   the same as linear, the activation's own ops, linear
 * Each line is "name ms-per-call ms": the median of rounds of calls between two device
 * synchronisations, after a warm-up round; "name: failed: <message>" when the case fails. Without
 * a GPU prints "bench_gpu_kernels: SKIP: <reason>" and exits 0. Usage: bench_gpu_kernels [quick]
 * (quick: fewer rounds, same shapes). BENCH_GPU_DEVICE=sim:0 runs the logic on a machine without
 * a GPU (small shapes there; the numbers are meaningless). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define BENCH_NAME "bench_gpu_kernels"
#include "bench_gpu_util.h"
#include "bench_util.h"

static bool small; /* sim: shapes cut down so the logic runs in seconds */

typedef bool (*kernel_fn)(void *ctx); /* one call; false on a Tessera error */

/* median ms per call over `runs` rounds of `iters` calls (one warm-up round first); < 0 when a call
 * failed (the error stays pending for the caller) */
static double time_calls(kernel_fn fn, void *ctx, int iters, int runs) {
    double per_call[MAX_RUNS];
    for (int r = 0; r <= runs; r++) {
        synchronize();
        const double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ts_scope_begin();
            const bool ok = fn(ctx);
            ts_scope_end();
            if (!ok || ts_error() != TS_OK) return -1;
        }
        synchronize();
        if (ts_error() != TS_OK) return -1;
        if (r > 0) per_call[r - 1] = (now_s() - t0) / iters * 1e3;
    }
    return median(per_call, runs);
}

static void report(const char *name, double ms) {
    if (ms >= 0) {
        printf("%s %.4f ms\n", name, ms);
    } else {
        printf("%s: failed: %s\n", name, ts_error_message());
        ts_error_clear();
    }
    fflush(stdout);
}

static ts_opts on_dev(ts_dtype dt) { return (ts_opts){.dtype = dt, .device = bench_device}; }

/* a leaf of N(0, 1) * scale on the device, of dtype dt, requiring grad when asked */
static ts_tensor *leaf(ts_shape s, ts_dtype dt, double scale, bool grad) {
    ts_scope_begin();
    ts_tensor *t = ts_to_dtype(ts_mul_scalar(ts_randn(s, on_dev(TS_F32)), scale), dt);
    t = ts_keep(ts_detach(t));
    ts_scope_end();
    if (t && grad) ts_set_requires_grad(t, true);
    return t;
}

static int64_t d(int64_t full, int64_t cut) { return small ? cut : full; }

/* ------------------------------------------------------------------ the cases */
typedef struct {
    ts_tensor *in[4];   /* the operands; in[0] (and the weights) require grad */
    ts_tensor *dy;      /* the output's gradient */
    ts_tensor *target;  /* cross-entropy's classes */
    ts_memory_format f; /* batch norm's layout */
    bool causal;
} op_ctx;

static void clear_grads(op_ctx *c) {
    for (int i = 0; i < 4; i++)
        if (c->in[i]) ts_set_grad(c->in[i], NULL);
}

static void free_ctx(op_ctx *c) {
    for (int i = 0; i < 4; i++) ts_release(c->in[i]);
    ts_release(c->dy), ts_release(c->target);
    *c = (op_ctx){0};
}

static bool layernorm_call(void *p) {
    op_ctx *c = p;
    ts_tensor *y =
        ts_layer_norm(c->in[0], TS_SHAPE(ts_size(c->in[0], 1)), c->in[1], c->in[2], 1e-5);
    if (!y) return false;
    ts_backward_with(y, c->dy);
    clear_grads(c);
    return true;
}

static void bench_layernorm(const char *name, ts_dtype dt, int runs) {
    const int64_t rows = d(8192, 64), cols = d(768, 96);
    op_ctx c = {.in = {leaf(TS_SHAPE(rows, cols), dt, 1, true), leaf(TS_SHAPE(cols), dt, 1, true),
                       leaf(TS_SHAPE(cols), dt, 1, true)},
                .dy = leaf(TS_SHAPE(rows, cols), dt, 1, false)};
    report(name, c.dy ? time_calls(layernorm_call, &c, 20, runs) : -1);
    free_ctx(&c);
}

static bool batchnorm_call(void *p) {
    op_ctx *c = p;
    ts_tensor *y = ts_batch_norm(c->in[0], NULL, NULL, c->in[1], c->in[2], true, 0.1, 1e-5);
    if (!y) return false;
    ts_backward_with(y, c->dy);
    clear_grads(c);
    return true;
}

static void bench_batchnorm(const char *name, ts_memory_format f, int runs) {
    const ts_shape s = TS_SHAPE(d(128, 4), d(256, 8), d(56, 5), d(56, 5));
    op_ctx c = {.in = {leaf(s, TS_F32, 1, false), leaf(TS_SHAPE(s.dims[1]), TS_F32, 1, true),
                       leaf(TS_SHAPE(s.dims[1]), TS_F32, 1, true)},
                .dy = leaf(s, TS_F32, 1, false)};
    if (c.in[0] && c.dy) {
        ts_tensor *x = ts_contiguous_format(c.in[0], f), *dy = ts_contiguous_format(c.dy, f);
        ts_release(c.in[0]), ts_release(c.dy);
        c.in[0] = x, c.dy = dy;
        if (x) ts_set_requires_grad(x, true);
    }
    report(name, c.in[0] && c.dy ? time_calls(batchnorm_call, &c, 10, runs) : -1);
    free_ctx(&c);
}

static bool cross_entropy_call(void *p) {
    op_ctx *c = p;
    ts_tensor *loss = ts_cross_entropy(c->in[0], c->target);
    if (!loss) return false;
    ts_backward(loss);
    clear_grads(c);
    return true;
}

static void bench_cross_entropy(const char *name, ts_dtype dt, int runs) {
    const int64_t rows = d(8192, 64), classes = d(50257, 1000);
    op_ctx c = {.in = {leaf(TS_SHAPE(rows, classes), dt, 2, true)}};
    ts_scope_begin();
    c.target = ts_keep(ts_to_dtype(
        ts_mul_scalar(ts_rand(TS_SHAPE(rows), on_dev(TS_F32)), (double)classes - 0.5), TS_I64));
    ts_scope_end();
    report(name, c.in[0] && c.target ? time_calls(cross_entropy_call, &c, 10, runs) : -1);
    free_ctx(&c);
}

static bool sdpa_call(void *p) {
    op_ctx *c = p;
    ts_tensor *y =
        ts_scaled_dot_product_attention(c->in[0], c->in[1], c->in[2], NULL, 0, c->causal, 0);
    if (!y) return false;
    ts_backward_with(y, c->dy);
    clear_grads(c);
    return true;
}

static bool sdpa_forward_call(void *p) {
    op_ctx *c = p;
    return ts_scaled_dot_product_attention(c->in[0], c->in[1], c->in[2], NULL, 0, c->causal, 0) !=
           NULL;
}

/* forward + backward; forward alone (name_fwd) when fwd_only */
static void bench_sdpa(const char *name, int64_t heads, int64_t e, bool causal, bool fwd_only,
                       int runs) {
    const ts_shape s = TS_SHAPE(d(8, 1), d(heads, 2), d(1024, 64), small ? 16 : e);
    const bool grad = !fwd_only;
    op_ctx c = {
        .in = {leaf(s, TS_BF16, 1, grad), leaf(s, TS_BF16, 1, grad), leaf(s, TS_BF16, 1, grad)},
        .dy = leaf(s, TS_BF16, 1, false),
        .causal = causal};
    char full[64];
    snprintf(full, sizeof full, "%s%s", name, fwd_only ? "_fwd" : "");
    report(full, c.dy ? time_calls(fwd_only ? sdpa_forward_call : sdpa_call, &c, 10, runs) : -1);
    free_ctx(&c);
}

static bool softmax_call(void *p) {
    op_ctx *c = p;
    ts_tensor *y = ts_softmax(c->in[0], -1);
    if (!y) return false;
    ts_backward_with(y, c->dy);
    clear_grads(c);
    return true;
}

static void bench_softmax(int runs) {
    const ts_shape s = TS_SHAPE(d(8192, 64), d(4096, 100));
    op_ctx c = {.in = {leaf(s, TS_F32, 1, true)}, .dy = leaf(s, TS_F32, 1, false)};
    report("softmax_f32", c.dy ? time_calls(softmax_call, &c, 20, runs) : -1);
    free_ctx(&c);
}

/* GPT-2 124M's parameters: wte, wpe, 12 blocks of (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 * mlp.c_proj; weights and biases), ln_f: 148 tensors */
#define GPT2_TENSORS 148
static bool linear_call(void *p) {
    op_ctx *c = p;
    ts_tensor *y = c->causal ? ts_add(ts_mm(c->in[0], ts_t(c->in[1])), c->in[2])
                             : ts_linear(c->in[0], c->in[1], c->in[2]);
    if (!y) return false;
    ts_backward_with(y, c->dy);
    clear_grads(c);
    return true;
}

/* linear with a bias, forward + backward; `unfused` (in ctx.causal): mm, then add */
static void bench_linear(const char *name, ts_dtype dt, bool unfused, int runs) {
    const int64_t rows = d(8192, 64), in = d(768, 96), out = d(3072, 80);
    op_ctx c = {.in = {leaf(TS_SHAPE(rows, in), dt, 1, true),
                       leaf(TS_SHAPE(out, in), dt, 0.02, true),
                       leaf(TS_SHAPE(out), dt, 0.02, true)},
                .dy = leaf(TS_SHAPE(rows, out), dt, 1, false),
                .causal = unfused};
    report(name, c.dy ? time_calls(linear_call, &c, 20, runs) : -1);
    free_ctx(&c);
}

/* Linear + activation: Sequential(Linear, ReLU or GELU(approximate='tanh')), which runs the pair
 * through matmul_bias_act (cuBLASLt's RELU_BIAS / GELU_AUX_BIAS epilogues), or `unfused`: linear
 * (matmul_bias) then the activation's own ops, what the epilogue replaces */
typedef struct {
    ts_module *seq;
    ts_tensor *x, *w, *b, *dy; /* w and b borrowed from seq */
    bool gelu, unfused;
} act_ctx;

static bool linear_act_call(void *p) {
    act_ctx *c = p;
    ts_tensor *y;
    if (c->unfused) {
        ts_tensor *z = ts_linear(c->x, c->w, c->b);
        y = c->gelu ? ts_gelu_tanh(z) : ts_relu(z);
    } else {
        y = ts_forward(c->seq, c->x);
    }
    if (!y) return false;
    ts_backward_with(y, c->dy);
    ts_set_grad(c->x, NULL), ts_set_grad(c->w, NULL), ts_set_grad(c->b, NULL);
    return true;
}

static void bench_linear_act(const char *name, ts_dtype dt, bool gelu, bool unfused, int runs) {
    const int64_t rows = d(8192, 64), in = d(768, 96), out = d(3072, 80);
    ts_module *lin =
        ts_linear_new_ex(in, out, (ts_linear_opts){.dtype = dt, .device = bench_device});
    ts_module *act = gelu ? ts_gelu_new_ex(TS_GELU_TANH) : ts_relu_new();
    ts_module *seq = lin && act ? ts_sequential_new(2, (ts_module *const[]){lin, act}) : NULL;
    act_ctx c = {.seq = seq,
                 .x = leaf(TS_SHAPE(rows, in), dt, 1, true),
                 .w = seq ? ts_module_get(seq, "0.weight") : NULL,
                 .b = seq ? ts_module_get(seq, "0.bias") : NULL,
                 .dy = leaf(TS_SHAPE(rows, out), dt, 1, false),
                 .gelu = gelu,
                 .unfused = unfused};
    report(name, c.x && c.w && c.b && c.dy ? time_calls(linear_act_call, &c, 20, runs) : -1);
    ts_release(c.x), ts_release(c.dy);
    if (seq)
        ts_module_free(seq);
    else
        ts_module_free(lin), ts_module_free(act);
}

/* GPT-2's MLP: Sequential(Linear, ReLU or GELU(approximate='tanh'), Linear), one node whose
 * backward takes matmul_dact_bgrad, or `unfused`: linear, the activation's ops, linear */
typedef struct {
    ts_module *seq;
    ts_tensor *x, *p[4], *dy; /* p (W1, b1, W2, b2) borrowed from seq */
    bool gelu, unfused;
} mlp_ctx;

static bool mlp_call(void *p) {
    mlp_ctx *c = p;
    ts_tensor *y;
    if (c->unfused) {
        ts_tensor *z = ts_linear(c->x, c->p[0], c->p[1]);
        y = ts_linear(c->gelu ? ts_gelu_tanh(z) : ts_relu(z), c->p[2], c->p[3]);
    } else {
        y = ts_forward(c->seq, c->x);
    }
    if (!y) return false;
    ts_backward_with(y, c->dy);
    ts_set_grad(c->x, NULL);
    for (int i = 0; i < 4; i++) ts_set_grad(c->p[i], NULL);
    return true;
}

static void bench_mlp(const char *name, ts_dtype dt, bool gelu, bool unfused, int runs) {
    const int64_t rows = d(8192, 64), in = d(768, 96), hid = d(3072, 80);
    const ts_linear_opts o = {.dtype = dt, .device = bench_device};
    ts_module *ms[3] = {ts_linear_new_ex(in, hid, o),
                        gelu ? ts_gelu_new_ex(TS_GELU_TANH) : ts_relu_new(),
                        ts_linear_new_ex(hid, in, o)};
    ts_module *seq = ms[0] && ms[1] && ms[2] ? ts_sequential_new(3, ms) : NULL;
    static const char *const names[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    mlp_ctx c = {.seq = seq,
                 .x = leaf(TS_SHAPE(rows, in), dt, 1, true),
                 .dy = leaf(TS_SHAPE(rows, in), dt, 1, false),
                 .gelu = gelu,
                 .unfused = unfused};
    bool ok = seq && c.x && c.dy;
    for (int i = 0; i < 4 && ok; i++) ok = (c.p[i] = ts_module_get(seq, names[i])) != NULL;
    report(name, ok ? time_calls(mlp_call, &c, 10, runs) : -1);
    ts_release(c.x), ts_release(c.dy);
    if (seq)
        ts_module_free(seq);
    else
        for (int i = 0; i < 3; i++) ts_module_free(ms[i]);
}

static int gpt2_shapes(ts_shape *s) {
    const int64_t v = d(50257, 500), t = d(1024, 64), c = d(768, 32);
    int n = 0;
    s[n++] = TS_SHAPE(v, c);
    s[n++] = TS_SHAPE(t, c);
    for (int l = 0; l < 12; l++) {
        s[n++] = TS_SHAPE(c), s[n++] = TS_SHAPE(c);
        s[n++] = TS_SHAPE(3 * c, c), s[n++] = TS_SHAPE(3 * c);
        s[n++] = TS_SHAPE(c, c), s[n++] = TS_SHAPE(c);
        s[n++] = TS_SHAPE(c), s[n++] = TS_SHAPE(c);
        s[n++] = TS_SHAPE(4 * c, c), s[n++] = TS_SHAPE(4 * c);
        s[n++] = TS_SHAPE(c, 4 * c), s[n++] = TS_SHAPE(c);
    }
    s[n++] = TS_SHAPE(c), s[n++] = TS_SHAPE(c);
    return n;
}

static bool adamw_call(void *p) { return ts_optim_step((ts_optim *)p) == TS_OK; }

static void bench_adamw(int runs) {
    ts_shape s[GPT2_TENSORS];
    const int n = gpt2_shapes(s);
    ts_tensor *params[GPT2_TENSORS] = {0};
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        params[i] = leaf(s[i], TS_F32, 0.02, true);
        ts_tensor *g = leaf(s[i], TS_F32, 1e-3, false);
        ok = params[i] && g && ts_set_grad(params[i], g) == TS_OK;
        ts_release(g);
    }
    ts_optim *opt =
        ok ? ts_adamw_new_params(params, n, (ts_adam_opts){.lr = 3e-4, .weight_decay = 0.1}) : NULL;
    report("adamw_f32", opt ? time_calls(adamw_call, opt, 20, runs) : -1);
    ts_optim_free(opt);
    for (int i = 0; i < n; i++) ts_release(params[i]);
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int runs = quick ? 3 : 7;
    bool check;
    if (!bench_pick_device(&check)) return 0;
    small = bench_device.type != TS_CUDA;
    ts_manual_seed(0);
    bench_layernorm("layernorm_f32", TS_F32, runs);
    bench_layernorm("layernorm_bf16", TS_BF16, runs);
    bench_batchnorm("batchnorm_nchw_f32", TS_CONTIGUOUS_FORMAT, runs);
    bench_batchnorm("batchnorm_nhwc_f32", TS_CHANNELS_LAST, runs);
    bench_cross_entropy("cross_entropy_f32", TS_F32, runs);
    bench_cross_entropy("cross_entropy_bf16", TS_BF16, runs);
    bench_sdpa("sdpa_causal_bf16", 12, 64, true, false, runs);
    bench_sdpa("sdpa_bf16_e128", 6, 128, false, false, runs);
    bench_sdpa("sdpa_causal_bf16", 12, 64, true, true, runs);
    bench_sdpa("sdpa_bf16_e128", 6, 128, false, true, runs);
    bench_softmax(runs);
    bench_adamw(runs);
    bench_linear("linear_bias_f32", TS_F32, false, runs);
    bench_linear("linear_bias_f32_unfused", TS_F32, true, runs);
    bench_linear("linear_bias_bf16", TS_BF16, false, runs);
    bench_linear("linear_bias_bf16_unfused", TS_BF16, true, runs);
    bench_linear_act("linear_relu_f32", TS_F32, false, false, runs);
    bench_linear_act("linear_relu_f32_unfused", TS_F32, false, true, runs);
    bench_linear_act("linear_relu_bf16", TS_BF16, false, false, runs);
    bench_linear_act("linear_relu_bf16_unfused", TS_BF16, false, true, runs);
    bench_linear_act("linear_gelu_tanh_f32", TS_F32, true, false, runs);
    bench_linear_act("linear_gelu_tanh_f32_unfused", TS_F32, true, true, runs);
    bench_linear_act("linear_gelu_tanh_bf16", TS_BF16, true, false, runs);
    bench_linear_act("linear_gelu_tanh_bf16_unfused", TS_BF16, true, true, runs);
    bench_mlp("mlp_relu_f32", TS_F32, false, false, runs);
    bench_mlp("mlp_relu_f32_unfused", TS_F32, false, true, runs);
    bench_mlp("mlp_relu_bf16", TS_BF16, false, false, runs);
    bench_mlp("mlp_relu_bf16_unfused", TS_BF16, false, true, runs);
    bench_mlp("mlp_gelu_tanh_f32", TS_F32, true, false, runs);
    bench_mlp("mlp_gelu_tanh_f32_unfused", TS_F32, true, true, runs);
    bench_mlp("mlp_gelu_tanh_bf16", TS_BF16, true, false, runs);
    bench_mlp("mlp_gelu_tanh_bf16_unfused", TS_BF16, true, true, runs);
    return 0;
}
