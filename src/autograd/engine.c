/* engine.c — the backward engine: topological order over the graph, gradient accumulation into
 * leaves on their own device and dtype, retain_graph, anomaly detection; gradients captured for
 * chosen inputs (torch.autograd.grad) or accumulated into them only (backward(inputs=)), with only
 * the part of the graph that leads to them run; create_graph (double_backward.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/double_backward.h"
#include "autograd/leaf_hooks.h"
#include "backend/complex_view.h"
#include "backend/env_config.h"
#include "core/grad_mode.h"
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

/* One backward pass: what it delivers where. */
typedef struct pass_ctx {
    ts_tensor *const *inputs; /* [n_inputs]: the only tensors that receive (0: every leaf) */
    int n_inputs;
    ts_tensor **captured; /* [n_inputs]: torch.autograd.grad's results; NULL: into .grad */
    bool create_graph;
    uint64_t pass;
} pass_ctx;

/* ts_node.pass_flags: REACH: popped in this pass (leads to an input, or is the grad_fn of one);
 * RUN: its backward runs (an edge into a receiving leaf, or into a node that REACHes); QUEUED:
 * scratch for the order. */
enum { PASS_REACH = 1, PASS_RUN = 2, PASS_QUEUED = 4 };

static int input_index(const pass_ctx *p, const ts_tensor *t) {
    for (int k = 0; k < p->n_inputs; k++)
        if (p->inputs[k] == t) return k;
    return -1;
}

/* a leaf whose .grad this pass adds to (post-accumulate hooks count its gradients) */
static bool leaf_receives(const pass_ctx *p, const ts_tensor *leaf) {
    return !p->captured && (p->n_inputs == 0 || input_index(p, leaf) >= 0);
}

/* Adds g (a reference the engine holds; consumed) into a leaf's .grad on the leaf's dtype. Under
 * create_graph out of place, keeping g's graph (PyTorch's AccumulateGrad with grad mode on). */
static void accumulate_leaf(ts_tensor *leaf, ts_tensor *g, bool create_graph) {
    if (!(g = tsi_leaf_hooks_apply(leaf, g))) return;
    if (g->dtype != leaf->dtype) {
        ts_tensor *c = tsi_cast("backward", g, leaf->dtype);
        ts_release(g);
        if (!c) return;
        g = c;
    }
    if (create_graph) {
        ts_scope_begin();
        ts_tensor *sum = leaf->grad ? ts_add(leaf->grad, g) : ts_clone(g);
        ts_retain(sum);
        ts_scope_end();
        ts_release(g);
        if (!sum) return;
        ts_release(leaf->grad);
        leaf->grad = sum;
        return;
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

/* *slot += g out of place (consumes g; *slot holds a reference) */
static void add_into(ts_tensor **slot, ts_tensor *g) {
    ts_tensor *old = *slot;
    if (!old) {
        *slot = g;
        return;
    }
    ts_scope_begin(); /* the engine holds the sum whatever scope the user has open */
    *slot = ts_retain(ts_add(old, g));
    ts_scope_end();
    ts_release(old);
    ts_release(g);
}

static void accumulate_node(ts_node *n, int nr, ts_tensor *g) { add_into(&n->grad_acc[nr], g); }

/* backward(inputs=) on a tensor made by a recorded op: its .grad gets the gradient (a copy) */
static void accumulate_nonleaf(ts_tensor *t, ts_tensor *g) {
    ts_scope_begin();
    ts_tensor *c = t->grad ? ts_add(t->grad, g) : ts_clone(g);
    ts_retain(c);
    ts_scope_end();
    if (!c) return;
    ts_release(t->grad);
    t->grad = c;
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

/* Every node reachable from the roots, with deps = number of edges into it from reachable nodes.
 */
static bool collect(ts_node *const *roots, int n_roots, uint64_t pass, node_list *all) {
    node_list stack = {0};
    bool ok = true;
    for (int r = 0; r < n_roots && ok; r++) {
        if (!roots[r] || roots[r]->visit == pass) continue;
        roots[r]->visit = pass;
        roots[r]->deps = 0;
        roots[r]->pass_flags = 0;
        ok = list_push(&stack, roots[r]) && list_push(all, roots[r]);
    }
    while (ok && stack.n) {
        ts_node *n = stack.v[--stack.n];
        for (int i = 0; i < n->n_in && ok; i++) {
            ts_node *next = n->next[i].fn;
            if (!next) continue;
            if (next->visit != pass) {
                next->visit = pass;
                next->deps = 0;
                next->pass_flags = 0;
                ok = list_push(&stack, next) && list_push(all, next);
            }
            next->deps++;
        }
    }
    free(stack.v);
    if (!ok) tsi_error_set(TS_ERR_OOM, "backward: out of host memory walking the graph");
    return ok;
}

/* The roots that no other reachable node feeds, once each, into ready (sized for every node). */
static void push_ready_roots(ts_node *const *roots, int n_roots, node_list *ready) {
    for (int r = 0; r < n_roots; r++) {
        ts_node *n = roots[r];
        if (!n || n->deps != 0 || (n->pass_flags & PASS_QUEUED)) continue;
        n->pass_flags |= PASS_QUEUED;
        list_push(ready, n);
    }
    for (size_t i = 0; i < ready->n; i++) ready->v[i]->pass_flags &= (uint8_t)~PASS_QUEUED;
}

/* Marks REACH / RUN (every node both without inputs). With inputs: walks a topological order
 * backwards, so each node's successors are marked before it. */
static bool mark_needed(const pass_ctx *p, ts_node *const *roots, int n_roots, node_list *all) {
    if (p->n_inputs == 0) {
        for (size_t i = 0; i < all->n; i++) all->v[i]->pass_flags = PASS_REACH | PASS_RUN;
        return true;
    }
    node_list order = {.v = malloc((all->n ? all->n : 1) * sizeof(ts_node *)), .cap = all->n};
    if (!order.v) return tsi_error_set(TS_ERR_OOM, "backward: out of host memory"), false;
    push_ready_roots(roots, n_roots, &order);
    for (size_t head = 0; head < order.n; head++) {
        ts_node *n = order.v[head];
        for (int i = 0; i < n->n_in; i++)
            if (n->next[i].fn && --n->next[i].fn->deps == 0) list_push(&order, n->next[i].fn);
    }
    for (size_t i = 0; i < all->n; i++) all->v[i]->deps = 0; /* counted again for the run */
    for (size_t i = 0; i < all->n; i++)
        for (int k = 0; k < all->v[i]->n_in; k++)
            if (all->v[i]->next[k].fn) all->v[i]->next[k].fn->deps++;
    for (size_t i = order.n; i-- > 0;) {
        ts_node *n = order.v[i];
        uint8_t f = 0;
        for (int k = 0; k < n->n_in; k++) {
            const tsi_edge *e = &n->next[k];
            if ((e->leaf && input_index(p, e->leaf) >= 0) ||
                (e->fn && (e->fn->pass_flags & PASS_REACH)))
                f = PASS_REACH | PASS_RUN;
        }
        for (int k = 0; k < p->n_inputs; k++)
            if (p->inputs[k]->grad_fn == n) f |= PASS_REACH;
        n->pass_flags = f;
    }
    free(order.v);
    return true;
}

/* Post-accumulate hooks: every edge of a running node into a receiving leaf is expected. */
static void expect_leaf_gradients(const pass_ctx *p, const node_list *all) {
    for (size_t i = 0; i < all->n; i++) {
        const ts_node *n = all->v[i];
        if (!(n->pass_flags & PASS_RUN)) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->next[k].leaf && leaf_receives(p, n->next[k].leaf))
                tsi_hooks_expect(n->next[k].leaf, p->pass);
    }
}

/* A node's turn: the gradients of inputs that are its outputs are complete now. */
static void capture_outputs(const pass_ctx *p, ts_node *n) {
    for (int k = 0; k < p->n_inputs; k++) {
        ts_tensor *t = p->inputs[k], *g;
        if (t->grad_fn != n || !(g = n->grad_acc[t->output_nr])) continue;
        if (p->captured)
            add_into(&p->captured[k], ts_retain(g));
        else
            accumulate_nonleaf(t, g);
    }
}

/* A gradient arriving at a leaf: captured, accumulated, or dropped (not an input). Consumes g.
 * False when a hook failed. */
static bool deliver_leaf(const pass_ctx *p, ts_tensor *leaf, ts_tensor *g) {
    const int k = input_index(p, leaf);
    const ts_status before = ts_error();
    if (p->captured) { /* the leaf's hooks run once on the sum (ts_autograd_grad) */
        if (k >= 0)
            add_into(&p->captured[k], g);
        else
            ts_release(g);
    } else if (p->n_inputs && k < 0) {
        ts_release(g);
    } else {
        /* a leaf with hooks on its gradient sums what the pass brings it first: the hooks run
         * once, on the sum, as PyTorch's AccumulateGrad does */
        if ((g = tsi_leaf_hooks_gather(leaf, p->pass, g)))
            accumulate_leaf(leaf, g, p->create_graph);
        tsi_hooks_arrived(leaf, p->pass);
    }
    return ts_error() == before;
}

static bool grad_is_finite(ts_tensor *g) {
    if (!tsi_is_float(g->dtype)) return true;
    ts_no_grad_begin();
    ts_scope_begin();
    double s = ts_item(ts_sum(ts_to_dtype(g, TS_F64)));
    ts_scope_end();
    ts_no_grad_end();
    return isfinite(s);
}

static bool run_node(const pass_ctx *p, ts_node *n, bool anomaly) {
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
    /* under create_graph, a backward that is not its own derivative hands out gradients that say
     * so when differentiated (their values are the same) */
    if (p->create_graph && !tsi_node_twice(n) && ts_error() == before)
        for (int j = 0; j < n->n_in; j++)
            if (grad_in[j]) grad_in[j] = tsi_delayed_error(n, n->grad_acc, grad_in[j]);
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
            if (ok && e->leaf && leaf_receives(p, e->leaf)) {
                ts_tensor *sum = tsi_leaf_hooks_gather(e->leaf, p->pass, NULL);
                if (sum) accumulate_leaf(e->leaf, sum, p->create_graph);
                tsi_hooks_arrived(e->leaf, p->pass);
            }
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
            ts_tensor *c;
            if (p->create_graph) { /* a cast that keeps the graph */
                ts_scope_begin();
                c = ts_retain(ts_to_dtype(g, n->in_dtype[j]));
                ts_scope_end();
            } else {
                c = tsi_cast("backward", g, n->in_dtype[j]);
            }
            ts_release(g);
            if (!(g = c)) {
                ok = false;
                continue;
            }
        }
        if (e->leaf)
            ok = deliver_leaf(p, e->leaf, g) && ok;
        else
            accumulate_node(e->fn, e->output_nr, g);
    }
    if (grad_in != grad_in_small) free(grad_in);
    return ok;
}

/* The gradient that starts the pass at t (a reference), checked against t; NULL + error. */
static ts_tensor *seed_for(ts_tensor *t, ts_tensor *grad, int i, bool create_graph) {
    if (!t->requires_grad) {
        tsi_error_set(TS_ERR_STATE,
                      "backward: element %d of tensors does not require grad and does not have a "
                      "grad_fn (%s)",
                      i, tsi_desc(t));
        return NULL;
    }
    if (!grad) {
        if (tsi_is_complex(t->dtype)) {
            tsi_error_set(TS_ERR_DTYPE,
                          "backward: grad can be implicitly created only for real scalar "
                          "outputs, got %s",
                          tsi_desc(t));
            return NULL;
        }
        if (tsi_numel(t->shape) != 1) {
            tsi_error_set(TS_ERR_SHAPE,
                          "backward: grad can be implicitly created only for scalar "
                          "outputs, got %s",
                          tsi_desc(t));
            return NULL;
        }
        ts_scope_begin();
        ts_tensor *g = ts_retain(ts_ones_like(t));
        ts_scope_end();
        return g;
    }
    if (!tsi_check_input("backward", grad, "gradient")) return NULL;
    if (grad->shape.ndim != t->shape.ndim ||
        memcmp(grad->shape.dims, t->shape.dims, sizeof(int64_t) * (size_t)t->shape.ndim)) {
        tsi_error_set(TS_ERR_SHAPE, "backward: gradient %s does not match the tensor %s",
                      tsi_desc(grad), tsi_desc(t));
        return NULL;
    }
    if (tsi_is_complex(grad->dtype) != tsi_is_complex(t->dtype)) { /* a cast would lose a part */
        tsi_error_set(TS_ERR_DTYPE,
                      "backward: For complex Tensors, both grad_output and output are required to "
                      "have the same dtype. Mismatch in dtype: grad_output[%d] has a dtype of %s "
                      "and output[%d] has a dtype of %s.",
                      i, tsi_torch_scalar_name(grad->dtype), i, tsi_torch_scalar_name(t->dtype));
        return NULL;
    }
    if (!tsi_device_eq(tsi_device(grad), tsi_device(t))) {
        tsi_error_set(TS_ERR_DEVICE,
                      "backward: expected the gradient on %s like the tensor, but it is on %s",
                      ts_device_str(tsi_device(t)), ts_device_str(tsi_device(grad)));
        return NULL;
    }
    if (create_graph) { /* the seed may itself require grad: keep its graph */
        ts_scope_begin();
        ts_tensor *g = ts_retain(ts_to_dtype(grad, t->dtype));
        ts_scope_end();
        return g;
    }
    return tsi_cast("backward", grad, t->dtype);
}

/* The pass over the graph from roots (node roots; leaf roots were delivered by the caller), with
 * their seeds already in the roots' grad_acc. */
static bool run_graph(const pass_ctx *p, ts_node *const *roots, int n_roots, bool retain_graph) {
    node_list all = {0}, ready = {0};
    bool ok = collect(roots, n_roots, p->pass, &all) && mark_needed(p, roots, n_roots, &all);
    /* the ready list never holds more than every node: sized now, its pushes cannot fail */
    if (ok && !(ready.v = malloc((all.n ? all.n : 1) * sizeof *ready.v))) {
        ok = false;
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory for %zu nodes", all.n);
    }
    if (ok) {
        ready.cap = all.n;
        expect_leaf_gradients(p, &all);
        push_ready_roots(roots, n_roots, &ready);
    }
    bool anomaly = anomaly_mode();
    while (ok && ready.n) {
        ts_node *n = ready.v[--ready.n];
        capture_outputs(p, n);
        if (!(n->pass_flags & PASS_RUN)) continue; /* leads to no input */
        ok = run_node(p, n, anomaly);
        /* what it saved is spent: freed now, not at the end of the pass (a checkpointed segment's
         * recomputation goes with its last node) */
        if (!retain_graph) {
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
    if (!ok || ts_error())
        for (size_t i = 0; i < all.n; i++)
            for (int k = 0; k < all.v[i]->n_in; k++)
                if (all.v[i]->next[k].leaf && leaf_receives(p, all.v[i]->next[k].leaf))
                    tsi_hooks_abandon(all.v[i]->next[k].leaf, p->pass);
    for (size_t i = 0; i < all.n; i++) {
        ts_node *n = all.v[i];
        for (int k = 0; k < n->n_out; k++) {
            ts_release(n->grad_acc[k]);
            n->grad_acc[k] = NULL;
        }
        if (!retain_graph && (n->pass_flags & PASS_RUN)) {
            tsi_node_release_saved(n);
            n->released = true;
        }
    }
    free(all.v);
    free(ready.v);
    return ok;
}

/* The checks and the pass shared by ts_backward_ex and ts_autograd_grad. */
static ts_status backward_pass(ts_tensor *const *outputs, ts_tensor *const *grad_outputs,
                               int n_outputs, pass_ctx *p, bool retain_graph) {
    ts_node *roots_small[8] = {0}, **roots = roots_small;
    ts_tensor *seeds_small[8] = {0}, **seeds = seeds_small;
    if (n_outputs > 8 && (!(roots = calloc((size_t)n_outputs, sizeof *roots)) ||
                          !(seeds = calloc((size_t)n_outputs, sizeof *seeds)))) {
        if (roots != roots_small) free(roots);
        return tsi_error_set(TS_ERR_OOM, "backward: out of host memory");
    }
    const ts_status before = ts_error();
    bool ok = true;
    for (int i = 0; i < n_outputs && ok; i++) {
        tsi_view_sync(outputs[i]); /* a view written through its base: the base's history */
        ok = tsi_check_input("backward", outputs[i], "tensors") &&
             (seeds[i] =
                  seed_for(outputs[i], grad_outputs ? grad_outputs[i] : NULL, i, p->create_graph));
    }
    /* backward functions run with grad mode off (on under create_graph, so they record), never
     * under autocast (they run in the dtypes of their forward ops: a backward called inside an
     * autocast region must not cast again) */
    int depth = tsi_grad_depth_swap(p->create_graph ? 0 : 1);
    bool create_before = tsi_create_graph_swap(p->create_graph);
    tsi_autocast_state autocast = tsi_autocast_state_get(), autocast_off = {0};
    tsi_autocast_state_set(&autocast_off);
    p->pass = atomic_fetch_add(&pass_counter, 1) + 1;
    for (int i = 0; i < n_outputs && ok; i++) {
        ts_tensor *t = outputs[i], *g = seeds[i];
        seeds[i] = NULL;
        if (t->grad_fn) {
            roots[i] = t->grad_fn;
            accumulate_node(t->grad_fn, t->output_nr, g);
        } else if (p->captured || leaf_receives(p, t)) { /* a leaf: its gradient is the seed */
            ok = deliver_leaf(p, t, g);
            if (ok && !p->captured) tsi_hooks_run(t);
        } else {
            ts_release(g);
        }
    }
    if (ok) ok = run_graph(p, roots, n_outputs, retain_graph) && ts_error() == before;
    for (int i = 0; i < n_outputs; i++) ts_release(seeds[i]);
    if (!ok)
        for (int i = 0; i < n_outputs; i++) /* seeds left in roots that never ran */
            if (roots[i])
                for (int k = 0; k < roots[i]->n_out; k++) {
                    ts_release(roots[i]->grad_acc[k]);
                    roots[i]->grad_acc[k] = NULL;
                }
    tsi_autocast_state_set(&autocast);
    tsi_create_graph_swap(create_before);
    tsi_grad_depth_swap(depth);
    if (roots != roots_small) free(roots);
    if (seeds != seeds_small) free(seeds);
    return ok ? TS_OK : (ts_error() ? ts_error() : TS_ERR_STATE);
}

/* The status is ts_error() as the pass ends (decision 0025: TS_OK only when nothing failed). */
ts_status ts_backward_ex(ts_tensor *t, ts_tensor *grad, ts_backward_opts o) {
    tsi_init();
    if (!tsi_check_input("backward", t, "tensor")) return ts_error();
    if (grad && !tsi_check_input("backward", grad, "gradient")) return ts_error();
    pass_ctx p = {0};
    backward_pass(&t, &grad, 1, &p, o.retain_graph);
    return ts_error();
}

ts_status ts_autograd_grad(ts_tensor *const *outputs, ts_tensor *const *grad_outputs, int n_outputs,
                           ts_tensor *const *inputs, int n_inputs, ts_grad_opts o,
                           ts_tensor **grads) {
    tsi_init();
    const char *op = "autograd_grad";
    if (n_outputs < 1 || !outputs)
        return tsi_error_set(TS_ERR_ARG, "%s: expected at least one output", op);
    if (n_inputs < 0 || (n_inputs > 0 && !inputs) || (!o.accumulate && (n_inputs == 0 || !grads)))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected inputs (and an array for their gradients unless "
                             "accumulating)",
                             op);
    if (grads && !o.accumulate)
        for (int k = 0; k < n_inputs; k++) grads[k] = NULL;
    for (int k = 0; k < n_inputs; k++) {
        if (!tsi_check_input(op, inputs[k], "inputs")) return ts_error();
        tsi_view_sync(inputs[k]);
        if (!inputs[k]->requires_grad)
            return tsi_error_set(TS_ERR_STATE,
                                 "%s: one of the differentiated Tensors (input %d, %s) does not "
                                 "require grad",
                                 op, k, tsi_desc(inputs[k]));
    }
    ts_tensor *captured_small[8] = {0}, **captured = NULL;
    if (!o.accumulate) {
        captured = captured_small;
        if (n_inputs > 8 && !(captured = calloc((size_t)n_inputs, sizeof *captured)))
            return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    }
    pass_ctx p = {.inputs = inputs,
                  .n_inputs = n_inputs,
                  .captured = captured,
                  .create_graph = o.create_graph};
    /* the gradients' graph reaches back into this one: kept (PyTorch's default) */
    ts_status st =
        backward_pass(outputs, grad_outputs, n_outputs, &p, o.retain_graph || o.create_graph);
    for (int k = 0; st == TS_OK && captured && k < n_inputs; k++)
        if (!captured[k] && !o.allow_unused)
            st = tsi_error_set(TS_ERR_ARG,
                               "%s: one of the differentiated Tensors (input %d) appears to not "
                               "have been used in the graph. Set allow_unused=True if this is the "
                               "desired behavior.",
                               op, k);
    for (int k = 0; st == TS_OK && captured && k < n_inputs; k++)
        if (captured[k] && !inputs[k]->grad_fn &&
            !(captured[k] = tsi_leaf_hooks_apply(inputs[k], captured[k])))
            st = ts_error() ? ts_error() : TS_ERR_STATE;
    for (int k = 0; captured && k < n_inputs; k++) {
        if (st == TS_OK)
            grads[k] = tsi_own(captured[k]);
        else
            ts_release(captured[k]);
    }
    if (captured && captured != captured_small) free(captured);
    return st;
}

ts_status ts_backward(ts_tensor *loss) { return ts_backward_ex(loss, NULL, (ts_backward_opts){0}); }
ts_status ts_backward_with(ts_tensor *t, ts_tensor *grad) {
    if (!tsi_check_input("backward", grad, "gradient")) return ts_error();
    return ts_backward_ex(t, grad, (ts_backward_opts){0});
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

const char *ts_grad_fn_name(ts_tensor *t) {
    tsi_view_sync(t);
    return t && t->grad_fn ? t->grad_fn->name : NULL;
}
