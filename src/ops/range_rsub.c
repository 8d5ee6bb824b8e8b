/* range_rsub.c — two small torch forms in C (issue 76): torch.range (the deprecated inclusive
 * arange: floor((end - start) / step) + 1 values start + i * step, in double for floating dtypes
 * and in int64 for integral ones, cast once) and torch.rsub (other - alpha * input, composed of
 * the differentiable binary ops). */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/internal.h"

ts_tensor *ts_range(double start, double end, double step, ts_opts o) {
    const char *op = "range";
    tsi_init();
    const ts_dtype dt = tsi_resolve_dtype(o.dtype);
    const bool fl = tsi_is_float(dt);
    if (!fl) start = trunc(start), end = trunc(end), step = trunc(step); /* PyTorch's int64 */
    if (!isfinite(start) || !isfinite(end)) {
        tsi_error_set(TS_ERR_ARG, "%s(): unsupported range: %g -> %g", op, start, end);
        return NULL;
    }
    if (step == 0 || isnan(step)) {
        tsi_error_set(TS_ERR_ARG, "%s(): step must be nonzero", op);
        return NULL;
    }
    if (!((step > 0 && end >= start) || (step < 0 && end <= start))) {
        tsi_error_set(TS_ERR_ARG, "%s(): upper bound and larger bound inconsistent with step sign",
                      op);
        return NULL;
    }
    const double nd = fl ? floor((end - start) / step) + 1 : 0;
    int64_t n;
    if (fl) {
        if (!(nd < 9.0e15)) {
            tsi_error_set(TS_ERR_ARG, "%s(): %g values are too many", op, nd);
            return NULL;
        }
        n = (int64_t)nd;
    } else {
        const int64_t s = (int64_t)start, e = (int64_t)end, st = (int64_t)step;
        const int64_t q = (e - s) / st, r = (e - s) % st; /* Python's floor division */
        n = (r != 0 && ((r < 0) != (st < 0)) ? q - 1 : q) + 1;
    }
    void *buf = malloc((size_t)(n > 0 ? n : 1) * 8);
    if (!buf) {
        tsi_error_set(TS_ERR_OOM, "%s(): out of host memory", op);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (fl) {
            const double p = (double)i * step; /* arange(n) * step + start, in double */
            ((double *)buf)[i] = p + start;
        } else {
            ((int64_t *)buf)[i] = i * (int64_t)step + (int64_t)start;
        }
    }
    ts_scope_begin();
    ts_tensor *v = ts_from_data(TS_SHAPE(n), fl ? TS_F64 : TS_I64, buf,
                                (ts_opts){.dtype = fl ? TS_F64 : TS_I64, .device = o.device});
    free(buf);
    ts_tensor *y = v ? ts_to_dtype(v, dt) : NULL;
    if (y && y == v) y = ts_clone(v);
    if (y && o.requires_grad && ts_set_requires_grad(y, true) != TS_OK) y = NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_rsub(ts_tensor *input, ts_tensor *other, double alpha) {
    const char *op = "rsub";
    tsi_init();
    if (!tsi_check_input(op, input, "input") || !tsi_check_input(op, other, "other")) return NULL;
    if (alpha == 1) return ts_sub(other, input);
    ts_scope_begin();
    ts_tensor *y = ts_sub(other, ts_mul_scalar(input, alpha));
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
