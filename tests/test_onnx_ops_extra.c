/* test_onnx_ops_extra.c — the ONNX operators the backend suite covers thinly
 * (src/onnx/ops_signal.c, ops_quant.c, ops_train.c, ops_text.c), on one-node models packed here
 * with protobuf-c, on every test device: DFT (an axis in the middle, dft_length cutting and
 * padding, one-sided, inverse, complex input) and STFT (window, frame_length, complex signal)
 * against a float64 DFT with a float32 rounding bound, and DFT's gradient by central differences;
 * MatMulInteger and ConvInteger with per-row / per-column / per-channel zero points and int32
 * wrap-around, QLinearMatMul and QLinearConv with ties to even, saturation, per-channel scales and
 * a bias, all exact against integer references; Adam, Momentum (Nesterov) and Adagrad past their
 * first step against the formulas in float64; Gradient through an initializer (whose gradient stays
 * untouched) with xs and zs (an integer z among them); TfIdfVectorizer's modes and skips against
 * onnxruntime's outputs. Then the errors: bad attributes refused at load (TS_ERR_UNSUPPORTED /
 * TS_ERR_FORMAT naming the node), bad shapes and dtypes at run time, the training domain's import
 * and versions. An allocation-failure sweep loads and runs a model of each family. */
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

#define U        0x1p-24 /* float32's unit roundoff */
#define TRAINING "ai.onnx.preview.training"

/* ------------------------------------------------------------------ one-node models in memory
 * Every protobuf part is calloc'ed and listed; model_free frees the list. */
enum { MAX_PARTS = 1024, MAX_IO = 16 };
static void *parts[MAX_PARTS];
static int n_parts;

static void *part(size_t size) {
    void *p = calloc(1, size ? size : 1);
    if (!p || n_parts == MAX_PARTS) abort(); /* a test bug, not a library error */
    return parts[n_parts++] = p;
}

static char *text(const char *s) { return strcpy(part(strlen(s) + 1), s); }

static void model_free(void) {
    while (n_parts) free(parts[--n_parts]);
}

typedef struct model {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__NodeProto *node;
} model;

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

static void import(model *b, const char *domain, int version) {
    Onnx__OperatorSetIdProto *o = part(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = text(domain);
    o->has_version = 1;
    o->version = version;
    b->m.opset_import[b->m.n_opset_import++] = o;
}

/* Appends the node `op` (in `domain`, "" for the default one) reading `ins` and writing `outs`;
 * the attribute helpers below write to it. */
static void add_node(model *b, const char *op, const char *domain, const char *ins,
                     const char *outs) {
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
static model *model_new(const char *op, const char *domain, int opset, const char *ins,
                        const char *outs) {
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
    b->g.initializer = part(4 * sizeof *b->g.initializer);
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
static void a_int(model *b, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}
static void a_float(model *b, const char *name, float v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}
static void a_str(model *b, const char *name, const char *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s = (ProtobufCBinaryData){strlen(v), (uint8_t *)text(v)};
}
static void a_ints(model *b, const char *name, size_t k, const int64_t *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = k;
    a->ints = memcpy(part(k * sizeof *v), v, k * sizeof *v);
}
static void a_floats(model *b, const char *name, size_t k, const float *v) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = k;
    a->floats = memcpy(part(k * sizeof *v), v, k * sizeof *v);
}
static void a_strs(model *b, const char *name, const char *spaced) {
    Onnx__AttributeProto *a = attr(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    char **names = name_list(spaced, &a->n_strings);
    a->strings = part(MAX_IO * sizeof *a->strings);
    for (size_t i = 0; i < a->n_strings; i++)
        a->strings[i] = (ProtobufCBinaryData){strlen(names[i]), (uint8_t *)names[i]};
}

/* a float32 initializer (a parameter of the loaded module) */
static void init_f32(model *b, const char *name, int64_t n, const float *v) {
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

static ts_module *load(model *b, ts_device dev) {
    size_t len = onnx__model_proto__get_packed_size(&b->m);
    uint8_t *buf = part(len);
    onnx__model_proto__pack(&b->m, buf);
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = dev});
}

/* ------------------------------------------------------------------ tensors and checks */
static ts_tensor *tensor(ts_device dev, ts_dtype dt, ts_shape s, const void *host) {
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
static void check_values(ts_tensor *got, ts_dtype dt, ts_shape s, const double *want,
                         const double *tol, const char *what) {
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
static bool run(ts_module *m, int n_in, ts_tensor **in, int n_out, ts_tensor **out) {
    return m && ts_onnx_run(m, n_in, in, n_out, out) == TS_OK;
}

/* deterministic values in [-1, 1) */
static uint64_t seed = 12345;
static double next_value(void) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(seed >> 11) / (double)(1ull << 52) - 1.0;
}

/* ------------------------------------------------------------------ DFT */
typedef struct dft_case {
    int64_t dims[4]; /* [batch, d1, d2, 1 or 2] */
    int axis;        /* 1 or 2 (or -2: the same as 2) */
    int64_t length;  /* dft_length, 0: none */
    bool inverse, onesided;
} dft_case;

/* y [..., K, ..., 2] of x by the definition in float64, and a bound on float32 rounding: the
 * twiddles and each of the n products and sums carry a relative error of U, so an output is off by
 * at most about 2 (n + 2) U sum |x| (2: the real and imaginary products). */
static void dft_reference(const dft_case *dc, const float *x, int64_t n, int64_t bins, double *want,
                          double *tol) {
    int axis = dc->axis < 0 ? dc->axis + 4 : dc->axis, c = (int)dc->dims[3];
    int64_t sz[3] = {dc->dims[0], dc->dims[1], dc->dims[2]}, osz[3] = {sz[0], sz[1], sz[2]};
    osz[axis] = bins;
    int64_t len = sz[axis] < n ? sz[axis] : n;
    for (int64_t i0 = 0; i0 < osz[0]; i0++)
        for (int64_t i1 = 0; i1 < osz[1]; i1++)
            for (int64_t i2 = 0; i2 < osz[2]; i2++) {
                int64_t o[3] = {i0, i1, i2}, k = o[axis];
                double re = 0, im = 0, mag = 0;
                for (int64_t t = 0; t < len; t++) {
                    int64_t p[3] = {i0, i1, i2};
                    p[axis] = t;
                    const float *e = x + ((p[0] * sz[1] + p[1]) * sz[2] + p[2]) * c;
                    double xr = e[0], xi = c == 2 ? e[1] : 0;
                    double a = 2 * 3.14159265358979323846 * (double)((k * t) % n) / (double)n;
                    double s = dc->inverse ? sin(a) : -sin(a);
                    re += xr * cos(a) - xi * s;
                    im += xr * s + xi * cos(a);
                    mag += fabs(xr) + fabs(xi);
                }
                double scale = dc->inverse ? 1.0 / (double)n : 1.0;
                int64_t at = ((i0 * osz[1] + i1) * osz[2] + i2) * 2;
                want[at] = re * scale, want[at + 1] = im * scale;
                tol[at] = tol[at + 1] = 2 * (double)(n + 2) * U * mag * scale + 1e-30;
            }
}

static void test_dft_case(ts_device dev, const dft_case *dc) {
    ts_scope_begin();
    model *b = model_new("DFT", "", 17, dc->length ? "x len" : "x", "y");
    a_int(b, "axis", dc->axis);
    if (dc->inverse) a_int(b, "inverse", 1);
    if (dc->onesided) a_int(b, "onesided", 1);
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    int64_t count = dc->dims[0] * dc->dims[1] * dc->dims[2] * dc->dims[3];
    float *x = malloc((size_t)count * sizeof *x);
    for (int64_t i = 0; i < count; i++) x[i] = (float)next_value();
    int axis = dc->axis < 0 ? dc->axis + 4 : dc->axis;
    int64_t n = dc->length ? dc->length : dc->dims[axis], bins = dc->onesided ? n / 2 + 1 : n;
    ts_shape os = {.ndim = 4, .dims = {dc->dims[0], dc->dims[1], dc->dims[2], 2}};
    os.dims[axis] = bins;
    int64_t out_count = os.dims[0] * os.dims[1] * os.dims[2] * 2;
    double *want = malloc((size_t)out_count * sizeof *want), *tol = malloc((size_t)out_count * 8);
    dft_reference(dc, x, n, bins, want, tol);
    ts_tensor *in[2] = {
        tensor(dev, TS_F32,
               (ts_shape){.ndim = 4, .dims = {dc->dims[0], dc->dims[1], dc->dims[2], dc->dims[3]}},
               x),
        tensor(dev, TS_I64, TS_SHAPE(), &n)};
    ts_tensor *y = NULL;
    CHECK(run(m, dc->length ? 2 : 1, in, 1, &y));
    check_values(y, TS_F32, os, want, tol, "DFT");
    free(x), free(want), free(tol);
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* the gradient of sum(DFT(x) * r) by central differences (ts_gradcheck), float64 */
static ts_tensor *dft_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    ts_tensor *y = NULL;
    if (!run(ctx, 1, (ts_tensor **)in, 1, &y)) return NULL;
    return y;
}

static void test_dft_gradient(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "axis", 1);
    a_int(b, "onesided", 1);
    ts_module *m = load(b, dev);
    double x[12];
    for (int i = 0; i < 12; i++) x[i] = next_value();
    ts_tensor *in = tensor(dev, TS_F64, TS_SHAPE(2, 6, 1), x);
    ts_set_requires_grad(in, true);
    CHECK(m && ts_gradcheck(dft_fn, m, &in, 1, (ts_gradcheck_opts){0}));
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

static void test_dft(ts_device dev) {
    static const dft_case cases[] = {
        {{2, 5, 3, 2}, 1, 0, false, false}, /* complex, axis 1 */
        {{2, 5, 3, 2}, 1, 3, false, false}, /* cut to 3 */
        {{2, 5, 3, 2}, 1, 8, false, false}, /* padded to 8 */
        {{2, 5, 3, 2}, 1, 0, true, false},  /* inverse */
        {{2, 4, 7, 1}, -2, 0, false, true}, /* real, the last signal dim, one-sided (odd n) */
        {{1, 3, 6, 1}, 2, 10, false, true}, /* real, one-sided, padded (even n) */
        {{1, 9, 2, 2}, 1, 0, false, true},  /* complex one-sided: the first n / 2 + 1 bins */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_dft_case(dev, &cases[i]);
    test_dft_gradient(dev);
}

/* ------------------------------------------------------------------ STFT */
typedef struct stft_case {
    int64_t len, c, step, window, frame; /* window: its length (0: none); frame: 0: none */
    bool onesided;
} stft_case;

static void test_stft_case(ts_device dev, const stft_case *sc) {
    ts_scope_begin();
    const char *ins = sc->window && sc->frame ? "x step w f"
                      : sc->window            ? "x step w"
                                              : "x step - f";
    model *b = model_new("STFT", "", 17, ins, "y");
    if (!sc->onesided) a_int(b, "onesided", 0);
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    int64_t f = sc->window ? sc->window : sc->frame, frames = 1 + (sc->len - f) / sc->step;
    int64_t bins = sc->onesided ? f / 2 + 1 : f, count = 2 * sc->len * sc->c;
    float *x = malloc((size_t)count * sizeof *x), w[16];
    for (int64_t i = 0; i < count; i++) x[i] = (float)next_value();
    for (int64_t i = 0; i < sc->window; i++) w[i] = (float)(0.5 + 0.5 * next_value());
    int64_t out_count = 2 * frames * bins * 2;
    double *want = malloc((size_t)out_count * sizeof *want), *tol = malloc((size_t)out_count * 8);
    float *frame = malloc((size_t)(f * sc->c) * sizeof *frame);
    for (int64_t bt = 0; bt < 2; bt++)
        for (int64_t j = 0; j < frames; j++) {
            /* the windowed frame: the same float32 products Tessera makes */
            for (int64_t t = 0; t < f * sc->c; t++)
                frame[t] = x[(bt * sc->len + j * sc->step) * sc->c + t] *
                           (sc->window ? w[t / sc->c] : 1.0f);
            dft_case dc = {{1, f, 1, sc->c}, 1, 0, false, sc->onesided};
            int64_t at = (bt * frames + j) * bins * 2;
            dft_reference(&dc, frame, f, bins, want + at, tol + at);
        }
    int64_t fl = sc->frame;
    ts_tensor *in[4] = {tensor(dev, TS_F32, TS_SHAPE(2, sc->len, sc->c), x),
                        tensor(dev, TS_I64, TS_SHAPE(), &sc->step), NULL, NULL};
    int k = 2;
    if (sc->window) in[k++] = tensor(dev, TS_F32, TS_SHAPE(sc->window), w);
    if (sc->frame) in[k++] = tensor(dev, TS_I64, TS_SHAPE(), &fl);
    ts_tensor *y = NULL;
    CHECK(run(m, k, in, 1, &y));
    check_values(y, TS_F32, TS_SHAPE(2, frames, bins, 2), want, tol, "STFT");
    free(x), free(want), free(tol), free(frame);
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

static void test_stft(ts_device dev) {
    static const stft_case cases[] = {
        {23, 1, 4, 6, 0, true},  /* window, one-sided */
        {23, 1, 3, 5, 5, false}, /* window and a matching frame_length, two-sided */
        {17, 2, 4, 0, 5, false}, /* a complex signal, frame_length only */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_stft_case(dev, &cases[i]);
}

/* ------------------------------------------------------------------ quantized operators */
static void test_matmul_integer(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("MatMulInteger", "", 10, "a b az bz", "y");
    ts_module *m = load(b, dev);
    uint8_t a[2 * 3 * 4], bm[4 * 5], az[3] = {3, 128, 255}, bz[5] = {0, 7, 200, 255, 1};
    for (int i = 0; i < 24; i++) a[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 20; i++) bm[i] = (uint8_t)(i * 53 + 5);
    double want[2 * 3 * 5];
    for (int bt = 0; bt < 2; bt++) /* per-row zero points of a, per-column ones of b */
        for (int r = 0; r < 3; r++)
            for (int cl = 0; cl < 5; cl++) {
                int64_t s = 0;
                for (int k = 0; k < 4; k++)
                    s += ((int64_t)a[(bt * 3 + r) * 4 + k] - az[r]) *
                         ((int64_t)bm[k * 5 + cl] - bz[cl]);
                want[(bt * 3 + r) * 5 + cl] = (double)s;
            }
    ts_tensor *in[4] = {tensor(dev, TS_U8, TS_SHAPE(2, 3, 4), a),
                        tensor(dev, TS_U8, TS_SHAPE(4, 5), bm), tensor(dev, TS_U8, TS_SHAPE(3), az),
                        tensor(dev, TS_U8, TS_SHAPE(5), bz)};
    ts_tensor *y = NULL;
    CHECK(run(m, 4, in, 1, &y));
    check_values(y, TS_I32, TS_SHAPE(2, 3, 5), want, NULL, "MatMulInteger");
    ts_module_free(m);
    model_free();
    /* 40000 products of 255 * 255 pass 2^31: int32 sums wrap */
    b = model_new("MatMulInteger", "", 10, "a b", "y");
    m = load(b, dev);
    enum { K = 40000 };
    ts_tensor *ab[2] = {ts_full(TS_SHAPE(1, K), 255, (ts_opts){.dtype = TS_U8, .device = dev}),
                        ts_full(TS_SHAPE(K, 1), 255, (ts_opts){.dtype = TS_U8, .device = dev})};
    double wrapped = (double)(int32_t)(uint32_t)((uint64_t)K * 255 * 255);
    CHECK(run(m, 2, ab, 1, &y));
    check_values(y, TS_I32, TS_SHAPE(1, 1), &wrapped, NULL, "MatMulInteger wrap");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ONNX's requantization: round(acc * (sa * sb / sy), half to even) + zp, saturated to [0, 255];
 * the scale product in float32 as ONNX's reference computes it */
static double requant(double acc, float sa, float sb, float sy, int zp) {
    float prod = sa * sb, mult = prod / sy;
    double v = nearbyint(acc * (double)mult) + zp; /* the default rounding: half to even */
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

static void test_qlinear_matmul(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    ts_module *m = load(b, dev);
    /* scales per row of a and per column of b; row 0 gives 5 * 0.5 = 2.5 and -6 * 0.25 = -1.5:
     * ties, to even (2 and -2, where rounding half up gives 3 and -1); row 1 gives 366 and -369:
     * saturated to 255 and 0 */
    uint8_t a[2 * 3] = {3, 4, 2, 250, 0, 2}, bm[3 * 2] = {5, 2, 6, 2, 9, 255}, az = 2, bz = 4;
    uint8_t yz = 10;
    float as[2] = {0.5f, 1.5f}, bs[2] = {1.0f, 0.5f}, ys = 1.0f;
    double want[4];
    for (int r = 0; r < 2; r++)
        for (int cl = 0; cl < 2; cl++) {
            double acc = 0;
            for (int k = 0; k < 3; k++) acc += (double)(a[r * 3 + k] - az) * (bm[k * 2 + cl] - bz);
            want[r * 2 + cl] = requant(acc, as[r], bs[cl], ys, yz);
        }
    ts_tensor *in[8] = {
        tensor(dev, TS_U8, TS_SHAPE(2, 3), a), tensor(dev, TS_F32, TS_SHAPE(2), as),
        tensor(dev, TS_U8, TS_SHAPE(), &az),   tensor(dev, TS_U8, TS_SHAPE(3, 2), bm),
        tensor(dev, TS_F32, TS_SHAPE(2), bs),  tensor(dev, TS_U8, TS_SHAPE(), &bz),
        tensor(dev, TS_F32, TS_SHAPE(1), &ys), tensor(dev, TS_U8, TS_SHAPE(1), &yz)};
    ts_tensor *y = NULL;
    CHECK(run(m, 8, in, 1, &y));
    check_values(y, TS_U8, TS_SHAPE(2, 2), want, NULL, "QLinearMatMul");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* y[o][i][j] = sum over c, ky, kx of (x - xz) (w - wz[o]) at the strided, dilated, padded taps
 * (group 2), + bias[o]: float64 holds these integers exactly */
typedef struct conv_geom {
    int stride, dil, pad_t, pad_l, oh, ow;
} conv_geom;

static double conv_at(const uint8_t *x, int xz, const uint8_t *w, int wz, const conv_geom *g, int o,
                      int i, int j) {
    double s = 0; /* x [1, 4, 5, 5], w [4, 2, 3, 3], group 2: output o reads channels (o/2)*2.. */
    for (int c = 0; c < 2; c++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                int yy = i * g->stride + ky * g->dil - g->pad_t,
                    xx = j * g->stride + kx * g->dil - g->pad_l;
                if (yy < 0 || yy >= 5 || xx < 0 || xx >= 5) continue;
                int ch = (o / 2) * 2 + c;
                s += (double)(x[(ch * 5 + yy) * 5 + xx] - xz) *
                     (w[((o * 2 + c) * 3 + ky) * 3 + kx] - wz);
            }
    return s;
}

static void test_qlinear_conv(ts_device dev, bool quantized) {
    ts_scope_begin();
    model *b = quantized ? model_new("QLinearConv", "", 10, "x xs xz w ws wz ys yz bias", "y")
                         : model_new("ConvInteger", "", 10, "x w xz wz", "y");
    conv_geom g = quantized ? (conv_geom){2, 1, 1, 1, 3, 3} : (conv_geom){1, 2, 1, 0, 2, 1};
    a_int(b, "group", 2);
    a_ints(b, "strides", 2, (int64_t[]){g.stride, g.stride});
    a_ints(b, "dilations", 2, (int64_t[]){g.dil, g.dil});
    a_ints(b, "pads", 4, quantized ? (int64_t[]){1, 1, 1, 1} : (int64_t[]){1, 0, 0, 0});
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    uint8_t x[4 * 25], w[4 * 2 * 9], xz = 120, wz[4] = {0, 128, 255, 3};
    for (int i = 0; i < 100; i++) x[i] = (uint8_t)(i * 97 + 13);
    for (int i = 0; i < 72; i++) w[i] = (uint8_t)(i * 61 + 29);
    int32_t bias[4] = {-3000, 17, 0, 123456};
    float xs = 0.02f, ws[4] = {0.5f, 0.01f, 0.003f, 0.25f}, ys = 0.75f;
    uint8_t yz = 100;
    double want[4 * 9];
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < g.oh; i++)
            for (int j = 0; j < g.ow; j++) {
                double acc = conv_at(x, xz, w, wz[o], &g, o, i, j);
                want[(o * g.oh + i) * g.ow + j] =
                    quantized ? requant(acc + bias[o], xs, ws[o], ys, yz) : acc;
            }
    ts_tensor *tx = tensor(dev, TS_U8, TS_SHAPE(1, 4, 5, 5), x),
              *tw = tensor(dev, TS_U8, TS_SHAPE(4, 2, 3, 3), w);
    ts_tensor *txz = tensor(dev, TS_U8, TS_SHAPE(), &xz),
              *twz = tensor(dev, TS_U8, TS_SHAPE(4), wz);
    ts_tensor *y = NULL;
    if (quantized) {
        ts_tensor *in[9] = {tx,
                            tensor(dev, TS_F32, TS_SHAPE(), &xs),
                            txz,
                            tw,
                            tensor(dev, TS_F32, TS_SHAPE(4), ws),
                            twz,
                            tensor(dev, TS_F32, TS_SHAPE(), &ys),
                            tensor(dev, TS_U8, TS_SHAPE(), &yz),
                            tensor(dev, TS_I32, TS_SHAPE(4), bias)};
        CHECK(run(m, 9, in, 1, &y));
    } else {
        ts_tensor *in[4] = {tx, tw, txz, twz};
        CHECK(run(m, 4, in, 1, &y));
    }
    check_values(y, quantized ? TS_U8 : TS_I32, TS_SHAPE(1, 4, g.oh, g.ow), want, NULL,
                 quantized ? "QLinearConv" : "ConvInteger");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ training operators */
enum { TN = 3 }; /* elements per optimized tensor */

/* Runs a training-domain optimizer on two tensors of TN float64 values (state groups `per` - 2)
 * with R = 0.1 and T = t; out gets (per - 1) * 2 tensors. */
static bool run_optimizer(model *b, ts_device dev, int per, int64_t t, double v[][2][TN],
                          ts_tensor **out) {
    ts_module *m = load(b, dev);
    double r = 0.1;
    ts_tensor *in[10] = {tensor(dev, TS_F64, TS_SHAPE(), &r), tensor(dev, TS_I64, TS_SHAPE(), &t)};
    for (int k = 0; k < per; k++)
        for (int i = 0; i < 2; i++) in[2 + k * 2 + i] = tensor(dev, TS_F64, TS_SHAPE(TN), v[k][i]);
    bool ok = run(m, 2 + 2 * per, in, (per - 1) * 2, out);
    ts_module_free(m);
    return ok;
}

static model *optimizer_model(const char *op, int per) {
    static const char *ins[] = {"", "", "", "R T X1 X2 G1 G2 V1 V2", "R T X1 X2 G1 G2 V1 V2 H1 H2"};
    static const char *outs[] = {"", "", "", "X1n X2n V1n V2n", "X1n X2n V1n V2n H1n H2n"};
    model *b = model_new(op, TRAINING, 17, ins[per], outs[per]);
    import(b, TRAINING, 1);
    return b;
}

/* float64 operands: each output is a handful of operations, so 1e-13 relative covers rounding */
static void check_f64(ts_tensor *got, const double *want, const char *what) {
    double tol[TN];
    for (int i = 0; i < TN; i++) tol[i] = 1e-13 * (1 + fabs(want[i]));
    check_values(got, TS_F64, TS_SHAPE(TN), want, tol, what);
}

static void test_adam(ts_device dev) {
    ts_scope_begin();
    double v[4][2][TN];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++)
                v[k][i][j] = k == 3 ? 0.5 + fabs(next_value()) : next_value();
    model *b = optimizer_model("Adam", 4);
    const double al = 0.875, be = 0.75, eps = 0.0625, nc = 0.125, post = 0.25; /* exact in f32 */
    a_float(b, "alpha", (float)al), a_float(b, "beta", (float)be),
        a_float(b, "epsilon", (float)eps);
    a_float(b, "norm_coefficient", (float)nc), a_float(b, "norm_coefficient_post", (float)post);
    ts_tensor *out[6] = {0};
    const int64_t t = 3;
    CHECK(run_optimizer(b, dev, 4, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], vn[TN], hn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            vn[j] = al * v[2][i][j] + (1 - al) * g;
            hn[j] = be * v[3][i][j] + (1 - be) * g * g;
            double r = 0.1 * sqrt(1 - pow(be, t)) / (1 - pow(al, t)); /* bias correction, T > 0 */
            x[j] = (1 - post) * (v[0][i][j] - r * vn[j] / (sqrt(hn[j]) + eps));
        }
        check_f64(out[i], x, "Adam X"), check_f64(out[2 + i], vn, "Adam V");
        check_f64(out[4 + i], hn, "Adam H");
    }
    model_free();
    ts_scope_end();
}

static void test_momentum(ts_device dev, bool nesterov, int64_t t) {
    ts_scope_begin();
    double v[3][2][TN];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++) v[k][i][j] = next_value();
    model *b = optimizer_model("Momentum", 3);
    const double al = 0.875, be = 0.5, nc = 0.125;
    a_float(b, "alpha", (float)al), a_float(b, "beta", (float)be);
    a_float(b, "norm_coefficient", (float)nc), a_str(b, "mode", nesterov ? "nesterov" : "standard");
    ts_tensor *out[4] = {0};
    CHECK(run_optimizer(b, dev, 3, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], vn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            vn[j] = al * v[2][i][j] + (t > 0 ? be : 1.0) * g; /* the first step takes all of g */
            x[j] = v[0][i][j] - 0.1 * (nesterov ? g + al * vn[j] : vn[j]);
        }
        check_f64(out[i], x, "Momentum X"), check_f64(out[2 + i], vn, "Momentum V");
    }
    model_free();
    ts_scope_end();
}

static void test_adagrad(ts_device dev) {
    ts_scope_begin();
    double v[3][2][TN];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < TN; j++) v[k][i][j] = k == 2 ? fabs(next_value()) : next_value();
    model *b = optimizer_model("Adagrad", 3);
    const double decay = 0.25, eps = 0.0625, nc = 0.125;
    a_float(b, "decay_factor", (float)decay), a_float(b, "epsilon", (float)eps);
    a_float(b, "norm_coefficient", (float)nc);
    ts_tensor *out[4] = {0};
    const int64_t t = 4;
    CHECK(run_optimizer(b, dev, 3, t, v, out));
    for (int i = 0; i < 2; i++) {
        double x[TN], hn[TN];
        for (int j = 0; j < TN; j++) {
            double g = nc * v[0][i][j] + v[1][i][j];
            hn[j] = v[2][i][j] + g * g;
            x[j] = v[0][i][j] - 0.1 / (1 + t * decay) * g / (sqrt(hn[j]) + eps);
        }
        check_f64(out[i], x, "Adagrad X"), check_f64(out[2 + i], hn, "Adagrad H");
    }
    model_free();
    ts_scope_end();
}

/* float32 R and X: the outputs keep X's dtype */
static void test_optimizer_dtypes(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn");
    import(b, TRAINING, 1);
    ts_module *m = load(b, dev);
    float x[2] = {1, -2}, g[2] = {0.5f, 0.25f}, h[2] = {1, 2};
    double r = 0.5;
    int64_t t = 0;
    ts_tensor *in[5] = {tensor(dev, TS_F64, TS_SHAPE(1), &r), tensor(dev, TS_I64, TS_SHAPE(), &t),
                        tensor(dev, TS_F32, TS_SHAPE(2), x), tensor(dev, TS_F32, TS_SHAPE(2), g),
                        tensor(dev, TS_F32, TS_SHAPE(2), h)};
    ts_tensor *out[2] = {0};
    CHECK(run(m, 5, in, 2, out));
    double want[2], tol[2];
    for (int j = 0; j < 2; j++) { /* default epsilon 1e-6; five float32 operations */
        double hn = h[j] + (double)g[j] * g[j];
        want[j] = x[j] - r * g[j] / (sqrt(hn) + 1e-6);
        tol[j] = 8 * U * (fabs(x[j]) + fabs(want[j] - x[j]));
    }
    check_values(out[0], TS_F32, TS_SHAPE(2), want, tol, "Adagrad float32");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* y = (a + b) * a * w with w an initializer: dy/da = (2a + b) w, dy/db = a w (y is not a scalar:
 * the gradient of sum(y)); Gradient(xs = a, zs = b) and Gradient(xs = a b). */
static void test_gradient(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Add", "", 13, "a b", "y da ga gb");
    import(b, TRAINING, 1);
    b->node->output[0] = text("s");
    b->node->n_output = 1;
    add_node(b, "Mul", "", "s a", "p");
    add_node(b, "Mul", "", "p w", "y");
    add_node(b, "Gradient", TRAINING, "a b", "da");
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b"), a_str(b, "y", "y");
    add_node(b, "Gradient", TRAINING, "a b", "ga gb");
    a_strs(b, "xs", "a b"), a_str(b, "y", "y");
    float w[3] = {2, -1, 0.5f};
    init_f32(b, "w", 3, w);
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    float a[3] = {1, 2, -3}, bb[3] = {0.5f, -4, 2};
    ts_tensor *in[2] = {tensor(dev, TS_F32, TS_SHAPE(3), a), tensor(dev, TS_F32, TS_SHAPE(3), bb)};
    ts_tensor *out[4] = {0};
    CHECK(run(m, 2, in, 4, out));
    double da[3], db[3], tol[3];
    for (int j = 0; j < 3; j++) { /* small integers and halves: exact in float32 */
        da[j] = (2.0 * a[j] + bb[j]) * w[j];
        db[j] = (double)a[j] * w[j];
        tol[j] = 0;
    }
    check_values(out[1], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a zs=b");
    check_values(out[2], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a b (a)");
    check_values(out[3], TS_F32, TS_SHAPE(3), db, tol, "Gradient xs=a b (b)");
    ts_tensor *wp = m ? ts_module_get(m, "w") : NULL;
    CHECK(wp && !ts_grad(wp)); /* the initializer's gradient is untouched */
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* zs past the first are fed as they are too: y = (a + b) * Cast(k) with k an int64 z after b
 * (an integer cannot require a gradient, so one taken for an x would fail): dy/da = k. */
static void test_gradient_int_z(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("Gradient", TRAINING, 13, "a b k", "da y");
    import(b, TRAINING, 1);
    b->node->n_output = 1; /* y is the graph's other output, made below */
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b k"), a_str(b, "y", "y");
    add_node(b, "Cast", "", "k", "kf");
    a_int(b, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    add_node(b, "Add", "", "a b", "s");
    add_node(b, "Mul", "", "s kf", "y");
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    float a[3] = {1, 2, -3}, bb[3] = {0.5f, -4, 2};
    int64_t k[3] = {3, -2, 5};
    ts_tensor *in[3] = {tensor(dev, TS_F32, TS_SHAPE(3), a), tensor(dev, TS_F32, TS_SHAPE(3), bb),
                        tensor(dev, TS_I64, TS_SHAPE(3), k)};
    ts_tensor *out[2] = {0};
    CHECK(run(m, 3, in, 2, out));
    CHECK_OK();
    const double da[3] = {3, -2, 5}, tol[3] = {0, 0, 0}; /* exact */
    check_values(out[0], TS_F32, TS_SHAPE(3), da, tol, "Gradient xs=a zs=b k");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ TfIdfVectorizer */
/* A pool of 4 unigrams, 4 bigrams and a trigram, the output columns permuted. */
static const int64_t pool[] = {2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 6, 7};
static const int64_t levels[] = {0, 4, 12}, columns[] = {0, 5, 2, 3, 4, 1, 6, 7, 8};
static const float weights[] = {0.5f, 1.5f, 2.0f, 3.0f, 0.25f, 4.0f, 1.25f, 0.75f, 8.0f};

typedef struct tfidf_case {
    const char *mode;
    int64_t min, max, skip;
    bool weighted, batch; /* batch: X2 [2, 8] int64, else X1 [11] int32 */
    double want[18];      /* onnxruntime 1.32's outputs for the same model and input */
} tfidf_case;

static model *tfidf_model(const tfidf_case *tc) {
    model *b = model_new("TfIdfVectorizer", "", 9, "x", "y");
    a_str(b, "mode", tc->mode);
    a_int(b, "min_gram_length", tc->min), a_int(b, "max_gram_length", tc->max);
    a_int(b, "max_skip_count", tc->skip);
    a_ints(b, "pool_int64s", 15, pool), a_ints(b, "ngram_counts", 3, levels);
    a_ints(b, "ngram_indexes", 9, columns);
    if (tc->weighted) a_floats(b, "weights", 9, weights);
    return b;
}

static void test_tfidf(ts_device dev) {
    /* weights belong to the pool's n-grams (ONNX: "the i-th element in weights is the weight of
     * the i-th n-gram in pool"), so they move with ngram_indexes' permutation */
    static const tfidf_case cases[] = {
        {"TF", 1, 3, 1, false, true, {2, 0, 1, 0, 1, 3, 1, 2, 1, 0, 1, 2, 0, 1, 1, 2, 0, 1}},
        {"IDF",
         1,
         3,
         1,
         true,
         true,
         {0.5, 0, 2, 0, 0.25, 1.5, 1.25, 0.75, 8, 0, 4, 2, 0, 0.25, 1.5, 1.25, 0, 8}},
        {"TFIDF",
         1,
         3,
         1,
         true,
         true,
         {1, 0, 2, 0, 0.25, 4.5, 1.25, 1.5, 8, 0, 4, 4, 0, 0.25, 1.5, 2.5, 0, 8}},
        {"TF", 2, 2, 2, false, false, {0, 1, 0, 0, 2, 0, 3, 1, 0}},
        {"IDF", 2, 2, 2, false, false, {0, 1, 0, 0, 1, 0, 1, 1, 0}},
        {"TFIDF", 1, 2, 3, false, false, {1, 1, 2, 0, 3, 1, 4, 1, 0}},
        {"TF", 3, 3, 0, false, false, {0, 0, 0, 0, 0, 0, 0, 0, 1}},
    };
    static const int64_t x2[] = {2, 3, 5, 6, 7, 3, 2, 3, 5, 6, 7, 8, 6, 7, 5, 3};
    static const int32_t x1[] = {5, 6, 7, 8, 6, 7, 5, 6, 2, 7, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_scope_begin();
        const tfidf_case *tc = &cases[i];
        ts_module *m = load(tfidf_model(tc), dev);
        ts_tensor *x = tc->batch ? tensor(dev, TS_I64, TS_SHAPE(2, 8), x2)
                                 : tensor(dev, TS_I32, TS_SHAPE(11), x1);
        ts_tensor *y = NULL;
        CHECK(run(m, 1, &x, 1, &y));
        check_values(y, TS_F32, tc->batch ? TS_SHAPE(2, 9) : TS_SHAPE(9), tc->want, NULL, tc->mode);
        ts_module_free(m);
        model_free();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ errors */
/* loading b fails with code and a message holding `says` */
static void refused(model *b, ts_status code, const char *says) {
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
static void fails(model *b, ts_device dev, int n_in, ts_tensor **in, ts_status code,
                  const char *says) {
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

static void test_load_errors(void) {
    model *b = optimizer_model("Momentum", 3);
    a_float(b, "alpha", 0.9f), a_float(b, "beta", 1), a_float(b, "norm_coefficient", 0);
    refused(b, TS_ERR_FORMAT, "'mode' is required");
    b = optimizer_model("Momentum", 3);
    a_float(b, "alpha", 0.9f), a_float(b, "beta", 1), a_float(b, "norm_coefficient", 0);
    a_str(b, "mode", "heavy-ball");
    refused(b, TS_ERR_UNSUPPORTED, "mode 'heavy-ball'");
    b = model_new("Adam", TRAINING, 17, "R T X G V", "Xn Vn");
    import(b, TRAINING, 1);
    refused(b, TS_ERR_FORMAT, "(Adam): has 5 inputs");
    b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn"); /* the domain not imported */
    refused(b, TS_ERR_FORMAT, "which the model does not import");
    b = model_new("Adagrad", TRAINING, 17, "R T X G H", "Xn Hn");
    import(b, TRAINING, 2);
    refused(b, TS_ERR_UNSUPPORTED, "version 2");
    b = model_new("Adagrad", "", 17, "R T X G H", "Xn Hn"); /* the default domain has no Adagrad */
    refused(b, TS_ERR_UNSUPPORTED, "does not support the operator Adagrad");
    b = model_new("Relu", "com.example", 17, "x", "y"); /* other domains stay refused */
    refused(b, TS_ERR_UNSUPPORTED, "in the operator domain 'com.example'");
    b = model_new("Relu", TRAINING, 17, "x", "y");
    import(b, TRAINING, 1);
    refused(b, TS_ERR_UNSUPPORTED, "does not support the operator Relu");
    b = model_new("Gradient", TRAINING, 17, "a", "da");
    import(b, TRAINING, 1);
    a_str(b, "y", "a");
    refused(b, TS_ERR_FORMAT, "'xs'");
    b = model_new("Gradient", TRAINING, 17, "a b", "da");
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "a");
    refused(b, TS_ERR_FORMAT, "has 2 inputs and 1 outputs");
    b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "inverse", 1), a_int(b, "onesided", 1);
    refused(b, TS_ERR_UNSUPPORTED, "inverse one-sided");
    b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "onesided", 2);
    refused(b, TS_ERR_FORMAT, "onesided must be 0 or 1");
    b = model_new("ConvInteger", "", 10, "x w", "y");
    a_str(b, "auto_pad", "SAME_MIDDLE");
    refused(b, TS_ERR_UNSUPPORTED, "auto_pad 'SAME_MIDDLE'");
    const tfidf_case tc = {"TF", 1, 3, 0, false, false, {0}};
    b = tfidf_model(&tc);
    b->node->attribute[b->node->n_attribute - 1]->n_ints = 8; /* ngram_indexes one short */
    refused(b, TS_ERR_FORMAT, "ngram_indexes has 8 values for 9 n-grams");
    b = tfidf_model(&(tfidf_case){"BM25", 1, 3, 0, false, false, {0}});
    refused(b, TS_ERR_UNSUPPORTED, "mode 'BM25'");
    b = tfidf_model(&(tfidf_case){"TF", 3, 2, 0, false, false, {0}});
    refused(b, TS_ERR_FORMAT, "min_gram_length <= max_gram_length");
    b = tfidf_model(&tc);
    a_floats(b, "weights", 3, weights);
    refused(b, TS_ERR_FORMAT, "weights has 3 values for 9 n-grams");
    b = tfidf_model(&tc); /* the unigram 3 twice */
    b->node->attribute[4]->ints[3] = 3;
    refused(b, TS_ERR_FORMAT, "holds a 1-gram twice");
    b = tfidf_model(&tc);
    b->node->attribute[6]->ints[1] = 0; /* two n-grams in column 0 */
    refused(b, TS_ERR_FORMAT, "share an output column");
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev}, i64 = {.dtype = TS_I64, .device = dev};
    ts_opts u8 = {.dtype = TS_U8, .device = dev};
    /* Adam: G's shape is not X's */
    model *b = model_new("Adam", TRAINING, 17, "R T X G V H", "Xn Vn Hn");
    import(b, TRAINING, 1);
    ts_tensor *in[9] = {ts_scalar(0.1, f32),        ts_scalar(1, i64),
                        ts_zeros(TS_SHAPE(3), f32), ts_zeros(TS_SHAPE(2), f32),
                        ts_zeros(TS_SHAPE(3), f32), ts_zeros(TS_SHAPE(3), f32)};
    fails(b, dev, 6, in, TS_ERR_SHAPE, "does not have X's shape");
    b = model_new("Adam", TRAINING, 17, "R T X G V H", "Xn Vn Hn"); /* T must be int64 */
    import(b, TRAINING, 1);
    in[1] = ts_scalar(1, f32), in[3] = ts_zeros(TS_SHAPE(3), f32);
    fails(b, dev, 6, in, TS_ERR_DTYPE, "T must be int64");
    /* DFT: the axis is the complex dim; a last dim of 3; dft_length 0 */
    b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "axis", 2);
    in[0] = ts_zeros(TS_SHAPE(1, 4, 2), f32);
    fails(b, dev, 1, in, TS_ERR_ARG, "is the last dim");
    b = model_new("DFT", "", 17, "x", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 4, 3), f32);
    fails(b, dev, 1, in, TS_ERR_SHAPE, "a last dim of 1 (real) or 2 (complex)");
    b = model_new("DFT", "", 17, "x len", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 4, 1), f32), in[1] = ts_scalar(0, i64);
    fails(b, dev, 2, in, TS_ERR_ARG, "dft_length must be positive");
    /* STFT: a window of 4 and frame_length 5; frames longer than the signal; frame_step 0 */
    b = model_new("STFT", "", 17, "x step w f", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 16, 1), f32), in[1] = ts_scalar(2, i64);
    in[2] = ts_ones(TS_SHAPE(4), f32), in[3] = ts_scalar(5, i64);
    fails(b, dev, 4, in, TS_ERR_SHAPE, "does not match the window");
    b = model_new("STFT", "", 17, "x step - f", "y");
    in[2] = ts_scalar(17, i64);
    fails(b, dev, 3, in, TS_ERR_SHAPE, "do not fit the signal");
    b = model_new("STFT", "", 17, "x step", "y");
    in[1] = ts_scalar(0, i64);
    fails(b, dev, 2, in, TS_ERR_ARG, "frame_step must be positive");
    /* QLinearMatMul: a_zero_point of the wrong length; y_scale per row; float a */
    ts_tensor *q[8] = {ts_zeros(TS_SHAPE(2, 3), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(3), u8),
                       ts_zeros(TS_SHAPE(3, 2), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(), u8)};
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_SHAPE, "a_zero_point");
    q[2] = ts_zeros(TS_SHAPE(), u8), q[6] = ts_ones(TS_SHAPE(2), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_UNSUPPORTED, "y_scale must be one value");
    q[6] = ts_scalar(1, f32), q[0] = ts_zeros(TS_SHAPE(2, 3), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_DTYPE, "a must be uint8");
    /* a zero point and a scale of a's rank but not its per-row form [2, 1] */
    in[0] = ts_zeros(TS_SHAPE(2, 3), u8), in[1] = ts_zeros(TS_SHAPE(3, 2), u8);
    in[2] = ts_zeros(TS_SHAPE(2, 3), u8);
    b = model_new("MatMulInteger", "", 10, "a b az", "y");
    fails(b, dev, 3, in, TS_ERR_SHAPE, "a_zero_point uint8 [2, 3] on");
    q[0] = ts_zeros(TS_SHAPE(2, 3), u8), q[1] = ts_ones(TS_SHAPE(2, 3), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_SHAPE, "a_scale float32 [2, 3] on");
    /* ConvInteger: a weight of another rank */
    b = model_new("ConvInteger", "", 10, "x w", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 1, 4, 4), u8), in[1] = ts_zeros(TS_SHAPE(1, 1, 2), u8);
    fails(b, dev, 2, in, TS_ERR_SHAPE, "expected x [N, C, D1, ...]");
    /* TfIdfVectorizer: float tokens */
    b = tfidf_model(&(tfidf_case){"TF", 1, 1, 0, false, false, {0}});
    in[0] = ts_zeros(TS_SHAPE(4), f32);
    fails(b, dev, 1, in, TS_ERR_DTYPE, "X must be int32 or int64");
    /* Gradient: y depends on a graph input that is neither in xs nor zs; y is no value */
    b = model_new("Add", "", 13, "a b", "s da");
    import(b, TRAINING, 1);
    b->node->n_output = 1;
    add_node(b, "Gradient", TRAINING, "a", "da");
    a_strs(b, "xs", "a"), a_str(b, "y", "s");
    in[0] = ts_ones(TS_SHAPE(2), f32), in[1] = ts_ones(TS_SHAPE(2), f32);
    fails(b, dev, 2, in, TS_ERR_ARG, "y depends on 'b'");
    b = model_new("Gradient", TRAINING, 13, "a", "da");
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "nothing");
    fails(b, dev, 1, in, TS_ERR_ARG, "y 'nothing' is no value");
    b = model_new("Gradient", TRAINING, 13, "a", "da"); /* autograd off */
    import(b, TRAINING, 1);
    a_strs(b, "xs", "a"), a_str(b, "y", "a");
    ts_no_grad_begin();
    fails(b, dev, 1, in, TS_ERR_STATE, "needs autograd");
    ts_no_grad_end();
    ts_scope_end();
}

/* ------------------------------------------------------------------ allocation failures */
/* Models of the operators here with their inputs (cpu), packed once; the sweep loads and runs them
 * all with every allocation failing in turn. */
enum { SWEEP_MODELS = 5, SWEEP_VALUES = 64 };
typedef struct sweep_model {
    uint8_t *buf;
    size_t len;
    int n_in;
    ts_tensor *in[9];
} sweep_model;
static sweep_model sweep[SWEEP_MODELS];
static double sweep_ref[SWEEP_MODELS][SWEEP_VALUES];

static void sweep_pack(sweep_model *s, model *b, int n_in, ts_tensor *const *in) {
    s->len = onnx__model_proto__get_packed_size(&b->m);
    s->buf = malloc(s->len);
    onnx__model_proto__pack(&b->m, s->buf);
    s->n_in = n_in;
    for (int i = 0; i < n_in; i++) s->in[i] = ts_retain(in[i]);
    model_free();
}

static void sweep_build(void) {
    ts_device cpu = ts_cpu();
    ts_scope_begin();
    float x[12], w3[3] = {2, -1, 0.5f};
    for (int i = 0; i < 12; i++) x[i] = (float)next_value();
    model *b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "onesided", 1);
    sweep_pack(&sweep[0], b, 1, (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(1, 6, 2), x)});
    b = model_new("STFT", "", 17, "x step w", "y");
    ts_tensor *step = ts_scalar(3, (ts_opts){.dtype = TS_I64});
    sweep_pack(&sweep[1], b, 3,
               (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(1, 12, 1), x), step,
                               tensor(cpu, TS_F32, TS_SHAPE(3), w3)});
    b = tfidf_model(&(tfidf_case){"TFIDF", 1, 3, 1, true, false, {0}});
    int64_t tok[8] = {2, 3, 5, 6, 7, 3, 2, 3};
    sweep_pack(&sweep[2], b, 1, (ts_tensor *[]){tensor(cpu, TS_I64, TS_SHAPE(8), tok)});
    b = model_new("Add", "", 13, "a b", "y da");
    import(b, TRAINING, 1);
    b->node->output[0] = text("s"), b->node->n_output = 1;
    add_node(b, "Mul", "", "s w", "y");
    add_node(b, "Gradient", TRAINING, "a b", "da");
    a_strs(b, "xs", "a"), a_strs(b, "zs", "b"), a_str(b, "y", "y");
    init_f32(b, "w", 3, w3);
    sweep_pack(&sweep[3], b, 2,
               (ts_tensor *[]){tensor(cpu, TS_F32, TS_SHAPE(3), x),
                               tensor(cpu, TS_F32, TS_SHAPE(3), x + 3)});
    uint8_t q[12] = {1, 7, 250, 3, 9, 0, 128, 77, 5, 6, 200, 13}, zp = 3;
    float sc = 0.5f;
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    ts_tensor *tsc = tensor(cpu, TS_F32, TS_SHAPE(), &sc),
              *tzp = tensor(cpu, TS_U8, TS_SHAPE(), &zp);
    sweep_pack(&sweep[4], b, 8,
               (ts_tensor *[]){tensor(cpu, TS_U8, TS_SHAPE(3, 4), q), tsc, tzp,
                               tensor(cpu, TS_U8, TS_SHAPE(4, 3), q), tsc, tzp, tsc, tzp});
    ts_scope_end();
}

typedef struct sweep_state {
    double got[SWEEP_MODELS][SWEEP_VALUES];
} sweep_state;

static void *sweep_setup(void) { return calloc(1, sizeof(sweep_state)); }
static void sweep_teardown(void *st) { free(st); }

/* loads and runs sweep model k; its last output's values (at most SWEEP_VALUES) into got */
static bool sweep_one(int k, double *got) {
    ts_module *m = ts_onnx_load_buffer(sweep[k].buf, sweep[k].len, NULL, (ts_onnx_opts){0});
    if (!m) return false;
    ts_scope_begin();
    ts_tensor *out[2] = {0};
    int n_out = ts_onnx_num_outputs(m);
    bool ok = ts_onnx_run(m, sweep[k].n_in, sweep[k].in, n_out, out) == TS_OK;
    ts_tensor *y = ok ? ts_contiguous(ts_to_dtype(out[n_out - 1], TS_F64)) : NULL;
    ok = y && ts_numel(y) <= SWEEP_VALUES &&
         ts_copy_to_host(y, got, (size_t)ts_numel(y) * sizeof *got) == TS_OK;
    ts_scope_end();
    ts_module_free(m);
    return ok && !ts_error();
}

static bool sweep_run(void *st) {
    sweep_state *s = st;
    for (int k = 0; k < SWEEP_MODELS; k++)
        if (!sweep_one(k, s->got[k])) return false;
    return true;
}

/* a run that succeeds (at once or after a failure) computes what a clean one does */
static void sweep_check(void *st, bool ok) {
    if (ok) CHECK(!memcmp(((sweep_state *)st)->got, sweep_ref, sizeof sweep_ref));
}

static void test_sweep(void) {
    sweep_build();
    sweep_state *ref = sweep_setup();
    CHECK(sweep_run(ref));
    memcpy(sweep_ref, ref->got, sizeof sweep_ref);
    sweep_teardown(ref);
    const ts_sweep_case c = {.name = "onnx signal, quantized, text and training operators",
                             .setup = sweep_setup,
                             .run = sweep_run,
                             .teardown = sweep_teardown,
                             .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 50000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom); /* every failure is TS_ERR_OOM */
    for (int k = 0; k < SWEEP_MODELS; k++) {
        for (int i = 0; i < sweep[k].n_in; i++) ts_release(sweep[k].in[i]);
        free(sweep[k].buf);
    }
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_dev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_load_errors();
    for (int d = 0; d < n_dev; d++) {
        test_dft(devs[d]);
        test_stft(devs[d]);
        test_matmul_integer(devs[d]);
        test_qlinear_matmul(devs[d]);
        test_qlinear_conv(devs[d], false);
        test_qlinear_conv(devs[d], true);
        test_adam(devs[d]);
        test_momentum(devs[d], false, 0);
        test_momentum(devs[d], true, 2);
        test_adagrad(devs[d]);
        test_optimizer_dtypes(devs[d]);
        test_gradient(devs[d]);
        test_gradient_int_z(devs[d]);
        test_tfidf(devs[d]);
        test_run_errors(devs[d]);
    }
    test_sweep();
    return ts_test_finish();
}
#endif
