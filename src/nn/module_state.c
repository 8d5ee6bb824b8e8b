/* module_state.c — named tensor lists, named parameters/buffers, state_dict and loading it. */
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "nn/module_load.h"

/* ------------------------------------------------------------------ ts_tensor_list */
ts_status ts_tensor_list_add(ts_tensor_list *l, const char *name, ts_tensor *t) {
    if (!l || !name) return tsi_error_set(TS_ERR_ARG, "tensor_list_add: list or name is NULL");
    if (!tsi_check_input("tensor_list_add", t, "tensor")) return ts_error();
    /* a dict: a second add under one name replaces the tensor and keeps its position */
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) {
            ts_retain(t);
            ts_release(l->tensors[i]);
            l->tensors[i] = t;
            return TS_OK;
        }
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) return tsi_error_set(TS_ERR_OOM, "tensor_list_add: out of host memory");
        l->names = names;
        ts_tensor **ts = realloc(l->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return tsi_error_set(TS_ERR_OOM, "tensor_list_add: out of host memory");
        l->tensors = ts;
        l->cap = cap;
    }
    char *copy = tsi_strdup(name);
    if (!copy) return tsi_error_set(TS_ERR_OOM, "tensor_list_add: out of host memory");
    l->names[l->n] = copy;
    l->tensors[l->n++] = ts_retain(t);
    return TS_OK;
}

ts_tensor *ts_tensor_list_get(const ts_tensor_list *l, const char *name) {
    if (!l || !name) return NULL;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return l->tensors[i];
    return NULL;
}

void ts_tensor_list_free(ts_tensor_list *l) {
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        ts_release(l->tensors[i]);
    }
    free(l->names);
    free(l->tensors);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ collecting */
enum { WANT_PARAMS = 1, WANT_BUFFERS = 2 };

static bool listed(const ts_tensor_list *l, const ts_tensor *t) {
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i] == t) return true;
    return false;
}

static bool add_named(ts_tensor_list *out, const char *prefix, const tsi_named *src, bool dedup) {
    for (int i = 0; i < src->n; i++) {
        ts_tensor *t = src->items[i];
        if (dedup && listed(out, t)) continue;
        size_t n = strlen(prefix) + strlen(src->names[i]) + 1;
        char *full = malloc(n);
        if (!full) return tsi_error_set(TS_ERR_OOM, "state_dict: out of host memory"), false;
        snprintf(full, n, "%s%s", prefix, src->names[i]);
        ts_status s = ts_tensor_list_add(out, full, t);
        free(full);
        if (s != TS_OK) return false;
    }
    return true;
}

/* PyTorch's order: a module's own parameters, then its own buffers, then each child's, depth
 * first. named_parameters()/named_buffers() drop a tensor seen before (shared weights); the
 * state_dict keeps every name. */
static bool collect(ts_module *m, const char *prefix, int want, bool dedup, ts_tensor_list *out) {
    if ((want & WANT_PARAMS) && !add_named(out, prefix, &m->impl->params, dedup)) return false;
    if ((want & WANT_BUFFERS) && !add_named(out, prefix, &m->impl->buffers, dedup)) return false;
    const tsi_named *c = &m->impl->children;
    for (int i = 0; i < c->n; i++) {
        size_t n = strlen(prefix) + strlen(c->names[i]) + 2;
        char *sub = malloc(n);
        if (!sub) return tsi_error_set(TS_ERR_OOM, "state_dict: out of host memory"), false;
        snprintf(sub, n, "%s%s.", prefix, c->names[i]);
        bool ok = collect(c->items[i], sub, want, dedup, out);
        free(sub);
        if (!ok) return false;
    }
    return true;
}

/* An empty list on failure; *ok tells failure from a module without tensors. */
static ts_tensor_list collect_list(const char *op, ts_module *m, int want, bool dedup, bool *ok) {
    ts_tensor_list l = {0};
    *ok = false;
    if (!m) {
        if (!ts_error()) tsi_error_set(TS_ERR_ARG, "%s: module is NULL", op);
        return l;
    }
    *ok = collect(m, "", want, dedup, &l);
    if (!*ok) ts_tensor_list_free(&l);
    return l;
}

ts_tensor_list ts_module_named_parameters(ts_module *m) {
    bool ok;
    return collect_list("named_parameters", m, WANT_PARAMS, true, &ok);
}
ts_tensor_list ts_module_named_buffers(ts_module *m) {
    bool ok;
    return collect_list("named_buffers", m, WANT_BUFFERS, true, &ok);
}
ts_tensor_list ts_module_state_dict(ts_module *m) {
    bool ok;
    return collect_list("state_dict", m, WANT_PARAMS | WANT_BUFFERS, false, &ok);
}

/* ------------------------------------------------------------------ loading */
/* Appends `\n\t<title> "k1", "k2". ` for the keys of `keys` absent from `other` (PyTorch's text).
 */
static int list_absent(tsi_strbuf *b, const char *title, const ts_tensor_list *keys,
                       const ts_tensor_list *other) {
    int count = 0;
    for (int i = 0; i < keys->n; i++) {
        if (ts_tensor_list_get(other, keys->names[i])) continue;
        if (count++)
            tsi_sb_printf(b, ", \"%s\"", keys->names[i]);
        else
            tsi_sb_printf(b, "\n\t%s \"%s\"", title, keys->names[i]);
    }
    if (count) tsi_sb_puts(b, ". ");
    return count;
}

struct tsi_module_staged {
    ts_tensor_list own; /* the module's tensors, in state_dict order */
    ts_tensor **staged; /* per own entry: its new value on its device and dtype, or NULL */
};

void tsi_module_load_drop(tsi_module_staged *g) {
    if (!g) return;
    for (int i = 0; g->staged && i < g->own.n; i++) ts_release(g->staged[i]);
    free(g->staged);
    ts_tensor_list_free(&g->own);
    free(g);
}

/* Everything is checked and every value copied onto its tensor's device and dtype before
 * anything changes, so a failed load (a wrong key, a shape, out of memory) leaves the module as it
 * was (PyTorch copies the matching entries before it raises). */
tsi_module_staged *tsi_module_load_stage(const char *op, ts_module *m, const ts_tensor_list *sd,
                                         bool strict) {
    for (int i = 0; i < sd->n; i++)
        if (!sd->tensors[i] || !sd->names[i])
            return tsi_error_set(TS_ERR_ARG, "%s: entry %d ('%s') of the state_dict is NULL", op, i,
                                 sd->names[i] ? sd->names[i] : "?"),
                   NULL;
    tsi_module_staged *g = calloc(1, sizeof *g);
    if (!g) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    bool ok;
    g->own = collect_list(op, m, WANT_PARAMS | WANT_BUFFERS, false, &ok);
    if (!ok) {
        tsi_module_load_drop(g);
        return NULL;
    }
    const ts_tensor_list *own = &g->own;
    tsi_strbuf b = {0};
    tsi_sb_printf(&b, "%s: Error(s) in loading state_dict for %s:", op, m->type_name);
    int key_errors = 0, shape_errors = 0;
    if (strict) {
        key_errors += list_absent(&b, "Missing key(s) in state_dict:", own, sd);
        key_errors += list_absent(&b, "Unexpected key(s) in state_dict:", sd, own);
    }
    for (int i = 0; i < own->n; i++) {
        ts_tensor *src = ts_tensor_list_get(sd, own->names[i]), *dst = own->tensors[i];
        if (!src || tsi_shape_equal(src->shape, dst->shape)) continue;
        tsi_sb_printf(&b,
                      "\n\tsize mismatch for %s: copying a param with shape %s from checkpoint, "
                      "the shape in current model is %s.",
                      own->names[i], tsi_shape_str(src->shape), tsi_shape_str(dst->shape));
        shape_errors++;
    }
    ok = false;
    if (b.failed)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else if (key_errors || shape_errors)
        tsi_error_set(key_errors ? TS_ERR_ARG : TS_ERR_SHAPE, "%s", b.s);
    else if (!(g->staged = calloc((size_t)(own->n ? own->n : 1), sizeof *g->staged)))
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else
        ok = true;
    free(b.s);
    for (int i = 0; ok && i < own->n; i++) {
        ts_tensor *src = ts_tensor_list_get(sd, own->names[i]), *dst = own->tensors[i];
        if (!src || src == dst) continue;
        /* the caller's tensor already fits: copied from directly at the commit */
        if (tsi_device_eq(tsi_device(src), tsi_device(dst)) && src->dtype == dst->dtype)
            g->staged[i] = ts_retain(src);
        else
            ok = (g->staged[i] = tsi_private_copy(op, src, tsi_device(dst), dst->dtype)) != NULL;
    }
    if (!ok) {
        tsi_module_load_drop(g);
        return NULL;
    }
    return g;
}

void tsi_module_load_commit(tsi_module_staged *g) {
    /* values only: no graph, and parameters that require grad may be written */
    for (int i = 0; i < g->own.n; i++) {
        ts_tensor *src = g->staged[i], *dst = g->own.tensors[i];
        if (!src || tsi_numel(dst->shape) == 0) continue;
        ts_kview kd = tsi_kview(dst), ks = tsi_kview(src);
        tsi_be(dst)->copy(tsi_be(dst), tsi_dev_index(dst), &kd, &ks);
        tsi_bump_version(dst);
    }
    tsi_module_load_drop(g);
}

ts_status ts_module_load_state_dict(ts_module *m, const ts_tensor_list *sd, bool strict) {
    const char *op = "load_state_dict";
    tsi_init();
    if (!m || !sd) {
        if (!ts_error())
            tsi_error_set(TS_ERR_ARG, "%s: %s is NULL", op, m ? "state_dict" : "module");
        return ts_error() ? ts_error() : TS_ERR_ARG;
    }
    tsi_module_staged *g = tsi_module_load_stage(op, m, sd, strict);
    if (!g) return ts_error();
    tsi_module_load_commit(g);
    return TS_OK;
}
