/* autocast_util.h — what the autocast tests share: the configurations under test (cpu bf16, sim
 * bf16, sim f16), random inputs on the configuration's device, and host copies for comparisons. */
#ifndef TS_TEST_AUTOCAST_UTIL_H
#define TS_TEST_AUTOCAST_UTIL_H

#include <math.h>
#include <stdlib.h>

#include "ts_test.h"

static ts_device cfg_dev;    /* the device of the configuration under test */
static ts_dtype cfg_lower;   /* its region dtype */
static ts_dtype cfg_other;   /* the other half dtype */
static const char *cfg_name; /* "cpu bf16" ... */

static inline ts_tensor *randu(ts_shape s, ts_dtype dt, double lo, double hi) {
    ts_tensor *t = ts_rand(s, (ts_opts){.device = cfg_dev});
    t = ts_add_scalar(ts_mul_scalar(t, hi - lo), lo);
    return ts_to_dtype(t, dt);
}

/* n values of t as doubles (t on any device, any dtype) */
static inline void host(ts_tensor *t, double *out, int64_t n) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    CHECK(c && ts_numel(c) == n);
    if (c && ts_numel(c) == n) ts_copy_to_host(c, out, (size_t)n * sizeof *out);
    ts_scope_end();
}

/* max |a - b| over two tensors of n elements */
static inline double max_diff(ts_tensor *a, ts_tensor *b, int64_t n) {
    double *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y), m = 0;
    host(a, x, n);
    host(b, y, n);
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
    free(x);
    free(y);
    return m;
}

/* The configurations every autocast test runs in. */
typedef struct autocast_cfg {
    const char *name;
    ts_device dev;
    ts_dtype lower;
} autocast_cfg;
static const autocast_cfg autocast_cfgs[] = {
    {"cpu bf16", {TS_CPU, 0}, TS_BF16},
    {"sim bf16", {TS_SIM, 0}, TS_BF16},
    {"sim f16", {TS_SIM, 0}, TS_F16},
};
#define N_AUTOCAST_CFGS (sizeof autocast_cfgs / sizeof autocast_cfgs[0])

static inline void autocast_cfg_select(size_t c) {
    cfg_name = autocast_cfgs[c].name;
    cfg_dev = autocast_cfgs[c].dev;
    cfg_lower = autocast_cfgs[c].lower;
    cfg_other = cfg_lower == TS_BF16 ? TS_F16 : TS_BF16;
}

#endif /* TS_TEST_AUTOCAST_UTIL_H */
