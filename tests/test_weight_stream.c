/* test_weight_stream.c — ts_module_stream (issue 55, part 4) on a capped sim:0: an MLP and a tiny
 * GPT whose weights exceed the cap run streamed and give the plain uncapped run's outputs bit for
 * bit (sim runs the cpu kernels); the device holds at most prefetch + 1 units' weights (the
 * stream's counters and the allocator's peak); with a simulated link the copies are asynchronous;
 * the GPT trained streamed equals plain training bit for bit; BatchNorm's running statistics come
 * back to the host; gradients a model had move with it; stream, unstream and stream again; the
 * registry's limit; out of device memory in a forward, a backward and unstream; errors; and an
 * allocation-failure sweep of a streamed forward and backward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "tessera/placement.h"
#include "tessera/sim_link.h"
#include "tessera/weight_stream.h"
#include "ts_test.h"

#define CAP     ((size_t)48 << 10)           /* sim:0's capacity once capped (the MLP) */
#define GPT_CAP ((size_t)1 << 20)            /* ... for the GPT: 8 blocks of 196 KiB */
#define LIN     ((size_t)(64 * 64 + 64) * 4) /* one hidden Linear's bytes */

/* Linear(64, 64) - ReLU five times, then Linear(64, 8): 5 x 16.25 KiB of weights */
static ts_module *mlp_new(void) {
    ts_manual_seed(7);
    ts_module *m[11];
    for (int i = 0; i < 5; i++) m[2 * i] = ts_linear_new(64, 64), m[2 * i + 1] = ts_relu_new();
    m[10] = ts_linear_new(64, 8);
    return ts_sequential_new(11, m);
}

static ts_module *gpt_new(void) {
    ts_manual_seed(3);
    return ts_gpt_new(
        (ts_gpt_config){.vocab_size = 16, .context = 4, .n_layer = 8, .n_head = 2, .n_embd = 64});
}

static ts_module *small_new(void) {
    return ts_sequential_new(4, (ts_module *[]){ts_linear_new(8, 8), ts_relu_new(),
                                                ts_linear_new(8, 8), ts_linear_new(8, 2)});
}

static size_t weight_bytes(ts_module *m) {
    size_t n = 0;
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n; i++) n += ts_nbytes(l.tensors[i]);
    ts_tensor_list_free(&l);
    return n;
}

/* a tensor's bytes on the host (malloc'ed) */
static char *host_bytes(ts_tensor *t, size_t *n) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(t, ts_cpu()));
    *n = ts_nbytes(c);
    char *b = malloc(*n ? *n : 1);
    CHECK_EQ(ts_copy_to_host(c, b, *n), TS_OK);
    ts_scope_end();
    return b;
}

static char *infer(ts_module *m, ts_tensor *x, size_t *n, ts_device *where) {
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *y = ts_forward(m, x);
    ts_no_grad_end();
    CHECK(y != NULL);
    char *b = y ? host_bytes(y, n) : NULL;
    if (where && y) *where = ts_device_of(y);
    ts_scope_end();
    return b;
}

static void check_same(char *a, size_t na, char *b, size_t nb, const char *what) {
    const bool same = a && b && na == nb && na > 0 && !memcmp(a, b, na);
    CHECK(same);
    if (!same) fprintf(stderr, "  %s: the streamed run differs from the plain one\n", what);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------ references (uncapped) */
typedef struct refs {
    ts_tensor *x_mlp, *x_gpt, *y_gpt;
    char *mlp, *gpt, *trained;
    size_t n_mlp, n_gpt, n_trained;
    double loss[3];
} refs;

static ts_optim *sgd(ts_module *m) {
    return ts_sgd_new(m, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3});
}

static char *all_params(ts_module *m, size_t *n) {
    *n = 0;
    char *out = NULL;
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n; i++) {
        size_t k;
        char *b = host_bytes(l.tensors[i], &k);
        out = realloc(out, *n + k);
        memcpy(out + *n, b, k);
        *n += k;
        free(b);
    }
    ts_tensor_list_free(&l);
    return out;
}

/* three steps of SGD with momentum on a next-token loss; the losses into loss[] */
static void train(ts_module *m, ts_tensor *x, ts_tensor *y, double *loss) {
    ts_optim *o = sgd(m);
    CHECK(o != NULL);
    for (int s = 0; s < 3 && o; s++) {
        ts_scope_begin();
        ts_optim_zero_grad(o);
        ts_tensor *out = ts_forward(m, x);
        ts_tensor *l =
            ts_cross_entropy(ts_reshape(out, TS_SHAPE(8, 16)), ts_to(y, ts_device_of(out)));
        loss[s] = l ? ts_item(l) : -1;
        ts_backward(l);
        CHECK_OK();
        CHECK_EQ(ts_optim_step(o), TS_OK);
        ts_scope_end();
    }
    ts_optim_free(o);
    CHECK_OK();
}

static refs make_refs(void) {
    refs r = {0};
    ts_manual_seed(11);
    r.x_mlp = ts_randn(TS_SHAPE(4, 64), (ts_opts){0});
    const double tok[9] = {1, 5, 3, 9, 2, 15, 0, 4, 7};
    ts_scope_begin();
    ts_tensor *all = ts_to_dtype(ts_tensor_f64(TS_SHAPE(9), tok, (ts_opts){0}), TS_I64);
    r.x_gpt = ts_keep(ts_contiguous(ts_reshape(ts_slice(all, 0, 0, 8, 1), TS_SHAPE(2, 4))));
    r.y_gpt = ts_keep(ts_contiguous(ts_slice(all, 0, 1, 9, 1)));
    ts_scope_end();
    /* plain runs on the uncapped sim:0 */
    ts_module *m = ts_module_to(mlp_new(), ts_sim(0)), *g = ts_module_to(gpt_new(), ts_sim(0));
    ts_module_eval(g);
    ts_scope_begin();
    r.mlp = infer(m, ts_to(r.x_mlp, ts_sim(0)), &r.n_mlp, NULL);
    r.gpt = infer(g, ts_to(r.x_gpt, ts_sim(0)), &r.n_gpt, NULL);
    ts_module_train(g, true);
    ts_manual_seed(5);
    train(g, ts_to(r.x_gpt, ts_sim(0)), r.y_gpt, r.loss);
    ts_scope_end();
    r.trained = all_params(g, &r.n_trained);
    ts_module_free(m);
    ts_module_free(g);
    CHECK_OK();
    return r;
}

/* ------------------------------------------------------------------ inference */
static size_t mem_now(void) {
    ts_mem_stats s;
    CHECK_EQ(ts_memory_stats(ts_sim(0), &s), TS_OK);
    return s.allocated;
}

static void test_mlp(refs *r) {
    ts_module *m = mlp_new();
    CHECK(weight_bytes(m) > CAP);
    /* plainly it does not fit the capped device */
    ts_module *plain = mlp_new();
    ts_module_to(plain, ts_sim(0));
    CHECK_ERR(TS_ERR_OOM);
    ts_error_clear();
    ts_module_free(plain);
    CHECK_EQ(mem_now(), 0);
    ts_empty_cache(ts_sim(0));

    const int prefetch = 1;
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = prefetch}), TS_OK);
    CHECK(ts_module_is_streamed(m));
    /* the parameters are the same handles, on the host, pinned */
    ts_tensor *w0 = ts_module_get(m, "0.weight");
    CHECK(ts_device_equal(ts_device_of(w0), ts_cpu()) && ts_is_pinned(w0));
    CHECK_EQ(mem_now(), 0);
    ts_memory_reset_peak(ts_sim(0));
    size_t n;
    ts_device where = ts_cpu();
    char *got = infer(m, r->x_mlp, &n, &where); /* the input moves to sim:0 */
    CHECK(ts_device_equal(where, ts_sim(0)));   /* the output stays there */
    check_same(got, n, r->mlp, r->n_mlp, "MLP forward");
    r->mlp = NULL;
    ts_stream_stats st;
    CHECK_EQ(ts_module_stream_stats(m, &st), TS_OK);
    CHECK_EQ(st.units, 11);
    CHECK_EQ(st.unit_fetches, 11);
    CHECK_EQ(st.prefetched, 11 - 1);
    CHECK_EQ(st.copies, 12); /* 6 weights + 6 biases, once each */
    CHECK_EQ(st.bytes, weight_bytes(m));
    CHECK(st.max_resident_units <= prefetch + 1);
    /* a ring of 2 units here is a Linear and a ReLU: one Linear's weights at most */
    CHECK(st.max_resident_bytes <= LIN);
    ts_mem_stats ms;
    ts_memory_stats(ts_sim(0), &ms);
    /* the ring plus the activations (input, 5 intermediates, output: 4 x 64 floats each, with
     * the allocator's rounding), never the whole model */
    const size_t acts = 8 * 4096;
    const bool bounded =
        ms.peak_allocated <= st.max_resident_bytes + acts && ms.peak_allocated < weight_bytes(m);
    CHECK(bounded);
    if (!bounded)
        fprintf(stderr, "peak %zu: ring %zu + activations %zu, weights %zu", ms.peak_allocated,
                st.max_resident_bytes, acts, weight_bytes(m));
    CHECK_EQ(mem_now(), 0); /* nothing left on the device */
    /* unstream: the model as it was (cpu, the same values) */
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    CHECK(!ts_module_is_streamed(m));
    CHECK(ts_module_get(m, "0.weight") == w0 && ts_device_equal(ts_device_of(w0), ts_cpu()));
    ts_module_free(m);
    CHECK_OK();
}

/* the GPT streamed with the link on: outputs bit for bit, every copy asynchronous */
static void test_gpt_link(refs *r) {
    ts_module *g = gpt_new();
    CHECK(weight_bytes(g) > GPT_CAP);
    ts_module_eval(g);
    CHECK_EQ(ts_module_stream(g, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    CHECK_EQ(ts_sim_set_link(16e9, 5e-6), TS_OK);
    ts_sim_link_reset_stats(-1);
    size_t n;
    char *got = infer(g, r->x_gpt, &n, NULL);
    check_same(got, n, r->gpt, r->n_gpt, "GPT forward");
    r->gpt = NULL;
    ts_sim_link_wait(0);
    ts_sim_link_stats ls;
    ts_stream_stats st;
    CHECK_EQ(ts_sim_link_stats_get(0, &ls), TS_OK);
    CHECK_EQ(ts_module_stream_stats(g, &st), TS_OK);
    CHECK_EQ(st.units, 1 + 8 + 1);
    CHECK(st.max_resident_units <= 2);
    /* every weight copy queued on the copy engine (the input's copy is the one synchronous one) */
    CHECK_EQ(ls.async_copies, st.copies);
    CHECK(ls.copies_h2d >= st.copies + 1);
    CHECK(ls.bytes_h2d >= st.bytes);
    /* the host's waits lie inside the engine's busy time (printed: the overlap) */
    CHECK(ls.wait_ns <= ls.busy_ns);
    printf("GPT streamed over a 16 GB/s link: %llu async copies, %llu B, engine busy %.1f us, "
           "compute waited %.1f us\n",
           (unsigned long long)ls.async_copies, (unsigned long long)ls.bytes_h2d, ls.busy_ns / 1e3,
           ls.wait_ns / 1e3);
    CHECK_EQ(ts_sim_set_link(0, 0), TS_OK);
    CHECK_EQ(ts_module_unstream(g), TS_OK);
    ts_module_free(g);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ training */
static void test_train(refs *r) {
    ts_module *g = gpt_new();
    const int prefetch = 1;
    CHECK_EQ(ts_module_stream(g, ts_sim(0), (ts_stream_opts){.prefetch = prefetch}), TS_OK);
    double loss[3];
    ts_manual_seed(5);
    train(g, r->x_gpt, r->y_gpt, loss);
    for (int i = 0; i < 3; i++) CHECK(loss[i] == r->loss[i]);
    ts_stream_stats st;
    CHECK_EQ(ts_module_stream_stats(g, &st), TS_OK);
    CHECK_EQ(st.backward_fetches, 3 * 10); /* every unit again before its backward */
    /* backward too: the unit and the one prefetched before it (the one after it is freed once
     * its copies' gradients are in, before this unit's backward starts) */
    CHECK(st.max_resident_units <= prefetch + 1);
    ts_mem_stats ms;
    ts_memory_stats(ts_sim(0), &ms);
    printf(
        "GPT trained streamed: %d units, at most %d resident (%zu B), %llu fetches for backward; "
        "peak device memory %zu B, weights %zu B\n",
        st.units, st.max_resident_units, st.max_resident_bytes,
        (unsigned long long)st.backward_fetches, ms.peak_allocated, weight_bytes(g));
    CHECK_EQ(mem_now(), 0); /* gradients on the host, nothing left on the device */
    size_t n;
    char *got = all_params(g, &n);
    check_same(got, n, r->trained, r->n_trained, "GPT trained 3 steps");
    r->trained = NULL;
    /* the gradients are the host parameters' */
    ts_tensor *w = ts_module_get(g, "tok_emb.weight");
    CHECK(ts_grad(w) && ts_device_equal(ts_device_of(ts_grad(w)), ts_cpu()));
    CHECK_EQ(ts_module_unstream(g), TS_OK);
    ts_module_free(g);
    CHECK_OK();
}

/* ------------------------------------------------------------------ errors */
static void test_errors(void) {
    ts_module *m = mlp_new();
    CHECK_EQ(ts_module_stream(m, ts_sim(7), (ts_stream_opts){0}), TS_ERR_DEVICE);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "sim:7 is not available");
    CHECK_EQ(ts_module_stream(m, ts_cpu(), (ts_stream_opts){0}), TS_ERR_DEVICE);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "a sim or cuda device");
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = -1}), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "prefetch");
    CHECK_EQ(ts_module_stream(ts_module_child(m, "2"), ts_sim(0), (ts_stream_opts){0}), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "child module");
    CHECK_EQ(ts_module_stream(NULL, ts_sim(0), (ts_stream_opts){0}), TS_ERR_ARG);
    ts_error_clear();
    CHECK_EQ(ts_module_unstream(m), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "not streamed");
    CHECK(!ts_module_is_streamed(m));
    /* twice */
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "streamed already");
    /* placement of a streamed model */
    CHECK_EQ(ts_module_place_str(m, "cpu=1GiB", (ts_place_opts){0}, NULL), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "is streamed");
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    ts_module_free(m);
    /* a backward through an older forward than the latest */
    ts_module *sm = small_new();
    CHECK_EQ(ts_module_stream(sm, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 8), (ts_opts){0});
    ts_tensor *y1 = ts_sum(ts_forward(sm, x));
    ts_tensor *y2 = ts_sum(ts_forward(sm, x));
    CHECK(y1 && y2);
    ts_backward(y1);
    CHECK_ERR_HAS(TS_ERR_STATE, "not the model's latest");
    ts_backward(y2);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(sm);
    /* a parameter replaced while streamed */
    ts_module *rp = small_new();
    CHECK_EQ(ts_module_stream(rp, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    ts_module_param(ts_module_child(rp, "0"), "bias", ts_zeros(TS_SHAPE(8), (ts_opts){0}));
    CHECK_OK();
    ts_scope_begin();
    CHECK(ts_forward(rp, ts_randn(TS_SHAPE(2, 8), (ts_opts){0})) == NULL);
    CHECK_ERR_HAS(TS_ERR_STATE, "was replaced after ts_module_stream");
    ts_scope_end();
    CHECK_EQ(ts_module_unstream(rp), TS_OK);
    ts_module_free(rp);
    /* a placed model */
    ts_module *p = mlp_new();
    CHECK_EQ(ts_module_place_str(p, "cpu=1GiB", (ts_place_opts){0}, NULL), TS_OK);
    CHECK_EQ(ts_module_stream(p, ts_sim(0), (ts_stream_opts){0}), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "placed across devices");
    ts_module_free(p);
    /* freed while streamed: nothing left behind */
    ts_module *q = mlp_new();
    CHECK_EQ(ts_module_stream(q, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    ts_module_free(q);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
typedef struct sweep_state {
    ts_module *m;
    ts_tensor *x;
} sweep_state;

static void *sweep_setup(void) {
    sweep_state *s = calloc(1, sizeof *s);
    s->m = ts_sequential_new(4, (ts_module *[]){ts_linear_new(8, 8), ts_relu_new(),
                                                ts_linear_new(8, 8), ts_linear_new(8, 2)});
    s->x = ts_randn(TS_SHAPE(3, 8), (ts_opts){0});
    return s;
}

/* streamed (again after a failure: the model stays usable), a forward and a backward */
static bool sweep_run(void *p) {
    sweep_state *s = p;
    if (!ts_module_is_streamed(s->m) &&
        ts_module_stream(s->m, ts_sim(0), (ts_stream_opts){.prefetch = 1}) != TS_OK)
        return false;
    ts_scope_begin();
    ts_tensor *y = ts_forward(s->m, s->x);
    if (y) ts_backward(ts_sum(y));
    bool ok = y && ts_error() == TS_OK;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void sweep_check(void *p, bool ok) {
    sweep_state *s = p;
    /* a failure inside a unit's own compute leaves its copies until the next forward */
    if (!ok) return;
    ts_tensor *w = ts_module_get(s->m, "0.weight");
    CHECK(w && ts_device_equal(ts_device_of(w), ts_cpu()));
    CHECK_EQ(mem_now(), 0);
}

static void sweep_teardown(void *p) {
    sweep_state *s = p;
    ts_module_free(s->m);
    ts_release(s->x);
    free(s);
}

/* ------------------------------------------------------------------ state kept and given back */
static ts_module *bn_new(void) {
    ts_manual_seed(9);
    return ts_sequential_new(3, (ts_module *[]){ts_linear_new(8, 8),
                                                ts_batch_norm1d_new(8, (ts_norm_opts){0}),
                                                ts_linear_new(8, 2)});
}

/* training-mode forwards change BatchNorm's running statistics on the device: they go back to the
 * host, equal to a plain run's */
static void test_buffers(void) {
    ts_module *p = ts_module_to(bn_new(), ts_sim(0)), *m = bn_new();
    ts_manual_seed(21);
    ts_tensor *x = ts_randn(TS_SHAPE(6, 8), (ts_opts){0});
    ts_tensor *xd = ts_to(x, ts_sim(0));
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    for (int i = 0; i < 2; i++) {
        size_t n1 = 0, n2 = 0;
        char *a = infer(m, x, &n1, NULL), *b = infer(p, xd, &n2, NULL);
        check_same(a, n1, b, n2, "BatchNorm forward");
    }
    const char *names[] = {"1.running_mean", "1.running_var", "1.num_batches_tracked"};
    for (int i = 0; i < 3; i++) {
        size_t n1 = 0, n2 = 0;
        ts_tensor *h = ts_module_get(m, names[i]);
        CHECK(h && ts_device_equal(ts_device_of(h), ts_cpu()));
        if (!h) continue;
        char *a = host_bytes(h, &n1), *b = host_bytes(ts_module_get(p, names[i]), &n2);
        check_same(a, n1, b, n2, names[i]);
    }
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    ts_module_free(m);
    ts_module_free(p);
    ts_release(x), ts_release(xd);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

/* training, prefetch 0: a unit without gradients of its own (the ReLU) is done with once the unit
 * before it starts its backward; after a grad-mode forward only activations stay on the device */
static void test_train_ring(void) {
    ts_module *m = small_new();
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = 0}), TS_OK);
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(2, 8), (ts_opts){0});
    ts_tensor *y = ts_sum(ts_forward(m, x));
    CHECK(y != NULL);
    /* the input, three outputs (ReLU's too) and the sum: 5 tiny activations, no weights */
    CHECK(mem_now() <= 5 * 512);
    ts_backward(y);
    CHECK_OK();
    ts_scope_end();
    ts_stream_stats st;
    CHECK_EQ(ts_module_stream_stats(m, &st), TS_OK);
    CHECK_EQ(st.backward_fetches, 4);
    CHECK_EQ(st.max_resident_units, 1);
    CHECK_EQ(mem_now(), 0);
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    ts_module_free(m);
    CHECK_OK();
}

/* a model on the device whose parameters have gradients already: they go to the host with them,
 * values intact, and back with unstream */
static void test_grads_move(void) {
    ts_module *m = ts_module_to(small_new(), ts_sim(0));
    ts_scope_begin();
    ts_backward(ts_sum(ts_forward(m, ts_randn(TS_SHAPE(2, 8), (ts_opts){.device = ts_sim(0)}))));
    ts_scope_end();
    CHECK_OK();
    ts_tensor_list l = ts_module_named_parameters(m);
    char *w[8] = {0}, *g[8] = {0};
    size_t nw[8], ng[8];
    CHECK(l.n == 6);
    for (int i = 0; i < l.n && i < 8; i++) {
        w[i] = host_bytes(l.tensors[i], &nw[i]);
        g[i] = host_bytes(ts_grad(l.tensors[i]), &ng[i]);
    }
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    CHECK_EQ(mem_now(), 0);
    for (int pass = 0; pass < 2; pass++) {
        const ts_device at = pass ? ts_sim(0) : ts_cpu();
        for (int i = 0; i < l.n && i < 8; i++) {
            ts_tensor *t = l.tensors[i], *gt = ts_grad(t);
            CHECK(gt && ts_device_equal(ts_device_of(t), at) &&
                  ts_device_equal(ts_device_of(gt), at));
            if (!gt) continue;
            size_t a, b;
            char *wb = host_bytes(t, &a), *gb = host_bytes(gt, &b);
            CHECK(a == nw[i] && !memcmp(wb, w[i], a));
            CHECK(b == ng[i] && !memcmp(gb, g[i], b));
            free(wb), free(gb);
        }
        if (!pass) CHECK_EQ(ts_module_unstream(m), TS_OK);
    }
    for (int i = 0; i < 8; i++) free(w[i]), free(g[i]);
    ts_tensor_list_free(&l);
    ts_module_free(m);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

/* stream, unstream, stream again: the same outputs; a model that lived on the device goes back
 * there and nothing of the stream holds it after; at most 64 models streamed at once */
static void test_restream(const char *ref, size_t nref, ts_tensor *x) {
    ts_module *m = mlp_new();
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = round}), TS_OK);
        size_t n;
        char *got = infer(m, x, &n, NULL);
        const bool same = got && n == nref && !memcmp(got, ref, n);
        CHECK(same);
        free(got);
        CHECK_EQ(ts_module_unstream(m), TS_OK);
        CHECK(!ts_module_is_streamed(m));
    }
    ts_module_free(m);
    ts_module *d = ts_module_to(small_new(), ts_sim(0));
    const size_t on_dev = mem_now();
    CHECK(on_dev > 0);
    CHECK_EQ(ts_module_stream(d, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    CHECK_EQ(mem_now(), 0);
    CHECK_EQ(ts_module_unstream(d), TS_OK);
    CHECK_EQ(mem_now(), on_dev);
    ts_module_free(d);
    CHECK_EQ(mem_now(), 0);
    enum { MAX = 64 };
    ts_module *many[MAX + 1];
    for (int i = 0; i <= MAX; i++) {
        many[i] = small_new();
        const ts_status st = ts_module_stream(many[i], ts_sim(0), (ts_stream_opts){0});
        CHECK_EQ(st, i < MAX ? TS_OK : TS_ERR_STATE);
    }
    CHECK_ERR_HAS(TS_ERR_STATE, "models streamed at once");
    CHECK(!ts_module_is_streamed(many[MAX]));
    for (int i = 0; i <= MAX; i++) ts_module_free(many[i]);
    CHECK_OK();
}

/* unstream out of device memory: nothing moves, the copies made before the failure are freed */
static void test_unstream_oom(void) {
    ts_module *m = ts_module_to(mlp_new(), ts_sim(0));
    CHECK_OK();
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    CHECK_EQ(mem_now(), 0);
    ts_empty_cache(ts_sim(0));
    /* room for about two of the five hidden Linears */
    const int64_t fill = (int64_t)((GPT_CAP - 2 * LIN - 1024) / 4);
    ts_tensor *f = ts_empty(TS_SHAPE(fill), (ts_opts){.device = ts_sim(0)});
    CHECK(f != NULL);
    const size_t with_fill = mem_now();
    CHECK_EQ(ts_module_unstream(m), TS_ERR_OOM);
    ts_error_clear();
    CHECK(ts_module_is_streamed(m));
    CHECK_EQ(mem_now(), with_fill);
    ts_release(f);
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "0.weight")), ts_sim(0)));
    ts_module_free(m);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

/* a backward that fails part-way (a weight changed since the forward) leaves a unit brought back
 * for it; unstream frees its memory though the retained graph (y's) still holds the handles */
static void test_failed_backward(void) {
    ts_manual_seed(4);
    ts_module *m =
        ts_sequential_new(2, (ts_module *[]){ts_linear_new(64, 64), ts_linear_new(64, 64)});
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    ts_scope_begin();
    ts_tensor *y = ts_sum(ts_forward(m, ts_randn(TS_SHAPE(2, 64), (ts_opts){0})));
    CHECK(y != NULL);
    CHECK(mem_now() < LIN); /* activations only */
    ts_no_grad_begin();
    ts_mul_scalar_(ts_module_get(m, "0.weight"), 2.0);
    ts_no_grad_end();
    CHECK_OK();
    ts_backward_ex(y, NULL, (ts_backward_opts){.retain_graph = true});
    CHECK_ERR_HAS(TS_ERR_STATE, "changed between the forward and its backward");
    ts_error_clear();
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    CHECK(mem_now() < LIN); /* the graph alive, the weights' memory gone */
    ts_scope_end();
    CHECK_EQ(mem_now(), 0);
    ts_module_free(m);
    CHECK_OK();
}

/* a unit's weights do not fit the device (even with the cache emptied): the forward fails with
 * TS_ERR_OOM, leaves none of its copies behind, and runs once there is room */
static void test_fetch_oom(void) {
    ts_module *m = mlp_new();
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 64), (ts_opts){0});
    ts_empty_cache(ts_sim(0));
    /* room for the input, not for a hidden Linear's weight */
    ts_tensor *f =
        ts_empty(TS_SHAPE((int64_t)((GPT_CAP - LIN / 2) / 4)), (ts_opts){.device = ts_sim(0)});
    CHECK(f != NULL);
    const size_t with_fill = mem_now();
    ts_scope_begin();
    ts_no_grad_begin();
    CHECK(ts_forward(m, x) == NULL);
    ts_no_grad_end();
    CHECK_ERR(TS_ERR_OOM);
    ts_error_clear();
    ts_scope_end();
    CHECK_EQ(mem_now(), with_fill);
    ts_stream_stats st;
    CHECK_EQ(ts_module_stream_stats(m, &st), TS_OK);
    CHECK(st.cache_flushes >= 1 && st.unit_fetches == 0);
    ts_release(f);
    size_t n;
    free(infer(m, x, &n, NULL));
    CHECK(ts_device_equal(ts_device_of(ts_module_get(m, "0.weight")), ts_cpu()));
    CHECK_EQ(mem_now(), 0);
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    ts_module_free(m);
    ts_release(x);
    CHECK_OK();
}
/* Three models streamed at once (registry slots 0, 1 and 2: each unit's backward hooks find
 * their own stream), each a copy of one model: every forward and every weight's gradient equal
 * the plain model's bits. */
static void test_many_streams(void) {
    ts_manual_seed(9);
    ts_module *plain = ts_module_to(small_new(), ts_sim(0)), *m[3];
    ts_tensor *x = ts_randn(TS_SHAPE(3, 8), (ts_opts){0});
    size_t nref = 0, n = 0;
    ts_scope_begin();
    char *ref = infer(plain, ts_to(x, ts_sim(0)), &nref, NULL);
    ts_scope_end();
    for (int k = 0; k < 3; k++) {
        ts_manual_seed(9);
        m[k] = small_new();
        CHECK_EQ(ts_module_stream(m[k], ts_sim(0), (ts_stream_opts){.prefetch = k % 2}), TS_OK);
    }
    for (int k = 0; k < 3; k++) {
        char *copy = ref ? malloc(nref) : NULL;
        if (copy) memcpy(copy, ref, nref);
        char what[40];
        snprintf(what, sizeof what, "stream %d of three", k);
        char *got = infer(m[k], x, &n, NULL);
        check_same(got, n, copy, nref, what);
    }
    /* training: each unit's backward hooks find their stream (the weights brought back) */
    size_t ng = 0;
    ts_scope_begin();
    CHECK_EQ(ts_backward(ts_sum(ts_forward(plain, ts_to(x, ts_sim(0))))), TS_OK);
    char *gref = host_bytes(ts_grad(ts_module_get(plain, "0.weight")), &ng);
    ts_scope_end();
    for (int k = 2; k >= 0; k--) {
        ts_scope_begin();
        CHECK_EQ(ts_backward(ts_sum(ts_forward(m[k], x))), TS_OK);
        ts_tensor *g = ts_grad(ts_module_get(m[k], "0.weight"));
        CHECK(g != NULL);
        char *got = g ? host_bytes(g, &n) : NULL, *copy = gref ? malloc(ng) : NULL;
        if (copy) memcpy(copy, gref, ng);
        char what[48];
        snprintf(what, sizeof what, "stream %d of three, gradient", k);
        check_same(got, n, copy, ng, what);
        ts_scope_end();
    }
    free(gref);
    for (int k = 0; k < 3; k++) {
        CHECK_EQ(ts_module_unstream(m[k]), TS_OK);
        ts_module_free(m[k]);
    }
    free(ref);
    ts_module_free(plain);
    ts_release(x);
    CHECK_OK();
}
/* The backward's refill of a unit out of device memory even with the cache emptied (the last
 * unit, a Linear(4, 4096): its 64 KiB weight): the backward fails with TS_ERR_OOM naming
 * module_stream, and nothing of the unit stays on the device once the graph is gone. The room
 * left beside a fill is swept so that some tries fail there (others fail elsewhere, or succeed). */
static void test_refill_oom(void) {
    ts_manual_seed(4);
    ts_module *m =
        ts_sequential_new(2, (ts_module *[]){ts_linear_new(8, 4), ts_linear_new(4, 4096)});
    CHECK_EQ(ts_module_stream(m, ts_sim(0), (ts_stream_opts){0}), TS_OK);
    ts_tensor *x = ts_randn(TS_SHAPE(2, 8), (ts_opts){0});
    const int64_t w = 4 * 4096 * 4;
    int at_refill = 0;
    for (int64_t room = w; room <= 4 * w; room += 2048) {
        ts_empty_cache(ts_sim(0));
        const int64_t fill = ((int64_t)GPT_CAP - (int64_t)mem_now() - room) / 4;
        ts_tensor *f = ts_empty(TS_SHAPE(fill), (ts_opts){.device = ts_sim(0)});
        CHECK(f != NULL);
        ts_scope_begin();
        ts_tensor *o = ts_forward(m, x), *y = ts_sum(ts_mul(o, o));
        const ts_status st = y ? ts_backward(y) : TS_ERR_STATE;
        const bool refill = st == TS_ERR_OOM && strstr(ts_error_message(), "module_stream");
        ts_error_clear();
        ts_scope_end();
        ts_release(f);
        if (refill) {
            at_refill++;
            if (mem_now() != 0)
                fprintf(stderr, "  room %lld: %zu bytes left after a failed refill\n",
                        (long long)room, mem_now());
            CHECK_EQ(mem_now(), 0);
        }
    }
    CHECK(at_refill > 0);
    CHECK_EQ(ts_module_unstream(m), TS_OK);
    ts_module_free(m);
    ts_release(x);
    CHECK_EQ(mem_now(), 0);
    CHECK_OK();
}

int main(void) {
    if (ts_sim_configure(2, 0) != TS_OK)
        return ts_test_skip("sim devices: %s", ts_test_error_str());
    refs r = make_refs();
    ts_empty_cache(ts_sim(0));
    /* sim:0 configured once already: a failure here is a tensor left on it (a leak), not a skip */
    CHECK_EQ(ts_sim_configure(2, CAP), TS_OK);
    if (ts_error()) return ts_test_finish();
    char *mlp_ref = malloc(r.n_mlp);
    memcpy(mlp_ref, r.mlp, r.n_mlp);
    test_mlp(&r);
    test_restream(mlp_ref, r.n_mlp, r.x_mlp);
    free(mlp_ref);
    test_buffers();
    test_train_ring();
    test_many_streams();
    test_failed_backward();
    test_grads_move();
    test_errors();
    ts_fault_sweep(&(ts_sweep_case){.name = "module_stream",
                                    .setup = sweep_setup,
                                    .run = sweep_run,
                                    .check = sweep_check,
                                    .teardown = sweep_teardown},
                   400);
    ts_empty_cache(ts_sim(0));
    CHECK_EQ(ts_sim_configure(2, GPT_CAP), TS_OK);
    if (ts_error()) return ts_test_finish();
    test_gpt_link(&r);
    test_train(&r);
    test_unstream_oom();
    test_fetch_oom();
    test_refill_oom();
    ts_release(r.x_mlp);
    ts_release(r.x_gpt);
    ts_release(r.y_gpt);
    free(r.mlp), free(r.gpt), free(r.trained);
    return ts_test_finish();
}
