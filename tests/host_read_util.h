/* host_read_util.h — what the op tests that check values on the host share: a tensor's values read
 * as doubles, and every element within a relative tolerance of a float64 reference. */
#ifndef TS_TEST_HOST_READ_UTIL_H
#define TS_TEST_HOST_READ_UTIL_H

#include <math.h>
#include <stdio.h>

#include "tessera.h"

/* t's n values as doubles in row-major order (any device, dtype and layout); false for NULL,
 * another number of elements or a failed copy. Temporaries go to the open scope. */
static inline bool rd(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(ts_contiguous(t), ts_cpu()), TS_F64) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK;
}

/* every one of t's n elements within tol * (1 + |ref|) of ref (at most 4096); the first that is
 * not is printed */
static inline bool near_all(ts_tensor *t, const double *ref, int64_t n, double tol) {
    static double got[4096];
    if (n > 4096 || !rd(t, got, n)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i])))) {
            fprintf(stderr, "  element %lld: %.17g vs %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

#endif /* TS_TEST_HOST_READ_UTIL_H */
