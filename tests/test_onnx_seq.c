/* test_onnx_seq.c — ONNX sequence and optional values: the public container API (building,
 * reading, freeing, errors), models that take and give sequences and optionals run on cpu and on
 * sim:0 with the elements on that device (SequenceInsert/At/Length/Erase, SplitToSequence,
 * ConcatFromSequence, SequenceMap, Optional*, If with sequence branches, Loop carrying a
 * sequence), the operators' typing errors naming the node, the load-time refusal of a tensor
 * operator reading a sequence, gradients through a sequence, `tessera info`'s text, the
 * SequenceProto / OptionalProto reader on good and cut bytes, and an allocation-failure sweep over
 * a run. The values involved are small integers: every result is exact. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"

#define FLOAT      ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64      ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define BOOL       ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

/* ------------------------------------------------------------------ models, built in memory
 * Every part comes from one pool freed after the model is packed. */
static void *pool[4096];
static int pool_n;

static void *mem(size_t n) {
    if (pool_n == (int)(sizeof pool / sizeof *pool)) abort();
    return pool[pool_n++] = calloc(1, n ? n : 1);
}

static void pool_free(void) {
    while (pool_n) free(pool[--pool_n]);
}

static char *dup(const char *s) { return strcpy(mem(strlen(s) + 1), s); }

/* a NULL-terminated list of names ("": an absent input) */
#define NAMES(...) ((const char *[]){__VA_ARGS__, NULL})
#define NONE       ((const char *[]){NULL})

static char **name_list(const char *const *v, size_t *n) {
    for (*n = 0; v[*n];) (*n)++;
    char **out = mem(*n * sizeof *out);
    for (size_t i = 0; i < *n; i++) out[i] = dup(v[i]);
    return out;
}

/* A tensor type of element type elem, rank ndim with symbolic dims "N" (ndim < 0: no shape). */
static Onnx__TypeProto *tensor_t(int32_t elem, int ndim) {
    Onnx__TypeProto *tp = mem(sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = mem(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (ndim >= 0) {
        tt->shape = mem(sizeof *tt->shape);
        onnx__tensor_shape_proto__init(tt->shape);
        tt->shape->n_dim = (size_t)ndim;
        tt->shape->dim = mem((size_t)ndim * sizeof *tt->shape->dim);
        for (int i = 0; i < ndim; i++) {
            Onnx__TensorShapeProto__Dimension *d = mem(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = dup("N");
            tt->shape->dim[i] = d;
        }
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    return tp;
}

static Onnx__TypeProto *seq_t(Onnx__TypeProto *elem) {
    Onnx__TypeProto *tp = mem(sizeof *tp);
    onnx__type_proto__init(tp);
    tp->sequence_type = mem(sizeof *tp->sequence_type);
    onnx__type_proto__sequence__init(tp->sequence_type);
    tp->sequence_type->elem_type = elem;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    return tp;
}

static Onnx__TypeProto *opt_t(Onnx__TypeProto *elem) {
    Onnx__TypeProto *tp = mem(sizeof *tp);
    onnx__type_proto__init(tp);
    tp->optional_type = mem(sizeof *tp->optional_type);
    onnx__type_proto__optional__init(tp->optional_type);
    tp->optional_type->elem_type = elem;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
    return tp;
}

static Onnx__GraphProto *new_graph(void) {
    Onnx__GraphProto *g = mem(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = dup("g");
    g->node = mem(64 * sizeof *g->node);
    g->input = mem(16 * sizeof *g->input);
    g->output = mem(16 * sizeof *g->output);
    g->initializer = mem(16 * sizeof *g->initializer);
    return g;
}

static Onnx__ValueInfoProto *vinfo(const char *name, Onnx__TypeProto *type) {
    Onnx__ValueInfoProto *v = mem(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = dup(name);
    v->type = type;
    return v;
}

static void input(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type) {
    g->input[g->n_input++] = vinfo(name, type);
}

static void output(Onnx__GraphProto *g, const char *name, Onnx__TypeProto *type) {
    g->output[g->n_output++] = vinfo(name, type);
}

static Onnx__NodeProto *op(Onnx__GraphProto *g, const char *type, const char *name,
                           const char *const *ins, const char *const *outs) {
    Onnx__NodeProto *n = mem(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = dup(type);
    n->name = dup(name);
    n->input = name_list(ins, &n->n_input);
    n->output = name_list(outs, &n->n_output);
    n->attribute = mem(8 * sizeof *n->attribute);
    g->node[g->n_node++] = n;
    return n;
}

static Onnx__AttributeProto *attribute(Onnx__NodeProto *n, const char *name) {
    Onnx__AttributeProto *a = mem(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = dup(name);
    a->has_type = 1;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void int_attr(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attribute(n, name);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
}

static void graph_attr(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *body) {
    Onnx__AttributeProto *a = attribute(n, name);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    a->g = body;
}

/* a vector of n values of type (float or int64) as raw data */
static Onnx__TensorProto *vector_proto(const char *name, int32_t type, int64_t n, const void *v) {
    size_t size = (size_t)n * (type == INT64 ? 8 : 4);
    Onnx__TensorProto *t = mem(sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = dup(name);
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = 1;
    t->dims = mem(sizeof *t->dims);
    t->dims[0] = n;
    t->has_raw_data = 1;
    t->raw_data.len = size;
    t->raw_data.data = memcpy(mem(size), v, size);
    return t;
}

static void constant(Onnx__GraphProto *g, const char *name, Onnx__TensorProto *value) {
    Onnx__AttributeProto *a = attribute(op(g, "Constant", name, NONE, NAMES(name)), "value");
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = value;
}

/* The model's bytes loaded (on the default device); NULL with the error pending. */
static ts_module *load(Onnx__GraphProto *g, int opset) {
    Onnx__ModelProto *m = mem(sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->graph = g;
    m->opset_import = mem(sizeof *m->opset_import);
    Onnx__OperatorSetIdProto *o = mem(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = dup("");
    o->has_version = 1;
    o->version = opset;
    m->opset_import[m->n_opset_import++] = o;
    size_t len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = mem(len);
    onnx__model_proto__pack(m, buf);
    ts_module *mod = ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){0});
    pool_free();
    return mod;
}

/* ------------------------------------------------------------------ helpers */
static ts_tensor *vec(ts_device dev, int n, const float *v) {
    return ts_from_data((ts_shape){.ndim = 1, .dims = {n}}, TS_F32, v,
                        (ts_opts){.dtype = TS_F32, .device = dev});
}

static ts_tensor *i64(ts_device dev, int64_t v) {
    return ts_scalar((double)v, (ts_opts){.dtype = TS_I64, .device = dev});
}

/* t holds exactly want[0..n-1] (float32 values, any device) */
static bool holds(ts_tensor *t, int n, const float *want) {
    if (!t || ts_numel(t) != n || ts_dtype_of(t) != TS_F32) return false;
    float got[16];
    if (ts_copy_to_host(ts_contiguous(ts_to(t, ts_cpu())), got, (size_t)n * sizeof *got) != TS_OK)
        return false;
    return !memcmp(got, want, (size_t)n * sizeof *got);
}

static bool on(ts_tensor *t, ts_device dev) { return t && tsi_device_eq(tsi_device(t), dev); }

/* ------------------------------------------------------------------ the public API */
static void test_api(ts_device dev) {
    int64_t live = ts_sweep_live_tensors();
    ts_scope_begin();
    ts_tensor *a = vec(dev, 2, (float[]){1, 2}), *b = vec(dev, 3, (float[]){3, 4, 5});
    ts_tensor *s = ts_onnx_sequence(2, (ts_tensor *[]){a, b}, (ts_opts){0});
    CHECK(ts_onnx_is_sequence(s) && !ts_onnx_is_optional(s) && on(s, dev));
    CHECK_EQ(ts_onnx_sequence_length(s), 2);
    CHECK(ts_onnx_sequence_at(s, 0) == a && ts_onnx_sequence_at(s, -1) == b); /* shared */
    CHECK(ts_dtype_of(s) == TS_F32 && ts_numel(s) == 0); /* to tensor ops: an empty tensor */
    CHECK(!ts_onnx_sequence_at(s, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "index 2 is out of range for a sequence of 2 tensors");
    CHECK(!ts_onnx_sequence_at(s, -3));
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_onnx_sequence_length(a), -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "onnx_sequence_length: expected a sequence, got float32 [2] on");
    ts_tensor *e = ts_onnx_sequence(0, NULL, (ts_opts){.dtype = TS_I64, .device = dev});
    CHECK(e && ts_onnx_sequence_length(e) == 0 && ts_dtype_of(e) == TS_I64 && on(e, dev));
    /* typing: one dtype, one device, tensors only */
    ts_tensor *k = i64(dev, 7);
    CHECK(!ts_onnx_sequence(2, (ts_tensor *[]){a, k}, (ts_opts){0}));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "element 1 is int64 [] on");
    if (dev.type != TS_CPU) {
        ts_tensor *c = vec(ts_cpu(), 1, (float[]){0});
        CHECK(!ts_onnx_sequence(2, (ts_tensor *[]){a, c}, (ts_opts){0}));
        CHECK_ERR_HAS(TS_ERR_DEVICE, "element 1 is float32 [1] on cpu; the sequence is on");
    }
    CHECK(!ts_onnx_sequence(1, (ts_tensor *[]){s}, (ts_opts){0}));
    CHECK_ERR_HAS(TS_ERR_ARG, "a sequence holds tensors");
    CHECK(!ts_onnx_sequence(1, (ts_tensor *[]){NULL}, (ts_opts){0}));
    CHECK_ERR(TS_ERR_ARG);
    /* optionals: of a tensor, of a sequence, of nothing */
    ts_tensor *o = ts_onnx_optional(a, (ts_opts){0}), *os = ts_onnx_optional(s, (ts_opts){0});
    ts_tensor *none = ts_onnx_optional(NULL, (ts_opts){.device = dev});
    CHECK(ts_onnx_is_optional(o) && ts_onnx_optional_has_value(o) &&
          ts_onnx_optional_value(o) == a);
    CHECK(ts_onnx_optional_value(os) == s);
    CHECK(none && !ts_onnx_optional_has_value(none) && on(none, dev));
    CHECK_OK();
    CHECK(!ts_onnx_optional_value(none));
    CHECK_ERR_HAS(TS_ERR_STATE, "the optional is empty");
    CHECK(!ts_onnx_optional(o, (ts_opts){0}));
    CHECK_ERR_HAS(TS_ERR_ARG, "element 0 is an optional");
    CHECK(!ts_onnx_optional_has_value(s));
    CHECK_ERR_HAS(TS_ERR_ARG, "expected an optional, got a sequence of 2 float32 tensors");
    /* no container at all: an argument error naming the call, not a wrong kind */
    CHECK_EQ(ts_onnx_sequence_length(NULL), -1);
    CHECK_ERR_HAS(TS_ERR_ARG, "onnx_sequence_length: sequence is NULL");
    CHECK(!ts_onnx_sequence_at(NULL, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "onnx_sequence_at: sequence is NULL");
    CHECK(!ts_onnx_optional_has_value(NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "onnx_optional_has_value: optional is NULL");
    CHECK(!ts_onnx_optional_value(NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "onnx_optional_value: optional is NULL");
    /* a NULL from a failed op is not an empty optional: the error stays */
    tsi_error_set(TS_ERR_SHAPE, "earlier failure");
    CHECK(!ts_onnx_optional(NULL, (ts_opts){0}));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "earlier failure");
    /* the containers hold their elements past the scope that made them */
    ts_tensor *kept = ts_keep(ts_onnx_optional(s, (ts_opts){0}));
    ts_scope_end();
    ts_scope_begin();
    CHECK(ts_onnx_sequence_length(ts_onnx_optional_value(kept)) == 2);
    ts_scope_end();
    ts_release(kept);
    /* and nothing is left once they are gone */
    CHECK_EQ(ts_sweep_live_tensors(), live);
    CHECK_OK();
}

/* ------------------------------------------------------------------ models
 * seq_ops: seq (sequence of float [N]), t (float [N]), pos (int64) ->
 *   s2 = SequenceInsert(seq, t, pos), len = SequenceLength(s2), cat = ConcatFromSequence(s2, 0),
 *   at = SequenceAt(s2, pos), e = SequenceErase(s2) (the last), n_e = SequenceLength(e). */
static ts_module *seq_ops_model(bool typed_t) {
    Onnx__GraphProto *g = new_graph();
    input(g, "seq", seq_t(tensor_t(FLOAT, 1)));
    input(g, "t", typed_t ? tensor_t(FLOAT, 1) : NULL);
    input(g, "pos", tensor_t(INT64, 0));
    op(g, "SequenceInsert", "ins", NAMES("seq", "t", "pos"), NAMES("s2"));
    op(g, "SequenceLength", "len", NAMES("s2"), NAMES("len"));
    int_attr(op(g, "ConcatFromSequence", "cat", NAMES("s2"), NAMES("cat")), "axis", 0);
    op(g, "SequenceAt", "at", NAMES("s2", "pos"), NAMES("at"));
    op(g, "SequenceErase", "erase", NAMES("s2"), NAMES("e"));
    op(g, "SequenceLength", "len_e", NAMES("e"), NAMES("n_e"));
    output(g, "s2", seq_t(tensor_t(FLOAT, 1)));
    output(g, "len", tensor_t(INT64, 0));
    output(g, "cat", tensor_t(FLOAT, 1));
    output(g, "at", tensor_t(FLOAT, 1));
    output(g, "n_e", tensor_t(INT64, 0));
    return load(g, 13);
}

static void test_seq_ops(ts_device dev) {
    ts_module *m = seq_ops_model(true);
    CHECK(m);
    if (!m) return;
    ts_onnx_value_info vi;
    CHECK(ts_onnx_input_info(m, 0, &vi) == TS_OK && vi.kind == TS_ONNX_SEQUENCE &&
          vi.dtype == TS_F32 && vi.ndim == -1);
    CHECK(ts_onnx_output_info(m, 0, &vi) == TS_OK && vi.kind == TS_ONNX_SEQUENCE);
    CHECK(ts_onnx_input_info(m, 1, &vi) == TS_OK && vi.kind == TS_ONNX_TENSOR && vi.ndim == 1);
    int64_t live = ts_sweep_live_tensors();
    ts_scope_begin();
    ts_tensor *a = vec(dev, 2, (float[]){1, 2}), *b = vec(dev, 1, (float[]){3});
    ts_tensor *t = vec(dev, 3, (float[]){5, 6, 7});
    ts_tensor *in[3] = {ts_onnx_sequence(2, (ts_tensor *[]){a, b}, (ts_opts){0}), t, i64(dev, 1)};
    ts_tensor *out[5] = {0};
    CHECK(ts_onnx_run(m, 3, in, 5, out) == TS_OK);
    ts_tensor *s2 = out[0];
    CHECK(ts_onnx_is_sequence(s2) && on(s2, dev) && ts_onnx_sequence_length(s2) == 3);
    /* the elements are the tensors given, in their new order, on the device they were on */
    CHECK(ts_onnx_sequence_at(s2, 0) == a && ts_onnx_sequence_at(s2, 1) == t &&
          ts_onnx_sequence_at(s2, 2) == b);
    CHECK(ts_item(out[1]) == 3 && on(out[1], dev));
    CHECK(holds(out[2], 6, (float[]){1, 2, 5, 6, 7, 3}) && on(out[2], dev));
    CHECK(out[3] == t);
    CHECK(ts_item(out[4]) == 2);
    CHECK_OK();
    /* typing errors, each naming the node */
    in[2] = i64(dev, 3);
    CHECK(ts_onnx_run(m, 3, in, 5, out) != TS_OK && !out[0]);
    CHECK_ERR_HAS(TS_ERR_ARG, "node 'ins' (SequenceInsert): position 3 is out of range for a "
                              "sequence of 2 tensors");
    in[2] = i64(dev, -2); /* inserted at 0: then SequenceAt(-2) of 3 is the old first */
    CHECK(ts_onnx_run(m, 3, in, 5, out) == TS_OK && out[3] == a);
    in[0] = a; /* a tensor where a sequence is expected */
    CHECK(ts_onnx_run(m, 3, in, 5, out) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "node 'ins' (SequenceInsert): input 0 must be a sequence, got "
                              "float32 [2] on");
    in[0] = ts_onnx_sequence(0, NULL, (ts_opts){.device = dev});
    in[2] = i64(dev, 0);
    CHECK(ts_onnx_run(m, 3, in, 5, out) == TS_OK && ts_item(out[1]) == 1 && ts_item(out[4]) == 0);
    ts_scope_end();
    CHECK_EQ(ts_sweep_live_tensors(), live);
    ts_module_free(m);

    /* t undeclared: the operator sees the int64 tensor and refuses it */
    m = seq_ops_model(false);
    ts_scope_begin();
    ts_tensor *in2[3] = {
        ts_onnx_sequence(1, (ts_tensor *[]){vec(dev, 1, (float[]){1})}, (ts_opts){0}), i64(dev, 4),
        i64(dev, 0)};
    ts_tensor *out2[5];
    CHECK(m && ts_onnx_run(m, 3, in2, 5, out2) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "node 'ins' (SequenceInsert): cannot insert int64 [] on");
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* SequenceAt(seq, i) and ConcatFromSequence(seq) at the ends of their ranges. */
static void test_at(ts_device dev) {
    Onnx__GraphProto *g = new_graph();
    input(g, "seq", seq_t(tensor_t(FLOAT, 1)));
    input(g, "i", tensor_t(INT64, 0));
    op(g, "SequenceAt", "at", NAMES("seq", "i"), NAMES("y"));
    int_attr(op(g, "ConcatFromSequence", "cat", NAMES("seq"), NAMES("c")), "axis", 0);
    output(g, "y", tensor_t(FLOAT, 1));
    output(g, "c", tensor_t(FLOAT, 1));
    ts_module *m = load(g, 13);
    CHECK(m);
    if (!m) return;
    ts_scope_begin();
    ts_tensor *a = vec(dev, 1, (float[]){1}), *b = vec(dev, 1, (float[]){2}), *out[2];
    ts_tensor *in[2] = {ts_onnx_sequence(2, (ts_tensor *[]){a, b}, (ts_opts){0}), NULL};
    const int64_t at[4] = {-2, 1, 2, -3};
    for (int k = 0; k < 4; k++) {
        in[1] = i64(dev, at[k]);
        ts_status st = ts_onnx_run(m, 2, in, 2, out);
        if (k < 2) {
            CHECK(st == TS_OK && out[0] == (k ? b : a));
        } else {
            CHECK(st != TS_OK);
            CHECK_ERR_HAS(TS_ERR_ARG, "node 'at' (SequenceAt): position");
        }
        ts_error_clear();
    }
    in[0] = ts_onnx_sequence(0, NULL, (ts_opts){.device = dev});
    in[1] = i64(dev, 0);
    CHECK(ts_onnx_run(m, 2, in, 2, out) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "node 'at' (SequenceAt): position 0 is out of range for a sequence "
                              "of 0 tensors");
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* x (float [6]), sizes (int64 [3]) -> parts = SplitToSequence(x, sizes), ones =
 * SplitToSequence(x, keepdims 0), stacked = ConcatFromSequence(ones, axis -1, new_axis 1),
 * second = SequenceAt(parts, 1), n = SequenceLength(ones). */
static void test_split(ts_device dev) {
    Onnx__GraphProto *g = new_graph();
    input(g, "x", tensor_t(FLOAT, 1));
    input(g, "sizes", tensor_t(INT64, 1));
    op(g, "SplitToSequence", "split", NAMES("x", "sizes"), NAMES("parts"));
    int_attr(op(g, "SplitToSequence", "ones", NAMES("x"), NAMES("ones")), "keepdims", 0);
    Onnx__NodeProto *st = op(g, "ConcatFromSequence", "stack", NAMES("ones"), NAMES("stacked"));
    int_attr(st, "axis", -1);
    int_attr(st, "new_axis", 1);
    constant(g, "one", vector_proto(NULL, INT64, 1, (int64_t[]){1}));
    op(g, "SequenceAt", "second", NAMES("parts", "one"), NAMES("second"));
    op(g, "SequenceLength", "n", NAMES("ones"), NAMES("n"));
    output(g, "parts", seq_t(tensor_t(FLOAT, 1)));
    output(g, "stacked", tensor_t(FLOAT, 1));
    output(g, "second", tensor_t(FLOAT, 1));
    output(g, "n", tensor_t(INT64, 0));
    ts_module *m = load(g, 13);
    CHECK(m);
    if (!m) return;
    ts_scope_begin();
    const float xv[6] = {1, 2, 3, 4, 5, 6};
    ts_tensor *sizes = ts_from_data(TS_SHAPE(3), TS_I64, (int64_t[]){1, 2, 3},
                                    (ts_opts){.dtype = TS_I64, .device = dev});
    ts_tensor *in[2] = {vec(dev, 6, xv), sizes}, *out[4] = {0};
    CHECK(ts_onnx_run(m, 2, in, 4, out) == TS_OK);
    CHECK(ts_onnx_sequence_length(out[0]) == 3 &&
          holds(ts_onnx_sequence_at(out[0], 2), 3, (float[]){4, 5, 6}));
    CHECK(holds(out[1], 6, xv) && ts_ndim(out[1]) == 1); /* six scalars stacked */
    CHECK(holds(out[2], 2, (float[]){2, 3}) && on(out[2], dev));
    CHECK(ts_item(out[3]) == 6);
    in[1] = ts_from_data(TS_SHAPE(2), TS_I64, (int64_t[]){1, 2},
                         (ts_opts){.dtype = TS_I64, .device = dev});
    CHECK(ts_onnx_run(m, 2, in, 4, out) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "node 'split' (SplitToSequence): split sizes do not add up to 6");
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* SequenceMap(xs, y) with body out = Add(a, b): each element of xs plus y. */
static void test_map(ts_device dev) {
    Onnx__GraphProto *body = new_graph();
    input(body, "a", tensor_t(FLOAT, 1));
    input(body, "b", tensor_t(FLOAT, 1));
    op(body, "Add", "add", NAMES("a", "b"), NAMES("o"));
    output(body, "o", tensor_t(FLOAT, 1));
    Onnx__GraphProto *g = new_graph();
    input(g, "xs", seq_t(tensor_t(FLOAT, 1)));
    input(g, "y", tensor_t(FLOAT, 1));
    graph_attr(op(g, "SequenceMap", "map", NAMES("xs", "y"), NAMES("ys")), "body", body);
    output(g, "ys", seq_t(tensor_t(FLOAT, 1)));
    ts_module *m = load(g, 17);
    CHECK(m);
    if (!m) return;
    ts_scope_begin();
    ts_tensor *xs = ts_onnx_sequence(
        2, (ts_tensor *[]){vec(dev, 2, (float[]){1, 2}), vec(dev, 2, (float[]){3, 4})},
        (ts_opts){0});
    ts_tensor *in[2] = {xs, vec(dev, 2, (float[]){10, 20})}, *ys = NULL;
    CHECK(ts_onnx_run(m, 2, in, 1, &ys) == TS_OK && ts_onnx_sequence_length(ys) == 2);
    CHECK(holds(ts_onnx_sequence_at(ys, 0), 2, (float[]){11, 22}) &&
          holds(ts_onnx_sequence_at(ys, 1), 2, (float[]){13, 24}));
    CHECK(on(ts_onnx_sequence_at(ys, 1), dev));
    /* no element: an empty sequence of the body's declared type */
    in[0] = ts_onnx_sequence(0, NULL, (ts_opts){.device = dev});
    CHECK(ts_onnx_run(m, 2, in, 1, &ys) == TS_OK && ts_onnx_sequence_length(ys) == 0);
    in[1] = in[0] = xs; /* two sequences of one length: element by element */
    CHECK(ts_onnx_run(m, 2, in, 1, &ys) == TS_OK &&
          holds(ts_onnx_sequence_at(ys, 1), 2, (float[]){6, 8}));
    in[1] = ts_onnx_sequence(1, (ts_tensor *[]){vec(dev, 2, (float[]){0, 0})}, (ts_opts){0});
    CHECK(ts_onnx_run(m, 2, in, 1, &ys) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "node 'map' (SequenceMap): input 1 holds 1 tensors, input 0 2");
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* x (float [N]), maybe (optional float) -> o = Optional(x), has = OptionalHasElement(o),
 * got = OptionalGetElement(o), none = Optional(type float), has_none = OptionalHasElement(none),
 * from = OptionalGetElement(maybe). */
static void test_optional(ts_device dev) {
    Onnx__GraphProto *g = new_graph();
    input(g, "x", tensor_t(FLOAT, 1));
    input(g, "maybe", opt_t(tensor_t(FLOAT, 1)));
    op(g, "Optional", "opt", NAMES("x"), NAMES("o"));
    op(g, "OptionalHasElement", "has", NAMES("o"), NAMES("has"));
    op(g, "OptionalGetElement", "get", NAMES("o"), NAMES("got"));
    Onnx__AttributeProto *a = attribute(op(g, "Optional", "empty", NONE, NAMES("none")), "type");
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
    a->tp = tensor_t(FLOAT, -1);
    op(g, "OptionalHasElement", "has_none", NAMES("none"), NAMES("has_none"));
    op(g, "OptionalGetElement", "from", NAMES("maybe"), NAMES("from"));
    output(g, "o", opt_t(tensor_t(FLOAT, 1)));
    output(g, "has", tensor_t(BOOL, 0));
    output(g, "got", tensor_t(FLOAT, 1));
    output(g, "has_none", tensor_t(BOOL, 0));
    output(g, "none", opt_t(tensor_t(FLOAT, -1)));
    output(g, "from", tensor_t(FLOAT, 1));
    ts_module *m = load(g, 16);
    CHECK(m);
    if (!m) return;
    ts_scope_begin();
    ts_tensor *x = vec(dev, 2, (float[]){1, 2}), *y = vec(dev, 1, (float[]){9});
    ts_tensor *in[2] = {x, ts_onnx_optional(y, (ts_opts){0})}, *out[6] = {0};
    CHECK(ts_onnx_run(m, 2, in, 6, out) == TS_OK);
    CHECK(ts_onnx_optional_value(out[0]) == x && ts_item(out[1]) == 1 && out[2] == x);
    CHECK(ts_item(out[3]) == 0 && !ts_onnx_optional_has_value(out[4]) && on(out[4], dev));
    CHECK(out[5] == y);
    in[1] = ts_onnx_optional(NULL, (ts_opts){.device = dev});
    CHECK(ts_onnx_run(m, 2, in, 6, out) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "node 'from' (OptionalGetElement): the optional is empty");
    in[1] = ts_onnx_optional(NULL, (ts_opts){.dtype = TS_I64, .device = dev});
    CHECK(ts_onnx_run(m, 2, in, 6, out) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input 'maybe' must be float32");
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* If (cond) then SequenceConstruct(Constant [7]) else SequenceEmpty; the result goes through a
 * Loop of 3 trips that appends the trip number (as float) each time. */
static void test_control_flow(ts_device dev) {
    Onnx__GraphProto *then = new_graph(), *other = new_graph(), *body = new_graph();
    constant(then, "seven", vector_proto(NULL, FLOAT, 1, (float[]){7}));
    op(then, "SequenceConstruct", "make", NAMES("seven"), NAMES("t_out"));
    output(then, "t_out", seq_t(tensor_t(FLOAT, 1)));
    op(other, "SequenceEmpty", "none", NONE, NAMES("e_out"));
    output(other, "e_out", seq_t(tensor_t(FLOAT, 1)));
    input(body, "i", tensor_t(INT64, 0));
    input(body, "c_in", tensor_t(BOOL, 0));
    input(body, "s_in", seq_t(tensor_t(FLOAT, 1)));
    op(body, "Identity", "c", NAMES("c_in"), NAMES("c_out"));
    int_attr(op(body, "Cast", "f", NAMES("i"), NAMES("f")), "to", FLOAT);
    op(body, "Unsqueeze", "u", NAMES("f", "axes"), NAMES("fv"));
    body->initializer[body->n_initializer++] = vector_proto("axes", INT64, 1, (int64_t[]){0});
    op(body, "SequenceInsert", "push", NAMES("s_in", "fv"), NAMES("s_out"));
    output(body, "c_out", tensor_t(BOOL, 0));
    output(body, "s_out", seq_t(tensor_t(FLOAT, 1)));
    Onnx__GraphProto *g = new_graph();
    input(g, "cond", tensor_t(BOOL, 0));
    input(g, "trips", tensor_t(INT64, 0));
    Onnx__NodeProto *n = op(g, "If", "if", NAMES("cond"), NAMES("s"));
    graph_attr(n, "then_branch", then);
    graph_attr(n, "else_branch", other);
    graph_attr(op(g, "Loop", "loop", NAMES("trips", "", "s"), NAMES("r")), "body", body);
    output(g, "r", seq_t(tensor_t(FLOAT, 1)));
    ts_module *m = load(g, 13);
    CHECK(m);
    if (!m) return;
    ts_scope_begin();
    for (int c = 0; c < 2; c++) {
        ts_tensor *in[2] = {ts_scalar(c, (ts_opts){.dtype = TS_BOOL, .device = dev}), i64(dev, 3)};
        ts_tensor *r = NULL;
        CHECK(ts_onnx_run(m, 2, in, 1, &r) == TS_OK && on(r, dev));
        CHECK_EQ(ts_onnx_sequence_length(r), 3 + c);
        for (int i = 0; i < 3; i++) CHECK(holds(ts_onnx_sequence_at(r, c + i), 1, (float[]){i}));
        if (c) CHECK(holds(ts_onnx_sequence_at(r, 0), 1, (float[]){7}));
    }
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* ------------------------------------------------------------------ load-time refusals */
/* g must not load (a model that does is freed) */
static bool refused(Onnx__GraphProto *g, int opset) {
    ts_module *m = load(g, opset);
    ts_module_free(m);
    return !m;
}

static void test_refusals(void) {
    Onnx__GraphProto *g = new_graph();
    input(g, "x", tensor_t(FLOAT, 1));
    op(g, "SequenceEmpty", "empty", NONE, NAMES("s"));
    op(g, "Identity", "same", NAMES("s"), NAMES("s2"));
    op(g, "Add", "add", NAMES("x", "s2"), NAMES("y"));
    output(g, "y", tensor_t(FLOAT, 1));
    CHECK(refused(g, 13));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "node 'add' (Add): input 1 ('s2') is a sequence or an optional; "
                                 "Add takes a tensor there");
    g = new_graph();
    input(g, "s", seq_t(tensor_t(FLOAT, 1)));
    op(g, "Relu", "relu", NAMES("s"), NAMES("y"));
    output(g, "y", tensor_t(FLOAT, 1));
    CHECK(refused(g, 13));
    CHECK_ERR_HAS(TS_ERR_FORMAT, "node 'relu' (Relu): input 0 ('s')");
    g = new_graph();
    input(g, "o", opt_t(opt_t(tensor_t(FLOAT, 1))));
    op(g, "Identity", "id", NAMES("o"), NAMES("y"));
    output(g, "y", NULL);
    CHECK(refused(g, 16));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "'o' is an optional of optionals; Tessera's optionals hold");
    g = new_graph();
    Onnx__NodeProto *e = op(g, "SequenceEmpty", "empty", NONE, NAMES("s"));
    int_attr(e, "dtype", ONNX__TENSOR_PROTO__DATA_TYPE__STRING);
    output(g, "s", NULL);
    CHECK(refused(g, 13));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "node 'empty' (SequenceEmpty): dtype STRING");
}

/* ------------------------------------------------------------------ gradients and describe */
static void test_grad_and_info(ts_device dev) {
    ts_module *m = seq_ops_model(true);
    CHECK(m);
    if (!m) return;
    char *text = ts_onnx_describe(m);
    CHECK(text && strstr(text, "  seq: sequence of float32 [N]\n") &&
          strstr(text, "  s2: sequence of float32 [N]\n") && strstr(text, "  t: float32 [N]\n"));
    free(text);
    ts_scope_begin();
    ts_tensor *a = vec(dev, 2, (float[]){1, 2}), *t = vec(dev, 1, (float[]){3});
    ts_set_requires_grad(a, true);
    ts_set_requires_grad(t, true);
    ts_tensor *in[3] = {ts_onnx_sequence(1, &a, (ts_opts){0}), t, i64(dev, 1)}, *out[3] = {0};
    CHECK(ts_onnx_run(m, 3, in, 3, out) == TS_OK);
    /* d/d(a, t) of sum(cat * [1 2 3]) = the weights each element met */
    ts_backward(ts_sum(ts_mul(out[2], vec(dev, 3, (float[]){1, 2, 3}))));
    CHECK(holds(ts_grad(a), 2, (float[]){1, 2}) && holds(ts_grad(t), 1, (float[]){3}));
    ts_scope_end();
    ts_module_free(m);
    CHECK_OK();
}

/* ------------------------------------------------------------------ SequenceProto / OptionalProto
 * Written here field by field (Debian ships no onnx-data.proto to generate them from). */
typedef struct bytes {
    uint8_t b[512];
    size_t n;
} bytes;

static void put_varint(bytes *o, uint64_t v) {
    do {
        o->b[o->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void put_bytes(bytes *o, uint32_t field, const void *data, size_t n) {
    put_varint(o, (uint64_t)field << 3 | 2);
    put_varint(o, n);
    memcpy(o->b + o->n, data, n);
    o->n += n;
}

static void put_tensor(bytes *o, uint32_t field, int64_t n, const float *v) {
    uint8_t buf[256];
    size_t len = onnx__tensor_proto__pack(vector_proto("e", FLOAT, n, v), buf);
    put_bytes(o, field, buf, len);
    pool_free();
}

static void test_proto(void) {
    int64_t live = ts_sweep_live_tensors();
    bytes seq = {0}, opt = {0}, none = {0}, maps = {0};
    put_bytes(&seq, 1, "s", 1);
    put_varint(&seq, 2 << 3);
    put_varint(&seq, 1); /* elem_type TENSOR */
    put_tensor(&seq, 3, 2, (float[]){1, 2});
    put_tensor(&seq, 3, 1, (float[]){3});
    put_bytes(&opt, 5, seq.b, seq.n); /* an optional holding the sequence */
    put_varint(&none, 2 << 3);
    put_varint(&none, 1);
    put_bytes(&maps, 6, "", 0);
    ts_scope_begin();
    ts_tensor *s = tso_value_parse(seq.b, seq.n, TS_ONNX_SEQUENCE, TS_DTYPE_DEFAULT, ts_sim(0));
    CHECK(ts_onnx_sequence_length(s) == 2 && on(s, ts_sim(0)) &&
          holds(ts_onnx_sequence_at(s, 0), 2, (float[]){1, 2}));
    ts_tensor *o = tso_value_parse(opt.b, opt.n, TS_ONNX_OPTIONAL, TS_DTYPE_DEFAULT, ts_cpu());
    CHECK(ts_onnx_sequence_length(ts_onnx_optional_value(o)) == 2);
    ts_tensor *e = tso_value_parse(none.b, none.n, TS_ONNX_OPTIONAL, TS_I64, ts_cpu());
    CHECK(e && !ts_onnx_optional_has_value(e) && ts_dtype_of(e) == TS_I64);
    /* an empty sequence: its element type is the model's declaration, given by the caller */
    e = tso_value_parse(none.b, none.n, TS_ONNX_SEQUENCE, TS_I64, ts_sim(0));
    CHECK(e && ts_onnx_sequence_length(e) == 0 && ts_dtype_of(e) == TS_I64 && on(e, ts_sim(0)));
    CHECK(!tso_value_parse(maps.b, maps.n, TS_ONNX_SEQUENCE, 0, ts_cpu()));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "the SequenceProto holds sequences, maps");
    /* every cut of the optional: read or refused cleanly */
    int refusals = 0;
    for (size_t n = 0; n < opt.n; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees a read past the end */
        memcpy(copy, opt.b, n);
        ts_tensor *v = tso_value_parse(copy, n, TS_ONNX_OPTIONAL, 0, ts_cpu());
        refusals += !v;
        CHECK(v || ts_error() == TS_ERR_FORMAT);
        ts_error_clear();
        free(copy);
    }
    CHECK(refusals > 0);
    /* a field of an unknown number is skipped whole: fixed64 (wire type 1) and fixed32 (5); one
     * cut short is refused, however few of its bytes are missing */
    for (int wire = 1; wire <= 5; wire += 4) {
        const size_t width = wire == 1 ? 8 : 4;
        for (size_t have = 0; have <= width; have++) {
            bytes b = seq;
            put_varint(&b, 9u << 3 | (unsigned)wire);
            memset(b.b + b.n, 0x5a, have);
            b.n += have;
            uint8_t *copy = malloc(b.n); /* exact size: ASan sees a read past the end */
            memcpy(copy, b.b, b.n);
            ts_tensor *v = tso_value_parse(copy, b.n, TS_ONNX_SEQUENCE, 0, ts_cpu());
            if (have == width)
                CHECK(ts_onnx_sequence_length(v) == 2);
            else
                CHECK_ERR_HAS(TS_ERR_FORMAT, "SequenceProto");
            free(copy);
        }
    }
    ts_scope_end();
    CHECK_OK();
    CHECK_EQ(ts_sweep_live_tensors(), live); /* the parsed sequences' items released with them */
}

/* ------------------------------------------------------------------ an allocation-failure sweep */
typedef struct sweep_st {
    ts_module *m;
    ts_tensor *a, *t;
} sweep_st;

static void *sweep_setup(void) {
    sweep_st *s = calloc(1, sizeof *s);
    s->m = seq_ops_model(true);
    s->a = ts_full(TS_SHAPE(2), 1, (ts_opts){0});
    s->t = ts_full(TS_SHAPE(1), 2, (ts_opts){0});
    return s;
}

static bool sweep_run(void *p) {
    sweep_st *s = p;
    ts_scope_begin();
    ts_tensor *in[3] = {ts_onnx_sequence(1, &s->a, (ts_opts){0}), s->t, i64(ts_cpu(), 0)};
    ts_tensor *out[5] = {0};
    bool ok = ts_onnx_run(s->m, 3, in, 5, out) == TS_OK && holds(out[2], 3, (float[]){2, 1, 1}) &&
              ts_onnx_sequence_length(out[0]) == 2;
    ts_scope_end();
    return ok && !ts_error();
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m);
    ts_release(s->a);
    ts_release(s->t);
    free(s);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_devs = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < n_devs; d++) {
        printf("on %s\n", ts_device_str(devs[d]));
        test_api(devs[d]);
        test_seq_ops(devs[d]);
        test_at(devs[d]);
        test_split(devs[d]);
        test_map(devs[d]);
        test_optional(devs[d]);
        test_control_flow(devs[d]);
        test_grad_and_info(devs[d]);
    }
    test_refusals();
    test_proto();
    ts_sweep_case run = {.name = "onnx_run with sequences",
                         .setup = sweep_setup,
                         .run = sweep_run,
                         .teardown = sweep_teardown};
    ts_sweep_stats st = ts_fault_sweep(&run, 400);
    CHECK(st.allocations > 0 && st.errors > 0);
    return ts_test_finish();
}
#endif
