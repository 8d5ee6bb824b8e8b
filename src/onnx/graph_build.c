/* graph_build.c — turns an untrusted GraphProto into a checked graph: every name resolved (inputs,
 * initializers, node outputs, enclosing graphs), single assignment, no cycle, nodes in topological
 * order, each operator found in the table at the model's opset, sub-graphs compiled recursively. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ a name -> value map */
typedef struct name_map {
    int *slots; /* value index + 1; 0 = empty */
    size_t cap;
} name_map;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool map_init(name_map *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 1) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    m->cap = cap;
    return m->slots != NULL;
}

static int map_find(const name_map *m, const tso_graph *g, const char *name) {
    size_t i = hash_str(name) & (m->cap - 1);
    while (m->slots[i]) {
        int v = m->slots[i] - 1;
        if (!strcmp(g->values[v].name, name)) return v;
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

static void map_put(name_map *m, const tso_graph *g, int v) {
    size_t i = hash_str(g->values[v].name) & (m->cap - 1);
    while (m->slots[i]) i = (i + 1) & (m->cap - 1);
    m->slots[i] = v + 1;
}

/* ------------------------------------------------------------------ building */
typedef struct builder {
    tso_model *model;
    tso_graph *g;
    const Onnx__GraphProto *gp;
    name_map map;
    const char *where; /* "graph" or "sub-graph 'body' of node ..." for messages */
} builder;

static bool oom(const char *what) {
    tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory (%s)", what);
    return false;
}

static bool check_name(const builder *b, const char *name, const char *what) {
    if (!name)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s has no name", b->where, what), false;
    size_t len = strnlen(name, TSO_MAX_NAME + 1);
    if (len > TSO_MAX_NAME)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s name is longer than %d bytes",
                             b->where, what, TSO_MAX_NAME),
               false;
    return true;
}

/* A new value named name (copied); -1 on failure (duplicate name: single assignment broken). */
static int add_value(builder *b, const char *name, tso_value_kind kind, const char *what) {
    tso_graph *g = b->g;
    if (!check_name(b, name, what)) return -1;
    if (!name[0]) {
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s has an empty name", b->where, what);
        return -1;
    }
    if (map_find(&b->map, g, name) >= 0) {
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: %s: '%s' (%s) is assigned twice (ONNX graphs are single "
                      "assignment)",
                      b->where, name, what);
        return -1;
    }
    if (g->n_values >= TSO_MAX_VALUES) {
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: more than %d values", b->where,
                      TSO_MAX_VALUES);
        return -1;
    }
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        tso_value *v = realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return oom("values"), -1;
        g->values = v;
        g->cap_values = cap;
    }
    char *copy = tsi_strdup(name);
    if (!copy) return oom("value names"), -1;
    int id = g->n_values++;
    g->values[id] = (tso_value){.name = copy, .kind = kind, .producer = -1, .outer = -1};
    map_put(&b->map, g, id);
    return id;
}

/* The index of name in g, looking further out when g lacks it: a value of an enclosing graph
 * that a sub-graph reads. Each graph on the way gets an outer reference of its own (appended past
 * its name map: the enclosing graphs' nodes are resolved by then), and the value it finally refers
 * to is pinned, so the enclosing run keeps it until the end. -1 when no graph has it. */
static int outer_ref(tso_graph *g, const char *name) {
    for (int i = 0; i < g->n_values; i++)
        if (!strcmp(g->values[i].name, name)) return i;
    if (!g->parent) return -1;
    int p = outer_ref(g->parent, name);
    if (p < 0) return -1;
    g->parent->values[p].pinned = true;
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        tso_value *v = realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return oom("values"), -2;
        g->values = v;
        g->cap_values = cap;
    }
    char *copy = tsi_strdup(name);
    if (!copy) return oom("value names"), -2;
    int id = g->n_values++;
    g->values[id] =
        (tso_value){.name = copy, .kind = TSO_V_OUTER, .producer = -1, .outer = p, .pinned = true};
    return id;
}

static int resolve_input(builder *b, const char *name, int node) {
    int v = map_find(&b->map, b->g, name);
    if (v >= 0) return v;
    if (b->g->parent) {
        int p = outer_ref(b->g->parent, name);
        if (p == -2) return -2;
        if (p >= 0) {
            b->g->parent->values[p].pinned = true;
            v = add_value(b, name, TSO_V_OUTER, "outer-scope value");
            if (v < 0) return -2;
            b->g->values[v].outer = p;
            return v;
        }
    }
    if (node < 0)
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: %s: output '%s' is produced by no node, initializer or input",
                      b->where, name);
    else
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: %s: input '%s' of node %d (%s) is produced by no node, "
                      "initializer or graph input",
                      b->where, name, node,
                      b->gp->node[node]->op_type ? b->gp->node[node]->op_type : "?");
    return -2;
}

static bool value_info(const Onnx__ValueInfoProto *vi, ts_onnx_value_info *out, const builder *b) {
    memset(out, 0, sizeof *out);
    out->ndim = -1;
    /* a sequence or an optional (sequence.c): its kind, and the type of the tensors it holds
     * checked as a tensor's (their shape left out: the runner checks a container's dtype) */
    const Onnx__TypeProto *tp;
    if (!tso_type_kind(vi->type, &out->kind, &tp, b->where, vi->name)) return false;
    if (!tp || !tp->tensor_type)
        return true; /* no type declared: checked at run time by the operators */
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type && tt->elem_type != 0) {
        out->dtype = tso_dtype_from_onnx(tt->elem_type);
        if (out->dtype == TS_DTYPE_DEFAULT) {
            tsi_error_set(TS_ERR_UNSUPPORTED,
                          "onnx_load: %s: '%s' has element type %s, which Tessera lacks", b->where,
                          vi->name, tso_onnx_type_name(tt->elem_type));
            return false;
        }
    }
    if (!tt->shape || out->kind != TS_ONNX_TENSOR) return true;
    if (tt->shape->n_dim > TS_MAX_DIMS) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "onnx_load: %s: '%s' has rank %zu; Tessera holds at most %d", b->where,
                      vi->name, tt->shape->n_dim, TS_MAX_DIMS);
        return false;
    }
    out->ndim = (int)tt->shape->n_dim;
    for (int i = 0; i < out->ndim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        out->dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            d->dim_value >= 0)
            out->dims[i] = d->dim_value;
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            out->dim_names[i] = d->dim_param;
    }
    return true;
}

static bool compile_graph(tso_model *m, tso_graph *g, const Onnx__GraphProto *gp,
                          const char *where);

/* The version of the training domain the model imports (its operators' opset), -1 with the error
 * set when it imports none or one past what ONNX defines. */
static int domain_version(const builder *b, const char *label) {
    const Onnx__ModelProto *mp = b->model->proto;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o->domain || strcmp(o->domain, TSO_DOMAIN_TRAINING)) continue;
        if (o->has_version && o->version >= 1 && o->version <= TSO_TRAINING_VERSION_MAX)
            return (int)o->version;
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "onnx_load: %s: %s: the model imports " TSO_DOMAIN_TRAINING
                      " version %lld; Tessera reads version 1 to %d",
                      b->where, label, (long long)(o->has_version ? o->version : 0),
                      TSO_TRAINING_VERSION_MAX);
        return -1;
    }
    tsi_error_set(TS_ERR_FORMAT,
                  "onnx_load: %s: %s is in the domain " TSO_DOMAIN_TRAINING
                  ", which the model does not import",
                  b->where, label);
    return -1;
}

static bool build_node(builder *b, int k, tso_node *n, int *produced_by) {
    const Onnx__NodeProto *np = b->gp->node[k];
    n->proto = np;
    n->op_type = np->op_type ? np->op_type : "";
    char label[256];
    if (np->name && np->name[0])
        snprintf(label, sizeof label, "node '%.150s' (%.60s)", np->name, n->op_type);
    else
        snprintf(label, sizeof label, "node %d (%.60s)", k, n->op_type);
    n->label = tsi_strdup(label);
    if (!n->label) return oom("node labels");
    if (np->n_input > 4096 || np->n_output > 4096)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s has %zu inputs and %zu outputs",
                             b->where, label, np->n_input, np->n_output),
               false;
    if (np->n_attribute > 4096)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s has %zu attributes", b->where, label,
                             np->n_attribute),
               false;
    for (size_t a = 0; a < np->n_attribute; a++) {
        const Onnx__AttributeProto *at = np->attribute[a];
        if (!at->name)
            return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s has an attribute without a name",
                                 b->where, label),
                   false;
        if (at->n_ints > TSO_MAX_ATTR_LIST || at->n_floats > TSO_MAX_ATTR_LIST)
            return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %s: attribute '%s' is too long",
                                 b->where, label, at->name),
                   false;
        if (at->ref_attr_name && at->ref_attr_name[0])
            return tsi_error_set(TS_ERR_FORMAT,
                                 "onnx_load: %s: %s: attribute '%s' refers to a function's "
                                 "attribute outside a function",
                                 b->where, label, at->name),
                   false;
    }
    const char *domain = np->domain ? np->domain : "";
    bool training = !strcmp(domain, TSO_DOMAIN_TRAINING);
    const tso_op_def *ms = !strcmp(domain, TSO_DOMAIN_MS) ? tso_find_ms_op(n->op_type) : NULL;
    if (domain[0] && strcmp(domain, "ai.onnx") && !training && !ms)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: %s: %s is in the operator domain '%s'; Tessera runs the "
                             "default domain (ai.onnx) and " TSO_DOMAIN_TRAINING " only",
                             b->where, label, domain),
               false;
    n->opset = training ? domain_version(b, label) : ms ? 1 : b->model->opset;
    if (n->opset < 0) return false;
    bool any = false;
    n->def = ms         ? ms
             : training ? tso_find_training_op(n->op_type, n->opset, &any)
                        : tso_find_op(n->op_type, n->opset, &any);
    if (!n->def)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             any ? "onnx_load: %s: %s at opset %d: Tessera implements this "
                                   "operator only at other opsets"
                                 : "onnx_load: %s: %s at opset %d: Tessera does not support the "
                                   "operator %s",
                             b->where, label, n->opset, n->op_type),
               false;
    n->n_in = (int)np->n_input;
    n->n_out = (int)np->n_output;
    n->in = malloc(sizeof(int) * (size_t)(n->n_in + n->n_out + 1));
    if (!n->in) return oom("node inputs");
    n->out = n->in + n->n_in;
    for (int i = 0; i < n->n_out; i++) {
        const char *name = np->output[i];
        if (!check_name(b, name, "node output")) return false;
        if (!name[0]) {
            n->out[i] = -1; /* an optional output nobody wants */
            continue;
        }
        int v = add_value(b, name, TSO_V_NODE, "node output");
        if (v < 0) return false;
        b->g->values[v].producer = k;
        produced_by[v] = k;
        n->out[i] = v;
    }
    return true;
}

static bool build_sub(builder *b, tso_node *n) {
    const Onnx__NodeProto *np = n->proto;
    int count = 0;
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a]->g)
            count++;
        else if (np->attribute[a]->n_graphs)
            return tsi_error_set(TS_ERR_UNSUPPORTED,
                                 "onnx_load: %s: %s: graph lists (attribute "
                                 "'%s') are not supported",
                                 b->where, n->label, np->attribute[a]->name),
                   false;
    if (!count) return true;
    if (b->g->depth + 1 > TSO_MAX_GRAPH_DEPTH)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: sub-graphs nested deeper than %d",
                             b->where, TSO_MAX_GRAPH_DEPTH),
               false;
    n->sub = calloc((size_t)count, sizeof *n->sub);
    n->sub_names = calloc((size_t)count, sizeof *n->sub_names);
    if (!n->sub || !n->sub_names) return oom("sub-graphs");
    for (size_t a = 0; a < np->n_attribute; a++) {
        const Onnx__AttributeProto *at = np->attribute[a];
        if (!at->g) continue;
        tso_graph *sg = calloc(1, sizeof *sg);
        if (!sg) return oom("sub-graphs");
        sg->parent = b->g;
        sg->depth = b->g->depth + 1;
        n->sub[n->n_sub] = sg;
        n->sub_names[n->n_sub++] = at->name;
        char where[512];
        snprintf(where, sizeof where, "sub-graph '%.60s' of %.300s", at->name, n->label);
        if (!compile_graph(b->model, sg, at->g, where)) return false;
    }
    return true;
}

/* The producer (node index) of value v of g, -1 when no node of g makes it. */
static int producer_of(const tso_graph *g, int v) {
    return v >= 0 && g->values[v].kind == TSO_V_NODE ? g->values[v].producer : -1;
}

/* How many values of the enclosing graph node n's sub-graphs read: implicit inputs that order n
 * after their producers (an If whose branch reads a value computed before it). */
static int outer_reads(const tso_node *n) {
    int count = 0;
    for (int s = 0; s < n->n_sub; s++)
        for (int v = 0; v < n->sub[s]->n_values; v++)
            count += n->sub[s]->values[v].kind == TSO_V_OUTER;
    return count;
}

static void add_edge(int p, int k, int *head, int *next, int *succ, int *indeg, int *e) {
    succ[*e] = k;
    next[*e] = head[p];
    head[p] = (*e)++;
    indeg[k]++;
}

/* Kahn's algorithm over the node -> node edges (inputs and what sub-graphs read); a node left
 * over sits on a cycle. */
static bool sort_nodes(builder *b, const int *produced_by) {
    tso_graph *g = b->g;
    int nn = g->n_nodes;
    int *indeg = calloc((size_t)nn + 1, sizeof *indeg);
    int *order = malloc(((size_t)nn + 1) * sizeof *order);
    int *head = malloc(((size_t)nn + 1) * sizeof *head);
    int total_in = 0;
    for (int k = 0; k < nn; k++) total_in += g->nodes[k].n_in + outer_reads(&g->nodes[k]);
    int *next = malloc(((size_t)total_in + 1) * sizeof *next);
    int *succ = malloc(((size_t)total_in + 1) * sizeof *succ);
    bool ok = indeg && order && head && next && succ;
    if (!ok) {
        oom("graph order");
        goto done;
    }
    for (int k = 0; k < nn; k++) head[k] = -1;
    int e = 0;
    for (int k = 0; k < nn; k++) {
        const tso_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && produced_by[n->in[i]] >= 0)
                add_edge(produced_by[n->in[i]], k, head, next, succ, indeg, &e);
        for (int s = 0; s < n->n_sub; s++)
            for (int v = 0; v < n->sub[s]->n_values; v++) {
                const tso_value *val = &n->sub[s]->values[v];
                int p = val->kind == TSO_V_OUTER ? producer_of(g, val->outer) : -1;
                if (p >= 0) add_edge(p, k, head, next, succ, indeg, &e);
            }
    }
    int qh = 0, qt = 0;
    for (int k = 0; k < nn; k++)
        if (!indeg[k]) order[qt++] = k;
    while (qh < qt) {
        int k = order[qh++];
        for (int x = head[k]; x >= 0; x = next[x])
            if (--indeg[succ[x]] == 0) order[qt++] = succ[x];
    }
    if (qt < nn) {
        int k = 0;
        while (indeg[k] == 0) k++;
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: the graph has a cycle through %s", b->where,
                      g->nodes[k].label);
        ok = false;
        goto done;
    }
    tso_node *sorted = malloc((size_t)(nn > 0 ? nn : 1) * sizeof *sorted);
    if (!sorted) {
        ok = oom("graph order");
        goto done;
    }
    for (int k = 0; k < nn; k++) sorted[k] = g->nodes[order[k]];
    free(g->nodes);
    g->nodes = sorted;
    for (int k = 0; k < nn; k++)
        for (int i = 0; i < g->nodes[k].n_out; i++)
            if (g->nodes[k].out[i] >= 0) g->values[g->nodes[k].out[i]].producer = k;
done:
    free(indeg);
    free(order);
    free(head);
    free(next);
    free(succ);
    return ok;
}

static bool add_initializers(builder *b) {
    const Onnx__GraphProto *gp = b->gp;
    if (gp->n_initializer > TSO_MAX_INITIALIZERS)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %zu initializers (at most %d)",
                             b->where, gp->n_initializer, TSO_MAX_INITIALIZERS),
               false;
    if (gp->n_sparse_initializer)
        return tsi_error_set(TS_ERR_UNSUPPORTED,
                             "onnx_load: %s: sparse initializers are not supported", b->where),
               false;
    bool top = b->g->parent == NULL;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        int v = add_value(b, tp->name, top ? TSO_V_PARAM : TSO_V_CONST, "initializer");
        if (v < 0) return false;
        if (tp->data_type == TSO_ONNX_INT4 || tp->data_type == TSO_ONNX_UINT4)
            b->g->values[v].onnx_type = tp->data_type; /* QuantizeLinear's 4-bit range */
        /* top-level initializers become the module's tensors (load.c); a sub-graph's are its own
         * constants */
        if (!top) {
            ts_tensor *t =
                tso_tensor_from_proto(tp, b->model ? b->model->base_dir : NULL, ts_cpu(), tp->name);
            if (!t) return false;
            b->g->values[v].tensor = t;
        }
    }
    return true;
}

static bool compile_graph(tso_model *m, tso_graph *g, const Onnx__GraphProto *gp,
                          const char *where) {
    builder b = {.model = m, .g = g, .gp = gp, .where = where};
    bool ok = false;
    int *produced_by = NULL;
    if (gp->n_node > TSO_MAX_NODES)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: %zu nodes (at most %d)", where,
                             gp->n_node, TSO_MAX_NODES),
               false;
    size_t expected = gp->n_initializer + gp->n_input + gp->n_node * 2 + 16;
    if (!map_init(&b.map, expected)) return oom("name map");
    if (!add_initializers(&b)) goto done;
    /* graph inputs; one with an initializer of the same name is that initializer's default
     * (IR < 4): not an input to feed */
    g->inputs = malloc((gp->n_input + 1) * sizeof *g->inputs);
    g->in_info = calloc(gp->n_input + 1, sizeof *g->in_info);
    if (!g->inputs || !g->in_info) {
        oom("graph inputs");
        goto done;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!check_name(&b, vi->name, "graph input")) goto done;
        if (map_find(&b.map, g, vi->name) >= 0 &&
            g->values[map_find(&b.map, g, vi->name)].kind != TSO_V_INPUT)
            continue;
        int v = add_value(&b, vi->name, TSO_V_INPUT, "graph input");
        if (v < 0) goto done;
        if (!value_info(vi, &g->in_info[g->n_inputs], &b)) goto done;
        g->in_info[g->n_inputs].name = g->values[v].name;
        g->inputs[g->n_inputs++] = v;
    }
    /* nodes: outputs first (a node may appear before its producer), then inputs */
    g->nodes = calloc(gp->n_node + 1, sizeof *g->nodes);
    produced_by = NULL;
    if (!g->nodes) {
        oom("nodes");
        goto done;
    }
    g->n_nodes = (int)gp->n_node; /* once they exist: tso_graph_free walks them */
    size_t max_values = g->n_values;
    for (size_t k = 0; k < gp->n_node; k++) max_values += gp->node[k]->n_output;
    if (max_values > TSO_MAX_VALUES) {
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: %s: more than %d values", where, TSO_MAX_VALUES);
        goto done;
    }
    /* a sub-graph's input name found in no graph of its own becomes an outer reference, a value
     * added while the inputs are resolved: one slot more per node input */
    size_t slots = max_values;
    for (size_t k = 0; k < gp->n_node; k++) slots += gp->node[k]->n_input;
    produced_by = malloc((slots + 1) * sizeof *produced_by);
    if (!produced_by) {
        oom("nodes");
        goto done;
    }
    for (size_t i = 0; i < slots + 1; i++) produced_by[i] = -1;
    for (int k = 0; k < g->n_nodes; k++)
        if (!build_node(&b, k, &g->nodes[k], produced_by)) goto done;
    for (int k = 0; k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            const char *name = gp->node[k]->input[i];
            if (!check_name(&b, name, "node input")) goto done;
            if (!name[0]) {
                n->in[i] = -1;
                continue;
            }
            int v = resolve_input(&b, name, k);
            if (v < 0) goto done;
            n->in[i] = v;
        }
    }
    /* sub-graphs before the order: what they read of this graph orders their node */
    for (int k = 0; k < g->n_nodes; k++)
        if (!build_sub(&b, &g->nodes[k])) goto done;
    if (!sort_nodes(&b, produced_by)) goto done;
    for (int k = 0; k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        if (!tso_opset_gate(n)) goto done;
        if (n->def->check && !n->def->check(n)) goto done;
    }
    if (!tso_check_container_uses(g, where)) goto done;
    /* outputs */
    g->outputs = malloc((gp->n_output + 1) * sizeof *g->outputs);
    g->out_info = calloc(gp->n_output + 1, sizeof *g->out_info);
    if (!g->outputs || !g->out_info) {
        oom("graph outputs");
        goto done;
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!check_name(&b, vi->name, "graph output")) goto done;
        int v = map_find(&b.map, g, vi->name);
        if (v < 0 && g->parent) v = resolve_input(&b, vi->name, -1);
        if (v < 0) {
            if (v == -1)
                tsi_error_set(TS_ERR_FORMAT,
                              "onnx_load: %s: output '%s' is produced by no node, initializer or "
                              "input",
                              where, vi->name);
            goto done;
        }
        if (!value_info(vi, &g->out_info[i], &b)) goto done;
        g->out_info[i].name = g->values[v].name;
        g->outputs[g->n_outputs++] = v;
    }
    tso_graph_count_uses(g);
    ok = true;
done:
    free(b.map.slots);
    free(produced_by);
    return ok;
}

bool tso_graph_compile(tso_model *m, tso_graph *g, const Onnx__GraphProto *gp) {
    return compile_graph(m, g, gp, "graph");
}

/* How many times each value is read (graph outputs count once), so the runner frees it after its
 * last reader; recounted after constant folding removes nodes. */
void tso_graph_count_uses(tso_graph *g) {
    for (int v = 0; v < g->n_values; v++) g->values[v].uses = 0;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_in; i++)
            if (g->nodes[k].in[i] >= 0) g->values[g->nodes[k].in[i]].uses++;
    for (int i = 0; i < g->n_outputs; i++) g->values[g->outputs[i]].uses++;
}

void tso_node_free(tso_node *n) {
    free(n->label);
    free(n->in);
    for (int s = 0; s < n->n_sub; s++) tso_graph_free(n->sub[s]);
    free(n->sub);
    free(n->sub_names);
    if (n->free_state) n->free_state(n->state);
}

void tso_graph_free(tso_graph *g) {
    if (!g) return;
    for (int k = 0; k < g->n_nodes; k++) tso_node_free(&g->nodes[k]);
    for (int v = 0; v < g->n_values; v++) {
        free(g->values[v].name);
        if (g->values[v].kind != TSO_V_PARAM) ts_release(g->values[v].tensor);
        ts_release(g->values[v].dev_copy);
    }
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->in_info);
    free(g->out_info);
    free(g);
}
