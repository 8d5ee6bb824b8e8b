/* onnx_build.c — ModelProtos built in memory with the generated protobuf-c code, for the ONNX
 * tests (the loader's, test_onnx_refusals, test_onnx_describe, test_onnx_node_cap, and the
 * transformer tests through xformer_util.c): everything a case builds comes from an arena, freed
 * after the case (arena_free) and at the end (arena_release). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_build.h"

static void **arena;
static size_t arena_n, arena_cap;

void *get(size_t n) {
    if (arena_n == arena_cap) {
        arena_cap = arena_cap ? arena_cap * 2 : 256;
        arena = realloc(arena, arena_cap * sizeof *arena);
    }
    return arena[arena_n++] = calloc(1, n ? n : 1);
}

void arena_free(void) {
    for (size_t i = 0; i < arena_n; i++) free(arena[i]);
    arena_n = 0;
}

char *str(const char *s) { return strcpy(get(strlen(s) + 1), s); }

/* "a,b,,c" -> {"a", "b", "", "c"}; "" -> none */
char **names(const char *csv, size_t *n) {
    char **v = get(CAP * sizeof *v);
    *n = 0;
    if (!csv[0]) return v;
    for (const char *p = csv;; p++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *s = get(len + 1);
        memcpy(s, p, len);
        v[(*n)++] = s;
        if (!e) break;
        p = e;
    }
    return v;
}

Onnx__GraphProto *graph(void) {
    Onnx__GraphProto *g = get(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = str("g");
    g->node = get(CAP * sizeof *g->node);
    g->initializer = get(CAP * sizeof *g->initializer);
    g->input = get(CAP * sizeof *g->input);
    g->output = get(CAP * sizeof *g->output);
    return g;
}

Onnx__NodeProto *node(Onnx__GraphProto *g, const char *op, const char *name, const char *ins,
                      const char *outs) {
    Onnx__NodeProto *n = get(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = str(op);
    if (name) n->name = str(name);
    n->input = names(ins, &n->n_input);
    n->output = names(outs, &n->n_output);
    n->attribute = get(CAP * sizeof *n->attribute);
    g->node[g->n_node++] = n;
    return n;
}

Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name,
                           Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = get(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = str(name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void attr_int(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void attr_ints(Onnx__NodeProto *n, const char *name, size_t k, const int64_t *v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = k;
    a->ints = get(k * sizeof *v);
    memcpy(a->ints, v, k * sizeof *v);
}

void attr_string(Onnx__NodeProto *n, const char *name, const char *s) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(s);
    a->s.data = (uint8_t *)str(s);
}

void attr_graph(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g) {
    attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

/* A tensor with its values as raw_data (raw NULL: no data field at all). */
Onnx__TensorProto *tensor(const char *name, int32_t type, int ndim, const int64_t *dims,
                          const void *raw, size_t raw_len) {
    Onnx__TensorProto *t = get(sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = str(name);
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = (size_t)ndim;
    t->dims = get((size_t)ndim * sizeof *dims);
    if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.len = raw_len;
        t->raw_data.data = get(raw_len);
        memcpy(t->raw_data.data, raw, raw_len);
    }
    return t;
}

void add_init(Onnx__GraphProto *g, Onnx__TensorProto *t) { g->initializer[g->n_initializer++] = t; }

/* A tensor type; ndim < 0: no shape; a dim < 0 is the symbol "N". */
Onnx__TypeProto *tensor_type(int32_t type, int ndim, const int64_t *dims) {
    Onnx__TypeProto *tp = get(sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = get(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = type;
    if (ndim >= 0) {
        Onnx__TensorShapeProto *sh = get(sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->n_dim = (size_t)ndim;
        sh->dim = get((size_t)ndim * sizeof *sh->dim);
        for (int i = 0; i < ndim; i++) {
            Onnx__TensorShapeProto__Dimension *d = get(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = str("N");
            }
            sh->dim[i] = d;
        }
        tt->shape = sh;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    return tp;
}

Onnx__ValueInfoProto *value(const char *name, Onnx__TypeProto *type) {
    Onnx__ValueInfoProto *v = get(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = str(name);
    v->type = type;
    return v;
}

void add_input(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type) {
    g->input[g->n_input++] = value(name, type);
}

void add_output(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type) {
    g->output[g->n_output++] = value(name, type);
}

Onnx__ModelProto *model(Onnx__GraphProto *g, int opset) {
    Onnx__ModelProto *m = get(sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->producer_name = str("tessera-tests");
    m->graph = g;
    m->opset_import = get(sizeof *m->opset_import);
    Onnx__OperatorSetIdProto *o = get(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = str("");
    o->has_version = 1;
    o->version = opset;
    m->opset_import[m->n_opset_import++] = o;
    return m;
}

uint8_t *pack(const Onnx__ModelProto *m, size_t *len) {
    *len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = get(*len);
    onnx__model_proto__pack(m, buf);
    return buf;
}

double rand_uniform(uint64_t *s, double lo, double hi) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*s >> 11) * 0x1p-53;
}

void add_init_rand(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims, double a,
                   uint64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *v = get((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)rand_uniform(s, -a, a);
    add_init(g, tensor(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, dims, v,
                       (size_t)n * sizeof *v));
}

Onnx__NodeProto *add_conv(Onnx__GraphProto *g, const char *name, const char *in, const char *out,
                          int64_t k, int64_t stride, int64_t group, uint64_t *s, int64_t cin,
                          int64_t cout) {
    char w[32], b[32], all[128];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    add_init_rand(g, w, 4, (int64_t[]){cout, cin / group, k, k},
                  1.0 / sqrt((double)(cin / group * k * k)), s);
    add_init_rand(g, b, 1, (int64_t[]){cout}, 0.2, s);
    snprintf(all, sizeof all, "%s,%s,%s", in, w, b);
    Onnx__NodeProto *n = node(g, "Conv", name, all, out);
    attr_ints(n, "kernel_shape", 2, (int64_t[]){k, k});
    attr_ints(n, "strides", 2, (int64_t[]){stride, stride});
    attr_ints(n, "pads", 4, (int64_t[]){k / 2, k / 2, k / 2, k / 2});
    if (group > 1) attr_int(n, "group", group);
    return n;
}

void arena_release(void) {
    arena_free();
    free(arena);
    arena = NULL;
    arena_cap = 0;
}
