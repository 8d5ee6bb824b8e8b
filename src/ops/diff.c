/* diff.c — torch.diff: the n-th forward difference along a dim (prepend / append joined first;
 * logical_xor for bool), composed from narrow and sub (every device, differentiable). */
#include "autograd/autograd.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ diff */
ts_tensor *ts_diff(ts_tensor *t, int64_t n, int dim, ts_tensor *prepend, ts_tensor *append) {
    const char *op = "diff";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if ((prepend && !tsi_check_input(op, prepend, "prepend")) ||
        (append && !tsi_check_input(op, append, "append")))
        return NULL;
    if (t->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: diff expects input to be at least one-dimensional",
                             op),
               NULL;
    if (n < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: order must be non-negative but got %lld", op,
                             (long long)n),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    ts_scope_begin();
    if (n == 0) return finish(ts_clone(t)); /* PyTorch: prepend and append are ignored then */
    ts_tensor *x = t;
    if (prepend || append) {
        ts_tensor *parts[3];
        int k = 0;
        if (prepend) parts[k++] = prepend;
        parts[k++] = t;
        if (append) parts[k++] = append;
        x = ts_cat(parts, k, d);
    }
    if (!x) return finish(NULL);
    const bool is_bool = ts_dtype_of(x) == TS_BOOL;
    int64_t len = ts_size(x, d) - 1;
    if (n > len + 1) n = len + 1;
    for (int64_t i = 0; i < n && x; i++, len--) {
        ts_tensor *hi = ts_narrow(x, d, 1, len), *lo = ts_narrow(x, d, 0, len);
        x = is_bool ? ts_logical_xor(hi, lo) : ts_sub(hi, lo);
    }
    return finish(x);
}
