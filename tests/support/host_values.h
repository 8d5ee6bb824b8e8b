/* host_values.h — tensors to and from float64 host arrays, for tests that check values against
 * references computed on the host (tests/support/host_values.c). */
#ifndef TS_TEST_HOST_VALUES_H
#define TS_TEST_HOST_VALUES_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* a tensor of shape s, dtype dt, on d, from v (numel(s) doubles, rounded to dt once) */
ts_tensor *ts_test_tensor_f64(ts_shape s, const double *v, ts_dtype dt, ts_device d);
/* t's elements (any dtype, device and strides) as doubles in row-major order into out; false for
 * NULL, a failed copy or more than max elements */
bool ts_test_read_f64(ts_tensor *t, double *out, int64_t max);
/* n values in [-1, 1) from a linear congruential sequence seeded by seed (reproducible inputs) */
void ts_test_fill_uniform(double *v, int64_t n, int seed);
/* a per-tensor quantized tensor (dt qint8 / quint8 / qint32) holding the integers vals (numel(s)):
 * (vals - zp) * scale quantized back, exact for integers in dt's range */
ts_tensor *ts_test_quantized(ts_shape s, ts_dtype dt, const int64_t *vals, double scale,
                             int64_t zp);
/* t is not NULL and has shape s */
bool ts_test_shape_is(ts_tensor *t, ts_shape s);

#endif /* TS_TEST_HOST_VALUES_H */
