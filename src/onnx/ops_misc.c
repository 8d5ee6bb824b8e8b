/* ops_misc.c — ONNX's Constant and control flow (If, Loop, Scan) and the random generators. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static bool check_constant(const tso_node *n) {
    const Onnx__AttributeProto *a = n->proto->n_attribute ? n->proto->attribute[0] : NULL;
    if (n->proto->n_attribute != 1 || !a)
        return tso_fail(n, TS_ERR_FORMAT, "needs exactly one attribute");
    if (a->sparse_tensor || !strcmp(a->name, "sparse_value"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "sparse constants are not supported");
    if (!strcmp(a->name, "value_string") || !strcmp(a->name, "value_strings"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "string constants are not supported");
    return true;
}

TSO_RUN(run_constant) {
    (void)in;
    const Onnx__AttributeProto *a = n->proto->attribute[0];
    ts_opts f32 = {.dtype = TS_F32, .device = c->device};
    ts_opts i64 = {.dtype = TS_I64, .device = c->device};
    if (!strcmp(a->name, "value"))
        out[0] = tso_attr_tensor(n, "value", c->device, NULL);
    else if (!strcmp(a->name, "value_float"))
        out[0] = ts_full(TS_SHAPE(), a->f, f32);
    else if (!strcmp(a->name, "value_int"))
        out[0] = ts_full(TS_SHAPE(), (double)a->i, i64);
    else if (!strcmp(a->name, "value_floats"))
        out[0] = ts_from_data((ts_shape){.ndim = 1, .dims = {(int64_t)a->n_floats}}, TS_F32,
                              a->floats, f32);
    else if (!strcmp(a->name, "value_ints"))
        out[0] =
            ts_from_data((ts_shape){.ndim = 1, .dims = {(int64_t)a->n_ints}}, TS_I64, a->ints, i64);
    else
        return tso_fail(n, TS_ERR_UNSUPPORTED, "attribute '%s' is not supported", a->name);
    return out[0] != NULL || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ sub-graphs */
/* Runs a body with the node's context as the enclosing one (its values are what the body reads
 * from outside); outs[0..g->n_outputs - 1] get new references, in no scope. */
static bool run_body(tso_ctx *c, const tso_node *n, tso_graph *g, ts_tensor *const *inputs,
                     int n_inputs, ts_tensor **outs) {
    return tso_run_graph(c->model, g, c, c->device, inputs, n_inputs, outs) || tso_fail_pending(n);
}

static bool body_arity(const tso_node *n, const tso_graph *g, const char *name, int ins, int outs) {
    if (!g) return tso_fail(n, TS_ERR_FORMAT, "the graph attribute '%s' is missing", name);
    if (g->n_inputs != ins || g->n_outputs != outs)
        return tso_fail(n, TS_ERR_FORMAT,
                        "'%s' has %d inputs and %d outputs, the node needs %d and %d", name,
                        g->n_inputs, g->n_outputs, ins, outs);
    return true;
}

static bool check_if(const tso_node *n) {
    return body_arity(n, tso_node_subgraph(n, "then_branch"), "then_branch", 0, n->n_out) &&
           body_arity(n, tso_node_subgraph(n, "else_branch"), "else_branch", 0, n->n_out);
}

TSO_RUN(run_if) {
    double cond;
    if (!tso_read_scalar(n, in[0], &cond, "cond")) return false;
    tso_graph *g = tso_node_subgraph(n, cond != 0 ? "then_branch" : "else_branch");
    if (!run_body(c, n, g, NULL, 0, out)) return false;
    for (int i = 0; i < n->n_out; i++) out[i] = tsi_own(out[i]);
    return true;
}

/* What Loop and Scan carry from one iteration to the next: the state values (owned references)
 * and each scan output's per-iteration values (owned), stacked at the end. */
typedef struct carry {
    int n_state, n_scan;
    ts_tensor **state;
    ts_tensor **scan; /* scan[j * cap + t] */
    int64_t iters, cap;
} carry;

static void carry_free(carry *s) {
    for (int i = 0; s->state && i < s->n_state; i++) ts_release(s->state[i]);
    for (int64_t i = 0; s->scan && i < s->n_scan * s->cap; i++) ts_release(s->scan[i]);
    free(s->state);
    free(s->scan);
}

static bool carry_init(const tso_node *n, carry *s, int n_state, int n_scan,
                       ts_tensor *const *initial) {
    *s = (carry){.n_state = n_state, .n_scan = n_scan};
    s->state = calloc((size_t)n_state + 1, sizeof *s->state);
    if (!s->state) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int i = 0; i < n_state; i++) s->state[i] = ts_retain(initial[i]);
    return true;
}

/* Takes the body's outputs from outs[first] on: the new state, then one value per scan output
 * (released on failure too). */
static bool carry_push(const tso_node *n, carry *s, ts_tensor **outs, int first) {
    bool ok = true;
    if (s->n_scan && s->iters == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 16;
        ts_tensor **v = calloc((size_t)(cap * s->n_scan), sizeof *v);
        ok = v != NULL;
        for (int j = 0; ok && j < s->n_scan; j++)
            for (int64_t t = 0; t < s->iters; t++) v[j * cap + t] = s->scan[j * s->cap + t];
        if (ok) {
            free(s->scan);
            s->scan = v;
            s->cap = cap;
        }
    }
    for (int i = 0; i < s->n_state; i++) {
        ts_release(s->state[i]);
        s->state[i] = outs[first + i];
    }
    for (int j = 0; j < s->n_scan; j++) {
        ts_tensor *v = outs[first + s->n_state + j];
        if (ok)
            s->scan[j * s->cap + s->iters] = v;
        else
            ts_release(v);
    }
    if (ok) s->iters++;
    return ok || tso_fail(n, TS_ERR_OOM, "out of host memory");
}

/* A scan output with no iteration: empty along axis, its element shape taken from the body's
 * declared output (refused when the declaration leaves it open). */
static ts_tensor *empty_scan(tso_ctx *c, const tso_node *n, const ts_onnx_value_info *vi,
                             int64_t axis) {
    bool known = vi->dtype && vi->ndim >= 0 && vi->ndim < TS_MAX_DIMS;
    for (int d = 0; known && d < vi->ndim; d++) known = vi->dims[d] >= 0 && !vi->dim_names[d];
    if (!known) {
        tso_fail(n, TS_ERR_UNSUPPORTED,
                 "no iteration ran and the body's output '%s' declares no fixed type and shape "
                 "for the empty scan output",
                 vi->name);
        return NULL;
    }
    if (axis < 0) axis += vi->ndim + 1;
    ts_shape s = {.ndim = vi->ndim + 1};
    for (int d = 0, k = 0; d < s.ndim; d++) s.dims[d] = d == axis ? 0 : vi->dims[k++];
    return ts_zeros(s, (ts_opts){.dtype = vi->dtype, .device = c->device});
}

/* Scan output j: the iterations' values stacked along a new axis, last first when reverse. */
static ts_tensor *carry_stack(tso_ctx *c, const tso_node *n, const carry *s, const tso_graph *body,
                              int j, int64_t axis, bool reverse) {
    if (!s->iters) return empty_scan(c, n, &body->out_info[body->n_outputs - s->n_scan + j], axis);
    ts_tensor **v = s->scan + j * s->cap;
    int rank = ts_ndim(v[0]) + 1;
    if (axis < -rank || axis >= rank) {
        tso_fail(n, TS_ERR_ARG, "scan output axis %lld is out of range for rank %d",
                 (long long)axis, rank);
        return NULL;
    }
    if (!reverse) return ts_stack(v, (int)s->iters, (int)axis);
    ts_tensor **r = malloc((size_t)s->iters * sizeof *r);
    if (!r) {
        tso_fail(n, TS_ERR_OOM, "out of host memory");
        return NULL;
    }
    for (int64_t t = 0; t < s->iters; t++) r[t] = v[s->iters - 1 - t];
    ts_tensor *y = ts_stack(r, (int)s->iters, (int)axis);
    free(r);
    return y;
}

/* The node's outputs: the final state values, then the scan outputs (axes and directions from the
 * given attribute lists, 0 by default). */
static int64_t attr_at(const int64_t *v, int count, int i) { return v && i < count ? v[i] : 0; }

static bool carry_finish(tso_ctx *c, const tso_node *n, carry *s, const tso_graph *body,
                         const char *axes_attr, const char *dirs_attr, ts_tensor **out) {
    const int64_t *axes = NULL, *dirs = NULL;
    int n_axes = axes_attr ? tso_attr_ints(n, axes_attr, &axes) : -1;
    int n_dirs = dirs_attr ? tso_attr_ints(n, dirs_attr, &dirs) : -1;
    bool ok = true;
    for (int j = 0; ok && j < s->n_scan; j++) {
        out[s->n_state + j] =
            carry_stack(c, n, s, body, j, attr_at(axes, n_axes, j), attr_at(dirs, n_dirs, j) != 0);
        ok = out[s->n_state + j] != NULL;
    }
    for (int i = 0; ok && i < s->n_state; i++) {
        out[i] = tsi_own(s->state[i]);
        s->state[i] = NULL;
    }
    carry_free(s);
    return ok || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ Loop */
static bool check_loop(const tso_node *n) {
    if (n->n_in < 2)
        return tso_fail(n, TS_ERR_FORMAT, "needs the inputs M and cond (either may be empty)");
    int n_state = n->n_in - 2;
    if (n->n_out < n_state)
        return tso_fail(n, TS_ERR_FORMAT, "%d loop-carried values but %d outputs", n_state,
                        n->n_out);
    if (!body_arity(n, tso_node_subgraph(n, "body"), "body", n->n_in, n->n_out + 1)) return false;
    if (n->in[0] < 0 && n->in[1] < 0)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "neither a trip count nor a condition: the loop "
                        "would never end");
    return true;
}

/* ONNX's spec: run while i < M (when given) and cond (when given); the body gets the iteration
 * number and the condition, returns the next condition (ignored without a cond input), the next
 * loop-carried values and one value per scan output. */
TSO_RUN(run_loop) {
    tso_graph *body = tso_node_subgraph(n, "body");
    int n_state = n->n_in - 2;
    int64_t trips = INT64_MAX;
    double go = 1;
    if (in[0] && tso_read_ints(n, in[0], &trips, 1, "M") != 1)
        return ts_error() ? false : tso_fail(n, TS_ERR_SHAPE, "M must hold one value");
    if (in[1] && !tso_read_scalar(n, in[1], &go, "cond")) return false;
    carry s;
    if (!carry_init(n, &s, n_state, n->n_out - n_state, in + 2)) return false;
    ts_tensor **args = calloc((size_t)n->n_in + (size_t)body->n_outputs, sizeof *args);
    if (!args) {
        carry_free(&s);
        return tso_fail(n, TS_ERR_OOM, "out of host memory");
    }
    ts_tensor **outs = args + n->n_in;
    ts_tensor *cond = ts_retain(in[1]);
    bool ok = true;
    for (int64_t i = 0; ok && i < trips && go != 0; i++) {
        if (!tso_loop_tick(c, n)) {
            ok = false;
            break;
        }
        ts_scope_begin();
        args[0] = ts_scalar((double)i, (ts_opts){.dtype = TS_I64, .device = c->device});
        args[1] = cond ? cond : ts_scalar(1, (ts_opts){.dtype = TS_BOOL, .device = c->device});
        for (int k = 0; k < n_state; k++) args[2 + k] = s.state[k];
        ok = (args[0] && args[1]) || tso_fail_pending(n);
        ok = ok && run_body(c, n, body, args, n->n_in, outs);
        ts_scope_end();
        if (!ok) break;
        ts_release(cond);
        cond = outs[0];
        if (in[1]) ok = tso_read_scalar(n, cond, &go, "the body's condition");
        if (!carry_push(n, &s, outs, 1)) ok = false;
    }
    ts_release(cond);
    free(args);
    if (!ok) {
        carry_free(&s);
        return false;
    }
    return carry_finish(c, n, &s, body, NULL, NULL, out);
}

/* ------------------------------------------------------------------ Scan */
/* One scan over inputs xs[0..n_xs-1] (slices along their axes, reversed where the direction is 1)
 * from the states in states[0..n_state-1]; the outputs, states then scan outputs, are set in out
 * (owned by the current scope). */
typedef struct scan_attrs {
    const char *in_axes, *in_dirs, *out_axes, *out_dirs; /* attribute names; NULL: all 0 */
} scan_attrs;

static bool scan_core(tso_ctx *c, const tso_node *n, int n_state, ts_tensor *const *states,
                      int n_xs, ts_tensor *const *xs, scan_attrs a, ts_tensor **out) {
    tso_graph *body = tso_node_subgraph(n, "body");
    const int64_t *axes = NULL, *dirs = NULL;
    int n_axes = a.in_axes ? tso_attr_ints(n, a.in_axes, &axes) : -1;
    int n_dirs = a.in_dirs ? tso_attr_ints(n, a.in_dirs, &dirs) : -1;
    int *axis = calloc((size_t)n_xs + 1, sizeof *axis);
    ts_tensor **args = calloc((size_t)(n_state + n_xs + body->n_outputs), sizeof *args);
    if (!axis || !args) {
        free(axis);
        free(args);
        return tso_fail(n, TS_ERR_OOM, "out of host memory");
    }
    int64_t len = -1;
    bool ok = true;
    for (int j = 0; ok && j < n_xs; j++) {
        int rank = ts_ndim(xs[j]);
        int64_t ax = attr_at(axes, n_axes, j);
        if (ax < -rank || ax >= rank) {
            ok = tso_fail(n, TS_ERR_ARG, "scan input %d: axis %lld is out of range for %s", j,
                          (long long)ax, tsi_desc(xs[j]));
            break;
        }
        axis[j] = (int)(ax < 0 ? ax + rank : ax);
        int64_t l = ts_size(xs[j], axis[j]);
        if (len >= 0 && l != len)
            ok = tso_fail(n, TS_ERR_SHAPE, "scan inputs of different lengths: %lld and %lld",
                          (long long)len, (long long)l);
        len = l;
    }
    carry s = {0};
    ok = ok && carry_init(n, &s, n_state, body->n_outputs - n_state, states);
    ts_tensor **outs = args + n_state + n_xs;
    for (int64_t t = 0; ok && t < len; t++) {
        ts_scope_begin();
        for (int k = 0; k < n_state; k++) args[k] = s.state[k];
        for (int j = 0; ok && j < n_xs; j++) {
            int64_t at = attr_at(dirs, n_dirs, j) ? len - 1 - t : t;
            args[n_state + j] = ts_select(xs[j], axis[j], at);
            ok = args[n_state + j] || tso_fail_pending(n);
        }
        ok = ok && run_body(c, n, body, args, n_state + n_xs, outs);
        ts_scope_end();
        if (ok && !carry_push(n, &s, outs, 0)) ok = false;
    }
    free(axis);
    free(args);
    if (!ok) {
        if (s.state) carry_free(&s);
        return false;
    }
    return carry_finish(c, n, &s, body, a.out_axes, a.out_dirs, out);
}

static bool check_scan9(const tso_node *n) {
    int64_t m = tso_attr_int(n, "num_scan_inputs", 0);
    if (m < 1 || m > n->n_in)
        return tso_fail(n, TS_ERR_FORMAT, "num_scan_inputs %lld with %d inputs", (long long)m,
                        n->n_in);
    if (n->n_out < n->n_in - m)
        return tso_fail(n, TS_ERR_FORMAT, "%lld state values but %d outputs",
                        (long long)(n->n_in - m), n->n_out);
    return body_arity(n, tso_node_subgraph(n, "body"), "body", n->n_in, n->n_out);
}

TSO_RUN(run_scan9) {
    int m = (int)tso_attr_int(n, "num_scan_inputs", 0), n_state = n->n_in - m;
    scan_attrs a = {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                    "scan_output_directions"};
    return scan_core(c, n, n_state, in, m, in + n_state, a, out);
}

/* Opset 8's Scan has a batch dim first on every input and output (and the scan axis second): one
 * scan per batch entry, the results stacked. */
static bool check_scan8(const tso_node *n) {
    int64_t m = tso_attr_int(n, "num_scan_inputs", 0);
    if (n->n_in < 1 || m < 1 || m > n->n_in - 1)
        return tso_fail(n, TS_ERR_FORMAT, "num_scan_inputs %lld with %d inputs", (long long)m,
                        n->n_in);
    if (n->in[0] >= 0)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "sequence_lens (sequences of different lengths in a "
                        "batch) is not supported");
    if (n->n_out < n->n_in - 1 - m)
        return tso_fail(n, TS_ERR_FORMAT, "%lld state values but %d outputs",
                        (long long)(n->n_in - 1 - m), n->n_out);
    return body_arity(n, tso_node_subgraph(n, "body"), "body", n->n_in - 1, n->n_out);
}

TSO_RUN(run_scan8) {
    int n_args = n->n_in - 1, n_out = n->n_out;
    int64_t batch = ts_ndim(in[1]) ? ts_size(in[1], 0) : -1;
    for (int i = 1; i < n->n_in; i++)
        if (ts_ndim(in[i]) < 1 || ts_size(in[i], 0) != batch)
            return tso_fail(n, TS_ERR_SHAPE, "every input needs the batch dim first: %s and %s",
                            tsi_desc(in[1]), tsi_desc(in[i]));
    ts_tensor **args = calloc((size_t)n_args + 1, sizeof *args);
    ts_tensor **res = calloc((size_t)(batch * n_out) + 1, sizeof *res); /* res[i * batch + b] */
    bool ok = (args && res) || tso_fail(n, TS_ERR_OOM, "out of host memory");
    int n_state = n_args - (int)tso_attr_int(n, "num_scan_inputs", 0);
    scan_attrs a = {NULL, "directions", NULL, NULL};
    for (int64_t b = 0; ok && b < batch; b++) {
        for (int i = 0; ok && i < n_args; i++) ok = (args[i] = ts_select(in[1 + i], 0, b)) != NULL;
        ts_tensor **o = calloc((size_t)n_out + 1, sizeof *o);
        ok = ok && (o || tso_fail(n, TS_ERR_OOM, "out of host memory"));
        ok = ok && scan_core(c, n, n_state, args, n_args - n_state, args + n_state, a, o);
        for (int i = 0; ok && i < n_out; i++) res[i * batch + b] = o[i];
        free(o);
    }
    for (int i = 0; ok && i < n_out; i++)
        ok = (out[i] = ts_stack(res + i * batch, (int)batch, 0)) != NULL;
    free(args);
    free(res);
    return ok || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ random generators */
/* The numbers are Tessera's (Philox), not NumPy's: a seed attribute gives the same numbers on each
 * run (a stream of the node's own, the global generator untouched), not ONNX's reference ones. */
static bool check_seed(const tso_node *n) {
    const Onnx__AttributeProto *a = tso_attr(n, "seed");
    double s = a ? tso_attr_float(n, "seed", 0) : 0;
    if (!(s > -9.2e18 && s < 9.2e18))
        return tso_fail(n, TS_ERR_ARG, "seed %g is not a usable value", s);
    return true;
}

static bool check_dtype(const tso_node *n, bool floating) {
    if (!tso_attr(n, "dtype")) return true;
    int32_t t = (int32_t)tso_attr_int(n, "dtype", 1);
    ts_dtype d = tso_dtype_from_onnx(t);
    if (d == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "dtype %s, which Tessera lacks",
                        tso_onnx_type_name(t));
    if (floating && !ts_dtype_is_floating(d))
        return tso_fail(n, TS_ERR_ARG, "dtype %s: the generator makes floating values only",
                        tso_onnx_type_name(t));
    return true;
}

static bool check_random(const tso_node *n) { return check_dtype(n, true) && check_seed(n); }
static bool check_bernoulli(const tso_node *n) { return check_dtype(n, false) && check_seed(n); }

/* the dtype attribute, or def when absent */
static ts_dtype attr_dtype(const tso_node *n, ts_dtype def) {
    return tso_attr(n, "dtype") ? tso_dtype_from_onnx((int32_t)tso_attr_int(n, "dtype", 1)) : def;
}

typedef enum draw_kind { DRAW_NORMAL, DRAW_UNIFORM, DRAW_BERNOULLI } draw_kind;

/* Draws (from the node's seeded stream when it has a seed attribute): normal(mean, scale) or
 * uniform(low, high) of shape s, or Bernoulli(p) cast to dt. */
static ts_tensor *draw(tso_ctx *c, const tso_node *n, draw_kind k, ts_shape s, ts_dtype dt,
                       ts_tensor *p) {
    bool seeded = tso_attr(n, "seed") != NULL;
    tsi_rng_stream prev = {0};
    if (seeded) prev = tsi_rng_stream_begin((uint64_t)(int64_t)tso_attr_float(n, "seed", 0), 0);
    ts_opts o = {.dtype = dt, .device = c->device};
    ts_tensor *y;
    if (k == DRAW_NORMAL)
        y = ts_add_scalar(ts_mul_scalar(ts_randn(s, o), tso_attr_float(n, "scale", 1)),
                          tso_attr_float(n, "mean", 0));
    else if (k == DRAW_UNIFORM) {
        double lo = tso_attr_float(n, "low", 0), hi = tso_attr_float(n, "high", 1);
        y = ts_add_scalar(ts_mul_scalar(ts_rand(s, o), hi - lo), lo);
    } else {
        y = ts_bernoulli(p);
        if (y && ts_dtype_of(y) != dt) y = ts_to_dtype(y, dt);
    }
    if (seeded) tsi_rng_stream_end(prev);
    return y;
}

static ts_shape attr_shape(const tso_node *n, bool *ok) {
    const int64_t *v;
    int count = tso_attr_ints(n, "shape", &v);
    ts_shape s = {.ndim = count < 0 ? 0 : count};
    *ok = count >= 0 && count <= TS_MAX_DIMS;
    for (int i = 0; *ok && i < count; i++) {
        s.dims[i] = v[i];
        *ok = v[i] >= 0;
    }
    if (!*ok) tso_fail(n, TS_ERR_ARG, "the shape attribute is missing or invalid");
    return s;
}

TSO_RUN(run_random_normal) {
    (void)in;
    bool ok;
    ts_shape s = attr_shape(n, &ok);
    if (!ok) return false;
    TSO_DONE(draw(c, n, DRAW_NORMAL, s, attr_dtype(n, TS_F32), NULL));
}

TSO_RUN(run_random_uniform) {
    (void)in;
    bool ok;
    ts_shape s = attr_shape(n, &ok);
    if (!ok) return false;
    TSO_DONE(draw(c, n, DRAW_UNIFORM, s, attr_dtype(n, TS_F32), NULL));
}

/* the *Like forms: the input's shape, and its dtype unless the attribute says another */
static ts_dtype like_dtype(const tso_node *n, ts_tensor *x, bool *ok) {
    ts_dtype d = attr_dtype(n, ts_dtype_of(x));
    *ok = ts_dtype_is_floating(d) ||
          tso_fail(n, TS_ERR_DTYPE,
                   "the output would be %s: the generator makes floating values only",
                   ts_dtype_name(d));
    return d;
}

TSO_RUN(run_random_normal_like) {
    bool ok;
    ts_dtype d = like_dtype(n, in[0], &ok);
    if (!ok) return false;
    TSO_DONE(draw(c, n, DRAW_NORMAL, ts_shape_of(in[0]), d, NULL));
}

TSO_RUN(run_random_uniform_like) {
    bool ok;
    ts_dtype d = like_dtype(n, in[0], &ok);
    if (!ok) return false;
    TSO_DONE(draw(c, n, DRAW_UNIFORM, ts_shape_of(in[0]), d, NULL));
}

TSO_RUN(run_bernoulli) {
    TSO_DONE(
        draw(c, n, DRAW_BERNOULLI, ts_shape_of(in[0]), attr_dtype(n, ts_dtype_of(in[0])), in[0]));
}

const tso_op_def tso_ops_misc[] = {
    {"Constant", 1, run_constant, check_constant, false},
    {"If", 1, run_if, check_if, false},
    {"Loop", 1, run_loop, check_loop, false},
    {"Scan", 8, run_scan8, check_scan8, false},
    {"Scan", 9, run_scan9, check_scan9, false},
    {"RandomNormal", 1, run_random_normal, check_random, true},
    {"RandomUniform", 1, run_random_uniform, check_random, true},
    {"RandomNormalLike", 1, run_random_normal_like, check_random, true},
    {"RandomUniformLike", 1, run_random_uniform_like, check_random, true},
    {"Bernoulli", 15, run_bernoulli, check_bernoulli, true},
    {NULL, 0, NULL, NULL, false},
};
