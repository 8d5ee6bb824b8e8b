/* trace.c — the op trace of one forward (ONNX export): records, values, the tensor -> value map.
 * Every tensor the trace meets is retained, so no address is reused while it runs. */
#include <stdlib.h>
#include <string.h>

#include "autograd/trace.h"
#include "ops/elementwise.h" /* tsi_ew_clone */

_Thread_local tsi_tracer *tsi_trace_active;

static size_t hash_ptr(const void *p) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

int tsi_trace_lookup(const tsi_tracer *tr, const ts_tensor *t) {
    if (!tr->cap_map) return -1;
    for (size_t i = hash_ptr(t) & (size_t)(tr->cap_map - 1);;
         i = (i + 1) & (size_t)(tr->cap_map - 1)) {
        if (!tr->keys[i]) return -1;
        if (tr->keys[i] == t) return tr->slots[i];
    }
}

static bool fail(tsi_tracer *tr) {
    if (!tr->failed) tsi_error_set(TS_ERR_OOM, "onnx_export: out of host memory while tracing");
    tr->failed = true;
    return false;
}

/* Grows an array of *cap elements of size sz to hold n + 1. */
static bool reserve(tsi_tracer *tr, void **a, int *cap, int n, size_t sz) {
    if (n < *cap) return true;
    int nc = *cap ? 2 * *cap : 64;
    void *g = realloc(*a, (size_t)nc * sz);
    if (!g) return fail(tr);
    *a = g;
    *cap = nc;
    return true;
}

static void map_put_raw(ts_tensor **keys, int *slots, int cap, ts_tensor *t, int v) {
    size_t i = hash_ptr(t) & (size_t)(cap - 1);
    while (keys[i] && keys[i] != t) i = (i + 1) & (size_t)(cap - 1);
    keys[i] = t;
    slots[i] = v;
}

static bool map_put(tsi_tracer *tr, ts_tensor *t, int v) {
    if (2 * (tr->n_vals + 1) > tr->cap_map) { /* at most one key per value: half full at most */
        int nc = tr->cap_map ? 2 * tr->cap_map : 256;
        ts_tensor **k = calloc((size_t)nc, sizeof *k);
        int *s = malloc((size_t)nc * sizeof *s);
        if (!k || !s) {
            free(k);
            free(s);
            return fail(tr);
        }
        for (int i = 0; i < tr->cap_map; i++)
            if (tr->keys[i]) map_put_raw(k, s, nc, tr->keys[i], tr->slots[i]);
        free(tr->keys);
        free(tr->slots);
        tr->keys = k, tr->slots = s, tr->cap_map = nc;
    }
    map_put_raw(tr->keys, tr->slots, tr->cap_map, t, v);
    return true;
}

static int named_index(const tsi_tracer *tr, const ts_tensor *t) {
    for (int i = 0; i < tr->n_named; i++)
        if (tr->named[i] == t) return i;
    return -1;
}

/* A new value for t (made by record `producer`, or met from outside when -1). */
static int new_value(tsi_tracer *tr, ts_tensor *t, int producer) {
    if (!reserve(tr, (void **)&tr->vals, &tr->cap_vals, tr->n_vals, sizeof *tr->vals)) return -1;
    tsi_trace_value v = {.t = t,
                         .key = t,
                         .producer = producer,
                         .named = -1,
                         .version = atomic_load(&t->storage->version)};
    if (producer < 0) {
        v.named = named_index(tr, t);
        /* a constant is copied now: an in-place op may change the tensor later in the forward */
        if (v.named < 0) {
            if (t->grad_fn) v.untraced = t->grad_fn->op;
            /* a quantized tensor is kept itself: no op writes one in place (the quantized gate,
             * core/quant_gate.c, lists none), and a copy would have to pass that gate */
            if (!tsi_is_quantized(t->dtype) && !(v.t = tsi_ew_clone("onnx_export", t)))
                return fail(tr), -1;
        }
    }
    if (!map_put(tr, t, tr->n_vals)) {
        if (v.t != t) ts_release(v.t);
        return -1;
    }
    ts_retain(t);
    if (v.t == t) ts_retain(t);
    tr->vals[tr->n_vals] = v;
    return tr->n_vals++;
}

void tsi_trace_record(const char *op, ts_tensor *const *ins, int n_in, ts_tensor *out,
                      const int64_t *ip, int n_i, const double *fp, int n_f) {
    tsi_tracer *tr = tsi_trace_active;
    if (tr->failed) return;
    tsi_trace_active = NULL; /* what the trace itself runs is not traced */
    int *in = n_in ? malloc((size_t)n_in * sizeof *in) : NULL;
    tsi_trace_rec r = {.op = op, .n_in = n_in, .in = in, .stale_in = -1};
    bool ok = !n_in || in ? true : fail(tr);
    for (int k = 0; ok && k < n_in; k++) {
        ts_tensor *t = ins[k];
        int v = t ? tsi_trace_lookup(tr, t) : -1;
        if (t && v < 0) v = new_value(tr, t, -1);
        ok = !t || v >= 0;
        in[k] = v;
        /* changed in place since it was made, through another tensor on its storage: the graph
         * would read the old value (an in-place op's own destination, t == out, is that op) */
        if (ok && t && t != out && tr->vals[v].t == t &&
            tr->vals[v].version != atomic_load(&t->storage->version))
            r.stale_in = k;
    }
    ok = ok && reserve(tr, (void **)&tr->recs, &tr->cap_recs, tr->n_recs, sizeof *tr->recs);
    if (ok) {
        r.n_i = n_i < TSI_TRACE_MAX_I ? n_i : TSI_TRACE_MAX_I;
        r.n_f = n_f < TSI_TRACE_MAX_F ? n_f : TSI_TRACE_MAX_F;
        if (r.n_i) memcpy(r.i, ip, (size_t)r.n_i * sizeof *ip);
        if (r.n_f) memcpy(r.f, fp, (size_t)r.n_f * sizeof *fp);
        r.out = new_value(tr, out, tr->n_recs);
        ok = r.out >= 0;
    }
    if (ok)
        tr->recs[tr->n_recs++] = r;
    else
        free(in);
    tsi_trace_active = tr;
}

void tsi_trace_begin(tsi_tracer *tr, ts_tensor *const *named, int n_named) {
    tr->named = named;
    tr->n_named = n_named;
    tsi_trace_active = tr;
}

bool tsi_trace_end(tsi_tracer *tr) {
    if (tsi_trace_active == tr) tsi_trace_active = NULL;
    return !tr->failed;
}

void tsi_trace_free(tsi_tracer *tr) {
    if (!tr) return;
    if (tsi_trace_active == tr) tsi_trace_active = NULL;
    for (int i = 0; i < tr->n_recs; i++) free(tr->recs[i].in);
    for (int i = 0; i < tr->n_vals; i++) {
        ts_release(tr->vals[i].t);
        ts_release(tr->vals[i].key);
    }
    free(tr->recs);
    free(tr->vals);
    free(tr->keys);
    free(tr->slots);
    memset(tr, 0, sizeof *tr);
}
