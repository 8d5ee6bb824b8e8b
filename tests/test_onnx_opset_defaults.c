/* test_onnx_opset_defaults.c — what an ONNX operator does when an attribute is left out, by opset,
 * and Slice with negative steps: one-node models (tests/onnx_support/onnx_op_util.h) run on every
 * test device against references written from the ONNX operator specification (float64, exact
 * where the op only moves values). The backend suite's models are of recent opsets, so the older
 * forms (Softmax's 2-d coercion before opset 13, Concat's default axis before 4, Split's and
 * Slice's attributes, Pad's and Clip's attributes, ReduceSum's axes before 13, the activations'
 * default coefficients, AveragePool's count_include_pad, DepthToSpace's DCR default, Resize-11's
 * coordinate and rounding defaults) are held here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

#define N_MAX 64

static float xs[N_MAX]; /* the input values of a case: deterministic, in [-1, 1) */

static void fill_inputs(int64_t n) {
    for (int64_t i = 0; i < n; i++) xs[i] = (float)next_value();
}

/* b on dev with inputs in[], output 0 checked against want within tol (relative to 1 + |want|;
 * 0: exact) */
static void expect(model *b, ts_device dev, int n_in, ts_tensor **in, ts_shape s,
                   const double *want, double tol, const char *what) {
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    if (!m) {
        printf("%s: %s\n", what, ts_error_message());
        ts_error_clear();
        model_free();
        return;
    }
    ts_tensor *y = NULL;
    bool ok = run(m, n_in, in, 1, &y);
    CHECK(ok);
    if (!ok) printf("%s: %s\n", what, ts_error_message());
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    double tols[N_MAX];
    for (int64_t i = 0; i < n && i < N_MAX; i++) tols[i] = tol * (1 + fabs(want[i]));
    if (ok) check_values(y, ts_dtype_of(y), s, want, tol > 0 ? tols : NULL, what);
    ts_error_clear();
    ts_module_free(m);
    model_free();
}

static ts_tensor *f32_in(ts_device dev, ts_shape s) { return tensor(dev, TS_F32, s, xs); }

static ts_tensor *i64_in(ts_device dev, int64_t n, const int64_t *v) {
    return tensor(dev, TS_I64, TS_SHAPE(n), v);
}

/* ------------------------------------------------------------------ softmax family
 * Before opset 13 the input is a matrix [prod(dims[:axis]), prod(dims[axis:])] with axis 1 by
 * default; from 13 the op runs along one axis, -1 by default. x [2, 3, 4]. */
static void softmax_ref(int rows, int cols, bool is_log, bool hard, double *want) {
    for (int r = 0; r < rows; r++) {
        const float *x = xs + r * cols;
        double mx = -INFINITY, sum = 0;
        int arg = 0;
        for (int c = 0; c < cols; c++)
            if (x[c] > mx) mx = x[c], arg = c;
        for (int c = 0; c < cols; c++) sum += exp((double)x[c] - mx);
        for (int c = 0; c < cols; c++)
            want[r * cols + c] = hard     ? (c == arg)
                                 : is_log ? (double)x[c] - mx - log(sum)
                                          : exp((double)x[c] - mx) / sum;
    }
}

static void test_softmax_family(ts_device dev) {
    static const char *ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
    fill_inputs(24);
    double want[24];
    for (int k = 0; k < 3; k++) {
        char what[64];
        ts_scope_begin();
        softmax_ref(2, 12, k == 1, k == 2, want); /* opset 11: rows of 12 */
        snprintf(what, sizeof what, "%s-11 without axis", ops[k]);
        ts_tensor *in = f32_in(dev, TS_SHAPE(2, 3, 4));
        expect(model_new(ops[k], "", 11, "x", "y"), dev, 1, &in, TS_SHAPE(2, 3, 4), want,
               k == 2 ? 0 : 8 * U, what);
        softmax_ref(6, 4, k == 1, k == 2, want); /* opset 13: along the last axis */
        snprintf(what, sizeof what, "%s-13 without axis", ops[k]);
        expect(model_new(ops[k], "", 13, "x", "y"), dev, 1, &in, TS_SHAPE(2, 3, 4), want,
               k == 2 ? 0 : 8 * U, what);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ shapes */
static void test_concat_split(ts_device dev) {
    ts_scope_begin();
    fill_inputs(6);
    /* Concat-1 without axis joins along axis 1: [2, 1] ++ [2, 2] */
    ts_tensor *in[2] = {tensor(dev, TS_F32, TS_SHAPE(2, 1), xs),
                        tensor(dev, TS_F32, TS_SHAPE(2, 2), xs + 2)};
    double want[6] = {xs[0], xs[2], xs[3], xs[1], xs[4], xs[5]};
    expect(model_new("Concat", "", 1, "a b", "y"), dev, 2, in, TS_SHAPE(2, 3), want, 0,
           "Concat-1 without axis");
    /* Split-2: the sizes an attribute, axis 0 by default; the second output [2, 2] */
    in[0] = f32_in(dev, TS_SHAPE(3, 2));
    model *b = model_new("Split", "", 2, "x", "a b");
    a_ints(b, "split", 2, (const int64_t[]){1, 2});
    ts_module *m = load(b, dev);
    ts_tensor *out[2] = {NULL, NULL};
    CHECK(m && run(m, 1, in, 2, out));
    double first[2] = {xs[0], xs[1]}, second[4] = {xs[2], xs[3], xs[4], xs[5]};
    if (out[0] && out[1]) {
        check_values(out[0], TS_F32, TS_SHAPE(1, 2), first, NULL, "Split-2 first");
        check_values(out[1], TS_F32, TS_SHAPE(2, 2), second, NULL, "Split-2 second");
    }
    ts_module_free(m);
    model_free();
    /* Split-11 without sizes: equal parts along axis 0 of [4, 1] */
    in[0] = f32_in(dev, TS_SHAPE(4, 1));
    m = load(model_new("Split", "", 11, "x", "a b"), dev);
    out[0] = out[1] = NULL;
    CHECK(m && run(m, 1, in, 2, out));
    double lo[2] = {xs[0], xs[1]}, hi[2] = {xs[2], xs[3]};
    if (out[0] && out[1]) {
        check_values(out[0], TS_F32, TS_SHAPE(2, 1), lo, NULL, "Split-11 first half");
        check_values(out[1], TS_F32, TS_SHAPE(2, 1), hi, NULL, "Split-11 second half");
    }
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

static void test_flatten_squeeze_transpose(ts_device dev) {
    ts_scope_begin();
    fill_inputs(24);
    double want[24];
    for (int i = 0; i < 24; i++) want[i] = xs[i];
    ts_tensor *in = f32_in(dev, TS_SHAPE(2, 3, 4));
    expect(model_new("Flatten", "", 9, "x", "y"), dev, 1, &in, TS_SHAPE(2, 12), want, 0,
           "Flatten-9 without axis (1)");
    /* Squeeze-11 without axes drops every dim of 1 */
    in = f32_in(dev, TS_SHAPE(1, 6, 1, 4));
    expect(model_new("Squeeze", "", 11, "x", "y"), dev, 1, &in, TS_SHAPE(6, 4), want, 0,
           "Squeeze-11 without axes");
    in = f32_in(dev, TS_SHAPE(1, 6, 1, 4));
    expect(model_new("Squeeze", "", 13, "x", "y"), dev, 1, &in, TS_SHAPE(6, 4), want, 0,
           "Squeeze-13 without axes");
    /* Unsqueeze-11: axes an attribute, negative counted in the output's rank */
    model *b = model_new("Unsqueeze", "", 11, "x", "y");
    a_ints(b, "axes", 1, (const int64_t[]){-1});
    in = f32_in(dev, TS_SHAPE(6, 4));
    expect(b, dev, 1, &in, TS_SHAPE(6, 4, 1), want, 0, "Unsqueeze-11 axes=[-1]");
    /* Transpose without perm reverses the dims */
    in = f32_in(dev, TS_SHAPE(2, 3, 4));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) want[(k * 3 + j) * 2 + i] = xs[(i * 3 + j) * 4 + k];
    expect(model_new("Transpose", "", 13, "x", "y"), dev, 1, &in, TS_SHAPE(4, 3, 2), want, 0,
           "Transpose without perm");
    ts_scope_end();
}

/* DepthToSpace: DCR by default ([N, C, H, W] -> [N, C/b^2, H b, W b], depth split as (b, b, C')),
 * CRD as (C', b, b). x [1, 8, 1, 1], blocksize 2: C' = 2. */
static void test_depth_to_space(ts_device dev) {
    ts_scope_begin();
    fill_inputs(8);
    double dcr[8], crd[8];
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                dcr[c * 4 + i * 2 + j] = xs[(i * 2 + j) * 2 + c];
                crd[c * 4 + i * 2 + j] = xs[c * 4 + i * 2 + j];
            }
    ts_tensor *in = f32_in(dev, TS_SHAPE(1, 8, 1, 1));
    model *b = model_new("DepthToSpace", "", 11, "x", "y");
    a_int(b, "blocksize", 2);
    expect(b, dev, 1, &in, TS_SHAPE(1, 2, 2, 2), dcr, 0, "DepthToSpace-11 default mode (DCR)");
    b = model_new("DepthToSpace", "", 11, "x", "y");
    a_int(b, "blocksize", 2);
    a_str(b, "mode", "CRD");
    expect(b, dev, 1, &in, TS_SHAPE(1, 2, 2, 2), crd, 0, "DepthToSpace-11 CRD");
    ts_scope_end();
}

/* ------------------------------------------------------------------ slicing
 * x [8] = xs; the expected indices written out from the spec's clamping: a negative start or end
 * counts from the end; with a positive step start clamps to [0, dim] and end to [0, dim]; with a
 * negative step start clamps to [0, dim - 1] and end to [-1, dim - 1]. */
typedef struct slice_case {
    int64_t start, end, step;
    int n;
    int idx[8];
} slice_case;

static void test_slice(ts_device dev) {
    static const slice_case cases[] = {
        {-1, INT64_MIN, -1, 8, {7, 6, 5, 4, 3, 2, 1, 0}}, /* the whole axis reversed */
        {-1, -9, -1, 8, {7, 6, 5, 4, 3, 2, 1, 0}},        /* -9 + 8 = -1: before index 0 */
        {6, 1, -2, 3, {6, 4, 2}},
        {100, 4, -1, 3, {7, 6, 5}}, /* a start past the end clamps to dim - 1 */
        {5, -100, -3, 2, {5, 2}},
        {2, 5, -1, 0, {0}}, /* nothing: start below end with a negative step */
        {-3, INT64_MAX, 2, 2, {5, 7}},
        {1, 7, 3, 2, {1, 4}},
    };
    fill_inputs(8);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const slice_case *sc = &cases[c];
        char what[96];
        snprintf(what, sizeof what, "Slice-13 [%lld:%lld:%lld]", (long long)sc->start,
                 (long long)sc->end, (long long)sc->step);
        ts_scope_begin();
        double want[8];
        for (int i = 0; i < sc->n; i++) want[i] = xs[sc->idx[i]];
        ts_tensor *in[5] = {f32_in(dev, TS_SHAPE(8)), i64_in(dev, 1, &sc->start),
                            i64_in(dev, 1, &sc->end), i64_in(dev, 1, (const int64_t[]){0}),
                            i64_in(dev, 1, &sc->step)};
        expect(model_new("Slice", "", 13, "x s e a t", "y"), dev, 5, in, TS_SHAPE(sc->n), want, 0,
               what);
        ts_scope_end();
    }
    /* Slice-1: starts and ends attributes, axes all by default: x [2, 4] -> [1:2, 1:3] */
    ts_scope_begin();
    model *b = model_new("Slice", "", 1, "x", "y");
    a_ints(b, "starts", 2, (const int64_t[]){1, 1});
    a_ints(b, "ends", 2, (const int64_t[]){2, 3});
    ts_tensor *in = f32_in(dev, TS_SHAPE(2, 4));
    double want[2] = {xs[5], xs[6]};
    expect(b, dev, 1, &in, TS_SHAPE(1, 2), want, 0, "Slice-1 attributes");
    /* Slice-10 without axes and steps: every axis from 0, step 1 */
    ts_tensor *in3[3] = {f32_in(dev, TS_SHAPE(2, 4)), i64_in(dev, 2, (const int64_t[]){0, -3}),
                         i64_in(dev, 2, (const int64_t[]){1, -1})};
    double want3[2] = {xs[1], xs[2]};
    expect(model_new("Slice", "", 10, "x s e", "y"), dev, 3, in3, TS_SHAPE(1, 2), want3, 0,
           "Slice-10 negative bounds, no axes");
    ts_scope_end();
}

/* ------------------------------------------------------------------ pads and clips */
static void test_pad_clip(ts_device dev) {
    ts_scope_begin();
    fill_inputs(4);
    /* Pad-2: pads an attribute ([begin..., end...]), mode constant and value 0 by default */
    model *b = model_new("Pad", "", 2, "x", "y");
    a_ints(b, "pads", 4, (const int64_t[]){0, 1, 1, 0});
    ts_tensor *in = f32_in(dev, TS_SHAPE(2, 2));
    double want[9] = {0, xs[0], xs[1], 0, xs[2], xs[3], 0, 0, 0};
    expect(b, dev, 1, &in, TS_SHAPE(3, 3), want, 0, "Pad-2 default mode and value");
    /* Pad-11: constant_value absent -> 0 */
    ts_tensor *in2[2] = {f32_in(dev, TS_SHAPE(2, 2)),
                         i64_in(dev, 4, (const int64_t[]){0, 1, 1, 0})};
    expect(model_new("Pad", "", 11, "x p", "y"), dev, 2, in2, TS_SHAPE(3, 3), want, 0,
           "Pad-11 without constant_value");
    /* Clip-6 with min alone: no upper bound; Clip-11 with max alone */
    b = model_new("Clip", "", 6, "x", "y");
    a_float(b, "min", -0.25f);
    double lo[4], hi[4];
    for (int i = 0; i < 4; i++) {
        lo[i] = xs[i] < -0.25f ? -0.25 : xs[i];
        hi[i] = xs[i] > 0.125f ? 0.125 : xs[i];
    }
    expect(b, dev, 1, &in, TS_SHAPE(2, 2), lo, 0, "Clip-6 min only");
    float top = 0.125f;
    ts_tensor *in3[2] = {f32_in(dev, TS_SHAPE(2, 2)), tensor(dev, TS_F32, TS_SHAPE(), &top)};
    expect(model_new("Clip", "", 11, "x - m", "y"), dev, 2, in3, TS_SHAPE(2, 2), hi, 0,
           "Clip-11 max only");
    ts_scope_end();
}

/* ------------------------------------------------------------------ reductions */
static void test_reductions(ts_device dev) {
    ts_scope_begin();
    fill_inputs(6);
    double all = 0;
    for (int i = 0; i < 6; i++) all += xs[i];
    ts_tensor *in = f32_in(dev, TS_SHAPE(2, 3));
    /* ReduceSum-11 without axes: every axis, keepdims 1 */
    expect(model_new("ReduceSum", "", 11, "x", "y"), dev, 1, &in, TS_SHAPE(1, 1), &all, 8 * U,
           "ReduceSum-11 without axes");
    expect(model_new("ReduceSum", "", 13, "x", "y"), dev, 1, &in, TS_SHAPE(1, 1), &all, 8 * U,
           "ReduceSum-13 without axes");
    /* ReduceMean-13: axes an attribute, keepdims 1 */
    model *b = model_new("ReduceMean", "", 13, "x", "y");
    a_ints(b, "axes", 1, (const int64_t[]){1});
    double mean[2] = {((double)xs[0] + xs[1] + xs[2]) / 3, ((double)xs[3] + xs[4] + xs[5]) / 3};
    expect(b, dev, 1, &in, TS_SHAPE(2, 1), mean, 8 * U, "ReduceMean-13 keepdims default");
    /* ArgMax-11 without attributes: axis 0, keepdims 1 (int64) */
    double arg[3];
    for (int j = 0; j < 3; j++) arg[j] = xs[3 + j] > xs[j] ? 1 : 0;
    expect(model_new("ArgMax", "", 11, "x", "y"), dev, 1, &in, TS_SHAPE(1, 3), arg, 0,
           "ArgMax-11 defaults");
    /* CumSum-11: inclusive and forward by default */
    double cs[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) cs[i * 3 + j] = (j ? cs[i * 3 + j - 1] : 0) + xs[i * 3 + j];
    ts_tensor *in2[2] = {f32_in(dev, TS_SHAPE(2, 3)), i64_in(dev, 1, (const int64_t[]){1})};
    in2[1] = ts_reshape(in2[1], TS_SHAPE());
    expect(model_new("CumSum", "", 11, "x a", "y"), dev, 2, in2, TS_SHAPE(2, 3), cs, 8 * U,
           "CumSum-11 defaults");
    ts_scope_end();
}

/* ------------------------------------------------------------------ activations' coefficients */
typedef struct act_case {
    const char *op;
    int opset;
    double a, g; /* the default alpha (and gamma / beta) */
} act_case;

static double act_ref(const act_case *ac, double x) {
    if (!strcmp(ac->op, "LeakyRelu")) return x >= 0 ? x : ac->a * x;
    if (!strcmp(ac->op, "Elu")) return x >= 0 ? x : ac->a * (exp(x) - 1);
    if (!strcmp(ac->op, "Selu")) return ac->g * (x > 0 ? x : ac->a * (exp(x) - 1));
    if (!strcmp(ac->op, "HardSigmoid")) return fmax(0, fmin(1, ac->a * x + ac->g));
    if (!strcmp(ac->op, "ThresholdedRelu")) return x > ac->a ? x : 0;
    if (!strcmp(ac->op, "Celu")) return fmax(0, x) + fmin(0, ac->a * (exp(x / ac->a) - 1));
    return NAN;
}

static void test_activation_defaults(ts_device dev) {
    static const act_case cases[] = {
        {"LeakyRelu", 6, 0.01, 0},
        {"Elu", 6, 1.0, 0},
        {"Selu", 6, 1.67326319217681884765625, 1.05070102214813232421875},
        {"HardSigmoid", 6, 0.2, 0.5},
        {"ThresholdedRelu", 10, 1.0, 0},
        {"Celu", 12, 1.0, 0},
    };
    fill_inputs(8);
    for (int i = 0; i < 8; i++) xs[i] *= 3; /* past ThresholdedRelu's 1 and HardSigmoid's knees */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ts_scope_begin();
        double want[8];
        for (int i = 0; i < 8; i++) want[i] = act_ref(&cases[c], xs[i]);
        char what[64];
        snprintf(what, sizeof what, "%s-%d defaults", cases[c].op, cases[c].opset);
        ts_tensor *in = f32_in(dev, TS_SHAPE(8));
        expect(model_new(cases[c].op, "", cases[c].opset, "x", "y"), dev, 1, &in, TS_SHAPE(8), want,
               8 * U, what);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ pools, norms, resize */
static void test_pool_norm_resize(ts_device dev) {
    ts_scope_begin();
    fill_inputs(16);
    /* AveragePool-11 with pads: count_include_pad 0 by default (the padding is not averaged).
     * x [1, 1, 2, 2], kernel 2, pads 1 on every side, stride 1 -> [1, 1, 3, 3] */
    model *b = model_new("AveragePool", "", 11, "x", "y");
    a_ints(b, "kernel_shape", 2, (const int64_t[]){2, 2});
    a_ints(b, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    ts_tensor *in = f32_in(dev, TS_SHAPE(1, 1, 2, 2));
    double avg[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double s = 0;
            int cnt = 0;
            for (int di = 0; di < 2; di++)
                for (int dj = 0; dj < 2; dj++) {
                    int r = i - 1 + di, c = j - 1 + dj;
                    if (r >= 0 && r < 2 && c >= 0 && c < 2) s += xs[r * 2 + c], cnt++;
                }
            avg[i * 3 + j] = s / cnt;
        }
    expect(b, dev, 1, &in, TS_SHAPE(1, 1, 3, 3), avg, 8 * U, "AveragePool-11 count_include_pad");
    /* BatchNormalization-9 in inference: epsilon 1e-5 by default. x [1, 2, 2, 2] */
    float sc[2] = {1.5f, -0.5f}, bi[2] = {0.25f, 0}, mu[2] = {0.1f, -0.2f}, var[2] = {4e-5f, 2};
    ts_tensor *bn_in[5] = {f32_in(dev, TS_SHAPE(1, 2, 2, 2)), tensor(dev, TS_F32, TS_SHAPE(2), sc),
                           tensor(dev, TS_F32, TS_SHAPE(2), bi),
                           tensor(dev, TS_F32, TS_SHAPE(2), mu),
                           tensor(dev, TS_F32, TS_SHAPE(2), var)};
    double bn[8];
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 4; i++)
            bn[c * 4 + i] =
                sc[c] * ((double)xs[c * 4 + i] - mu[c]) / sqrt((double)var[c] + 1e-5) + bi[c];
    expect(model_new("BatchNormalization", "", 9, "x s b m v", "y"), dev, 5, bn_in,
           TS_SHAPE(1, 2, 2, 2), bn, 32 * U, "BatchNormalization-9 default epsilon");
    /* Resize-11 nearest without coordinate_transformation_mode / nearest_mode: half_pixel and
     * round_prefer_floor. x [1, 1, 1, 5] to width 3 (scale 0.6): x_in = (o + 0.5) / 0.6 - 0.5 ->
     * 0.333, 2, 3.667 -> rounded half to floor: 0, 2, 4 */
    ts_tensor *rs_in[3] = {f32_in(dev, TS_SHAPE(1, 1, 1, 5)), tensor(dev, TS_F32, TS_SHAPE(0), xs),
                           tensor(dev, TS_F32, TS_SHAPE(4), (const float[]){1, 1, 1, 0.6f})};
    double rs[3] = {xs[0], xs[2], xs[4]};
    b = model_new("Resize", "", 11, "x roi s", "y");
    a_str(b, "mode", "nearest");
    expect(b, dev, 3, rs_in, TS_SHAPE(1, 1, 1, 3), rs, 0, "Resize-11 nearest defaults");
    /* Upsample-9 without mode: nearest; x [1, 1, 1, 2] by 2 on the last axis */
    ts_tensor *up_in[2] = {f32_in(dev, TS_SHAPE(1, 1, 1, 2)),
                           tensor(dev, TS_F32, TS_SHAPE(4), (const float[]){1, 1, 1, 2})};
    double up[4] = {xs[0], xs[0], xs[1], xs[1]};
    expect(model_new("Upsample", "", 9, "x s", "y"), dev, 2, up_in, TS_SHAPE(1, 1, 1, 4), up, 0,
           "Upsample-9 default mode");
    /* LRN: alpha 1e-4, beta 0.75, bias 1 by default; size 3 over x [1, 3, 1, 1] */
    b = model_new("LRN", "", 13, "x", "y");
    a_int(b, "size", 3);
    for (int i = 0; i < 3; i++) xs[i] *= 40; /* squares large enough for alpha to matter */
    ts_tensor *lrn_in = f32_in(dev, TS_SHAPE(1, 3, 1, 1));
    double lrn[3];
    for (int c = 0; c < 3; c++) {
        double sq = 0;
        for (int k = c - 1; k <= c + 1; k++)
            if (k >= 0 && k < 3) sq += (double)xs[k] * xs[k];
        lrn[c] = xs[c] / pow(1 + 1e-4 / 3 * sq, 0.75);
    }
    expect(b, dev, 1, &lrn_in, TS_SHAPE(1, 3, 1, 1), lrn, 16 * U, "LRN defaults");
    ts_scope_end();
}

static void test_gather_gemm_topk(ts_device dev) {
    ts_scope_begin();
    fill_inputs(12);
    /* Gather without axis: axis 0 */
    ts_tensor *g_in[2] = {f32_in(dev, TS_SHAPE(3, 2)), i64_in(dev, 2, (const int64_t[]){2, 0})};
    double g[4] = {xs[4], xs[5], xs[0], xs[1]};
    expect(model_new("Gather", "", 13, "x i", "y"), dev, 2, g_in, TS_SHAPE(2, 2), g, 0,
           "Gather-13 default axis");
    /* Gemm-11 without C, alpha, beta, transA, transB: A B. A [2, 3], B [3, 2] */
    ts_tensor *mm_in[2] = {f32_in(dev, TS_SHAPE(2, 3)),
                           tensor(dev, TS_F32, TS_SHAPE(3, 2), xs + 6)};
    double mm[4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double s = 0;
            for (int k = 0; k < 3; k++) s += (double)xs[i * 3 + k] * xs[6 + k * 2 + j];
            mm[i * 2 + j] = s;
        }
    expect(model_new("Gemm", "", 11, "a b", "y"), dev, 2, mm_in, TS_SHAPE(2, 2), mm, 8 * U,
           "Gemm-11 defaults without C");
    /* TopK-1: k an attribute, along the last axis, largest first */
    model *b = model_new("TopK", "", 1, "x", "v i");
    a_int(b, "k", 2);
    ts_tensor *t_in = f32_in(dev, TS_SHAPE(2, 3));
    double top[4];
    for (int r = 0; r < 2; r++) {
        float v[3] = {xs[r * 3], xs[r * 3 + 1], xs[r * 3 + 2]};
        int a = 0;
        for (int j = 1; j < 3; j++)
            if (v[j] > v[a]) a = j;
        int c = a == 0 ? 1 : 0;
        for (int j = 0; j < 3; j++)
            if (j != a && v[j] > v[c]) c = j;
        top[r * 2] = v[a], top[r * 2 + 1] = v[c];
    }
    expect(b, dev, 1, &t_in, TS_SHAPE(2, 2), top, 0, "TopK-1 defaults");
    ts_scope_end();
}

static void load_errors(void) {}

static void on_device(ts_device dev) {
    test_softmax_family(dev);
    test_concat_split(dev);
    test_flatten_squeeze_transpose(dev);
    test_depth_to_space(dev);
    test_slice(dev);
    test_pad_clip(dev);
    test_reductions(dev);
    test_activation_defaults(dev);
    test_pool_norm_resize(dev);
    test_gather_gemm_topk(dev);
}

int main(void) { return op_test_main(load_errors, on_device); }
#endif
