/* place.c — ts_module_place on an imported ONNX model (tessera/placement.h): the units are the
 * top-level graph's nodes in execution (topological) order, each charged the initializers and
 * constants it is the first to read (inputs, and what its sub-graphs read from the top level) and,
 * with an example input, its outputs' bytes; placement.c assigns them to the budgets as any
 * module's units. Installing moves each initializer to the device of the node charged for it,
 * copies each constant to the devices whose nodes read it, and records each node's device: run.c
 * then runs every node there, moving its inputs to it (ts_to, once per value and device in a
 * run). */
#include "onnx/place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/placement_internal.h"

typedef struct place_state {
    const tso_graph *g;
    int *home; /* per value of the top graph: the node charged for it, -1 when none reads it */
} place_state;

/* the top-level values node n reads: its inputs, and the outer values of its sub-graphs */
typedef struct reads {
    int *v;
    int n, cap;
} reads;

static bool add_read(reads *r, int v) {
    if (v < 0) return true;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        int *p = realloc(r->v, (size_t)cap * sizeof *p);
        if (!p) return tsi_error_set(TS_ERR_OOM, "module_place: out of host memory"), false;
        r->v = p;
        r->cap = cap;
    }
    r->v[r->n++] = v;
    return true;
}

static bool node_reads(const tso_node *n, reads *r) {
    r->n = 0;
    bool ok = true;
    for (int i = 0; ok && i < n->n_in; i++) ok = add_read(r, n->in[i]);
    for (int s = 0; ok && s < n->n_sub; s++)
        for (int i = 0; ok && i < n->sub[s]->n_values; i++)
            if (n->sub[s]->values[i].kind == TSO_V_OUTER)
                ok = add_read(r, n->sub[s]->values[i].outer);
    return ok;
}

static bool held(const tso_value *val) {
    return val->tensor && (val->kind == TSO_V_PARAM || val->kind == TSO_V_CONST);
}

static bool claims(ts_module *m) { return ts_onnx_is_model(m); }

static void state_free(void *p) {
    place_state *s = p;
    if (s) free(s->home);
    free(s);
}

/* one run of the example (grad mode off, inference), each node's outputs' bytes into it[k] */
static bool measure(tso_model *m, ts_tensor *x, tsi_place_item *it) {
    if (m->graph->n_inputs != 1)
        return tsi_error_set(TS_ERR_ARG,
                             "module_place: example_input: the ONNX model has %d inputs; an "
                             "example feeds one (place it without one)",
                             m->graph->n_inputs),
               false;
    size_t *b = calloc((size_t)m->graph->n_nodes + 1, sizeof *b);
    if (!b) return tsi_error_set(TS_ERR_OOM, "module_place: out of host memory"), false;
    const bool training = m->base.training;
    m->base.training = false;
    m->measure = b;
    ts_no_grad_begin();
    ts_scope_begin();
    const bool ok = ts_onnx_run(&m->base, 1, &x, 0, NULL) == TS_OK;
    ts_scope_end();
    ts_no_grad_end();
    m->measure = NULL;
    m->base.training = training;
    for (int k = 0; k < m->graph->n_nodes; k++) it[k].abytes = b[k];
    free(b);
    return ok;
}

static int units(ts_module *mod, const ts_place_opts *opts, tsi_place_item **items, void **state) {
    tso_model *m = (tso_model *)mod;
    const tso_graph *g = m->graph;
    place_state *s = calloc(1, sizeof *s);
    tsi_place_item *it = calloc((size_t)g->n_nodes + 1, sizeof *it);
    reads r = {0};
    bool ok = s && it && (s->home = malloc(((size_t)g->n_values + 1) * sizeof *s->home));
    if (!ok) tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
    if (ok) s->g = g;
    for (int v = 0; ok && v < g->n_values; v++) s->home[v] = -1;
    for (int k = 0; ok && k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        snprintf(it[k].name, sizeof it[k].name, "%s", n->label);
        ok = node_reads(n, &r);
        for (int i = 0; ok && i < r.n; i++) {
            const tso_value *val = &g->values[r.v[i]];
            if (!held(val) || s->home[r.v[i]] >= 0) continue;
            s->home[r.v[i]] = k;
            const size_t bytes = ts_nbytes(val->tensor);
            const bool grads =
                opts->with_grads && val->kind == TSO_V_PARAM && ts_requires_grad(val->tensor);
            it[k].pbytes += grads ? 2 * bytes : bytes;
        }
    }
    free(r.v);
    if (ok && opts->example_input) ok = measure(m, opts->example_input, it);
    if (!ok) {
        state_free(s);
        free(it);
        return -1;
    }
    *items = it;
    *state = s;
    return g->n_nodes;
}

/* t (and its gradient) moved in place, as ts_module_to moves a parameter */
static bool move_param(ts_tensor *t, ts_device d) {
    if (tsi_tensor_move_storage(t, d) != TS_OK) return false;
    ts_tensor *gr = ts_grad(t);
    return !gr || tsi_tensor_move_storage(gr, d) == TS_OK;
}

void tso_place_free(tso_place *p) {
    if (!p) return;
    for (size_t i = 0; p->copies && i < (size_t)p->n_values * (size_t)p->n_devs; i++)
        ts_release(p->copies[i]);
    free(p->copies);
    free(p->devs);
    free(p->node_dev);
    free(p);
}

/* the node devices of dev[] (budget indices, never decreasing) and the constants' copies */
static tso_place *plan_of(const tso_graph *g, const int *dev, const ts_mem_budget *b, int nb,
                          ts_device out) {
    tso_place *p = calloc(1, sizeof *p);
    int *map = malloc((size_t)nb * sizeof *map);
    reads r = {0};
    bool ok = p && map && (p->devs = malloc((size_t)nb * sizeof *p->devs)) &&
              (p->node_dev = calloc((size_t)g->n_nodes + 1, sizeof *p->node_dev));
    if (!ok) goto oom;
    p->n_nodes = g->n_nodes;
    p->n_values = g->n_values;
    for (int d = 0; d < nb; d++) map[d] = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        if (map[dev[k]] < 0) {
            map[dev[k]] = p->n_devs;
            p->devs[p->n_devs++] = tsi_resolve_device(b[dev[k]].device);
        }
        p->node_dev[k] = (unsigned short)map[dev[k]];
    }
    if (!p->n_devs) p->devs[p->n_devs++] = tsi_resolve_device(b[0].device); /* no nodes */
    p->out = out.type != TS_DEVICE_DEFAULT ? tsi_resolve_device(out) : p->devs[p->n_devs - 1];
    p->copies = calloc((size_t)g->n_values * (size_t)p->n_devs + 1, sizeof *p->copies);
    if (!p->copies) goto oom;
    for (int k = 0; k < g->n_nodes; k++) {
        if (!node_reads(&g->nodes[k], &r)) goto fail;
        const int d = p->node_dev[k];
        for (int i = 0; i < r.n; i++) {
            const tso_value *val = &g->values[r.v[i]];
            ts_tensor **c = &p->copies[(size_t)r.v[i] * (size_t)p->n_devs + (size_t)d];
            if (val->kind != TSO_V_CONST || !val->tensor || *c ||
                tsi_device_eq(tsi_device(val->tensor), p->devs[d]))
                continue;
            if (!(*c = tsi_to_device("module_place", val->tensor, p->devs[d]))) goto fail;
        }
    }
    free(r.v);
    free(map);
    return p;
oom:
    tsi_error_set(TS_ERR_OOM, "module_place: out of host memory");
fail:
    free(r.v);
    free(map);
    tso_place_free(p);
    return NULL;
}

/* Nothing has moved when the plan cannot be made; a failed move leaves the moved initializers
 * where they went and installs the plan all the same (each node's inputs move to its device, so
 * the model still runs). */
static bool install(ts_module *mod, void *state, const int *dev, const ts_mem_budget *b, int nb,
                    ts_device out) {
    tso_model *m = (tso_model *)mod;
    const tso_graph *g = m->graph;
    const place_state *s = state;
    tso_place *p = plan_of(g, dev, b, nb, out);
    if (!p) return false;
    bool moved = true;
    for (int v = 0; moved && v < g->n_values; v++) {
        const tso_value *val = &g->values[v];
        if (val->kind == TSO_V_PARAM && val->tensor && s->home[v] >= 0)
            moved = move_param(val->tensor, p->devs[p->node_dev[s->home[v]]]);
    }
    tso_place *old = m->place;
    m->place = p;
    tso_place_free(old);
    return moved;
}

/* the plan's unit for nodes first..last: the node's label, or "Conv .. Relu (12 nodes)" with the
 * nodes' names where the file gives them */
static const char *short_name(const tso_node *n) {
    return n->proto->name && n->proto->name[0] ? n->proto->name : n->op_type;
}

static void run_name(void *state, int first, int last, char *buf, size_t n) {
    const tso_graph *g = ((const place_state *)state)->g;
    if (first == last)
        snprintf(buf, n, "%s", g->nodes[first].label);
    else
        snprintf(buf, n, "%.48s .. %.48s (%d nodes)", short_name(&g->nodes[first]),
                 short_name(&g->nodes[last]), last - first + 1);
}

static const tsi_place_self onnx_place = {claims, units, install, run_name, state_free};

void tso_place_register(void) { tsi_place_register_self(&onnx_place); }

int tso_place_mode(const tso_model *m, const tso_place *p, ts_tensor *const *inputs, int n_inputs) {
    const int mode = tso_blocked_mode(m, p->devs[0], inputs, n_inputs);
    for (int d = 1; d < p->n_devs; d++)
        if (tso_blocked_mode(m, p->devs[d], inputs, n_inputs) != mode) return 0;
    return mode;
}

ts_tensor *tso_place_move(ts_tensor *t, ts_device d) {
    const ts_onnx_kind kind = tso_kind_of(t);
    if (kind == TS_ONNX_TENSOR) {
        if (ts_ndim(t) == 4 && !ts_is_contiguous(t) && ts_is_contiguous_format(t, TS_CHANNELS_LAST))
            return ts_permute(ts_to(ts_permute(t, TS_DIMS(0, 2, 3, 1)), d), TS_DIMS(0, 3, 1, 2));
        return ts_to(t, d);
    }
    const int64_t n = tso_seq_length(t);
    ts_tensor **items = malloc((size_t)(n > 0 ? n : 1) * sizeof *items);
    if (!items) return tsi_error_set(TS_ERR_OOM, "onnx_run: out of host memory"), NULL;
    bool ok = true;
    for (int64_t i = 0; ok && i < n; i++) ok = (items[i] = tso_place_move(tso_seq_item(t, i), d));
    ts_tensor *c = ok ? tso_seq_new("onnx_run", kind, items, n, ts_dtype_of(t), d) : NULL;
    free(items);
    return c ? tsi_own(c) : NULL;
}
