/* run.c — runs a compiled graph: each node inside a scope of its own, each value released after its
 * last reader, so peak memory is the live activations (plus what autograd keeps). The top-level
 * graph's shape arithmetic comes from the shape memo (memo.c) while the inputs' shapes stay. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/memo.h"
#include "onnx/onnx_internal.h"
#include "onnx/place.h"

static pthread_mutex_t const_lock = PTHREAD_MUTEX_INITIALIZER;

/* A constant on the device the graph runs on: the copy made by an earlier run when there is one
 * (several threads may run one model: the cache is shared under a lock). New reference. */
static ts_tensor *const_on(tso_value *v, ts_device dev) {
    ts_tensor *t = v->tensor;
    if (!t) return NULL;
    if (tsi_device_eq(tsi_device(t), dev)) return ts_retain(t);
    pthread_mutex_lock(&const_lock);
    ts_tensor *c = v->dev_copy;
    if (c && tsi_device_eq(tsi_device(c), dev)) {
        ts_retain(c);
        pthread_mutex_unlock(&const_lock);
        return c;
    }
    pthread_mutex_unlock(&const_lock);
    c = tsi_to_device("onnx_run", t, dev);
    if (!c) return NULL;
    pthread_mutex_lock(&const_lock);
    ts_tensor *old = v->dev_copy;
    v->dev_copy = ts_retain(c);
    pthread_mutex_unlock(&const_lock);
    ts_release(old);
    return c;
}

static bool check_input(const tso_graph *g, int i, ts_tensor *t) {
    const ts_onnx_value_info *vi = &g->in_info[i];
    if (!tsi_check_input("onnx_run", t, vi->name)) return false;
    if (vi->dtype && ts_dtype_of(t) != vi->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "onnx_run: input '%s' must be %s, got %s", vi->name,
                             ts_dtype_name(vi->dtype), tsi_desc(t)),
               false;
    if (vi->ndim < 0) return true;
    ts_shape s = ts_shape_of(t);
    bool ok = s.ndim == vi->ndim;
    for (int d = 0; ok && d < s.ndim; d++)
        if (vi->dims[d] >= 0 && !vi->dim_names[d] && s.dims[d] != vi->dims[d]) ok = false;
    if (!ok) {
        char want[256];
        size_t len = 0;
        len += (size_t)snprintf(want + len, sizeof want - len, "[");
        for (int d = 0; d < vi->ndim && len < sizeof want - 40; d++) {
            if (vi->dim_names[d])
                len += (size_t)snprintf(want + len, sizeof want - len, "%s%.20s", d ? ", " : "",
                                        vi->dim_names[d]);
            else if (vi->dims[d] < 0)
                len += (size_t)snprintf(want + len, sizeof want - len, "%s?", d ? ", " : "");
            else
                len += (size_t)snprintf(want + len, sizeof want - len, "%s%lld", d ? ", " : "",
                                        (long long)vi->dims[d]);
        }
        snprintf(want + len, sizeof want - len, "]");
        return tsi_error_set(TS_ERR_SHAPE, "onnx_run: input '%s' must have shape %s, got %s",
                             vi->name, want, tsi_desc(t)),
               false;
    }
    return true;
}

/* A placed run (place.h): per value and device, the value's copy there (NULL: none yet) */
typedef struct moves {
    const tso_place *pl; /* NULL: the graph runs whole on one device */
    ts_tensor **copy;    /* v * pl->n_devs + d */
} moves;

static void release_copies(moves *mv, int v) {
    for (int d = 0; mv->pl && d < mv->pl->n_devs; d++) {
        ts_tensor **c = &mv->copy[(size_t)v * (size_t)mv->pl->n_devs + (size_t)d];
        ts_release(*c);
        *c = NULL;
    }
}

static void drop_use(tso_graph *g, ts_tensor **vals, int *left, moves *mv, int v) {
    if (v < 0 || g->values[v].pinned) return;
    if (--left[v] == 0) {
        ts_release(vals[v]);
        vals[v] = NULL;
        release_copies(mv, v);
    }
}

/* node n has read its inputs (or had its outputs from the memo): one use of each less */
static void release_inputs(tso_graph *g, ts_tensor **vals, int *left, moves *mv,
                           const tso_node *n) {
    for (int i = 0; i < n->n_in; i++) drop_use(g, vals, left, mv, n->in[i]);
}

/* value v for a node on device d of a placed run: itself when there, else its copy there (a
 * constant's made at placement, anything else's moved on first use in this run); borrowed */
static ts_tensor *placed_value(const tso_graph *g, moves *mv, ts_tensor *const *vals, int v,
                               int d) {
    ts_tensor *t = vals[v];
    if (!t || tsi_device_eq(tsi_device(t), mv->pl->devs[d])) return t;
    const size_t at = (size_t)v * (size_t)mv->pl->n_devs + (size_t)d;
    if (!mv->copy[at]) {
        ts_tensor *c = g->values[v].kind == TSO_V_CONST ? mv->pl->copies[at] : NULL;
        if (c && t == g->values[v].tensor) {
            mv->copy[at] = ts_retain(c);
        } else {
            ts_scope_begin();
            mv->copy[at] = ts_retain(tso_place_move(t, mv->pl->devs[d]));
            ts_scope_end();
        }
    }
    return mv->copy[at];
}

/* A node with sub-graphs on device d of a placed run: the top-level values its sub-graphs read
 * are swapped for their copies on d while it runs (saved[] gets what to put back: *n_saved
 * pairs). false with the error set. */
static bool swap_outer(const tso_graph *g, const tso_node *n, moves *mv, ts_tensor **vals, int d,
                       int **saved_v, ts_tensor ***saved_t, int *n_saved) {
    int count = 0;
    for (int s = 0; s < n->n_sub; s++)
        for (int i = 0; i < n->sub[s]->n_values; i++)
            count += n->sub[s]->values[i].kind == TSO_V_OUTER;
    *n_saved = 0;
    *saved_v = malloc((size_t)(count ? count : 1) * sizeof **saved_v);
    *saved_t = malloc((size_t)(count ? count : 1) * sizeof **saved_t);
    if (!*saved_v || !*saved_t)
        return tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory"), false;
    for (int s = 0; s < n->n_sub; s++)
        for (int i = 0; i < n->sub[s]->n_values; i++) {
            const tso_value *val = &n->sub[s]->values[i];
            if (val->kind != TSO_V_OUTER || !vals[val->outer]) continue;
            ts_tensor *c = placed_value(g, mv, vals, val->outer, d);
            if (!c) return false;
            (*saved_v)[*n_saved] = val->outer;
            (*saved_t)[(*n_saved)++] = vals[val->outer];
            vals[val->outer] = c;
        }
    return true;
}

static void unswap_outer(ts_tensor **vals, int *saved_v, ts_tensor **saved_t, int n_saved) {
    for (int i = n_saved - 1; i >= 0; i--) vals[saved_v[i]] = saved_t[i];
    free(saved_v);
    free(saved_t);
}

/* node n's inputs into in[] (a placed run: on the node's device nd); false with the error naming
 * the node */
static bool node_inputs(const tso_graph *g, const tso_node *n, ts_tensor **vals, moves *mv, int nd,
                        ts_tensor **in) {
    for (int i = 0; i < n->n_in; i++) {
        int v = n->in[i];
        in[i] = v >= 0 ? vals[v] : NULL;
        if (v >= 0 && !in[i])
            return tso_fail(n, TS_ERR_ARG,
                            "input '%s' has no value (an optional output not produced)",
                            g->values[v].name);
        if (v >= 0 && mv->pl && !(in[i] = placed_value(g, mv, vals, v, nd)))
            return tso_fail_pending(n);
    }
    return true;
}

/* a graph output as the caller gets it (a new reference): contiguous after a channels_last run,
 * as a plain run's; on the placement's output device */
static ts_tensor *output_of(ts_tensor *t, int mode, const moves *mv) {
    const bool moved = mv->pl && !tsi_device_eq(tsi_device(t), mv->pl->out);
    if (!(mode < 0 && !ts_is_contiguous(t)) && !moved) return ts_retain(t);
    ts_scope_begin();
    if (mode < 0 && !ts_is_contiguous(t)) t = ts_contiguous(t);
    ts_tensor *o = ts_retain(t && moved ? tso_place_move(t, mv->pl->out) : t);
    ts_scope_end();
    return o;
}

bool tso_run_graph(tso_model *m, tso_graph *g, tso_ctx *outer, ts_device dev,
                   ts_tensor *const *inputs, int n_inputs, ts_tensor **outs) {
    for (int i = 0; i < g->n_outputs; i++) outs[i] = NULL;
    if (n_inputs != g->n_inputs)
        return tsi_error_set(TS_ERR_ARG, "onnx_run: the graph has %d inputs, %d given", g->n_inputs,
                             n_inputs),
               false;
    ts_tensor **vals = calloc((size_t)g->n_values + 1, sizeof *vals);
    int *left = malloc(((size_t)g->n_values + 1) * sizeof *left);
    /* an operator reads in[i] past its node's n_in as an absent trailing optional input (Clip(x)
     * reads min and max): at least MIN_IO entries, NULL past the node's own */
    enum { MIN_IO = 16 };
    int max_io = MIN_IO;
    for (int k = 0; k < g->n_nodes; k++) {
        if (g->nodes[k].n_in > max_io) max_io = g->nodes[k].n_in;
        if (g->nodes[k].n_out > max_io) max_io = g->nodes[k].n_out;
    }
    ts_tensor **in = calloc((size_t)max_io * 2, sizeof *in);
    tso_memo_run memo = {0};
    const bool top = !outer && g == m->graph;
    moves mv = {.pl = top && m->place && m->place->n_nodes == g->n_nodes &&
                              m->place->n_values == g->n_values
                          ? m->place
                          : NULL};
    if (mv.pl) mv.copy = calloc((size_t)g->n_values * (size_t)mv.pl->n_devs + 1, sizeof *mv.copy);
    bool ok = vals && left && in && (!mv.pl || mv.copy);
    if (!ok) {
        tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory");
        goto done;
    }
    ts_tensor **out = in + max_io;
    tso_ctx ctx = {.model = m, .graph = g, .device = dev, .vals = vals, .outer = outer, .blk = 0};
    /* > 0: the blocked nodes' block; -1: plain nodes, 4-D float32 inputs channels_last */
    const int mode = !top    ? 0
                     : mv.pl ? tso_place_mode(m, mv.pl, inputs, n_inputs)
                             : tso_blocked_mode(m, dev, inputs, n_inputs);
    ctx.blk = mode > 0 ? mode : 0;
    for (int v = 0; v < g->n_values; v++) {
        tso_value *val = &g->values[v];
        left[v] = val->uses;
        switch (val->kind) {
        case TSO_V_PARAM:
            vals[v] = ts_retain(val->tensor);
            break;
        case TSO_V_CONST: /* placed: copied where read (placed_value) */
            vals[v] = mv.pl ? ts_retain(val->tensor) : const_on(val, dev);
            if (!vals[v]) ok = false;
            break;
        case TSO_V_OUTER:
            vals[v] = outer ? ts_retain(outer->vals[val->outer]) : NULL;
            break;
        default:
            break;
        }
    }
    for (int i = 0; ok && i < g->n_inputs; i++) {
        if (!check_input(g, i, inputs[i]))
            ok = false;
        else if (mode < 0 && ts_ndim(inputs[i]) == 4 && ts_dtype_of(inputs[i]) == TS_F32) {
            ts_scope_begin();
            vals[g->inputs[i]] = ts_retain(ts_contiguous_format(inputs[i], TS_CHANNELS_LAST));
            ts_scope_end();
            if (!vals[g->inputs[i]]) ok = false;
        } else
            vals[g->inputs[i]] = ts_retain(inputs[i]);
    }
    /* sub-graphs (Loop bodies) see other values on each iteration: the top level only */
    if (ok && top) tso_memo_begin(g, dev, inputs, vals, &memo);
    for (int k = 0; ok && k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        if (tso_memo_skips(&memo, k)) {
            release_inputs(g, vals, left, &mv, n);
            continue;
        }
        const int nd = mv.pl ? mv.pl->node_dev[k] : 0;
        if (mv.pl) ctx.device = mv.pl->devs[nd];
        ok = node_inputs(g, n, vals, &mv, nd, in);
        int *saved_v = NULL, n_saved = 0;
        ts_tensor **saved_t = NULL;
        if (ok && mv.pl && n->n_sub &&
            !swap_outer(g, n, &mv, vals, nd, &saved_v, &saved_t, &n_saved))
            ok = tso_fail_pending(n);
        if (!ok) {
            unswap_outer(vals, saved_v, saved_t, n_saved);
            break;
        }
        for (int i = n->n_in; i < max_io; i++) in[i] = NULL;
        for (int i = 0; i < max_io; i++) out[i] = NULL;
        int depth = ts_scope_depth();
        ts_scope_begin();
        if (ts_scope_depth() != depth + 1) {
            unswap_outer(vals, saved_v, saved_t, n_saved);
            ok = false;
            break;
        }
        /* an operator that returns true with an error pending (a NULL it did not check) has
         * failed all the same: never a success with a sticky error behind it */
        ok = n->def->run(&ctx, n, in, out) && !ts_error();
        if (ok)
            for (int i = 0; i < n->n_out; i++)
                if (n->out[i] >= 0) vals[n->out[i]] = ts_retain(out[i]);
        if (ok && top && m->measure) /* place.c's example run */
            for (int i = 0; i < n->n_out; i++)
                if (out[i]) m->measure[k] += ts_nbytes(out[i]);
        ts_scope_end();
        if (mv.pl && n->n_sub) unswap_outer(vals, saved_v, saved_t, n_saved);
        if (!ok) {
            tso_fail_pending(n);
            break;
        }
        tso_memo_note(&memo, g, k, vals);
        release_inputs(g, vals, left, &mv, n);
        for (int i = 0; i < n->n_out; i++)
            if (n->out[i] >= 0 && left[n->out[i]] == 0 && !g->values[n->out[i]].pinned) {
                ts_release(vals[n->out[i]]);
                vals[n->out[i]] = NULL;
            }
    }
    for (int i = 0; ok && i < g->n_outputs; i++) {
        ts_tensor *t = vals[g->outputs[i]];
        if (!t) {
            ok = false;
            tsi_error_set(TS_ERR_ARG, "onnx_run: output '%s' has no value",
                          g->values[g->outputs[i]].name);
            break;
        }
        if (!(outs[i] = output_of(t, mode, &mv))) ok = false;
    }
    if (!ok)
        for (int i = 0; i < g->n_outputs; i++) {
            ts_release(outs[i]);
            outs[i] = NULL;
        }
done:
    tso_memo_end(&memo, g, ok);
    if (vals)
        for (int v = 0; v < g->n_values; v++) ts_release(vals[v]);
    for (int v = 0; mv.copy && v < g->n_values; v++) release_copies(&mv, v);
    free(mv.copy);
    free(vals);
    free(left);
    free(in);
    return ok;
}

ts_status ts_onnx_run(ts_module *mod, int n_inputs, ts_tensor *const *inputs, int n_outputs,
                      ts_tensor **outputs) {
    if (outputs)
        for (int i = 0; i < n_outputs; i++) outputs[i] = NULL;
    if (!ts_onnx_is_model(mod))
        return tsi_error_set(TS_ERR_ARG, "onnx_run: the module was not made by ts_onnx_load");
    tso_model *m = (tso_model *)mod;
    tso_graph *g = m->graph;
    if (ts_error()) return ts_error();
    if (m->no_weights)
        return tsi_error_set(TS_ERR_STATE, "onnx_run: the model was loaded without its weights");
    if (n_outputs < 0 || n_outputs > g->n_outputs || (n_outputs && !outputs))
        return tsi_error_set(TS_ERR_ARG, "onnx_run: %d outputs asked, the model has %d", n_outputs,
                             g->n_outputs);
    if (n_inputs != g->n_inputs || (n_inputs && !inputs))
        return tsi_error_set(TS_ERR_ARG, "onnx_run: the model has %d inputs, %d given", g->n_inputs,
                             n_inputs);
    ts_device dev = ts_default_device();
    if (m->place) /* placed (place.c): the first device's, where the shape memo's key points */
        dev = m->place->devs[0];
    else if (n_inputs && inputs[0])
        dev = ts_device_of(inputs[0]);
    else {
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].kind == TSO_V_PARAM && g->values[v].tensor) {
                dev = ts_device_of(g->values[v].tensor);
                break;
            }
    }
    dev = tsi_resolve_device(dev);
    ts_tensor **all = calloc((size_t)g->n_outputs + 1, sizeof *all);
    if (!all) return tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory");
    int64_t cap = tsi_tensor_cap_set(tso_max_node_elements());
    bool ok = tso_run_graph(m, g, NULL, dev, inputs, n_inputs, all);
    tsi_tensor_cap_set(cap);
    for (int i = 0; ok && i < g->n_outputs; i++) {
        if (i < n_outputs)
            outputs[i] = tsi_own(all[i]);
        else
            ts_release(all[i]);
    }
    free(all);
    return ok ? TS_OK : ts_error();
}
