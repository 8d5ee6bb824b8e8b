/* leaf_hooks.h — hooks on a leaf's gradient (PyTorch's Tensor.register_hook on a leaf): run by the
 * engine on each gradient before it is accumulated into the leaf's .grad (internal). A leaf's
 * ts_tensor.hooks holds both kinds of leaf hooks: these, and the post-accumulate-grad hooks of
 * hooks.c (PyTorch's register_post_accumulate_grad_hook). */
#ifndef TS_AUTOGRAD_LEAF_HOOKS_H
#define TS_AUTOGRAD_LEAF_HOOKS_H

#include "core/internal.h"
#include "tessera/custom_function.h"

typedef struct tsi_post_hook { /* post-accumulate-grad (hooks.c) */
    int id;
    ts_grad_hook_fn fn;
    void *ctx;
} tsi_post_hook;

typedef struct tsi_leaf_hook { /* on the gradient (leaf_hooks.c); fn NULL: removed while running */
    int id;
    ts_tensor_hook_fn fn;
    void *ctx;
    void (*ctx_free)(void *);
} tsi_leaf_hook;

struct tsi_grad_hooks {
    uint64_t pass; /* the backward pass `pending` counts for (hooks.c) */
    int pending;   /* gradients this pass still brings to the leaf */
    int next_id;   /* one numbering for both kinds */
    int running;   /* hooks of either kind running now: removals of leaf hooks wait */
    int n_post, cap_post;
    tsi_post_hook *post;
    int n_grad, cap_grad;
    tsi_leaf_hook *grad;
    ts_tensor *held; /* tsi_leaf_hooks_gather: the sum of what `pass` brought so far */
};

/* The leaf's hooks, made (empty) when it has none; NULL with TS_ERR_OOM naming op. */
struct tsi_grad_hooks *tsi_grad_hooks_of(const char *op, ts_tensor *leaf);

/* g after the leaf's hooks, in registration order: consumes the reference on g and returns a new
 * one (g itself when there are no hooks); NULL with the error set when a hook fails or returns a
 * gradient of another shape or device. */
ts_tensor *tsi_leaf_hooks_apply(ts_tensor *leaf, ts_tensor *g);

/* For the engine, to run a leaf's hooks once per pass on the sum of the gradients the pass brings
 * it, as PyTorch does (its AccumulateGrad node sums its inputs first): each gradient arriving at
 * the leaf (g, consumed; NULL for an edge that brought none) goes through this before
 * accumulate_leaf, and tsi_hooks_arrived after it. Returns NULL (no error) while the pass (as
 * counted by tsi_hooks_expect) still owes the leaf gradients, then the sum of those that came (NULL
 * when none did); g as it is for a leaf without gradient hooks or outside a counted pass (a
 * backward whose root is the leaf). NULL with the error set when the sum fails (out of memory). A
 * pass's sum left held (the pass failed) goes at tsi_hooks_abandon, at the next pass, or with the
 * tensor. */
ts_tensor *tsi_leaf_hooks_gather(ts_tensor *leaf, uint64_t pass, ts_tensor *g);

/* ts_register_tensor_hook / ts_remove_tensor_hook on a leaf (tensor_hooks.c checks the tensor):
 * add returns the handle, or 0 with the error (ctx_free(ctx) has run); remove is false when the
 * leaf has no such hook (nothing set). */
int tsi_leaf_hook_add(ts_tensor *leaf, ts_tensor_hook_fn fn, void *ctx, void (*ctx_free)(void *));
bool tsi_leaf_hook_remove(ts_tensor *leaf, int handle);

/* After a hook of either kind ran: when none runs any more, the leaf hooks removed meanwhile go
 * (their ctx_free runs now, not under the hook that removed them). */
void tsi_leaf_hooks_settle(struct tsi_grad_hooks *h);

#endif /* TS_AUTOGRAD_LEAF_HOOKS_H */
