/* test_numeric_forms.c — issue 76's numeric forms in C (include/tessera/numeric.h) against float64
 * references computed here, on every device: ts_histogram / ts_histogramdd (equal-width and given
 * edges, range, weights, density, the right edge, values outside and NaN, equal ends, the NaN
 * refusal), ts_pdist (p = 2, 1, inf, 0.5; its gradient by ts_gradcheck and 0 at equal rows),
 * ts_gradient (uniform and coordinate spacing, edge_order 1 and 2, against a polynomial whose
 * differences are exact; gradcheck), ts_frexp (powers of two, subnormals, 0, inf, NaN; the
 * mantissa's gradient),
 * ts_unravel_index (negative indices, range refusal) and ts_combinations (with and without
 * replacement, r = 0, r > n; gradcheck).
 *
 * Tolerances: counts are exact; densities and distances are a few roundings of float64 (1e-14
 * relative); the gradient formulas are exact on quadratics (uniform spacing and unequal coordinates
 * that are binary fractions) up to the rounding of a few terms (1e-13); frexp is exact. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
/* central differences in float64: truncation ~eps^2, rounding ~1e-16 / eps */
#define GC ((ts_gradcheck_opts){.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5})
static int ndev;

static ts_tensor *f64(ts_shape s, const double *v, ts_device d) {
    return ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64, .device = d});
}

static bool exact(ts_tensor *t, const double *ref, int64_t n) {
    double got[256];
    if (n > 256 || !rd(t, got, n)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(got[i] == ref[i] || (isnan(got[i]) && isnan(ref[i])))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

static void test_histogram(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        const double v[] = {0.0, 1.0, 2.0, 2.5, 4.0, -1.0, NAN, 3.999, 1.0};
        ts_tensor *x = f64(TS_SHAPE(9), v, devs[d]), *e = NULL;
        /* range [0, 4], 4 bins: 4.0 lands in the last bin, -1 and NaN outside */
        ts_tensor *h = ts_histogram(x, 4, NULL, true, 0.0, 4.0, NULL, false, &e);
        CHECK(exact(h, (double[]){1, 2, 2, 2}, 4) && exact(e, (double[]){0, 1, 2, 3, 4}, 5));
        CHECK(h && ts_device_of(h).type == devs[d].type);
        /* weights and density: hist / (sum * width) */
        const double w[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        h = ts_histogram(x, 4, NULL, true, 0.0, 4.0, f64(TS_SHAPE(9), w, devs[d]), true, &e);
        const double tot = 1 + (2 + 9) + (3 + 4) + (5 + 8);
        CHECK(exact(h, (double[]){1 / tot, 11 / tot, 7 / tot, 13 / tot}, 4));
        /* given edges, unequal widths; no range: the data's min and max (NaN refused) */
        ts_tensor *edges = f64(TS_SHAPE(3), (double[]){-1.0, 1.0, 4.0}, devs[d]);
        h = ts_histogram(x, 0, edges, false, 0, 0, NULL, false, &e);
        CHECK(exact(h, (double[]){2, 6}, 2));
        CHECK(!ts_histogram(x, 3, NULL, false, 0, 0, NULL, false, &e));
        CHECK_ERR_HAS(TS_ERR_ARG, "range [nan, nan] is not finite");
        ts_tensor *y = f64(TS_SHAPE(2), (double[]){2.0, 2.0}, devs[d]);
        h = ts_histogram(y, 2, NULL, false, 0, 0, NULL, false, &e); /* widened by 1/2 */
        CHECK(exact(h, (double[]){0, 2}, 2) && exact(e, (double[]){1.5, 2.0, 2.5}, 3));
        h = ts_histogram(ts_narrow(y, 0, 0, 0), 2, NULL, false, 0, 0, NULL, false, &e);
        CHECK(exact(h, (double[]){0, 0}, 2) && exact(e, (double[]){0, 0.5, 1.0}, 3));
        CHECK(!ts_histogram(x, 0, NULL, true, 0, 1, NULL, false, &e));
        CHECK_ERR_HAS(TS_ERR_ARG, "bins must be > 0");
        CHECK(!ts_histogram(x, 2, NULL, true, 1, 0, NULL, false, &e));
        CHECK_ERR_HAS(TS_ERR_ARG, "min should not exceed max");
        CHECK(!ts_histogram(ts_to_dtype(x, TS_I64), 2, NULL, true, 0, 1, NULL, false, &e));
        CHECK_ERR(TS_ERR_DTYPE);
        /* histogramdd: rows (x, y), 2 x 3 bins over given ranges, weights, then density */
        const double pts[] = {0.0, 0.0, 0.5, 2.9, 1.0, 3.0, 0.9, 1.5, 2.0, 0.0, 0.2, 1.0};
        ts_tensor *p = f64(TS_SHAPE(6, 2), pts, devs[d]), *eo[2] = {0};
        h = ts_histogramdd(p, (int64_t[]){2, 3}, NULL, (double[]){0, 1, 0, 3}, NULL, false, eo);
        /* (0,0)->[0,0]; (.5,2.9)->[1,2]; (1,3)->[1,2]; (.9,1.5)->[1,1]; (2,0) out; (.2,1)->[0,1] */
        CHECK(exact(h, (double[]){1, 1, 0, 0, 1, 2}, 6) && ts_ndim(h) == 2);
        CHECK(exact(eo[0], (double[]){0, 0.5, 1}, 3) && exact(eo[1], (double[]){0, 1, 2, 3}, 4));
        const double wd[] = {1, 1, 1, 1, 1, 3};
        h = ts_histogramdd(p, (int64_t[]){2, 3}, NULL, (double[]){0, 1, 0, 3},
                           f64(TS_SHAPE(6), wd, devs[d]), true, eo);
        const double s = 7, a = 0.5; /* total weight in range, cell area 0.5 x 1 */
        CHECK(exact(h, (double[]){1 / s / a, 3 / s / a, 0, 0, 1 / s / a, 2 / s / a}, 6));
        ts_tensor *ed[2] = {NULL, f64(TS_SHAPE(2), (double[]){0.0, 3.0}, devs[d])};
        h = ts_histogramdd(p, (int64_t[]){1, 0}, ed, NULL, NULL, false, eo); /* data's range */
        CHECK(exact(h, (double[]){6}, 1) && exact(eo[0], (double[]){0, 2}, 2));
        CHECK(!ts_histogramdd(p, (int64_t[]){2, 2}, NULL, NULL, f64(TS_SHAPE(5), wd, devs[d]),
                              false, eo));
        CHECK_ERR_HAS(TS_ERR_SHAPE, "weight should have shape input.shape[:-1]");
        CHECK_OK();
        ts_scope_end();
    }
}

static ts_tensor *pdist_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_pdist(in[0], *(double *)ctx);
}

static void test_pdist(void) {
    /* no ties and no zero differences: every p's norm is differentiable there */
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = sin(0.9 * i + 0.3) * (1 + 0.1 * i);
    const double ps[] = {2, 1, INFINITY, 0.5, 3};
    for (int d = 0; d < ndev; d++)
        for (int k = 0; k < 5; k++) {
            ts_scope_begin();
            const double p = ps[k];
            ts_tensor *x = f64(TS_SHAPE(4, 3), v, devs[d]);
            double ref[6];
            int at = 0;
            for (int i = 0; i < 4; i++)
                for (int j = i + 1; j < 4; j++) {
                    double r = 0;
                    for (int m = 0; m < 3; m++) {
                        const double dd = fabs(v[i * 3 + m] - v[j * 3 + m]);
                        r = isinf(p) ? fmax(r, dd) : r + pow(dd, p);
                    }
                    ref[at++] = isinf(p) ? r : pow(r, 1 / p);
                }
            CHECK(near_all(ts_pdist(x, p), ref, 6, 1e-14));
            ts_set_requires_grad(x, true);
            if (p != 0.5) CHECK(ts_gradcheck(pdist_fn, (void *)&ps[k], &x, 1, GC));
            CHECK_OK();
            ts_scope_end();
        }
    ts_scope_begin();
    /* equal rows: distance 0, gradient 0 (PyTorch's) */
    ts_tensor *x = f64(TS_SHAPE(2, 2), (double[]){1, 2, 1, 2}, ts_cpu());
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_pdist(x, 2);
    CHECK(exact(y, (double[]){0}, 1) && ts_backward(ts_sum(y)) == TS_OK);
    CHECK(exact(ts_grad(x), (double[]){0, 0, 0, 0}, 4));
    CHECK(ts_numel(ts_pdist(ts_narrow(x, 0, 0, 1), 2)) == 0);
    CHECK(!ts_pdist(x, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "non-negative p");
    CHECK(!ts_pdist(ts_sum(x), 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "only supports 2D tensors");
    ts_scope_end();
}

static ts_tensor *grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    ts_tensor *out[2];
    const int order = *(int *)ctx;
    return ts_gradient(in[0], (int[]){0, 1}, 2, (double[]){0.5, 1.0}, NULL, order, out) == TS_OK
               ? ts_add(out[0], ts_mul_scalar(out[1], 0.5))
               : NULL;
}

/* f(x) = 3 x^2 - 2 x + 1: second-order differences are exact inside and, with edge_order 2, at
 * the ends; edge_order 1's ends are the one-sided first difference, (f(x1) - f(x0)) / h */
static double fq(double x) { return 3 * x * x - 2 * x + 1; }

static void test_gradient(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        const double h = 0.5;
        double f[12], rows[12];
        for (int i = 0; i < 6; i++) f[i] = fq(h * i);
        ts_tensor *x = f64(TS_SHAPE(6), f, devs[d]), *out[2];
        for (int order = 1; order <= 2; order++) {
            CHECK(ts_gradient(x, (int[]){0}, 1, &h, NULL, order, out) == TS_OK);
            double ref[6];
            for (int i = 0; i < 6; i++) ref[i] = 6 * h * i - 2;
            if (order == 1) ref[0] = (f[1] - f[0]) / h, ref[5] = (f[5] - f[4]) / h;
            CHECK(near_all(out[0], ref, 6, 1e-13));
        }
        /* unequal coordinates (binary fractions): exact on the quadratic, both edge orders */
        const double xs[] = {0.0, 0.25, 1.0, 1.5, 2.75};
        for (int i = 0; i < 5; i++) f[i] = fq(xs[i]);
        ts_tensor *fx = f64(TS_SHAPE(5), f, devs[d]), *cx = f64(TS_SHAPE(5), xs, devs[d]);
        CHECK(ts_gradient(fx, (int[]){0}, 1, NULL, (ts_tensor *[]){cx}, 2, out) == TS_OK);
        double ref[5];
        for (int i = 0; i < 5; i++) ref[i] = 6 * xs[i] - 2;
        CHECK(near_all(out[0], ref, 5, 1e-13));
        CHECK(ts_gradient(fx, (int[]){0}, 1, NULL, (ts_tensor *[]){cx}, 1, out) == TS_OK);
        ref[0] = (f[1] - f[0]) / 0.25, ref[4] = (f[4] - f[3]) / 1.25;
        CHECK(near_all(out[0], ref, 5, 1e-13));
        /* two dims of a 3 x 4 grid, the second dim negative; ints compute in float32 */
        for (int i = 0; i < 12; i++) rows[i] = (double)(i / 4) * 10 + (i % 4) * (i % 4);
        ts_tensor *g = f64(TS_SHAPE(3, 4), rows, devs[d]);
        CHECK(ts_gradient(g, (int[]){0, -1}, 2, (double[]){2.0, 1.0}, NULL, 1, out) == TS_OK);
        double r0[12], r1[12];
        for (int i = 0; i < 12; i++)
            r0[i] = 5, r1[i] = (i % 4 == 0) ? 1 : (i % 4 == 3) ? 5 : 2 * (i % 4);
        CHECK(near_all(out[0], r0, 12, 1e-14) && near_all(out[1], r1, 12, 1e-14));
        CHECK(ts_gradient(ts_to_dtype(g, TS_I64), (int[]){0}, 1, NULL, NULL, 1, out) == TS_OK);
        CHECK(out[0] && ts_dtype_of(out[0]) == TS_F32 &&
              near_all(out[0], (double[]){10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, 12, 0));
        int order = 2;
        ts_set_requires_grad(g, true);
        CHECK(ts_gradcheck(grad_fn, &order, &g, 1, GC));
        CHECK(ts_gradient(g, (int[]){0}, 1, NULL, NULL, 3, out) == TS_ERR_ARG);
        CHECK_ERR_HAS(TS_ERR_ARG, "edge_order=1 and edge_order=2");
        CHECK(ts_gradient(ts_narrow(g, 0, 0, 2), (int[]){0}, 1, NULL, NULL, 2, out) != TS_OK);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "at least edge_order+1");
        CHECK(ts_gradient(g, (int[]){1, 1}, 2, NULL, NULL, 1, out) != TS_OK);
        CHECK_ERR_HAS(TS_ERR_ARG, "appears multiple times");
        CHECK_OK();
        ts_scope_end();
    }
}

static void test_frexp_unravel(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        /* 1024 (1 - 2^-53) and -8 (1 - 2^-53): log2 rounds up to the power of two (the
         * correction step); the frexp of C's libm is exact */
        const double v[] = {8.0,
                            0.3,
                            -5.0,
                            0.0,
                            INFINITY,
                            NAN,
                            1e-310,
                            0.5,
                            0.9999999999999999,
                            -1.0,
                            1e300,
                            1024 * (1 - 0x1p-53),
                            -8 * (1 - 0x1p-53)};
        enum { NV = sizeof v / sizeof *v };
        ts_tensor *x = f64(TS_SHAPE(NV), v, devs[d]), *m, *e;
        CHECK(ts_frexp(x, &m, &e) == TS_OK && ts_dtype_of(e) == TS_I32);
        double rm[NV], re[NV];
        for (int i = 0; i < NV; i++) {
            int k = 0;
            rm[i] = frexp(v[i], &k);
            re[i] = isfinite(v[i]) ? k : 0;
        }
        CHECK(exact(m, rm, NV) && exact(e, re, NV));
        /* the mantissa's gradient, PyTorch's grad / 2^exponent: exact powers of two (0, inf and
         * NaN have exponent 0: the gradient passes) */
        ts_tensor *xg = f64(TS_SHAPE(NV), v, devs[d]);
        ts_set_requires_grad(xg, true);
        CHECK(ts_frexp(xg, &m, &e) == TS_OK && ts_backward(ts_sum(m)) == TS_OK);
        double rg[NV];
        for (int i = 0; i < NV; i++) rg[i] = ldexp(1.0, -(int)re[i]);
        CHECK(ts_grad(xg) && exact(ts_grad(xg), rg, NV));
        CHECK(ts_frexp(ts_to_dtype(x, TS_I64), &m, &e) == TS_ERR_DTYPE);
        ts_error_clear();
        ts_tensor *idx = ts_tensor_i64(TS_SHAPE(4), (int64_t[]){5, -1, 0, 7},
                                       (ts_opts){.dtype = TS_I64, .device = devs[d]});
        ts_tensor *out[3];
        CHECK(ts_unravel_index(idx, (int64_t[]){2, 3, 2}, 3, out) == TS_OK);
        CHECK(exact(out[0], (double[]){0, 1, 0, 1}, 4) &&
              exact(out[1], (double[]){2, 2, 0, 0}, 4) && exact(out[2], (double[]){1, 1, 0, 1}, 4));
        CHECK(ts_unravel_index(idx, (int64_t[]){2, 3}, 2, out) == TS_ERR_ARG);
        CHECK_ERR_HAS(TS_ERR_ARG, "'indices' must be in range [-6, 6), got 7");
        CHECK(ts_unravel_index(x, (int64_t[]){2}, 1, out) == TS_ERR_DTYPE);
        ts_error_clear();
        CHECK_OK();
        ts_scope_end();
    }
}

static ts_tensor *comb_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_combinations(in[0], 2, true);
}

static void test_combinations(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        ts_tensor *x = f64(TS_SHAPE(4), (double[]){1, 2, 3, 4}, devs[d]);
        ts_tensor *c = ts_combinations(x, 2, false);
        CHECK(c && ts_size(c, 0) == 6 &&
              exact(c, (double[]){1, 2, 1, 3, 1, 4, 2, 3, 2, 4, 3, 4}, 12));
        c = ts_combinations(ts_narrow(x, 0, 0, 3), 2, true);
        CHECK(c && exact(c, (double[]){1, 1, 1, 2, 1, 3, 2, 2, 2, 3, 3, 3}, 12));
        c = ts_combinations(x, 3, false);
        CHECK(c && ts_size(c, 0) == 4 &&
              exact(c, (double[]){1, 2, 3, 1, 2, 4, 1, 3, 4, 2, 3, 4}, 12));
        c = ts_combinations(x, 5, false);
        CHECK(c && ts_ndim(c) == 2 && ts_size(c, 0) == 0 && ts_size(c, 1) == 5);
        c = ts_combinations(x, 0, false);
        CHECK(c && ts_ndim(c) == 1 && ts_numel(c) == 0);
        ts_set_requires_grad(x, true);
        CHECK(ts_gradcheck(comb_fn, NULL, &x, 1, GC));
        CHECK(!ts_combinations(x, -1, false));
        CHECK_ERR_HAS(TS_ERR_ARG, "non-negative");
        CHECK(!ts_combinations(ts_reshape(x, TS_SHAPE(2, 2)), 2, false));
        CHECK_ERR_HAS(TS_ERR_SHAPE, "Expect a 1D vector");
        CHECK_OK();
        ts_scope_end();
    }
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_histogram();
    test_pdist();
    test_gradient();
    test_frexp_unravel();
    test_combinations();
    CHECK_OK();
    return ts_test_finish();
}
