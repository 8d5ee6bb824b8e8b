/* blocked_test_util.h — what the blocked layout's unit tests share (test_onnx_blocked_units.c,
 * test_onnx_blocked_rewrite.c): one seeded stream of uniform values, random tensors from it, and
 * the largest difference of two tensors in float64. */
#ifndef TS_TEST_BLOCKED_TEST_UTIL_H
#define TS_TEST_BLOCKED_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "tessera.h"

static uint64_t seed = 17;

static inline double uniform(double lo, double hi) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(seed >> 11) * 0x1p-53;
}

/* values uniform in [-1, 1), made in float32 then converted to dt */
static inline ts_tensor *rnd(ts_shape s, ts_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(-1, 1);
    ts_tensor *t = ts_from_data(s, TS_F32, v, (ts_opts){.dtype = TS_F32});
    free(v);
    return dt == TS_F32 ? t : ts_to_dtype(t, dt);
}

/* max |a - b| as float64; -1 when either is NULL or the shapes differ */
static inline double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b) || ts_ndim(a) != ts_ndim(b)) return -1;
    for (int d = 0; d < ts_ndim(a); d++)
        if (ts_size(a, d) != ts_size(b, d)) return -1;
    if (ts_numel(a) == 0) return 0;
    ts_tensor *x = ts_to_dtype(ts_to(a, ts_cpu()), TS_F64);
    ts_tensor *y = ts_to_dtype(ts_to(b, ts_cpu()), TS_F64);
    ts_tensor *d = x && y ? ts_max(ts_abs(ts_sub(x, y))) : NULL;
    return d ? ts_item(d) : -1;
}

#endif /* TS_TEST_BLOCKED_TEST_UTIL_H */
