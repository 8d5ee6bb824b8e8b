/* xformer_util.c — models built node by node on onnx_build.h (protobuf-c), loaded plain or
 * optimized, and the checks of their outputs against float64 references, for the tests of the
 * transformer rewrites and the shape memo (test_onnx_xformer, test_onnx_xformer_grad,
 * test_onnx_memo, test_onnx_xformer_sweep). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"
#include "ts_test.h"
#include "xformer_util.h"

/* ------------------------------------------------------------------ building models
 * On onnx_build.h: every part of a model comes from its arena, freed when the model has been
 * loaded (done). */
Onnx__ModelProto *cur_model;
Onnx__GraphProto *cur;

void begin(int opset) {
    cur = graph();
    cur->name = str("xformer");
    cur_model = model(cur, opset);
    cur_model->producer_name = NULL; /* none: the bytes of a bare model (the sweep loads them) */
}

/* "a b c" -> {"a", "b", "c"} ("-" for an absent optional input) */
static char **words(const char *list, size_t *count) {
    char **v = get(CAP * sizeof *v), *s = str(list);
    *count = 0;
    for (char *w = strtok(s, " "); w; w = strtok(NULL, " "))
        v[(*count)++] = strcmp(w, "-") ? w : "";
    return v;
}

Onnx__NodeProto *op(const char *type, const char *ins, const char *outs) {
    char name[64];
    snprintf(name, sizeof name, "%s_%zu", type, cur->n_node);
    Onnx__NodeProto *n = node(cur, type, name, "", "");
    n->input = words(ins, &n->n_input);
    n->output = words(outs, &n->n_output);
    return n;
}

/* a tensor of `type` (FLOAT: f, INT64: i) with its values in float_data or int64_data */
Onnx__TensorProto *data_tensor(const char *name, int32_t type, int ndim, const int64_t *dims,
                               const float *f, const int64_t *i) {
    Onnx__TensorProto *t = tensor(name, type, ndim, dims, NULL, 0);
    size_t count = 1;
    for (int d = 0; d < ndim; d++) count *= (size_t)dims[d];
    if (type == FLOAT) {
        t->float_data = memcpy(get(count * sizeof *f), f, count * sizeof *f);
        t->n_float_data = count;
    } else {
        t->int64_data = memcpy(get(count * sizeof *i), i, count * sizeof *i);
        t->n_int64_data = count;
    }
    return t;
}

/* a Constant node: a float scalar (rank 0) or [1] (rank 1) */
void constant(const char *out, double v, int rank) {
    const float f = (float)v;
    const int64_t one = 1;
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        data_tensor(out, FLOAT, rank, &one, &f, NULL);
}

void constant_ints(const char *out, int count, const int64_t *v) {
    const int64_t dims = count;
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        data_tensor(out, INT64, 1, &dims, NULL, v);
}

void constant_tensor(const char *out, int ndim, const int64_t *dims, const float *v) {
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        data_tensor(out, FLOAT, ndim, dims, v, NULL);
}

void initializer(const char *name, int ndim, const int64_t *dims, const float *v) {
    add_init(cur, data_tensor(name, FLOAT, ndim, dims, v, NULL));
}

void input(const char *name, int ndim, const int64_t *dims) {
    Onnx__TypeProto *type = tensor_type(FLOAT, ndim, dims);
    for (int d = 0; d < ndim; d++) /* the symbols: the batch first, the sequence length after */
        if (dims[d] == SYM) type->tensor_type->shape->dim[d]->dim_param = str(d ? "len" : "batch");
    add_input(cur, name, type);
}

void output(const char *name) { add_output(cur, name, tensor_type(FLOAT, -1, NULL)); }

/* The model built so far, loaded (optimize or not); NULL with the error. The arena is kept (the
 * same bytes load twice) until done() frees it. */
ts_module *load(bool optimize) {
    size_t len;
    const uint8_t *buf = pack(cur_model, &len);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.optimize = optimize});
}

void done(void) { arena_free(); }

/* ------------------------------------------------------------------ values and checks */
static uint64_t lcg = 0x9e3779b97f4a7c15u;

/* uniform in [-a, a) from a fixed sequence (the same weights on every run) */
void fill(float *v, int n, double a) {
    for (int i = 0; i < n; i++) {
        lcg = lcg * 6364136223846793005u + 1442695040888963407u;
        v[i] = (float)(a * ((double)(lcg >> 11) * 0x1p-53 * 2 - 1));
    }
}

ts_tensor *host_tensor(ts_shape s, const float *v, ts_device dev) {
    return ts_to(ts_from_data(s, TS_F32, v, (ts_opts){0}), dev);
}

/* t's values as doubles (a host array of ts_numel(t); freed by the caller) */
double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *h = malloc(sizeof *h * (size_t)(n > 0 ? n : 1));
    ts_scope_begin();
    ts_tensor *d = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    if (!d || ts_copy_to_host(d, h, sizeof *h * (size_t)n) != TS_OK) memset(h, 0, sizeof *h);
    ts_scope_end();
    return h;
}

/* every |got - want| <= tol (elementwise) */
void check_close(const char *what, ts_tensor *got, const double *want, const double *tol,
                 int64_t n) {
    bool ok = got && ts_numel(got) == n;
    double *g = ok ? host(got) : NULL;
    int64_t bad = -1;
    for (int64_t i = 0; ok && i < n; i++)
        if (!(fabs(g[i] - want[i]) <= tol[i])) bad = i, ok = false;
    ts_test_record(ok);
    if (!ok) {
        if (bad >= 0)
            ts_test_failf(__FILE__, __LINE__, "%s: element %lld is %.9g, want %.9g within %.3g",
                          what, (long long)bad, g[bad], want[bad], tol[bad]);
        else
            ts_test_failf(__FILE__, __LINE__, "%s: no output of %lld values%s", what, (long long)n,
                          ts_test_error_str());
    }
    free(g);
}

/* Runs a model of one output on inputs (device copies made here) */
ts_tensor *run(ts_module *m, int n_in, ts_tensor *const *in) {
    ts_tensor *y = NULL;
    if (ts_onnx_run(m, n_in, in, 1, &y) != TS_OK) return NULL;
    return y;
}

int nodes_of(ts_module *m, const char *type) {
    tso_graph *g = ((tso_model *)m)->graph;
    int count = 0;
    for (int k = 0; k < g->n_nodes; k++) count += !type || !strcmp(g->nodes[k].op_type, type);
    return count;
}
