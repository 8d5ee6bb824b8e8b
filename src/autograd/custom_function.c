/* custom_function.c — custom autograd functions (PyTorch's torch.autograd.Function): a node whose
 * backward is a caller's callback, wired to outputs the caller computed; and the read-only walk of
 * the graph that grad_fn.next_functions needs (ts_grad_fn_node, ts_node_next). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "tessera/custom_function.h"

static const char *const op_name = "custom_function";

/* ------------------------------------------------------------------ names
 * A node's name must outlive its ctx (a second backward names the freed node), so the names are
 * interned for the life of the process: one entry per distinct function name. */
typedef struct name_entry {
    struct name_entry *next;
    char s[];
} name_entry;

static name_entry *names;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *intern(const char *s) {
    const size_t len = strlen(s);
    pthread_mutex_lock(&names_lock);
    name_entry *e = names;
    while (e && strcmp(e->s, s) != 0) e = e->next;
    if (!e && (e = malloc(sizeof *e + len + 1))) {
        memcpy(e->s, s, len + 1);
        e->next = names;
        names = e;
    }
    pthread_mutex_unlock(&names_lock);
    return e ? e->s : NULL;
}

/* ------------------------------------------------------------------ the node */
typedef struct out_meta {
    ts_shape shape;
    ts_dtype dtype;
    ts_device device;
} out_meta;

typedef struct custom_ctx {
    ts_custom_backward_fn fn;
    void *user;
    void (*user_free)(void *);
    bool keep_undefined;
    int n_out;
    out_meta out[]; /* [n_out] for zeros in place of missing gradients */
} custom_ctx;

static void custom_ctx_free(void *p) {
    custom_ctx *c = p;
    if (c->user_free) c->user_free(c->user);
    free(c);
}

/* in_shape expands to g's shape (the gradient of a broadcast input): sum_to gives it back */
static bool expands_to(ts_shape in, ts_shape g) {
    if (in.ndim > g.ndim) return false;
    for (int i = 0; i < in.ndim; i++) {
        int64_t a = in.dims[in.ndim - 1 - i], b = g.dims[g.ndim - 1 - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

static bool same_shape(ts_shape a, ts_shape b) {
    return a.ndim == b.ndim && memcmp(a.dims, b.dims, sizeof(int64_t) * (size_t)a.ndim) == 0;
}

/* checks the callback's gradient for input j and sets gi[j] (shape summed to the input's) */
static bool take_grad(ts_node *n, int j, ts_tensor *g, ts_tensor **gi) {
    if (!tsi_device_eq(tsi_device(g), n->in_device[j])) {
        char want[32];
        snprintf(want, sizeof want, "%s", ts_device_str(n->in_device[j]));
        tsi_error_set(TS_ERR_DEVICE,
                      "%s: backward returned a gradient on %s for input %d, which is on %s",
                      n->name, ts_device_str(tsi_device(g)), j, want);
        return false;
    }
    if (same_shape(g->shape, n->in_shape[j])) {
        gi[j] = g;
        return true;
    }
    if (!expands_to(n->in_shape[j], g->shape)) {
        char want[128];
        snprintf(want, sizeof want, "%s", tsi_shape_str(n->in_shape[j]));
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: backward returned an invalid gradient at index %d - got %s but "
                      "expected shape compatible with %s",
                      n->name, j, tsi_shape_str(g->shape), want);
        return false;
    }
    gi[j] = tsi_sum_to(g, n->in_shape[j]);
    return gi[j] != NULL;
}

static void custom_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    custom_ctx *c = n->ctx;
    if (!c) {
        tsi_error_set(TS_ERR_STATE, "%s: the function's state was already freed", n->name);
        return;
    }
    ts_tensor *go_small[8] = {0}, **go = go_small, *res_small[8] = {0}, **res = res_small;
    if ((c->n_out > 8 && !(go = calloc((size_t)c->n_out, sizeof *go))) ||
        (n->n_in > 8 && !(res = calloc((size_t)n->n_in, sizeof *res)))) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", n->name);
        goto done;
    }
    for (int i = 0; i < c->n_out; i++) {
        go[i] = g[i];
        if (go[i] || c->keep_undefined) continue;
        const out_meta *m = &c->out[i];
        go[i] = ts_zeros(m->shape, (ts_opts){.dtype = m->dtype, .device = m->device});
        if (!go[i]) goto done;
    }
    ts_status before = ts_error();
    ts_status st = c->fn(c->user, go, c->n_out, res, n->n_in);
    if (st != TS_OK || ts_error() != before) {
        if (ts_error() == TS_OK)
            tsi_error_set(st != TS_OK ? st : TS_ERR_STATE, "%s: backward failed (status %d)",
                          n->name, (int)st);
        goto done;
    }
    for (int j = 0; j < n->n_in; j++)
        if (res[j] && tsi_node_needs(n, j) && !take_grad(n, j, res[j], gi)) break;
done:
    if (ts_error() != TS_OK)
        for (int j = 0; j < n->n_in; j++) gi[j] = NULL;
    if (go != go_small) free(go);
    if (res != res_small) free(res);
}

/* ------------------------------------------------------------------ apply */
static bool check_args(const ts_custom_function *f, ts_tensor *const *inputs, int n_inputs,
                       ts_tensor *const *outputs, int n_outputs, ts_tensor **results) {
    if (!f || !f->backward)
        return tsi_error_set(TS_ERR_ARG, "%s: the function or its backward is NULL", op_name),
               false;
    const char *name = f->name ? f->name : "CustomFunctionBackward";
    if (n_inputs < 0 || n_outputs < 1 || (n_inputs && !inputs) || !outputs || !results)
        return tsi_error_set(TS_ERR_ARG,
                             "%s (%s): bad arguments: %d inputs, %d outputs (at least one), "
                             "inputs/outputs/results arrays must not be NULL",
                             op_name, name, n_inputs, n_outputs),
               false;
    for (int i = 0; i < n_outputs; i++) {
        const bool dirty = f->output_flags && (f->output_flags[i] & TS_CUSTOM_OUT_DIRTY);
        if (!outputs[i] || !dirty) continue;
        bool found = false;
        for (int j = 0; j < n_inputs && !found; j++) found = inputs[j] == outputs[i];
        if (!found)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s (%s): output %d is marked dirty (modified in place) but is "
                                 "not one of the inputs",
                                 op_name, name, i),
                   false;
    }
    return true;
}

/* a dirty output: the input itself, rebased onto the node as an in-place op's result */
static bool check_dirty(const char *name, ts_tensor *t, int i) {
    if (!t->grad_fn && t->requires_grad)
        return tsi_error_set(TS_ERR_STATE,
                             "%s: output %d: a leaf Variable that requires grad has been used in "
                             "an in-place operation (%s, marked dirty)",
                             name, i, tsi_desc(t)),
               false;
    if (t->is_view)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "%s: output %d: a view (%s) marked dirty is not supported; modify "
                             "and return a clone of it instead",
                             name, i, tsi_desc(t)),
               false;
    return true;
}

ts_status ts_custom_function_apply(const ts_custom_function *f, ts_tensor *const *inputs,
                                   int n_inputs, ts_tensor *const *outputs, int n_outputs,
                                   ts_tensor **results) {
    tsi_init();
    if (results)
        for (int i = 0; i < n_outputs; i++) results[i] = NULL;
    void *user = f ? f->ctx : NULL;
    void (*user_free)(void *) = f ? f->ctx_free : NULL;
    custom_ctx *c = NULL;
    ts_node *n = NULL;
    if (!check_args(f, inputs, n_inputs, outputs, n_outputs, results)) goto fail;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && !tsi_check_input(op_name, inputs[i], "input")) goto fail;
    for (int i = 0; i < n_outputs; i++)
        if (!tsi_check_input(op_name, outputs[i], "output")) goto fail;
    if (!tsi_needs_graph(inputs, n_inputs)) {
        for (int i = 0; i < n_outputs; i++) results[i] = tsi_own(ts_retain(outputs[i]));
        if (user_free) user_free(user);
        return TS_OK;
    }
    const char *name = intern(f->name ? f->name : "CustomFunctionBackward");
    if (!name) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op_name);
        goto fail;
    }
    for (int i = 0; i < n_outputs; i++)
        if (f->output_flags && (f->output_flags[i] & TS_CUSTOM_OUT_DIRTY) &&
            !check_dirty(name, outputs[i], i))
            goto fail;
    c = malloc(sizeof *c + (size_t)n_outputs * sizeof(out_meta));
    if (!c || !(n = tsi_node_new(name, op_name, custom_backward, inputs, n_inputs, n_outputs, 0))) {
        if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", name);
        goto fail;
    }
    *c = (custom_ctx){.fn = f->backward,
                      .user = user,
                      .user_free = user_free,
                      .keep_undefined = f->keep_undefined_grads,
                      .n_out = n_outputs};
    for (int i = 0; i < n_outputs; i++)
        c->out[i] = (out_meta){outputs[i]->shape, outputs[i]->dtype, tsi_device(outputs[i])};
    n->ctx = c; /* the node owns user's ctx from here */
    n->ctx_free = custom_ctx_free;
    c = NULL;
    for (int i = 0; i < n_outputs; i++) {
        const unsigned flags = f->output_flags ? f->output_flags[i] : 0;
        ts_tensor *o = outputs[i];
        if (flags & TS_CUSTOM_OUT_DIRTY) {
            results[i] = ts_retain(o);
        } else {
            results[i] = tsi_view_of(o, o->shape, o->strides, o->offset);
            if (!results[i]) goto fail_results;
            results[i]->is_view = o->is_view;
        }
        if (!(flags & TS_CUSTOM_OUT_NON_DIFFERENTIABLE) && tsi_is_float(o->dtype))
            tsi_node_set_output(n, results[i], i);
    }
    tsi_node_release(n); /* the results own it (freed now if every output is non-differentiable) */
    for (int i = 0; i < n_outputs; i++) results[i] = tsi_own(results[i]);
    return TS_OK;
fail_results:
    if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", name);
    /* a dirty input already rebased keeps the node (its history is the node's now); the others
     * are dropped, and the node frees the ctx with itself */
    for (int i = 0; i < n_outputs; i++) {
        ts_release(results[i]);
        results[i] = NULL;
    }
    tsi_node_release(n);
    return ts_error();
fail:
    free(c);
    if (user_free) user_free(user);
    return ts_error() != TS_OK ? ts_error() : TS_ERR_ARG;
}

/* ------------------------------------------------------------------ walking the graph */
ts_node *ts_grad_fn_node(ts_tensor *t) {
    tsi_view_sync(t);
    return t ? tsi_node_retain(t->grad_fn) : NULL;
}
void ts_node_release(ts_node *n) { tsi_node_release(n); }
const char *ts_node_name(const ts_node *n) { return n ? n->name : NULL; }
int ts_node_num_inputs(const ts_node *n) { return n ? n->n_in : 0; }

ts_node *ts_node_next(ts_node *n, int k, int *output_nr, ts_tensor **leaf) {
    if (output_nr) *output_nr = 0;
    if (leaf) *leaf = NULL;
    if (!n || k < 0 || k >= n->n_in) return NULL;
    if (leaf) *leaf = n->next[k].leaf;
    if (!n->next[k].fn) return NULL;
    if (output_nr) *output_nr = n->next[k].output_nr;
    return tsi_node_retain(n->next[k].fn);
}

void ts_node_set_twice_differentiable(ts_node *n, bool twice) {
    if (!n) return;
    n->flags = (uint8_t)(twice ? (n->flags | TSI_NODE_TWICE) & ~TSI_NODE_ONCE
                               : (n->flags & ~TSI_NODE_TWICE) | TSI_NODE_ONCE);
}
