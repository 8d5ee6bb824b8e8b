/* shape.c — shape arithmetic: numel, strides, broadcasting, dim wrapping, shape/tensor strings. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

int64_t tsi_numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}

bool tsi_check_shape(const char *op, ts_shape s) {
    if (s.ndim < 0 || s.ndim > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: %d dims requested; at most %d are supported", op,
                             s.ndim, TS_MAX_DIMS),
               false;
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.dims[i] < 0)
            return tsi_error_set(TS_ERR_SHAPE, "%s: negative dimension %lld in shape %s", op,
                                 (long long)s.dims[i], tsi_shape_str(s)),
                   false;
        if (s.dims[i] && n > INT64_MAX / s.dims[i])
            return tsi_error_set(TS_ERR_SHAPE, "%s: shape %s has too many elements", op,
                                 tsi_shape_str(s)),
                   false;
        n *= s.dims[i];
    }
    return true;
}

void tsi_contiguous_strides(const ts_shape *s, int64_t *strides) {
    int64_t st = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i] > 1 ? s->dims[i] : 1;
    }
}

bool tsi_is_contiguous(const ts_tensor *t) {
    int64_t st = 1;
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        if (t->shape.dims[i] == 0) return true;
        if (t->shape.dims[i] != 1 && t->strides[i] != st) return false;
        st *= t->shape.dims[i];
    }
    return true;
}

bool tsi_broadcast_shapes(const char *op, ts_shape a, ts_shape b, ts_shape *out) {
    int n = a.ndim > b.ndim ? a.ndim : b.ndim;
    ts_shape r = {.ndim = n};
    for (int i = 0; i < n; i++) {
        int ia = a.ndim - n + i, ib = b.ndim - n + i;
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: shapes %s and %s cannot be broadcast together (size %lld vs "
                                 "%lld at dimension %d)",
                                 op, tsi_shape_str(a), tsi_shape_str(b), (long long)da,
                                 (long long)db, i),
                   false;
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

int tsi_wrap_dim(const char *op, int dim, int ndim) {
    int n = ndim > 0 ? ndim : 1; /* 0-dim tensors accept dims -1 and 0 */
    if (dim < -n || dim >= n) {
        tsi_error_set(
            TS_ERR_ARG,
            "%s: dimension out of range (expected to be in range of [%d, %d], but got %d)", op, -n,
            n - 1, dim);
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

const char *tsi_shape_str(ts_shape s) {
    char *b = tsi_fmt_buf();
    size_t len = 0;
    len += (size_t)snprintf(b + len, TSI_FMT_BUF_LEN - len, "[");
    int n = s.ndim < 0 ? 0 : s.ndim > TS_MAX_DIMS ? TS_MAX_DIMS : s.ndim;
    for (int i = 0; i < n && len < TSI_FMT_BUF_LEN; i++)
        len += (size_t)snprintf(b + len, TSI_FMT_BUF_LEN - len, i ? ", %lld" : "%lld",
                                (long long)s.dims[i]);
    if (len < TSI_FMT_BUF_LEN)
        snprintf(b + len, TSI_FMT_BUF_LEN - len, s.ndim > TS_MAX_DIMS ? ", ...]" : "]");
    return b;
}

const char *tsi_desc(const ts_tensor *t) {
    if (!t) return "NULL";
    char *b = tsi_fmt_buf();
    snprintf(b, TSI_FMT_BUF_LEN, "%s %s on %s", ts_dtype_name(t->dtype), tsi_shape_str(t->shape),
             ts_device_str(t->storage->device));
    return b;
}
