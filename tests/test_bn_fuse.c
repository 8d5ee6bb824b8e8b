/* test_bn_fuse.c — ts_fuse_conv_bn_weights / ts_fuse_linear_bn_weights (torch.nn.utils.fusion)
 * against a float64 hand formula on cpu and sim:0: convolutions, transposed ones, linear layers
 * with per-feature and single-feature batch norms, absent bias / affine parameters, the bias'
 * own dtype, and the errors. */
#include <math.h>
#include <stdio.h>

#include "ts_test.h"

#define O 3

/* deterministic values */
static double val(int i, double a, double b) { return a + b * sin(1.7 * i + 0.3); }

static ts_tensor *vec(int n, double a, double b, ts_dtype dt, ts_device dev) {
    double v[64];
    for (int i = 0; i < n; i++) v[i] = val(i, a, b);
    return ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = TS_F64, .device = dev}),
                       dt);
}

static void host(ts_tensor *t, double *out) {
    ts_copy_to_host(ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)), out,
                    (size_t)ts_numel(t) * sizeof(double));
}

/* the result was rounded once from float64: within half an ulp of dtype dt (2^-24 relative for
 * float32, 2^-53 for float64) of the float64 formula, plus the formula's own rounding (a few
 * 1e-16 relative) */
static bool close_to(double got, double want, ts_dtype dt) {
    double half_ulp = dt == TS_F32 ? ldexp(1, -24) : ldexp(1, -53);
    return fabs(got - want) <= (half_ulp + 4e-16) * fabs(want) + 1e-300;
}

/* conv (transpose or not) or linear; with or without bias / gamma / beta; bias dtype bdt */
static void check_case(ts_device dev, int kind, bool with_b, bool affine, ts_dtype wdt,
                       ts_dtype bdt, int stat_n) {
    ts_scope_begin();
    /* kind 0: conv w [O, 2, 2, 2]; 1: transposed w [2, O, 1, 2]; 2: linear w [O, 4] */
    ts_shape ws = kind == 0   ? TS_SHAPE(O, 2, 2, 2)
                  : kind == 1 ? TS_SHAPE(2, O, 1, 2)
                              : TS_SHAPE(O, 4);
    int64_t wn = 1;
    for (int i = 0; i < ws.ndim; i++) wn *= ws.dims[i];
    ts_tensor *w = ts_reshape(vec((int)wn, 0.1, 0.9, wdt, dev), ws);
    ts_tensor *b = with_b ? vec(O, -0.2, 0.5, bdt, dev) : NULL;
    ts_tensor *mean = vec(stat_n, 0.3, 0.4, TS_F32, dev);
    ts_tensor *var = vec(stat_n, 1.2, 0.7, TS_F32, dev);
    ts_tensor *gamma = affine ? vec(stat_n, 0.8, 0.6, TS_F32, dev) : NULL;
    ts_tensor *beta = affine ? vec(stat_n, -0.1, 0.3, TS_F32, dev) : NULL;
    const double eps = 1e-3;
    ts_tensor *fw = NULL, *fb = NULL;
    ts_status st =
        kind == 2 ? ts_fuse_linear_bn_weights(w, b, mean, var, eps, gamma, beta, &fw, &fb)
                  : ts_fuse_conv_bn_weights(w, b, mean, var, eps, gamma, beta, kind == 1, &fw, &fb);
    CHECK_EQ(st, TS_OK);
    if (st) {
        ts_error_clear();
        ts_scope_end();
        return;
    }
    CHECK(ts_dtype_of(fw) == wdt && ts_dtype_of(fb) == (with_b ? bdt : wdt));
    CHECK(ts_device_equal(ts_device_of(fw), dev) && ts_device_equal(ts_device_of(fb), dev));
    CHECK(ts_shape_of(fw).ndim == ws.ndim && ts_numel(fw) == wn && ts_numel(fb) == O);
    double W[64], B[O], M[O], V[O], G[O], Be[O], FW[64], FB[O];
    host(w, W), host(mean, M), host(var, V), host(fw, FW), host(fb, FB);
    if (b) host(b, B);
    if (gamma) host(gamma, G), host(beta, Be);
    int bad = 0;
    for (int o = 0; o < O; o++) {
        int so = stat_n == 1 ? 0 : o;
        double g = gamma ? G[so] : 1, be = beta ? Be[so] : 0, bb = b ? B[o] : 0;
        double s = g / sqrt(V[so] + eps);
        double want_b = (bb - M[so]) * s + be;
        if (!close_to(FB[o], want_b, ts_dtype_of(fb)) && bad++ < 3)
            printf("  kind %d: b'[%d] %.17g, want %.17g\n", kind, o, FB[o], want_b);
        for (int64_t i = 0; i < wn; i++) {
            /* the output channel of element i */
            int64_t ch = kind == 1 ? (i / 2) % O : i / (wn / O);
            if (ch != o) continue;
            double want = W[i] * s;
            if (!close_to(FW[i], want, wdt) && bad++ < 3)
                printf("  kind %d: w'[%lld] %.17g, want %.17g\n", kind, (long long)i, FW[i], want);
        }
    }
    CHECK_EQ(bad, 0);
    CHECK(!ts_requires_grad(fw) && !ts_requires_grad(fb));
    ts_scope_end();
    CHECK_OK();
}

static void test_errors(void) {
    ts_scope_begin();
    ts_device c = ts_cpu();
    ts_tensor *w = ts_reshape(vec(O * 4, 0.1, 0.9, TS_F32, c), TS_SHAPE(O, 4));
    ts_tensor *m = vec(O, 0.3, 0.4, TS_F32, c), *v = vec(O, 1.2, 0.7, TS_F32, c);
    ts_tensor *m2 = vec(2, 0.3, 0.4, TS_F32, c), *fw = NULL, *fb = NULL;
    CHECK_EQ(ts_fuse_conv_bn_weights(w, NULL, m2, v, 1e-5, NULL, NULL, false, &fw, &fb),
             TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "running_mean");
    CHECK(fw == NULL && fb == NULL);
    CHECK_EQ(ts_fuse_conv_bn_weights(w, NULL, NULL, v, 1e-5, NULL, NULL, false, &fw, &fb),
             TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "running_mean is NULL");
    /* a single-feature batch norm broadcasts for linear layers only, as PyTorch's */
    ts_tensor *one = vec(1, 0.3, 0.4, TS_F32, c);
    CHECK_EQ(ts_fuse_conv_bn_weights(w, NULL, one, v, 1e-5, NULL, NULL, false, &fw, &fb),
             TS_ERR_SHAPE);
    ts_error_clear();
    /* a 0-dim statistic is no per-feature vector, even where one value broadcasts */
    ts_tensor *scalar = ts_reshape(one, TS_SHAPE());
    CHECK_EQ(ts_fuse_linear_bn_weights(w, NULL, scalar, v, 1e-5, NULL, NULL, &fw, &fb),
             TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "running_mean");
    ts_tensor *w3 = ts_reshape(w, TS_SHAPE(O, 2, 2));
    CHECK_EQ(ts_fuse_linear_bn_weights(w3, NULL, m, v, 1e-5, NULL, NULL, &fw, &fb), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "in_features");
    ts_tensor *iw = ts_zeros(TS_SHAPE(O, 4), (ts_opts){.dtype = TS_I64});
    CHECK_EQ(ts_fuse_linear_bn_weights(iw, NULL, m, v, 1e-5, NULL, NULL, &fw, &fb), TS_ERR_DTYPE);
    ts_error_clear();
    /* a variance below -eps: the scale is NaN; refused rather than made */
    ts_tensor *neg = ts_full(TS_SHAPE(O), -1, (ts_opts){0});
    CHECK_EQ(ts_fuse_linear_bn_weights(w, NULL, m, neg, 1e-5, NULL, NULL, &fw, &fb), TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "not finite");
    CHECK(fw == NULL && fb == NULL);
    CHECK_EQ(ts_fuse_linear_bn_weights(w, NULL, m, v, 1e-5, NULL, NULL, NULL, &fb), TS_ERR_ARG);
    ts_error_clear();
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        for (int kind = 0; kind < 3; kind++) {
            check_case(devs[i], kind, true, true, TS_F32, TS_F32, O);
            check_case(devs[i], kind, false, false, TS_F32, TS_F32, O);
            check_case(devs[i], kind, true, true, TS_F64, TS_F64, O);
        }
        check_case(devs[i], 0, true, true, TS_F32, TS_F64, O); /* the bias keeps its dtype */
        check_case(devs[i], 2, true, true, TS_F32, TS_F32, 1); /* BatchNorm1d(1) after Linear */
    }
    test_errors();
    return ts_test_finish();
}
