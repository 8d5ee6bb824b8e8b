/* train_step.c — one training batch of `tessera train`: eager (forward, loss, backward, the
 * optimizer at the end of a gradient-accumulation cycle) or, with --graph, replayed from a captured
 * step after a few eager warm-up batches. */
#include <string.h>

#include "train_internal.h"

void tcli_amp_begin(const trainer *t) {
    if (t->amp != TS_DTYPE_DEFAULT) ts_autocast_begin(t->dev.type, t->amp);
}
void tcli_amp_end(const trainer *t) {
    if (t->amp != TS_DTYPE_DEFAULT) ts_autocast_end();
}

cycle tcli_cycle_of(const trainer *t, int64_t done) {
    const int64_t accum = t->o->grad_accum, start = done / accum * accum;
    cycle c = {.first = done == start, .len = accum};
    if (t->batches - start < c.len) c.len = t->batches - start;
    c.last = done + 1 == start + c.len || (t->o->max_steps && t->step + 1 >= t->o->max_steps);
    return c;
}

/* Forward and backward of one batch, and the optimizer step at its cycle's end; adds its loss x
 * size and its correct predictions (per token for a language model) to the sums. */
void tcli_train_batch(trainer *t, ts_batch *b, cycle c) {
    ts_scope_begin();
    if (c.first) ts_optim_zero_grad(t->opt);
    /* DDP, FSDP: batches before the cycle's last only accumulate; its backward reduces them */
    const bool no_sync = (t->world > 1 || t->fsdp) && !c.last;
    if (no_sync && t->fsdp)
        ts_fsdp_no_sync_begin(t->net);
    else if (no_sync)
        ts_ddp_no_sync_begin(t->net);
    tcli_amp_begin(t);
    ts_tensor *logits = ts_forward(t->net, b->x), *y = b->y;
    tcli_flatten_tokens(&logits, &y);
    ts_tensor *loss =
        ts_cross_entropy_ex(logits, y, (ts_loss_opts){.label_smoothing = t->o->label_smoothing});
    tcli_amp_end(t);
    ts_tensor *part = c.len > 1 ? ts_div_scalar(loss, (double)c.len) : loss;
    /* float16: a step with Inf/NaN gradients is skipped and the scale backs off */
    ts_backward(t->scaler ? ts_grad_scaler_scale(t->scaler, part) : part);
    if (no_sync && t->fsdp)
        ts_fsdp_no_sync_end(t->net);
    else if (no_sync)
        ts_ddp_no_sync_end(t->net);
    if (c.last) {
        if (t->o->clip_grad > 0) {
            if (t->scaler) ts_grad_scaler_unscale_(t->scaler, t->opt);
            if (t->fsdp) /* the norm of the whole model's gradient, across the shards */
                ts_fsdp_clip_grad_norm(t->net, t->o->clip_grad, 2);
            else
                ts_clip_grad_norm_module_tensor(t->model, t->o->clip_grad); /* no host read */
        }
        if (t->scaler) {
            ts_grad_scaler_step(t->scaler, t->opt, NULL);
            ts_grad_scaler_update(t->scaler);
        } else {
            ts_optim_step(t->opt);
        }
    }
    ts_no_grad_begin();
    ts_add_(t->loss_sum, ts_mul_scalar(loss, (double)ts_numel(y)));
    ts_add_(t->correct, ts_sum(ts_eq(ts_argmax_dim(logits, 1, false), y)));
    ts_no_grad_end();
    ts_scope_end();
}

/* ------------------------------------------------------------------ --graph (docs/CAPTURE.md) */
/* Eager steps before the capture, as PyTorch's CUDA-graph docs advise (a few iterations first):
 * the optimizer's state, the grad scaler's scale and the lazily made buffers exist by then, and a
 * capture never takes a parameter's first momentum step. */
enum { GRAPH_WARMUP = 3 };

static bool same_shape(ts_tensor *a, ts_tensor *b) {
    ts_shape x = ts_shape_of(a), y = ts_shape_of(b);
    if (x.ndim != y.ndim) return false;
    for (int d = 0; d < x.ndim; d++)
        if (x.dims[d] != y.dims[d]) return false;
    return true;
}

/* Frees the graph and its static batch; the rest of the run trains eagerly. */
void tcli_graph_drop(trainer *t) {
    ts_graph_free(t->graph);
    ts_release(t->gx);
    ts_release(t->gy);
    t->graph = NULL, t->gx = t->gy = NULL;
    t->graph_off = true;
}

/* b copied into the static batch, then the captured step over it (an error stays pending). */
static void graph_replay(trainer *t, const ts_batch *b) {
    ts_scope_begin(); /* the in-place ops hand back a reference */
    ts_copy_(t->gx, b->x);
    ts_copy_(t->gy, b->y);
    ts_scope_end();
    if (!ts_error()) ts_graph_replay(t->graph);
}

/* Captures train_batch over a static copy of b's shapes: true when it holds the step (not run
 * yet: the caller replays it for b). A capture records kernels without running them, so a failed
 * one trained nothing, but it did change some host state as if its kernels had run: an optimizer
 * step it recorded marked its parameters' state as made and stepped (state only a replay would
 * fill), the grad scaler moved to the next stage, and draws made on another device advanced the
 * generator. Those are put back, the failure is printed once and cleared, and false says b (and
 * every batch after it) trains eagerly. */
static bool graph_capture(trainer *t, const ts_batch *b, cycle c) {
    const ts_rng_state rng = ts_rng_get_state();
    ts_tensor_list osd = ts_optim_state_dict(t->opt); /* snapshots of the state, not references */
    const double scale = t->scaler && !ts_error() ? ts_grad_scaler_get_scale(t->scaler) : 0;
    const bool saved = !ts_error();
    ts_scope_begin();
    t->gx = ts_keep(ts_empty_like(b->x));
    t->gy = ts_keep(ts_empty_like(b->y));
    ts_scope_end();
    ts_status st = ts_error();
    if (!st && (t->graph = ts_graph_capture_begin(t->dev, (ts_graph_opts){0}))) {
        ts_batch sb = *b;
        sb.x = t->gx, sb.y = t->gy;
        tcli_train_batch(t, &sb, c);
        st = ts_graph_capture_end();
    } else if (!st) {
        st = ts_error();
    }
    if (st == TS_OK) {
        ts_tensor_list_free(&osd);
        tcli_progress_note(t->pg,
                           "--graph: the training step is captured on %s (%lld kernels) and "
                           "replayed for each batch of %lld from step %lld",
                           ts_device_str(t->dev), (long long)ts_graph_kernel_count(t->graph),
                           (long long)ts_size(b->x, 0), (long long)t->step + 1);
        return true;
    }
    tcli_progress_note(t->pg, "--graph: capture failed: %s; training on eagerly",
                       ts_error_message());
    ts_error_clear();
    tcli_graph_drop(t);
    if (saved) {
        ts_rng_set_state(rng);
        ts_optim_load_state_dict(t->opt, &osd);
        if (t->scaler) ts_grad_scaler_set_scale(t->scaler, scale); /* and back to its first stage */
    }
    ts_tensor_list_free(&osd);
    return false;
}

/* --graph: trains b by a replay of the captured step when it can (capturing it first after the
 * warm-up). False: b is the caller's to train eagerly (a warm-up step, a batch of another size
 * such as an epoch's last, no graph). */
bool tcli_graph_batch(trainer *t, ts_batch *b, cycle c) {
    if (!t->o->graph || t->graph_off) return false;
    if (!t->graph) {
        /* the schedule sets the rate between steps; the replays read it on the device */
        if (t->graph_warm < GRAPH_WARMUP || ts_size(b->x, 0) != t->o->batch_size) {
            t->graph_warm++;
            return false;
        }
        if (!graph_capture(t, b, c)) return false;
    } else if (!same_shape(b->x, t->gx) || !same_shape(b->y, t->gy)) {
        return false;
    }
    graph_replay(t, b);
    return true;
}
