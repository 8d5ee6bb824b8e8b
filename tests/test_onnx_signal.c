/* test_onnx_signal.c — ONNX's DFT and STFT (src/onnx/ops_signal.c), which the backend suite covers
 * thinly, on one-node models packed with protobuf-c (tests/onnx_support/onnx_op_util.h), on every
 * test device: DFT (an axis in the middle, dft_length cutting and padding, one-sided, inverse,
 * complex input) and STFT (window, frame_length, complex signal) against a float64 DFT with a
 * float32 rounding bound, and DFT's gradient by central differences. Then the errors: bad
 * attributes refused at load, bad shapes and lengths at run time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

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

/* ------------------------------------------------------------------ errors */
static void test_load_errors(void) {
    model *b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "inverse", 1), a_int(b, "onesided", 1);
    refused(b, TS_ERR_UNSUPPORTED, "inverse one-sided");
    b = model_new("DFT", "", 17, "x", "y");
    a_int(b, "onesided", 2);
    refused(b, TS_ERR_FORMAT, "onesided must be 0 or 1");
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev}, i64 = {.dtype = TS_I64, .device = dev};
    ts_tensor *in[4] = {0};
    /* DFT: the axis is the complex dim; a last dim of 3; dft_length 0 */
    model *b = model_new("DFT", "", 17, "x", "y");
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
    ts_scope_end();
}

/* every case on one device */
static void on_device(ts_device dev) {
    test_dft(dev);
    test_stft(dev);
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
