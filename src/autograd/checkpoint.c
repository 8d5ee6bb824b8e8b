/* checkpoint.c — activation checkpointing (PyTorch's torch.utils.checkpoint, non-reentrant form):
 * a function's forward runs with the graph recorded as usual, but every tensor a node saves for
 * backward inside it is replaced by a placeholder (a frame and an index), so the intermediates are
 * freed when the forward returns. The first backward that needs one of them runs the function
 * again on the same inputs with the same random numbers and autocast state; the tensors saved by
 * that recomputation, in the order they are saved, fill the placeholders. Gradients reach the
 * inputs and every parameter the function uses through the original graph: nothing is
 * differentiated twice and hooks (DDP's) fire as without checkpointing. A placeholder also keeps
 * its tensor's history (grad_fn and output number, or the leaf): under create_graph the
 * recomputed tensor is handed out with it, so the gradients are differentiable again through the
 * original graph (PyTorch's non-reentrant checkpoint does the same through SavedVariable).
 *
 * The frame of a checkpointed call lives while any placeholder refers to it (its nodes' saved
 * slots) and holds the function's context, its inputs (retained, with their versions) and, once
 * recomputed, the recomputed saved tensors. The innermost active frame of a thread takes the saves:
 * packing them during the forward, collecting them during a recomputation (a nested checkpoint
 * inside the function has a frame of its own in both runs, so the sequences agree). */
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/checkpoint_slot.h"
#include "autograd/saved_hooks.h"

enum { FRAME_IDLE, FRAME_PACK, FRAME_RECOMPUTE };

struct ts_checkpoint_frame {
    atomic_int refs;
    ts_checkpoint_fn fn;
    void *ctx;
    void (*ctx_free)(void *ctx);
    int n_in, n_out;
    ts_tensor **inputs; /* [n_in] retained (NULL entries allowed) */
    uint64_t *versions; /* [n_in] the inputs' versions at the forward */
    ts_rng_state rng;
    tsi_autocast_state autocast;
    int mode;
    struct ts_checkpoint_frame *prev; /* the thread's enclosing active frame */
    /* the forward's saves: how many, and each one's shape and dtype */
    int n_packed, cap_packed;
    struct packed_meta {
        ts_shape shape;
        ts_dtype dtype;
    } * packed;
    /* the recomputation's saves, retained */
    int n_got, cap_got;
    ts_tensor **got;
    bool recomputed;
    tsi_hooked *hooked; /* a tensor packed by saved-tensor hooks (saved_hooks.c): nothing else */
};

static _Thread_local tsi_ckpt_frame *active;

static void frame_free(tsi_ckpt_frame *f) {
    tsi_hooked_free(f->hooked);
    for (int i = 0; i < f->n_in; i++) ts_release(f->inputs[i]);
    for (int i = 0; i < f->n_got; i++) ts_release(f->got[i]);
    if (f->ctx_free && f->ctx) f->ctx_free(f->ctx);
    free(f->inputs);
    free(f->versions);
    free(f->packed);
    free(f->got);
    free(f);
}

void tsi_ckpt_release(tsi_ckpt_frame *f) {
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) frame_free(f);
}

void tsi_ckpt_release_slot(tsi_ckpt_frame *f, int index) {
    if (!f) return;
    if (!f->hooked && index >= 0 && index < f->n_got) {
        ts_release(f->got[index]);
        f->got[index] = NULL;
    }
    tsi_ckpt_release(f);
}

/* grows an array of `size`-byte elements to hold n + 1 */
static bool grow(void **v, int *cap, int n, size_t size) {
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 16;
    void *p = realloc(*v, (size_t)c * size);
    if (!p) return false;
    *v = p;
    *cap = c;
    return true;
}

tsi_ckpt_frame *tsi_ckpt_innermost(void) { return active; }

/* the history without the data, which the unpacked tensor gets under create_graph
 * (tsi_ckpt_unpack_saved): t's grad_fn and output number, or the leaf itself */
static void keep_history(tsi_saved *s, ts_tensor *t) {
    s->hist = t->grad_fn ? tsi_node_retain(t->grad_fn) : NULL;
    s->hist_nr = t->grad_fn ? t->output_nr : TSI_SAVED_INPUT;
    if (!t->grad_fn && t->requires_grad) s->t = ts_retain(t); /* a leaf: kept, as PyTorch does */
}

/* saved-tensor hooks opened inside the innermost checkpoint (or with none open) take the save,
 * except while a checkpoint recomputes; a placeholder frame of its own holds what they packed */
static bool hooks_pack(tsi_saved *s, ts_tensor *t) {
    tsi_ckpt_frame *f = calloc(1, sizeof *f);
    tsi_hooked *h = f ? tsi_saved_hooks_pack(t) : NULL;
    if (!h) { /* saved as itself */
        free(f);
        return false;
    }
    atomic_init(&f->refs, 1);
    f->hooked = h;
    s->frame = f;
    s->index = 0;
    keep_history(s, t);
    return true;
}

bool tsi_ckpt_pack(tsi_saved *s, ts_tensor *t) {
    tsi_ckpt_frame *f = active;
    if (!(f && f->mode == FRAME_RECOMPUTE) && tsi_saved_hooks_take(f)) return hooks_pack(s, t);
    if (!f) return false;
    if (f->mode == FRAME_RECOMPUTE) { /* collect it, and let the (throwaway) node keep it too */
        if (!grow((void **)&f->got, &f->cap_got, f->n_got, sizeof *f->got)) {
            tsi_error_set(TS_ERR_OOM, "checkpoint: out of host memory recomputing");
            return false;
        }
        f->got[f->n_got++] = ts_retain(t);
        return false;
    }
    /* out of host memory: keep the tensor itself (correct, only without the saving) */
    if (!grow((void **)&f->packed, &f->cap_packed, f->n_packed, sizeof *f->packed)) return false;
    f->packed[f->n_packed].shape = t->shape;
    f->packed[f->n_packed].dtype = t->dtype;
    s->frame = f;
    s->index = f->n_packed++;
    keep_history(s, t);
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return true;
}

/* Runs the function again (grad mode on, the forward's random numbers and autocast state),
 * collecting what its nodes save. */
static bool recompute(tsi_ckpt_frame *f) {
    for (int i = 0; i < f->n_in; i++)
        if (f->inputs[i] && atomic_load(&f->inputs[i]->storage->version) != f->versions[i]) {
            tsi_error_set(TS_ERR_STATE,
                          "checkpoint: input %d (%s) was modified by an inplace operation after "
                          "the checkpointed forward; the recomputation would differ",
                          i, tsi_desc(f->inputs[i]));
            return false;
        }
    ts_tensor **in = calloc((size_t)f->n_in + 1, sizeof *in);
    ts_tensor **out = calloc((size_t)f->n_out + 1, sizeof *out);
    if (!in || !out) {
        free(in);
        free(out);
        tsi_error_set(TS_ERR_OOM, "checkpoint: out of host memory recomputing");
        return false;
    }
    int no_grad_levels = 0;
    while (!ts_grad_enabled()) ts_no_grad_end(), no_grad_levels++;
    /* the forward's autocast state without its cast cache: the region that owned the cache
     * has ended, and a cast cached now would outlive it */
    const tsi_autocast_state autocast = tsi_autocast_state_get();
    tsi_autocast_state replay = f->autocast;
    memset(replay.cache_enabled, 0, sizeof replay.cache_enabled);
    tsi_autocast_state_set(&replay);
    const ts_rng_state rng = ts_rng_get_state();
    ts_rng_set_state(f->rng);
    const ts_status before = ts_error();
    f->mode = FRAME_RECOMPUTE;
    f->prev = active;
    active = f;
    ts_scope_begin();
    /* detached inputs that require grad as the originals did: the same nodes are recorded */
    for (int i = 0; i < f->n_in; i++) {
        in[i] = f->inputs[i] ? ts_detach(f->inputs[i]) : NULL;
        if (in[i] && f->inputs[i]->requires_grad) ts_set_requires_grad(in[i], true);
    }
    ts_status st = ts_error() == before ? f->fn(f->ctx, in, f->n_in, out, f->n_out) : ts_error();
    ts_scope_end();
    active = f->prev;
    f->mode = FRAME_IDLE;
    ts_rng_set_state(rng);
    tsi_autocast_state_set(&autocast);
    while (no_grad_levels-- > 0) ts_no_grad_begin();
    free(in);
    free(out);
    if (st != TS_OK || ts_error() != before) {
        if (ts_error() == before)
            tsi_error_set(TS_ERR_STATE, "checkpoint: the recomputed forward failed (status %d)",
                          (int)st);
        return false;
    }
    if (f->n_got != f->n_packed) {
        tsi_error_set(TS_ERR_STATE,
                      "checkpoint: the recomputed forward saved %d tensors for backward, the "
                      "original %d; the checkpointed function must run the same ops each time",
                      f->n_got, f->n_packed);
        return false;
    }
    f->recomputed = true;
    return true;
}

ts_tensor *tsi_ckpt_unpack(tsi_ckpt_frame *f, int index) {
    if (f->hooked) return tsi_hooked_unpack(f->hooked);
    if (!f->recomputed && !recompute(f)) return NULL;
    ts_tensor *t = f->got[index];
    if (!t) {
        tsi_error_set(TS_ERR_STATE, "checkpoint: recomputed tensor %d was already freed", index);
        return NULL;
    }
    const ts_shape want = f->packed[index].shape;
    if (t->dtype != f->packed[index].dtype || !tsi_shape_equal(t->shape, want)) {
        tsi_error_set(TS_ERR_STATE,
                      "checkpoint: recomputed tensor %d is %s, but the forward saved a %s tensor "
                      "of %d dims there; the checkpointed function must run the same ops each time",
                      index, tsi_desc(t), ts_dtype_name(f->packed[index].dtype), want.ndim);
        return NULL;
    }
    return t;
}

static void saved_leaf_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    (void)n;
    gi[0] = g[0];
}

/* r as a tensor whose gradient goes to the leaf (PyTorch's unpacked SavedVariable of a leaf:
 * the unpack hook's data with the leaf's grad accumulator); scope-owned, NULL + error */
static ts_tensor *leaf_alias(ts_node *n, ts_tensor *leaf, ts_tensor *r) {
    ts_node *e = tsi_node_new("SavedLeafBackward", n->op, saved_leaf_backward, &leaf, 1, 1, 0);
    ts_tensor *a = e ? tsi_view_of(r, r->shape, r->strides, r->offset) : NULL;
    if (!a) {
        if (e) tsi_node_release(e);
        return e ? (tsi_error_set(TS_ERR_OOM, "backward: out of host memory (%s)", n->name), NULL)
                 : NULL;
    }
    e->flags |= TSI_NODE_TWICE; /* the identity: differentiable again */
    a->is_view = r->is_view;
    tsi_node_set_output(e, a, 0);
    tsi_node_release(e);
    return tsi_own(a);
}

ts_tensor *tsi_ckpt_unpack_saved(ts_node *n, tsi_saved *s) {
    tsi_ckpt_frame *f = s->frame;
    bool again = tsi_create_graph_active();
    if (again && s->hist_nr == TSI_SAVED_OUTPUT_UNKNOWN) {
        n->flags |= TSI_NODE_ONCE; /* no history to give it: no double backward through n */
        again = false;
    }
    ts_tensor *r = tsi_ckpt_unpack(f, s->index);
    if (!r || !again) return r;
    /* a leaf: the hook's data reaching it, or the leaf itself */
    if (!s->hist && s->hist_nr == TSI_SAVED_INPUT && s->t)
        return f->hooked ? leaf_alias(n, s->t, r) : s->t;
    /* the recomputed (or unpacked) values with the forward's history: what the backward computes
     * from them is differentiable through the original graph (the recomputation's own graph
     * starts from detached inputs, an unpack hook's result's history is dropped: never through
     * those) */
    ts_tensor *a = tsi_view_of(r, r->shape, r->strides, r->offset);
    if (!a) {
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory (%s)", n->name);
        return NULL;
    }
    a->is_view = r->is_view;
    if (s->hist)
        tsi_node_set_output(s->hist, a, s->hist_nr);
    else if (s->hist_nr >= 0)
        tsi_node_set_output(n, a, s->hist_nr);
    return tsi_own(a);
}

ts_checkpoint_frame *ts_checkpoint_begin(ts_checkpoint_fn fn, void *ctx,
                                         void (*ctx_free)(void *ctx), ts_tensor *const *inputs,
                                         int n_inputs, int n_outputs) {
    tsi_init();
    const char *op = "checkpoint";
    bool ok = true;
    if (!fn || n_inputs < 0 || n_outputs < 0 || (n_inputs > 0 && !inputs)) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: expected a function, n_inputs >= 0 (inputs given when > 0) and "
                      "n_outputs >= 0",
                      op);
        ok = false;
    }
    for (int i = 0; ok && i < n_inputs; i++)
        if (inputs[i] && !tsi_check_input(op, inputs[i], "input")) ok = false;
    tsi_ckpt_frame *f = ok ? calloc(1, sizeof *f) : NULL;
    if (f) {
        f->inputs = calloc((size_t)n_inputs + 1, sizeof *f->inputs);
        f->versions = calloc((size_t)n_inputs + 1, sizeof *f->versions);
        if (!f->inputs || !f->versions) {
            free(f->inputs), free(f->versions), free(f);
            f = NULL;
        }
    }
    if (!f) {
        if (ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        if (ctx_free && ctx) ctx_free(ctx);
        return NULL;
    }
    atomic_init(&f->refs, 1); /* the open frame's: ts_checkpoint_end drops it */
    f->fn = fn;
    f->ctx = ctx;
    f->ctx_free = ctx_free;
    f->n_in = n_inputs;
    f->n_out = n_outputs;
    for (int i = 0; i < n_inputs; i++) {
        f->inputs[i] = ts_retain(inputs[i]);
        if (inputs[i]) f->versions[i] = atomic_load(&inputs[i]->storage->version);
    }
    f->rng = ts_rng_get_state();
    f->autocast = tsi_autocast_state_get();
    f->mode = FRAME_PACK;
    f->prev = active;
    active = f;
    return f;
}

ts_status ts_checkpoint_end(ts_checkpoint_frame *f) {
    if (!f || f != active)
        return tsi_error_set(TS_ERR_STATE, "checkpoint_end: %s",
                             f ? "not the innermost open checkpoint of this "
                                 "thread"
                               : "the frame is NULL");
    active = f->prev;
    f->mode = FRAME_IDLE;
    tsi_ckpt_release(f); /* the placeholders keep it */
    return TS_OK;
}

ts_status ts_checkpoint(ts_checkpoint_fn fn, void *ctx, void (*ctx_free)(void *ctx),
                        ts_tensor *const *inputs, int n_inputs, ts_tensor **outputs,
                        int n_outputs) {
    if (!outputs || n_outputs < 1) {
        if (ctx_free && ctx) ctx_free(ctx);
        return tsi_error_set(TS_ERR_ARG,
                             "checkpoint: expected n_outputs >= 1 and an outputs array");
    }
    for (int k = 0; k < n_outputs; k++) outputs[k] = NULL;
    if (!ts_grad_enabled()) { /* nothing is recorded: a plain call */
        const ts_status before = ts_error();
        ts_status st = fn ? fn(ctx, inputs, n_inputs, outputs, n_outputs)
                          : tsi_error_set(TS_ERR_ARG, "checkpoint: the function is NULL");
        if (ctx_free && ctx) ctx_free(ctx);
        return st != TS_OK ? st : ts_error() != before ? ts_error() : TS_OK;
    }
    const ts_status before = ts_error();
    ts_checkpoint_frame *f = ts_checkpoint_begin(fn, ctx, ctx_free, inputs, n_inputs, n_outputs);
    if (!f) return ts_error();
    ts_scope_begin();
    ts_status st = fn(ctx, inputs, n_inputs, outputs, n_outputs);
    for (int k = 0; k < n_outputs; k++) outputs[k] = ts_keep(outputs[k]);
    ts_scope_end();
    ts_checkpoint_end(f);
    if (st == TS_OK && ts_error() == before) return TS_OK;
    if (ts_error() == before)
        tsi_error_set(TS_ERR_STATE, "checkpoint: the function failed (status %d)", (int)st);
    return ts_error();
}
