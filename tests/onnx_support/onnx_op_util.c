/* onnx_op_util.c — one-node ONNX models packed in memory with protobuf-c, the tensors fed to them
 * and the checks of what they compute, for the operator tests of the signal, quantized, training
 * and text families (test_onnx_signal, test_onnx_quant, test_onnx_train, test_onnx_text) and
 * their allocation-failure sweep (test_onnx_ops_sweep). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_op_util.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ one-node models in memory
 * Every protobuf part is calloc'ed and listed; model_free frees the list. */
enum { MAX_PARTS = 1024, MAX_IO = 16 };
static void *parts[MAX_PARTS];
static int n_parts;

void *part(size_t size) {
    void *p = calloc(1, size ? size : 1);
    if (!p || n_parts == MAX_PARTS) abort(); /* a test bug, not a library error */
    return parts[n_parts++] = p;
}

char *text(const char *s) { return strcpy(part(strlen(s) + 1), s); }

void model_free(void) {
    while (n_parts) free(parts[--n_parts]);
}

/* space-separated names into a list ("-" is an absent optional input) */
static char **name_list(const char *spaced, size_t *count) {
    char **v = part(MAX_IO * sizeof *v), *copy = text(spaced);
    *count = 0;
    for (char *tok = strtok(copy, " "); tok && *count < MAX_IO; tok = strtok(NULL, " "))
        v[(*count)++] = strcmp(tok, "-") ? tok : text("");
    return v;
}

static Onnx__ValueInfoProto **untyped(const char *spaced, size_t *count) {
    char **names = name_list(spaced, count);
    Onnx__ValueInfoProto **v = part(MAX_IO * sizeof *v);
    for (size_t i = 0; i < *count; i++) {
        v[i] = part(sizeof **v);
        onnx__value_info_proto__init(v[i]);
        v[i]->name = names[i];
    }
    return v;
}

void import(model *b, const char *domain, int version) {
    Onnx__OperatorSetIdProto *o = part(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = text(domain);
    o->has_version = 1;
    o->version = version;
    b->m.opset_import[b->m.n_opset_import++] = o;
}

/* Appends the node `op` (in `domain`, "" for the default one) reading `ins` and writing `outs`;
 * the attribute helpers below write to it. */
void add_node(model *b, const char *op, const char *domain, const char *ins, const char *outs) {
    b->node = part(sizeof *b->node);
    onnx__node_proto__init(b->node);
    b->node->op_type = text(op);
    b->node->name = text(op);
    b->node->domain = text(domain);
    b->node->input = name_list(ins, &b->node->n_input);
    b->node->output = name_list(outs, &b->node->n_output);
    b->node->attribute = part(MAX_IO * sizeof *b->node->attribute);
    b->g.node[b->g.n_node++] = b->node;
}

/* A model with one node `op` (in `domain`) reading the graph inputs `ins` (no types declared: the
 * operator checks them) and writing the graph outputs `outs`; the default domain is imported at
 * `opset`. */
model *model_new(const char *op, const char *domain, int opset, const char *ins, const char *outs) {
    model *b = part(sizeof *b);
    onnx__model_proto__init(&b->m);
    onnx__graph_proto__init(&b->g);
    b->m.has_ir_version = 1;
    b->m.ir_version = 8;
    b->m.graph = &b->g;
    b->m.opset_import = part(4 * sizeof *b->m.opset_import);
    import(b, "", opset);
    b->g.name = text("g");
    b->g.node = part(MAX_IO * sizeof *b->g.node);
    add_node(b, op, domain, ins, outs);
    b->g.input = untyped(ins, &b->g.n_input);
    b->g.output = untyped(outs, &b->g.n_output);
    for (size_t i = 0; i < b->g.n_input; i++) /* absent optional inputs are no graph inputs */
        if (!b->g.input[i]->name[0]) b->g.input[i--] = b->g.input[--b->g.n_input];
    b->g.initializer = part(8 * sizeof *b->g.initializer);
    return b;
}

static Onnx__AttributeProto *attr(model *b, const char *name, int type) {
    Onnx__AttributeProto *a = part(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = text(name);
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    b->node->attribute[b->node->n_attribute++] = a;
    return a;
}
void a_int(model *b, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}
void a_float(model *b, const char *name, float v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}
void a_str(model *b, const char *name, const char *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s = (ProtobufCBinaryData){strlen(v), (uint8_t *)text(v)};
}
void a_ints(model *b, const char *name, size_t k, const int64_t *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = k;
    a->ints = memcpy(part(k * sizeof *v), v, k * sizeof *v);
}
void a_floats(model *b, const char *name, size_t k, const float *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = k;
    a->floats = memcpy(part(k * sizeof *v), v, k * sizeof *v);
}
void a_strs(model *b, const char *name, const char *spaced) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    char **names = name_list(spaced, &a->n_strings);
    a->strings = part(MAX_IO * sizeof *a->strings);
    for (size_t i = 0; i < a->n_strings; i++)
        a->strings[i] = (ProtobufCBinaryData){strlen(names[i]), (uint8_t *)names[i]};
}

/* a float32 initializer (a parameter of the loaded module) */
void init_f32(model *b, const char *name, int64_t n, const float *v) {
    Onnx__TensorProto *t = part(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = text(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = 1;
    t->dims = part(sizeof *t->dims);
    t->dims[0] = n;
    t->n_float_data = (size_t)n;
    t->float_data = memcpy(part((size_t)n * sizeof *v), v, (size_t)n * sizeof *v);
    b->g.initializer[b->g.n_initializer++] = t;
}

void init_8bit(model *b, const char *name, bool s8, int64_t n, const int32_t *v) {
    Onnx__TensorProto *t = part(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = text(name);
    t->has_data_type = 1;
    t->data_type = s8 ? ONNX__TENSOR_PROTO__DATA_TYPE__INT8 : ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    t->n_dims = 1;
    t->dims = part(sizeof *t->dims);
    t->dims[0] = n;
    t->n_int32_data = (size_t)n;
    t->int32_data = memcpy(part((size_t)n * sizeof *v), v, (size_t)n * sizeof *v);
    b->g.initializer[b->g.n_initializer++] = t;
}

ts_module *load(model *b, ts_device dev) {
    size_t len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = part(len);
    onnx__model_proto__pack(&b->m, buf);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = dev});
}

/* ------------------------------------------------------------------ tensors and checks */
ts_tensor *tensor(ts_device dev, ts_dtype dt, ts_shape s, const void *host) {
    return ts_from_data(s, dt, host, (ts_opts){.dtype = dt, .device = dev});
}

/* t as float64 values on the host (malloc'ed; count elements) */
static double *host_f64(ts_tensor *t, int64_t count) {
    double *v = calloc((size_t)count + 1, sizeof *v);
    ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_F64);
    CHECK(h && ts_numel(h) == count && ts_copy_to_host(h, v, (size_t)count * sizeof *v) == TS_OK);
    return v;
}

/* got within tol[i] of want[i] (tol NULL: equal), of dtype dt and shape s */
void check_values(ts_tensor *got, ts_dtype dt, ts_shape s, const double *want, const double *tol,
                  const char *what) {
    CHECK(got != NULL);
    if (!got) return;
    CHECK_EQ(ts_dtype_of(got), dt);
    ts_shape g = ts_shape_of(got);
    bool same = g.ndim == s.ndim;
    for (int d = 0; same && d < s.ndim; d++) same = g.dims[d] == s.dims[d];
    CHECK(same);
    if (!same) return;
    int64_t count = ts_numel(got);
    double *v = host_f64(got, count);
    int bad = 0;
    for (int64_t i = 0; i < count; i++)
        if (tol ? !(fabs(v[i] - want[i]) <= tol[i]) : v[i] != want[i]) {
            if (!bad++)
                printf("%s: [%lld] %.17g, expected %.17g (tol %.3g)\n", what, (long long)i, v[i],
                       want[i], tol ? tol[i] : 0.0);
        }
    CHECK_EQ(bad, 0);
    free(v);
}

/* Runs m with n_in inputs; out[0..n_out-1] get the outputs. */
bool run(ts_module *m, int n_in, ts_tensor **in, int n_out, ts_tensor **out) {
    return m && ts_onnx_run(m, n_in, in, n_out, out) == TS_OK;
}

/* deterministic values in [-1, 1) */
static uint64_t seed = 12345;
double next_value(void) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(seed >> 11) / (double)(1ull << 52) - 1.0;
}

/* ------------------------------------------------------------------ the test programs */
int op_test_main(void (*load_errors)(void), void (*on_device)(ts_device dev)) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_dev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    load_errors();
    for (int d = 0; d < n_dev; d++) on_device(devs[d]);
    return ts_test_finish();
}

/* ------------------------------------------------------------------ errors */
/* loading b fails with code and a message holding `says` */
void refused(model *b, ts_status code, const char *says) {
    ts_module *m = load(b, ts_cpu());
    CHECK(m == NULL);
    CHECK_EQ(ts_error(), code);
    bool named = strstr(ts_error_message(), says) != NULL;
    if (!named) printf("expected '%s' in: %s\n", says, ts_error_message());
    CHECK(named);
    ts_error_clear();
    ts_module_free(m);
    model_free();
}

/* b loads on dev, and running it on inputs fails with code naming the node and `says` */
void fails(model *b, ts_device dev, int n_in, ts_tensor **in, ts_status code, const char *says) {
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    ts_tensor *out[8] = {0};
    CHECK(!run(m, n_in, in, m ? ts_onnx_num_outputs(m) : 0, out));
    CHECK_EQ(ts_error(), code);
    bool named = strstr(ts_error_message(), "onnx: node") && strstr(ts_error_message(), says);
    if (!named) printf("expected the node and '%s' in: %s\n", says, ts_error_message());
    CHECK(named);
    ts_error_clear();
    ts_module_free(m);
    model_free();
}

/* ------------------------------------------------------------------ TfIdfVectorizer
 * A pool of 4 unigrams, 4 bigrams and a trigram, the output columns permuted. */
static const int64_t pool[] = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 6, 7};
static const int64_t levels[] = {0, 4, 12}, columns[] = {0, 5, 2, 3, 4, 1, 6, 7, 8};
const float tfidf_weights[9] = {0.5f, 1.5f, 2.0f, 3.0f, 0.25f, 4.0f, 1.25f, 0.75f, 8.0f};

model *tfidf_model(const tfidf_case *tc) {
    model *b = model_new("TfIdfVectorizer", "", 9, "x", "y");
    a_str(b, "mode", tc->mode);
    a_int(b, "min_gram_length", tc->min), a_int(b, "max_gram_length", tc->max);
    a_int(b, "max_skip_count", tc->skip);
    a_ints(b, "pool_int64s", 15, pool), a_ints(b, "ngram_counts", 3, levels);
    a_ints(b, "ngram_indexes", 9, columns);
    if (tc->weighted) a_floats(b, "weights", 9, tfidf_weights);
    return b;
}
