/* module_internal.h — the module registry (children, parameters, buffers) shared by src/nn. */
#ifndef TS_NN_MODULE_INTERNAL_H
#define TS_NN_MODULE_INTERNAL_H

#include <stdio.h>

#include "core/internal.h"
#include "core/strbuf.h" /* tsi_strbuf: reprs and long error messages */

/* Names and items in insertion order (PyTorch's OrderedDicts); re-registering a name replaces the
 * item in place, so positions ("slots") never move. */
typedef struct tsi_named {
    int n, cap;
    char **names;
    void **items;
} tsi_named;

struct ts_module_impl {
    char *type_name;
    ts_module *parent;  /* NULL for a root; a module has at most one owner */
    tsi_named children; /* ts_module * */
    tsi_named params;   /* ts_tensor *, one reference each */
    tsi_named buffers;  /* ts_tensor *, one reference each */
    size_t alloc_size;  /* the size given to ts_module_alloc: what a replica copies */
    bool replica;       /* made by tsi_module_replicate: never runs the user's destroy hook */
    struct tsi_forward_hooks *hooks; /* module_hooks.c; NULL when none */
    bool checkpoint;                 /* ts_module_set_checkpoint: forward under ts_checkpoint */
    /* placement.c (ts_module_place): the handle of the hook moving this module's output to the
     * next placed module's device (0: none); on the placed root, the device its input moves to */
    int place_hook;
    bool place_input;
    ts_device place_dev;
};

/* module_hooks.c: the forward hooks around m's forward (a cheap NULL test when there are none).
 * pre: false when a hook failed (error set). post: the output to use, NULL on failure. */
bool tsi_module_pre_hooks(ts_module *m, ts_tensor *x);
ts_tensor *tsi_module_post_hooks(ts_module *m, ts_tensor *x, ts_tensor *y);
void tsi_module_hooks_free(ts_module *m);

/* module_checkpoint.c: m->forward(m, x), under ts_checkpoint when m is flagged and grad mode is on
 */
ts_tensor *tsi_module_run_forward(ts_module *m, ts_tensor *x);

int tsi_named_find(const tsi_named *l, const char *name); /* index or -1 */
char *tsi_strdup(const char *s);                          /* NULL on OOM */

/* Built-in layers keep the slot of each tensor they own: a lookup that survives re-registration
 * and costs no string compare per forward. */
static inline ts_tensor *tsi_param_at(ts_module *m, int slot) {
    return slot >= 0 ? (ts_tensor *)m->impl->params.items[slot] : NULL;
}
static inline ts_tensor *tsi_buffer_at(ts_module *m, int slot) {
    return slot >= 0 ? (ts_tensor *)m->impl->buffers.items[slot] : NULL;
}

/* Registers t under the public ownership rules and returns its slot, or -1 on failure. */
static inline int tsi_register_slot(ts_module *m, const char *name, ts_tensor *t, bool param) {
    if (!(param ? ts_module_param(m, name, t) : ts_module_buffer(m, name, t))) return -1;
    return tsi_named_find(param ? &m->impl->params : &m->impl->buffers, name);
}

/* ts_scope_begin that reports whether a scope really opened (it cannot on OOM, and a later
 * ts_scope_end would then close the caller's). */
static inline bool tsi_scope_open(void) {
    int depth = ts_scope_depth();
    ts_scope_begin();
    return ts_scope_depth() == depth + 1;
}

/* ------------------------------------------------------------------ replicas (data parallel)
 * A replica of a module tree is a copy of every module struct (alloc_size bytes) with an impl of
 * its own: the same names in the same order (so built-in layers' slots stay valid), the children
 * replaced by their replicas and each parameter and buffer by what `map` returns for it. Pointer-
 * sized, pointer-aligned words of the user part (after the ts_module base) that equal the address
 * of a module or tensor of the original tree are relocated to its replica's counterpart; every
 * other field is shared with the original, as Python's shallow copy in nn.Module's
 * _replicate_for_data_parallel shares them. A replica never runs the destroy hook (the extras
 * belong to the original). */
/* Returns the replica's tensor for an original parameter or buffer: a reference the replica
 * takes over, or NULL with an error set. Called once per distinct tensor (a tensor shared by two
 * modules maps to one replica tensor). */
typedef ts_tensor *(*tsi_replica_map_fn)(ts_tensor *orig, bool is_param, void *ctx);
/* The replica of the tree rooted at m (a root of its own: free it with ts_module_free), or NULL
 * with an error set. */
ts_module *tsi_module_replicate(ts_module *m, tsi_replica_map_fn map, void *ctx);

/* Python's repr(float): "1e-05", "0.1", "1.0". */
void tsi_py_float(double v, char *out, size_t n);

#endif /* TS_NN_MODULE_INTERNAL_H */
