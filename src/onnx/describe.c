/* describe.c — ts_onnx_describe: what `tessera info` prints about a model (producer, opsets,
 * inputs and outputs with their symbolic dims, operators with counts, parameters). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

typedef struct text {
    char *buf;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap ? t->cap * 2 : 1024) + (size_t)n;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->oom = true;
            return;
        }
        t->buf = b;
        t->cap = cap;
    }
}

static void put_value(text *t, const ts_onnx_value_info *vi) {
    put(t, "  %s: %s", vi->name, vi->dtype ? ts_dtype_name(vi->dtype) : "?");
    if (vi->ndim < 0) {
        put(t, " [rank unknown]\n");
        return;
    }
    put(t, " [");
    for (int d = 0; d < vi->ndim; d++) {
        if (vi->dim_names[d])
            put(t, "%s%s", d ? ", " : "", vi->dim_names[d]);
        else if (vi->dims[d] < 0)
            put(t, "%s?", d ? ", " : "");
        else
            put(t, "%s%lld", d ? ", " : "", (long long)vi->dims[d]);
    }
    put(t, "]\n");
}

/* A declared type as text: "float32 [N, 3]", "sequence of float32 [?]", "optional sequence of
 * float32 [rank unknown]" (a sequence's or an optional's tensors). */
static void put_type(text *t, const Onnx__TypeProto *tp) {
    switch (tp ? tp->value_case : ONNX__TYPE_PROTO__VALUE__NOT_SET) {
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        put(t, "sequence of ");
        put_type(t, tp->sequence_type ? tp->sequence_type->elem_type : NULL);
        return;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        put(t, "optional ");
        put_type(t, tp->optional_type ? tp->optional_type->elem_type : NULL);
        return;
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        break;
    default:
        put(t, "? [rank unknown]");
        return;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    ts_dtype dt = tt && tt->has_elem_type ? tso_dtype_from_onnx(tt->elem_type) : TS_DTYPE_DEFAULT;
    put(t, "%s", dt ? ts_dtype_name(dt) : "?");
    if (!tt || !tt->shape) {
        put(t, " [rank unknown]");
        return;
    }
    put(t, " [");
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            put(t, "%s%lld", d ? ", " : "", (long long)dim->dim_value);
        else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            put(t, "%s%s", d ? ", " : "", dim->dim_param);
        else
            put(t, "%s?", d ? ", " : "");
    }
    put(t, "]");
}

/* The graph's inputs or outputs: a tensor from its info, a sequence or an optional from its
 * declared type (found by name among decl: the info keeps the element type alone). */
static void put_values(text *t, const ts_onnx_value_info *info, int n,
                       Onnx__ValueInfoProto *const *decl, size_t n_decl) {
    for (int i = 0; i < n; i++) {
        const ts_onnx_value_info *vi = &info[i];
        if (vi->kind == TS_ONNX_TENSOR) {
            put_value(t, vi);
            continue;
        }
        for (size_t j = 0; j < n_decl; j++)
            if (decl[j]->name && !strcmp(decl[j]->name, vi->name)) {
                put(t, "  %s: ", vi->name);
                put_type(t, decl[j]->type);
                put(t, "\n");
                break;
            }
    }
}

char *ts_onnx_describe(ts_module *mod) {
    if (!ts_onnx_is_model(mod))
        return tsi_error_set(TS_ERR_ARG, "onnx_describe: the module was not made by ts_onnx_load"),
               NULL;
    tso_model *m = (tso_model *)mod;
    const Onnx__ModelProto *mp = m->proto;
    text t = {0};
    put(&t, "producer: %s %s\n", mp->producer_name ? mp->producer_name : "?",
        mp->producer_version ? mp->producer_version : "");
    put(&t, "IR version: %lld\nopsets:", (long long)mp->ir_version);
    for (size_t i = 0; i < mp->n_opset_import; i++)
        put(&t, " %s %lld",
            mp->opset_import[i]->domain && mp->opset_import[i]->domain[0]
                ? mp->opset_import[i]->domain
                : "ai.onnx",
            (long long)mp->opset_import[i]->version);
    put(&t, "\ninputs (%d):\n", m->graph->n_inputs);
    const Onnx__GraphProto *gp = mp->graph;
    put_values(&t, m->graph->in_info, m->graph->n_inputs, gp->input, gp->n_input);
    put(&t, "outputs (%d):\n", m->graph->n_outputs);
    put_values(&t, m->graph->out_info, m->graph->n_outputs, gp->output, gp->n_output);
    enum { MAX_OPS = 512 };
    const char *names[MAX_OPS];
    int counts[MAX_OPS], n_ops = 0;
    /* the file's nodes (before constant folding): what the exporter wrote */
    for (size_t k = 0; k < gp->n_node; k++) {
        const char *op = gp->node[k]->op_type ? gp->node[k]->op_type : "?";
        int i = 0;
        while (i < n_ops && strcmp(names[i], op)) i++;
        if (i == n_ops && n_ops < MAX_OPS) names[n_ops++] = op, counts[i] = 0;
        if (i < n_ops) counts[i]++;
    }
    put(&t, "operators (%d kinds, %zu nodes):", n_ops, gp->n_node);
    for (int i = 0; i < n_ops; i++) put(&t, "%s %s x%d", i % 6 ? "," : "\n ", names[i], counts[i]);
    int64_t params = 0;
    int n_init = (int)gp->n_initializer;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        /* a model loaded with no_weights has unchecked dims: saturate instead of overflowing */
        int64_t e = 1;
        for (size_t d = 0; d < gp->initializer[i]->n_dims; d++) {
            int64_t x = gp->initializer[i]->dims[d];
            if (x < 0 || (x && e > INT64_MAX / x))
                e = INT64_MAX;
            else
                e *= x;
        }
        params = params > INT64_MAX - e ? INT64_MAX : params + e;
    }
    put(&t, "\ninitializers: %d, %lld values (%lld in parameters)\n", n_init, (long long)params,
        m->no_weights ? (long long)-1 : (long long)ts_module_num_parameters(mod));
    if (t.oom) {
        free(t.buf);
        return tsi_error_set(TS_ERR_OOM, "onnx_describe: out of host memory"), NULL;
    }
    return t.buf;
}
