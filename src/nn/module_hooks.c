/* module_hooks.c — forward pre- and post-hooks on a module (PyTorch's register_forward_pre_hook
 * and register_forward_hook), run by ts_forward and the functional forms that take a module. */
#include <stdlib.h>

#include "nn/module_internal.h"

typedef struct fwd_hook {
    int id;
    ts_forward_pre_hook_fn pre; /* exactly one of pre and post is set */
    ts_forward_hook_fn post;
    void *ctx;
} fwd_hook;

struct tsi_forward_hooks {
    int n, cap, next_id;
    fwd_hook v[];
};

static int add_hook(const char *op, ts_module *m, fwd_hook h) {
    if (!m) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
        return 0;
    }
    if (!h.pre && !h.post) return tsi_error_set(TS_ERR_ARG, "%s: hook is NULL", op), 0;
    struct tsi_forward_hooks *l = m->impl->hooks;
    if (!l || l->n == l->cap) {
        int cap = l ? 2 * l->cap : 2;
        struct tsi_forward_hooks *g = realloc(l, sizeof *g + (size_t)cap * sizeof(fwd_hook));
        if (!g) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), 0;
        if (!l) *g = (struct tsi_forward_hooks){.next_id = 1};
        g->cap = cap;
        m->impl->hooks = l = g;
    }
    h.id = l->next_id++;
    l->v[l->n++] = h;
    return h.id;
}

int ts_module_register_forward_pre_hook(ts_module *m, ts_forward_pre_hook_fn fn, void *ctx) {
    return add_hook("module_register_forward_pre_hook", m, (fwd_hook){.pre = fn, .ctx = ctx});
}

int ts_module_register_forward_hook(ts_module *m, ts_forward_hook_fn fn, void *ctx) {
    return add_hook("module_register_forward_hook", m, (fwd_hook){.post = fn, .ctx = ctx});
}

ts_status ts_module_remove_forward_hook(ts_module *m, int handle) {
    const char *op = "module_remove_forward_hook";
    if (!m) return ts_error() ? ts_error() : tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
    struct tsi_forward_hooks *l = m->impl->hooks;
    for (int i = 0; l && i < l->n; i++)
        if (l->v[i].id == handle) {
            for (int k = i + 1; k < l->n; k++) l->v[k - 1] = l->v[k];
            if (--l->n == 0) { /* back to the hook-free fast path */
                free(l);
                m->impl->hooks = NULL;
            }
            return TS_OK;
        }
    return tsi_error_set(TS_ERR_ARG, "%s: no forward hook %d on %s", op, handle, m->type_name);
}

/* The walks take the count at each step: a hook may remove itself (or another). */
bool tsi_module_pre_hooks(ts_module *m, ts_tensor *x) {
    for (int i = 0; m->impl->hooks && i < m->impl->hooks->n; i++) {
        fwd_hook h = m->impl->hooks->v[i];
        if (h.pre && h.pre(m, x, h.ctx) != TS_OK) {
            if (!ts_error())
                tsi_error_set(TS_ERR_STATE, "forward: a pre-hook of %s failed", m->type_name);
            return false;
        }
    }
    return true;
}

ts_tensor *tsi_module_post_hooks(ts_module *m, ts_tensor *x, ts_tensor *y) {
    for (int i = 0; y && m->impl->hooks && i < m->impl->hooks->n; i++) {
        fwd_hook h = m->impl->hooks->v[i];
        if (h.post) y = h.post(m, x, y, h.ctx);
    }
    return y;
}

void tsi_module_hooks_free(ts_module *m) {
    free(m->impl->hooks);
    m->impl->hooks = NULL;
}
