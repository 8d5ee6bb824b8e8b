/* engine.c — the backward engine: topological order over the graph, gradient accumulation into
 * leaves on their own device and dtype, retain_graph, anomaly detection. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "backend/complex_view.h"
#include "backend/env_config.h"
#include "core/profiler_hooks.h"

static atomic_bool anomaly_on, anomaly_env_read;
static atomic_uint_fast64_t pass_counter;

void ts_detect_anomaly(bool on) {
    atomic_store(&anomaly_env_read, true);
    atomic_store(&anomaly_on, on);
}

static bool anomaly_mode(void) {
    if (!atomic_exchange(&anomaly_env_read, true)) {
        if (tsi_env_on(TSI_ENV_DETECT_ANOMALY)) atomic_store(&anomaly_on, true);
    }
    return atomic_load(&anomaly_on);
}

ts_tensor *tsi_sum_to(ts_tensor *g, ts_shape shape) {
    if (!g) return NULL;
    if (g->shape.ndim == shape.ndim &&
        memcmp(g->shape.dims, shape.dims, sizeof(int64_t) * (size_t)shape.ndim) == 0)
        return tsi_own(ts_retain(g));
    ts_dims dims = {.n = 0};
    int lead = g->shape.ndim - shape.ndim;
    for (int i = 0; i < g->shape.ndim; i++) {
        int j = i - lead;
        if (j < 0 || (shape.dims[j] == 1 && g->shape.dims[i] != 1)) dims.d[dims.n++] = i;
    }
    ts_scope_begin();
    ts_tensor *s = dims.n ? ts_sum_dims(g, dims, true) : g;
    ts_tensor *r = ts_keep(ts_reshape(s, shape));
    ts_scope_end();
    return r;
}

static bool grad_is_finite(ts_tensor *g) {
    if (!tsi_is_float(g->dtype)) return true;
    ts_scope_begin();
    double s = ts_item(ts_sum(ts_to_dtype(g, TS_F64)));
    ts_scope_end();
    return isfinite(s);
}

/* Adds g (a reference the engine holds; consumed) into a leaf's .grad on the leaf's dtype. */
static void accumulate_leaf(ts_tensor *leaf, ts_tensor *g) {
    if (g->dtype != leaf->dtype) {
        ts_tensor *c = tsi_cast("backward", g, leaf->dtype);
        ts_release(g);
        if (!c) return;
        g = c;
    }
    if (!leaf->grad) {
        /* take the tensor when nobody else can see it, else keep a private copy; in the leaf's
         * layout (channels_last for a leaf that prefers it, as PyTorch's AccumulateGrad keeps a
         * dense parameter's strides), so that the grad and its leaf share one element order */
        const bool cl = tsi_prefers_channels_last(leaf);
        bool exclusive = atomic_load(&g->refs) == 1 && atomic_load(&g->storage->refs) == 1 &&
                         (cl ? tsi_is_channels_last(g) : tsi_is_contiguous(g)) && !g->requires_grad;
        if (exclusive) {
            leaf->grad = g;
        } else {
            leaf->grad = cl ? tsi_channels_last("backward", g) : tsi_contiguous("backward", g);
            if (leaf->grad == g) { /* dense but shared: copy */
                ts_release(leaf->grad);
                leaf->grad = tsi_new_like("backward", g->shape, g->dtype, tsi_device(g), leaf);
                if (leaf->grad) {
                    ts_kview dv = tsi_kview(leaf->grad), sv = tsi_kview(g);
                    tsi_be(g)->copy(tsi_be(g), tsi_dev_index(g), &dv, &sv);
                }
            }
            ts_release(g);
        }
        return;
    }
    ts_kview dv = tsi_kview(leaf->grad), bv = tsi_kview(g);
    const ts_backend *be = tsi_be(g);
    if (tsi_is_complex(g->dtype)) { /* the real parts, then the imaginary ones */
        for (int part = 0; part < 2; part++) {
            ts_kview d = tsi_kview_part(&dv, part), b = tsi_kview_part(&bv, part);
            be->binary(be, tsi_dev_index(g), TS_B_ADD, &d, &d, &b);
        }
    } else {
        be->binary(be, tsi_dev_index(g), TS_B_ADD, &dv, &dv, &bv);
    }
    ts_release(g);
}

static void accumulate_node(ts_node *n, int nr, ts_tensor *g) {
    ts_tensor *old = n->grad_acc[nr];
    if (!old) {
        n->grad_acc[nr] = g;
        return;
    }
    ts_scope_begin(); /* the engine holds the sum whatever scope the user has open */
    n->grad_acc[nr] = ts_retain(ts_add(old, g));
    ts_scope_end();
    ts_release(old);
    ts_release(g);
}

typedef struct node_list {
    ts_node **v;
    size_t n, cap;
} node_list;

static bool list_push(node_list *l, ts_node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ts_node **v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

/* Every node reachable from root, with deps = number of edges into it from reachable nodes. */
static bool collect(ts_node *root, uint64_t pass, node_list *all) {
    node_list stack = {0};
    bool ok = list_push(&stack, root) && list_push(all, root);
    root->visit = pass;
    root->deps = 0;
    while (ok && stack.n) {
        ts_node *n = stack.v[--stack.n];
        for (int i = 0; i < n->n_in && ok; i++) {
            ts_node *next = n->next[i].fn;
            if (n->next[i].leaf) tsi_hooks_expect(n->next[i].leaf, pass);
            if (!next) continue;
            if (next->visit != pass) {
                next->visit = pass;
                next->deps = 0;
                ok = list_push(&stack, next) && list_push(all, next);
            }
            next->deps++;
        }
    }
    free(stack.v);
    if (!ok) tsi_error_set(TS_ERR_OOM, "backward: out of host memory walking the graph");
    return ok;
}

static bool run_node(ts_node *n, bool anomaly, uint64_t pass) {
    ts_tensor *grad_in_small[8] = {0}, **grad_in = grad_in_small;
    if (n->n_in > 8 && !(grad_in = calloc((size_t)n->n_in, sizeof *grad_in)))
        return tsi_error_set(TS_ERR_OOM, "backward: out of host memory"), false;
    if (n->released) {
        tsi_node_saved(n, 0); /* records the "backward through the graph a second time" error */
        if (!ts_error())
            tsi_error_set(TS_ERR_STATE,
                          "backward: the graph of %s was already freed; use "
                          "retain_graph=true to backward through it twice",
                          n->name);
        if (grad_in != grad_in_small) free(grad_in);
        return false;
    }
    ts_status before = ts_error();
    int prof = -1;
    if (atomic_load_explicit(&tsi_placement_on, memory_order_relaxed))
        prof = tsi_prof_span_begin(TS_PROF_BACKWARD, n->name,
                                   n->n_in > 0 ? n->in_device[0] : ts_cpu(), n);
    ts_scope_begin();
    n->backward(n, n->grad_acc, grad_in);
    for (int j = 0; j < n->n_in; j++) ts_retain(grad_in[j]);
    ts_scope_end();
    if (prof >= 0) tsi_prof_span_end(prof);
    /* the incoming gradients are spent: dropping them now lets a leaf adopt a gradient that is a
     * view of one (a transpose's backward) without a copy */
    for (int i = 0; i < n->n_out; i++) {
        ts_release(n->grad_acc[i]);
        n->grad_acc[i] = NULL;
    }
    bool ok = ts_error() == before || before != TS_OK;
    for (int j = 0; j < n->n_in; j++) {
        ts_tensor *g = grad_in[j];
        tsi_edge *e = &n->next[j];
        if (!g) {
            if (ok && e->leaf) tsi_hooks_arrived(e->leaf, pass);
            continue;
        }
        if (!ok || (!e->fn && !e->leaf)) {
            ts_release(g);
            continue;
        }
        if (!tsi_device_eq(tsi_device(g), n->in_device[j])) {
            ok = false;
            tsi_error_set(TS_ERR_DEVICE,
                          "backward: %s produced a gradient on %s for an input on %s", n->name,
                          ts_device_str(tsi_device(g)), ts_device_str(n->in_device[j]));
            ts_release(g);
            continue;
        }
        if (anomaly && !grad_is_finite(g)) {
            ok = false;
            tsi_error_set(TS_ERR_STATE,
                          "backward: anomaly detected: function '%s' (the backward of %s) returned "
                          "nan or inf values in its %dth output",
                          n->name, n->op, j);
            ts_release(g);
            continue;
        }
        if (g->dtype != n->in_dtype[j]) {
            ts_tensor *c = tsi_cast("backward", g, n->in_dtype[j]);
            ts_release(g);
            if (!(g = c)) {
                ok = false;
                continue;
            }
        }
        if (e->leaf) {
            accumulate_leaf(e->leaf, g);
            ts_status pending = ts_error();
            tsi_hooks_arrived(e->leaf, pass);
            if (pending == TS_OK && ts_error() != TS_OK) ok = false; /* a hook failed */
        } else {
            accumulate_node(e->fn, e->output_nr, g);
        }
    }
    if (grad_in != grad_in_small) free(grad_in);
    return ok;
}

void ts_backward_ex(ts_tensor *t, ts_tensor *grad, ts_backward_opts o) {
    tsi_init();
    if (!tsi_check_input("backward", t, "tensor")) return;
    if (!t->requires_grad) {
        tsi_error_set(TS_ERR_STATE,
                      "backward: element 0 of tensors does not require grad and "
                      "does not have a grad_fn (%s)",
                      tsi_desc(t));
        return;
    }
    ts_tensor *g;
    if (!grad) {
        if (tsi_is_complex(t->dtype)) {
            tsi_error_set(TS_ERR_DTYPE,
                          "backward: grad can be implicitly created only for real scalar "
                          "outputs, got %s",
                          tsi_desc(t));
            return;
        }
        if (tsi_numel(t->shape) != 1) {
            tsi_error_set(TS_ERR_SHAPE,
                          "backward: grad can be implicitly created only for scalar "
                          "outputs, got %s",
                          tsi_desc(t));
            return;
        }
        ts_scope_begin();
        g = ts_retain(ts_ones_like(t));
        ts_scope_end();
    } else {
        if (grad->shape.ndim != t->shape.ndim ||
            memcmp(grad->shape.dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.ndim)) {
            tsi_error_set(TS_ERR_SHAPE, "backward: gradient %s does not match the tensor %s",
                          tsi_desc(grad), tsi_desc(t));
            return;
        }
        if (!tsi_device_eq(tsi_device(grad), tsi_device(t))) {
            tsi_error_set(TS_ERR_DEVICE,
                          "backward: expected the gradient on %s like the tensor, but it is on %s",
                          ts_device_str(tsi_device(t)), ts_device_str(tsi_device(grad)));
            return;
        }
        g = tsi_cast("backward", grad, t->dtype);
    }
    if (!g) return;
    if (!t->grad_fn) { /* a leaf: its gradient is the seed */
        accumulate_leaf(t, g);
        tsi_hooks_run(t);
        return;
    }
    ts_no_grad_begin();
    /* backward ops run in the dtypes of their forward ops, never under autocast (a backward
     * called inside a region must not cast again) */
    tsi_autocast_state autocast = tsi_autocast_state_get(), autocast_off = {0};
    tsi_autocast_state_set(&autocast_off);
    uint64_t pass = atomic_fetch_add(&pass_counter, 1) + 1;
    node_list all = {0}, ready = {0};
    ts_node *root = t->grad_fn;
    bool ok = collect(root, pass, &all);
    /* the ready list never holds more than every node: sized now, its pushes cannot fail */
    if (ok && !(ready.v = malloc(all.n * sizeof *ready.v))) {
        ok = false;
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory for %zu nodes", all.n);
    }
    if (ok) {
        ready.cap = all.n;
        accumulate_node(root, t->output_nr, g);
        g = NULL;
        list_push(&ready, root);
    }
    bool anomaly = anomaly_mode();
    while (ok && ready.n) {
        ts_node *n = ready.v[--ready.n];
        ok = run_node(n, anomaly, pass);
        /* what it saved is spent: freed now, not at the end of the pass (a checkpointed segment's
         * recomputation goes with its last node) */
        if (!o.retain_graph) {
            tsi_node_release_saved(n);
            n->released = true;
        }
        for (int i = 0; i < n->n_out; i++) {
            ts_release(n->grad_acc[i]);
            n->grad_acc[i] = NULL;
        }
        for (int i = 0; i < n->n_in && ok; i++) {
            ts_node *next = n->next[i].fn;
            if (next && --next->deps == 0) list_push(&ready, next);
        }
    }
    ts_release(g);
    if (!ok || ts_error())
        for (size_t i = 0; i < all.n; i++)
            for (int k = 0; k < all.v[i]->n_in; k++)
                if (all.v[i]->next[k].leaf) tsi_hooks_abandon(all.v[i]->next[k].leaf, pass);
    for (size_t i = 0; i < all.n; i++) {
        ts_node *n = all.v[i];
        for (int k = 0; k < n->n_out; k++) {
            ts_release(n->grad_acc[k]);
            n->grad_acc[k] = NULL;
        }
        if (!o.retain_graph) {
            tsi_node_release_saved(n);
            n->released = true;
        }
    }
    free(all.v);
    free(ready.v);
    tsi_autocast_state_set(&autocast);
    ts_no_grad_end();
}

void ts_backward(ts_tensor *loss) { ts_backward_ex(loss, NULL, (ts_backward_opts){0}); }
void ts_backward_with(ts_tensor *t, ts_tensor *grad) {
    if (!tsi_check_input("backward", grad, "gradient")) return;
    ts_backward_ex(t, grad, (ts_backward_opts){0});
}

ts_status ts_set_grad(ts_tensor *t, ts_tensor *grad) {
    if (!tsi_check_input("set_grad", t, "tensor")) return ts_error();
    if (grad) {
        if (!tsi_device_eq(tsi_device(grad), tsi_device(t)) || grad->dtype != t->dtype ||
            grad->shape.ndim != t->shape.ndim ||
            memcmp(grad->shape.dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.ndim))
            return tsi_error_set(TS_ERR_ARG,
                                 "set_grad: assigned grad %s does not match the tensor %s (shape, "
                                 "dtype and device must agree)",
                                 tsi_desc(grad), tsi_desc(t));
        ts_retain(grad);
    }
    ts_release(t->grad);
    t->grad = grad;
    return TS_OK;
}

ts_tensor *ts_detach(ts_tensor *t) {
    if (!tsi_check_input("detach", t, "tensor")) return NULL;
    return tsi_own(tsi_view_of(t, t->shape, t->strides, t->offset));
}

const char *ts_grad_fn_name(ts_tensor *t) { return t && t->grad_fn ? t->grad_fn->name : NULL; }
