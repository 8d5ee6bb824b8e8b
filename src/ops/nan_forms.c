/* nan_forms.c — the NaN-ignoring forms, composed from differentiable ops (every device, gradients
 * as PyTorch's): fmax / fmin (the other operand where one is NaN), nansum / nanmean (NaN counted
 * as absent). */
#include "autograd/autograd.h"
#include "ops/compose.h"

static bool check2(const char *op, ts_tensor *a, const char *na, ts_tensor *b, const char *nb) {
    tsi_init();
    bool ok = tsi_check_input(op, a, na);
    return tsi_check_input(op, b, nb) && ok;
}

/* ------------------------------------------------------------------ fmax, fmin */
static ts_tensor *fmaxmin(const char *op, ts_tensor *a, ts_tensor *b, bool max) {
    if (!check2(op, a, "input", b, "other")) return NULL;
    ts_scope_begin();
    ts_tensor *x = ts_detach(a), *y = ts_detach(b);
    /* a where a >= b (a <= b) or b is NaN, else b: NaN only when both are; PyTorch's gradient */
    ts_tensor *keep_a = ts_logical_or(max ? ts_ge(x, y) : ts_le(x, y), ts_ne(y, y));
    return finish(ts_where(keep_a, a, b));
}

ts_tensor *ts_fmax(ts_tensor *a, ts_tensor *b) { return fmaxmin("fmax", a, b, true); }
ts_tensor *ts_fmin(ts_tensor *a, ts_tensor *b) { return fmaxmin("fmin", a, b, false); }

/* ------------------------------------------------------------------ nansum, nanmean */
static ts_tensor *sum_over(ts_tensor *x, ts_dims dims, bool keepdim, int ndim) {
    if (dims.n == 0 && (!keepdim || ndim == 0)) return ts_sum(x);
    ts_dims every = {.n = ndim};
    for (int i = 0; i < ndim; i++) every.d[i] = i;
    return ts_sum_dims(x, dims.n ? dims : every, keepdim);
}

static ts_tensor *nan_zeroed(ts_tensor *t) {
    if (!tsi_is_float(t->dtype)) return t;
    ts_tensor *z = ts_scalar(0, (ts_opts){.dtype = t->dtype, .device = ts_device_of(t)});
    ts_tensor *d = ts_detach(t);
    return ts_where(ts_ne(d, d), z, t);
}

ts_tensor *ts_nansum(ts_tensor *t, ts_dims dims, bool keepdim) {
    const char *op = "nansum";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_scope_begin();
    return finish(sum_over(nan_zeroed(t), dims, keepdim, t->shape.ndim));
}

ts_tensor *ts_nanmean(ts_tensor *t, ts_dims dims, bool keepdim) {
    const char *op = "nanmean";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected input to have floating point or complex dtype but got "
                             "%s",
                             op, tsi_torch_scalar_name(t->dtype)),
               NULL;
    ts_scope_begin();
    ts_tensor *d = ts_detach(t);
    ts_tensor *count = sum_over(ts_eq(d, d), dims, keepdim, t->shape.ndim);
    return finish(ts_div(sum_over(nan_zeroed(t), dims, keepdim, t->shape.ndim), count));
}
