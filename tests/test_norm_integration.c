/* test_norm_integration.c — issue 76's C forms of dist / renorm (src/ops/norm_forms.c),
 * trapezoid / cumulative_trapezoid (src/ops/integration.c) and normal's tensor forms
 * (src/ops/sampling.c), on every device against float64 loops; ts_gradcheck of each
 * differentiable one, normal's gradients in mean and std, and the refusals naming the op. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;
static double a[256], b[256];

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(1.7 * (double)(i + 1) + 0.9 * seed) * 0.9;
}
static ts_tensor *mk(ts_shape s, const double *v, ts_device d, bool rg) {
    ts_tensor *t = ts_detach(ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d));
    if (rg) ts_set_requires_grad(t, true);
    return t;
}
static bool close_to(ts_tensor *t, ts_shape s, const double *ref, double tol) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return fprintf(stderr, "  ndim %d vs %d\n", g.ndim, s.ndim), false;
    for (int k = 0; k < s.ndim; k++)
        if (g.dims[k] != s.dims[k]) return fprintf(stderr, "  dim %d differs\n", k), false;
    return near_all(t, ref, ts_numel(t), tol);
}
/* float64 sums of a dozen terms: a few ulps each */
#define TOL 1e-12

/* ------------------------------------------------------------------ dist, renorm */
static void test_norms(ts_device d) {
    /* dist of a [3, 4] and b [4] (broadcast) for p = 2, 1, inf, 0 */
    const double ps[4] = {2, 1, INFINITY, 0};
    for (int k = 0; k < 4; k++) {
        double acc = 0;
        for (int i = 0; i < 12; i++) {
            const double v = fabs(a[i] - b[i % 4]);
            if (ps[k] == INFINITY)
                acc = v > acc ? v : acc;
            else if (ps[k] == 0)
                acc += v != 0;
            else
                acc += pow(v, ps[k]);
        }
        const double r = ps[k] == INFINITY || ps[k] == 0 ? acc : pow(acc, 1 / ps[k]);
        CHECK(
            close_to(ts_dist(mk(TS_SHAPE(3, 4), a, d, false), mk(TS_SHAPE(4), b, d, false), ps[k]),
                     TS_SHAPE(), &r, TOL));
    }
    /* renorm of 2 a [3, 4] along dims 0 and 1, p = 2 and 3, maxnorm 1.1: some slices kept */
    double x[12], r[12];
    for (int i = 0; i < 12; i++) x[i] = 2 * a[i];
    for (int dim = 0; dim < 2; dim++)
        for (double p = 2; p <= 3; p++) {
            const int ns = dim ? 4 : 3;
            for (int s = 0; s < ns; s++) {
                double n = 0;
                for (int i = 0; i < 12; i++)
                    if ((dim ? i % 4 : i / 4) == s) n += pow(fabs(x[i]), p);
                n = pow(n, 1 / p);
                const double f = n > 1.1 ? 1.1 / (n + 1e-7) : 1;
                for (int i = 0; i < 12; i++)
                    if ((dim ? i % 4 : i / 4) == s) r[i] = x[i] * f;
            }
            CHECK(close_to(ts_renorm(mk(TS_SHAPE(3, 4), x, d, false), p, dim - 2, 1.1),
                           TS_SHAPE(3, 4), r, TOL));
        }
}

/* ------------------------------------------------------------------ trapezoid */
static void test_integration(ts_device d) {
    /* y [3, 4] along dim 1: spacing dx, sample points xs (1-D), sample points [3, 4] */
    const double xs[4] = {0.0, 0.3, 1.1, 1.5};
    double xx[12], r[3], rc[9];
    for (int i = 0; i < 12; i++) xx[i] = (double)(i % 4) + 0.1 * (i / 4) * (i % 4);
    ts_tensor *y = mk(TS_SHAPE(3, 4), a, d, false);
    for (int form = 0; form < 3; form++) {
        for (int i = 0; i < 3; i++) {
            double acc = 0;
            for (int j = 0; j < 3; j++) {
                const double h = form == 0   ? 0.5
                                 : form == 1 ? xs[j + 1] - xs[j]
                                             : xx[i * 4 + j + 1] - xx[i * 4 + j];
                acc += h * (a[i * 4 + j] + a[i * 4 + j + 1]) / 2;
                rc[i * 3 + j] = acc;
            }
            r[i] = acc;
        }
        ts_tensor *x = form == 1   ? mk(TS_SHAPE(4), xs, d, false)
                       : form == 2 ? mk(TS_SHAPE(3, 4), xx, d, false)
                                   : NULL;
        CHECK(close_to(ts_trapezoid(y, x, 0.5, -1), TS_SHAPE(3), r, TOL));
        CHECK(close_to(ts_cumulative_trapezoid(y, x, 0.5, 1), TS_SHAPE(3, 3), rc, TOL));
    }
    /* along dim 0 with dx 2 */
    double r0[4];
    for (int j = 0; j < 4; j++) r0[j] = 2 * ((a[j] + a[4 + j]) / 2 + (a[4 + j] + a[8 + j]) / 2);
    CHECK(close_to(ts_trapezoid(y, NULL, 2, 0), TS_SHAPE(4), r0, TOL));
    /* an empty dim: zeros (trapezoid), an empty result (cumulative) */
    ts_tensor *e = ts_zeros(TS_SHAPE(2, 0), (ts_opts){.dtype = TS_F64, .device = d});
    const double z[2] = {0, 0};
    CHECK(close_to(ts_trapezoid(e, NULL, 1, 1), TS_SHAPE(2), z, 0));
    CHECK(close_to(ts_cumulative_trapezoid(e, NULL, 1, 1), TS_SHAPE(2, 0), z, 0));
}

/* ------------------------------------------------------------------ normal */
static void test_normal(ts_device d) {
    /* mean [n] of 3 and std [1] of 2 (broadcast): the sample's mean and std within 6 standard
     * errors (2 / sqrt(n) and 2 / sqrt(2 n)) */
    enum { N = 4096 };
    ts_tensor *m = ts_full(TS_SHAPE(N), 3, (ts_opts){.dtype = TS_F64, .device = d});
    ts_tensor *s = ts_full(TS_SHAPE(1), 2, (ts_opts){.dtype = TS_F64, .device = d});
    ts_manual_seed(7);
    ts_tensor *r = ts_normal(m, 0, s, 0);
    CHECK(r && ts_numel(r) == N && ts_dtype_of(r) == TS_F64);
    if (r) {
        const double mu = ts_item(ts_mean(r)), sd = ts_item(ts_std(r));
        CHECK(fabs(mu - 3) < 6 * 2 / sqrt(N));
        CHECK(fabs(sd - 2) < 6 * 2 / sqrt(2.0 * N));
    }
    /* the same seed: the same draw; a number std: mean + std z with z the same draw */
    ts_manual_seed(7);
    ts_tensor *r2 = ts_normal(m, 0, NULL, 2);
    CHECK(r && r2 && ts_item(ts_max(ts_abs(ts_sub(r, r2)))) == 0);
    /* a number mean beside a tensor std [2, 1] and broadcast shapes [2, 1] x [3] */
    ts_manual_seed(7);
    ts_tensor *r3 =
        ts_normal(NULL, 3, ts_full(TS_SHAPE(N), 2, (ts_opts){.dtype = TS_F64, .device = d}), 0);
    CHECK(r && r3 && ts_item(ts_max(ts_abs(ts_sub(r, r3)))) == 0);
    ts_tensor *rb =
        ts_normal(mk(TS_SHAPE(2, 1), a, d, false), 0, ts_abs(mk(TS_SHAPE(3), b + 8, d, false)), 0);
    CHECK(rb && ts_shape_of(rb).ndim == 2 && ts_size(rb, 0) == 2 && ts_size(rb, 1) == 3);
    ts_error_clear();
    /* refusals with PyTorch's words: a negative std, an integer mean (alone or beside a std) */
    CHECK(!ts_normal(m, 0, ts_neg(s), 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "normal: expects all elements of std >= 0.0");
    ts_tensor *im = ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I64, .device = d});
    CHECK(!ts_normal(im, 0, NULL, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "normal: expected a floating-point mean and std, got int64");
    CHECK(!ts_normal(im, 0, ts_full(TS_SHAPE(3), 1, (ts_opts){.dtype = TS_F64, .device = d}), 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "got int64");
    ts_error_clear();
    /* gradients: d/dmean = 1, d/dstd = z = (r - mean) / std */
    ts_tensor *mg = mk(TS_SHAPE(5), a, d, true);
    double sv[5];
    for (int i = 0; i < 5; i++) sv[i] = 0.5 + fabs(b[i]);
    ts_tensor *sg = mk(TS_SHAPE(5), sv, d, true);
    ts_tensor *y = ts_normal(mg, 0, sg, 0);
    CHECK(y && ts_backward(ts_sum(y)) == TS_OK);
    if (y) {
        double yv[5], z[5], ones[5] = {1, 1, 1, 1, 1};
        CHECK(rd(ts_detach(y), yv, 5));
        for (int i = 0; i < 5; i++) z[i] = (yv[i] - a[i]) / sv[i];
        CHECK(close_to(ts_grad(mg), TS_SHAPE(5), ones, 0));
        CHECK(close_to(ts_grad(sg), TS_SHAPE(5), z, TOL));
    }
}

/* ------------------------------------------------------------------ gradients */
typedef enum { G_DIST, G_DIST1, G_RENORM, G_TRAP_X, G_TRAP_DX, G_CUM_X, G_CUM_DX } gk;

static ts_tensor *g_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    switch ((gk)(intptr_t)ctx) {
    case G_DIST:
        return ts_dist(in[0], in[1], 2);
    case G_DIST1:
        return ts_dist(in[0], in[1], 3);
    case G_RENORM:
        return ts_renorm(ts_mul_scalar(in[0], 2), 2, 0, 1.1);
    case G_TRAP_X:
        return ts_trapezoid(in[0], in[1], 1, 1);
    case G_TRAP_DX:
        return ts_trapezoid(in[0], NULL, 0.7, 0);
    case G_CUM_X:
        return ts_cumulative_trapezoid(in[0], in[1], 1, -1);
    case G_CUM_DX:
        return ts_cumulative_trapezoid(in[0], NULL, 0.7, 0);
    }
    return NULL;
}

static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    struct {
        gk k;
        int n;
        ts_shape s[2];
    } cases[] = {
        {G_DIST, 2, {TS_SHAPE(3, 4), TS_SHAPE(4)}},
        {G_DIST1, 2, {TS_SHAPE(3, 4), TS_SHAPE(3, 4)}},
        {G_RENORM, 1, {TS_SHAPE(3, 4)}},
        {G_TRAP_X, 2, {TS_SHAPE(3, 4), TS_SHAPE(4)}},
        {G_TRAP_DX, 1, {TS_SHAPE(3, 4)}},
        {G_CUM_X, 2, {TS_SHAPE(3, 4), TS_SHAPE(3, 4)}},
        {G_CUM_DX, 1, {TS_SHAPE(3, 4)}},
    };
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            ts_scope_begin();
            ts_tensor *in[2];
            for (int k = 0; k < cases[c].n; k++)
                in[k] = mk(cases[c].s[k], k ? b : a, devs[di], true);
            const bool ok = ts_gradcheck(g_fn, (void *)(intptr_t)cases[c].k, in, cases[c].n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck case %d on %s%s", (int)c,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_scope_begin();
    const ts_device c = ts_cpu();
    ts_tensor *x = mk(TS_SHAPE(3, 4), a, c, false), *v = mk(TS_SHAPE(3), b, c, false);
    ts_tensor *i = ts_to_dtype(x, TS_I64);
    CHECK(!ts_dist(i, x, 2));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dist: expected a floating-point input");
    CHECK(!ts_dist(x, v, 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "dist");
    CHECK(!ts_renorm(v, 2, 0, 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "renorm: input needs at least 2 dimensions");
    CHECK(!ts_renorm(x, 0, 0, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "renorm: non-positive-norm not supported");
    CHECK(!ts_renorm(x, 2, 0, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "renorm: expected maxnorm to be >= 0");
    CHECK(!ts_renorm(x, 2, 2, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "renorm");
    CHECK(!ts_trapezoid(x, mk(TS_SHAPE(3), a, c, false), 1, -1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "trapezoid: There must be one `x` value for each sample point");
    CHECK(!ts_cumulative_trapezoid(x, NULL, 1, 3));
    CHECK_ERR_HAS(TS_ERR_ARG, "cumulative_trapezoid");
    CHECK(!ts_trapezoid(ts_full(TS_SHAPE(), 1, (ts_opts){0}), NULL, 1, -1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "trapezoid: y must have at least one dimension");
    CHECK(!ts_normal(x, 0, ts_neg(ts_abs(v)), 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "normal");
    CHECK(!ts_normal(v, 0, ts_full(TS_SHAPE(3), NAN, (ts_opts){.dtype = TS_F64}), 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "normal: expects all elements of std >= 0.0");
    CHECK(!ts_normal(v, 0, NULL, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "normal: expects std >= 0.0");
    CHECK(!ts_normal(i, 0, NULL, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "normal: expected a floating-point mean and std");
    CHECK(!ts_normal(NULL, 0, NULL, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "normal: mean or std must be a tensor");
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    fill(a, 256, 1), fill(b, 256, 2);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        test_norms(devs[di]);
        test_integration(devs[di]);
        test_normal(devs[di]);
        ts_scope_end();
        CHECK_OK();
    }
    test_grads();
    test_errors();
    return ts_test_finish();
}
