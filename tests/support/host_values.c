/* host_values.c — tensors to and from float64 host arrays (host_values.h). */
#include "host_values.h"

#include <stdlib.h>

#include "tessera/quant.h"

ts_tensor *ts_test_tensor_f64(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    ts_tensor *t = ts_to(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), d);
    return dt == TS_F64 ? t : ts_to_dtype(t, dt);
}

bool ts_test_read_f64(ts_tensor *t, double *out, int64_t max) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(ts_contiguous(t), ts_cpu()), TS_F64) : NULL;
    const int64_t n = h ? ts_numel(h) : 0;
    return h && n <= max &&
           (n == 0 || ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK);
}

bool ts_test_shape_is(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    const ts_shape g = ts_shape_of(t);
    bool ok = g.ndim == s.ndim;
    for (int k = 0; ok && k < s.ndim; k++) ok = g.dims[k] == s.dims[k];
    return ok;
}

void ts_test_fill_uniform(double *v, int64_t n, int seed) {
    uint32_t x = 2654435761u * (uint32_t)(seed + 1);
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (double)(x >> 8) / 8388608.0 - 1.0;
    }
}

ts_tensor *ts_test_quantized(ts_shape s, ts_dtype dt, const int64_t *vals, double scale,
                             int64_t zp) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f) return NULL;
    for (int64_t i = 0; i < n; i++) f[i] = (float)((double)(vals[i] - zp) * scale);
    ts_tensor *t = ts_quantize_per_tensor(ts_tensor_f32(s, f, (ts_opts){0}), scale, zp, dt);
    free(f);
    return t;
}
