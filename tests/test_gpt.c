/* test_gpt.c — the GPT model's own code (src/models/gpt.c) beyond the golden comparison of its
 * forward (test_golden_gpt): the configuration's defaults and ts_gpt_get_config, nanoGPT's
 * initialization (normal(0, 0.02), the residual projections 0.02 / sqrt(2 n_layer), zero biases,
 * unit norms), ts_gpt_generate against a greedy loop written here (the crop to the last `context`
 * tokens, a batch of several rows, eval mode while it runs and the module's mode restored), the
 * checkpointing choice of blocks, and every refusal, on every device. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

/* n_head 1 (a single head is a valid configuration) and dropout 0.5: a generation that ran in
 * training mode would draw dropout masks and differ from the eval-mode loop below */
static const ts_gpt_config SMALL = {
    .vocab_size = 11, .context = 4, .n_layer = 2, .n_head = 1, .n_embd = 8, .dropout = 0.5};

#define B     2
#define T0    3
#define NEW   5 /* T0 + NEW - 1 = 7 > context 4: the last steps crop */
#define T_MAX (T0 + NEW)
#define V     11

static void expect_error(ts_status code, const char *needle) {
    CHECK_EQ(ts_error(), code);
    const char *msg = ts_error_message();
    const bool has = msg && strstr(msg, needle);
    if (!has) fprintf(stderr, "  expected \"%s\" in \"%s\"\n", needle, msg ? msg : "(none)");
    CHECK(has);
    ts_error_clear();
}

static ts_tensor *tokens(const int64_t *v, int64_t rows, int64_t cols, ts_device d) {
    return ts_to(ts_tensor_i64(TS_SHAPE(rows, cols), v, (ts_opts){.dtype = TS_I64}), d);
}

/* The greedy continuation computed here: each step forwards the last min(T, context) tokens in
 * eval mode without a graph and appends the first maximum of the last position's logits. */
static bool greedy_reference(ts_module *m, const int64_t *start, int64_t out[B][T_MAX],
                             ts_device d) {
    const bool was_training = m->training;
    ts_module_eval(m);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T0; t++) out[b][t] = start[b * T0 + t];
    bool ok = true;
    ts_no_grad_begin();
    for (int T = T0; ok && T < T_MAX; T++) {
        const int from = T > SMALL.context ? T - (int)SMALL.context : 0, n = T - from;
        int64_t cond[B * T_MAX];
        for (int b = 0; b < B; b++)
            for (int t = 0; t < n; t++) cond[b * n + t] = out[b][from + t];
        ts_scope_begin();
        ts_tensor *logits = ts_forward(m, tokens(cond, B, n, d));
        double last[B * V];
        ok = logits &&
             ts_copy_to_host(
                 ts_to(ts_to_dtype(ts_contiguous(ts_select(logits, 1, n - 1)), TS_F64), ts_cpu()),
                 last, sizeof last) == TS_OK;
        for (int b = 0; ok && b < B; b++) {
            int best = 0;
            for (int j = 1; j < V; j++)
                if (last[b * V + j] > last[b * V + best]) best = j;
            out[b][T] = best;
        }
        ts_scope_end();
    }
    ts_no_grad_end();
    ts_module_train(m, was_training);
    return ok;
}

static void test_generate(ts_device d) {
    static const int64_t start[B * T0] = {1, 7, 3, 10, 0, 5};
    ts_manual_seed(21);
    ts_module *m = ts_gpt_new(SMALL);
    CHECK(m != NULL);
    if (!m) return;
    ts_module_to(m, d);
    int64_t want[B][T_MAX], got[B][T_MAX];
    CHECK(greedy_reference(m, start, want, d));
    ts_scope_begin();
    ts_module_train(m, true);
    ts_tensor *out =
        ts_gpt_generate(m, tokens(start, B, T0, d), NEW, (ts_sample_opts){.greedy = true});
    CHECK(out != NULL);
    CHECK(m->training);       /* the mode restored */
    CHECK(ts_grad_enabled()); /* the no-grad section closed */
    if (out) {
        ts_shape s = ts_shape_of(out);
        CHECK(s.ndim == 2 && s.dims[0] == B && s.dims[1] == T_MAX);
        CHECK_EQ(ts_dtype_of(out), TS_I64);
        CHECK(ts_device_equal(ts_device_of(out), d));
        const bool read = ts_copy_to_host(ts_to(out, ts_cpu()), got, sizeof got) == TS_OK;
        CHECK(read);
        bool same = read;
        for (int b = 0; same && b < B; b++)
            for (int t = 0; t < T_MAX; t++) same &= got[b][t] == want[b][t];
        if (!same && read)
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T_MAX; t++)
                    if (got[b][t] != want[b][t])
                        fprintf(stderr, "  %s row %d token %d: %lld, the loop's %lld\n",
                                ts_device_str(d), b, t, (long long)got[b][t],
                                (long long)want[b][t]);
        CHECK(same);
    }
    /* no new token: the prompt itself */
    ts_module_eval(m);
    out = ts_gpt_generate(m, tokens(start, B, T0, d), 0, (ts_sample_opts){0});
    CHECK(out != NULL && ts_size(out, 0) == B && ts_size(out, 1) == T0);
    CHECK(!m->training); /* eval stays eval */
    if (out) {
        int64_t back[B * T0];
        CHECK(ts_copy_to_host(ts_to(out, ts_cpu()), back, sizeof back) == TS_OK &&
              memcmp(back, start, sizeof back) == 0);
    }
    ts_scope_end();
    ts_module_free(m);
}

static void test_config(void) {
    ts_module *m = ts_gpt_new((ts_gpt_config){.dropout = 0.25});
    ts_gpt_config c = ts_gpt_get_config(m);
    CHECK(c.vocab_size == 256 && c.context == 256 && c.n_layer == 4 && c.n_head == 4 &&
          c.n_embd == 256 && c.dropout == 0.25);
    ts_module_free(m);
    m = ts_gpt_new(SMALL);
    c = ts_gpt_get_config(m);
    CHECK(c.vocab_size == 11 && c.context == 4 && c.n_layer == 2 && c.n_head == 1 &&
          c.n_embd == 8 && c.dropout == 0.5);
    ts_module_free(m);
    ts_module *lin = ts_linear_new(2, 2);
    c = ts_gpt_get_config(lin);
    CHECK(c.vocab_size == 0 && c.context == 0 && c.n_layer == 0 && c.n_embd == 0);
    expect_error(TS_ERR_ARG, "expected a GPT module");
    ts_module_free(lin);
}

/* Each parameter against its distribution: normal(0, s) with s = 0.02, or 0.02 / sqrt(2 n_layer)
 * = 0.01 for the residual projections (out_proj, linear2) at n_layer 2; the sample's std within
 * 10% (its relative standard error is 1 / sqrt(2 n) <= 1.6% for n >= 2048) and its mean within
 * 6 s / sqrt(n); biases exactly 0, layer norm weights exactly 1. */
static void test_init(void) {
    ts_manual_seed(5);
    ts_module *m = ts_gpt_new(
        (ts_gpt_config){.vocab_size = 64, .context = 32, .n_layer = 2, .n_head = 2, .n_embd = 64});
    ts_tensor_list ps = ts_module_named_parameters(m);
    int normal = 0, residual = 0, zeros = 0, ones = 0;
    ts_scope_begin();
    for (int i = 0; i < ps.n; i++) {
        const char *n = ps.names[i];
        ts_tensor *t = ts_to_dtype(ps.tensors[i], TS_F64);
        const int64_t count = ts_numel(t);
        const bool norm = strstr(n, "norm") || !strncmp(n, "ln_f.", 5);
        const bool is_weight = strlen(n) >= 6 && !strcmp(n + strlen(n) - 6, "weight");
        if (norm && is_weight) {
            ones++;
            CHECK_EQ(ts_item(ts_min(t)), 1.0);
            CHECK_EQ(ts_item(ts_max(t)), 1.0);
        } else if (ts_ndim(t) == 1) {
            zeros++;
            CHECK_EQ(ts_item(ts_max(ts_abs(t))), 0.0);
        } else {
            const bool res = strstr(n, "out_proj.weight") || strstr(n, "linear2.weight");
            const double s = res ? 0.01 : 0.02, sd = ts_item(ts_std(t)), mean = ts_item(ts_mean(t));
            res ? residual++ : normal++;
            const bool fits = fabs(sd - s) <= 0.1 * s && fabs(mean) <= 6 * s / sqrt((double)count);
            if (!fits) fprintf(stderr, "  %s: std %g mean %g, expected std %g\n", n, sd, mean, s);
            CHECK(fits);
        }
    }
    ts_scope_end();
    /* tok_emb, pos_emb and per block in_proj and linear1; out_proj and linear2 per block; the
     * biases (4 per block) and the norms' biases (2 per block and ln_f's); the norms' weights */
    CHECK_EQ(normal, 2 + 2 * 2);
    CHECK_EQ(residual, 2 * 2);
    CHECK_EQ(zeros, 2 * 4 + 2 * 2 + 1);
    CHECK_EQ(ones, 2 * 2 + 1);
    ts_tensor_list_free(&ps);
    ts_module_free(m);
}

static void test_checkpoint_choice(void) {
    ts_module *m = ts_gpt_new(
        (ts_gpt_config){.vocab_size = 8, .context = 4, .n_layer = 3, .n_head = 1, .n_embd = 4});
    CHECK_EQ(ts_gpt_checkpoint_blocks(m, 2), TS_OK);
    CHECK(ts_module_checkpointed(ts_module_child(m, "blocks.0")));
    CHECK(!ts_module_checkpointed(ts_module_child(m, "blocks.1")));
    CHECK(ts_module_checkpointed(ts_module_child(m, "blocks.2")));
    CHECK_EQ(ts_gpt_checkpoint_sublayers(m, 1), TS_OK); /* replaces the whole-block choice */
    CHECK(!ts_module_checkpointed(ts_module_child(m, "blocks.0")));
    CHECK_EQ(ts_gpt_checkpoint_blocks(m, -1), TS_ERR_ARG);
    expect_error(TS_ERR_ARG, "every must be >= 0");
    ts_module *lin = ts_linear_new(2, 2);
    CHECK_EQ(ts_gpt_checkpoint_sublayers(lin, 1), TS_ERR_ARG);
    expect_error(TS_ERR_ARG, "gpt_checkpoint_sublayers: expected a GPT module, got Linear");
    ts_module_free(lin);
    ts_module_free(m);
}

static void test_refusals(void) {
    CHECK(ts_gpt_new((ts_gpt_config){.n_embd = 10, .n_head = 4}) == NULL);
    expect_error(TS_ERR_ARG, "divisible");
    CHECK(ts_gpt_new((ts_gpt_config){.vocab_size = -1}) == NULL);
    expect_error(TS_ERR_ARG, "got -1, 256, 4, 4, 256");
    CHECK(ts_gpt_new((ts_gpt_config){.n_embd = 8, .dropout = 1.5}) == NULL);
    expect_error(TS_ERR_ARG, "dropout in [0, 1]");
    CHECK(ts_gpt_new((ts_gpt_config){.n_embd = 8, .dropout = NAN}) == NULL);
    expect_error(TS_ERR_ARG, "dropout");

    ts_module *m = ts_gpt_new(SMALL);
    ts_scope_begin();
    static const int64_t five[5] = {1, 2, 3, 4, 5};
    CHECK(ts_forward(m, tokens(five, 1, 5, ts_cpu())) == NULL); /* 5 > context 4 */
    expect_error(TS_ERR_SHAPE, "length 5, the context is 4");
    CHECK(ts_forward(m, ts_reshape(tokens(five, 1, 5, ts_cpu()), TS_SHAPE(5))) == NULL);
    expect_error(TS_ERR_SHAPE, "[B, T]");
    CHECK(ts_forward(m, ts_to_dtype(tokens(five, 1, 4, ts_cpu()), TS_F32)) == NULL);
    expect_error(TS_ERR_SHAPE, "float32");

    const ts_sample_opts g = {.greedy = true};
    ts_tensor *idx = tokens(five, 1, 2, ts_cpu());
    CHECK(ts_gpt_generate(m, idx, -1, g) == NULL);
    expect_error(TS_ERR_ARG, "new_tokens must be >= 0, got -1");
    CHECK(ts_gpt_generate(m, NULL, 1, g) == NULL);
    expect_error(TS_ERR_ARG, "gpt_generate: idx is NULL");
    CHECK(ts_gpt_generate(NULL, idx, 1, g) == NULL);
    expect_error(TS_ERR_ARG, "gpt_generate: expected a GPT module, got NULL");
    CHECK(ts_gpt_generate(m, ts_narrow(idx, 1, 0, 0), 0, g) == NULL); /* T0 = 0 */
    expect_error(TS_ERR_SHAPE, "T0 >= 1");
    CHECK(ts_gpt_generate(m, ts_to_dtype(idx, TS_I32), 1, g) == NULL);
    expect_error(TS_ERR_SHAPE, "gpt_generate: expected idx of dtype int64");
    CHECK(ts_gpt_generate(m, ts_reshape(idx, TS_SHAPE(2)), 1, g) == NULL);
    expect_error(TS_ERR_SHAPE, "with 1 dims");
    ts_scope_end();
    ts_module_free(m);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) test_generate(devs[i]);
    test_config();
    test_init();
    test_checkpoint_choice();
    test_refusals();
    return ts_test_finish();
}
