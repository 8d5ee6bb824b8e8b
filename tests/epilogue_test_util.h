/* epilogue_test_util.h — host values for the tests of the fused Linear paths
 * (test_linear_epilogue.c, test_linear_act_epilogue.c, test_mlp_fused.c): seeded uniform inputs,
 * results read back as float64, each dtype's unit roundoff for the bounds, and the comparisons. */
#ifndef TS_TEST_EPILOGUE_UTIL_H
#define TS_TEST_EPILOGUE_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline double uniform(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* a [shape] tensor of dt on dev with uniform values; NULL inside a scope on failure */
static inline ts_tensor *make(ts_shape s, ts_dtype dt, ts_device dev) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h) return NULL;
    for (int64_t i = 0; i < n; i++) h[i] = uniform();
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(s, h, (ts_opts){0}), dt), dev);
    free(h);
    return t;
}

/* t's values as float64 on the host, row-major (malloc'ed; NULL on failure) */
static inline double *host(ts_tensor *t) {
    if (!t) return NULL;
    const int64_t n = ts_numel(t);
    double *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    if (h && (!c || ts_copy_to_host(c, h, (size_t)n * sizeof *h) != TS_OK)) free(h), h = NULL;
    return h;
}

static inline double unit_roundoff(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return ldexp(1, -53);
    case TS_F16:
        return ldexp(1, -11);
    case TS_BF16:
        return ldexp(1, -8);
    default:
        return ldexp(1, -24);
    }
}

/* checks got against want[i] +- tol[i] elementwise, printing the first miss */
static inline bool within(const char *what, const double *got, const double *want,
                          const double *tol, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - want[i]) <= tol[i])) {
            printf("  %s[%lld]: %.17g, reference %.17g, bound %.3g\n", what, (long long)i, got[i],
                   want[i], tol[i]);
            return false;
        }
    }
    return true;
}

/* bit-identical values (== on the values; -0 and +0 alike; NaN where the other has NaN) */
static inline bool same(const double *a, const double *b, int64_t n) {
    if (!a || !b) return a == b;
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i])) return false;
    return true;
}

#endif /* TS_TEST_EPILOGUE_UTIL_H */
