/* node.c — graph nodes: creation from an op's inputs, saved tensors with version checks, lifetime.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/checkpoint_slot.h"
#include "autograd/copy_slices.h"
#include "core/profiler_hooks.h"

ts_node *tsi_node_retain(ts_node *n) {
    if (n) atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    return n;
}

void tsi_node_release_saved(ts_node *n) {
    for (int i = 0; i < n->n_saved; i++) {
        ts_release(n->saved[i].t);
        n->saved[i].t = NULL;
        tsi_ckpt_release_slot(n->saved[i].frame, n->saved[i].index);
        n->saved[i].frame = NULL;
        tsi_node_release(n->saved[i].hist);
        n->saved[i].hist = NULL;
    }
    if (n->ctx_free && n->ctx) n->ctx_free(n->ctx);
    n->ctx = NULL;
}

/* Iterative, so that releasing the head of a long chain of nodes does not recurse per node. */
void tsi_node_release(ts_node *n) {
    ts_node *stack_small[64], **stack = stack_small;
    size_t top = 0, cap = 64;
    while (n) {
        if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1) {
            tsi_node_release_saved(n);
            for (int i = 0; i < n->n_out; i++) ts_release(n->grad_acc[i]);
            for (int i = 0; i < n->n_in; i++) {
                ts_release(n->next[i].leaf);
                ts_node *next = n->next[i].fn;
                if (!next) continue;
                if (top == cap) {
                    ts_node **grown = malloc(2 * cap * sizeof *grown);
                    if (!grown) { /* fall back to recursion rather than leak */
                        tsi_node_release(next);
                        continue;
                    }
                    memcpy(grown, stack, top * sizeof *grown);
                    if (stack != stack_small) free(stack);
                    stack = grown;
                    cap *= 2;
                }
                stack[top++] = next;
            }
            free(n);
        }
        n = top ? stack[--top] : NULL;
    }
    if (stack != stack_small) free(stack);
}

static void release_hook(struct ts_node *n) { tsi_node_release(n); }

ts_node *tsi_node_new(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                      int n_in, int n_out, int n_saved) {
    /* written once: later nodes (made in data-parallel worker threads too) only read it */
    if (tsi_grad_fn_release != release_hook) tsi_grad_fn_release = release_hook;
    /* one block: the node, then its arrays ordered by alignment */
    size_t sz = sizeof(ts_node) + (size_t)n_in * (sizeof(tsi_edge) + sizeof(ts_shape)) +
                (size_t)n_saved * sizeof(tsi_saved) + (size_t)n_out * sizeof(ts_tensor *) +
                (size_t)n_in * (sizeof(ts_device) + sizeof(ts_dtype));
    ts_node *n = calloc(1, sz);
    if (!n) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory recording the graph", op);
        return NULL;
    }
    char *p = (char *)(n + 1);
    n->next = (tsi_edge *)p;
    p += (size_t)n_in * sizeof(tsi_edge);
    n->in_shape = (ts_shape *)p;
    p += (size_t)n_in * sizeof(ts_shape);
    n->saved = (tsi_saved *)p;
    p += (size_t)n_saved * sizeof(tsi_saved);
    n->grad_acc = (ts_tensor **)p;
    p += (size_t)n_out * sizeof(ts_tensor *);
    n->in_device = (ts_device *)p;
    p += (size_t)n_in * sizeof(ts_device);
    n->in_dtype = (ts_dtype *)p;
    atomic_init(&n->refs, 1);
    n->name = name;
    n->op = op;
    n->backward = fn;
    n->n_in = n_in;
    n->n_out = n_out;
    n->n_saved = n_saved;
    for (int i = 0; i < n_in; i++) {
        ts_tensor *t = ins[i];
        if (!t) continue;
        tsi_view_sync(t); /* a view written through its base takes the base's history */
        n->in_shape[i] = t->shape;
        n->in_dtype[i] = t->dtype;
        n->in_device[i] = tsi_device(t);
        if (!t->requires_grad) continue;
        if (t->grad_fn) {
            n->next[i].fn = tsi_node_retain(t->grad_fn);
            n->next[i].output_nr = t->output_nr;
        } else {
            n->next[i].leaf = ts_retain(t);
        }
    }
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed)) tsi_prof_node(n);
    return n;
}

void tsi_node_save(ts_node *n, int slot, ts_tensor *t) {
    if (!t || tsi_ckpt_pack(&n->saved[slot], t)) return;
    /* a view with history: an alias without the base (the base's history may come to hold n);
     * a leaf is kept itself, since an alias of it would be another leaf, and the gradients a
     * double backward sends through the saved tensor would miss the real one */
    if (t->view_base && t->grad_fn) {
        ts_tensor *a = tsi_view_of(t, t->shape, t->strides, t->offset);
        if (!a) return;
        a->requires_grad = t->requires_grad;
        a->grad_fn = tsi_node_retain(t->grad_fn);
        a->output_nr = t->output_nr;
        n->saved[slot].t = a;
    } else {
        n->saved[slot].t = ts_retain(t);
    }
    n->saved[slot].version = atomic_load(&t->storage->version);
    n->saved[slot].index = TSI_SAVED_INPUT;
}

void tsi_node_save_output(ts_node *n, int slot, ts_tensor *out) {
    ts_tensor *alias = tsi_view_of(out, out->shape, out->strides, out->offset);
    if (!alias) return;
    alias->is_view = out->is_view;
    if (tsi_ckpt_pack(&n->saved[slot], alias)) { /* a placeholder: the alias is not kept */
        tsi_saved *s = &n->saved[slot];
        ts_release(alias);
        ts_release(s->t); /* its history is this node's: never a cycle through a reference */
        tsi_node_release(s->hist);
        s->t = NULL;
        s->hist = NULL;
        s->hist_nr = out->grad_fn == n ? out->output_nr : TSI_SAVED_OUTPUT_UNKNOWN;
        return;
    }
    n->saved[slot].t = alias;
    n->saved[slot].version = atomic_load(&out->storage->version);
    n->saved[slot].index = out->grad_fn == n ? out->output_nr : TSI_SAVED_OUTPUT_UNKNOWN;
}

/* Under create_graph a saved output is handed out as an alias whose grad_fn is its node, so that
 * what the backward computes from it is differentiable through the node again (PyTorch's
 * SavedVariable does the same). The alias lives in the backward's scope: no reference cycle. */
static ts_tensor *output_with_history(ts_node *n, const tsi_saved *s) {
    if (s->index == TSI_SAVED_OUTPUT_UNKNOWN) {
        n->flags |= TSI_NODE_ONCE; /* its history cannot be restored: no double backward */
        return s->t;
    }
    ts_tensor *a = tsi_view_of(s->t, s->t->shape, s->t->strides, s->t->offset);
    if (!a) {
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory (%s)", n->name);
        return NULL;
    }
    a->is_view = s->t->is_view;
    tsi_node_set_output(n, a, s->index);
    return tsi_own(a);
}

ts_tensor *tsi_node_saved(ts_node *n, int slot) {
    if (n->released) {
        tsi_error_set(TS_ERR_STATE,
                      "backward: trying to backward through the graph a second time (or directly "
                      "access saved tensors after they have already been freed). Saved "
                      "intermediate values of the graph are freed when you call backward. Specify "
                      "retain_graph=true if you need to backward through the graph a second time "
                      "(node %s of %s).",
                      n->name, n->op);
        return NULL;
    }
    tsi_saved *s = &n->saved[slot];
    if (s->frame) return tsi_ckpt_unpack_saved(n, s);
    if (!s->t) return NULL;
    uint64_t now = atomic_load(&s->t->storage->version);
    if (now != s->version) {
        tsi_error_set(TS_ERR_STATE,
                      "backward: one of the variables needed for gradient computation has been "
                      "modified by an inplace operation: [%s], which is saved by %s (%s), is at "
                      "version %llu; expected version %llu instead.",
                      tsi_desc(s->t), n->name, n->op, (unsigned long long)now,
                      (unsigned long long)s->version);
        return NULL;
    }
    if (s->index != TSI_SAVED_INPUT && tsi_create_graph_active()) return output_with_history(n, s);
    return s->t;
}

void tsi_node_set_output(ts_node *n, ts_tensor *out, int output_nr) {
    /* an in-place op's result that is a view: its base takes the history (copy_slices.h) */
    if (out->view_writing && tsi_view_rebase(n, out, output_nr)) return;
    ts_node *old = out->grad_fn;
    out->grad_fn = tsi_node_retain(n);
    out->output_nr = output_nr;
    out->requires_grad = true;
    if (old) tsi_node_release(old);
}

ts_node *tsi_record(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                    int n_in, ts_tensor *out, ts_tensor *const *saves, int n_saves) {
    if (!out || !tsi_needs_graph(ins, n_in)) return NULL;
    ts_node *n = tsi_node_new(name, op, fn, ins, n_in, 1, n_saves);
    if (!n) return NULL;
    for (int i = 0; i < n_saves; i++) tsi_node_save(n, i, saves[i]);
    tsi_node_set_output(n, out, 0);
    tsi_node_release(n); /* out owns it now */
    return n;
}
