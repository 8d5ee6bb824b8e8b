/* module_checkpoint.c — activation checkpointing of modules (src/autograd/checkpoint.c): the
 * per-module flag ts_forward honours, and PyTorch's checkpoint_sequential over a Sequential's
 * children. A checkpointed module's forward runs twice when its backward needs its intermediates:
 * batch norm's running statistics are updated twice in training (as in PyTorch). */
#include <stdlib.h>

#include "nn/module_internal.h"

static ts_status module_forward(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out,
                                int n_out) {
    (void)n_in, (void)n_out;
    ts_module *m = ctx;
    out[0] = m->forward(m, in[0]);
    return out[0] ? TS_OK : ts_error() != TS_OK ? ts_error() : TS_ERR_STATE;
}

ts_tensor *tsi_module_run_forward(ts_module *m, ts_tensor *x) {
    if (!m->impl->checkpoint || !ts_grad_enabled()) return m->forward(m, x);
    ts_tensor *y = NULL;
    return ts_checkpoint(module_forward, m, NULL, &x, 1, &y, 1) == TS_OK ? y : NULL;
}

ts_status ts_module_set_checkpoint(ts_module *m, bool on) {
    if (!m || !m->impl)
        return tsi_error_set(TS_ERR_ARG, "module_set_checkpoint: the module is NULL");
    m->impl->checkpoint = on;
    return TS_OK;
}

bool ts_module_checkpointed(ts_module *m) { return m && m->impl && m->impl->checkpoint; }

/* children [first, last] of a Sequential, one after the other through ts_forward */
typedef struct segment {
    ts_module *seq;
    int first, last;
} segment;

static ts_status run_segment(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out,
                             int n_out) {
    (void)n_in, (void)n_out;
    const segment *s = ctx;
    ts_tensor *y = in[0];
    for (int i = s->first; i <= s->last && y; i++)
        y = ts_forward(s->seq->impl->children.items[i], y);
    out[0] = y;
    return y ? TS_OK : ts_error() != TS_OK ? ts_error() : TS_ERR_STATE;
}

ts_tensor *ts_checkpoint_sequential(ts_module *seq, int segments, ts_tensor *x) {
    const char *op = "checkpoint_sequential";
    if (!seq || !seq->impl) return tsi_error_set(TS_ERR_ARG, "%s: the module is NULL", op), NULL;
    if (!tsi_check_input(op, x, "input")) return NULL;
    const int n = seq->impl->children.n;
    if (segments < 1 || n < 1)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected segments >= 1 and a module with children, got "
                             "segments %d and %d children (%s)",
                             op, segments, n, seq->type_name),
               NULL;
    if (segments > n) segments = n;
    /* PyTorch's split: segments of n / segments children in order, the last one taking the rest;
     * every segment but the last is checkpointed */
    const int per = n / segments;
    ts_tensor *y = x;
    for (int k = 0; k < segments && y; k++) {
        segment s = {seq, k * per, k == segments - 1 ? n - 1 : (k + 1) * per - 1};
        if (k == segments - 1 || !ts_grad_enabled()) {
            ts_tensor *out = NULL;
            y = run_segment(&s, &y, 1, &out, 1) == TS_OK ? out : NULL;
            continue;
        }
        segment *ctx = malloc(sizeof *ctx);
        if (!ctx) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
        *ctx = s;
        ts_tensor *out = NULL;
        y = ts_checkpoint(run_segment, ctx, free, &y, 1, &out, 1) == TS_OK ? out : NULL;
    }
    return y;
}
