/* tensor_hooks.c — hooks on a tensor's gradient (PyTorch's Tensor.register_hook). On a leaf they
 * go to leaf_hooks.c (run by the engine before it accumulates into .grad). On a non-leaf the
 * node that made the tensor gets a trampoline backward that runs the hooks on the gradient of that
 * output (complete when the node's turn comes: every consumer has added to it) and then the node's
 * own backward, with the node's own ctx put back for the call. The hooks live in the node's ctx
 * slot (with the original ctx), so they go with the graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/leaf_hooks.h"
#include "tessera/custom_function.h"

typedef struct hook {
    int id, output_nr;
    ts_tensor_hook_fn fn;
    void *ctx;
    void (*ctx_free)(void *);
} hook;

typedef struct hooked {
    tsi_backward_fn fn; /* the node's own backward, ctx and ctx_free */
    void *ctx;
    void (*ctx_free)(void *);
    int n, cap, next_id;
    hook *v;
} hooked;

static void hooked_free(void *p) {
    hooked *h = p;
    if (h->ctx_free && h->ctx) h->ctx_free(h->ctx);
    for (int i = 0; i < h->n; i++)
        if (h->v[i].ctx_free) h->v[i].ctx_free(h->v[i].ctx);
    free(h->v);
    free(h);
}

static bool same_shape(ts_shape a, ts_shape b) {
    return a.ndim == b.ndim && memcmp(a.dims, b.dims, sizeof(int64_t) * (size_t)a.ndim) == 0;
}

/* runs the hooks of output k on the node's gradient (replacing it); false on failure */
static bool run_hooks(ts_node *n, hooked *h, int k) {
    for (int i = 0; i < h->n; i++) {
        ts_tensor *g = n->grad_acc[k];
        if (h->v[i].output_nr != k || !g) continue;
        ts_status before = ts_error();
        ts_tensor *r = h->v[i].fn(h->v[i].ctx, g);
        if (ts_error() != before) return false;
        if (!r || r == g) continue;
        if (!same_shape(r->shape, g->shape) || !tsi_device_eq(tsi_device(r), tsi_device(g))) {
            char want[160];
            snprintf(want, sizeof want, "%s", tsi_desc(g));
            tsi_error_set(TS_ERR_SHAPE,
                          "register_hook: a hook on output %d of %s returned %s for a gradient of "
                          "%s (shape and device must agree)",
                          k, n->name, tsi_desc(r), want);
            return false;
        }
        if (tsi_is_complex(r->dtype) != tsi_is_complex(g->dtype)) { /* a cast would lose a part */
            tsi_error_set(TS_ERR_DTYPE,
                          "register_hook: a hook on output %d of %s returned %s for a gradient of "
                          "%s (a complex gradient needs a complex result, a real one a real "
                          "result)",
                          k, n->name, tsi_torch_scalar_name(r->dtype),
                          tsi_torch_scalar_name(g->dtype));
            return false;
        }
        ts_tensor *c = r->dtype == g->dtype ? ts_retain(r) : tsi_cast("register_hook", r, g->dtype);
        if (!c) return false;
        ts_release(g);
        n->grad_acc[k] = c;
    }
    return true;
}

static void hooked_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    (void)g; /* the engine's grad_acc: run_hooks replaces its entries */
    hooked *h = n->ctx;
    for (int k = 0; k < n->n_out; k++)
        if (!run_hooks(n, h, k)) return;
    n->ctx = h->ctx; /* the node's own backward sees its own ctx */
    n->backward = h->fn;
    h->fn(n, n->grad_acc, gi);
    n->backward = hooked_backward;
    n->ctx = h;
}

int ts_register_tensor_hook(ts_tensor *t, ts_tensor_hook_fn fn, void *ctx,
                            void (*ctx_free)(void *ctx)) {
    const char *op = "register_hook";
    int id = 0;
    if (!tsi_check_input(op, t, "tensor")) goto fail;
    if (!fn) {
        tsi_error_set(TS_ERR_ARG, "%s: hook is NULL", op);
        goto fail;
    }
    ts_node *n = t->grad_fn;
    if (!n && !t->requires_grad) {
        tsi_error_set(TS_ERR_STATE,
                      "%s: cannot register a hook on a tensor that doesn't require gradient (%s)",
                      op, tsi_desc(t));
        goto fail;
    }
    if (!n) return tsi_leaf_hook_add(t, fn, ctx, ctx_free); /* a leaf (leaf_hooks.c) */
    if (n->released) {
        tsi_error_set(TS_ERR_STATE, "%s: the graph of %s was already freed by a backward", op,
                      n->name);
        goto fail;
    }
    hooked *h = n->backward == hooked_backward ? n->ctx : NULL;
    if (!h) {
        if (!(h = calloc(1, sizeof *h))) goto oom;
        *h = (hooked){.fn = n->backward, .ctx = n->ctx, .ctx_free = n->ctx_free, .next_id = 1};
        n->backward = hooked_backward;
        n->ctx = h;
        n->ctx_free = hooked_free;
    }
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 2;
        hook *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v) goto oom;
        h->v = v;
        h->cap = cap;
    }
    id = h->next_id++;
    h->v[h->n++] =
        (hook){.id = id, .output_nr = t->output_nr, .fn = fn, .ctx = ctx, .ctx_free = ctx_free};
    return id;
oom:
    tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
fail:
    if (ctx_free) ctx_free(ctx);
    return 0;
}

ts_status ts_remove_tensor_hook(ts_tensor *t, int handle) {
    if (!tsi_check_input("remove_tensor_hook", t, "tensor")) return ts_error();
    ts_node *n = t->grad_fn;
    if (!n && tsi_leaf_hook_remove(t, handle)) return TS_OK;
    hooked *h = n && n->backward == hooked_backward ? n->ctx : NULL;
    for (int i = 0; h && i < h->n; i++)
        if (h->v[i].id == handle) {
            hook gone = h->v[i];
            memmove(&h->v[i], &h->v[i + 1], (size_t)(h->n - i - 1) * sizeof *h->v);
            h->n--;
            if (gone.ctx_free) gone.ctx_free(gone.ctx);
            return TS_OK;
        }
    return tsi_error_set(TS_ERR_ARG, "remove_tensor_hook: no hook %d on %s", handle, tsi_desc(t));
}
