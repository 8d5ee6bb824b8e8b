/* test_fault_attention.c — allocation-failure sweeps (fault_sweep.h) over attention:
 * ts_scaled_dot_product_attention forward and backward (causal, and with a float mask),
 * MultiheadAttention with a key padding mask and its weights, building a small GPT, and a GPT
 * training step (forward, cross-entropy, backward, AdamW step). Each failing allocation must end in
 * a clear error and leak nothing; gradients and parameters are either the fault-free run's or
 * untouched (a step happens wholly or not at all), and the call succeeds after ts_error_clear(). */
#include <stdio.h>
#include <stdlib.h>

#include "fault_sweep.h"
#include "ts_test.h"

#define MAX_POINTS 20000

static ts_snapshot snap_tensors(ts_tensor *const *t, const char *const *names, int n) {
    ts_tensor_list l = {0};
    for (int i = 0; i < n; i++)
        if (t[i]) ts_tensor_list_add(&l, names[i], t[i]);
    ts_snapshot s = {0};
    ts_snapshot_add(&s, "", &l);
    ts_tensor_list_free(&l);
    return s;
}

/* ------------------------------------------------------------------ the functional form */
typedef struct sdpa_st {
    ts_tensor *q, *k, *v, *mask, *out;
} sdpa_st;

static void *sdpa_setup(void) {
    sdpa_st *s = calloc(1, sizeof *s);
    ts_manual_seed(21);
    ts_scope_begin();
    s->q = ts_keep(ts_randn(TS_SHAPE(2, 2, 5, 4), (ts_opts){.requires_grad = true}));
    s->k = ts_keep(ts_randn(TS_SHAPE(2, 2, 6, 4), (ts_opts){.requires_grad = true}));
    s->v = ts_keep(ts_randn(TS_SHAPE(2, 2, 6, 3), (ts_opts){.requires_grad = true}));
    s->mask = ts_keep(ts_randn(TS_SHAPE(5, 6), (ts_opts){0}));
    ts_scope_end();
    return s;
}

static bool sdpa_run(void *p) {
    sdpa_st *s = p;
    ts_set_grad(s->q, NULL), ts_set_grad(s->k, NULL), ts_set_grad(s->v, NULL);
    ts_release(s->out);
    s->out = NULL;
    ts_scope_begin();
    ts_tensor *a = ts_scaled_dot_product_attention(s->q, s->k, s->v, NULL, 0, true, 0);
    ts_tensor *b = ts_scaled_dot_product_attention(s->q, s->k, s->v, s->mask, 0, false, 0.5);
    ts_tensor *loss = ts_add(ts_sum(ts_mul(a, a)), ts_sum(b));
    ts_backward(loss);
    s->out = ts_retain(ts_cat((ts_tensor *[]){a, b}, 2, 2));
    ts_scope_end();
    return ts_error() == TS_OK;
}

static ts_snapshot sdpa_snap(void *p) {
    sdpa_st *s = p;
    static const char *const names[] = {"out", "q.grad", "k.grad", "v.grad"};
    ts_tensor *t[] = {s->out, ts_grad(s->q), ts_grad(s->k), ts_grad(s->v)};
    return snap_tensors(t, names, 4);
}

static void sdpa_teardown(void *p) {
    sdpa_st *s = p;
    ts_release(s->q), ts_release(s->k), ts_release(s->v), ts_release(s->mask);
    ts_release(s->out);
    free(s);
}

/* ------------------------------------------------------------------ MultiheadAttention */
typedef struct mha_st {
    ts_module *m;
    ts_tensor *x, *kpm, *out, *w;
} mha_st;

static void *mha_setup(void) {
    mha_st *s = calloc(1, sizeof *s);
    ts_manual_seed(22);
    s->m = ts_multihead_attention_new(8, 2, (ts_mha_opts){.batch_first = true});
    ts_scope_begin();
    s->x = ts_keep(ts_randn(TS_SHAPE(2, 5, 8), (ts_opts){0}));
    bool pad[10] = {false, false, false, true, true, false, false, false, false, true};
    s->kpm = ts_keep(ts_from_data(TS_SHAPE(2, 5), TS_BOOL, pad, (ts_opts){0}));
    ts_scope_end();
    return s;
}

static bool mha_run(void *p) {
    mha_st *s = p;
    ts_tensor_list params = ts_module_named_parameters(s->m);
    for (int i = 0; i < params.n; i++) ts_set_grad(params.tensors[i], NULL);
    ts_tensor_list_free(&params);
    ts_release(s->out), ts_release(s->w);
    s->out = s->w = NULL;
    ts_scope_begin();
    ts_tensor *w = NULL;
    ts_tensor *y = ts_multihead_attention(s->m, s->x, s->x, s->x, s->kpm, NULL, false, true, &w);
    ts_backward(ts_add(ts_sum(ts_mul(y, y)), ts_sum(w)));
    s->out = ts_retain(y);
    s->w = ts_retain(w);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static ts_snapshot mha_snap(void *p) {
    mha_st *s = p;
    ts_snapshot snap = {0};
    ts_tensor_list l = ts_module_named_parameters(s->m), g = {0};
    for (int i = 0; i < l.n; i++)
        if (ts_grad(l.tensors[i])) ts_tensor_list_add(&g, l.names[i], ts_grad(l.tensors[i]));
    if (s->out) ts_tensor_list_add(&g, "out", s->out);
    if (s->w) ts_tensor_list_add(&g, "weights", s->w);
    ts_snapshot_add(&snap, "", &g);
    ts_tensor_list_free(&l);
    ts_tensor_list_free(&g);
    return snap;
}

static void mha_teardown(void *p) {
    mha_st *s = p;
    ts_module_free(s->m);
    ts_release(s->x), ts_release(s->kpm), ts_release(s->out), ts_release(s->w);
    free(s);
}

/* ------------------------------------------------------------------ GPT */
static const ts_gpt_config MINI = {
    .vocab_size = 11, .context = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};

typedef struct gpt_st {
    ts_module *m;
    ts_optim *o;
    ts_tensor *idx, *tgt;
} gpt_st;

static void *build_setup(void) { return calloc(1, sizeof(gpt_st)); }

static bool build_run(void *p) {
    gpt_st *s = p;
    ts_manual_seed(23);
    s->m = ts_gpt_new(MINI);
    return s->m && ts_error() == TS_OK;
}

static ts_snapshot gpt_snap(void *p) {
    gpt_st *s = p;
    return ts_snapshot_take(s->m, s->o, NULL);
}

static void gpt_teardown(void *p) {
    gpt_st *s = p;
    ts_optim_free(s->o);
    ts_module_free(s->m);
    ts_release(s->idx), ts_release(s->tgt);
    free(s);
}

static void *gpt_setup(void) {
    gpt_st *s = calloc(1, sizeof *s);
    ts_manual_seed(23);
    s->m = ts_gpt_new(MINI);
    s->o = ts_adamw_new_decay_groups(s->m, (ts_adam_opts){.lr = 1e-2, .weight_decay = 0.1});
    ts_manual_seed(24);
    ts_scope_begin();
    s->idx = ts_keep(ts_randint(0, MINI.vocab_size, TS_SHAPE(2, 6), (ts_opts){0}));
    s->tgt = ts_keep(ts_randint(0, MINI.vocab_size, TS_SHAPE(12), (ts_opts){0}));
    ts_scope_end();
    CHECK_OK();
    return s;
}

static bool gpt_run(void *p) {
    gpt_st *s = p;
    ts_scope_begin();
    ts_optim_zero_grad(s->o);
    ts_tensor *logits = ts_forward(s->m, s->idx);
    ts_backward(ts_cross_entropy(ts_reshape(logits, TS_SHAPE(12, MINI.vocab_size)), s->tgt));
    ts_optim_step(s->o);
    ts_scope_end();
    return ts_error() == TS_OK;
}

int main(void) {
    /* gradients of a failed backward are undefined: checked after a success only */
    ts_sweep_case cases[] = {
        {.name = "sdpa fwd+bwd",
         .setup = sdpa_setup,
         .run = sdpa_run,
         .teardown = sdpa_teardown,
         .snap = sdpa_snap,
         .any_state_on_error = true},
        {.name = "MultiheadAttention",
         .setup = mha_setup,
         .run = mha_run,
         .teardown = mha_teardown,
         .snap = mha_snap,
         .any_state_on_error = true},
        {.name = "GPT build",
         .setup = build_setup,
         .run = build_run,
         .teardown = gpt_teardown,
         .snap = gpt_snap},
        {.name = "GPT step",
         .setup = gpt_setup,
         .run = gpt_run,
         .teardown = gpt_teardown,
         .snap = gpt_snap},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ts_fault_sweep(&cases[i], MAX_POINTS);
    return ts_test_finish();
}
