/* hooks.c — post-accumulate-grad hooks on leaves (PyTorch's register_post_accumulate_grad_hook):
 * registration, and the engine's count of the gradients a backward pass still owes a leaf; the
 * pre-backward hook (an identity node that calls back before its gradient moves on). The hooks
 * live in the leaf's ts_tensor.hooks, a struct shared with the hooks on the leaf's gradient
 * (leaf_hooks.h). */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "autograd/leaf_hooks.h" /* the struct both kinds of leaf hooks share */

int ts_register_post_accumulate_grad_hook(ts_tensor *leaf, ts_grad_hook_fn fn, void *ctx) {
    const char *op = "register_post_accumulate_grad_hook";
    if (!tsi_check_input(op, leaf, "tensor")) return 0;
    if (!fn) return tsi_error_set(TS_ERR_ARG, "%s: hook is NULL", op), 0;
    if (leaf->grad_fn || !leaf->requires_grad)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: post accumulate grad hooks cannot be registered on non-leaf "
                             "tensors or tensors that do not require grad (%s)",
                             op, tsi_desc(leaf)),
               0;
    struct tsi_grad_hooks *h = tsi_grad_hooks_of(op, leaf);
    if (!h) return 0;
    if (h->n_post == h->cap_post) {
        int cap = h->cap_post ? 2 * h->cap_post : 2;
        tsi_post_hook *v = realloc(h->post, (size_t)cap * sizeof *v);
        if (!v) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), 0;
        h->post = v;
        h->cap_post = cap;
    }
    h->post[h->n_post] = (tsi_post_hook){.id = h->next_id++, .fn = fn, .ctx = ctx};
    return h->post[h->n_post++].id;
}

ts_status ts_remove_grad_hook(ts_tensor *leaf, int handle) {
    if (!tsi_check_input("remove_grad_hook", leaf, "tensor")) return ts_error();
    struct tsi_grad_hooks *h = leaf->hooks;
    for (int i = 0; h && i < h->n_post; i++)
        if (h->post[i].id == handle) {
            for (int k = i + 1; k < h->n_post; k++) h->post[k - 1] = h->post[k];
            h->n_post--;
            return TS_OK;
        }
    return tsi_error_set(TS_ERR_ARG, "remove_grad_hook: no hook %d on %s", handle, tsi_desc(leaf));
}

void tsi_hooks_expect(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || (h->n_post == 0 && h->n_grad == 0)) return; /* n_grad: tsi_leaf_hooks_gather */
    if (h->pass != pass) {
        h->pass = pass;
        h->pending = 0;
        ts_release(h->held); /* what a failed pass left */
        h->held = NULL;
    }
    h->pending++;
}

static void run_hooks(ts_tensor *leaf) {
    struct tsi_grad_hooks *h = leaf->hooks;
    /* a hook may add or remove hooks (and reallocate the list): walk by id, ids grow along it;
     * hooks added meanwhile wait for the next time */
    h->running++;
    for (int last = 0, top = h->next_id;;) {
        tsi_post_hook *e = NULL;
        for (int i = 0; i < h->n_post && !e; i++)
            if (h->post[i].id > last && h->post[i].id < top) e = &h->post[i];
        if (!e) break;
        last = e->id;
        e->fn(leaf, e->ctx);
    }
    h->running--;
    tsi_leaf_hooks_settle(h);
}

void tsi_hooks_arrived(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->pass != pass || h->pending <= 0) return;
    if (--h->pending == 0 && h->n_post) run_hooks(leaf);
}

void tsi_hooks_run(ts_tensor *leaf) {
    if (leaf->hooks && leaf->hooks->n_post) run_hooks(leaf);
}

void tsi_hooks_abandon(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->pass != pass) return;
    ts_release(h->held); /* what tsi_leaf_hooks_gather held for the pass */
    h->held = NULL;
    if (h->n_post == 0 || h->pending <= 0) return;
    h->pending = 0;
    run_hooks(leaf); /* with the pass's error pending: a hook with per-pass state resets it */
}

/* ------------------------------------------------------------------ pre-backward hook */
typedef struct pre_backward_ctx {
    tsi_pre_backward_fn fn;
    void *ctx;
} pre_backward_ctx;

static void pre_backward_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    pre_backward_ctx *c = n->ctx;
    if (c) c->fn(c->ctx);
    if (ts_error()) return;
    gi[0] = g[0]; /* the engine retains it before the node's gradients are dropped */
}

ts_tensor *tsi_pre_backward_hook(ts_tensor *t, tsi_pre_backward_fn fn, void *ctx) {
    const char *op = "pre_backward_hook";
    if (!tsi_check_input(op, t, "tensor")) return NULL;
    ts_tensor *out = tsi_view_of(t, t->shape, t->strides, t->offset);
    if (!out) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    if (tsi_needs_graph(&t, 1)) {
        pre_backward_ctx *c = malloc(sizeof *c);
        ts_node *n =
            c ? tsi_node_new("PreBackwardHook", op, pre_backward_backward, &t, 1, 1, 0) : NULL;
        if (!n) {
            free(c);
            ts_release(out);
            if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            return NULL;
        }
        *c = (pre_backward_ctx){.fn = fn, .ctx = ctx};
        n->flags |= TSI_NODE_TWICE; /* the gradient handed on as it is: its own derivative */
        n->ctx = c;
        n->ctx_free = free;
        tsi_node_set_output(n, out, 0);
        tsi_node_release(n);
    }
    return tsi_own(out);
}
