/* weight_stream_setup.c — ts_module_stream's set-up and ts_module_unstream: the model cut into
 * units (placement's), each unit's parameters and buffers (its modules' slots), the model's tensors
 * moved to pinned host memory and back, the hooks installed and removed, the counters. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pinned.h"
#include "nn/weight_stream_internal.h"

static const char *OP = "module_stream";

/* ------------------------------------------------------------------ set-up */
static bool grow(void **p, int *cap, int n, size_t elem) {
    if (n < *cap) return true;
    int c = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    *p = q;
    *cap = c;
    return true;
}

static bool add_entry(sunit *u, int *cap, ts_module *m, int slot, bool param) {
    if (!grow((void **)&u->e, cap, u->n, sizeof *u->e)) return false;
    ts_tensor *h = (param ? m->impl->params.items : m->impl->buffers.items)[slot];
    u->e[u->n++] = (entry){.m = m, .slot = slot, .param = param, .h = h};
    u->bytes += ts_nbytes(h);
    return true;
}

/* every parameter and buffer of m's subtree, in the unit */
static bool add_tree(sunit *u, int *cap, ts_module *m) {
    const struct ts_module_impl *im = m->impl;
    for (int i = 0; i < im->params.n; i++)
        if (!add_entry(u, cap, m, i, true)) return false;
    for (int i = 0; i < im->buffers.n; i++)
        if (!add_entry(u, cap, m, i, false)) return false;
    for (int i = 0; i < im->children.n; i++)
        if (!add_tree(u, cap, im->children.items[i])) return false;
    return true;
}

/* the distinct tensors of the model, each with its device */
static bool add_host(stream *s, int *cap, ts_tensor *t) {
    for (int i = 0; i < s->n_ht; i++)
        if (s->ht[i].t == t) return true;
    if (!grow((void **)&s->ht, cap, s->n_ht, sizeof *s->ht)) return false;
    s->ht[s->n_ht++] = (host_tensor){.t = ts_retain(t), .was = tsi_device(t)};
    return true;
}

/* t takes copy's storage and copy t's old one (freed with copy), as ts_module_to does, so the
 * per-device live counts stay right; the version carries over */
static void adopt(ts_tensor *t, ts_tensor *copy) {
    ts_storage *old = t->storage;
    atomic_store(&copy->storage->version, atomic_load(&old->version));
    t->storage = copy->storage;
    copy->storage = old;
    t->offset = 0;
    tsi_contiguous_strides(&t->shape, t->strides);
    t->is_view = false;
    ts_release(copy);
}

/* a pinned contiguous host copy of t (cpu: pinned where the host allocator pins) */
static ts_tensor *pinned_copy(ts_tensor *t) {
    ts_tensor *c = tsi_new(OP, t->shape, t->dtype, ts_cpu());
    if (!c) return NULL;
    if (!tsi_storage_pin(OP, c)) return ts_release(c), NULL;
    ts_tensor *h = tsi_to_device(OP, t, ts_cpu());
    if (!h) return ts_release(c), NULL;
    if (tsi_numel(t->shape) > 0) {
        ts_kview dv = tsi_kview(c), sv = tsi_kview(h);
        tsi_be(c)->copy(tsi_be(c), 0, &dv, &sv);
    }
    ts_release(h);
    return c;
}

/* Moves every tensor (and gradient) of the model: to pinned host memory (back = false) or to the
 * device it had (back = true). All copies are made first, so out of memory nothing moved. */
static bool move_all(stream *s, bool back) {
    const int n = s->n_ht;
    ts_tensor **c = calloc((size_t)(2 * n + 1), sizeof *c);
    if (!c) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        ts_tensor *t = s->ht[i].t, *g = t->grad;
        const ts_device to = back ? s->ht[i].was : ts_cpu();
        if (back && tsi_device_eq(to, tsi_device(t))) continue;
        c[2 * i] = back ? tsi_to_device(OP, t, to) : pinned_copy(t);
        ok = c[2 * i] != NULL;
        if (ok && g && !tsi_device_eq(tsi_device(g), to)) {
            c[2 * i + 1] = tsi_to_device(OP, g, to);
            ok = c[2 * i + 1] != NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        if (ok && c[2 * i]) adopt(s->ht[i].t, c[2 * i]);
        if (ok && c[2 * i + 1]) adopt(s->ht[i].t->grad, c[2 * i + 1]);
        if (!ok) ts_release(c[2 * i]), ts_release(c[2 * i + 1]);
    }
    free(c);
    return ok;
}

static void remove_hooks(stream *s) {
    ts_module *r = s->root;
    if (s->root_pre) ts_module_remove_forward_hook(r, s->root_pre);
    if (s->root_post) ts_module_remove_forward_hook(r, s->root_post);
    for (int i = 0; s->u && i < s->n; i++) {
        sunit *u = &s->u[i];
        for (int k = 0; u->pre_h && k < s->spans[i].count; k++)
            if (u->pre_h[k])
                ts_module_remove_forward_hook(s->mods[s->spans[i].first + k], u->pre_h[k]);
        if (u->post_h) ts_module_remove_forward_hook(s->spans[i].exit, u->post_h);
        free(u->pre_h);
        u->pre_h = NULL;
        u->post_h = 0;
    }
    s->root_pre = s->root_post = 0;
}

static void stream_free(stream *s) {
    for (int i = 0; s->u && i < s->n; i++) {
        tsi_ws_drop(s, &s->u[i]);
        free(s->u[i].e);
    }
    free(s->u);
    for (int i = 0; i < s->n_ht; i++) ts_release(s->ht[i].t);
    free(s->mods);
    free(s->spans);
    free(s->ht);
    free(s);
}

/* the root freed while streamed: the slots get their host tensors back (the module frees them),
 * then the module's own destroy */
static void stream_destroy(ts_module *m) {
    stream *s = tsi_ws_find(m);
    if (!s) return;
    void (*destroy)(ts_module *) = s->destroy;
    tsi_ws_unregister(s);
    remove_hooks(s);
    stream_free(s);
    m->destroy = destroy;
    if (destroy) destroy(m);
}

static bool build_units(stream *s) {
    const int n = tsi_place_units(s->root, &s->mods, &s->spans, &s->gpt);
    if (n < 0) return false;
    if (n >= 1 << 18) /* the hooks' contexts hold a unit's index in 18 bits */
        return tsi_error_set(TS_ERR_ARG, "%s: %s has %d units; at most %d are streamed", OP,
                             s->root->type_name, n, (1 << 18) - 1),
               false;
    s->n = n;
    s->u = calloc((size_t)(n ? n : 1), sizeof *s->u);
    if (!s->u) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
    int hcap = 0;
    for (int i = 0; i < n; i++) {
        sunit *u = &s->u[i];
        int cap = 0;
        u->s = s;
        u->index = i;
        for (int k = 0; k < s->spans[i].count; k++)
            if (!add_tree(u, &cap, s->mods[s->spans[i].first + k])) return false;
        /* a GPT's head (run by the root after the final norm) reads the token embedding */
        if (s->gpt && i == n - 1) {
            ts_module *emb = s->mods[s->spans[0].first];
            const int slot = tsi_named_find(&emb->impl->params, "weight");
            if (slot >= 0 && !add_entry(u, &cap, emb, slot, true)) return false;
        }
        for (int k = 0; k < u->n; k++)
            if (!add_host(s, &hcap, u->e[k].h)) return false;
    }
    /* tensors outside every unit (the root's own) stay on the host: refused up front */
    ts_tensor_list all = ts_module_named_parameters(s->root),
                   bufs = ts_module_named_buffers(s->root);
    bool ok = ts_error() == TS_OK;
    int outside = 0;
    for (int l = 0; l < 2 && ok; l++) {
        ts_tensor_list *L = l ? &bufs : &all;
        for (int i = 0; i < L->n; i++) {
            bool in = false;
            for (int k = 0; k < s->n_ht && !in; k++) in = s->ht[k].t == L->tensors[i];
            outside += !in;
        }
    }
    ts_tensor_list_free(&all);
    ts_tensor_list_free(&bufs);
    if (ok && outside)
        ok = tsi_error_set(TS_ERR_ARG,
                           "%s: %d tensors of %s belong to no unit (the root's own); streaming "
                           "needs every parameter and buffer in a unit",
                           OP, outside, s->root->type_name) == TS_OK;
    if (ok && s->n_ht == 0)
        ok = tsi_error_set(TS_ERR_ARG, "%s: %s has no parameters or buffers to stream", OP,
                           s->root->type_name) == TS_OK;
    return ok;
}

static bool install_hooks(stream *s) {
    ts_module *r = s->root;
    s->root_pre = ts_module_register_forward_pre_hook(r, tsi_ws_root_pre, s);
    if (s->root_pre <= 0) return false;
    for (int i = 0; i < s->n; i++) {
        sunit *u = &s->u[i];
        u->pre_h = calloc((size_t)s->spans[i].count, sizeof *u->pre_h);
        if (!u->pre_h) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP), false;
        for (int k = 0; k < s->spans[i].count; k++) {
            u->pre_h[k] = ts_module_register_forward_pre_hook(s->mods[s->spans[i].first + k],
                                                              tsi_ws_unit_pre, u);
            if (u->pre_h[k] <= 0) return false;
        }
        if (i == s->n - 1) continue; /* the last finishes with the root */
        u->post_h = ts_module_register_forward_hook(s->spans[i].exit, tsi_ws_unit_post, u);
        if (u->post_h <= 0) return false;
    }
    s->root_post = ts_module_register_forward_hook(r, tsi_ws_root_post, s);
    return s->root_post > 0;
}

ts_status ts_module_stream(ts_module *m, ts_device dev, ts_stream_opts opts) {
    tsi_init();
    if (!m) return tsi_error_set(TS_ERR_ARG, "%s: module is NULL", OP);
    if (m->impl->parent)
        return tsi_error_set(TS_ERR_ARG, "%s: %s is a child module (of %s); stream its root", OP,
                             m->type_name, m->impl->parent->type_name);
    if (opts.prefetch < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: prefetch must be >= 0, got %d", OP, opts.prefetch);
    dev = tsi_resolve_device(dev);
    if (dev.type != TS_SIM && dev.type != TS_CUDA)
        return tsi_error_set(TS_ERR_DEVICE,
                             "%s: streams to a sim or cuda device, got %s (the weights live on "
                             "the cpu already)",
                             OP, ts_device_str(dev));
    if (!ts_device_is_available(dev))
        return tsi_error_set(TS_ERR_DEVICE, "%s: device %s is not available", OP,
                             ts_device_str(dev));
    if (tsi_module_streamed(m))
        return tsi_error_set(TS_ERR_STATE,
                             "%s: %s is streamed already; ts_module_unstream it first", OP,
                             m->type_name);
    if (m->impl->place_input)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: %s is placed across devices (ts_module_place); streaming and "
                             "placement do not combine: build the model again to stream it",
                             OP, m->type_name);
    stream *s = calloc(1, sizeof *s);
    if (!s) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", OP);
    *s = (stream){.root = m, .dev = dev, .o = opts, .slot = -1};
    bool ok = build_units(s);
    ok = ok && tsi_ws_register(s);
    ok = ok && install_hooks(s) && move_all(s, false);
    if (!ok) {
        ts_status st = ts_error();
        tsi_ws_unregister(s);
        remove_hooks(s);
        stream_free(s);
        return st != TS_OK ? st : tsi_error_set(TS_ERR_STATE, "%s: failed", OP);
    }
    s->st.units = s->n;
    s->gen = tsi_ws_next_gen();
    m->impl->place_input = true; /* ts_forward moves the input to dev */
    m->impl->place_dev = dev;
    s->destroy = m->destroy;
    m->destroy = stream_destroy;
    return TS_OK;
}

ts_status ts_module_unstream(ts_module *m) {
    stream *s = m ? tsi_ws_find(m) : NULL;
    if (!s)
        return tsi_error_set(TS_ERR_ARG, "module_unstream: %s is not streamed (ts_module_stream)",
                             m ? m->type_name : "NULL module");
    tsi_ws_reset(s); /* the slots hold the host tensors again */
    if (!move_all(s, true)) return ts_error();
    tsi_ws_unregister(s);
    remove_hooks(s);
    m->destroy = s->destroy;
    m->impl->place_input = false;
    stream_free(s);
    return TS_OK;
}

ts_status ts_module_stream_stats(ts_module *m, ts_stream_stats *out) {
    stream *s = m ? tsi_ws_find(m) : NULL;
    if (!s || !out)
        return tsi_error_set(TS_ERR_ARG, "module_stream_stats: %s",
                             !out ? "out is NULL" : "the module is not streamed");
    *out = s->st;
    return TS_OK;
}

ts_status ts_module_stream_reset_stats(ts_module *m) {
    stream *s = m ? tsi_ws_find(m) : NULL;
    if (!s)
        return tsi_error_set(TS_ERR_ARG, "module_stream_reset_stats: the module is not streamed");
    s->st = (ts_stream_stats){.units = s->n,
                              .max_resident_units = s->resident_units,
                              .max_resident_bytes = s->resident_bytes};
    return TS_OK;
}
