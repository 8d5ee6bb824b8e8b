/* host_values.h — the values of a tensor on the host, for the ops of issue 76 that count or run a
 * recursion there (ctc_loss.c, histogram.c): read in double or int64 (any device; a round trip for
 * device tensors), and results made from host arrays on a device in a dtype. Call inside a scope:
 * the intermediate tensors belong to it. */
#ifndef TS_OPS_HOST_VALUES_H
#define TS_OPS_HOST_VALUES_H

#include <stdlib.h>

#include "core/internal.h"
#include "tessera.h"

/* malloc'ed copy of t's values (detached, row-major) as dt (TS_F64 or TS_I64); NULL + error */
static inline void *tsi_host_values(const char *op, ts_tensor *t, ts_dtype dt) {
    const int64_t n = ts_numel(t);
    void *buf = malloc((size_t)(n > 0 ? n : 1) * 8);
    if (!buf) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    ts_tensor *c = ts_contiguous(ts_to(ts_to_dtype(ts_detach(t), dt), ts_cpu()));
    if (!c || (n && ts_copy_to_host(c, buf, (size_t)n * 8) != TS_OK)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* a tensor of shape s from host doubles, in dt on dev */
static inline ts_tensor *tsi_from_f64(ts_shape s, const double *v, ts_dtype dt, ts_device dev) {
    ts_tensor *t = ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64, .device = ts_cpu()});
    if (t && dt != TS_F64) t = ts_to_dtype(t, dt);
    return t ? ts_to(t, dev) : NULL;
}

#endif
