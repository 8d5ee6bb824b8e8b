/* test_fault_transformer_decoder.c — allocation-failure sweeps (fault_sweep.h) over
 * ts_transformer_decoder_layer: building the layer, and its forward with masks and a backward
 * (batch_first with norm_first; [L, N, E] inputs with post-norm). Each failing allocation must end
 * in a clear error and leak nothing, and the scenario must succeed after ts_error_clear(); the
 * output and gradients are the fault-free run's after a success. */
#include <stdlib.h>

#include "fault_sweep.h"
#include "tessera/transformer.h"
#include "ts_test.h"

#define MAX_POINTS 20000

static const ts_transformer_opts OPTS = {.dim_feedforward = 12,
                                         .has_dropout = true,
                                         .dropout = 0.0,
                                         .batch_first = true,
                                         .norm_first = true};

typedef struct dec_st {
    ts_module *m;
    ts_tensor *tgt, *mem, *tgt_mask, *mem_kpm, *out;
} dec_st;

static void *build_setup(void) { return calloc(1, sizeof(dec_st)); }

static bool build_run(void *p) {
    dec_st *s = p;
    ts_module_free(s->m);
    ts_manual_seed(31);
    s->m = ts_transformer_decoder_layer_new(8, 2, OPTS);
    return s->m && ts_error() == TS_OK;
}

static ts_snapshot build_snap(void *p) {
    dec_st *s = p;
    return ts_snapshot_take(s->m, NULL, NULL);
}

/* batch_first and norm_first, or [L, N, E] inputs (transposed inside) and post-norm */
static void *setup_with(bool batch_first) {
    dec_st *s = calloc(1, sizeof *s);
    ts_manual_seed(32);
    ts_transformer_opts o = OPTS;
    o.batch_first = o.norm_first = batch_first;
    s->m = ts_transformer_decoder_layer_new(8, 2, o);
    ts_scope_begin();
    s->tgt = ts_keep(ts_randn(batch_first ? TS_SHAPE(2, 4, 8) : TS_SHAPE(4, 2, 8),
                              (ts_opts){.requires_grad = true}));
    s->mem = ts_keep(ts_randn(batch_first ? TS_SHAPE(2, 5, 8) : TS_SHAPE(5, 2, 8),
                              (ts_opts){.requires_grad = true}));
    bool causal[16], pad[10] = {false, false, false, false, true, false, false, false, true, true};
    for (int i = 0; i < 16; i++) causal[i] = i % 4 > i / 4;
    s->tgt_mask = ts_keep(ts_from_data(TS_SHAPE(4, 4), TS_BOOL, causal, (ts_opts){0}));
    s->mem_kpm = ts_keep(ts_from_data(TS_SHAPE(2, 5), TS_BOOL, pad, (ts_opts){0}));
    ts_scope_end();
    CHECK_OK();
    return s;
}

static void *fwd_setup(void) { return setup_with(true); }
static void *fwd_setup_seq_first(void) { return setup_with(false); }

static bool fwd_run(void *p) {
    dec_st *s = p;
    ts_tensor_list params = ts_module_named_parameters(s->m);
    for (int i = 0; i < params.n; i++) ts_set_grad(params.tensors[i], NULL);
    ts_tensor_list_free(&params);
    ts_set_grad(s->tgt, NULL), ts_set_grad(s->mem, NULL);
    ts_release(s->out);
    s->out = NULL;
    ts_scope_begin();
    ts_decoder_masks k = {
        .tgt_mask = s->tgt_mask, .memory_key_padding_mask = s->mem_kpm, .tgt_is_causal = true};
    ts_tensor *y = ts_transformer_decoder_layer(s->m, s->tgt, s->mem, &k);
    ts_backward(ts_sum(ts_mul(y, y)));
    s->out = ts_retain(y);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static ts_snapshot fwd_snap(void *p) {
    dec_st *s = p;
    ts_snapshot snap = {0};
    ts_tensor_list l = ts_module_named_parameters(s->m), g = {0};
    for (int i = 0; i < l.n; i++)
        if (ts_grad(l.tensors[i])) ts_tensor_list_add(&g, l.names[i], ts_grad(l.tensors[i]));
    if (ts_grad(s->tgt)) ts_tensor_list_add(&g, "tgt.grad", ts_grad(s->tgt));
    if (ts_grad(s->mem)) ts_tensor_list_add(&g, "memory.grad", ts_grad(s->mem));
    if (s->out) ts_tensor_list_add(&g, "out", s->out);
    ts_snapshot_add(&snap, "", &g);
    ts_tensor_list_free(&l);
    ts_tensor_list_free(&g);
    return snap;
}

static void teardown(void *p) {
    dec_st *s = p;
    ts_module_free(s->m);
    ts_release(s->tgt), ts_release(s->mem), ts_release(s->tgt_mask), ts_release(s->mem_kpm);
    ts_release(s->out);
    free(s);
}

int main(void) {
    ts_sweep_case cases[] = {
        {.name = "TransformerDecoderLayer build",
         .setup = build_setup,
         .run = build_run,
         .teardown = teardown,
         .snap = build_snap},
        /* gradients of a failed backward are undefined: checked after a success only */
        {.name = "TransformerDecoderLayer fwd+bwd",
         .setup = fwd_setup,
         .run = fwd_run,
         .teardown = teardown,
         .snap = fwd_snap,
         .any_state_on_error = true},
        {.name = "TransformerDecoderLayer seq-first",
         .setup = fwd_setup_seq_first,
         .run = fwd_run,
         .teardown = teardown,
         .snap = fwd_snap,
         .any_state_on_error = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ts_fault_sweep(&cases[i], MAX_POINTS);
    return ts_test_finish();
}
