/* leaf_hooks.c — hooks on a leaf's gradient (PyTorch's Tensor.register_hook on a leaf): kept in
 * the leaf's ts_tensor.hooks next to its post-accumulate-grad hooks (hooks.c), run by the engine on
 * a gradient before it is accumulated into .grad, freed with the tensor (core/tensor.c calls
 * tsi_grad_hooks_free). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/leaf_hooks.h"
#include "core/grad_hooks_free.h"

static void grad_hooks_free(struct tsi_grad_hooks *h) {
    for (int i = 0; i < h->n_grad; i++)
        if (h->grad[i].ctx_free) h->grad[i].ctx_free(h->grad[i].ctx);
    ts_release(h->held);
    free(h->grad);
    free(h->post);
    free(h);
}

struct tsi_grad_hooks *tsi_grad_hooks_of(const char *op, ts_tensor *leaf) {
    if (leaf->hooks) return leaf->hooks;
    /* written once, before any tensor has hooks: later writes store the same value */
    if (tsi_grad_hooks_free != grad_hooks_free) tsi_grad_hooks_free = grad_hooks_free;
    struct tsi_grad_hooks *h = calloc(1, sizeof *h);
    if (!h) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    h->next_id = 1;
    return leaf->hooks = h;
}

int tsi_leaf_hook_add(ts_tensor *leaf, ts_tensor_hook_fn fn, void *ctx, void (*ctx_free)(void *)) {
    const char *op = "register_hook";
    struct tsi_grad_hooks *h = tsi_grad_hooks_of(op, leaf);
    if (h && h->n_grad == h->cap_grad) {
        int cap = h->cap_grad ? 2 * h->cap_grad : 2;
        tsi_leaf_hook *v = realloc(h->grad, (size_t)cap * sizeof *v);
        if (v) {
            h->grad = v;
            h->cap_grad = cap;
        } else {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            h = NULL;
        }
    }
    if (!h) {
        if (ctx_free) ctx_free(ctx);
        return 0;
    }
    const int id = h->next_id++;
    h->grad[h->n_grad++] = (tsi_leaf_hook){.id = id, .fn = fn, .ctx = ctx, .ctx_free = ctx_free};
    return id;
}

/* drops entry i (its ctx_free runs after it left the list: it may add or remove hooks) */
static void drop(struct tsi_grad_hooks *h, int i) {
    tsi_leaf_hook gone = h->grad[i];
    memmove(&h->grad[i], &h->grad[i + 1], (size_t)(h->n_grad - i - 1) * sizeof *h->grad);
    h->n_grad--;
    if (gone.ctx_free) gone.ctx_free(gone.ctx);
}

bool tsi_leaf_hook_remove(ts_tensor *leaf, int handle) {
    struct tsi_grad_hooks *h = leaf->hooks;
    for (int i = 0; h && i < h->n_grad; i++)
        if (h->grad[i].id == handle && h->grad[i].fn) {
            if (h->running)
                h->grad[i].fn = NULL; /* a hook may be running on its ctx: goes at settle */
            else
                drop(h, i);
            return true;
        }
    return false;
}

void tsi_leaf_hooks_settle(struct tsi_grad_hooks *h) {
    for (int i = 0; h->running == 0 && i < h->n_grad; i++)
        if (!h->grad[i].fn) drop(h, i--);
}

/* the first live hook after id `last` among those older than `top` (ids grow along the list) */
static tsi_leaf_hook *next_hook(struct tsi_grad_hooks *h, int last, int top) {
    for (int i = 0; i < h->n_grad && h->grad[i].id < top; i++)
        if (h->grad[i].id > last && h->grad[i].fn) return &h->grad[i];
    return NULL;
}

/* one hook's result r for gradient g: a new reference to use instead (NULL: keep g, or failed) */
static ts_tensor *replacement(ts_tensor *leaf, ts_tensor *g, ts_tensor *r, bool *ok) {
    if (!tsi_shape_equal(r->shape, g->shape) || !tsi_device_eq(tsi_device(r), tsi_device(g))) {
        char want[160], got[160];
        snprintf(want, sizeof want, "%s", tsi_desc(g));
        snprintf(got, sizeof got, "%s", tsi_desc(r));
        tsi_error_set(TS_ERR_SHAPE,
                      "register_hook: a hook on the leaf %s returned %s for a gradient of %s "
                      "(shape and device must agree)",
                      tsi_desc(leaf), got, want);
        *ok = false;
        return NULL;
    }
    if (tsi_is_complex(r->dtype) != tsi_is_complex(g->dtype)) { /* a cast would lose a part */
        tsi_error_set(TS_ERR_DTYPE,
                      "register_hook: a hook on the leaf %s returned %s for a gradient of %s "
                      "(a complex gradient needs a complex result, a real one a real result)",
                      tsi_desc(leaf), tsi_torch_scalar_name(r->dtype),
                      tsi_torch_scalar_name(g->dtype));
        *ok = false;
        return NULL;
    }
    ts_tensor *c = r->dtype == g->dtype ? ts_retain(r) : tsi_cast("register_hook", r, g->dtype);
    if (!c) *ok = false;
    return c;
}

/* in the caller's grad mode: the engine's (off, unless its pass records the gradients' graph) */
ts_tensor *tsi_leaf_hooks_apply(ts_tensor *leaf, ts_tensor *g) {
    struct tsi_grad_hooks *h = leaf && g ? leaf->hooks : NULL;
    if (!h || h->n_grad == 0) return g;
    if (ts_error() != TS_OK) { /* a failing pass: .grad stays as it is */
        ts_release(g);
        return NULL;
    }
    bool ok = true;
    h->running++;
    ts_scope_begin(); /* what the hooks make (their results are retained before it closes) */
    /* hooks added by a hook wait for the next gradient; removed ones are skipped */
    for (int last = 0, top = h->next_id; ok;) {
        tsi_leaf_hook *e = next_hook(h, last, top);
        if (!e) break;
        last = e->id;
        ts_tensor *r = e->fn(e->ctx, g);
        if (ts_error() != TS_OK) {
            ok = false;
        } else if (r && r != g) {
            ts_tensor *c = replacement(leaf, g, r, &ok);
            if (c) {
                ts_release(g);
                g = c;
            }
        }
    }
    ts_scope_end();
    h->running--;
    tsi_leaf_hooks_settle(h);
    if (!ok) {
        ts_release(g);
        return NULL;
    }
    return g;
}

ts_tensor *tsi_leaf_hooks_gather(ts_tensor *leaf, uint64_t pass, ts_tensor *g) {
    struct tsi_grad_hooks *h = leaf->hooks;
    if (!h || h->pass != pass || h->pending <= 0 || (h->n_grad == 0 && !h->held)) return g;
    if (g && h->held) {
        ts_scope_begin(); /* the sum is the engine's, whatever scope the user has open */
        ts_tensor *s = ts_retain(ts_add(h->held, g));
        ts_scope_end();
        ts_release(g);
        g = s;
        ts_release(h->held);
    } else if (!g) {
        g = h->held;
    }
    h->held = NULL;
    if (!g || h->pending == 1) return g; /* the last one (tsi_hooks_arrived counts it after) */
    h->held = g;
    return NULL;
}
