/* test_onnx_refusals.c — one-node ONNX models (packed here with the generated protobuf-c code):
 * attribute values and inputs an operator must refuse, at load (its check) or at its first run,
 * each with its error code and a message naming what is wrong, next to the accepted values around
 * them, which must load and run; attribute lists at the loader's cap and one past it; failed
 * allocations in a run that reads an integer input to the host. Then results the backend suite
 * does not pin: a Scan's output axes and directions, Unique with NaNs, an Einsum whose batch label
 * is not leading, a bidirectional LSTM against its two directions run alone. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "onnx_build.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define BOOL  ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

/* ModelProtos are built with tests/onnx_support/onnx_build.h (an arena freed per case). */

static ts_module *load(const Onnx__ModelProto *m) {
    size_t len;
    const uint8_t *buf = pack(m, &len);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){0});
}

/* ------------------------------------------------------------------ the one-node table */
typedef struct io_spec {
    const char *name; /* "" : an absent optional input */
    int32_t type;
    int ndim;
    int64_t dims[5];
    double fill; /* every element; 0: a small pattern of mixed signs */
} io_spec;

typedef struct attr_spec {
    const char *name;
    char kind; /* 'i' an int, 'I' ints, 's' a string */
    int64_t i;
    const char *s;
    int n;
    int64_t ints[9];
} attr_spec;

typedef struct one_case {
    const char *what;
    const char *op;
    int opset;          /* 0: 13 */
    io_spec in[5];      /* the node's inputs (graph inputs), up to one with a NULL name; output y */
    attr_spec attrs[3]; /* up to one with a NULL name */
    ts_status code;     /* TS_OK: loads and runs */
    const char *frag;
} one_case;

static Onnx__ModelProto *one_node(const one_case *c) {
    Onnx__GraphProto *g = graph();
    char ins[256] = "";
    for (int i = 0; i < 5 && c->in[i].name; i++) {
        const io_spec *s = &c->in[i];
        snprintf(ins + strlen(ins), sizeof ins - strlen(ins), "%s%s", i ? "," : "", s->name);
        if (s->name[0]) add_input(g, s->name, tensor_type(s->type, s->ndim, s->dims));
    }
    Onnx__NodeProto *n = node(g, c->op, "n", ins, "y");
    for (int i = 0; i < 3 && c->attrs[i].name; i++) {
        const attr_spec *a = &c->attrs[i];
        if (a->kind == 'i') attr_int(n, a->name, a->i);
        if (a->kind == 'I') attr_ints(n, a->name, (size_t)a->n, a->ints);
        if (a->kind == 's') attr_string(n, a->name, a->s);
    }
    add_output(g, "y", NULL);
    return model(g, c->opset ? c->opset : 13);
}

/* The input a spec declares: its fill, else float -0.75..0.75, integers 0..2, bools 0 and 1. */
static ts_tensor *input_for(const io_spec *s) {
    const ts_dtype dt = tso_dtype_from_onnx(s->type);
    ts_shape sh = {.ndim = s->ndim};
    int64_t count = 1;
    for (int d = 0; d < s->ndim; d++) count *= sh.dims[d] = s->dims[d];
    double *v = malloc((size_t)(count ? count : 1) * sizeof *v);
    for (int64_t k = 0; k < count; k++)
        v[k] = s->fill        ? s->fill
               : dt == TS_F32 ? (double)(k % 7 - 3) / 4
                              : (double)(k % (dt == TS_BOOL ? 2 : 3));
    ts_tensor *t = ts_to_dtype(ts_from_data(sh, TS_F64, v, (ts_opts){.dtype = TS_F64}), dt);
    free(v);
    return t;
}

/* Runs a loaded one-node model on its inputs; its status. */
static ts_status run_case(ts_module *m, const one_case *c) {
    ts_tensor *x[5] = {0}, *y[4] = {0};
    int k = 0;
    for (int i = 0; i < 5 && c->in[i].name; i++)
        if (c->in[i].name[0]) x[k++] = input_for(&c->in[i]);
    int n_out = ts_onnx_num_outputs(m);
    return ts_onnx_run(m, k, x, n_out < 4 ? n_out : 4, y);
}

static void check_case(const one_case *c) {
    ts_scope_begin();
    ts_module *m = load(one_node(c));
    bool at_load = !m;
    ts_status got = m ? run_case(m, c) : ts_error();
    if (got == TS_OK) got = ts_error(); /* nothing left pending by a run that succeeded */
    const char *msg = ts_error_message();
    bool ok = got == c->code && (c->code == TS_OK || strstr(msg, c->frag));
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: expected %s%s%s, got %s: \"%s\"", c->what,
                      ts_status_string(c->code), c->frag ? " with " : "", c->frag ? c->frag : "",
                      ts_status_string(got), msg);
    else
        printf("  %-44s %s%s\n", c->what, c->code ? (at_load ? "at load: " : "at run: ") : "ok",
               c->code ? msg : "");
    ts_error_clear();
    ts_scope_end();
    ts_module_free(m);
    arena_free();
}

#define F32(n, ...)                                                                                \
    {                                                                                              \
        .name = n, .type = FLOAT, .ndim = sizeof((int64_t[]){__VA_ARGS__}) / 8, .dims = {          \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }
#define ABSENT                                                                                     \
    { .name = "" }
#define INT(n, v)                                                                                  \
    { .name = n, .kind = 'i', .i = v }
#define STR(n, v)                                                                                  \
    { .name = n, .kind = 's', .s = v }
#define INTS(nm, ...)                                                                              \
    {                                                                                              \
        .name = nm, .kind = 'I', .n = sizeof((int64_t[]){__VA_ARGS__}) / 8, .ints = {              \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    }
#define RNN_IN                                                                                     \
    { F32("x", 2, 1, 3), F32("w", 1, 4, 3), F32("r", 1, 4, 4) }
#define CONVT_IN                                                                                   \
    { F32("x", 1, 1, 3, 3), F32("w", 1, 1, 2, 2) }
#define SCALES                                                                                     \
    { .name = "scales", .type = FLOAT, .ndim = 1, .dims = {4}, .fill = 1 }

static const one_case cases[] = {
    {.what = "RNN, an unknown direction",
     .op = "RNN",
     .in = RNN_IN,
     .attrs = {INT("hidden_size", 4), STR("direction", "sideways")},
     .code = TS_ERR_UNSUPPORTED,
     .frag = "node 'n' (RNN): direction 'sideways' is not supported"},
    {.what = "RNN, direction reverse",
     .op = "RNN",
     .in = RNN_IN,
     .attrs = {INT("hidden_size", 4), STR("direction", "reverse")}},
    {.what = "Resize, an unknown nearest_mode",
     .op = "Resize",
     .in = {F32("x", 1, 1, 2, 2), ABSENT, SCALES},
     .attrs = {STR("nearest_mode", "bogus")},
     .code = TS_ERR_UNSUPPORTED,
     .frag = "node 'n' (Resize): nearest_mode 'bogus' is not supported"},
    {.what = "Resize, nearest_mode floor",
     .op = "Resize",
     .in = {F32("x", 1, 1, 2, 2), ABSENT, SCALES},
     .attrs = {STR("nearest_mode", "floor")}},
    {.what = "ConvTranspose, output_shape of 3 for 2 dims",
     .op = "ConvTranspose",
     .in = CONVT_IN,
     .attrs = {INTS("output_shape", 1, 4, 4)},
     .code = TS_ERR_SHAPE,
     .frag = "node 'n' (ConvTranspose): output_shape has 3 values for 2 spatial dims"},
    {.what = "ConvTranspose, output_shape [N, C, H, W]",
     .op = "ConvTranspose",
     .in = CONVT_IN,
     .attrs = {INTS("output_shape", 1, 1, 4, 4)}},
    {.what = "ConvTranspose, output_shape [H, W]",
     .op = "ConvTranspose",
     .in = CONVT_IN,
     .attrs = {INTS("output_shape", 4, 4)}},
    {.what = "InstanceNormalization of [N, C, L]",
     .op = "InstanceNormalization",
     .in = {F32("x", 1, 2, 4), F32("s", 2), F32("b", 2)}},
    {.what = "InstanceNormalization of [N, C]",
     .op = "InstanceNormalization",
     .in = {F32("x", 2, 3), F32("s", 3), F32("b", 3)},
     .code = TS_ERR_SHAPE,
     .frag = "expected an input [N, C, D1, ...], got float32 [2, 3]"},
    /* the message describes the condition, not another operand */
    {.what = "Where, an int64 condition",
     .op = "Where",
     .in = {{.name = "c", .type = INT64, .ndim = 1, .dims = {3}}, F32("a", 3), F32("b", 3)},
     .code = TS_ERR_DTYPE,
     .frag = "node 'n' (Where): condition must be bool, got int64 [3]"},
    {.what = "Where, a bool condition",
     .op = "Where",
     .in = {{.name = "c", .type = BOOL, .ndim = 1, .dims = {3}}, F32("a", 3), F32("b", 3)}},
    {.what = "Reshape-1, a shape of 9 dims",
     .op = "Reshape",
     .opset = 4,
     .in = {F32("x", 2)},
     .attrs = {INTS("shape", 1, 1, 1, 1, 1, 1, 1, 1, 2)},
     .code = TS_ERR_SHAPE,
     .frag = "node 'n' (Reshape): a shape of 9 dims (Tessera has at most 8)"},
    {.what = "Reshape-1, a shape of 8 dims",
     .op = "Reshape",
     .opset = 4,
     .in = {F32("x", 2)},
     .attrs = {INTS("shape", 1, 1, 1, 1, 1, 1, 1, 2)}},
    /* a scale that broadcasts (a scalar) is not the normalized shape: the composed path */
    {.what = "LayerNormalization, a scalar scale",
     .op = "LayerNormalization",
     .opset = 17,
     .in = {F32("x", 2, 4), {.name = "s", .type = FLOAT, .ndim = 0, .fill = 2}},
     .attrs = {INT("axis", -1)}},
};

/* ------------------------------------------------------------------ attribute lists at the cap
 * An attribute the operator does not read, of TSO_MAX_ATTR_LIST ints or floats (accepted) and one
 * more (refused: the loader's cap on an untrusted file). */
static void check_list_cap(int64_t count, bool floats, bool accepted) {
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 1, (int64_t[]){3}));
    Onnx__NodeProto *n = node(g, "Relu", "r", "x", "y");
    Onnx__AttributeProto *a = attr(n, "junk",
                                   floats ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS
                                          : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (floats) {
        a->n_floats = (size_t)count;
        a->floats = get((size_t)count * sizeof *a->floats); /* zeros, four bytes each */
    } else {
        a->n_ints = (size_t)count;
        a->ints = get((size_t)count * sizeof *a->ints); /* zeros: one byte each when packed */
    }
    add_output(g, "y", NULL);
    ts_module *m = load(model(g, 13));
    if (accepted) {
        CHECK(m != NULL);
        CHECK_OK();
    } else {
        CHECK(!m);
        CHECK_ERR_HAS(TS_ERR_FORMAT, "node 'r' (Relu): attribute 'junk' is too long");
    }
    ts_module_free(m);
    arena_free();
}

/* ------------------------------------------------------------------ results
 * Runs m on inputs; its first n outputs as float64 host values (got[k] malloc'ed, count[k]). */
static bool run_values(ts_module *m, int n_in, ts_tensor *const *x, int n, double **got,
                       int64_t *count, ts_shape *shape) {
    ts_tensor *y[4] = {0};
    bool ok = ts_onnx_run(m, n_in, x, n, y) == TS_OK && ts_error() == TS_OK;
    for (int k = 0; k < n; k++) {
        got[k] = NULL;
        if (!ok) continue;
        shape[k] = ts_shape_of(y[k]);
        count[k] = ts_numel(y[k]);
        got[k] = malloc((size_t)(count[k] ? count[k] : 1) * sizeof **got);
        ts_tensor *h = ts_contiguous(ts_to_dtype(y[k], TS_F64));
        ok = h && ts_copy_to_host(h, got[k], (size_t)count[k] * sizeof **got) == TS_OK;
    }
    return ok;
}

static bool same_shape(ts_shape s, int ndim, const int64_t *dims) {
    if (s.ndim != ndim) return false;
    for (int d = 0; d < ndim; d++)
        if (s.dims[d] != dims[d]) return false;
    return true;
}

/* Scan (opset 13) accumulating x [3, 2] from s0 = 0: the state is the running sum, and the scan
 * output each step's sum, stacked along scan_output_axes, last step first with a direction 1. */
static void check_scan(const char *what, int64_t axis, int64_t direction) {
    ts_scope_begin();
    Onnx__GraphProto *body = graph();
    add_input(body, "s_in", tensor_type(FLOAT, 1, (int64_t[]){2}));
    add_input(body, "x_in", tensor_type(FLOAT, 1, (int64_t[]){2}));
    node(body, "Add", "acc", "s_in,x_in", "s_out");
    node(body, "Identity", "emit", "s_out", "y_out");
    add_output(body, "s_out", tensor_type(FLOAT, 1, (int64_t[]){2}));
    add_output(body, "y_out", tensor_type(FLOAT, 1, (int64_t[]){2}));
    Onnx__GraphProto *g = graph();
    add_input(g, "s0", tensor_type(FLOAT, 1, (int64_t[]){2}));
    add_input(g, "x", tensor_type(FLOAT, 2, (int64_t[]){3, 2}));
    Onnx__NodeProto *n = node(g, "Scan", "scan", "s0,x", "s,y");
    attr_graph(n, "body", body);
    attr_int(n, "num_scan_inputs", 1);
    attr_ints(n, "scan_output_axes", 1, &axis);
    attr_ints(n, "scan_output_directions", 1, &direction);
    add_output(g, "s", NULL);
    add_output(g, "y", NULL);
    ts_module *m = load(model(g, 13));
    CHECK(m != NULL);
    static const float xv[6] = {1, 10, 2, 20, 3, 30};
    ts_tensor *in[2] = {ts_zeros(TS_SHAPE(2), (ts_opts){0}),
                        ts_from_data(TS_SHAPE(3, 2), TS_F32, xv, (ts_opts){0})};
    double *got[2] = {0};
    int64_t count[2];
    ts_shape shape[2];
    bool ok = m && run_values(m, 2, in, 2, got, count, shape);
    CHECK(ok);
    if (ok) {
        const double sums[3][2] = {{1, 10}, {3, 30}, {6, 60}}; /* after step t */
        CHECK(got[0][0] == 6 && got[0][1] == 60);
        const int64_t dims[2] = {axis ? 2 : 3, axis ? 3 : 2};
        CHECK(same_shape(shape[1], 2, dims));
        bool right = count[1] == 6;
        for (int t = 0; right && t < 3; t++)
            for (int j = 0; j < 2; j++) {
                const int64_t at = axis ? j * 3 + t : t * 2 + j;
                right = right && got[1][at] == sums[direction ? 2 - t : t][j];
            }
        CHECK(right);
        printf("  Scan, %-36s ok\n", what);
    }
    free(got[0]);
    free(got[1]);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    arena_free();
}

/* Unique (sorted) of [2, NaN, 1, 2, NaN]: NaN sorts last and equals NaN (NumPy's unique). */
static void check_unique_nan(void) {
    ts_scope_begin();
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 1, (int64_t[]){5}));
    node(g, "Unique", "u", "x", "y,idx,inv,cnt");
    add_output(g, "y", NULL);
    add_output(g, "idx", NULL);
    add_output(g, "inv", NULL);
    add_output(g, "cnt", NULL);
    ts_module *m = load(model(g, 13));
    CHECK(m != NULL);
    const float xv[5] = {2, NAN, 1, 2, NAN};
    ts_tensor *x = ts_from_data(TS_SHAPE(5), TS_F32, xv, (ts_opts){0});
    double *got[4] = {0};
    int64_t count[4];
    ts_shape shape[4];
    bool ok = m && run_values(m, 1, &x, 4, got, count, shape);
    CHECK(ok);
    if (ok) {
        CHECK(count[0] == 3 && got[0][0] == 1 && got[0][1] == 2 && isnan(got[0][2]));
        CHECK(count[1] == 3 && got[1][0] == 2 && got[1][1] == 0 && got[1][2] == 1);
        const double inv[5] = {1, 2, 0, 1, 2};
        CHECK(count[2] == 5 && !memcmp(got[2], inv, sizeof inv));
        CHECK(count[3] == 3 && got[3][0] == 1 && got[3][1] == 2 && got[3][2] == 2);
        printf("  Unique with NaNs                             ok\n");
    }
    for (int k = 0; k < 4; k++) free(got[k]);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    arena_free();
}

/* Einsum "ibj,bjk->bik": the batch label b is a's second, so the product's labels are reordered
 * (b first); against a float64 reference within k * eps * sum |a| |b| per element. */
static void check_einsum(void) {
    enum { I = 3, B = 2, J = 4, K = 5 };
    ts_scope_begin();
    Onnx__GraphProto *g = graph();
    add_input(g, "a", tensor_type(FLOAT, 3, (int64_t[]){I, B, J}));
    add_input(g, "b", tensor_type(FLOAT, 3, (int64_t[]){B, J, K}));
    attr_string(node(g, "Einsum", "e", "a,b", "y"), "equation", "ibj,bjk->bik");
    add_output(g, "y", NULL);
    ts_module *m = load(model(g, 13));
    CHECK(m != NULL);
    float av[I * B * J], bv[B * J * K];
    for (int k = 0; k < I * B * J; k++) av[k] = (float)((k * 7) % 11 - 5) / 4;
    for (int k = 0; k < B * J * K; k++) bv[k] = (float)((k * 5) % 13 - 6) / 8;
    ts_tensor *in[2] = {ts_from_data(TS_SHAPE(I, B, J), TS_F32, av, (ts_opts){0}),
                        ts_from_data(TS_SHAPE(B, J, K), TS_F32, bv, (ts_opts){0})};
    double *got = NULL;
    int64_t count;
    ts_shape shape;
    bool ok = m && run_values(m, 2, in, 1, &got, &count, &shape);
    CHECK(ok);
    if (ok) {
        CHECK(same_shape(shape, 3, (int64_t[]){B, I, K}));
        bool right = count == B * I * K;
        for (int b = 0; right && b < B; b++)
            for (int i = 0; i < I; i++)
                for (int k = 0; k < K; k++) {
                    double ref = 0, mag = 0;
                    for (int j = 0; j < J; j++) {
                        double p = (double)av[(i * B + b) * J + j] * bv[(b * J + j) * K + k];
                        ref += p, mag += fabs(p);
                    }
                    right = right && fabs(got[(b * I + i) * K + k] - ref) <= J * FLT_EPSILON * mag;
                }
        CHECK(right);
        printf("  Einsum ibj,bjk->bik                          ok\n");
    }
    free(got);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    arena_free();
}

/* LSTM (hidden 3, input 2, 4 steps, batch 2): a bidirectional one's Y, Y_h and Y_c are a forward
 * LSTM's with W[0], R[0], B[0] and a reverse LSTM's with W[1], R[1], B[1]: the same operations,
 * so bit for bit. */
enum { T = 4, NB = 2, NI = 2, NH = 3 };

static ts_module *lstm(const char *direction, int dirs, int first) {
    static float w[2][4 * NH * NI], r[2][4 * NH * NH], b[2][8 * NH];
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 4 * NH * NI; k++) w[d][k] = (float)((k * 7 + d * 3) % 11 - 5) / 8;
        for (int k = 0; k < 4 * NH * NH; k++) r[d][k] = (float)((k * 5 + d) % 9 - 4) / 8;
        for (int k = 0; k < 8 * NH; k++) b[d][k] = (float)((k * 3 + d * 5) % 7 - 3) / 8;
    }
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 3, (int64_t[]){T, NB, NI}));
    add_init(g, tensor("w", FLOAT, 3, (int64_t[]){dirs, 4 * NH, NI}, w[first],
                       (size_t)dirs * sizeof w[0]));
    add_init(g, tensor("r", FLOAT, 3, (int64_t[]){dirs, 4 * NH, NH}, r[first],
                       (size_t)dirs * sizeof r[0]));
    add_init(
        g, tensor("b", FLOAT, 2, (int64_t[]){dirs, 8 * NH}, b[first], (size_t)dirs * sizeof b[0]));
    Onnx__NodeProto *n = node(g, "LSTM", "lstm", "x,w,r,b", "y,yh,yc");
    attr_int(n, "hidden_size", NH);
    attr_string(n, "direction", direction);
    add_output(g, "y", NULL);
    add_output(g, "yh", NULL);
    add_output(g, "yc", NULL);
    ts_module *m = load(model(g, 13));
    arena_free();
    return m;
}

static void check_bidirectional(void) {
    ts_scope_begin();
    ts_module *bi = lstm("bidirectional", 2, 0), *fw = lstm("forward", 1, 0),
              *rv = lstm("reverse", 1, 1);
    CHECK(bi && fw && rv);
    float xv[T * NB * NI];
    for (int k = 0; k < T * NB * NI; k++) xv[k] = (float)((k * 3) % 7 - 3) / 2;
    ts_tensor *x = ts_from_data(TS_SHAPE(T, NB, NI), TS_F32, xv, (ts_opts){0});
    double *gb[3] = {0}, *gf[3] = {0}, *gr[3] = {0};
    int64_t cb[3], cf[3], cr[3];
    ts_shape sb[3], sf[3], sr[3];
    bool ok = bi && fw && rv && run_values(bi, 1, &x, 3, gb, cb, sb) &&
              run_values(fw, 1, &x, 3, gf, cf, sf) && run_values(rv, 1, &x, 3, gr, cr, sr);
    CHECK(ok);
    if (ok) {
        CHECK(same_shape(sb[0], 4, (int64_t[]){T, 2, NB, NH}));
        CHECK(same_shape(sb[1], 3, (int64_t[]){2, NB, NH}) && same_shape(sb[2], 3, sb[1].dims));
        /* Y [T, D, B, H]: direction d of step t at (t * 2 + d) * B * H */
        bool same = true;
        for (int t = 0; t < T; t++) {
            same = same && !memcmp(gb[0] + (t * 2 + 0) * NB * NH, gf[0] + t * NB * NH,
                                   NB * NH * sizeof(double));
            same = same && !memcmp(gb[0] + (t * 2 + 1) * NB * NH, gr[0] + t * NB * NH,
                                   NB * NH * sizeof(double));
        }
        CHECK(same);
        for (int k = 1; k < 3; k++) { /* Y_h, Y_c [D, B, H] */
            CHECK(!memcmp(gb[k], gf[k], NB * NH * sizeof(double)));
            CHECK(!memcmp(gb[k] + NB * NH, gr[k], NB * NH * sizeof(double)));
        }
        printf("  LSTM bidirectional = forward + reverse       ok\n");
    }
    for (int k = 0; k < 3; k++) free(gb[k]), free(gf[k]), free(gr[k]);
    CHECK_OK();
    ts_scope_end();
    ts_module_free(bi);
    ts_module_free(fw);
    ts_module_free(rv);
}

/* ------------------------------------------------------------------ failed allocations
 * Trilu(x [3, 3], k) keeping j <= i + k, k an int32 input (converted to int64 on its way to the
 * host): each allocation of a run failed in turn. A failed run says so in its status and gives no
 * output; one that succeeds gives the triangle of k = 1. */
static uint8_t *trilu_model;
static size_t trilu_len;

typedef struct trilu_st {
    ts_module *m;
    ts_tensor *x, *k, *y;
    ts_status status;
} trilu_st;

static void build_trilu_model(void) {
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(FLOAT, 2, (int64_t[]){3, 3}));
    add_input(g, "k", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 0, NULL));
    attr_int(node(g, "Trilu", "tri", "x,k", "y"), "upper", 0);
    add_output(g, "y", NULL);
    const uint8_t *buf = pack(model(g, 14), &trilu_len);
    trilu_model = malloc(trilu_len);
    memcpy(trilu_model, buf, trilu_len);
    arena_free();
}

static void *trilu_setup(void) {
    static const float xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const int32_t one = 1;
    trilu_st *s = calloc(1, sizeof *s);
    s->m = ts_onnx_load_buffer(trilu_model, trilu_len, NULL, (ts_onnx_opts){0});
    s->x = ts_from_data(TS_SHAPE(3, 3), TS_F32, xv, (ts_opts){0});
    s->k = ts_from_data((ts_shape){.ndim = 0}, TS_I32, &one, (ts_opts){.dtype = TS_I32});
    return s;
}

static bool trilu_run(void *p) {
    trilu_st *s = p;
    ts_release(s->y);
    s->y = NULL;
    s->status = ts_onnx_run(s->m, 2, (ts_tensor *[]){s->x, s->k}, 1, &s->y);
    return s->status == TS_OK && ts_error() == TS_OK;
}

static void trilu_check(void *p, bool ok) {
    trilu_st *s = p;
    if (!ok) {
        CHECK(s->status != TS_OK && !s->y);
        return;
    }
    static const float want[9] = {1, 2, 0, 4, 5, 6, 7, 8, 9};
    float got[9] = {0};
    CHECK(s->y && ts_copy_to_host(s->y, got, sizeof got) == TS_OK &&
          !memcmp(got, want, sizeof got));
}

static void trilu_teardown(void *p) {
    trilu_st *s = p;
    ts_release(s->y);
    ts_release(s->x);
    ts_release(s->k);
    ts_module_free(s->m);
    free(s);
}

static void test_failed_allocations(void) {
    build_trilu_model();
    trilu_st *ref = trilu_setup();
    CHECK(ref->m && trilu_run(ref));
    trilu_check(ref, true);
    trilu_teardown(ref);
    const ts_sweep_case c = {.name = "onnx_run Trilu",
                             .setup = trilu_setup,
                             .run = trilu_run,
                             .teardown = trilu_teardown,
                             .check = trilu_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 2000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    free(trilu_model);
}

int main(void) {
    printf("one-node models:\n");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    for (int floats = 0; floats <= 1; floats++) {
        check_list_cap(TSO_MAX_ATTR_LIST, floats, true);
        check_list_cap(TSO_MAX_ATTR_LIST + 1, floats, false);
    }
    test_failed_allocations();
    printf("results:\n");
    check_scan("output axis 1", 1, 0);
    check_scan("output direction 1", 0, 1);
    check_unique_nan();
    check_einsum();
    check_bidirectional();
    arena_release();
    return ts_test_finish();
}
#endif
