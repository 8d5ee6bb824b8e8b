/* hooks.c — post-accumulate-grad hooks on leaves (PyTorch's register_post_accumulate_grad_hook):
 * registration, and the engine's count of the gradients a backward pass still owes a leaf; the
 * pre-backward hook (an identity node that calls back before its gradient moves on). */
#include <stdlib.h>

#include "autograd/autograd.h"

typedef struct hook_entry {
    int id;
    ts_grad_hook_fn fn;
    void *ctx;
} hook_entry;

struct tsi_grad_hooks {
    uint64_t pass; /* the backward pass `pending` counts for */
    int pending;   /* gradients this pass still brings to the leaf */
    int n, cap, next_id;
    hook_entry v[];
};

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
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->n == h->cap) {
        int cap = h ? 2 * h->cap : 2;
        struct tsi_grad_hooks *g = realloc(h, sizeof *g + (size_t)cap * sizeof(hook_entry));
        if (!g) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), 0;
        if (!h) *g = (struct tsi_grad_hooks){.next_id = 1};
        g->cap = cap;
        leaf->hooks = h = g;
    }
    h->v[h->n] = (hook_entry){.id = h->next_id++, .fn = fn, .ctx = ctx};
    return h->v[h->n++].id;
}

ts_status ts_remove_grad_hook(ts_tensor *leaf, int handle) {
    if (!tsi_check_input("remove_grad_hook", leaf, "tensor")) return ts_error();
    struct tsi_grad_hooks *h = leaf->hooks;
    for (int i = 0; h && i < h->n; i++)
        if (h->v[i].id == handle) {
            for (int k = i + 1; k < h->n; k++) h->v[k - 1] = h->v[k];
            h->n--;
            return TS_OK;
        }
    return tsi_error_set(TS_ERR_ARG, "remove_grad_hook: no hook %d on %s", handle, tsi_desc(leaf));
}

void tsi_hooks_expect(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->n == 0) return;
    if (h->pass != pass) {
        h->pass = pass;
        h->pending = 0;
    }
    h->pending++;
}

static void run_hooks(ts_tensor *leaf) {
    struct tsi_grad_hooks *h = leaf->hooks;
    /* a hook may remove itself: walk a copy of the count */
    for (int i = 0; i < h->n; i++) {
        int id = h->v[i].id;
        h->v[i].fn(leaf, h->v[i].ctx);
        if (i < h->n && h->v[i].id != id) i--; /* entry i was removed */
    }
}

void tsi_hooks_arrived(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->n == 0 || h->pass != pass || h->pending <= 0) return;
    if (--h->pending == 0) run_hooks(leaf);
}

void tsi_hooks_run(ts_tensor *leaf) {
    if (leaf->hooks && leaf->hooks->n) run_hooks(leaf);
}

void tsi_hooks_abandon(ts_tensor *leaf, uint64_t pass) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->n == 0 || h->pass != pass || h->pending <= 0) return;
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
        n->ctx = c;
        n->ctx_free = free;
        tsi_node_set_output(n, out, 0);
        tsi_node_release(n);
    }
    return tsi_own(out);
}
