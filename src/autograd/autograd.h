/* autograd.h — graph nodes and the recording API op front ends use (internal). */
#ifndef TS_AUTOGRAD_H
#define TS_AUTOGRAD_H

#include "core/internal.h"

/* Where the gradient of one forward input goes: another node's output, or a leaf's .grad. */
typedef struct tsi_edge {
    struct ts_node *fn; /* retained */
    int output_nr;
    ts_tensor *leaf; /* retained; leaf that requires grad (AccumulateGrad) */
} tsi_edge;

/* A saved tensor, or inside a checkpointed function (checkpoint.c) a placeholder: the frame that
 * recomputes it and its index there, and the saved tensor's history without its data, which the
 * recomputed tensor gets under create_graph (PyTorch's SavedVariable keeps grad_fn and output_nr
 * the same way): hist and hist_nr (its grad_fn, retained, and output number); hist NULL: hist_nr
 * is this node's output's number, or TSI_SAVED_INPUT with t the leaf itself (retained; NULL when
 * the tensor needs no gradient), or TSI_SAVED_OUTPUT_UNKNOWN. */
typedef struct ts_checkpoint_frame tsi_ckpt_frame; /* tessera.h's ts_checkpoint_frame */
typedef struct tsi_saved {
    ts_tensor *t; /* retained; never has this node as grad_fn (no reference cycles) */
    uint64_t version;
    tsi_ckpt_frame *frame; /* a reference; NULL for a tensor saved as itself */
    int index;   /* with a frame: the index there; else TSI_SAVED_INPUT or an output's number */
    int hist_nr; /* with a frame: see above */
    struct ts_node *hist;
} tsi_saved;
/* tsi_saved.index of a tensor saved as itself (not one of the node's outputs), and of an output
 * saved before its number was known */
enum { TSI_SAVED_INPUT = -1, TSI_SAVED_OUTPUT_UNKNOWN = -2 };

/* Computes the gradients of the inputs from those of the outputs.
 * grad_out[i]: gradient of output i, NULL when none reached it (treat as zeros).
 * grad_in[j]: set for every input j with tsi_node_needs(node, j); leave NULL for "no gradient".
 * Runs with grad mode off, inside a scope the engine opens: results may be scope-owned.
 * On failure set an error (tsi_error_set) and return. */
typedef void (*tsi_backward_fn)(struct ts_node *node, ts_tensor *const *grad_out,
                                ts_tensor **grad_in);

typedef struct ts_node {
    atomic_int refs;
    const char *name; /* PyTorch's grad_fn name: "AddBackward0" */
    const char *op;   /* the forward op: "add" (anomaly messages) */
    tsi_backward_fn backward;
    int n_in, n_out, n_saved;
    tsi_edge *next;     /* [n_in] */
    ts_shape *in_shape; /* [n_in] forward inputs' shapes, dtypes and devices */
    ts_dtype *in_dtype;
    ts_device *in_device;
    tsi_saved *saved; /* [n_saved] */
    double p[4];      /* op parameters (scalars, dims...) */
    int64_t ip[TS_MAX_DIMS * 2];
    void *ctx; /* extra state, freed with ctx_free */
    void (*ctx_free)(void *ctx);
    /* engine scratch */
    int deps;
    ts_tensor **grad_acc; /* [n_out] */
    bool released;        /* saved tensors freed after a backward without retain_graph */
    uint64_t visit;       /* the backward pass that last visited this node */
    uint8_t pass_flags;   /* the pass's TSI_PASS_* marks (engine scratch) */
    uint8_t flags;        /* TSI_NODE_* */
} ts_node;

/* ts_node.flags. TWICE: the site that recorded the node vouches that its backward computes every
 * gradient with public ops from the incoming gradients and the saved inputs and outputs, so under
 * create_graph those ops record the gradient's own graph. ONCE: the backward cannot be
 * differentiated again (it saved a detached copy, or a Python backward marked
 * @once_differentiable): under create_graph its results carry a node that fails if a second
 * backward reaches it (double_backward.c). */
enum { TSI_NODE_ONCE = 1, TSI_NODE_TWICE = 2 };

/* Grad mode on and some non-NULL input requires grad: the op must record a node. */
static inline bool tsi_needs_graph(ts_tensor *const *ins, int n) {
    if (!tsi_grad_mode()) return false;
    for (int i = 0; i < n; i++) {
        tsi_view_sync(ins[i]); /* a view written through its base or another view */
        if (ins[i] && ins[i]->requires_grad) return true;
    }
    return false;
}

/* A node for an op with these forward inputs (NULL entries allowed: no gradient) and n_out
 * outputs; the caller holds one reference. NULL + TS_ERR_OOM on failure. */
ts_node *tsi_node_new(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                      int n_in, int n_out, int n_saved);
static inline bool tsi_node_needs(const ts_node *n, int i) {
    return n->next[i].fn != NULL || n->next[i].leaf != NULL;
}
/* Save an input (or any tensor that does not have this node as grad_fn): retained, version noted.
 */
void tsi_node_save(ts_node *n, int slot, ts_tensor *t);
/* Save one of this node's outputs: stores an alias without grad_fn, so there is no cycle. */
void tsi_node_save_output(ts_node *n, int slot, ts_tensor *out);
/* The saved tensor; NULL + TS_ERR_STATE (PyTorch's "modified by an inplace operation" message)
 * when it changed since it was saved, or when the graph was already freed. A placeholder is
 * recomputed (the first time) and its tensor returned. */
ts_tensor *tsi_node_saved(ts_node *n, int slot);
/* Something was saved in the slot (a tensor or a placeholder). */
static inline bool tsi_node_has_saved(const ts_node *n, int slot) {
    return n->saved[slot].t || n->saved[slot].frame;
}
/* Releases the saved tensors, placeholders and ctx (after a backward without retain_graph). */
void tsi_node_release_saved(ts_node *n);

/* checkpoint.c: inside a checkpointed forward, a placeholder for t goes into s (true); inside its
 * recomputation t is collected (false: save it as usual); elsewhere false. */
bool tsi_ckpt_pack(tsi_saved *s, ts_tensor *t);
ts_tensor *tsi_ckpt_unpack(tsi_ckpt_frame *f, int index); /* borrowed; NULL + error */
void tsi_ckpt_release(tsi_ckpt_frame *f);
/* Make out the node's output output_nr: out->grad_fn = n (retained), out->requires_grad = true.
 * For in-place ops this rebases out's history onto n. */
void tsi_node_set_output(ts_node *n, ts_tensor *out, int output_nr);
ts_node *tsi_node_retain(ts_node *n);
void tsi_node_release(ts_node *n);

/* Record a one-output op in one call: creates the node, saves `saves` (inputs; NULL allowed),
 * sets out as output 0, stores p0/p1 in node->p. Returns the node (borrowed; owned by out) so the
 * caller may fill more fields, or NULL when no graph is needed or on failure. */
ts_node *tsi_record(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                    int n_in, ts_tensor *out, ts_tensor *const *saves, int n_saves);

/* A backward pass with create_graph runs on this thread (double_backward.c): backward functions
 * run with grad mode on so that their public ops record the graph of the gradient, a saved output
 * is handed out with its node as grad_fn, and the fused kernels take their composite forms. */
bool tsi_create_graph_active(void);

/* Gradient helpers for backward functions (grad mode is off there, except under create_graph). */
/* Sum grad over the dims that were broadcast so it has `shape` (returns grad itself, retained into
 * the scope, when the shapes already match). */
ts_tensor *tsi_sum_to(ts_tensor *grad, ts_shape shape);

/* Post-accumulate-grad hooks (hooks.c), driven by the engine: while collecting a pass it calls
 * expect once per edge into a leaf, after each of those edges is done (gradient or none) arrived;
 * the hooks run when the last one arrived. run: a backward whose root is the leaf itself. */
void tsi_hooks_expect(ts_tensor *leaf, uint64_t pass);
void tsi_hooks_arrived(ts_tensor *leaf, uint64_t pass);
void tsi_hooks_run(ts_tensor *leaf);
/* A pass that failed: the leaf's hooks, if it still expected gradients from it, run now with the
 * error pending (so DDP's reducer abandons the iteration instead of waiting for it). */
void tsi_hooks_abandon(ts_tensor *leaf, uint64_t pass);

/* Pre-backward hook (hooks.c): an alias of t (scope-owned) whose backward node calls fn(ctx)
 * when the gradient reaches it, before passing that gradient on unchanged: so fn runs before the
 * backward of everything that produced t. FSDP attaches it to a unit's output to gather the unit's
 * parameters again just before the unit's backward. fn may set an error (the pass then fails).
 * The node frees its copy of (fn, ctx) with the graph; ctx itself stays the caller's. Without a
 * graph to record (t needs no grad, grad mode off) the alias is returned and fn never runs. */
typedef void (*tsi_pre_backward_fn)(void *ctx);
ts_tensor *tsi_pre_backward_hook(ts_tensor *t, tsi_pre_backward_fn fn, void *ctx);

#endif /* TS_AUTOGRAD_H */
