/* ops_train.c — the ai.onnx.preview.training domain: the optimizer steps Momentum, Adam and
 * Adagrad (ONNX's formulas, written with Tessera's ops so they run on any device) and Gradient,
 * which re-runs the nodes between its inputs and y with autograd and returns dy/dx. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ optimizer steps */
/* Inputs R (learning rate), T (update count), then `per` groups of n tensors each (X..., G..., and
 * V... / H...); outputs `per - 1` groups of n (X_new..., then the new state). */
static bool check_arity(const tso_node *n, int per) {
    if (n->n_in < 2 + per || (n->n_in - 2) % per)
        return tso_fail(n, TS_ERR_FORMAT,
                        "has %d inputs; expected R, T and %d tensors per optimized tensor", n->n_in,
                        per);
    int count = (n->n_in - 2) / per;
    if (n->n_out != (per - 1) * count)
        return tso_fail(n, TS_ERR_FORMAT, "has %d outputs for %d optimized tensors (expected %d)",
                        n->n_out, count, (per - 1) * count);
    return true;
}

/* a required float attribute (Momentum has no defaults) */
static bool check_required(const tso_node *n, const char *const *names, int count) {
    for (int i = 0; i < count; i++)
        if (!tso_attr(n, names[i]))
            return tso_fail(n, TS_ERR_FORMAT, "the attribute '%s' is required", names[i]);
    return true;
}

static const char *const momentum_modes[] = {"standard", "nesterov"};

static bool check_momentum(const tso_node *n) {
    static const char *const req[] = {"alpha", "beta", "mode", "norm_coefficient"};
    return check_arity(n, 3) && check_required(n, req, 4) &&
           tso_attr_choice(n, "mode", "standard", momentum_modes, 2) >= 0;
}
static bool check_adagrad(const tso_node *n) { return check_arity(n, 3); }
static bool check_adam(const tso_node *n) { return check_arity(n, 4); }

/* R as a 0-dim tensor (it broadcasts against any X) and T's value; the operands' dtypes */
static bool read_rt(const tso_node *n, ts_tensor *const *in, ts_tensor **r, double *t) {
    if (!ts_dtype_is_floating(ts_dtype_of(in[0])) || ts_numel(in[0]) != 1)
        return tso_fail(n, TS_ERR_ARG, "R must be one float value, got %s", tsi_desc(in[0]));
    if (ts_dtype_of(in[1]) != TS_I64)
        return tso_fail(n, TS_ERR_DTYPE, "T must be int64, got %s", tsi_desc(in[1]));
    if (!tso_read_scalar(n, in[1], t, "T")) return false;
    *r = ts_reshape(in[0], TS_SHAPE());
    return *r || tso_fail_pending(n);
}

/* the i-th optimized tensor's group: x, g and the state tensors s[0..per-3], all of x's dtype and
 * shape */
static bool read_group(const tso_node *n, ts_tensor *const *in, int per, int i, ts_tensor **v) {
    int count = (n->n_in - 2) / per;
    for (int k = 0; k < per; k++) {
        v[k] = in[2 + k * count + i];
        if (!ts_dtype_is_floating(ts_dtype_of(v[k])) || ts_dtype_of(v[k]) != ts_dtype_of(v[0]))
            return tso_fail(n, TS_ERR_DTYPE, "input %d must be a float tensor like X (%s), got %s",
                            2 + k * count + i, tsi_desc(v[0]), tsi_desc(v[k]));
        ts_shape a = ts_shape_of(v[k]), b = ts_shape_of(v[0]);
        bool same = a.ndim == b.ndim;
        for (int d = 0; same && d < a.ndim; d++) same = a.dims[d] == b.dims[d];
        if (!same)
            return tso_fail(n, TS_ERR_SHAPE, "input %d %s does not have X's shape %s",
                            2 + k * count + i, tsi_desc(v[k]), tsi_desc(v[0]));
    }
    return true;
}

/* a * x + b * y */
static ts_tensor *axpby(double a, ts_tensor *x, double b, ts_tensor *y) {
    return ts_add(ts_mul_scalar(x, a), ts_mul_scalar(y, b));
}

/* the regularized gradient norm_coefficient * X + G */
static ts_tensor *regularized(const tso_node *n, ts_tensor *x, ts_tensor *g) {
    return axpby(tso_attr_float(n, "norm_coefficient", 0.0f), x, 1.0, g);
}

/* out[k * count + i] = v[k] in X's dtype (R may be double while X is float) */
static bool set_outputs(const tso_node *n, ts_tensor **out, int per, int i, ts_tensor *const *v,
                        ts_dtype dt) {
    int count = (n->n_in - 2) / per;
    for (int k = 0; k < per - 1; k++) {
        out[k * count + i] = v[k] ? ts_to_dtype(v[k], dt) : NULL;
        if (!out[k * count + i]) return tso_fail_pending(n);
    }
    return true;
}

/* One step for group i of each optimizer: v holds X, G and the state; res gets X_new and the new
 * state. */
typedef void (*step_fn)(const tso_node *n, ts_tensor *r, double t, ts_tensor *const *v,
                        ts_tensor **res);

static void momentum_step(const tso_node *n, ts_tensor *r, double t, ts_tensor *const *v,
                          ts_tensor **res) {
    double alpha = tso_attr_float(n, "alpha", 0.0f), beta = tso_attr_float(n, "beta", 0.0f);
    bool nesterov = tso_attr_choice(n, "mode", "standard", momentum_modes, 2) == 1;
    ts_tensor *g = regularized(n, v[0], v[1]);
    /* the first step (T = 0) takes the whole gradient */
    ts_tensor *v_new = axpby(alpha, v[2], t > 0 ? beta : 1.0, g);
    ts_tensor *dir = nesterov ? axpby(1.0, g, alpha, v_new) : v_new;
    res[0] = ts_sub(v[0], ts_mul(r, dir));
    res[1] = v_new;
}

static void adagrad_step(const tso_node *n, ts_tensor *r, double t, ts_tensor *const *v,
                         ts_tensor **res) {
    double decay = tso_attr_float(n, "decay_factor", 0.0f),
           eps = tso_attr_float(n, "epsilon", 1e-6f);
    ts_tensor *g = regularized(n, v[0], v[1]);
    ts_tensor *h_new = ts_add(v[2], ts_square(g));
    ts_tensor *r_t = ts_div_scalar(r, 1.0 + t * decay);
    res[0] = ts_sub(v[0], ts_div(ts_mul(r_t, g), ts_add_scalar(ts_sqrt(h_new), eps)));
    res[1] = h_new;
}

static void adam_step(const tso_node *n, ts_tensor *r, double t, ts_tensor *const *v,
                      ts_tensor **res) {
    double alpha = tso_attr_float(n, "alpha", 0.9f), beta = tso_attr_float(n, "beta", 0.999f);
    double eps = tso_attr_float(n, "epsilon", 1e-6f);
    double post = tso_attr_float(n, "norm_coefficient_post", 0.0f);
    ts_tensor *g = regularized(n, v[0], v[1]);
    ts_tensor *v_new = axpby(alpha, v[2], 1.0 - alpha, g);
    ts_tensor *h_new = axpby(beta, v[3], 1.0 - beta, ts_square(g));
    /* bias correction from the second step on (T > 0) */
    double scale = t > 0 ? sqrt(1.0 - pow(beta, t)) / (1.0 - pow(alpha, t)) : 1.0;
    ts_tensor *step = ts_div(v_new, ts_add_scalar(ts_sqrt(h_new), eps));
    ts_tensor *x_new = ts_sub(v[0], ts_mul(ts_mul_scalar(r, scale), step));
    res[0] = ts_mul_scalar(x_new, 1.0 - post);
    res[1] = v_new;
    res[2] = h_new;
}

static bool run_steps(const tso_node *n, ts_tensor *const *in, ts_tensor **out, int per,
                      step_fn step) {
    ts_tensor *r;
    double t;
    if (!read_rt(n, in, &r, &t)) return false;
    for (int i = 0; i < (n->n_in - 2) / per; i++) {
        ts_tensor *v[4], *res[3] = {0};
        if (!read_group(n, in, per, i, v)) return false;
        step(n, r, t, v, res);
        if (!set_outputs(n, out, per, i, res, ts_dtype_of(v[0]))) return false;
    }
    return true;
}

TSO_RUN(run_momentum) {
    (void)c;
    return run_steps(n, in, out, 3, momentum_step);
}
TSO_RUN(run_adagrad) {
    (void)c;
    return run_steps(n, in, out, 3, adagrad_step);
}
TSO_RUN(run_adam) {
    (void)c;
    return run_steps(n, in, out, 4, adam_step);
}

/* ------------------------------------------------------------------ Gradient */
/* the strings attribute's values (count, -1 when absent) */
static int attr_strings(const tso_node *n, const char *name, const ProtobufCBinaryData **v) {
    const Onnx__AttributeProto *a = tso_attr(n, name);
    *v = a ? a->strings : NULL;
    return a ? (int)a->n_strings : -1;
}

static bool check_gradient(const tso_node *n) {
    const ProtobufCBinaryData *xs, *zs;
    int nx = attr_strings(n, "xs", &xs), nz = attr_strings(n, "zs", &zs);
    const Onnx__AttributeProto *y = tso_attr(n, "y");
    if (nx < 1) return tso_fail(n, TS_ERR_FORMAT, "the attribute 'xs' (names) is required");
    if (!y || !y->has_s || !y->s.len)
        return tso_fail(n, TS_ERR_FORMAT, "the attribute 'y' (a name) is required");
    if (nz < 0) nz = 0;
    if (n->n_in != nx + nz || n->n_out != nx)
        return tso_fail(n, TS_ERR_FORMAT,
                        "has %d inputs and %d outputs; xs and zs name %d and %d tensors (inputs: "
                        "xs then zs; outputs: one gradient per x)",
                        n->n_in, n->n_out, nx, nz);
    return true;
}

/* the value of g named by s (not NUL-terminated), -1 when none */
static int value_named(const tso_graph *g, ProtobufCBinaryData s) {
    for (int v = 0; v < g->n_values; v++)
        if (strlen(g->values[v].name) == s.len && !memcmp(g->values[v].name, s.data, s.len))
            return v;
    return -1;
}

/* What the re-run needs: the values (borrowed from the node's scope), which nodes run. */
typedef struct regraph {
    tso_ctx ctx;
    ts_tensor **vals;
    bool *need;
    int *stack;
} regraph;

/* A value the re-run reads but does not compute: an initializer or a constant (on the device, no
 * graph: the parameters' gradients stay untouched), or an enclosing graph's value. */
static bool source_value(const tso_node *n, regraph *r, int v) {
    const tso_value *val = &r->ctx.graph->values[v];
    ts_tensor *t = NULL;
    if (val->kind == TSO_V_PARAM || val->kind == TSO_V_CONST)
        t = ts_detach(ts_to(val->tensor, r->ctx.device));
    else if (val->kind == TSO_V_OUTER && r->ctx.outer)
        t = ts_detach(r->ctx.outer->vals[val->outer]);
    else
        return tso_fail(n, TS_ERR_ARG,
                        "y depends on '%s', which is neither in xs nor zs nor an initializer",
                        val->name);
    r->vals[v] = t;
    return t || tso_fail_pending(n);
}

/* pushes v when no one has reached it yet */
static void push(regraph *r, int *top, bool *seen, int v) {
    if (v < 0 || seen[v]) return;
    seen[v] = true;
    r->stack[(*top)++] = v;
}

/* Marks the nodes y depends on back to the fed values (xs, zs) and sources the other leaves. */
static bool mark_needed(const tso_node *n, regraph *r, int y, bool *seen) {
    const tso_graph *g = r->ctx.graph;
    int top = 0;
    push(r, &top, seen, y);
    while (top) {
        int v = r->stack[--top];
        if (r->vals[v]) continue; /* fed */
        if (g->values[v].kind != TSO_V_NODE) {
            if (!source_value(n, r, v)) return false;
            continue;
        }
        const tso_node *p = &g->nodes[g->values[v].producer];
        r->need[g->values[v].producer] = true;
        for (int i = 0; i < p->n_in; i++) push(r, &top, seen, p->in[i]);
        for (int s = 0; s < p->n_sub; s++) /* what its sub-graphs read of this graph */
            for (int k = 0; k < p->sub[s]->n_values; k++)
                if (p->sub[s]->values[k].kind == TSO_V_OUTER)
                    push(r, &top, seen, p->sub[s]->values[k].outer);
    }
    return true;
}

/* runs node p of the graph on the re-run's values */
static bool rerun_node(regraph *r, const tso_node *p) {
    enum { MIN_IO = 16 }; /* absent trailing inputs read as NULL, as the runner does */
    int n_io = (p->n_in > MIN_IO ? p->n_in : MIN_IO) + (p->n_out > MIN_IO ? p->n_out : MIN_IO);
    ts_tensor **io = calloc((size_t)n_io, sizeof *io);
    if (!io) return tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory"), false;
    ts_tensor **pout = io + (p->n_in > MIN_IO ? p->n_in : MIN_IO);
    for (int i = 0; i < p->n_in; i++) io[i] = p->in[i] >= 0 ? r->vals[p->in[i]] : NULL;
    bool ok = p->def->run(&r->ctx, p, io, pout) || tso_fail_pending(p);
    for (int i = 0; ok && i < p->n_out; i++)
        if (p->out[i] >= 0) r->vals[p->out[i]] = pout[i];
    free(io);
    return ok;
}

/* the fed values: xs as new leaves that require grad, zs as they are (no graph) */
static bool feed(const tso_node *n, regraph *r, ts_tensor *const *in, ts_tensor **leaves) {
    const ProtobufCBinaryData *xs, *zs;
    int nx = attr_strings(n, "xs", &xs), nz = attr_strings(n, "zs", &zs);
    for (int i = 0; i < nx + (nz > 0 ? nz : 0); i++) {
        ProtobufCBinaryData name = i < nx ? xs[i] : zs[i - nx];
        int v = value_named(r->ctx.graph, name);
        if (v < 0)
            return tso_fail(n, TS_ERR_ARG, "'%.*s' (in %s) is no value of the graph", (int)name.len,
                            (const char *)name.data, i < nx ? "xs" : "zs");
        if (i < nx && !ts_dtype_is_floating(ts_dtype_of(in[i])))
            return tso_fail(n, TS_ERR_DTYPE, "x '%s' must be a float tensor, got %s",
                            r->ctx.graph->values[v].name, tsi_desc(in[i]));
        ts_tensor *t = ts_detach(in[i]);
        if (!t) return tso_fail_pending(n);
        if (i < nx) {
            ts_set_requires_grad(t, true);
            leaves[i] = t;
        }
        r->vals[v] = t;
    }
    return !ts_error() || tso_fail_pending(n);
}

/* Recomputes y from the fed values with autograd and backpropagates ones from it (the gradient of
 * sum(y) when y is not a scalar). */
static bool gradient_pass(const tso_node *n, regraph *r, ts_tensor *const *in, ts_tensor **leaves,
                          bool *seen) {
    const tso_graph *g = r->ctx.graph;
    const Onnx__AttributeProto *ya = tso_attr(n, "y");
    int y = value_named(g, ya->s);
    if (y < 0)
        return tso_fail(n, TS_ERR_ARG, "y '%.*s' is no value of the graph", (int)ya->s.len,
                        (const char *)ya->s.data);
    if (!feed(n, r, in, leaves) || !mark_needed(n, r, y, seen)) return false;
    for (int k = 0; k < g->n_nodes; k++)
        if (r->need[k] && !rerun_node(r, &g->nodes[k])) return false;
    ts_tensor *yt = r->vals[y];
    if (!yt || !ts_dtype_is_floating(ts_dtype_of(yt)))
        return tso_fail(n, TS_ERR_DTYPE, "y must be a float tensor, got %s",
                        yt ? tsi_desc(yt) : "no value");
    if (ts_requires_grad(yt)) ts_backward_with(yt, ts_ones_like(yt));
    return !ts_error() || tso_fail_pending(n);
}

TSO_RUN(run_gradient) {
    if (!ts_grad_enabled())
        return tso_fail(n, TS_ERR_STATE, "Gradient needs autograd; the model runs under no_grad");
    const tso_graph *g = c->graph;
    regraph r = {.ctx = *c};
    r.vals = calloc((size_t)g->n_values + 1, sizeof *r.vals);
    r.stack = malloc(((size_t)g->n_values + 1) * sizeof *r.stack);
    r.need = calloc((size_t)g->n_nodes + 1, sizeof *r.need);
    bool *seen = calloc((size_t)g->n_values + 1, sizeof *seen);
    ts_tensor **leaves = calloc((size_t)n->n_out + 1, sizeof *leaves);
    bool ok = r.vals && r.stack && r.need && seen && leaves;
    if (!ok) tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory");
    r.ctx.vals = r.vals;
    ok = ok && gradient_pass(n, &r, in, leaves, seen);
    for (int i = 0; ok && i < n->n_out; i++) {
        ts_tensor *gr = ts_grad(leaves[i]);
        out[i] = gr ? ts_detach(gr) : ts_zeros_like(leaves[i]); /* y does not depend on x */
        ok = out[i] || tso_fail_pending(n);
    }
    free(r.vals);
    free(r.stack);
    free(r.need);
    free(seen);
    free(leaves);
    return ok;
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_train[] = {
    {"Momentum", 1, run_momentum, check_momentum, false},
    {"Adagrad", 1, run_adagrad, check_adagrad, false},
    {"Adam", 1, run_adam, check_adam, false},
    /* never folded: folding runs under no_grad, and Gradient needs autograd */
    {"Gradient", 1, run_gradient, check_gradient, true},
    {NULL, 0, NULL, NULL, false},
};
