/* test_activation_offload.c — saved-tensor hooks and activation offload
 * (src/autograd/saved_hooks.c, save_on_cpu.c): a tiny GPT trained a few steps on a sim device
 * with its saved tensors offloaded to (pinned) host memory, with and without a simulated link,
 * ends at the plain run's weights bit for bit; an MLP run layer by layer holds less sim memory at
 * its peak; hooks are called as PyTorch calls them (pack per save, unpack per use, each handle
 * freed once, the context once); an allocation failure anywhere in an offloaded step leaks no
 * tensor; misuse gives clear errors. */
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/saved_hooks.h"
#include "tessera/sim_link.h"
#include "ts_test.h"

enum { PLAIN, OFFLOAD, OFFLOAD_PINNED_LINK };

#define FAILF(...) (ts_test_record(false), ts_test_failf(__FILE__, __LINE__, __VA_ARGS__))

static bool host_f32(ts_tensor *t, float *v, int64_t n) {
    ts_tensor *h = t ? ts_to(t, ts_cpu()) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, v, (size_t)n * sizeof *v) == TS_OK;
}

static void begin_mode(int mode) {
    if (mode == OFFLOAD) CHECK_EQ(ts_save_on_cpu_begin((ts_save_on_cpu_opts){0}), TS_OK);
    if (mode == OFFLOAD_PINNED_LINK) {
        CHECK_EQ(ts_save_on_cpu_begin(
                     (ts_save_on_cpu_opts){.min_bytes = 256, .pin_memory = true, .prefetch = 2}),
                 TS_OK);
    }
}

static void end_mode(int mode) {
    if (mode == PLAIN) return;
    CHECK_EQ(ts_save_on_cpu_end(), TS_OK);
}

/* 3 AdamW steps of a tiny GPT (dropout on) on d; the weights afterwards, flattened into w */
static int train_gpt(ts_device d, int mode, float *w, int cap) {
    ts_mem_stats s0, c0, s1, c1;
    ts_memory_stats(d, &s0);
    ts_memory_stats(ts_cpu(), &c0);
    ts_manual_seed(9);
    ts_module *gpt = ts_module_to(ts_gpt_new((ts_gpt_config){.vocab_size = 16,
                                                             .context = 8,
                                                             .n_layer = 2,
                                                             .n_head = 2,
                                                             .n_embd = 16,
                                                             .dropout = 0.1}),
                                  d);
    ts_optim *opt = gpt ? ts_adamw_new(gpt, (ts_adam_opts){.lr = 1e-2}) : NULL;
    CHECK(gpt && opt);
    if (!opt) return 0;
    const double tok[16] = {1, 5, 3, 9, 2, 2, 15, 0, 4, 4, 7, 11, 13, 6, 8, 1};
    ts_manual_seed(10);
    /* the whole step over a simulated link: the backward's copies are asynchronous */
    if (mode == OFFLOAD_PINNED_LINK) CHECK_EQ(ts_sim_set_link_str("16GB/s,1us", NULL), TS_OK);
    for (int step = 0; step < 3; step++) {
        ts_scope_begin();
        ts_tensor *idx =
            ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(2, 8), tok, (ts_opts){0}), TS_I64), d);
        begin_mode(mode);
        ts_tensor *out = ts_forward(gpt, idx);
        end_mode(mode);
        ts_backward(ts_mean(ts_mul(out, out)));
        CHECK_EQ(ts_error(), TS_OK);
        CHECK_EQ(ts_optim_step(opt), TS_OK);
        ts_optim_zero_grad(opt);
        ts_scope_end();
    }
    if (mode == OFFLOAD_PINNED_LINK) CHECK_EQ(ts_sim_set_link(0, 0), TS_OK);
    ts_scope_begin();
    ts_tensor_list ps = ts_module_named_parameters(gpt);
    int n = 0;
    for (int i = 0; i < ps.n; i++) {
        const int64_t k = ts_numel(ps.tensors[i]);
        if (n + k > cap || !host_f32(ps.tensors[i], w + n, k)) break;
        n += (int)k;
    }
    ts_tensor_list_free(&ps);
    ts_scope_end();
    ts_optim_free(opt);
    ts_module_free(gpt);
    CHECK_EQ(ts_error(), TS_OK);
    ts_memory_stats(d, &s1);
    ts_memory_stats(ts_cpu(), &c1);
    if (s1.live_tensors != s0.live_tensors || c1.live_tensors != c0.live_tensors)
        FAILF("mode %d: live tensors sim %lld -> %lld, cpu %lld -> %lld", mode,
              (long long)s0.live_tensors, (long long)s1.live_tensors, (long long)c0.live_tensors,
              (long long)c1.live_tensors);
    return n;
}

static void check_gpt_bitwise(ts_device d) {
    static float ref[1 << 16], got[1 << 16];
    const int n = train_gpt(d, PLAIN, ref, 1 << 16);
    CHECK(n > 1000);
    for (int mode = OFFLOAD; mode <= OFFLOAD_PINNED_LINK; mode++) {
        ts_save_on_cpu_reset_stats();
        ts_sim_link_reset_stats(-1);
        CHECK_EQ(train_gpt(d, mode, got, 1 << 16), n);
        if (memcmp(ref, got, (size_t)n * sizeof *ref))
            FAILF("mode %d: weights differ from plain training", mode);
        ts_save_on_cpu_stats st;
        ts_save_on_cpu_stats_get(&st);
        CHECK(st.offloaded > 10 && st.restored == st.offloaded); /* each one back once */
        if (mode == OFFLOAD_PINNED_LINK) {
            CHECK(st.prefetched > 0 && st.kept > 0); /* parameters and small tensors stay */
            ts_sim_link_stats ls;
            CHECK_EQ(ts_sim_link_stats_get(d.index, &ls), TS_OK);
            CHECK(ls.async_copies == st.restored && ls.bytes_d2h >= st.offloaded_bytes);
        }
    }
}

/* a 6-layer tanh MLP run layer by layer (each intermediate freed unless saved): peak sim memory of
 * forward + backward, and the loss gradient of the first weight */
static size_t mlp_peak(ts_device d, bool offload, float *g0, int64_t ng, size_t *held) {
    enum { L = 6, B = 256, F = 32 };
    ts_scope_begin();
    ts_manual_seed(3);
    ts_tensor *w[L];
    for (int i = 0; i < L; i++) {
        w[i] = ts_to(ts_mul_scalar(ts_randn(TS_SHAPE(F, F), (ts_opts){0}), 0.1), d);
        ts_set_requires_grad(w[i], true);
    }
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(B, F), (ts_opts){0}), d);
    ts_memory_reset_peak(d);
    ts_mem_stats m0 = {0}, m1 = {0};
    ts_memory_stats(d, &m0);
    if (offload) CHECK_EQ(ts_save_on_cpu_begin((ts_save_on_cpu_opts){.min_bytes = 4096}), TS_OK);
    ts_tensor *h = ts_retain(x);
    for (int i = 0; i < L; i++) {
        ts_scope_begin();
        ts_tensor *next = ts_retain(ts_tanh(ts_matmul(h, w[i])));
        ts_scope_end();
        ts_release(h);
        h = next;
    }
    if (offload) CHECK_EQ(ts_save_on_cpu_end(), TS_OK);
    ts_mem_stats mf = {0};
    ts_memory_stats(d, &mf);
    *held = mf.allocated - m0.allocated; /* after the forward: the output and what was saved */
    ts_scope_begin();
    ts_backward(ts_sum(h));
    CHECK_EQ(ts_error(), TS_OK);
    ts_scope_end();
    ts_release(h);
    ts_memory_stats(d, &m1);
    CHECK(host_f32(ts_grad(w[0]), g0, ng));
    ts_scope_end();
    return m1.peak_allocated - m0.allocated;
}

static void check_peak(ts_device d) {
    static float g_plain[32 * 32], g_off[32 * 32];
    size_t held_plain = 0, held_off = 0;
    const size_t plain = mlp_peak(d, false, g_plain, 32 * 32, &held_plain);
    const size_t off = mlp_peak(d, true, g_off, 32 * 32, &held_off);
    /* after the forward: plain holds the 6 activations, offloaded only the output */
    const size_t act = 256 * 32 * sizeof(float);
    if (!(held_plain >= 6 * act && held_off <= act + 1024))
        FAILF("held after the forward: offload %zu, plain %zu", held_off, held_plain);
    /* peak: plain 6 activations and backward's temporaries; offloaded a few activations at a time
     * in the forward and in backward (the weights' gradients are 4 KiB each) */
    if (!(off + 3 * act < plain)) FAILF("peak with offload %zu, plain %zu", off, plain);
    CHECK(!memcmp(g_plain, g_off, sizeof g_plain));
}

/* hooks: counts and what they see */
typedef struct hook_ctx {
    int packs, unpacks, frees, ctx_frees;
    bool fail_pack;
} hook_ctx;

static void *pack_hook(void *p, ts_tensor *t) {
    hook_ctx *c = p;
    c->packs++;
    if (c->fail_pack) return ts_error_set(TS_ERR_ARG, "pack_hook: planned failure"), NULL;
    return ts_retain(ts_mul_scalar(t, 2.0)); /* the handle (holding a reference): twice t */
}

static ts_tensor *unpack_hook(void *p, void *handle) {
    ((hook_ctx *)p)->unpacks++;
    return ts_mul_scalar(handle, 0.5); /* exact: back to the tensor */
}

static void free_hook(void *p, void *handle) {
    ((hook_ctx *)p)->frees++;
    ts_release(handle);
}

static void ctx_free_hook(void *p) { ((hook_ctx *)p)->ctx_frees++; }

static void check_hooks(ts_device d) {
    hook_ctx c = {0};
    ts_scope_begin();
    ts_tensor *a = ts_to(ts_randn(TS_SHAPE(4, 5), (ts_opts){0}), d);
    ts_set_requires_grad(a, true);
    CHECK_EQ(ts_saved_tensors_hooks_push(pack_hook, unpack_hook, free_hook, &c, ctx_free_hook),
             TS_OK);
    ts_tensor *y = ts_sum(ts_mul(ts_sin(a), ts_exp(a)));
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
    CHECK(c.packs >= 3 && c.unpacks == 0 && c.ctx_frees == 0); /* sin: a; mul: both; exp: out */
    ts_backward(y);
    CHECK_EQ(ts_error(), TS_OK);
    CHECK(c.unpacks == c.packs && c.frees == c.packs && c.ctx_frees == 1);
    /* sin'(a) exp(a) + sin(a) exp(a) */
    ts_tensor *want = ts_add(ts_mul(ts_cos(a), ts_exp(a)), ts_mul(ts_sin(a), ts_exp(a)));
    float gv[20], wv[20];
    CHECK(host_f32(ts_grad(a), gv, 20) && host_f32(want, wv, 20) && !memcmp(gv, wv, sizeof gv));
    /* a pack that fails: the tensor is saved as itself, the error stays pending */
    hook_ctx f = {.fail_pack = true};
    CHECK_EQ(ts_saved_tensors_hooks_push(pack_hook, unpack_hook, free_hook, &f, NULL), TS_OK);
    ts_sin(a);
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
    CHECK(f.packs == 1 && ts_error() == TS_ERR_ARG &&
          strstr(ts_error_message(), "planned failure"));
    ts_error_clear();
    ts_scope_end();
    /* misuse */
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_ERR_STATE);
    ts_error_clear();
    CHECK_EQ(ts_save_on_cpu_end(), TS_ERR_STATE);
    CHECK(strstr(ts_error_message(), "save_on_cpu_end") != NULL);
    ts_error_clear();
    CHECK_EQ(ts_saved_tensors_hooks_push(NULL, unpack_hook, NULL, &c, ctx_free_hook), TS_ERR_ARG);
    CHECK(c.ctx_frees == 2); /* freed even when refused */
    ts_error_clear();
    CHECK_EQ(ts_saved_tensors_hooks_push(pack_hook, unpack_hook, free_hook, &c, NULL), TS_OK);
    CHECK_EQ(ts_save_on_cpu_end(), TS_ERR_STATE); /* the innermost hooks are not save_on_cpu */
    ts_error_clear();
    CHECK_EQ(ts_saved_tensors_hooks_pop(), TS_OK);
}

/* one offloaded step of a 2-layer MLP under the allocation-failure sweep: every failure is an
 * error or absorbed, and no tensor outlives the step */
static bool offload_step(ts_device d) {
    bool ok = true;
    ts_scope_begin();
    ts_manual_seed(4);
    ts_tensor *w1 = ts_to(ts_randn(TS_SHAPE(16, 32), (ts_opts){0}), d);
    ts_tensor *w2 = ts_to(ts_randn(TS_SHAPE(32, 8), (ts_opts){0}), d);
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(8, 16), (ts_opts){0}), d);
    if (w1 && w2) ts_set_requires_grad(w1, true), ts_set_requires_grad(w2, true);
    if (ts_save_on_cpu_begin((ts_save_on_cpu_opts){.pin_memory = true, .prefetch = 1}) != TS_OK)
        ok = false;
    ts_tensor *y = ok ? ts_sum(ts_matmul(ts_tanh(ts_matmul(x, w1)), w2)) : NULL;
    if (ok) ts_save_on_cpu_end();
    if (ok && y) ts_backward(y);
    ok = ok && y && ts_error() == TS_OK && ts_grad(w1) != NULL;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void check_fault_sweep(ts_device d) {
    ts_mem_stats s0, c0, s1, c1;
    CHECK(offload_step(d)); /* warm the caches */
    ts_memory_stats(d, &s0);
    ts_memory_stats(ts_cpu(), &c0);
    ts_fault_alloc_set(0);
    CHECK(offload_step(d));
    const uint64_t count = ts_fault_alloc_count();
    int failed = 0;
    for (uint64_t n = 1; n <= count; n++) {
        ts_fault_alloc_set((int64_t)n);
        if (!offload_step(d)) failed++;
        ts_fault_alloc_set(-1);
        ts_error_clear();
        while (ts_saved_tensors_hooks_pop() == TS_OK) { /* a begin that failed half-way */
        }
        ts_error_clear();
        ts_memory_stats(d, &s1);
        ts_memory_stats(ts_cpu(), &c1);
        if (s1.live_tensors != s0.live_tensors || c1.live_tensors != c0.live_tensors) {
            FAILF("allocation %llu failed: %lld/%lld live tensors", (unsigned long long)n,
                  (long long)s1.live_tensors, (long long)c1.live_tensors);
            break;
        }
    }
    CHECK(count > 10 && failed > 0);
}
/* What is copied: y = v * v saves v twice, one copy; v a view of under a quarter of a large
 * activation, its own span only (from a 64-byte line: [1001, 1101) of 4096 floats copies
 * [992, 1101), 109 floats; two columns of [64, 64] from column 5 copy [0, 4039)); with pin_memory
 * and prefetch 1 the tensor saved before is brought back ahead of need. The gradients equal the
 * plain run's bit for bit. */
static void check_spans(ts_device d) {
    static const struct {
        int kind;
        int64_t bytes;
    } cases[3] = {{0, 4096 * 4}, {1, 109 * 4}, {2, 4039 * 4}};
    for (int c = 0; c < 3; c++) {
        float g[2][4096];
        for (int mode = 0; mode < 2; mode++) {
            ts_scope_begin();
            ts_manual_seed(31);
            ts_tensor *x = ts_to(ts_randn(TS_SHAPE(64, 64), (ts_opts){0}), d);
            ts_set_requires_grad(x, true);
            ts_save_on_cpu_reset_stats();
            if (mode) CHECK_EQ(ts_save_on_cpu_begin((ts_save_on_cpu_opts){0}), TS_OK);
            ts_tensor *big = ts_mul_scalar(x, 2.0), *v = big;
            if (cases[c].kind == 1) v = ts_narrow(ts_reshape(big, TS_SHAPE(4096)), 0, 1001, 100);
            if (cases[c].kind == 2) v = ts_narrow(big, 1, 5, 2);
            ts_tensor *y = ts_mul(v, v);
            if (mode) CHECK_EQ(ts_save_on_cpu_end(), TS_OK);
            ts_save_on_cpu_stats st;
            ts_save_on_cpu_stats_get(&st);
            if (mode) {
                CHECK_EQ(st.offloaded, 1);
                CHECK_EQ(st.offloaded_bytes, cases[c].bytes);
            }
            CHECK_EQ(ts_backward(ts_sum(y)), TS_OK);
            CHECK(host_f32(ts_grad(x), g[mode], 4096));
            ts_scope_end();
        }
        if (memcmp(g[0], g[1], sizeof g[0])) FAILF("case %d: gradients differ", c);
    }
    /* tanh(tanh(x)) saves the inner output, then the outer: unpacking the outer prefetches the
     * inner one */
    ts_scope_begin();
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(64, 64), (ts_opts){0}), d);
    ts_set_requires_grad(x, true);
    ts_save_on_cpu_reset_stats();
    CHECK_EQ(ts_save_on_cpu_begin((ts_save_on_cpu_opts){.pin_memory = true, .prefetch = 1}), TS_OK);
    ts_tensor *y = ts_tanh(ts_tanh(x));
    CHECK_EQ(ts_save_on_cpu_end(), TS_OK);
    CHECK_EQ(ts_backward(ts_sum(y)), TS_OK);
    ts_save_on_cpu_stats st;
    ts_save_on_cpu_stats_get(&st);
    CHECK_EQ(st.offloaded, 2);
    CHECK_EQ(st.restored, 2);
    CHECK_EQ(st.prefetched, 1);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("no sim devices (TS_SIM_DEVICES)");
    const ts_device d = ts_sim(0);
    check_hooks(d);
    check_gpt_bitwise(d);
    check_peak(d);
    check_spans(d);
    check_fault_sweep(d);
    return ts_test_finish();
}
