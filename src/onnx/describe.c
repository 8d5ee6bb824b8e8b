/* describe.c — ts_onnx_describe: what `tessera info` prints about a model (producer, opsets,
 * inputs and outputs with their symbolic dims, operators with counts, parameters). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "onnx/onnx_internal.h"

static void put_value(tsi_strbuf *t, const ts_onnx_value_info *vi) {
    tsi_sb_printf(t, "  %s: %s", vi->name, vi->dtype ? ts_dtype_name(vi->dtype) : "?");
    if (vi->ndim < 0) {
        tsi_sb_printf(t, " [rank unknown]\n");
        return;
    }
    tsi_sb_printf(t, " [");
    for (int d = 0; d < vi->ndim; d++) {
        if (vi->dim_names[d])
            tsi_sb_printf(t, "%s%s", d ? ", " : "", vi->dim_names[d]);
        else if (vi->dims[d] < 0)
            tsi_sb_printf(t, "%s?", d ? ", " : "");
        else
            tsi_sb_printf(t, "%s%lld", d ? ", " : "", (long long)vi->dims[d]);
    }
    tsi_sb_printf(t, "]\n");
}

/* A declared type as text: "float32 [N, 3]", "sequence of float32 [?]", "optional sequence of
 * float32 [rank unknown]" (a sequence's or an optional's tensors). */
static void put_type(tsi_strbuf *t, const Onnx__TypeProto *tp) {
    switch (tp ? tp->value_case : ONNX__TYPE_PROTO__VALUE__NOT_SET) {
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        tsi_sb_printf(t, "sequence of ");
        put_type(t, tp->sequence_type ? tp->sequence_type->elem_type : NULL);
        return;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        tsi_sb_printf(t, "optional ");
        put_type(t, tp->optional_type ? tp->optional_type->elem_type : NULL);
        return;
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        break;
    default:
        tsi_sb_printf(t, "? [rank unknown]");
        return;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    ts_dtype dt = tt && tt->has_elem_type ? tso_dtype_from_onnx(tt->elem_type) : TS_DTYPE_DEFAULT;
    tsi_sb_printf(t, "%s", dt ? ts_dtype_name(dt) : "?");
    if (!tt || !tt->shape) {
        tsi_sb_printf(t, " [rank unknown]");
        return;
    }
    tsi_sb_printf(t, " [");
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            tsi_sb_printf(t, "%s%lld", d ? ", " : "", (long long)dim->dim_value);
        else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            tsi_sb_printf(t, "%s%s", d ? ", " : "", dim->dim_param);
        else
            tsi_sb_printf(t, "%s?", d ? ", " : "");
    }
    tsi_sb_printf(t, "]");
}

/* The graph's inputs or outputs: a tensor from its info, a sequence or an optional from its
 * declared type (found by name among decl: the info keeps the element type alone). */
static void put_values(tsi_strbuf *t, const ts_onnx_value_info *info, int n,
                       Onnx__ValueInfoProto *const *decl, size_t n_decl) {
    for (int i = 0; i < n; i++) {
        const ts_onnx_value_info *vi = &info[i];
        if (vi->kind == TS_ONNX_TENSOR) {
            put_value(t, vi);
            continue;
        }
        for (size_t j = 0; j < n_decl; j++)
            if (decl[j]->name && !strcmp(decl[j]->name, vi->name)) {
                tsi_sb_printf(t, "  %s: ", vi->name);
                put_type(t, decl[j]->type);
                tsi_sb_printf(t, "\n");
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
    tsi_strbuf t = {0};
    tsi_sb_printf(&t, "producer: %s %s\n", mp->producer_name ? mp->producer_name : "?",
                  mp->producer_version ? mp->producer_version : "");
    tsi_sb_printf(&t, "IR version: %lld\nopsets:", (long long)mp->ir_version);
    for (size_t i = 0; i < mp->n_opset_import; i++)
        tsi_sb_printf(&t, " %s %lld",
                      mp->opset_import[i]->domain && mp->opset_import[i]->domain[0]
                          ? mp->opset_import[i]->domain
                          : "ai.onnx",
                      (long long)mp->opset_import[i]->version);
    tsi_sb_printf(&t, "\ninputs (%d):\n", m->graph->n_inputs);
    const Onnx__GraphProto *gp = mp->graph;
    put_values(&t, m->graph->in_info, m->graph->n_inputs, gp->input, gp->n_input);
    tsi_sb_printf(&t, "outputs (%d):\n", m->graph->n_outputs);
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
    tsi_sb_printf(&t, "operators (%d kinds, %zu nodes):", n_ops, gp->n_node);
    for (int i = 0; i < n_ops; i++)
        tsi_sb_printf(&t, "%s %s x%d", i % 6 ? "," : "\n ", names[i], counts[i]);
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
    tsi_sb_printf(&t, "\ninitializers: %d, %lld values (%lld in parameters)\n", n_init,
                  (long long)params,
                  m->no_weights ? (long long)-1 : (long long)ts_module_num_parameters(mod));
    if (t.failed) {
        free(t.s);
        return tsi_error_set(TS_ERR_OOM, "onnx_describe: out of host memory"), NULL;
    }
    return t.s;
}
