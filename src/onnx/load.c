/* load.c — ts_onnx_load: a ModelProto (protobuf-c, generated from Debian's onnx.proto) as a module
 * whose parameters and buffers are the graph's initializers under their own names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/module_internal.h"
#include "onnx/onnx_internal.h"
#include "onnx/place.h"

bool tso_graph_compile(tso_model *m, tso_graph *g, const Onnx__GraphProto *gp);
bool tso_read_file(const char *op, const char *path, uint8_t **data, size_t *size);
bool tso_fold_constants(tso_model *m);
bool tso_optimize(tso_model *m); /* optimize.c */

static void model_destroy(ts_module *self) {
    tso_model *m = (tso_model *)self;
    tso_place_free(m->place);
    m->place = NULL;
    tso_graph_free(m->graph);
    if (m->proto) onnx__model_proto__free_unpacked(m->proto, &tso_pb_allocator);
    free(m->base_dir);
    m->graph = NULL;
    m->proto = NULL;
    m->base_dir = NULL;
}

static ts_tensor *model_forward(ts_module *self, ts_tensor *x) {
    tso_model *m = (tso_model *)self;
    if (m->graph->n_inputs != 1)
        return tsi_error_set(TS_ERR_ARG,
                             "onnx forward: the model has %d inputs; ts_forward feeds one: use "
                             "ts_onnx_run",
                             m->graph->n_inputs),
               NULL;
    ts_tensor *out = NULL;
    if (ts_onnx_run(self, 1, &x, 1, &out) != TS_OK) return NULL;
    return out;
}

bool ts_onnx_is_model(ts_module *m) { return m && m->destroy == model_destroy; }

/* The module that holds a dotted name's last part: "layer1.0.conv1.weight" lives in the child
 * layer1 -> 0 -> conv1 under "weight", as PyTorch's state dicts name it. Children are created as
 * plain containers; a part that is already a tensor's name (a file naming both "a" and "a.b")
 * makes the whole name flat, with the dots as underscores. */
static ts_module *owner_of(ts_module *root, const char *name, char *leaf, size_t leaf_size) {
    char part[TSO_MAX_NAME + 1];
    ts_module *m = root;
    const char *p = name;
    for (const char *dot; (dot = strchr(p, '.')) != NULL; p = dot + 1) {
        size_t len = (size_t)(dot - p);
        if (!len || len > TSO_MAX_NAME) goto flat;
        memcpy(part, p, len);
        part[len] = '\0';
        int k = tsi_named_find(&m->impl->children, part);
        if (k >= 0) {
            m = m->impl->children.items[k];
            continue;
        }
        if (tsi_named_find(&m->impl->params, part) >= 0 ||
            tsi_named_find(&m->impl->buffers, part) >= 0)
            goto flat;
        ts_module *child = ts_module_alloc(sizeof(ts_module), "Module", NULL);
        if (!child || !ts_module_add(m, part, child)) return NULL;
        m = child;
    }
    if (!*p) goto flat;
    if (tsi_named_find(&m->impl->children, p) >= 0) goto flat;
    snprintf(leaf, leaf_size, "%s", p);
    return m;
flat:
    snprintf(leaf, leaf_size, "%s", name);
    for (char *c = leaf; *c; c++)
        if (*c == '.') *c = '_';
    if (tsi_named_find(&root->impl->params, leaf) >= 0 ||
        tsi_named_find(&root->impl->buffers, leaf) >= 0 ||
        tsi_named_find(&root->impl->children, leaf) >= 0 || !leaf[0]) {
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: initializer '%.200s' clashes with another name",
                      name);
        return NULL;
    }
    return root;
}

/* BatchNormalization's running mean and variance (inputs 3 and 4) are buffers, as in PyTorch. */
static bool is_running_stat(const tso_graph *g, int v) {
    for (int k = 0; k < g->n_nodes; k++) {
        const tso_node *n = &g->nodes[k];
        if (strcmp(n->op_type, "BatchNormalization")) continue;
        for (int i = 3; i < n->n_in && i < 5; i++)
            if (n->in[i] == v) return true;
    }
    return false;
}

static bool register_initializers(tso_model *m, bool no_weights) {
    tso_graph *g = m->graph;
    const Onnx__GraphProto *gp = m->proto->graph;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        int v = -1;
        for (int j = 0; j < g->n_values && v < 0; j++)
            if (g->values[j].kind == TSO_V_PARAM && !strcmp(g->values[j].name, tp->name)) v = j;
        if (v < 0) continue;
        if (no_weights) continue;
        ts_tensor *t = tso_tensor_from_proto(tp, m->base_dir, ts_cpu(), tp->name);
        if (!t) return false;
        /* the raw bytes are in the tensor now: drop the file's copy early */
        if (tp->has_raw_data && tp->raw_data.data) {
            Onnx__TensorProto *w = (Onnx__TensorProto *)tp;
            free(w->raw_data.data);
            w->raw_data.data = NULL;
            w->raw_data.len = 0;
            w->has_raw_data = 0;
        }
        char leaf[TSO_MAX_NAME + 1];
        ts_module *owner = owner_of(&m->base, tp->name, leaf, sizeof leaf);
        if (!owner) {
            ts_release(t);
            return false;
        }
        /* the public ownership rule: out of a scope the module takes this reference over, in
         * one the scope keeps it and the module takes its own */
        t = tsi_own(t);
        if (!t) return false;
        bool param = ts_dtype_is_floating(ts_dtype_of(t)) && !is_running_stat(g, v);
        ts_tensor *reg = param ? ts_module_param(owner, leaf, t) : ts_module_buffer(owner, leaf, t);
        if (!reg) return false;
        g->values[v].tensor = reg;
    }
    return true;
}

static int model_opset(const Onnx__ModelProto *mp) {
    int opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *d = o->domain ? o->domain : "";
        if (!d[0] || !strcmp(d, "ai.onnx")) opset = o->has_version ? (int)o->version : -1;
    }
    return opset;
}

ts_module *ts_onnx_load_buffer(const void *data, size_t size, const char *base_dir,
                               ts_onnx_opts o) {
    tsi_init();
    tso_place_register(); /* ts_module_place splits the graphs this makes */
    if (!data && size) return tsi_error_set(TS_ERR_ARG, "onnx_load: data is NULL"), NULL;
    if (size > TSO_MAX_FILE_BYTES)
        return tsi_error_set(TS_ERR_FORMAT, "onnx_load: %zu bytes is past protobuf's 2 GiB", size),
               NULL;
    ts_device dev = tsi_resolve_device(o.device);
    if (!tsi_check_device("onnx_load", dev)) return NULL;
    tso_model *m = ts_module_alloc(sizeof *m, "OnnxModel", model_forward);
    if (!m) return NULL;
    m->base.destroy = model_destroy;
    m->optimize = o.optimize;
    m->no_weights = o.no_weights;
    if (base_dir && !(m->base_dir = tsi_strdup(base_dir))) goto oom;
    m->proto = onnx__model_proto__unpack(&tso_pb_allocator, size, data);
    if (!m->proto) {
        if (ts_fault_alloc_fired()) goto oom;
        tsi_error_set(TS_ERR_FORMAT,
                      "onnx_load: not a valid ONNX model: the protobuf does not parse (%zu bytes; "
                      "truncated or not a ModelProto)",
                      size);
        goto fail;
    }
    if (!m->proto->graph) {
        tsi_error_set(TS_ERR_FORMAT, "onnx_load: the model has no graph");
        goto fail;
    }
    m->opset = model_opset(m->proto);
    if (m->opset < 0) {
        /* a model of another domain only (ai.onnx.preview.training, ai.onnx.ml): its nodes are
         * refused by name below when Tessera lacks them */
        if (m->proto->n_opset_import)
            m->opset = TSO_OPSET_MAX;
        else {
            tsi_error_set(TS_ERR_FORMAT, "onnx_load: the model imports no opset");
            goto fail;
        }
    }
    if (m->opset < TSO_OPSET_MIN || m->opset > TSO_OPSET_MAX) {
        tsi_error_set(TS_ERR_UNSUPPORTED, "onnx_load: opset %d: Tessera reads opsets %d to %d",
                      m->opset, TSO_OPSET_MIN, TSO_OPSET_MAX);
        goto fail;
    }
    if (!(m->graph = calloc(1, sizeof *m->graph))) goto oom;
    if (!tso_graph_compile(m, m->graph, m->proto->graph)) goto fail;
    if (!register_initializers(m, o.no_weights)) goto fail;
    int64_t cap = tsi_tensor_cap_set(tso_max_node_elements()); /* folding runs the file's nodes */
    /* the QDQ rewrite first: folding would turn a weight's DequantizeLinear into float32 */
    bool folded =
        o.no_weights || (tso_rewrite_qdq(m) && tso_fold_constants(m) &&
                         tso_rewrite_matmul_integer(m) && (!o.optimize || tso_optimize(m)));
    tsi_tensor_cap_set(cap);
    if (!folded) goto fail;
    ts_module_eval(&m->base); /* a loaded model is for inference until ts_module_train */
    if (!tsi_device_eq(dev, ts_cpu())) ts_module_to(&m->base, dev);
    if (ts_error()) goto fail;
    return &m->base;
oom:
    tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory");
fail:
    ts_module_free(&m->base);
    return NULL;
}

ts_module *ts_onnx_load(const char *path, ts_onnx_opts o) {
    tsi_init();
    uint8_t *data;
    size_t size;
    if (!tso_read_file("onnx_load", path, &data, &size)) return NULL;
    char *dir = tsi_strdup(path);
    if (!dir) {
        free(data);
        return tsi_error_set(TS_ERR_OOM, "onnx_load: out of host memory"), NULL;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    ts_module *m = ts_onnx_load_buffer(data, size, dir[0] ? dir : "/", o);
    free(dir);
    free(data);
    if (!m) tsi_error_append(" [%s]", path);
    return m;
}

/* ------------------------------------------------------------------ queries */
static tso_model *as_model(const char *op, ts_module *mod) {
    if (!ts_onnx_is_model(mod))
        return tsi_error_set(TS_ERR_ARG, "%s: the module was not made by ts_onnx_load", op), NULL;
    return (tso_model *)mod;
}

int ts_onnx_num_inputs(ts_module *mod) {
    tso_model *m = as_model("onnx_num_inputs", mod);
    return m ? m->graph->n_inputs : -1;
}

int ts_onnx_num_outputs(ts_module *mod) {
    tso_model *m = as_model("onnx_num_outputs", mod);
    return m ? m->graph->n_outputs : -1;
}

ts_status ts_onnx_input_info(ts_module *mod, int i, ts_onnx_value_info *out) {
    tso_model *m = as_model("onnx_input_info", mod);
    if (!m) return ts_error();
    if (i < 0 || i >= m->graph->n_inputs || !out)
        return tsi_error_set(TS_ERR_ARG, "onnx_input_info: input %d of %d", i, m->graph->n_inputs);
    *out = m->graph->in_info[i];
    return TS_OK;
}

ts_status ts_onnx_output_info(ts_module *mod, int i, ts_onnx_value_info *out) {
    tso_model *m = as_model("onnx_output_info", mod);
    if (!m) return ts_error();
    if (i < 0 || i >= m->graph->n_outputs || !out)
        return tsi_error_set(TS_ERR_ARG, "onnx_output_info: output %d of %d", i,
                             m->graph->n_outputs);
    *out = m->graph->out_info[i];
    return TS_OK;
}
