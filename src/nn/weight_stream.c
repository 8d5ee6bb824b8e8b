/* weight_stream.c — ts_module_stream: a model whose parameters and buffers live in pinned host
 * memory runs on a device, each unit's weights copied in (ts_to_async) `prefetch` units ahead of
 * its forward and freed after it, as FSDP's units gather and reshard (src/dist/fsdp_unit.c) with
 * the host copy in place of the shard.
 *
 * While a unit runs, its modules' parameter and buffer slots hold the device copies (the host
 * tensors are put back after it), so every layer reads them as its own. In grad mode a copy is
 * differentiable (ToCopyBackward0): gradients reach the host parameters' .grad through autograd.
 * Its memory is freed after the forward (the handle stays in the graph, tsi_storage_free_data),
 * brought back and refilled by a pre-backward hook before the unit's backward, and freed again
 * when every copy's gradient is complete (a tensor hook). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/pinned.h"
#include "nn/weight_stream_internal.h"
#include "tessera/custom_function.h"

static const char *OP = "module_stream";

/* ------------------------------------------------------------------ registry */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static stream *reg[TSI_WS_MAX];
static _Atomic uint64_t next_gen = 1;

stream *tsi_ws_find(const ts_module *m) {
    stream *s = NULL;
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < TSI_WS_MAX && !s; i++)
        if (reg[i] && reg[i]->root == m) s = reg[i];
    pthread_mutex_unlock(&reg_mu);
    return s;
}

bool tsi_ws_register(stream *s) {
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < TSI_WS_MAX && s->slot < 0; i++)
        if (!reg[i]) reg[i] = s, s->slot = i;
    pthread_mutex_unlock(&reg_mu);
    if (s->slot >= 0) return true;
    return tsi_error_set(TS_ERR_STATE, "%s: more than %d models streamed at once", OP, TSI_WS_MAX),
           false;
}

void tsi_ws_unregister(stream *s) {
    pthread_mutex_lock(&reg_mu);
    if (s->slot >= 0 && reg[s->slot] == s) reg[s->slot] = NULL;
    pthread_mutex_unlock(&reg_mu);
}

uint64_t tsi_ws_next_gen(void) { return atomic_fetch_add(&next_gen, 1); }

bool tsi_module_streamed(const ts_module *m) { return m && tsi_ws_find(m) != NULL; }
bool ts_module_is_streamed(ts_module *m) { return tsi_module_streamed(m); }

/* a hook's context: registry slot (6 bits), unit (18 bits), forward generation (40 bits); a stale
 * one (an older forward, a stream since removed) finds nothing */
static void *ctx_of(const stream *s, int unit) {
    return (void *)(uintptr_t)(((s->gen & ((1ull << 40) - 1)) << 24) |
                               ((uint64_t)unit << 6 | (uint64_t)s->slot));
}
static stream *from_ctx(void *ctx, int *unit) {
    uint64_t v = (uintptr_t)ctx;
    int slot = (int)(v & 63);
    *unit = (int)((v >> 6) & ((1u << 18) - 1));
    pthread_mutex_lock(&reg_mu);
    stream *s = reg[slot];
    pthread_mutex_unlock(&reg_mu);
    if (!s || (s->gen & ((1ull << 40) - 1)) != v >> 24 || *unit >= s->n) return NULL;
    return s;
}

/* ------------------------------------------------------------------ residency */
static void swap(sunit *u, bool in) {
    if (u->swapped == in) return;
    for (int i = 0; i < u->n; i++) {
        entry *e = &u->e[i];
        tsi_named *l = e->param ? &e->m->impl->params : &e->m->impl->buffers;
        l->items[e->slot] = in ? e->d : e->h;
    }
    u->swapped = in;
}

static void note_resident(stream *s, sunit *u, bool on) {
    if (u->resident == on) return;
    u->resident = on;
    s->resident_units += on ? 1 : -1;
    if (on) {
        s->resident_bytes += u->bytes;
        if (s->resident_units > s->st.max_resident_units)
            s->st.max_resident_units = s->resident_units;
        if (s->resident_bytes > s->st.max_resident_bytes)
            s->st.max_resident_bytes = s->resident_bytes;
    } else {
        s->resident_bytes -= u->bytes;
    }
}

/* The unit's copies gone: handles dropped (their memory with them unless a graph holds them, which
 * then has it freed too). */
void tsi_ws_drop(stream *s, sunit *u) {
    swap(u, false);
    for (int i = 0; i < u->n; i++) {
        entry *e = &u->e[i];
        if (!e->d) continue;
        if (u->keep) tsi_storage_free_data(e->d->storage);
        ts_release(e->d);
        e->d = NULL;
    }
    u->keep = u->prefetched = u->recompute = false;
    u->done = 0;
    note_resident(s, u, false);
}

/* The allocator's cached blocks are the earlier units' freed copies, cut up since for activations:
 * out of device memory, they are given back and the allocation tried once more (PyTorch's caching
 * allocator does the same before it reports out of memory). */
static bool retry_oom(stream *s, ts_status before) {
    if (before != TS_OK || ts_error() != TS_ERR_OOM) return false;
    ts_error_clear();
    ts_empty_cache(s->dev);
    s->st.cache_flushes++;
    return true;
}

static ts_tensor *copy_in(stream *s, ts_tensor *h) {
    const ts_status before = ts_error();
    for (int attempt = 0; attempt < 2; attempt++) {
        ts_tensor *d = NULL;
        /* not the caller's scope's: the copy must die with the unit, not with the forward */
        if (tsi_scope_open()) {
            d = ts_retain(ts_to_async(h, s->dev));
            ts_scope_end();
        }
        if (d || attempt || !retry_oom(s, before)) return d;
    }
    return NULL;
}

/* Forward: new copies (ts_to_async, differentiable in grad mode), queued on the copy engine. */
static bool fetch(stream *s, int i, bool ahead) {
    sunit *u = &s->u[i];
    if (u->resident) return true;
    for (int k = 0; k < u->n; k++) {
        entry *e = &u->e[k];
        if (e->d) { /* a kept copy of an earlier forward: its graph keeps it */
            ts_release(e->d);
            e->d = NULL;
        }
        e->hver = ts_version(e->h);
        ts_tensor *d = copy_in(s, e->h);
        if (!d) {
            for (int j = 0; j < k; j++) ts_release(u->e[j].d), u->e[j].d = NULL;
            return false;
        }
        e->d = d;
        e->dver = ts_version(d);
        s->st.copies++;
        s->st.bytes += ts_nbytes(d);
    }
    u->prefetched = ahead;
    u->keep = false;
    u->done = 0;
    s->st.unit_fetches++;
    if (ahead) s->st.prefetched++;
    note_resident(s, u, true);
    return true;
}

/* Backward: the kept handles get memory again and the host values, queued on the copy engine. */
static bool refill(stream *s, int i) {
    sunit *u = &s->u[i];
    if (u->resident || !u->keep) return true;
    for (int k = 0; k < u->n; k++) {
        entry *e = &u->e[k];
        ts_tensor *d = e->d, *h = e->h;
        if (ts_version(h) != e->hver)
            return tsi_error_set(TS_ERR_STATE,
                                 "%s: a weight of unit %d (%s) changed between the forward and its "
                                 "backward (an optimizer step or an in-place edit before "
                                 "ts_backward)",
                                 OP, i, e->m->type_name),
                   false;
        const ts_status before = ts_error();
        if (!tsi_storage_alloc_data(OP, d->storage) &&
            (!retry_oom(s, before) || !tsi_storage_alloc_data(OP, d->storage))) {
            for (int j = 0; j < k; j++) tsi_storage_free_data(u->e[j].d->storage);
            return false;
        }
        const size_t n = ts_nbytes(d);
        const tsi_copy_queue q = tsi_copy_queue_h2d(d, h, NULL);
        if (q == TSI_COPY_FAILED) { /* TS_ERR_CUDA is set */
            for (int j = 0; j <= k; j++) tsi_storage_free_data(u->e[j].d->storage);
            return false;
        }
        if (q == TSI_COPY_NOT_QUEUED)
            tsi_be(d)->copy_h2d(tsi_be(d), tsi_dev_index(d), tsi_kview(d).data, tsi_kview(h).data,
                                n);
        s->st.copies++;
        s->st.bytes += n;
    }
    u->done = 0;
    s->st.unit_fetches++;
    s->st.backward_fetches++;
    note_resident(s, u, true);
    return true;
}

/* Compute waits for the unit's copies (cuda: the copy stream is the compute stream already). */
static void wait_copies(stream *s, sunit *u) {
    if (s->dev.type != TS_SIM) return;
    for (int k = 0; k < u->n; k++)
        if (u->e[k].d) tsi_copy_link_wait(s->dev, u->e[k].d);
}

/* A buffer the unit changed (running statistics) back to the host. */
static bool copy_back(sunit *u) {
    bool ok = true;
    for (int k = 0; k < u->n && ok; k++) {
        entry *e = &u->e[k];
        if (!e->param && e->d && ts_version(e->d) != e->dver) {
            ok = tsi_scope_open();
            if (ok) {
                ts_no_grad_begin();
                ok = ts_copy_(e->h, e->d) != NULL;
                ts_no_grad_end();
                ts_scope_end();
            }
            e->hver = ts_version(e->h);
            e->dver = ts_version(e->d);
        }
    }
    return ok;
}

/* After a unit's forward: its changed buffers go back to the host; then the copies go (kept,
 * memory freed, when a backward will need them). */
static bool release_after_forward(stream *s, sunit *u, bool keep) {
    swap(u, false);
    const bool ok = copy_back(u);
    if (!keep) {
        tsi_ws_drop(s, u);
        return ok;
    }
    for (int k = 0; k < u->n; k++) tsi_storage_free_data(u->e[k].d->storage);
    u->keep = true;
    u->prefetched = false;
    note_resident(s, u, false);
    return ok;
}

void tsi_ws_reset(stream *s) {
    for (int i = 0; i < s->n; i++) tsi_ws_drop(s, &s->u[i]);
    s->gen = tsi_ws_next_gen();
}

/* ------------------------------------------------------------------ hooks */
static ts_tensor *grad_done(void *ctx, ts_tensor *grad) {
    int i;
    stream *s = from_ctx(ctx, &i);
    if (!s) return grad;
    sunit *u = &s->u[i];
    if (u->keep && ++u->done == u->n_grad) { /* its backward is over: the memory goes */
        swap(u, false);
        copy_back(u); /* the buffers a recomputation changed (checkpointed batch norms) */
        for (int k = 0; k < u->n; k++) tsi_storage_free_data(u->e[k].d->storage);
        note_resident(s, u, false);
    }
    return grad;
}

/* m or a module below it is checkpointed: its backward runs its forward again */
static bool has_checkpoint(const ts_module *m) {
    if (m->impl->checkpoint) return true;
    const tsi_named *c = &m->impl->children;
    for (int i = 0; i < c->n; i++)
        if (has_checkpoint(c->items[i])) return true;
    return false;
}

static bool unit_recomputes(const stream *s, int i) {
    for (int k = 0; k < s->spans[i].count; k++)
        if (has_checkpoint(s->mods[s->spans[i].first + k])) return true;
    return false;
}

static void pre_backward(void *ctx) {
    int i;
    if (ts_error()) return;
    stream *s = from_ctx(ctx, &i);
    if (!s) {
        tsi_error_set(TS_ERR_STATE,
                      "%s: backward through a streamed forward that is not the model's latest "
                      "(one backward per forward, as FSDP), or after ts_module_unstream",
                      OP);
        return;
    }
    /* units after it without gradients of their own are done with */
    for (int j = i + 1; j < s->n; j++)
        if (s->u[j].keep && s->u[j].n_grad == 0 && s->u[j].resident) {
            swap(&s->u[j], false);
            for (int k = 0; k < s->u[j].n; k++) tsi_storage_free_data(s->u[j].e[k].d->storage);
            note_resident(s, &s->u[j], false);
        }
    if (!refill(s, i)) return;
    for (int j = i - 1; j >= 0 && j >= i - s->o.prefetch; j--)
        if (!refill(s, j)) return;
    wait_copies(s, &s->u[i]);
    /* a checkpointed module of the unit runs its forward again in this backward: it reads the
     * copies (the handles whose gradients the graph's copy nodes take) from the slots until the
     * unit's backward is done */
    if (unit_recomputes(s, i)) swap(&s->u[i], true);
}

static bool unit_start(stream *s, int i) {
    sunit *u = &s->u[i];
    if (u->keep) {
        /* its forward again inside its backward (a checkpointed module recomputing): the kept
         * copies, brought back before the backward, in the slots, so that what the recomputation
         * saves are the handles the graph's copy nodes take the gradients of */
        if (!refill(s, i)) return false;
        wait_copies(s, u);
        swap(u, true);
        u->recompute = true;
        return true;
    }
    if (u->swapped) return true; /* another module of the unit started it */
    bool ok = fetch(s, i, false);
    for (int j = i + 1; ok && j < s->n && j <= i + s->o.prefetch; j++) ok = fetch(s, j, true);
    if (!ok) {
        tsi_ws_reset(s);
        return false;
    }
    wait_copies(s, u);
    swap(u, true);
    return true;
}

ts_status tsi_ws_unit_pre(ts_module *m, ts_tensor *x, void *ctx) {
    (void)m, (void)x;
    sunit *u = ctx;
    return unit_start(u->s, u->index) ? TS_OK : ts_error();
}

/* After the unit's forward: its copies go (kept, memory freed, when a backward will need them:
 * then each copy taking a gradient gets a hook noting its backward done, and the output a
 * pre-backward hook bringing them back before it). */
static bool unit_finish(stream *s, int i, ts_tensor **y) {
    const bool keep = ts_grad_enabled() && *y && ts_requires_grad(*y);
    sunit *u = &s->u[i];
    if (u->recompute) { /* the copies stay for the backward under way, its hooks set already */
        u->recompute = false;
        return copy_back(u);
    }
    if (!release_after_forward(s, u, keep)) {
        tsi_ws_drop(s, u);
        return false;
    }
    if (!keep) return true;
    u->n_grad = 0;
    bool ok = true;
    for (int k = 0; k < u->n && ok; k++) {
        ts_tensor *d = u->e[k].d;
        if (!d->grad_fn) continue;
        ok = ts_register_tensor_hook(d, grad_done, ctx_of(s, i), NULL) > 0;
        u->n_grad += ok;
    }
    ts_tensor *a = ok ? tsi_pre_backward_hook(*y, pre_backward, ctx_of(s, i)) : NULL;
    if (!a) {
        tsi_ws_drop(s, u);
        return false;
    }
    *y = a;
    return true;
}

ts_tensor *tsi_ws_unit_post(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    sunit *u = ctx;
    if (!unit_finish(u->s, u->index, &y)) {
        tsi_ws_reset(u->s);
        return NULL;
    }
    return y;
}

/* the root's hooks: a new forward starts from nothing resident; at its end the last unit (a
 * GPT's final norm and the tied head's weight, used by the root itself) finishes and whatever a
 * failed unit left behind goes */
ts_status tsi_ws_root_pre(ts_module *m, ts_tensor *x, void *ctx) {
    (void)m, (void)x;
    stream *s = ctx;
    tsi_ws_reset(s);
    /* a tensor replaced in its module since (ts_module_param, a load that replaces) would be
     * neither streamed nor on the device */
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->u[i].n; k++) {
            const entry *e = &s->u[i].e[k];
            const tsi_named *l = e->param ? &e->m->impl->params : &e->m->impl->buffers;
            if (e->slot >= l->n || l->items[e->slot] != e->h)
                return tsi_error_set(TS_ERR_STATE,
                                     "%s: a parameter or buffer of %s was replaced after "
                                     "ts_module_stream; ts_module_unstream the model, change it, "
                                     "and stream it again",
                                     OP, e->m->type_name);
        }
    return TS_OK;
}

ts_tensor *tsi_ws_root_post(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x;
    stream *s = ctx;
    if (!unit_finish(s, s->n - 1, &y)) y = NULL;
    for (int i = 0; i < s->n; i++)
        if (s->u[i].swapped || (s->u[i].resident && !s->u[i].keep)) tsi_ws_drop(s, &s->u[i]);
    if (!y) tsi_ws_reset(s);
    return y;
}
