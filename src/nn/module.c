/* module.c — the module base: registering children, parameters and buffers, lookup, forward,
 * moving to a device or dtype in place, train/eval, parameter count, freeing. */
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"

/* ------------------------------------------------------------------ named lists */
char *tsi_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int tsi_named_find(const tsi_named *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return i;
    return -1;
}

/* Appends (name copied); false on OOM with nothing changed. */
static bool named_push(tsi_named *l, const char *name, void *item) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) return false;
        l->names = names;
        void **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) return false;
        l->items = items;
        l->cap = cap;
    }
    char *copy = tsi_strdup(name);
    if (!copy) return false;
    l->names[l->n] = copy;
    l->items[l->n++] = item;
    return true;
}

static void named_free(tsi_named *l) {
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ creation and freeing */
void *ts_module_alloc(size_t size, const char *type_name, ts_forward_fn forward) {
    tsi_init();
    if (size < sizeof(ts_module)) {
        tsi_error_set(TS_ERR_ARG,
                      "module_alloc: size %zu is smaller than ts_module (%zu): embed ts_module as "
                      "the first member",
                      size, sizeof(ts_module));
        return NULL;
    }
    ts_module *m = calloc(1, size);
    struct ts_module_impl *impl = calloc(1, sizeof *impl);
    char *name = tsi_strdup(type_name ? type_name : "Module");
    if (!m || !impl || !name) {
        free(m);
        free(impl);
        free(name);
        tsi_error_set(TS_ERR_OOM, "module_alloc: out of host memory");
        return NULL;
    }
    impl->type_name = name;
    impl->alloc_size = size;
    m->impl = impl;
    m->type_name = name;
    m->forward = forward;
    m->training = true; /* PyTorch modules start in training mode */
    return m;
}

static void module_destroy(ts_module *m) {
    if (m->destroy && !m->impl->replica) m->destroy(m); /* a replica's extras are the original's */
    struct ts_module_impl *impl = m->impl;
    for (int i = 0; i < impl->children.n; i++) {
        ts_module *c = impl->children.items[i];
        c->impl->parent = NULL;
        module_destroy(c);
    }
    for (int i = 0; i < impl->params.n; i++) ts_release(impl->params.items[i]);
    for (int i = 0; i < impl->buffers.n; i++) ts_release(impl->buffers.items[i]);
    named_free(&impl->children);
    named_free(&impl->params);
    named_free(&impl->buffers);
    tsi_module_hooks_free(m);
    free(impl->type_name);
    free(impl);
    free(m);
}

void ts_module_free(ts_module *m) {
    if (!m) return;
    if (m->impl->parent) {
        /* the parent still points at it: freeing here would leave it dangling */
        tsi_error_set(TS_ERR_STATE,
                      "module_free: this %s is owned by its parent %s; free the root module",
                      m->type_name, m->impl->parent->type_name);
        return;
    }
    module_destroy(m);
}

/* ------------------------------------------------------------------ registration */
static bool check_module(const char *op, ts_module *m) {
    if (m) return true;
    if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
    return false;
}

/* PyTorch's rules for attribute names: non-empty, no ".", one namespace for children, parameters
 * and buffers (re-registering under the same kind replaces). */
static bool check_name(const char *op, ts_module *m, const char *kind, const char *name,
                       const tsi_named *same) {
    if (!name) return tsi_error_set(TS_ERR_ARG, "%s: %s name is NULL", op, kind), false;
    if (!name[0])
        return tsi_error_set(TS_ERR_ARG, "%s: %s name can't be empty string \"\"", op, kind), false;
    if (strchr(name, '.'))
        return tsi_error_set(TS_ERR_ARG, "%s: %s name can't contain \".\", got: %s", op, kind,
                             name),
               false;
    const tsi_named *lists[3] = {&m->impl->children, &m->impl->params, &m->impl->buffers};
    for (int i = 0; i < 3; i++)
        if (lists[i] != same && tsi_named_find(lists[i], name) >= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: attribute '%s' already exists in %s", op, name,
                                 m->type_name),
                   false;
    return true;
}

/* Stores t, whose reference the module takes over in every case (released on failure). */
static ts_tensor *register_tensor(const char *op, ts_module *m, const char *name, ts_tensor *t,
                                  bool param) {
    const char *kind = param ? "parameter" : "buffer";
    if (!check_module(op, m) || !tsi_check_input(op, t, kind)) goto fail;
    tsi_named *l = param ? &m->impl->params : &m->impl->buffers;
    if (!check_name(op, m, kind, name, l)) goto fail;
    if (param) {
        if (!tsi_is_float(t->dtype)) {
            tsi_error_set(TS_ERR_DTYPE,
                          "%s: only tensors of floating point dtype can require gradients: "
                          "parameter '%s' is %s",
                          op, name, tsi_desc(t));
            goto fail;
        }
        if (t->grad_fn) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: cannot register non-leaf tensor '%s' (made by %s) as a parameter; "
                          "pass ts_detach of it",
                          op, name, ts_grad_fn_name(t));
            goto fail;
        }
        t->requires_grad = true;
    }
    int i = tsi_named_find(l, name);
    if (i >= 0) {
        ts_release(l->items[i]);
        l->items[i] = t;
        return t;
    }
    if (!named_push(l, name, t)) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory registering '%s'", op, name);
        goto fail;
    }
    return t;
fail:
    ts_release(t);
    return NULL;
}

/* Inside a scope the scope keeps its reference and the module takes its own; outside one the
 * module takes the caller's, so `ts_module_param(m, "w", ts_empty(...))` never leaks. */
ts_tensor *ts_module_param(ts_module *m, const char *name, ts_tensor *t) {
    if (t && ts_scope_depth() > 0) ts_retain(t);
    return register_tensor("module_param", m, name, t, true);
}

ts_tensor *ts_module_buffer(ts_module *m, const char *name, ts_tensor *t) {
    if (t && ts_scope_depth() > 0) ts_retain(t);
    return register_tensor("module_buffer", m, name, t, false);
}

void *ts_module_add(ts_module *parent, const char *name, ts_module *child) {
    const char *op = "module_add";
    if (!child) {
        if (!ts_error())
            tsi_error_set(TS_ERR_ARG, "%s: child module '%s' is NULL", op, name ? name : "?");
        return NULL;
    }
    /* a module with an owner (or an ancestor of parent) must not be freed here: it is not ours */
    if (child->impl->parent) {
        tsi_error_set(TS_ERR_ARG, "%s: %s '%s' already belongs to %s", op, child->type_name,
                      name ? name : "?", child->impl->parent->type_name);
        return NULL;
    }
    for (ts_module *p = parent; p; p = p->impl->parent)
        if (p == child) {
            tsi_error_set(TS_ERR_ARG, "%s: adding %s '%s' would make a cycle", op, child->type_name,
                          name ? name : "?");
            return NULL;
        }
    if (!check_module(op, parent) ||
        !check_name(op, parent, "module", name, &parent->impl->children))
        goto fail;
    tsi_named *l = &parent->impl->children;
    int i = tsi_named_find(l, name);
    if (i >= 0) {
        ts_module *old = l->items[i];
        old->impl->parent = NULL;
        module_destroy(old);
        l->items[i] = child;
    } else if (!named_push(l, name, child)) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory registering '%s'", op, name);
        goto fail;
    }
    child->impl->parent = parent;
    return child;
fail:
    module_destroy(child);
    return NULL;
}

/* ------------------------------------------------------------------ lookup */
/* The module reached by the first len characters of a dotted path ("features.0"). */
static ts_module *walk(ts_module *m, const char *path, size_t len) {
    char part[256];
    size_t i = 0;
    while (m && i < len) {
        size_t j = i;
        while (j < len && path[j] != '.') j++;
        if (j - i >= sizeof part) return NULL;
        memcpy(part, path + i, j - i);
        part[j - i] = '\0';
        int k = tsi_named_find(&m->impl->children, part);
        m = k >= 0 ? m->impl->children.items[k] : NULL;
        i = j + 1;
    }
    return m;
}

ts_module *ts_module_child(ts_module *m, const char *name) {
    if (!check_module("module_child", m)) return NULL;
    if (!name) return tsi_error_set(TS_ERR_ARG, "module_child: name is NULL"), NULL;
    ts_module *c = walk(m, name, strlen(name));
    if (!c) tsi_error_set(TS_ERR_ARG, "module_child: %s has no submodule '%s'", m->type_name, name);
    return c;
}

ts_tensor *ts_module_get(ts_module *m, const char *name) {
    if (!check_module("module_get", m)) return NULL;
    if (!name) return tsi_error_set(TS_ERR_ARG, "module_get: name is NULL"), NULL;
    const char *dot = strrchr(name, '.');
    ts_module *owner = dot ? walk(m, name, (size_t)(dot - name)) : m;
    const char *leaf = dot ? dot + 1 : name;
    if (owner) {
        int i = tsi_named_find(&owner->impl->params, leaf);
        if (i >= 0) return owner->impl->params.items[i];
        i = tsi_named_find(&owner->impl->buffers, leaf);
        if (i >= 0) return owner->impl->buffers.items[i];
    }
    tsi_error_set(TS_ERR_ARG, "module_get: %s has no parameter or buffer '%s'", m->type_name, name);
    return NULL;
}

/* ------------------------------------------------------------------ forward */
/* Intermediates of the forward die with a scope of its own, so a forward called outside any scope
 * leaks nothing and peak memory stays low; autograd nodes keep what backward needs. */
ts_tensor *ts_forward(ts_module *m, ts_tensor *x) {
    if (!check_module("forward", m) || !tsi_check_input("forward", x, "input")) return NULL;
    if (!m->forward)
        return tsi_error_set(TS_ERR_ARG,
                             "forward: module [%s] is missing the required forward "
                             "function",
                             m->type_name),
               NULL;
    int depth = ts_scope_depth();
    ts_scope_begin();
    if (ts_scope_depth() != depth + 1) return NULL; /* out of host memory */
    ts_tensor *y = NULL;
    if (m->impl->place_input && !(x = ts_to(x, m->impl->place_dev))) { /* ts_module_place */
        ts_scope_end();
        return NULL;
    }
    if (!m->impl->hooks) {
        y = ts_keep(tsi_module_run_forward(m, x));
    } else if (tsi_module_pre_hooks(m, x)) {
        y = tsi_module_run_forward(m, x);
        if (y) y = ts_keep(tsi_module_post_hooks(m, x, y));
    }
    ts_scope_end();
    return y;
}

/* ------------------------------------------------------------------ device, dtype, mode */
typedef struct move_req {
    bool cast;
    ts_device dev;
    ts_dtype dtype;
} move_req;

static ts_status move_tensor(ts_tensor *t, move_req r) {
    if (r.cast) {
        /* integer buffers (num_batches_tracked) keep their dtype, as in PyTorch */
        if (!tsi_is_float(t->dtype)) return TS_OK;
        if (tsi_tensor_cast_storage(t, r.dtype) != TS_OK) return ts_error();
        return t->grad ? tsi_tensor_cast_storage(t->grad, r.dtype) : TS_OK;
    }
    if (tsi_tensor_move_storage(t, r.dev) != TS_OK) return ts_error();
    return t->grad ? tsi_tensor_move_storage(t->grad, r.dev) : TS_OK;
}

static ts_status move_module(ts_module *m, move_req r) {
    struct ts_module_impl *impl = m->impl;
    for (int i = 0; i < impl->params.n; i++)
        if (move_tensor(impl->params.items[i], r) != TS_OK) return ts_error();
    for (int i = 0; i < impl->buffers.n; i++)
        if (move_tensor(impl->buffers.items[i], r) != TS_OK) return ts_error();
    for (int i = 0; i < impl->children.n; i++)
        if (move_module(impl->children.items[i], r) != TS_OK) return ts_error();
    return TS_OK;
}

/* On failure m is still returned (with the error pending) so `net = ts_module_to(net, d)` cannot
 * lose the model; tensors already moved stay moved, as in PyTorch. */
ts_module *ts_module_to(ts_module *m, ts_device d) {
    tsi_init();
    if (!check_module("module_to", m)) return NULL;
    d = tsi_resolve_device(d);
    if (!tsi_check_device("module_to", d)) return m;
    move_module(m, (move_req){.dev = d});
    return m;
}

ts_module *ts_module_to_dtype(ts_module *m, ts_dtype dt) {
    tsi_init();
    if (!check_module("module_to_dtype", m)) return NULL;
    dt = tsi_resolve_dtype(dt);
    if ((unsigned)dt >= TS_DTYPE_COUNT || !tsi_is_float(dt)) {
        tsi_error_set(TS_ERR_DTYPE,
                      "module_to_dtype: nn.Module.to only accepts floating point dtypes, but got "
                      "%s",
                      (unsigned)dt < TS_DTYPE_COUNT ? ts_dtype_name(dt) : "an invalid dtype");
        return m;
    }
    move_module(m, (move_req){.cast = true, .dtype = dt});
    return m;
}

void ts_module_train(ts_module *m, bool on) {
    if (!m) return;
    m->training = on;
    for (int i = 0; i < m->impl->children.n; i++) ts_module_train(m->impl->children.items[i], on);
}

void ts_module_eval(ts_module *m) { ts_module_train(m, false); }

int64_t ts_module_num_parameters(ts_module *m) {
    if (!check_module("module_num_parameters", m)) return -1;
    ts_tensor_list l = ts_module_named_parameters(m);
    int64_t n = 0;
    for (int i = 0; i < l.n; i++) n += tsi_numel(l.tensors[i]->shape);
    ts_tensor_list_free(&l);
    return n;
}
