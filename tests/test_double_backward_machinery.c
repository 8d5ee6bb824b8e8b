/* test_double_backward_machinery.c — create_graph through the last nodes issue 52 left once
 * differentiable: activation checkpointing (the recomputed saved tensors handed out with the
 * forward's history: inputs of the function, leaves, intermediates, outputs, a checkpoint inside a
 * checkpoint), the pre-backward hook node (PreBackwardHook, FSDP's and the weight stream's),
 * autocast's casts (ToCopyBackward0 of the parameter cast cache and of an uncached cast) and
 * DataParallel's broadcast of the parameters (BroadcastBackward, over sim:0 and sim:1). In float64
 * the Hessian-vector products by double backward equal central differences of first-order gradients
 * (hv_check.c's rule, and the same here for the data-parallel model's parameters); autocast's in
 * bfloat16 equal the exact products on integers that bfloat16 holds exactly. Saved-tensor hooks:
 * test_double_backward_saved_hooks.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h" /* tsi_pre_backward_hook */
#include "host_values.h"
#include "hv_check.h"
#include "ts_test.h"

typedef ts_hv_case hv_case;
#define SH TS_HV_SH

/* ---------------------------------------------------------------- checkpoint */
/* tanh(a * b) * exp(a) + a * b: mul saves its inputs (the checkpoint's inputs: leaves or not),
 * tanh and exp save their outputs, the last mul saves two intermediates */
static ts_status body(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    ts_tensor *ab = ts_mul(in[0], in[1]);
    out[0] = ts_add(ts_mul(ts_tanh(ab), ts_exp(in[0])), ab);
    return out[0] ? TS_OK : ts_error();
}

/* the body with a checkpoint inside: sin of the inner checkpoint's result times b */
static ts_status outer(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx, (void)n_out;
    ts_tensor *h = NULL;
    if (ts_checkpoint(body, NULL, NULL, in, n_in, &h, 1) != TS_OK) return ts_error();
    out[0] = ts_mul(ts_sin(h), in[1]);
    return out[0] ? TS_OK : ts_error();
}

/* the checkpoint's inputs as the leaves themselves */
static ts_tensor *f_ckpt_leaves(ts_tensor *const *in) {
    ts_tensor *y = NULL;
    if (ts_checkpoint(body, NULL, NULL, in, 2, &y, 1) != TS_OK) return NULL;
    return ts_sum(ts_mul(y, y));
}

/* inputs with a history outside (a non-leaf and a leaf), a result used twice after */
static ts_tensor *f_ckpt_history(ts_tensor *const *in) {
    ts_tensor *a = ts_mul_scalar(ts_sin(in[0]), 1.5), *y = NULL;
    ts_tensor *ins[2] = {a, in[1]};
    if (ts_checkpoint(body, NULL, NULL, ins, 2, &y, 1) != TS_OK) return NULL;
    return ts_sum(ts_mul(ts_cos(y), a));
}

static ts_tensor *f_ckpt_nested(ts_tensor *const *in) {
    ts_tensor *a = ts_mul_scalar(in[0], 0.75), *y = NULL;
    ts_tensor *ins[2] = {a, in[1]};
    if (ts_checkpoint(outer, NULL, NULL, ins, 2, &y, 1) != TS_OK) return NULL;
    return ts_sum(ts_mul(y, y));
}

/* a parameter the function uses without taking it as an input (a module's weight) */
static ts_tensor *w_param;
static ts_status body_param(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = ts_tanh(ts_matmul(in[0], w_param));
    return out[0] ? TS_OK : ts_error();
}
static ts_tensor *f_ckpt_param(ts_tensor *const *in) {
    w_param = in[1];
    ts_tensor *y = NULL;
    if (ts_checkpoint(body_param, NULL, NULL, in, 1, &y, 1) != TS_OK) return NULL;
    return ts_sum(ts_mul(y, y));
}

/* ---------------------------------------------------------------- pre-backward hook */
static int hook_calls;
static void count_call(void *ctx) {
    (void)ctx;
    hook_calls++;
}
static ts_tensor *f_pre_hook(ts_tensor *const *in) {
    ts_tensor *h = tsi_pre_backward_hook(ts_mul(in[0], in[1]), count_call, NULL);
    return ts_sum(ts_exp(ts_mul(h, in[0])));
}

static const hv_case cases[] = {
    {"checkpoint of leaves", f_ckpt_leaves, 2, {SH(2, 2, 3), SH(2, 2, 3)}, "TanhBackward0"},
    {"checkpoint with history", f_ckpt_history, 2, {SH(1, 5), SH(1, 5)}, "TanhBackward0"},
    {"checkpoint nested", f_ckpt_nested, 2, {SH(2, 3, 2), SH(2, 3, 2)}, "SinBackward0"},
    {"checkpoint with a parameter", f_ckpt_param, 2, {SH(2, 3, 4), SH(2, 4, 2)}, NULL},
    {"pre-backward hook", f_pre_hook, 2, {SH(2, 2, 3), SH(2, 2, 3)}, "PreBackwardHook"},
};

/* ---------------------------------------------------------------- autocast */
/* L = sum((x w)^2) with w a float32 parameter in a bfloat16 region: mm casts w through the cache
 * (a forced ToCopyBackward0), mse_loss (sum against zeros; float32 on the CPU's and CUDA's lists)
 * casts the bfloat16 product back to float32 (an uncached one).
 * dL/dw = 2 X^T X W and its derivative along V: 2 X^T X V. Every value is an integer below 256,
 * which bfloat16 (8 significant bits) holds exactly, so the results are exact. */
static void autocast_casts(ts_device d, bool cache) {
    enum { N = 3, K = 2, M = 2 };
    const double xv[N * K] = {1, 0, 2, 1, -1, 1}, wv[K * M] = {1, 2, -1, 3};
    const double vv[K * M] = {2, -1, 0, 1};
    ts_scope_begin();
    const ts_opts o = {.device = d};
    ts_tensor *x = ts_to_dtype(ts_tensor_f64(TS_SHAPE(N, K), xv, o), TS_F32);
    ts_tensor *w = ts_to_dtype(ts_tensor_f64(TS_SHAPE(K, M), wv, o), TS_F32);
    ts_tensor *v = ts_to_dtype(ts_tensor_f64(TS_SHAPE(K, M), vv, o), TS_F32);
    CHECK_EQ(ts_set_requires_grad(w, true), TS_OK);
    ts_autocast_begin_ex(d.type, (ts_autocast_opts){.dtype = TS_BF16, .no_cache = !cache});
    ts_tensor *y = ts_mm(x, w);
    ts_tensor *l =
        ts_mse_loss_ex(y, ts_zeros_like(y), (ts_loss_opts){.reduction = TS_REDUCTION_SUM});
    ts_autocast_end();
    CHECK(y && y->dtype == TS_BF16 && l && l->dtype == TS_F32);
    CHECK(l && ts_hv_has_node(l, "ToCopyBackward0"));
    ts_tensor *g = NULL, *hv = NULL;
    CHECK_EQ(ts_autograd_grad(&l, NULL, 1, &w, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    ts_tensor *s = g ? ts_sum(ts_mul(g, v)) : NULL;
    CHECK_EQ(ts_autograd_grad(&s, NULL, 1, &w, 1, (ts_grad_opts){0}, &hv), TS_OK);
    double got_g[K * M] = {0}, got_hv[K * M] = {0}, xtx[K * K] = {0};
    CHECK(g && ts_test_read_f64(g, got_g, K * M));
    CHECK(hv && ts_test_read_f64(hv, got_hv, K * M));
    for (int a = 0; a < K; a++)
        for (int b = 0; b < K; b++)
            for (int i = 0; i < N; i++) xtx[a * K + b] += xv[i * K + a] * xv[i * K + b];
    int bad = 0;
    for (int a = 0; a < K; a++)
        for (int j = 0; j < M; j++) {
            double want_g = 0, want_hv = 0;
            for (int b = 0; b < K; b++) {
                want_g += 2 * xtx[a * K + b] * wv[b * M + j];
                want_hv += 2 * xtx[a * K + b] * vv[b * M + j];
            }
            if (got_g[a * M + j] != want_g || got_hv[a * M + j] != want_hv) {
                fprintf(stderr,
                        "autocast on %s (cache %d) [%d,%d]: g %g (want %g), Hv %g (want %g)\n",
                        ts_device_str(d), cache, a, j, got_g[a * M + j], want_g, got_hv[a * M + j],
                        want_hv);
                bad++;
            }
        }
    CHECK_EQ(bad, 0);
    ts_scope_end();
}

/* ---------------------------------------------------------------- DataParallel */
enum { DP_MAXP = 4, DP_MAXN = 16 };
typedef struct dp_point {
    double v[DP_MAXP][DP_MAXN];
} dp_point;

static ts_tensor *dp_input(ts_device d) {
    double x[5 * 3];
    ts_test_fill_uniform(x, 15, 21);
    return ts_tensor_f64(TS_SHAPE(5, 3), x, (ts_opts){.device = d});
}

static ts_tensor *dp_loss(ts_module *dp, ts_device d) {
    ts_tensor *y = ts_forward(dp, dp_input(d));
    return y ? ts_sum(ts_mul(y, y)) : NULL;
}

/* the parameters set to p (no graph) */
static void dp_set(ts_tensor_list *ps, const dp_point *p) {
    ts_scope_begin();
    ts_no_grad_begin();
    for (int k = 0; k < ps->n; k++) {
        ts_tensor *t = ps->tensors[k];
        ts_tensor *src =
            ts_tensor_f64(ts_shape_of(t), p->v[k], (ts_opts){.device = ts_device_of(t)});
        CHECK(ts_copy_(t, src) == t);
    }
    ts_no_grad_end();
    ts_scope_end();
}

static void dp_grads(ts_module *dp, ts_tensor_list *ps, ts_device d, const dp_point *p,
                     dp_point *out) {
    dp_set(ps, p);
    ts_scope_begin();
    ts_tensor *l = dp_loss(dp, d), *g[DP_MAXP] = {0};
    CHECK_EQ(ts_autograd_grad(&l, NULL, 1, ps->tensors, ps->n, (ts_grad_opts){0}, g), TS_OK);
    for (int k = 0; k < ps->n; k++)
        CHECK(g[k] && ts_test_read_f64(g[k], out->v[k], ts_numel(g[k])));
    ts_scope_end();
}

static void data_parallel(void) {
    const ts_device d0 = ts_sim(0), devs[2] = {ts_sim(0), ts_sim(1)};
    ts_manual_seed(3);
    ts_module *layers[3] = {ts_linear_new(3, 4), ts_tanh_new(), ts_linear_new(4, 2)};
    ts_module *net = ts_module_to(ts_module_to_dtype(ts_sequential_new(3, layers), TS_F64), d0);
    ts_module *dp = ts_data_parallel_new(net, devs, 2, d0);
    CHECK(dp != NULL);
    if (!dp) return;
    ts_tensor_list ps = ts_module_named_parameters(dp);
    CHECK(ps.n == DP_MAXP);
    static dp_point p, v, first, plus, minus, q;
    int64_t n[DP_MAXP];
    for (int k = 0; k < ps.n; k++) {
        n[k] = ts_numel(ps.tensors[k]);
        CHECK(n[k] <= DP_MAXN);
        ts_test_fill_uniform(p.v[k], n[k], 31 + k);
        ts_test_fill_uniform(v.v[k], n[k], 41 + k);
    }
    dp_grads(dp, &ps, d0, &p, &first);
    dp_set(&ps, &p);
    ts_scope_begin();
    ts_tensor *l = dp_loss(dp, d0), *g[DP_MAXP] = {0}, *hv[DP_MAXP] = {0};
    CHECK(l && ts_hv_has_node(l, "BroadcastBackward"));
    CHECK_EQ(
        ts_autograd_grad(&l, NULL, 1, ps.tensors, ps.n, (ts_grad_opts){.create_graph = true}, g),
        TS_OK);
    ts_tensor *s = NULL;
    int bad = 0;
    for (int k = 0; k < ps.n && g[k]; k++) {
        double gk[DP_MAXN];
        CHECK(ts_test_read_f64(g[k], gk, n[k]));
        for (int64_t i = 0; i < n[k]; i++)
            if (fabs(gk[i] - first.v[k][i]) > 1e-12 * (1 + fabs(first.v[k][i]))) bad++;
        ts_tensor *t =
            ts_sum(ts_mul(g[k], ts_tensor_f64(ts_shape_of(g[k]), v.v[k], (ts_opts){.device = d0})));
        s = s ? ts_add(s, t) : t;
    }
    CHECK_EQ(ts_autograd_grad(&s, NULL, 1, ps.tensors, ps.n, (ts_grad_opts){0}, hv), TS_OK);
    static dp_point got;
    for (int k = 0; k < ps.n; k++) CHECK(hv[k] && ts_test_read_f64(hv[k], got.v[k], n[k]));
    ts_scope_end();
    /* central differences of the data-parallel first-order gradients along v (hv_check.c's step
     * and tolerance) */
    const double e = 1e-5;
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int k = 0; k < ps.n; k++)
            for (int64_t i = 0; i < n[k]; i++) q.v[k][i] = p.v[k][i] + sign * e * v.v[k][i];
        dp_grads(dp, &ps, d0, &q, sign < 0 ? &minus : &plus);
    }
    for (int k = 0; k < ps.n; k++)
        for (int64_t i = 0; i < n[k]; i++) {
            const double want = (plus.v[k][i] - minus.v[k][i]) / (2 * e);
            if (fabs(got.v[k][i] - want) > 1e-6 * (1 + fabs(want)) && bad++ < 6)
                fprintf(stderr, "DataParallel: Hv of %s [%lld] = %.12g, differences give %.12g\n",
                        ps.names[k], (long long)i, got.v[k][i], want);
        }
    CHECK_EQ(bad, 0);
    ts_tensor_list_free(&ps);
    ts_module_free(dp);
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int di = 0; di < 2; di++) {
        hook_calls = 0;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            ts_hv_check(&cases[k], devs[di]);
        CHECK(hook_calls > 0);
        autocast_casts(devs[di], true);
        autocast_casts(devs[di], false);
    }
    data_parallel();
    CHECK_OK();
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
