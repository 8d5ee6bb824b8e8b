/* test_onnx_xformer.c — the transformer rewrites of ts_onnx_opts.optimize
 * (src/onnx/rewrite_xformer.c) and the shape memo (src/onnx/memo.c) on small models packed here
 * with protobuf-c: GELU's erf form in the orderings exporters write, MatMul + Add / Gemm / a bare
 * MatMul with initializer weights, attention as torch.onnx writes it (scales from the query's
 * shape, the causal mask built from Shape / Trilu / Where) and as Tessera's exporter writes it
 * (constant scale and mask), and the forms that must be left alone (an intermediate with a second
 * reader, constants that are not GELU's, inputs that are not initializers) or must keep their mask
 * (a mask that is not causal). Each model runs optimized and plain on cpu and sim:0 against a
 * float64 reference computed here, within a bound from the float32 arithmetic; the node count
 * falls by what was rewritten; gradients reach the inputs and the weights. The memo: same-shape
 * runs reuse its values, other batch sizes and sequence lengths get their own, data-dependent
 * shapes are never kept, threads share it. An allocation-failure sweep loads and runs an
 * optimized model. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/memo.h"
#include "onnx/onnx_internal.h"

#define U      0x1p-24 /* float32's unit roundoff */
#define FLOAT  ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64  ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define SYM    (-1) /* a symbolic dimension in an input's shape */
#define BIGEND INT64_MAX

/* ------------------------------------------------------------------ building models
 * Every part of a model comes from one arena, freed when the model has been loaded. */
static void *parts[4096];
static int n_parts;

static void *part(size_t size) {
    if (n_parts == (int)(sizeof parts / sizeof *parts)) abort(); /* the test's own limit */
    return parts[n_parts++] = calloc(1, size ? size : 1);
}

static char *text(const char *s) { return strcpy(part(strlen(s) + 1), s); }

enum { MAX_FIELD = 64 };
static Onnx__ModelProto *cur_model;
static Onnx__GraphProto *cur;

static void begin(int opset) {
    cur = part(sizeof *cur);
    onnx__graph_proto__init(cur);
    cur->name = text("xformer");
    cur->node = part(MAX_FIELD * sizeof *cur->node);
    cur->initializer = part(MAX_FIELD * sizeof *cur->initializer);
    cur->input = part(MAX_FIELD * sizeof *cur->input);
    cur->output = part(MAX_FIELD * sizeof *cur->output);
    cur_model = part(sizeof *cur_model);
    onnx__model_proto__init(cur_model);
    cur_model->has_ir_version = 1;
    cur_model->ir_version = 8;
    cur_model->graph = cur;
    Onnx__OperatorSetIdProto *o = part(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = text("");
    o->has_version = 1;
    o->version = opset;
    cur_model->opset_import = part(sizeof *cur_model->opset_import);
    cur_model->opset_import[cur_model->n_opset_import++] = o;
}

/* "a b c" -> {"a", "b", "c"} ("-" for an absent optional input) */
static char **words(const char *list, size_t *count) {
    char **v = part(MAX_FIELD * sizeof *v), *s = text(list);
    *count = 0;
    for (char *w = strtok(s, " "); w; w = strtok(NULL, " "))
        v[(*count)++] = strcmp(w, "-") ? w : "";
    return v;
}

static Onnx__NodeProto *op(const char *type, const char *ins, const char *outs) {
    Onnx__NodeProto *n = part(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = text(type);
    char name[64];
    snprintf(name, sizeof name, "%s_%zu", type, cur->n_node);
    n->name = text(name);
    n->input = words(ins, &n->n_input);
    n->output = words(outs, &n->n_output);
    n->attribute = part(MAX_FIELD * sizeof *n->attribute);
    cur->node[cur->n_node++] = n;
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name,
                                  Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = part(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = text(name);
    a->has_type = 1;
    a->type = type;
    return n->attribute[n->n_attribute++] = a;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = memcpy(part((size_t)count * sizeof *v), v, (size_t)count * sizeof *v);
    a->n_ints = (size_t)count;
}

/* a tensor of `type` (FLOAT: f, INT64: i) with count values */
static Onnx__TensorProto *tensor(const char *name, int32_t type, int ndim, const int64_t *dims,
                                 const float *f, const int64_t *i) {
    Onnx__TensorProto *t = part(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = text(name);
    t->has_data_type = 1;
    t->data_type = type;
    size_t count = 1;
    t->dims = part((size_t)(ndim + 1) * sizeof *dims);
    for (t->n_dims = 0; t->n_dims < (size_t)ndim; t->n_dims++)
        count *= (size_t)(t->dims[t->n_dims] = dims[t->n_dims]);
    if (type == FLOAT) {
        t->float_data = memcpy(part(count * sizeof *f), f, count * sizeof *f);
        t->n_float_data = count;
    } else {
        t->int64_data = memcpy(part(count * sizeof *i), i, count * sizeof *i);
        t->n_int64_data = count;
    }
    return t;
}

/* a Constant node: a float scalar (rank 0) or [1] (rank 1) */
static void constant(const char *out, double v, int rank) {
    const float f = (float)v;
    const int64_t one = 1;
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(out, FLOAT, rank, &one, &f, NULL);
}

static void constant_ints(const char *out, int count, const int64_t *v) {
    const int64_t dims = count;
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(out, INT64, 1, &dims, NULL, v);
}

static void constant_tensor(const char *out, int ndim, const int64_t *dims, const float *v) {
    Onnx__NodeProto *n = op("Constant", "", out);
    attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor(out, FLOAT, ndim, dims, v, NULL);
}

static void initializer(const char *name, int ndim, const int64_t *dims, const float *v) {
    cur->initializer[cur->n_initializer++] = tensor(name, FLOAT, ndim, dims, v, NULL);
}

static Onnx__ValueInfoProto *value(const char *name, int32_t type, int ndim, const int64_t *dims) {
    Onnx__TypeProto__Tensor *tt = part(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = type;
    if (ndim >= 0) {
        Onnx__TensorShapeProto *sh = part(sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->dim = part((size_t)(ndim + 1) * sizeof *sh->dim);
        for (sh->n_dim = 0; sh->n_dim < (size_t)ndim; sh->n_dim++) {
            Onnx__TensorShapeProto__Dimension *d = part(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[sh->n_dim] == SYM) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = text(sh->n_dim ? "len" : "batch");
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[sh->n_dim];
            }
            sh->dim[sh->n_dim] = d;
        }
        tt->shape = sh;
    }
    Onnx__TypeProto *type_proto = part(sizeof *type_proto);
    onnx__type_proto__init(type_proto);
    type_proto->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type_proto->tensor_type = tt;
    Onnx__ValueInfoProto *v = part(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = text(name);
    v->type = type_proto;
    return v;
}

static void input(const char *name, int ndim, const int64_t *dims) {
    cur->input[cur->n_input++] = value(name, FLOAT, ndim, dims);
}

static void output(const char *name) { cur->output[cur->n_output++] = value(name, FLOAT, -1, 0); }

/* The model built so far, loaded (optimize or not); NULL with the error. The arena is kept (the
 * same bytes load twice) until done() frees it. */
static ts_module *load(bool optimize) {
    size_t len = onnx__model_proto__get_packed_size(cur_model);
    uint8_t *buf = part(len);
    onnx__model_proto__pack(cur_model, buf);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.optimize = optimize});
}

static void done(void) {
    for (int i = 0; i < n_parts; i++) free(parts[i]);
    n_parts = 0;
}

/* ------------------------------------------------------------------ values and checks */
static uint64_t lcg = 0x9e3779b97f4a7c15u;

/* uniform in [-a, a) from a fixed sequence (the same weights on every run) */
static void fill(float *v, int n, double a) {
    for (int i = 0; i < n; i++) {
        lcg = lcg * 6364136223846793005u + 1442695040888963407u;
        v[i] = (float)(a * ((double)(lcg >> 11) * 0x1p-53 * 2 - 1));
    }
}

static ts_tensor *host_tensor(ts_shape s, const float *v, ts_device dev) {
    return ts_to(ts_from_data(s, TS_F32, v, (ts_opts){0}), dev);
}

/* t's values as doubles (a host array of ts_numel(t); freed by the caller) */
static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *h = malloc(sizeof *h * (size_t)(n > 0 ? n : 1));
    ts_scope_begin();
    ts_tensor *d = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    if (!d || ts_copy_to_host(d, h, sizeof *h * (size_t)n) != TS_OK) memset(h, 0, sizeof *h);
    ts_scope_end();
    return h;
}

/* every |got - want| <= tol (elementwise) */
static void check_close(const char *what, ts_tensor *got, const double *want, const double *tol,
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

/* the nodes of the loaded graph, and how many are of a type */
static int nodes_of(ts_module *m, const char *type) {
    tso_graph *g = ((tso_model *)m)->graph;
    int count = 0;
    for (int k = 0; k < g->n_nodes; k++) count += !type || !strcmp(g->nodes[k].op_type, type);
    return count;
}

static bool same_shape(ts_shape a, ts_shape b) {
    bool same = a.ndim == b.ndim;
    for (int d = 0; same && d < a.ndim; d++) same = a.dims[d] == b.dims[d];
    return same;
}

/* Runs a model of one output on inputs (device copies made here) */
static ts_tensor *run(ts_module *m, int n_in, ts_tensor *const *in) {
    ts_tensor *y = NULL;
    if (ts_onnx_run(m, n_in, in, 1, &y) != TS_OK) return NULL;
    return y;
}

/* A case: the model built by `build`, inputs made by the case, the float64 reference and bound
 * of each output element. Runs plain and optimized on each device, twice (the memo's second run).
 */
typedef struct xcase {
    const char *name;
    int n_in;
    ts_shape in_shape[4];
    float *in_vals[4];
    int64_t n_out;
    double *want, *tol;
    ts_shape out_shape; /* the output's shape (ndim 0: not checked) */
    int fused;          /* fused nodes the optimized model has (of fused_type) */
    int removed;        /* nodes fewer than the plain model */
    const char *fused_type;
} xcase;

static void run_case(const xcase *c) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_module *plain = load(false), *opt = load(true);
    CHECK(plain && opt);
    if (!plain || !opt) {
        printf("  %s: %s\n", c->name, ts_error_message());
        ts_error_clear();
        ts_module_free(plain), ts_module_free(opt);
        return;
    }
    const int fused = nodes_of(opt, c->fused_type),
              removed = nodes_of(plain, NULL) - nodes_of(opt, NULL);
    CHECK_EQ(fused, c->fused);
    CHECK_EQ(removed, c->removed);
    printf("  %-34s %3d -> %3d nodes, %d %s\n", c->name, nodes_of(plain, NULL), nodes_of(opt, NULL),
           fused, c->fused_type);
    for (int d = 0; d < nd; d++) {
        ts_module_to(plain, devs[d]);
        ts_module_to(opt, devs[d]);
        for (int rep = 0; rep < 2; rep++) { /* the second in inference mode, from the memo */
            if (rep) ts_no_grad_begin();
            ts_scope_begin();
            ts_tensor *in[4];
            for (int i = 0; i < c->n_in; i++)
                in[i] = host_tensor(c->in_shape[i], c->in_vals[i], devs[d]);
            char what[160];
            snprintf(what, sizeof what, "%s plain on %s, run %d", c->name, ts_device_str(devs[d]),
                     rep);
            check_close(what, run(plain, c->n_in, in), c->want, c->tol, c->n_out);
            snprintf(what, sizeof what, "%s optimized on %s, run %d", c->name,
                     ts_device_str(devs[d]), rep);
            ts_tensor *y = run(opt, c->n_in, in);
            check_close(what, y, c->want, c->tol, c->n_out);
            if (c->out_shape.ndim) CHECK(y && same_shape(ts_shape_of(y), c->out_shape));
            ts_error_clear();
            ts_scope_end();
            if (rep) ts_no_grad_end();
        }
    }
    ts_module_free(plain);
    ts_module_free(opt);
}

/* ------------------------------------------------------------------ GELU */
typedef enum gelu_order {
    G_TORCH,      /* Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5): torch.onnx, Tessera's export */
    G_HALF_FIRST, /* Mul(Mul(x, 0.5), Add(1, Erf(Div(x, sqrt2)))): x * 0.5 * (1 + erf(...)) */
    G_RSQRT,      /* Mul(0.5, Mul(Add(Erf(Mul(1/sqrt2, x)), 1), x)): the Mul form, constants left */
    G_GROUPED,    /* Mul(x, Mul(0.5, Add(...))): x * (0.5 * (1 + erf(...))) */
} gelu_order;

typedef struct gelu_spec {
    const char *name;
    gelu_order order;
    double half, sqrt2, one; /* the constants written */
    bool erf_out;            /* the Erf's output is a graph output too: left alone */
    int one_rank;            /* the 1's rank (3: broadcasts x [N, 8] up: the replay) */
    bool fused;
} gelu_spec;

static void build_gelu(const gelu_spec *s) {
    begin(17);
    input("x", 2, (int64_t[]){SYM, 8});
    constant("half", s->half, 0);
    constant("one", s->one, 0);
    if (s->one_rank == 3) {
        const float one = (float)s->one;
        constant_tensor("one3", 3, (int64_t[]){1, 1, 1}, &one);
    }
    const char *one = s->one_rank == 3 ? "one3" : "one";
    char add[64];
    if (s->order == G_RSQRT) {
        constant("rs", 1.0 / s->sqrt2, 0);
        op("Mul", "rs x", "d");
    } else {
        constant("s2", s->sqrt2, 0);
        op("Div", "x s2", "d");
    }
    op("Erf", "d", "e");
    snprintf(add, sizeof add, s->order == G_HALF_FIRST ? "%s e" : "e %s", one);
    op("Add", add, "a");
    /* the two Muls of each order: their inputs and output */
    static const char *const muls[][2][2] = {
        [G_TORCH] = {{"x a", "m"}, {"m half", "y"}},
        [G_HALF_FIRST] = {{"x half", "m"}, {"m a", "y"}},
        [G_RSQRT] = {{"a x", "m"}, {"half m", "y"}},
        [G_GROUPED] = {{"half a", "m"}, {"x m", "y"}},
    };
    for (int i = 0; i < 2; i++) op("Mul", muls[s->order][i][0], muls[s->order][i][1]);
    output("y");
    if (s->erf_out) output("e");
}

static void test_gelu(void) {
    printf("GELU\n");
    const double r2 = sqrt(2.0);
    const gelu_spec specs[] = {
        {"gelu torch order", G_TORCH, 0.5, r2, 1, false, 0, true},
        {"gelu x * 0.5 first", G_HALF_FIRST, 0.5, r2, 1, false, 0, true},
        {"gelu Mul by 1/sqrt2, constants left", G_RSQRT, 0.5, r2, 1, false, 0, true},
        {"gelu x * (0.5 * (1 + erf))", G_GROUPED, 0.5, r2, 1, false, 0, true},
        {"gelu 1 of rank 3 (replayed)", G_TORCH, 0.5, r2, 1, false, 3, true},
        {"gelu with 0.6: left alone", G_TORCH, 0.6, r2, 1, false, 0, false},
        {"gelu with sqrt2 = 1.5: left alone", G_TORCH, 0.5, 1.5, 1, false, 0, false},
        {"gelu with 1 + 1e-6: left alone", G_TORCH, 0.5, r2, 1 + 1e-6, false, 0, false},
        {"gelu Erf read twice: left alone", G_TORCH, 0.5, r2, 1, true, 0, false},
    };
    enum { N = 3, C = 8 };
    float x[N * C];
    fill(x, N * C, 4.0);
    x[0] = 0, x[1] = -30, x[2] = 30; /* erf saturates; GELU's tails */
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const gelu_spec *s = &specs[i];
        double want[N * C], tol[N * C];
        for (int j = 0; j < N * C; j++) {
            const double v = x[j];
            want[j] = v * s->half * (s->one + erf(v / s->sqrt2));
            /* each of the five ops (or ts_gelu) rounds: a few units of the result, and the erf's
             * few units (its argument's rounding through a slope <= 2 / sqrt(pi)) times x / 2 */
            tol[j] = 16 * U * (fabs(want[j]) + fabs(v)) + 1e-37;
        }
        build_gelu(s);
        xcase c = {.name = s->name,
                   .n_in = 1,
                   .in_shape = {TS_SHAPE(N, C)},
                   .in_vals = {x},
                   .n_out = N * C,
                   .out_shape = s->one_rank == 3 ? TS_SHAPE(1, N, C) : TS_SHAPE(N, C),
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->fused ? 4 : 0,
                   .fused_type = "tessera.Gelu"};
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ linear */
typedef enum lin_form {
    L_MATMUL_ADD,   /* Add(MatMul(x, W), b) */
    L_BIAS_FIRST,   /* Add(b, MatMul(x, W)): torch.onnx's order */
    L_GEMM_T,       /* Gemm(x, W^T, b, transB=1): nn.Linear on a matrix */
    L_GEMM,         /* Gemm(x, W, b) */
    L_TRANSPOSED_W, /* Add(MatMul(x, Transpose(W^T)), b): Tessera's exporter */
    L_IDENTITY_W,   /* Add(MatMul(x, Identity(W)), b): a weight torch.onnx shared */
    L_BARE,         /* MatMul(x, W): no bias (a tied LM head) */
    L_X_TRANSPOSED, /* Add(MatMul(Transpose(x0, [1, 0, 2]), W), b): attention's projections */
} lin_form;

typedef struct lin_spec {
    const char *name;
    lin_form form;
    bool mm_out;  /* the MatMul's output is a graph output too: the Add stays */
    bool b_input; /* the bias is a graph input, not an initializer: the Add stays */
    bool w_input; /* the weight is a graph input: nothing is rewritten */
    int fused, removed;
} lin_spec;

enum { LB = 2, LR = 3, LK = 5, LN = 6 }; /* x [LB, LR, LK] (Gemm: [LB * LR, LK]), W [LK, LN] */
static float lin_w[LK * LN], lin_wt[LN * LK], lin_b[LN];

static void build_linear(const lin_spec *s) {
    const bool gemm = s->form == L_GEMM || s->form == L_GEMM_T;
    begin(17);
    if (s->form == L_X_TRANSPOSED)
        input("x0", 3, (int64_t[]){LR, SYM, LK});
    else if (gemm)
        input("x", 2, (int64_t[]){SYM, LK});
    else
        input("x", 3, (int64_t[]){SYM, LR, LK});
    const bool nk = s->form == L_GEMM_T || s->form == L_TRANSPOSED_W;
    if (s->w_input)
        input("W", 2, (int64_t[]){LK, LN});
    else
        initializer(nk ? "Wt" : "W", 2, nk ? (int64_t[]){LN, LK} : (int64_t[]){LK, LN},
                    nk ? lin_wt : lin_w);
    if (s->b_input)
        input("b", 1, (int64_t[]){LN});
    else if (s->form != L_BARE)
        initializer("b", 1, (int64_t[]){LN}, lin_b);
    if (gemm) {
        Onnx__NodeProto *n = op("Gemm", s->form == L_GEMM_T ? "x Wt b" : "x W b", "y");
        if (s->form == L_GEMM_T) attr_int(n, "transB", 1);
        output("y");
        return;
    }
    const char *w = "W";
    if (s->form == L_TRANSPOSED_W)
        attr_ints(op("Transpose", "Wt", "Wn"), "perm", 2, (int64_t[]){1, 0}), w = "Wn";
    if (s->form == L_IDENTITY_W) op("Identity", "W", "Wi"), w = "Wi";
    if (s->form == L_X_TRANSPOSED)
        attr_ints(op("Transpose", "x0", "x"), "perm", 3, (int64_t[]){1, 0, 2});
    char mm[64];
    snprintf(mm, sizeof mm, "x %s", w);
    op("MatMul", mm, s->form == L_BARE ? "y" : "m");
    if (s->form != L_BARE) op("Add", s->form == L_BIAS_FIRST ? "b m" : "m b", "y");
    output("y");
    if (s->mm_out) output("m");
}

/* y = x W + b in float64, and the bound (K + 2) u (|x| |W| + |b|) of a float32 evaluation */
static void lin_reference(const float *x, int rows, bool bias, double *want, double *tol) {
    for (int r = 0; r < rows; r++)
        for (int n = 0; n < LN; n++) {
            double y = bias ? lin_b[n] : 0, a = bias ? fabs(lin_b[n]) : 0;
            for (int k = 0; k < LK; k++) {
                y += (double)x[r * LK + k] * lin_w[k * LN + n];
                a += fabs((double)x[r * LK + k] * lin_w[k * LN + n]);
            }
            want[r * LN + n] = y;
            tol[r * LN + n] = (LK + 2) * U * a + 1e-37;
        }
}

static void test_linear(void) {
    printf("linear\n");
    fill(lin_w, LK * LN, 1.0);
    fill(lin_b, LN, 1.0);
    for (int k = 0; k < LK; k++)
        for (int n = 0; n < LN; n++) lin_wt[n * LK + k] = lin_w[k * LN + n];
    const lin_spec specs[] = {
        {"Add(MatMul(x, W), b)", L_MATMUL_ADD, false, false, false, 1, 1},
        {"Add(b, MatMul(x, W))", L_BIAS_FIRST, false, false, false, 1, 1},
        {"Gemm(x, W^T, b), transB", L_GEMM_T, false, false, false, 1, 0},
        {"Gemm(x, W, b)", L_GEMM, false, false, false, 1, 0},
        {"MatMul(x, Transpose(W^T)) + b", L_TRANSPOSED_W, false, false, false, 1, 2},
        {"MatMul(x, Identity(W)) + b", L_IDENTITY_W, false, false, false, 1, 1},
        {"MatMul(x, W), no bias", L_BARE, false, false, false, 1, 0},
        {"MatMul(Transpose(x0), W) + b", L_X_TRANSPOSED, false, false, false, 1, 1},
        {"MatMul read twice: the Add stays", L_MATMUL_ADD, true, false, false, 1, 0},
        {"bias an input: the Add stays", L_MATMUL_ADD, false, true, false, 1, 0},
        {"weight an input: left alone", L_MATMUL_ADD, false, false, true, 0, 0},
    };
    float x[LB * LR * LK], xt[LB * LR * LK];
    fill(x, LB * LR * LK, 2.0);
    for (int b = 0; b < LB; b++) /* x0 [LR, LB, LK] whose transpose is x */
        for (int r = 0; r < LR; r++)
            for (int k = 0; k < LK; k++) xt[(r * LB + b) * LK + k] = x[(b * LR + r) * LK + k];
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const lin_spec *s = &specs[i];
        double want[LB * LR * LN], tol[LB * LR * LN];
        lin_reference(x, LB * LR, s->form != L_BARE && !s->b_input, want, tol);
        if (s->b_input) /* the bias fed is lin_b: the same values */
            lin_reference(x, LB * LR, true, want, tol);
        const bool gemm = s->form == L_GEMM || s->form == L_GEMM_T;
        const bool tr = s->form == L_X_TRANSPOSED; /* fed x0, whose transpose is x */
        build_linear(s);
        xcase c = {.name = s->name,
                   .n_in = 1 + s->w_input + s->b_input,
                   .in_shape = {gemm ? TS_SHAPE(LB * LR, LK)
                                : tr ? TS_SHAPE(LR, LB, LK)
                                     : TS_SHAPE(LB, LR, LK)},
                   .in_vals = {tr ? xt : x},
                   .n_out = LB * LR * LN,
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = "tessera.Linear"};
        int k = 1;
        if (s->w_input) c.in_shape[k] = TS_SHAPE(LK, LN), c.in_vals[k++] = lin_w;
        if (s->b_input) c.in_shape[k] = TS_SHAPE(LN), c.in_vals[k++] = lin_b;
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ attention */
typedef enum attn_form {
    A_TORCH,   /* torch.onnx: Q and K^T each scaled by sqrt(1 / sqrt(E)) from Q's shape */
    A_TESSERA, /* Tessera's exporter: MatMul(Q, K^T) * constant */
    A_DIV,     /* MatMul(Q, K^T) / constant */
} attn_form;

typedef enum mask_kind {
    M_NONE,
    M_CAUSAL_GRAPH, /* Where(Equal(Trilu(Expand(1, [L, S]), upper=0), 0), -inf, 0) */
    M_UPPER_GRAPH,  /* the same with upper=1: not causal */
    M_CAUSAL_CONST, /* a constant [L, S]: 0 on and below the diagonal, -inf above */
    M_NEAR_CONST,   /* the same with one entry changed: not causal */
    M_INPUT,        /* a float mask fed at run time, first operand of the Add */
} mask_kind;

typedef struct attn_spec {
    const char *name;
    attn_form form;
    mask_kind mask;
    int L, S;
    bool p_out; /* the Softmax's output is a graph output too: left alone */
    int axis;   /* Softmax's axis (0: -1) */
    int fused, removed;
} attn_spec;

enum { AB = 2, AH = 2, AE = 4, AV = 3, AMAX = 6 }; /* q [AB, AH, L, AE], v [AB, AH, S, AV] */

/* the torch.onnx scale: Sqrt(Cast(Div(1, Sqrt(Cast(Slice(Shape(q), -1, end)))))) */
static void torch_scale(void) {
    op("Shape", "q", "q_shape");
    constant_ints("last", 1, (int64_t[]){-1});
    constant_ints("end", 1, (int64_t[]){BIGEND});
    op("Slice", "q_shape last end", "e_dim");
    attr_int(op("Cast", "e_dim", "e_f"), "to", FLOAT);
    op("Sqrt", "e_f", "e_sqrt");
    constant("one", 1.0, 1);
    op("Div", "one e_sqrt", "inv");
    attr_int(op("Cast", "inv", "scale"), "to", FLOAT);
    op("Sqrt", "scale", "s1");
    op("Sqrt", "scale", "s2");
}

/* the causal mask torch.onnx builds from Q's and K's shapes (upper: Trilu's attribute) */
static void torch_mask(int upper) {
    constant_ints("m2", 1, (int64_t[]){-2});
    constant_ints("m1", 1, (int64_t[]){-1});
    op("Shape", "q", "qs");
    op("Shape", "k", "ks");
    op("Slice", "qs m2 m1", "l_dim");
    op("Slice", "ks m2 m1", "s_dim");
    attr_int(op("Concat", "l_dim s_dim", "mask_shape"), "axis", 0);
    constant("ones", 1.0, 1);
    op("Expand", "ones mask_shape", "full");
    attr_int(op("Trilu", "full", "tril"), "upper", upper);
    constant("zero", 0.0, 1);
    op("Equal", "tril zero", "above");
    constant("ninf", -INFINITY, 1);
    constant("zero2", 0.0, 1);
    op("Where", "above ninf zero2", "mask");
}

static float attn_mask_vals[AMAX * AMAX];

static void build_attention(const attn_spec *s) {
    begin(17);
    input("q", 4, (int64_t[]){SYM, AH, SYM, AE});
    input("k", 4, (int64_t[]){SYM, AH, SYM, AE});
    input("v", 4, (int64_t[]){SYM, AH, SYM, AV});
    if (s->mask == M_INPUT) input("mask", 2, (int64_t[]){s->L, s->S});
    /* torch.onnx's scale before K's Transpose: a Transpose that is not the graph's first node is
     * taken in too */
    if (s->form == A_TORCH) torch_scale();
    attr_ints(op("Transpose", "k", "kt"), "perm", 4, (int64_t[]){0, 1, 3, 2});
    const char *scores = "scores";
    if (s->form == A_TORCH) {
        op("Mul", "q s1", "qs1");
        op("Mul", "kt s2", "ks2");
        op("MatMul", "qs1 ks2", "scores");
    } else {
        op("MatMul", "q kt", "raw");
        constant("c", s->form == A_DIV ? 2.0 : 0.5, 0);
        op(s->form == A_DIV ? "Div" : "Mul", "raw c", "scores");
    }
    if (s->mask == M_CAUSAL_GRAPH || s->mask == M_UPPER_GRAPH) torch_mask(s->mask == M_UPPER_GRAPH);
    if (s->mask == M_CAUSAL_CONST || s->mask == M_NEAR_CONST)
        constant_tensor("mask", 2, (int64_t[]){s->L, s->S}, attn_mask_vals);
    if (s->mask != M_NONE) {
        op("Add", s->mask == M_INPUT ? "mask scores" : "scores mask", "masked");
        scores = "masked";
    }
    char sm[64];
    snprintf(sm, sizeof sm, "%s", scores);
    attr_int(op("Softmax", sm, "p"), "axis", s->axis ? s->axis : -1);
    op("MatMul", "p v", "y");
    output("y");
    if (s->p_out) output("p");
}

/* The mask's values for s (its [L, S] block; the graph's masks are the same numbers). */
static void attn_mask_of(const attn_spec *s) {
    for (int i = 0; i < s->L; i++)
        for (int j = 0; j < s->S; j++) {
            float *m = &attn_mask_vals[i * s->S + j];
            switch (s->mask) {
            case M_UPPER_GRAPH:
                *m = j >= i ? 0.0f : -INFINITY;
                break;
            case M_INPUT:
                fill(m, 1, 3.0);
                if ((i + 2 * j) % 5 == 4 && j != i) *m = -INFINITY; /* never a whole row */
                break;
            case M_NONE:
                *m = 0;
                break;
            default:
                *m = j <= i ? 0.0f : -INFINITY;
            }
        }
    if (s->mask == M_NEAR_CONST) attn_mask_vals[0 * s->S + 1] = 0; /* query 0 sees key 1 */
}

/* y = softmax(q k^T scale + mask) v in float64 along `axis` (3: keys, 1: heads) and the bound of
 * a float32 evaluation: each score off by (E + 4) u scale sum|q||k| (+ u of the mask's add), the
 * weights by 2 max-score-error + (n + 8) u relatively, the output by that times sum p |v|. */
static void attn_reference(const attn_spec *s, const float *q, const float *k, const float *v,
                           double scale, double *want, double *tol) {
    const int L = s->L, S = s->S, axis = s->axis == 1 ? 1 : 3;
    static double sc[AB][AH][AMAX][AMAX], err[AB][AH][AMAX][AMAX], p[AB][AH][AMAX][AMAX];
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    double dot = 0, a = 0;
                    for (int e = 0; e < AE; e++) {
                        double t = (double)q[((b * AH + h) * L + i) * AE + e] *
                                   k[((b * AH + h) * S + j) * AE + e];
                        dot += t, a += fabs(t);
                    }
                    const double m = attn_mask_vals[i * S + j];
                    sc[b][h][i][j] = dot * scale + m;
                    err[b][h][i][j] =
                        isinf(m) ? 0 : (AE + 4) * U * a * scale + 2 * U * fabs(dot * scale + m);
                }
    for (int b = 0; b < AB; b++) /* normalise along the axis: over j (keys) or h (heads) */
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    double mx = -INFINITY, sum = 0;
                    for (int t = 0; t < (axis == 3 ? S : AH); t++)
                        mx = fmax(mx, axis == 3 ? sc[b][h][i][t] : sc[b][t][i][j]);
                    for (int t = 0; t < (axis == 3 ? S : AH); t++)
                        sum += exp((axis == 3 ? sc[b][h][i][t] : sc[b][t][i][j]) - mx);
                    p[b][h][i][j] = exp(sc[b][h][i][j] - mx) / sum;
                }
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < L; i++) {
                double delta = 0; /* the largest score error the weights of this row see */
                for (int j = 0; j < S; j++)
                    for (int t = 0; t < (axis == 3 ? 1 : AH); t++)
                        delta = fmax(delta, axis == 3 ? err[b][h][i][j] : err[b][t][i][j]);
                const double rel = 2 * delta + ((axis == 3 ? S : AH) + 8) * U;
                for (int d = 0; d < AV; d++) {
                    double y = 0, a = 0;
                    for (int j = 0; j < S; j++) {
                        const double vv = v[((b * AH + h) * S + j) * AV + d];
                        y += p[b][h][i][j] * vv;
                        a += p[b][h][i][j] * fabs(vv);
                    }
                    const int o = ((b * AH + h) * L + i) * AV + d;
                    want[o] = y;
                    tol[o] = rel * a + (S + 2) * U * a + 1e-30;
                }
            }
}

static void test_attention(void) {
    printf("attention\n");
    const attn_spec specs[] = {
        {"torch.onnx, causal mask graph", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6},
        {"torch.onnx, causal, L 3 < S 5", A_TORCH, M_CAUSAL_GRAPH, 3, 5, false, 0, 1, 6},
        {"torch.onnx, no mask", A_TORCH, M_NONE, 5, 5, false, 0, 1, 5},
        {"torch.onnx, upper=1 mask: kept", A_TORCH, M_UPPER_GRAPH, 5, 5, false, 0, 1, 6},
        {"Tessera export, causal constant", A_TESSERA, M_CAUSAL_CONST, 4, 4, false, 0, 1, 5},
        {"near-causal constant: kept", A_TESSERA, M_NEAR_CONST, 4, 4, false, 0, 1, 5},
        {"Div, mask input first", A_DIV, M_INPUT, 4, 6, false, 0, 1, 5},
        {"Softmax over heads (replayed)", A_TESSERA, M_NONE, 4, 4, false, 1, 1, 4},
        {"Softmax read twice: left alone", A_TESSERA, M_CAUSAL_CONST, 4, 4, true, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const attn_spec *s = &specs[i];
        float q[AB * AH * AMAX * AE], k[AB * AH * AMAX * AE], v[AB * AH * AMAX * AV];
        fill(q, AB * AH * s->L * AE, 2.0);
        fill(k, AB * AH * s->S * AE, 2.0);
        fill(v, AB * AH * s->S * AV, 1.0);
        attn_mask_of(s);
        const double scale = s->form == A_TORCH ? 1 / sqrt((double)AE) : 0.5;
        double want[AB * AH * AMAX * AV], tol[AB * AH * AMAX * AV];
        attn_reference(s, q, k, v, scale, want, tol);
        build_attention(s);
        xcase c = {.name = s->name,
                   .n_in = 3 + (s->mask == M_INPUT),
                   .in_shape = {TS_SHAPE(AB, AH, s->L, AE), TS_SHAPE(AB, AH, s->S, AE),
                                TS_SHAPE(AB, AH, s->S, AV), TS_SHAPE(s->L, s->S)},
                   .in_vals = {q, k, v, attn_mask_vals},
                   .n_out = AB * AH * s->L * AV,
                   .want = want,
                   .tol = tol,
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = "tessera.Attention"};
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ the head split */
typedef struct heads_spec {
    const char *name;
    const char *fused_type;
    int form;      /* 0: Gather(x, i), 1: the head split of g [L, B, D] */
    int64_t index; /* Gather: the index (a constant scalar, or [1] when vector) */
    bool vector;   /* Gather: the index is [1], not a scalar: left alone */
    int64_t t2[4]; /* head split: the second Reshape's target ([B, H, L, E] or another) */
    bool t_out;    /* head split: the Transpose's output is a graph output too: left alone */
    int fused, removed;
} heads_spec;

enum { HL = 3, HB = 2, HH = 3, HE = 4 }; /* g [HL, HB, HH * HE] */

static void build_heads(const heads_spec *s) {
    begin(17);
    if (s->form == 0) {
        input("x", 3, (int64_t[]){SYM, 3, 4});
        const int64_t i = s->index, one = 1;
        Onnx__NodeProto *c = op("Constant", "", "i");
        attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
            tensor("i", INT64, s->vector ? 1 : 0, &one, NULL, &i);
        attr_int(op("Gather", "x i", "y"), "axis", 1);
        output("y");
        return;
    }
    input("g", 3, (int64_t[]){SYM, HB, HH * HE});
    constant_ints("t1", 3, (int64_t[]){0, -1, HE}); /* [L, B*H, E]: a 0 and a -1 resolved */
    constant_ints("t2", 4, s->t2);
    op("Reshape", "g t1", "r1");
    attr_ints(op("Transpose", "r1", "tr"), "perm", 3, (int64_t[]){1, 0, 2});
    op("Reshape", "tr t2", "y");
    output("y");
    if (s->t_out) output("tr");
}

static void test_heads(void) {
    printf("head split\n");
    const heads_spec specs[] = {
        {"Gather(x, 2) at axis 1", "tessera.Select", 0, 2, false, {0}, false, 1, 0},
        {"Gather(x, -1) at axis 1", "tessera.Select", 0, -1, false, {0}, false, 1, 0},
        {"Gather of an index [1]: left alone", "tessera.Select", 0, 1, true, {0}, false, 0, 0},
        {"head split to [B, H, L, E]",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         false,
         1,
         2},
        {"head split to [H, B, L, E] (replayed)",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HH, HB, HL, HE},
         false,
         1,
         2},
        {"Transpose read twice: left alone",
         "tessera.HeadSplit",
         1,
         0,
         false,
         {HB, HH, HL, HE},
         true,
         0,
         0},
    };
    float x[2 * 3 * 4], g[HL * HB * HH * HE];
    fill(x, 2 * 3 * 4, 1.0);
    fill(g, HL * HB * HH * HE, 1.0);
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        const heads_spec *s = &specs[i];
        double want[HL * HB * HH * HE], tol[HL * HB * HH * HE] = {0}; /* no arithmetic: exact */
        int64_t n;
        if (s->form == 0) { /* y[b, c] = x[b, index, c] (with its dim when a vector index) */
            const int64_t at = s->index < 0 ? s->index + 3 : s->index;
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 4; c++) want[b * 4 + c] = x[(b * 3 + at) * 4 + c];
            n = 2 * 4;
        } else { /* the transposed [B*H, L, E]'s values in order, whatever the last target */
            for (int m = 0; m < HB * HH; m++)
                for (int l = 0; l < HL; l++)
                    for (int e = 0; e < HE; e++)
                        want[(m * HL + l) * HE + e] = g[(l * HB * HH + m) * HE + e];
            n = HL * HB * HH * HE;
        }
        build_heads(s);
        xcase c = {.name = s->name,
                   .n_in = 1,
                   .in_shape = {s->form == 0 ? TS_SHAPE(2, 3, 4) : TS_SHAPE(HL, HB, HH * HE)},
                   .in_vals = {s->form == 0 ? x : g},
                   .n_out = n,
                   .want = want,
                   .tol = tol,
                   .out_shape = s->form == 0
                                    ? (s->vector ? TS_SHAPE(2, 1, 4) : TS_SHAPE(2, 4))
                                    : (ts_shape){4, {s->t2[0], s->t2[1], s->t2[2], s->t2[3]}},
                   .fused = s->fused,
                   .removed = s->removed,
                   .fused_type = s->fused_type};
        run_case(&c);
        done();
    }
}

/* ------------------------------------------------------------------ gradients */
/* loss = sum(y * g) of a one-input model run on x (requires grad); the input's gradient */
static ts_tensor *input_grad(ts_module *m, ts_tensor *x, ts_tensor *g) {
    ts_set_requires_grad(x, true);
    ts_tensor *y = run(m, 1, &x);
    if (!y) return NULL;
    ts_backward(ts_sum(ts_mul(y, g)));
    return ts_grad(x);
}

static void test_gradients(void) {
    printf("gradients\n");
    enum { N = 3, C = 8 };
    float x[N * C], g[N * C];
    fill(x, N * C, 4.0);
    fill(g, N * C, 1.0);
    /* GELU: dx = g (Phi(x) + x phi(x)); a float32 evaluation is off by a few units of each term,
     * the exp's argument x^2 / 2 adding x^2 u to phi's */
    double want[N * C], tol[N * C];
    for (int j = 0; j < N * C; j++) {
        const double v = x[j], phi = exp(-v * v / 2) / sqrt(2 * 3.14159265358979323846),
                     cdf = 0.5 * (1 + erf(v / sqrt(2.0)));
        want[j] = g[j] * (cdf + v * phi);
        tol[j] = 32 * U * fabs(g[j]) * (cdf + fabs(v) * phi * (1 + v * v)) + 1e-37;
    }
    const gelu_spec gs = {"gelu", G_TORCH, 0.5, sqrt(2.0), 1, false, 0, true};
    build_gelu(&gs);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(N, C), x, ts_cpu()),
                  *gt = host_tensor(TS_SHAPE(N, C), g, ts_cpu());
        check_close(optimize ? "gelu dx optimized" : "gelu dx plain", input_grad(m, xt, gt), want,
                    tol, N * C);
        ts_scope_end();
        ts_module_free(m);
    }
    done();

    /* linear: dx = g W^T, dW = x^T g, db = sum g over rows; the bound (n + 2) u sum|.||.| */
    const lin_spec ls = {"linear", L_BIAS_FIRST, false, false, false, 1, 1};
    float lx[LB * LR * LK], lg[LB * LR * LN];
    fill(lx, LB * LR * LK, 2.0);
    fill(lg, LB * LR * LN, 1.0);
    double dx[LB * LR * LK], dx_tol[LB * LR * LK], dw[LK * LN], dw_tol[LK * LN], db[LN], db_tol[LN];
    for (int r = 0; r < LB * LR; r++)
        for (int k = 0; k < LK; k++) {
            double v = 0, a = 0;
            for (int n = 0; n < LN; n++)
                v += (double)lg[r * LN + n] * lin_w[k * LN + n],
                    a += fabs((double)lg[r * LN + n] * lin_w[k * LN + n]);
            dx[r * LK + k] = v, dx_tol[r * LK + k] = (LN + 2) * U * a + 1e-37;
        }
    for (int k = 0; k < LK; k++)
        for (int n = 0; n < LN; n++) {
            double v = 0, a = 0;
            for (int r = 0; r < LB * LR; r++)
                v += (double)lx[r * LK + k] * lg[r * LN + n],
                    a += fabs((double)lx[r * LK + k] * lg[r * LN + n]);
            dw[k * LN + n] = v, dw_tol[k * LN + n] = (LB * LR + 2) * U * a + 1e-37;
        }
    for (int n = 0; n < LN; n++) {
        double v = 0, a = 0;
        for (int r = 0; r < LB * LR; r++) v += lg[r * LN + n], a += fabs(lg[r * LN + n]);
        db[n] = v, db_tol[n] = (LB * LR + 2) * U * a + 1e-37;
    }
    build_linear(&ls);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(LB, LR, LK), lx, ts_cpu()),
                  *gt = host_tensor(TS_SHAPE(LB, LR, LN), lg, ts_cpu());
        check_close(optimize ? "linear dx optimized" : "linear dx plain", input_grad(m, xt, gt), dx,
                    dx_tol, LB * LR * LK);
        /* the weight and the bias are the module's parameters: training reaches them */
        check_close(optimize ? "linear dW optimized" : "linear dW plain",
                    ts_grad(ts_module_get(m, "W")), dw, dw_tol, LK * LN);
        check_close(optimize ? "linear db optimized" : "linear db plain",
                    ts_grad(ts_module_get(m, "b")), db, db_tol, LN);
        ts_scope_end();
        ts_module_free(m);
    }
    done();
}

/* A product of 1024 rows (where the weight is copied transposed for the GEMM) plain and optimized,
 * with gradients recorded and without, as the weight changes in place (an optimizer step) and the
 * model moves between devices: each run uses the weight's values of the moment. */
static void test_linear_rows(void) {
    printf("linear of 1024 rows\n");
    enum { R = 1024 };
    const lin_spec ls = {"linear", L_MATMUL_ADD, false, false, false, 1, 1};
    static float x[R * LK];
    static double want[R * LN], tol[R * LN];
    float saved[LK * LN];
    memcpy(saved, lin_w, sizeof saved);
    fill(x, R * LK, 2.0);
    build_linear(&ls);
    cur->input[0]->type->tensor_type->shape = NULL; /* x [2, 512, K] */
    ts_module *m[2] = {load(false), load(true)};
    CHECK(m[0] && m[1]);
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; m[0] && m[1] && d < nd; d++) {
        ts_module_to(m[0], devs[d]);
        ts_module_to(m[1], devs[d]);
        for (int step = 0; step < 4; step++) {
            if (step % 2) { /* W <- -2 W in place in both, exactly (a power of two) */
                ts_no_grad_begin();
                ts_scope_begin(); /* what the in-place op returns */
                for (int i = 0; i < 2; i++) ts_mul_scalar_(ts_module_get(m[i], "W"), -2);
                ts_scope_end();
                ts_no_grad_end();
                for (int i = 0; i < LK * LN; i++) lin_w[i] *= -2;
            }
            lin_reference(x, R, true, want, tol);
            if (step >= 2) ts_no_grad_begin();
            for (int i = 0; i < 2; i++) {
                ts_scope_begin();
                ts_tensor *xt = host_tensor(TS_SHAPE(2, R / 2, LK), x, devs[d]);
                char what[128];
                snprintf(what, sizeof what, "%s on %s, step %d (%s)", i ? "optimized" : "plain",
                         ts_device_str(devs[d]), step, step >= 2 ? "inference" : "grad mode");
                check_close(what, run(m[i], 1, &xt), want, tol, R * LN);
                ts_error_clear();
                ts_scope_end();
            }
            if (step >= 2) ts_no_grad_end();
        }
    }
    memcpy(lin_w, saved, sizeof saved);
    ts_module_free(m[0]);
    ts_module_free(m[1]);
    done();
}

/* A run the fast path does not take fails as the file's graph does, naming the file's node. */
static void test_errors(void) {
    printf("errors name the file's nodes\n");
    const struct {
        const char *name;
        lin_form form;
        ts_shape x;
        const char *node;
    } cases[] = {
        {"x of the wrong width", L_MATMUL_ADD, TS_SHAPE(2, 3, LK + 1), "'MatMul_0' (MatMul)"},
        {"Gemm given a 3-D x", L_GEMM_T, TS_SHAPE(2, 3, LK), "'Gemm_0' (Gemm)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const lin_spec ls = {"", cases[i].form, false, false, false, 1, 0};
        build_linear(&ls);
        cur->input[0]->type->tensor_type->shape = NULL; /* any shape reaches the nodes */
        for (int optimize = 0; optimize < 2; optimize++) {
            ts_module *m = load(optimize);
            ts_scope_begin();
            float x[2 * 3 * (LK + 1)] = {0};
            ts_tensor *xt = host_tensor(cases[i].x, x, ts_cpu()), *y = m ? run(m, 1, &xt) : NULL;
            const char *msg = ts_error_message();
            bool ok = m && !y && ts_error() && strstr(msg, cases[i].node);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__,
                              "%s (%s): expected an error naming %s, got \"%s\"", cases[i].name,
                              optimize ? "optimized" : "plain", cases[i].node, msg);
            else if (optimize)
                printf("  %-30s %s\n", cases[i].name, msg);
            ts_error_clear();
            ts_scope_end();
            ts_module_free(m);
        }
        done();
    }
}

/* ------------------------------------------------------------------ the shape memo */
/* y = Reshape(x, [N, 3, 2]) * N, N read from x's shape at run time (x [N, 6]) */
static void build_memo_model(void) {
    begin(17);
    input("x", 2, (int64_t[]){SYM, 6});
    op("Shape", "x", "shape");
    const int64_t zero = 0;
    Onnx__NodeProto *c = op("Constant", "", "i0");
    attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        tensor("i0", INT64, 0, NULL, NULL, &zero);
    op("Gather", "shape i0", "n");
    constant_ints("axes", 1, (int64_t[]){0});
    op("Unsqueeze", "n axes", "n1");
    constant_ints("rest", 2, (int64_t[]){3, 2});
    attr_int(op("Concat", "n1 rest", "target"), "axis", 0);
    op("Reshape", "x target", "r");
    attr_int(op("Cast", "n", "nf"), "to", FLOAT);
    op("Mul", "r nf", "y");
    output("y");
}

static bool memo_run_right(ts_module *m, int64_t n, ts_device dev) {
    float x[8 * 6]; /* values of its own (threads call this): eighths, so x * n is exact */
    for (int i = 0; i < n * 6; i++) x[i] = (float)((i * 37 + (int)n) % 11 - 5) * 0.125f;
    ts_scope_begin();
    ts_tensor *xt = host_tensor(TS_SHAPE(n, 6), x, dev), *y = run(m, 1, &xt);
    bool ok = y && ts_ndim(y) == 3 && ts_size(y, 0) == n && ts_size(y, 1) == 3 &&
              ts_size(y, 2) == 2 && tsi_device_eq(ts_device_of(y), dev);
    double *h = ok ? host(y) : NULL;
    for (int i = 0; ok && i < n * 6; i++) ok = h[i] == (double)x[i] * (double)n;
    free(h);
    ts_scope_end();
    ts_error_clear();
    return ok;
}

static void test_memo(void) {
    printf("shape memo\n");
    build_memo_model();
    ts_module *m = load(false);
    CHECK(m != NULL);
    if (!m) {
        done();
        return;
    }
    tso_graph *g = ((tso_model *)m)->graph;
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    /* batch sizes in turn: a repeat takes the memo (a hit, its nodes skipped), a change of batch
     * size or device computes again and gives its own answer */
    const int64_t batches[] = {2, 2, 3, 3, 2, 5, 2};
    const int hits_after[] = {0, 1, 1, 2, 2, 2, 2};
    int64_t base_hits = 0;
    for (int d = 0; d < nd; d++) {
        ts_module_to(m, devs[d]);
        for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
            CHECK(memo_run_right(m, batches[i], devs[d]));
            int64_t hits;
            int skipped;
            tso_memo_stats(g, &hits, &skipped);
            CHECK_EQ(hits - base_hits, hits_after[i]);
            CHECK_EQ(skipped, 5); /* Shape, Gather, Unsqueeze, Concat, Cast */
        }
        int skipped;
        tso_memo_stats(g, &base_hits, &skipped);
    }
    ts_module_free(m);
    done();

    /* NonZero's output shape depends on x's values: what follows is never kept */
    begin(17);
    input("x", 1, (int64_t[]){4});
    op("NonZero", "x", "nz");
    op("Shape", "nz", "s");
    attr_int(op("Cast", "s", "sf"), "to", FLOAT);
    constant("zero", 0.0, 0);
    op("Add", "sf zero", "y");
    output("y");
    m = load(false);
    CHECK(m != NULL);
    const float xs[3][4] = {{1, 0, 1, 0}, {1, 1, 1, 0}, {0, 0, 0, 0}};
    for (int r = 0; m && r < 6; r++) {
        ts_scope_begin();
        ts_tensor *xt = host_tensor(TS_SHAPE(4), xs[r % 3], ts_cpu()), *y = run(m, 1, &xt);
        double want[2] = {1, r % 3 == 0 ? 2 : r % 3 == 1 ? 3 : 0}, tol[2] = {0, 0};
        check_close("Shape(NonZero(x))", y, want, tol, 2);
        ts_scope_end();
    }
    int64_t hits;
    int skipped;
    if (m) {
        tso_memo_stats(((tso_model *)m)->graph, &hits, &skipped);
        CHECK_EQ(skipped, 0);
    }
    ts_module_free(m);
    done();
}

/* attention whose scale and causal mask come from the inputs' shapes, run with other sequence
 * lengths: each gets its own scale and mask */
static void test_memo_lengths(void) {
    printf("shape memo: sequence lengths\n");
    const attn_spec base = {"", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6};
    build_attention(&base);
    for (int optimize = 0; optimize < 2; optimize++) {
        ts_module *m = load(optimize);
        CHECK(m != NULL);
        const int lens[][2] = {{5, 5}, {5, 5}, {3, 3}, {2, 4}, {5, 5}, {3, 3}};
        for (size_t i = 0; m && i < sizeof lens / sizeof *lens; i++) {
            attn_spec s = base;
            s.L = lens[i][0], s.S = lens[i][1];
            float q[AB * AH * AMAX * AE], k[AB * AH * AMAX * AE], v[AB * AH * AMAX * AV];
            fill(q, AB * AH * s.L * AE, 2.0);
            fill(k, AB * AH * s.S * AE, 2.0);
            fill(v, AB * AH * s.S * AV, 1.0);
            attn_mask_of(&s);
            double want[AB * AH * AMAX * AV], tol[AB * AH * AMAX * AV];
            attn_reference(&s, q, k, v, 1 / sqrt((double)AE), want, tol);
            ts_scope_begin();
            ts_tensor *in[3] = {host_tensor(TS_SHAPE(AB, AH, s.L, AE), q, ts_cpu()),
                                host_tensor(TS_SHAPE(AB, AH, s.S, AE), k, ts_cpu()),
                                host_tensor(TS_SHAPE(AB, AH, s.S, AV), v, ts_cpu())};
            char what[96];
            snprintf(what, sizeof what, "L %d, S %d, %s", s.L, s.S,
                     optimize ? "optimized" : "plain");
            check_close(what, run(m, 3, in), want, tol, AB * AH * s.L * AV);
            ts_scope_end();
        }
        int64_t hits;
        int skipped;
        if (m) {
            tso_memo_stats(((tso_model *)m)->graph, &hits, &skipped);
            CHECK_EQ(hits, 1); /* the second 5 x 5 run */
        }
        ts_module_free(m);
    }
    done();
}

/* threads running one model with their own batch sizes: each always gets its own answer; and an
 * optimized linear in inference */
typedef struct thread_arg {
    ts_module *m, *lin;
    int64_t batch;
    const float *x;
    const double *want, *tol;
    bool ok;
} thread_arg;

static bool linear_run_right(const thread_arg *a) {
    ts_scope_begin();
    ts_tensor *xt = host_tensor(TS_SHAPE(LB, LR, LK), a->x, ts_cpu()), *y = run(a->lin, 1, &xt);
    double *h = y ? host(y) : NULL;
    bool ok = h != NULL;
    for (int i = 0; ok && i < LB * LR * LN; i++) ok = fabs(h[i] - a->want[i]) <= a->tol[i];
    free(h);
    ts_scope_end();
    return ok;
}

static void *memo_thread(void *p) {
    thread_arg *a = p;
    a->ok = true;
    ts_no_grad_begin(); /* per thread */
    for (int i = 0; i < 40; i++)
        a->ok =
            memo_run_right(a->m, i % 3 ? a->batch : 1, ts_cpu()) && linear_run_right(a) && a->ok;
    ts_no_grad_end();
    return NULL;
}

static void test_memo_threads(void) {
    printf("shape memo: threads\n");
    build_memo_model();
    ts_module *m = load(false);
    done();
    const lin_spec ls = {"linear", L_MATMUL_ADD, false, false, false, 1, 1};
    build_linear(&ls);
    ts_module *lin = load(true);
    done();
    CHECK(m && lin);
    float x[LB * LR * LK];
    double want[LB * LR * LN], tol[LB * LR * LN];
    fill(x, LB * LR * LK, 2.0);
    lin_reference(x, LB * LR, true, want, tol);
    enum { T = 4 };
    pthread_t th[T];
    thread_arg args[T];
    for (int t = 0; m && lin && t < T; t++) {
        args[t] =
            (thread_arg){.m = m, .lin = lin, .batch = 2 + t, .x = x, .want = want, .tol = tol};
        CHECK(pthread_create(&th[t], NULL, memo_thread, &args[t]) == 0);
    }
    for (int t = 0; m && lin && t < T; t++) {
        pthread_join(th[t], NULL);
        CHECK(args[t].ok);
    }
    ts_module_free(m);
    ts_module_free(lin);
}

/* ------------------------------------------------------------------ allocation failures */
static uint8_t *sweep_bytes;
static size_t sweep_len;
static float sweep_q[AB * AH * 5 * AE], sweep_k[AB * AH * 5 * AE], sweep_v[AB * AH * 5 * AV];
static double sweep_want[AB * AH * 5 * AV], sweep_tol[AB * AH * 5 * AV];

typedef struct sweep_st {
    ts_module *m;
    bool matched;
} sweep_st;

static void *sweep_setup(void) { return calloc(1, sizeof(sweep_st)); }

/* loads the optimized attention model and runs it twice (the memo's miss and hit) */
static bool sweep_scenario(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m); /* the run after a failure loads again */
    s->m = ts_onnx_load_buffer(sweep_bytes, sweep_len, NULL, (ts_onnx_opts){.optimize = true});
    bool ok = s->m != NULL;
    s->matched = true;
    for (int r = 0; ok && r < 2; r++) {
        ts_scope_begin();
        ts_tensor *in[3] = {host_tensor(TS_SHAPE(AB, AH, 5, AE), sweep_q, ts_cpu()),
                            host_tensor(TS_SHAPE(AB, AH, 5, AE), sweep_k, ts_cpu()),
                            host_tensor(TS_SHAPE(AB, AH, 5, AV), sweep_v, ts_cpu())};
        ts_tensor *y = in[0] && in[1] && in[2] ? run(s->m, 3, in) : NULL;
        ok = y && !ts_error();
        double *h = ok ? host(y) : NULL;
        for (int i = 0; h && i < AB * AH * 5 * AV; i++)
            s->matched = s->matched && fabs(h[i] - sweep_want[i]) <= sweep_tol[i];
        free(h);
        ts_scope_end();
    }
    return ok && !ts_error();
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (ok) CHECK(s->matched);
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m);
    free(s);
}

static void test_sweep(void) {
    const attn_spec s = {"", A_TORCH, M_CAUSAL_GRAPH, 5, 5, false, 0, 1, 6};
    fill(sweep_q, AB * AH * 5 * AE, 2.0);
    fill(sweep_k, AB * AH * 5 * AE, 2.0);
    fill(sweep_v, AB * AH * 5 * AV, 1.0);
    attn_mask_of(&s);
    attn_reference(&s, sweep_q, sweep_k, sweep_v, 1 / sqrt((double)AE), sweep_want, sweep_tol);
    build_attention(&s);
    sweep_len = onnx__model_proto__get_packed_size(cur_model);
    sweep_bytes = malloc(sweep_len);
    onnx__model_proto__pack(cur_model, sweep_bytes);
    done();
    const ts_sweep_case c = {.name = "onnx_xformer",
                             .setup = sweep_setup,
                             .run = sweep_scenario,
                             .teardown = sweep_teardown,
                             .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 20000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    free(sweep_bytes);
}
int main(void) {
    ts_sim_configure(1, 0);
    test_gelu();
    test_linear();
    test_attention();
    test_heads();
    test_gradients();
    test_linear_rows();
    test_errors();
    test_memo();
    test_memo_lengths();
    test_memo_threads();
    test_sweep();
    return ts_test_finish();
}
#endif
