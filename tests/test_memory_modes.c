/* test_memory_modes.c — issue 55's correctness bar, every mode against plain training:
 * - a GPT-mini (with dropout) and a ResNet-20 (narrow, 16x16 images), each trained 50 steps with
 *   AdamW on a capped sim:0 with activation checkpointing (every block; the GPT's also by
 *   sublayer, attention and feed-forward each recomputed on its own), activation offload
 *   (save_on_cpu, pinned, prefetch 2), weight streaming (prefetch 2), optimizer offload, and
 *   streaming with checkpointing, equal plain training on the uncapped sim:0 bit for bit: the loss
 *   of every step, the final parameters and buffers (sim runs the cpu kernels, and every mode
 *   runs the same kernels on the same layouts in the same order). The cap lies below plain
 *   training's peak (plain training under it fails with out-of-memory) by half of the smallest
 *   saving of the modes (the optimizer offload's: AdamW's two moments), so each mode has to save
 *   memory to pass.
 *   One exception, as in PyTorch: a checkpointed block's batch norms run twice in training mode,
 *   so a checkpointed ResNet's running statistics take one more update per step (the parameters
 *   and losses do not see them: training mode normalises with the batch's statistics); there the
 *   buffers are not compared.
 * - a GPT whose plain training needs 4x the capped device (its peak on the uncapped device): plain
 *   training fails with TS_ERR_OOM naming sim:0 and the sizes, leaking nothing; placed by budget
 *   over four capped sim devices (ts_module_place, with gradients) with its optimizer offloaded it
 *   trains to the uncapped run's losses and weights bit for bit.
 * - inference of a GPT whose weights are 8x the cap, streamed: the uncapped run's logits bit for
 *   bit. Placement and streaming do not combine (ts_module_stream refuses a placed model), so the
 *   8x run is streaming alone; the ResNet streams by units since placement cuts a ResNet into its
 *   stem, blocks, pool and classifier. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/optim_offload.h"
#include "tessera/placement.h"
#include "tessera/saved_hooks.h"
#include "tessera/weight_stream.h"
#include "ts_test.h"

#define STEPS 50
#define NDEV  4 /* sim devices: the 4x model is placed over all of them */

typedef enum {
    M_PLAIN,
    M_CKPT,
    M_CKPT_SUB,
    M_ACT_OFFLOAD,
    M_STREAM,
    M_OPT_OFFLOAD,
    M_STREAM_CKPT,
    N_MODES
} mode;
static const char *const mode_name[N_MODES] = {"plain",
                                               "checkpointing",
                                               "checkpointing by sublayer",
                                               "activation offload",
                                               "weight streaming",
                                               "optimizer offload",
                                               "streaming + checkpointing"};

/* ------------------------------------------------------------------ models and data */
typedef enum { K_GPT, K_RESNET, K_GPT4X } kind;

enum { GPT_B = 4, GPT_T = 32, GPT_V = 64, RN_B = 4, RN_HW = 16, RN_CLASSES = 10 };

static ts_module *model_new(kind k) {
    ts_manual_seed(3);
    switch (k) {
    case K_GPT:
        return ts_gpt_new((ts_gpt_config){.vocab_size = GPT_V,
                                          .context = GPT_T,
                                          .n_layer = 4,
                                          .n_head = 2,
                                          .n_embd = 32,
                                          .dropout = 0.1});
    case K_RESNET:
        return ts_resnet20_new((ts_resnet_config){.num_classes = RN_CLASSES, .width = 4});
    case K_GPT4X: /* weights dominate: 8 tokens a row */
        return ts_gpt_new((ts_gpt_config){
            .vocab_size = GPT_V, .context = 8, .n_layer = 4, .n_head = 2, .n_embd = 64});
    }
    return NULL;
}

/* Every step's batch, made once on the cpu: tokens [STEPS, B, T + 1] for a GPT, images and labels
 * for the ResNet. */
typedef struct data {
    ts_tensor *tok, *img, *lab;
} data;

static data data_new(kind k) {
    data d = {0};
    ts_manual_seed(17);
    if (k == K_RESNET) {
        d.img = ts_randn(TS_SHAPE(STEPS, RN_B, 3, RN_HW, RN_HW), (ts_opts){0});
        d.lab = ts_randint(0, RN_CLASSES, TS_SHAPE(STEPS, RN_B), (ts_opts){.dtype = TS_I64});
    } else {
        const int64_t t = k == K_GPT ? GPT_T : 8;
        d.tok = ts_randint(0, GPT_V, TS_SHAPE(STEPS, GPT_B, t + 1), (ts_opts){.dtype = TS_I64});
    }
    CHECK_OK();
    return d;
}

static void data_free(data *d) { ts_release(d->tok), ts_release(d->img), ts_release(d->lab); }

/* step s's loss (in the caller's scope): inputs to sim:0 (a streamed or placed model moves them
 * itself, and sim:0 is where its first unit runs or where its input goes) */
static ts_tensor *loss_of(ts_module *m, const data *d, int s, mode md) {
    const ts_device dev = ts_sim(0);
    if (d->img) {
        ts_tensor *x = ts_to(ts_select(d->img, 0, s), dev);
        ts_tensor *y = ts_to(ts_select(d->lab, 0, s), dev);
        if (md == M_ACT_OFFLOAD)
            ts_save_on_cpu_begin((ts_save_on_cpu_opts){.pin_memory = true, .prefetch = 2});
        ts_tensor *out = ts_forward(m, x);
        if (md == M_ACT_OFFLOAD) ts_save_on_cpu_end();
        return ts_cross_entropy(out, y);
    }
    ts_tensor *row = ts_select(d->tok, 0, s);
    const int64_t t = ts_shape_of(row).dims[1] - 1;
    ts_tensor *x = ts_to(ts_contiguous(ts_slice(row, 1, 0, t, 1)), dev);
    ts_tensor *y =
        ts_to(ts_reshape(ts_contiguous(ts_slice(row, 1, 1, t + 1, 1)), TS_SHAPE(-1)), dev);
    if (md == M_ACT_OFFLOAD)
        ts_save_on_cpu_begin((ts_save_on_cpu_opts){.pin_memory = true, .prefetch = 2});
    ts_tensor *out = ts_forward(m, x);
    if (md == M_ACT_OFFLOAD) ts_save_on_cpu_end();
    return ts_cross_entropy(ts_reshape(out, TS_SHAPE(-1, GPT_V)), y);
}

/* ------------------------------------------------------------------ bytes */
/* t's bytes appended to out[0..*n) (realloc'ed) */
static char *append(char *out, size_t *n, ts_tensor *t) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(t, ts_cpu()));
    const size_t k = c ? ts_nbytes(c) : 0;
    char *o = realloc(out, *n + k + 1);
    const bool ok = o && c && ts_copy_to_host(c, o + *n, k) == TS_OK;
    CHECK(ok);
    if (ok) *n += k;
    ts_scope_end();
    return o ? o : out;
}

/* every tensor's bytes of l, which is freed */
static char *list_bytes(ts_tensor_list *l, size_t *n) {
    char *out = NULL;
    *n = 0;
    for (int i = 0; i < l->n; i++) out = append(out, n, l->tensors[i]);
    ts_tensor_list_free(l);
    return out;
}

/* the result of a training run: every step's loss, the parameters' and buffers' bytes */
typedef struct result {
    double loss[STEPS];
    int steps; /* steps completed */
    char *params, *bufs;
    size_t n_params, n_bufs;
    size_t peak; /* sim:0's peak memory (allocated by tensors) */
} result;

static void result_free(result *r) {
    free(r->params), free(r->bufs);
    *r = (result){0};
}

static void take_state(ts_module *m, result *r) {
    ts_tensor_list p = ts_module_named_parameters(m), b = ts_module_named_buffers(m);
    r->params = list_bytes(&p, &r->n_params);
    r->bufs = list_bytes(&b, &r->n_bufs);
}

static size_t mem_now(int dev) {
    ts_mem_stats s;
    CHECK_EQ(ts_memory_stats(ts_sim(dev), &s), TS_OK);
    return s.allocated;
}

static size_t weight_bytes(ts_module *m) {
    size_t n = 0;
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n; i++) n += ts_nbytes(l.tensors[i]);
    ts_tensor_list_free(&l);
    return n;
}

/* ------------------------------------------------------------------ one training run */
/* Trains a fresh model of kind k in mode md on sim:0 (budgets: placed over them with an offloaded
 * optimizer instead); stops at the first error, which stays set. */
static void train(kind k, const data *d, mode md, const char *budgets, result *r) {
    *r = (result){0};
    ts_module *m = model_new(k);
    CHECK(m != NULL);
    ts_status st = TS_OK;
    if (budgets)
        st = ts_module_place_str(m, budgets, (ts_place_opts){.with_grads = true}, NULL);
    else if (md == M_STREAM || md == M_STREAM_CKPT)
        st = ts_module_stream(m, ts_sim(0), (ts_stream_opts){.prefetch = 2});
    else if (!ts_module_to(m, ts_sim(0)))
        st = ts_error();
    if (st == TS_OK && (md == M_CKPT || md == M_STREAM_CKPT))
        st = k == K_RESNET ? ts_resnet_checkpoint_blocks(m, 1) : ts_gpt_checkpoint_blocks(m, 1);
    if (st == TS_OK && md == M_CKPT_SUB) st = ts_gpt_checkpoint_sublayers(m, 1);
    ts_optim *o = NULL;
    if (st == TS_OK) o = ts_adamw_new(m, (ts_adam_opts){.lr = 1e-2, .weight_decay = 0.01});
    if (o && (md == M_OPT_OFFLOAD || budgets)) st = ts_optim_offload(o);
    ts_memory_reset_peak(ts_sim(0));
    ts_manual_seed(5); /* dropout's numbers */
    for (int s = 0; s < STEPS && o && st == TS_OK && ts_error() == TS_OK; s++) {
        ts_scope_begin();
        ts_optim_zero_grad(o);
        ts_tensor *l = loss_of(m, d, s, md);
        if (l) {
            r->loss[s] = ts_item(l);
            ts_backward(l);
        }
        if (ts_error() == TS_OK && ts_optim_step(o) == TS_OK) r->steps++;
        ts_scope_end();
    }
    ts_mem_stats ms;
    ts_memory_stats(ts_sim(0), &ms);
    r->peak = ms.peak_allocated;
    if (r->steps == STEPS) take_state(m, r);
    ts_stream_stats ss;
    if ((md == M_STREAM || md == M_STREAM_CKPT) && ts_module_stream_stats(m, &ss) == TS_OK) {
        /* cut into units (a ResNet too), at most prefetch + 1 of them on the device */
        CHECK(ss.units >= (k == K_RESNET ? 12 : 6));
        CHECK(ss.max_resident_units <= 3);
        CHECK_EQ(ss.backward_fetches, (uint64_t)STEPS * (uint64_t)ss.units);
    }
    ts_optim_free(o);
    ts_module_free(m);
}

/* r equals the reference bit for bit (buffers too unless skipped) */
static void check_equal(const result *ref, const result *r, bool bufs, const char *what) {
    CHECK_EQ(r->steps, STEPS);
    int first_diff = -1;
    for (int s = 0; s < r->steps && first_diff < 0; s++)
        if (memcmp(&ref->loss[s], &r->loss[s], sizeof(double))) first_diff = s;
    CHECK_EQ(first_diff, -1);
    if (first_diff >= 0)
        fprintf(stderr, "  %s: step %d's loss %.17g, plain %.17g\n", what, first_diff,
                r->loss[first_diff], ref->loss[first_diff]);
    const bool params = r->params && r->n_params == ref->n_params && r->n_params > 0 &&
                        !memcmp(r->params, ref->params, r->n_params);
    CHECK(params);
    if (!params) fprintf(stderr, "  %s: the final parameters differ from plain training's\n", what);
    if (bufs) {
        const bool b =
            r->n_bufs == ref->n_bufs && (!r->n_bufs || !memcmp(r->bufs, ref->bufs, r->n_bufs));
        CHECK(b);
        if (!b) fprintf(stderr, "  %s: the final buffers differ from plain training's\n", what);
    }
}

static void leak_check(void) {
    for (int i = 0; i < NDEV; i++) CHECK_EQ(mem_now(i), 0);
}

/* ------------------------------------------------------------------ the modes */
static void check_modes(kind k, const char *name, const result *ref, size_t weights) {
    /* the smallest saving: AdamW's two moments, what the optimizer offload removes */
    const size_t cap = ref->peak - weights;
    printf("%s: plain peak %zu B, cap %zu B\n", name, ref->peak, cap);
    ts_empty_cache(ts_sim(0));
    CHECK_EQ(ts_sim_configure(NDEV, cap), TS_OK);
    if (ts_error()) return;
    data d = data_new(k);
    /* plain training does not fit */
    result r;
    train(k, &d, M_PLAIN, NULL, &r);
    CHECK(r.steps < STEPS);
    CHECK_ERR(TS_ERR_OOM);
    ts_error_clear();
    result_free(&r);
    leak_check();
    for (int md = M_CKPT; md < N_MODES; md++) {
        if (k == K_RESNET && md == M_CKPT_SUB) continue; /* a GPT's blocks have sublayers */
        ts_empty_cache(ts_sim(0));
        train(k, &d, (mode)md, NULL, &r);
        CHECK_OK();
        char what[64];
        snprintf(what, sizeof what, "%s, %s", name, mode_name[md]);
        check_equal(ref, &r, !(k == K_RESNET && (md == M_CKPT || md == M_STREAM_CKPT)), what);
        printf("  %-26s peak %zu B (%.2fx plain)\n", mode_name[md], r.peak,
               (double)r.peak / (double)ref->peak);
        CHECK(r.peak <= cap);
        result_free(&r);
        leak_check();
    }
    data_free(&d);
    ts_empty_cache(ts_sim(0));
    CHECK_EQ(ts_sim_configure(NDEV, 0), TS_OK);
}

/* ------------------------------------------------------------------ 4x the device */
/* the pending error: out of memory on sim:0, with what was asked and what the device has */
static void check_oom_message(void) {
    const char *msg = ts_error_message();
    CHECK_EQ(ts_error(), TS_ERR_OOM);
    const char *parts[] = {"out of memory on sim:0", "tried to allocate", "total capacity of",
                           "is free"};
    for (int i = 0; i < 4; i++) {
        const bool has = msg && strstr(msg, parts[i]);
        CHECK(has);
        if (!has) fprintf(stderr, "  the message has no \"%s\": %s\n", parts[i], msg ? msg : "");
    }
    ts_error_clear();
}

static void check_4x(const result *ref) {
    const size_t cap = ref->peak / 4;
    printf("4x model: plain peak %zu B, cap %zu B\n", ref->peak, cap);
    for (int i = 0; i < NDEV; i++) ts_empty_cache(ts_sim(i));
    CHECK_EQ(ts_sim_configure(NDEV, cap), TS_OK);
    if (ts_error()) return;
    data d = data_new(K_GPT4X);
    result r;
    train(K_GPT4X, &d, M_PLAIN, NULL, &r);
    CHECK(r.steps < STEPS);
    check_oom_message();
    result_free(&r);
    leak_check();
    /* with gradients a block takes about half a device: one block a device, the rest of each for
     * the activations, the tied head's logits and the step's temporaries */
    char budgets[256];
    const size_t b = cap * 3 / 5;
    snprintf(budgets, sizeof budgets, "sim:0=%zu,sim:1=%zu,sim:2=%zu,sim:3=%zu", b, b, b, b);
    for (int i = 0; i < NDEV; i++) ts_empty_cache(ts_sim(i));
    train(K_GPT4X, &d, M_PLAIN, budgets, &r);
    CHECK_OK();
    check_equal(ref, &r, true, "4x model placed with its optimizer offloaded");
    result_free(&r);
    leak_check();
    data_free(&d);
    for (int i = 0; i < NDEV; i++) ts_empty_cache(ts_sim(i));
    CHECK_EQ(ts_sim_configure(NDEV, 0), TS_OK);
}

/* ------------------------------------------------------------------ 8x the device, inference */
static ts_module *gpt8x_new(void) {
    ts_manual_seed(23);
    ts_module *g = ts_gpt_new((ts_gpt_config){
        .vocab_size = GPT_V, .context = 8, .n_layer = 48, .n_head = 2, .n_embd = 64});
    if (g) ts_module_eval(g);
    return g;
}

static char *logits(ts_module *m, ts_tensor *x, size_t *n) {
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *y = ts_forward(m, x);
    ts_no_grad_end();
    *n = 0;
    char *b = y ? append(NULL, n, y) : NULL;
    ts_scope_end();
    return b;
}

static void check_8x(void) {
    ts_manual_seed(29);
    ts_tensor *x = ts_randint(0, GPT_V, TS_SHAPE(2, 8), (ts_opts){.dtype = TS_I64});
    ts_module *g = ts_module_to(gpt8x_new(), ts_sim(0));
    size_t n_ref, n;
    ts_scope_begin();
    char *ref = logits(g, ts_to(x, ts_sim(0)), &n_ref);
    ts_scope_end();
    ts_module_free(g);
    g = gpt8x_new();
    const size_t w = weight_bytes(g), cap = w / 8;
    for (int i = 0; i < NDEV; i++) ts_empty_cache(ts_sim(i));
    CHECK_EQ(ts_sim_configure(NDEV, cap), TS_OK);
    /* plainly it does not fit */
    ts_module *plain = gpt8x_new();
    ts_module_to(plain, ts_sim(0));
    check_oom_message();
    ts_module_free(plain);
    leak_check();
    ts_empty_cache(ts_sim(0));
    CHECK_EQ(ts_module_stream(g, ts_sim(0), (ts_stream_opts){.prefetch = 1}), TS_OK);
    char *got = logits(g, x, &n);
    CHECK(got && ref && n == n_ref && n > 0 && !memcmp(got, ref, n));
    ts_stream_stats st;
    CHECK_EQ(ts_module_stream_stats(g, &st), TS_OK);
    CHECK(st.max_resident_bytes <= cap);
    printf("8x model: weights %zu B, cap %zu B, at most %zu B of them resident\n", w, cap,
           st.max_resident_bytes);
    CHECK_EQ(ts_module_unstream(g), TS_OK);
    ts_module_free(g);
    free(ref), free(got);
    ts_release(x);
    leak_check();
    ts_empty_cache(ts_sim(0));
    CHECK_EQ(ts_sim_configure(NDEV, 0), TS_OK);
}

int main(void) {
    if (ts_sim_configure(NDEV, 0) != TS_OK)
        return ts_test_skip("sim devices: %s", ts_test_error_str());
    /* one thread: what is tested is each mode's schedule, not the kernels' threading, and on a
     * loaded host OpenMP's waiting costs far more than these small models' compute */
    ts_set_num_threads(1);
    const kind kinds[2] = {K_GPT, K_RESNET};
    const char *names[2] = {"GPT-mini", "ResNet-20"};
    for (int i = 0; i < 2; i++) {
        data d = data_new(kinds[i]);
        result ref;
        train(kinds[i], &d, M_PLAIN, NULL, &ref);
        CHECK_OK();
        data_free(&d);
        ts_module *m = model_new(kinds[i]);
        const size_t w = weight_bytes(m);
        ts_module_free(m);
        check_modes(kinds[i], names[i], &ref, w);
        result_free(&ref);
    }
    data d = data_new(K_GPT4X);
    result ref4;
    train(K_GPT4X, &d, M_PLAIN, NULL, &ref4);
    CHECK_OK();
    data_free(&d);
    check_4x(&ref4);
    result_free(&ref4);
    check_8x();
    return ts_test_finish();
}
