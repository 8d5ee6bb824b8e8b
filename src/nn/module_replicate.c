/* module_replicate.c — copies of a module tree whose tensors are replaced (data parallel): every
 * struct copied with its user fields, pointers to the tree's own modules and tensors relocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"

/* ------------------------------------------------------------------ pointer map
 * Open addressing over a power-of-two table: original module or tensor -> its replica. Sized once
 * from the tree, so it never grows and lookups during relocation stay O(1). */
typedef struct pmap_entry {
    const void *key;
    void *value;
} pmap_entry;

typedef struct pmap {
    pmap_entry *v;
    size_t mask;
} pmap;

static bool pmap_init(pmap *m, size_t count) {
    size_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    m->v = calloc(cap, sizeof *m->v);
    m->mask = cap - 1;
    return m->v != NULL;
}

static size_t pmap_slot(const pmap *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & m->mask;
    while (m->v[i].key && m->v[i].key != key) i = (i + 1) & m->mask;
    return i;
}

static void *pmap_get(const pmap *m, const void *key) {
    return key ? m->v[pmap_slot(m, key)].value : NULL;
}

static void pmap_put(pmap *m, const void *key, void *value) {
    size_t i = pmap_slot(m, key);
    m->v[i].key = key;
    m->v[i].value = value;
}

/* ------------------------------------------------------------------ the copy */
typedef struct rep_ctx {
    pmap map;
    tsi_replica_map_fn fn;
    void *fn_ctx;
    ts_module **copies; /* every replica module, in the order they were made */
    size_t n_copies;
} rep_ctx;

static size_t count_items(ts_module *m) {
    size_t n = 1 + (size_t)m->impl->params.n + (size_t)m->impl->buffers.n;
    for (int i = 0; i < m->impl->children.n; i++) n += count_items(m->impl->children.items[i]);
    return n;
}

/* Empty arrays of the original's length: filled one entry at a time, so the list is consistent
 * (and freeable by ts_module_free) at every step of a copy that fails half way. */
static bool named_reserve(tsi_named *l, int n) {
    if (n == 0) return true;
    l->names = malloc((size_t)n * sizeof *l->names);
    l->items = malloc((size_t)n * sizeof *l->items);
    l->cap = n;
    return l->names && l->items;
}

static bool named_append(tsi_named *l, const char *name, void *item) {
    char *copy = tsi_strdup(name);
    if (!copy) return false;
    l->names[l->n] = copy;
    l->items[l->n++] = item;
    return true;
}

/* The replica of one tensor; a tensor met before (shared between modules) maps to the same one. */
static ts_tensor *replica_tensor(rep_ctx *c, ts_tensor *t, bool is_param) {
    ts_tensor *r = pmap_get(&c->map, t);
    if (r) return ts_retain(r);
    r = c->fn(t, is_param, c->fn_ctx);
    if (!r) return NULL;
    pmap_put(&c->map, t, r); /* borrowed: the list entry below holds the reference */
    return r;
}

static bool copy_tensors(rep_ctx *c, const tsi_named *from, tsi_named *to, bool is_param) {
    for (int i = 0; i < from->n; i++) {
        ts_tensor *r = replica_tensor(c, from->items[i], is_param);
        if (!r) return false;
        if (!named_append(to, from->names[i], r)) {
            ts_release(r);
            return false;
        }
    }
    return true;
}

/* Copies m's struct and impl (children included) under parent; *out gets the copy as soon as it
 * exists so that the caller can free a partial tree. */
static bool copy_module(rep_ctx *c, ts_module *m, ts_module *parent, ts_module **out) {
    const struct ts_module_impl *src = m->impl;
    ts_module *r = malloc(src->alloc_size);
    struct ts_module_impl *impl = calloc(1, sizeof *impl);
    char *type_name = tsi_strdup(src->type_name);
    if (!r || !impl || !type_name) {
        free(r);
        free(impl);
        free(type_name);
        return false;
    }
    memcpy(r, m, src->alloc_size);
    impl->type_name = type_name;
    impl->parent = parent;
    impl->alloc_size = src->alloc_size;
    impl->replica = true;
    impl->checkpoint = src->checkpoint;
    r->impl = impl;
    if (m->type_name == src->type_name) r->type_name = type_name;
    *out = r;
    c->copies[c->n_copies++] = r;
    pmap_put(&c->map, m, r);
    if (!named_reserve(&impl->params, src->params.n) ||
        !named_reserve(&impl->buffers, src->buffers.n) ||
        !named_reserve(&impl->children, src->children.n))
        return false;
    if (!copy_tensors(c, &src->params, &impl->params, true) ||
        !copy_tensors(c, &src->buffers, &impl->buffers, false))
        return false;
    for (int i = 0; i < src->children.n; i++) {
        ts_module *child = NULL;
        bool ok = copy_module(c, src->children.items[i], r, &child);
        if (child && !named_append(&impl->children, src->children.names[i], child)) {
            child->impl->parent = NULL; /* not attached: free it on its own */
            ts_module_free(child);
            return false;
        }
        if (!ok) return false;
    }
    return true;
}

/* Words of the user part that point at a module or tensor of the original tree now point at the
 * replica's counterpart. Pointers in a C struct sit at multiples of their alignment from the
 * struct's start (which malloc aligns), so only those offsets are looked at. */
static void relocate(const rep_ctx *c, ts_module *r) {
    const size_t word = sizeof(void *), end = r->impl->alloc_size;
    size_t off = (sizeof(ts_module) + word - 1) / word * word;
    for (; off + word <= end; off += word) {
        void *p;
        memcpy(&p, (char *)r + off, word);
        void *q = pmap_get(&c->map, p);
        if (q) memcpy((char *)r + off, &q, word);
    }
}

ts_module *tsi_module_replicate(ts_module *m, tsi_replica_map_fn map, void *ctx) {
    const char *op = "replicate";
    if (!m) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
        return NULL;
    }
    size_t n = count_items(m);
    rep_ctx c = {.fn = map, .fn_ctx = ctx};
    c.copies = malloc(n * sizeof *c.copies);
    if (!c.copies || !pmap_init(&c.map, n)) {
        free(c.copies);
        free(c.map.v);
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory copying %s", op, m->type_name);
        return NULL;
    }
    ts_module *root = NULL;
    if (copy_module(&c, m, NULL, &root)) {
        for (size_t i = 0; i < c.n_copies; i++) relocate(&c, c.copies[i]);
    } else {
        if (!ts_error())
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory copying %s", op, m->type_name);
        ts_module_free(root);
        root = NULL;
    }
    free(c.copies);
    free(c.map.v);
    return root;
}
